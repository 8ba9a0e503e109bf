import { OPERATOR_TEXT, TemplateSyntaxError, type Token } from "./lexer.js";

/*
 * A chat template's tokens as a tree, parsed by jinja2 3.1's grammar (jinja2/parser.py): its
 * precedence (or < and < not < comparisons, chained < + - < ~ < * / // % < ** (left to right) <
 * unary - + < filters and tests < calls, attributes, items), tuples with and without parentheses,
 * tests with an argument (`x is divisibleby 3`), `for ... recursive`, `set a, b = ...`, `ns.x =`,
 * macros, call and filter blocks, and transformers' {% generation %}. Every node has the line it
 * starts on. Nesting is counted as the parser recurses, so a deep template stops with an error.
 */

export type Expr =
  | { type: "Const"; line: number; value: string | number | bigint | boolean | null; float?: true }
  | { type: "Name"; line: number; name: string }
  | { type: "NSRef"; line: number; name: string; attr: string }
  | { type: "Tuple" | "List"; line: number; items: Expr[] }
  | { type: "Dict"; line: number; pairs: Pair[] }
  | { type: "Getattr"; line: number; node: Expr; attr: string }
  | { type: "Getitem"; line: number; node: Expr; arg: Expr }
  | { type: "Slice"; line: number; start: Expr | null; stop: Expr | null; step: Expr | null }
  | CallExpr
  | FilterExpr
  | ({ type: "Test"; node: Expr } & Invocation)
  | { type: "Not" | "Neg" | "Pos"; line: number; node: Expr }
  | { type: "BinOp"; line: number; op: string; left: Expr; right: Expr }
  | { type: "Concat"; line: number; nodes: Expr[] }
  | { type: "Compare"; line: number; expr: Expr; ops: Operand[] }
  | { type: "And" | "Or"; line: number; left: Expr; right: Expr }
  | { type: "CondExpr"; line: number; test: Expr; expr1: Expr; expr2: Expr | null };

/** a call's, filter's or test's name and arguments (`*args` and `**kwargs` as dynArgs, dynKwargs) */
export interface Invocation { line: number; name: string; args: Expr[]; kwargs: Keyword[]; dynArgs: Expr | null; dynKwargs: Expr | null }
export type CallExpr = { type: "Call"; node: Expr } & Omit<Invocation, "name">;
/** a filter; its node is null in {% filter %} and {% set x | f %} blocks, which filter their body */
export type FilterExpr = { type: "Filter"; node: Expr | null } & Invocation;
export interface Keyword { type: "Keyword"; line: number; key: string; value: Expr }
export interface Pair { type: "Pair"; line: number; key: Expr; value: Expr }
export interface Operand { type: "Operand"; line: number; op: string; expr: Expr }
export interface Param { type: "Param"; line: number; name: string; default: Expr | null }

export type Stmt =
  | { type: "Data"; line: number; text: string }
  | { type: "Print"; line: number; expr: Expr }
  | { type: "If"; line: number; test: Expr; body: Stmt[]; else: Stmt[] }
  | { type: "For"; line: number; target: Expr; iter: Expr; body: Stmt[]; else: Stmt[]; test: Expr | null; recursive: boolean }
  | { type: "Assign"; line: number; target: Expr; value: Expr }
  | { type: "AssignBlock"; line: number; target: Expr; filter: FilterExpr | null; body: Stmt[] }
  | { type: "Macro"; line: number; name: string; params: Param[]; body: Stmt[] }
  | { type: "CallBlock"; line: number; call: CallExpr; params: Param[]; body: Stmt[] }
  | { type: "FilterBlock"; line: number; filter: FilterExpr; body: Stmt[] }
  | { type: "With"; line: number; targets: Expr[]; values: Expr[]; body: Stmt[] }
  | { type: "Scope"; line: number; body: Stmt[] }
  | { type: "Break" | "Continue"; line: number };

const COMPARE_OPERATORS: Record<string, string> = { eq: "==", ne: "!=", lt: "<", lteq: "<=", gt: ">", gteq: ">=" };
const MATH1: Record<string, string> = { add: "+", sub: "-" };
const MATH2: Record<string, string> = { mul: "*", div: "/", floordiv: "//", mod: "%" };

/** jinja2's describe_token: a name as itself, an operator as its text, the rest in words */
function describe(type: string, value?: string): string {
  if (type === "name" && value !== undefined) return value;
  return OPERATOR_TEXT[type] ?? {
    block_begin: "begin of statement block", block_end: "end of statement block", variable_begin: "begin of print statement",
    variable_end: "end of print statement", data: "template data / text", eof: "end of template",
  }[type] ?? type;
}
/** a token expression ("name:endfor", "rparen") as jinja2 describes it */
const describeExpr = (expr: string): string => (expr.startsWith("name:") ? expr.slice(5) : describe(expr));
const repr = (s: string) => (s.includes("'") && !s.includes('"') ? `"${s}"` : `'${s}'`);

/** the tree of a template's tokens (from tokenize()); throws TemplateSyntaxError naming the line */
export function parse(tokens: readonly Token[], maxDepth: number): Stmt[] {
  return new Parser(tokens, maxDepth).template();
}

class Parser {
  private i = 0;
  private depth = 0;
  /** the tags whose ends are looked for (for the message at an unknown tag or the template's end) */
  private readonly endStack: string[][] = [];
  private readonly tagStack: string[] = [];

  constructor(private readonly tokens: readonly Token[], private readonly maxDepth: number) {}

  template(): Stmt[] {
    return this.subparse(null);
  }

  // ---- the token stream ----

  private get current(): Token { return this.tokens[this.i]!; }
  private look(): Token { return this.tokens[Math.min(this.i + 1, this.tokens.length - 1)]!; }
  private next(): Token {
    const t = this.current;
    if (t.type !== "eof") this.i++;
    return t;
  }
  private test(t: Token, expr: string): boolean {
    if (t.type === expr) return true;
    const colon = expr.indexOf(":");
    return colon > 0 && t.type === expr.slice(0, colon) && t.value === expr.slice(colon + 1);
  }
  private skipIf(expr: string): boolean {
    if (!this.test(this.current, expr)) return false;
    this.next();
    return true;
  }
  private expect(expr: string): Token {
    const t = this.current;
    if (this.test(t, expr)) return this.next();
    if (t.type === "eof") this.fail(`unexpected end of template, expected ${repr(describeExpr(expr))}.`);
    return this.fail(`expected token ${repr(describeExpr(expr))}, got ${repr(describe(t.type, t.value))}`);
  }
  private fail(message: string, line = this.current.line): never {
    throw new TemplateSyntaxError(message, line);
  }
  /** one level deeper (a nested expression or block); refused past maxDepth */
  private enter(): void {
    if (++this.depth > this.maxDepth) this.fail(`expressions nest more than ${this.maxDepth} deep; refusing it (a parse bomb?)`);
  }
  private leave(): void { this.depth--; }

  // ---- statements ----

  private subparse(endTokens: string[] | null): Stmt[] {
    const body: Stmt[] = [];
    if (endTokens) this.endStack.push(endTokens);
    this.enter();
    try {
      while (this.current.type !== "eof") {
        const t = this.current;
        if (t.type === "data") {
          body.push({ type: "Data", line: t.line, text: t.value });
          this.next();
        } else if (t.type === "variable_begin") {
          this.next();
          body.push({ type: "Print", line: t.line, expr: this.parseTuple({ withCondexpr: true }) });
          this.expect("variable_end");
        } else if (t.type === "block_begin") {
          this.next();
          if (endTokens?.some((e) => this.test(this.current, e))) return body;
          body.push(...this.statement());
          this.expect("block_end");
        } else {
          this.fail("internal parsing error");
        }
      }
    } finally {
      this.leave();
      if (endTokens) this.endStack.pop();
    }
    return body;
  }

  private statement(): Stmt[] {
    const t = this.current;
    if (t.type !== "name") this.fail("tag name expected");
    this.tagStack.push(t.value);
    let known = true;
    try {
      switch (t.value) {
        case "for": return [this.parseFor()];
        case "if": return [this.parseIf()];
        case "set": return [this.parseSet()];
        case "macro": return [this.parseMacro()];
        case "call": return [this.parseCallBlock()];
        case "filter": return [this.parseFilterBlock()];
        case "with": return [this.parseWith()];
        case "print": {
          this.next();
          const nodes: Stmt[] = [];
          while (this.current.type !== "block_end") {
            if (nodes.length) this.expect("comma");
            nodes.push({ type: "Print", line: t.line, expr: this.parseExpression() });
          }
          return nodes;
        }
        // transformers' AssistantTracker: renders its body
        case "generation":
        case "block": {
          this.next();
          if (t.value === "block") this.expect("name");
          return [{ type: "Scope", line: t.line, body: this.statements([`name:end${t.value}`], true) }];
        }
        // the loopcontrols extension, which transformers enables
        case "break":
        case "continue":
          this.next();
          return [{ type: t.value === "break" ? "Break" : "Continue", line: t.line }];
        case "extends": case "include": case "import": case "from": case "autoescape":
          return this.fail(`{% ${t.value} %} is not supported in a chat template (it has no other templates to read)`);
        default:
          this.tagStack.pop();
          known = false;
          return this.failUnknownTag(t.value, t.line);
      }
    } finally {
      if (known) this.tagStack.pop();
    }
  }

  /** jinja2's message for a tag it does not know, or for the template's end inside a block */
  private failUnknownTag(name: string | null, line: number, endStack = this.endStack): never {
    const expected = new Set(endStack.flat().map(describeExpr));
    const looking = endStack.length ? endStack.at(-1)!.map((e) => repr(describeExpr(e))).join(" or ") : undefined;
    const message = [name === null ? "Unexpected end of template." : `Encountered unknown tag ${repr(name)}.`];
    if (looking) {
      message.push(name !== null && expected.has(name)
        ? `You probably made a nesting mistake. Jinja is expecting this tag, but currently looking for ${looking}.`
        : `Jinja was looking for the following tags: ${looking}.`);
    }
    if (this.tagStack.length) message.push(`The innermost block that needs to be closed is ${repr(this.tagStack.at(-1)!)}.`);
    return this.fail(message.join(" "), line);
  }

  /** the statements up to one of the end tags; the current token is that tag's name, or the one after it with dropNeedle */
  private statements(endTokens: string[], dropNeedle = false): Stmt[] {
    this.skipIf("colon");
    this.expect("block_end");
    const body = this.subparse(endTokens);
    if (this.current.type === "eof") this.failUnknownTag(null, this.current.line, [...this.endStack, endTokens]);
    if (dropNeedle) this.next();
    return body;
  }

  private parseFor(): Stmt {
    const line = this.expect("name:for").line;
    const target = this.parseAssignTarget({});
    this.expect("name:in");
    const iter = this.parseTuple({ withCondexpr: false });
    const test = this.skipIf("name:if") ? this.parseExpression() : null;
    const recursive = this.skipIf("name:recursive");
    const body = this.statements(["name:endfor", "name:else"]);
    const orElse = this.next().value === "endfor" ? [] : this.statements(["name:endfor"], true);
    return { type: "For", line, target, iter, body, else: orElse, test, recursive };
  }

  /** an if (the current token is "if" or, for the branches after the first, "elif"): an elif is an if in the else branch */
  private parseIf(): Stmt {
    const line = this.next().line;
    const test = this.parseTuple({ withCondexpr: false });
    const body = this.statements(["name:elif", "name:else", "name:endif"]);
    const t = this.next();
    if (this.test(t, "name:elif")) {
      this.i--;
      this.enter();
      try {
        return { type: "If", line, test, body, else: [this.parseIf()] };
      } finally {
        this.leave();
      }
    }
    return { type: "If", line, test, body, else: this.test(t, "name:else") ? this.statements(["name:endif"], true) : [] };
  }

  private parseSet(): Stmt {
    const line = this.next().line;
    const target = this.parseAssignTarget({ withNamespace: true });
    if (this.skipIf("assign")) return { type: "Assign", line, target, value: this.parseTuple({}) };
    const filter = this.parseFilter(null) as FilterExpr | null;
    return { type: "AssignBlock", line, target, filter, body: this.statements(["name:endset"], true) };
  }

  private parseWith(): Stmt {
    const line = this.next().line;
    const targets: Expr[] = [], values: Expr[] = [];
    while (this.current.type !== "block_end") {
      if (targets.length) this.expect("comma");
      targets.push(this.parseAssignTarget({}));
      this.expect("assign");
      values.push(this.parseExpression());
    }
    return { type: "With", line, targets, values, body: this.statements(["name:endwith"], true) };
  }

  private parseSignature(): Param[] {
    const params: Param[] = [];
    this.expect("lparen");
    while (this.current.type !== "rparen") {
      if (params.length) this.expect("comma");
      const name = this.expect("name");
      let fallback: Expr | null = null;
      if (this.skipIf("assign")) fallback = this.parseExpression();
      else if (params.some((p) => p.default)) this.fail("non-default argument follows default argument");
      params.push({ type: "Param", line: name.line, name: name.value, default: fallback });
    }
    this.expect("rparen");
    return params;
  }

  private parseMacro(): Stmt {
    const line = this.next().line;
    const name = this.expect("name").value;
    const params = this.parseSignature();
    return { type: "Macro", line, name, params, body: this.statements(["name:endmacro"], true) };
  }

  private parseCallBlock(): Stmt {
    const line = this.next().line;
    const params = this.current.type === "lparen" ? this.parseSignature() : [];
    const call = this.parseExpression();
    if (call.type !== "Call") this.fail("expected call", line);
    return { type: "CallBlock", line, call, params, body: this.statements(["name:endcall"], true) };
  }

  private parseFilterBlock(): Stmt {
    const line = this.next().line;
    const filter = this.parseFilter(null, true) as FilterExpr;
    return { type: "FilterBlock", line, filter, body: this.statements(["name:endfilter"], true) };
  }

  private parseAssignTarget(options: { withNamespace?: boolean }): Expr {
    const target = this.parseTuple({ simplified: true, withNamespace: options.withNamespace });
    const assignable = (e: Expr): boolean => e.type === "Name" || e.type === "NSRef" || (e.type === "Tuple" && e.items.every(assignable));
    if (!assignable(target) || (target.type === "Name" && ["true", "false", "none", "True", "False", "None"].includes(target.name))) {
      this.fail(`can't assign to ${repr(target.type === "Name" ? "const" : target.type.toLowerCase())}`, target.line);
    }
    return target;
  }

  // ---- expressions ----

  private parseExpression(withCondexpr = true): Expr {
    this.enter();
    try {
      return withCondexpr ? this.parseCondexpr() : this.parseOr();
    } finally {
      this.leave();
    }
  }

  private parseCondexpr(): Expr {
    let line = this.current.line;
    let expr1 = this.parseOr();
    while (this.skipIf("name:if")) {
      const test = this.parseOr();
      const expr2 = this.skipIf("name:else") ? this.parseExpression() : null;
      expr1 = { type: "CondExpr", line, test, expr1, expr2 };
      line = this.current.line;
    }
    return expr1;
  }

  private parseOr(): Expr {
    let line = this.current.line;
    let left = this.parseAnd();
    while (this.skipIf("name:or")) {
      left = { type: "Or", line, left, right: this.parseAnd() };
      line = this.current.line;
    }
    return left;
  }

  private parseAnd(): Expr {
    let line = this.current.line;
    let left = this.parseNot();
    while (this.skipIf("name:and")) {
      left = { type: "And", line, left, right: this.parseNot() };
      line = this.current.line;
    }
    return left;
  }

  private parseNot(): Expr {
    if (!this.test(this.current, "name:not")) return this.parseCompare();
    const line = this.next().line;
    this.enter();
    try {
      return { type: "Not", line, node: this.parseNot() };
    } finally {
      this.leave();
    }
  }

  private parseCompare(): Expr {
    const line = this.current.line;
    const expr = this.parseMath1();
    const ops: Operand[] = [];
    for (;;) {
      const t = this.current;
      if (COMPARE_OPERATORS[t.type]) {
        this.next();
        ops.push({ type: "Operand", line: t.line, op: COMPARE_OPERATORS[t.type]!, expr: this.parseMath1() });
      } else if (this.skipIf("name:in")) {
        ops.push({ type: "Operand", line: t.line, op: "in", expr: this.parseMath1() });
      } else if (this.test(t, "name:not") && this.test(this.look(), "name:in")) {
        this.next();
        this.next();
        ops.push({ type: "Operand", line: t.line, op: "not in", expr: this.parseMath1() });
      } else break;
    }
    return ops.length ? { type: "Compare", line, expr, ops } : expr;
  }

  private parseMath1(): Expr {
    let line = this.current.line;
    let left = this.parseConcat();
    while (MATH1[this.current.type]) {
      const op = MATH1[this.next().type]!;
      left = { type: "BinOp", line, op, left, right: this.parseConcat() };
      line = this.current.line;
    }
    return left;
  }

  private parseConcat(): Expr {
    const line = this.current.line;
    const nodes = [this.parseMath2()];
    while (this.skipIf("tilde")) nodes.push(this.parseMath2());
    return nodes.length === 1 ? nodes[0]! : { type: "Concat", line, nodes };
  }

  private parseMath2(): Expr {
    let line = this.current.line;
    let left = this.parsePow();
    while (MATH2[this.current.type]) {
      const op = MATH2[this.next().type]!;
      left = { type: "BinOp", line, op, left, right: this.parsePow() };
      line = this.current.line;
    }
    return left;
  }

  private parsePow(): Expr {
    let line = this.current.line;
    let left = this.parseUnary();
    while (this.skipIf("pow")) {
      left = { type: "BinOp", line, op: "**", left, right: this.parseUnary() };
      line = this.current.line;
    }
    return left;
  }

  /** unary - and + bind tighter than filters and tests (`-1|abs` is `(-1)|abs`); their operand takes no filter */
  private parseUnary(withFilter = true): Expr {
    const t = this.current;
    let node: Expr;
    if (t.type === "sub" || t.type === "add") {
      this.next();
      this.enter();
      try {
        node = { type: t.type === "sub" ? "Neg" : "Pos", line: t.line, node: this.parseUnary(false) };
      } finally {
        this.leave();
      }
    } else node = this.parsePrimary();
    node = this.parsePostfix(node);
    return withFilter ? this.parseFilterExpr(node) : node;
  }

  private parsePrimary(withNamespace = false): Expr {
    const t = this.current;
    const line = t.line;
    switch (t.type) {
      case "name": {
        this.next();
        if (["true", "false", "True", "False"].includes(t.value)) return { type: "Const", line, value: t.value === "true" || t.value === "True" };
        if (t.value === "none" || t.value === "None") return { type: "Const", line, value: null };
        if (withNamespace && this.current.type === "dot") {
          this.next();
          return { type: "NSRef", line, name: t.value, attr: this.expect("name").value };
        }
        return { type: "Name", line, name: t.value };
      }
      case "string": {
        // adjacent string literals join, as in Python
        let value = "";
        while (this.current.type === "string") value += this.next().value;
        return { type: "Const", line, value };
      }
      case "integer":
        this.next();
        return { type: "Const", line, value: t.number! };
      case "float":
        this.next();
        return { type: "Const", line, value: Number(t.number!), float: true };
      case "lparen": {
        this.next();
        const node = this.parseTuple({ explicitParentheses: true });
        this.expect("rparen");
        return node;
      }
      case "lbracket": return { type: "List", line, items: this.parseItems("lbracket", "rbracket", () => this.parseExpression()) };
      case "lbrace":
        return {
          type: "Dict", line, pairs: this.parseItems("lbrace", "rbrace", () => {
            const key = this.parseExpression();
            this.expect("colon");
            return { type: "Pair", line: key.line, key, value: this.parseExpression() };
          }),
        };
      default:
        return this.fail(`unexpected ${repr(describe(t.type, t.value))}`);
    }
  }

  /** [a, b, ] and {k: v, }: items up to the closer, a trailing comma allowed */
  private parseItems<T>(open: string, close: string, item: () => T): T[] {
    this.expect(open);
    const items: T[] = [];
    while (this.current.type !== close) {
      if (items.length) this.expect("comma");
      if (this.current.type === close) break;
      items.push(item());
    }
    this.expect(close);
    return items;
  }

  /**
   * An expression, or a tuple of them when commas separate them: `a, b` (a trailing comma makes
   * one: `(1,)`); `()` only inside parentheses. simplified: names only (assignment targets).
   */
  private parseTuple(options: { simplified?: boolean; withCondexpr?: boolean; explicitParentheses?: boolean; withNamespace?: boolean | undefined }): Expr {
    let line = this.current.line;
    const parseOne = () => (options.simplified ? this.parsePrimary(options.withNamespace) : this.parseExpression(options.withCondexpr ?? true));
    const items: Expr[] = [];
    let isTuple = false;
    for (;;) {
      if (items.length) this.expect("comma");
      if (this.isTupleEnd()) break;
      items.push(parseOne());
      if (this.current.type === "comma") isTuple = true;
      else break;
      line = this.current.line;
    }
    if (!isTuple) {
      if (items.length) return items[0]!;
      if (!options.explicitParentheses) this.fail(`Expected an expression, got ${repr(describe(this.current.type, this.current.value))}`);
    }
    return { type: "Tuple", line, items };
  }

  /**
   * Where a tuple may end after a comma. jinja2 also passes `in` (after a for loop's target) and
   * `recursive` as ends, but its check never matches them (test_any is handed the tuple unpacked
   * one level too few), so `{% for x, in xs %}` is an error there, and here.
   */
  private isTupleEnd(): boolean {
    const t = this.current.type;
    return t === "variable_end" || t === "block_end" || t === "rparen";
  }

  private parsePostfix(node: Expr): Expr {
    for (;;) {
      const type = this.current.type;
      if (type === "dot" || type === "lbracket") node = this.parseSubscript(node);
      else if (type === "lparen") node = this.parseCall(node);
      else return node;
    }
  }

  private parseFilterExpr(node: Expr): Expr {
    for (;;) {
      const t = this.current;
      if (t.type === "pipe") node = this.parseFilter(node)!;
      else if (this.test(t, "name:is")) node = this.parseTest(node);
      else if (t.type === "lparen") node = this.parseCall(node);
      else return node;
    }
  }

  private parseSubscript(node: Expr): Expr {
    const t = this.next();
    if (t.type === "dot") {
      const attr = this.next();
      if (attr.type === "name") return { type: "Getattr", line: t.line, node, attr: attr.value };
      if (attr.type !== "integer") this.fail("expected name or number", attr.line);
      return { type: "Getitem", line: t.line, node, arg: { type: "Const", line: attr.line, value: attr.number! } };
    }
    const args: Expr[] = [];
    while (this.current.type !== "rbracket") {
      if (args.length) this.expect("comma");
      args.push(this.parseSubscribed());
    }
    this.expect("rbracket");
    return { type: "Getitem", line: t.line, node, arg: args.length === 1 ? args[0]! : { type: "Tuple", line: t.line, items: args } };
  }

  /** an index, or a slice a:b:c with any part left out */
  private parseSubscribed(): Expr {
    const line = this.current.line;
    let start: Expr | null = null;
    if (this.current.type === "colon") this.next();
    else {
      start = this.parseExpression();
      if (this.current.type !== "colon") return start;
      this.next();
    }
    const ends = () => this.current.type === "rbracket" || this.current.type === "comma";
    const stop = this.current.type === "colon" || ends() ? null : this.parseExpression();
    let step: Expr | null = null;
    if (this.skipIf("colon") && !ends()) step = this.parseExpression();
    return { type: "Slice", line, start, stop, step };
  }

  private parseCallArgs(): Omit<Invocation, "name" | "line"> {
    const open = this.expect("lparen");
    const args: Expr[] = [], kwargs: Keyword[] = [];
    let dynArgs: Expr | null = null, dynKwargs: Expr | null = null;
    const ensure = (ok: boolean) => { if (!ok) this.fail("invalid syntax for function call expression", open.line); };
    let requireComma = false;
    while (this.current.type !== "rparen") {
      if (requireComma) {
        this.expect("comma");
        // a trailing comma
        if (this.current.type === "rparen") break;
      }
      if (this.current.type === "mul") {
        ensure(dynArgs === null && dynKwargs === null);
        this.next();
        dynArgs = this.parseExpression();
      } else if (this.current.type === "pow") {
        ensure(dynKwargs === null);
        this.next();
        dynKwargs = this.parseExpression();
      } else if (this.current.type === "name" && this.look().type === "assign") {
        ensure(dynKwargs === null);
        const key = this.next();
        this.next();
        const value = this.parseExpression();
        kwargs.push({ type: "Keyword", line: key.line, key: key.value, value });
      } else {
        ensure(dynArgs === null && dynKwargs === null && kwargs.length === 0);
        args.push(this.parseExpression());
      }
      requireComma = true;
    }
    this.expect("rparen");
    return { args, kwargs, dynArgs, dynKwargs };
  }

  private parseCall(node: Expr): Expr {
    const line = this.current.line;
    return { type: "Call", line, node, ...this.parseCallArgs() };
  }

  /** a filter's name: dotted names are joined (jinja2 allows `|a.b`) */
  private dottedName(): string {
    let name = this.expect("name").value;
    while (this.skipIf("dot")) name += `.${this.expect("name").value}`;
    return name;
  }

  private parseFilter(node: Expr | null, startInline = false): Expr | null {
    while (this.current.type === "pipe" || startInline) {
      if (!startInline) this.next();
      const line = this.current.line;
      const name = this.dottedName();
      const call = this.current.type === "lparen" ? this.parseCallArgs() : { args: [], kwargs: [], dynArgs: null, dynKwargs: null };
      node = { type: "Filter", line, node, name, ...call };
      startInline = false;
    }
    return node;
  }

  /** `x is name`, `x is not name`, `x is name(args)`, `x is name arg` (one argument: a primary with its postfix) */
  private parseTest(node: Expr): Expr {
    const line = this.next().line;
    const negated = this.skipIf("name:not");
    const name = this.dottedName();
    let call: Omit<Invocation, "name" | "line"> = { args: [], kwargs: [], dynArgs: null, dynKwargs: null };
    const t = this.current;
    if (t.type === "lparen") call = this.parseCallArgs();
    else if (["name", "string", "integer", "float", "lbracket", "lbrace"].includes(t.type) && !["name:else", "name:or", "name:and"].some((e) => this.test(t, e))) {
      if (this.test(t, "name:is")) this.fail("You cannot chain multiple tests with is");
      call.args = [this.parsePostfix(this.parsePrimary())];
    }
    const test: Expr = { type: "Test", line, node, name, ...call };
    return negated ? { type: "Not", line, node: test } : test;
  }
}
