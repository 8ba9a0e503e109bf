import { applyFilter, applyTest, escapeHtml, groupMembers, hasFilter, hasTest, noFilter, useAdd, type FilterContext } from "./filters.js";
import { bytesMethod, dictMethod, listMethod, percentFormat, strMethod, useEquals } from "./methods.js";
import { TemplateSyntaxError } from "./lexer.js";
import type { CallExpr, Expr, FilterExpr, Invocation, Param, Stmt } from "./parser.js";
import {
  Bytes, Callable, Float, Markup, PyObject, TemplateRuntimeError, Undefined, checkDefined, compare, contains, dictEntries, dictGet, dictSet, equals, isKey, fail, isDict, isNumber, isStr,
  exactInt, isTuple, iterate, num, pyInt, pyRange, rangeOf, str, strOf, truthy, tuple, typeName, type Key, type Value,
} from "./values.js";

/*
 * Renders a chat template's parse tree (parser.ts) as jinja2 renders it, set up as
 * transformers sets it up (no autoescape, ImmutableSandboxedEnvironment): jinja2's scoping (each
 * loop iteration a fresh scope, macros see the scope they were defined in), attribute and item
 * lookup, Undefined, operators on Python's types. Every node checks the clock and every string or
 * list built checks its size, so a runaway template stops with an error; an error names the line
 * of the innermost node that failed.
 */

/** what bounds one render */
export interface RenderBudget {
  /** performance.now() past which rendering stops */
  deadline: number;
  maxOutputChars: number;
  maxItems: number;
  /** what the input brings past those bounds (a long chat's messages and their text are not a runaway template's) */
  input?: { items: number; chars: number };
}

/** a render stopped by its budget (the message says which bound) */
export class RenderLimitError extends Error {}

/** how deep macro calls (and recursive loops) may nest (jinja2 stops at Python's recursion limit, a few hundred calls deep) */
const MAX_MACRO_DEPTH = 250;

/** {% break %} / {% continue %}, carrying what the loop body wrote before it (jinja2 keeps that output) */
class LoopSignal {
  constructor(readonly breaks: boolean, public output = "") {}
}

/** a frame of variables; lookups walk out to the enclosing frames */
class Scope {
  readonly vars = new Map<string, Value>();
  constructor(readonly parent?: Scope) {}
  lookup(name: string): Value | undefined {
    for (let s: Scope | undefined = this; s; s = s.parent) {
      const v = s.vars.get(name);
      if (v !== undefined) return v;
    }
    return undefined;
  }
}

/** jinja2's object_type_repr: how an Undefined's message names the object it was looked up on */
function objectTypeRepr(v: Value): string {
  if (v === null) return "None";
  if (v instanceof Markup) return "markupsafe.Markup object";
  if (v instanceof PyObject) return `${v.kind === "LoopContext" ? "jinja2.runtime.LoopContext" : v.kind === "Namespace" ? "jinja2.utils.Namespace" : v.kind} object`;
  if (v instanceof Callable && v.macro) return "jinja2.runtime.Macro object";
  return `${typeName(v)} object`;
}
const noAttribute = (obj: Value, name: string) => new Undefined(`'${objectTypeRepr(obj)}' has no attribute '${name}'`);
const noElement = (obj: Value, key: Value) => new Undefined(`${objectTypeRepr(obj)} has no element ${isStr(key) ? `'${strOf(key)}'` : str(key)}`);

/** whether a macro's body reads a name (varargs, kwargs, caller are bound only when the body reads them, as jinja2 does) */
function readsName(node: unknown, name: string): boolean {
  if (!node || typeof node !== "object") return false;
  if ((node as Expr).type === "Name" && (node as { name: string }).name === name) return true;
  return Object.values(node).some((c) => readsName(c, name));
}

/**
 * jinja2's compile-time check of the filters and tests a template names: an unknown one is a
 * TemplateAssertionError when the template is compiled, even on a path never taken, except inside
 * an if statement or an inline if-expression (jinja2's "soft" frames), where it fails only when
 * reached. A loop's body and filter, a macro, a call block's body, a {% filter %} or {% set %}
 * block start a frame of their own, which is not soft again.
 */
export function checkFiltersAndTests(program: readonly Stmt[]): void {
  const expr = (node: unknown, soft: boolean): void => {
    if (!node || typeof node !== "object") return;
    if (Array.isArray(node)) { for (const n of node) expr(n, soft); return; }
    const e = node as Expr;
    if (e.type === "CondExpr") soft = true;
    if (!soft && (e.type === "Filter" || e.type === "Test")) {
      const known = e.type === "Filter" ? hasFilter(e.name) : hasTest(e.name);
      if (!known) throw new TemplateSyntaxError(`No ${e.type === "Filter" ? "filter" : "test"} named '${e.name}'.`, e.line);
    }
    for (const child of Object.values(node)) if (child && typeof child === "object") expr(child, soft);
  };
  const params = (ps: readonly Param[]) => { for (const p of ps) expr(p.default, false); };
  const block = (statements: readonly Stmt[], soft: boolean): void => {
    for (const node of statements) {
      switch (node.type) {
        case "Data": case "Break": case "Continue": break;
        case "Print": expr(node.expr, soft); break;
        case "If": expr(node.test, true); block(node.body, true); block(node.else, true); break;
        case "For": expr(node.iter, soft); expr(node.test, false); block(node.body, false); block(node.else, false); break;
        case "Assign": expr(node.value, soft); break;
        case "AssignBlock": expr(node.filter, false); block(node.body, false); break;
        case "Macro": params(node.params); block(node.body, false); break;
        case "CallBlock": expr(node.call, soft); params(node.params); block(node.body, false); break;
        case "FilterBlock": expr(node.filter, false); block(node.body, false); break;
        case "With": expr(node.values, soft); block(node.body, false); break;
        case "Scope": block(node.body, false); break;
      }
    }
  };
  block(program, false);
}

/** a for loop as its `loop` variable and a recursive call (`loop(children)`) see it */
interface LoopRun {
  readonly node: Extract<Stmt, { type: "For" }>;
  readonly scope: Scope;
  readonly depth: number;
}

export class Interpreter implements FilterContext {
  private steps = 0;
  private macroDepth = 0;

  private readonly maxChars: number;
  private readonly maxItems: number;

  constructor(private readonly budget: RenderBudget) {
    this.maxChars = budget.maxOutputChars + (budget.input?.chars ?? 0);
    this.maxItems = budget.maxItems + (budget.input?.items ?? 0);
    useEquals(equals);
    useAdd((a, b) => this.binary("+", a, b));
  }

  /** the template's output; `globals` are the variables it is rendered with */
  render(program: readonly Stmt[], globals: Map<string, Value>): string {
    const root = new Scope();
    for (const [k, v] of globals) root.vars.set(k, v);
    return this.block(program, new Scope(root));
  }

  // ---- size and time ----

  check(chars: number): void {
    if (chars > this.maxChars) {
      const beyond = this.budget.input?.chars ? ` beyond the ${this.budget.input.chars} its messages bring` : "";
      throw new RenderLimitError(`rendering produced more than ${this.budget.maxOutputChars} characters${beyond}; the template may be runaway`);
    }
  }

  private checkItems(n: number): void {
    if (n > this.maxItems) {
      const beyond = this.budget.input?.items ? ` beyond the ${this.budget.input.items} messages it was given` : "";
      throw new RenderLimitError(`rendering produced a list of ${n} items, more than the ${this.budget.maxItems} allowed${beyond}; the template may be runaway`);
    }
  }

  private tick(): void {
    this.steps++;
    if ((this.steps & 63) === 0 && performance.now() > this.budget.deadline) {
      throw new RenderLimitError(`rendering took too long (stopped after ${this.steps} steps); the template may loop without end`);
    }
  }

  /** an error of the template's (not yet placed) placed at this node's line (a try/catch at each node, not a closure: a render runs millions of nodes) */
  private static place(e: unknown, line: number): unknown {
    if (e instanceof TemplateRuntimeError && e.line === undefined) e.line = line;
    return e;
  }

  // ---- statements ----

  private block(statements: readonly Stmt[], scope: Scope): string {
    let out = "";
    try {
      for (const node of statements) {
        out += this.statement(node, scope);
        this.check(out.length);
      }
    } catch (e) {
      if (e instanceof LoopSignal) e.output = out + e.output;
      throw e;
    }
    return out;
  }

  private statement(node: Stmt, scope: Scope): string {
    this.tick();
    try {
      return this.run(node, scope);
    } catch (e) {
      throw Interpreter.place(e, node.line);
    }
  }

  private run(node: Stmt, scope: Scope): string {
    switch (node.type) {
      case "Data": return node.text;
      case "Print": return str(this.expr(node.expr, scope));
      case "If": return this.block(truthy(this.expr(node.test, scope)) ? node.body : node.else, scope);
      case "For": return this.for({ node, scope, depth: 0 }, this.expr(node.iter, scope));
      case "Assign": this.assign(node.target, this.expr(node.value, scope), scope); return "";
      case "AssignBlock": {
        // the body is a scope of its own (jinja2's inner frame): what it sets stays inside
        const body = this.block(node.body, new Scope(scope));
        this.assign(node.target, node.filter ? this.applyBlockFilters(node.filter, body, scope) : body, scope);
        return "";
      }
      case "Macro": scope.vars.set(node.name, this.macro(node.name, node.params, node.body, scope)); return "";
      case "CallBlock": return this.callBlock(node.call, node.params, node.body, scope);
      case "FilterBlock": {
        // jinja2 writes the filter's result as it is and joins the output with "".join: a result that is not a str fails the render
        const v = this.applyBlockFilters(node.filter, this.block(node.body, new Scope(scope)), scope);
        return isStr(v) ? strOf(v) : fail(`a {% filter %} block's filter gave ${typeName(v)}, not a str (jinja2: sequence item: expected str instance, ${typeName(v)} found)`);
      }
      case "With": {
        const inner = new Scope(scope);
        node.targets.forEach((t, i) => this.assign(t, this.expr(node.values[i]!, scope), inner));
        return this.block(node.body, inner);
      }
      case "Scope": return this.block(node.body, new Scope(scope));
      case "Break": throw new LoopSignal(true);
      case "Continue": throw new LoopSignal(false);
    }
  }

  /** binds a name, a namespace's attribute (`ns.x`), or unpacks into a tuple of targets */
  private assign(target: Expr, value: Value, scope: Scope): void {
    if (target.type === "Name") {
      scope.vars.set(target.name, value);
      return;
    }
    if (target.type === "NSRef") {
      const ns = scope.lookup(target.name);
      if (!(ns instanceof PyObject && ns.assignable)) fail("cannot assign attribute on non-namespace object");
      (ns as PyObject).attrs.set(target.attr, value);
      return;
    }
    if (target.type !== "Tuple") fail(`cannot assign to ${target.type}`);
    const names = (target as { items: Expr[] }).items;
    const items = iterate(value);
    if (items.length < names.length) fail(`not enough values to unpack (expected ${names.length}, got ${items.length})`);
    if (items.length > names.length) fail(`too many values to unpack (expected ${names.length})`);
    names.forEach((n, i) => this.assign(n, items[i]!, scope));
  }

  /** a for loop over `source` (at `run.depth` inside a recursive loop: `loop(children)` renders it again one deeper) */
  private for(run: LoopRun, source: Value): string {
    const { node, scope } = run;
    let items = iterate(source);
    if (node.test) {
      const test = node.test;
      items = items.filter((item) => {
        const s = new Scope(scope);
        this.assign(node.target, item, s);
        return truthy(this.expr(test, s));
      });
    }
    let out = "";
    let changedLast: Value[] | undefined;
    // jinja2 renders the else block unless an iteration ran to the end of the body: one ended by break or continue does not count
    let completed = false;
    const recurse = node.recursive ? new Callable("loop", ([children = null]) => {
      if (++this.macroDepth > MAX_MACRO_DEPTH) fail(`recursive loops nest more than ${MAX_MACRO_DEPTH} deep`);
      try {
        return this.for({ ...run, depth: run.depth + 1 }, children);
      } finally {
        this.macroDepth--;
      }
    }) : undefined;
    // one LoopContext for the whole loop, advanced each iteration, as jinja2 keeps it (a `loop` kept in a namespace reads as the last
    // iteration left it); building one per iteration made a long chat's render allocate a map and two callables per message
    const n = items.length;
    let at = 0;
    const noPrevious = new Undefined("there is no previous item"), noNext = new Undefined("there is no next item");
    const attrs = new Map<string, Value>([
      ["index", 1], ["index0", 0], ["revindex", n], ["revindex0", n - 1], ["first", true], ["last", n === 1], ["length", n],
      ["depth", run.depth + 1], ["depth0", run.depth], ["previtem", noPrevious], ["nextitem", n > 1 ? items[1]! : noNext],
      ["cycle", new Callable("cycle", (args) => (args.length ? args[at % args.length]! : fail("no items for cycling given")))],
      ["changed", new Callable("changed", (args) => {
        if (changedLast && equals(tuple(changedLast), tuple(args))) return false;
        changedLast = args;
        return true;
      })],
    ]);
    const loop = new PyObject("LoopContext", attrs, false, () => `<LoopContext ${at + 1}/${n}>`, recurse);
    for (let i = 0; i < n; i++) {
      at = i;
      this.tick();
      const s = new Scope(scope);
      if (i > 0) {
        attrs.set("index", i + 1).set("index0", i).set("revindex", n - i).set("revindex0", n - i - 1).set("first", false).set("last", i === n - 1)
          .set("previtem", items[i - 1]!).set("nextitem", i < n - 1 ? items[i + 1]! : noNext);
      }
      s.vars.set("loop", loop);
      this.assign(node.target, items[i]!, s);
      try {
        out += this.block(node.body, s);
        completed = true;
      } catch (e) {
        if (!(e instanceof LoopSignal)) throw e;
        out += e.output;
        if (e.breaks) break;
      }
      this.check(out.length);
    }
    if (!completed) out += this.block(node.else, new Scope(scope));
    return out;
  }

  /** a macro (or a call block's caller): binds its parameters in a scope of the one it was defined in */
  private macro(name: string, params: readonly Param[], body: readonly Stmt[], definedIn: Scope, isCaller = false): Callable {
    // a parameter named varargs or kwargs is that parameter, not the catch-all
    const declared = (n: string) => params.some((p) => p.name === n);
    const uses = { varargs: readsName(body, "varargs") && !declared("varargs"), kwargs: readsName(body, "kwargs") && !declared("kwargs"), caller: readsName(body, "caller") };
    const display = isCaller ? "caller" : `'${name}'`;
    // jinja2's Macro attributes
    const attrs = new Map<string, Value>([
      ["name", isCaller ? null : name], ["arguments", tuple(params.map((p) => p.name))], ["catch_kwargs", uses.kwargs],
      ["catch_varargs", uses.varargs], ["caller", uses.caller], ["explicit_caller", declared("caller")],
    ]);
    return new Callable(name, (args, kwargs) => {
      if (++this.macroDepth > MAX_MACRO_DEPTH) fail(`macro calls nest more than ${MAX_MACRO_DEPTH} deep (a macro calling itself without end?)`);
      try {
        return this.callMacro(args, kwargs, params, body, definedIn, display, isCaller, uses);
      } finally {
        this.macroDepth--;
      }
    }, attrs);
  }

  /** a macro's parameters bound (positional, keyword, default, else undefined; varargs, kwargs, caller) and its body rendered */
  private callMacro(args: Value[], kwargs: Map<string, Value>, params: readonly Param[], body: readonly Stmt[], definedIn: Scope, display: string, isCaller: boolean, uses: { varargs: boolean; kwargs: boolean; caller: boolean }): string {
    const s = new Scope(definedIn);
    const rest = new Map(kwargs);
    if (rest.has("caller")) {
      if (!uses.caller && !isCaller) fail(`macro ${display} takes no keyword argument 'caller'`);
      s.vars.set("caller", rest.get("caller")!);
      rest.delete("caller");
    }
    params.forEach((p, i) => {
      let v: Value | undefined = args[i];
      if (v === undefined && rest.has(p.name)) {
        v = rest.get(p.name)!;
        rest.delete(p.name);
      }
      if (v === undefined) v = p.default ? this.expr(p.default, s) : new Undefined(`parameter '${p.name}' was not provided`);
      s.vars.set(p.name, v);
    });
    if (args.length > params.length && !uses.varargs) fail(`macro ${display} takes not more than ${params.length} argument(s)`);
    if (!params.some((p) => p.name === "varargs")) s.vars.set("varargs", tuple(args.slice(params.length)));
    if (rest.size && !uses.kwargs) fail(`macro ${display} takes no keyword argument '${rest.keys().next().value}'`);
    if (!params.some((p) => p.name === "kwargs")) s.vars.set("kwargs", new Map(rest));
    return this.block(body, s);
  }

  private callBlock(call: CallExpr, params: readonly Param[], body: readonly Stmt[], scope: Scope): string {
    const caller = this.macro("caller", params, body, scope, true);
    const fn = this.expr(call.node, scope);
    const [args, kwargs] = this.args(call, scope);
    kwargs.set("caller", caller);
    return str(this.invoke(fn, args, kwargs));
  }

  // ---- expressions ----

  private expr(node: Expr, scope: Scope): Value {
    this.tick();
    let v: Value;
    try {
      v = this.evaluate(node, scope);
    } catch (e) {
      throw Interpreter.place(e, node.line);
    }
    if (typeof v === "string") this.check(v.length);
    else if (Array.isArray(v)) this.checkItems(v.length);
    return v;
  }

  private evaluate(node: Expr, scope: Scope): Value {
    switch (node.type) {
      case "Const": return node.float ? new Float(node.value as number) : node.value;
      case "Name": {
        const v = scope.lookup(node.name);
        return v !== undefined ? v : new Undefined(`'${node.name}' is undefined`);
      }
      case "NSRef": return fail("a namespace reference is only an assignment target");
      case "List": return node.items.map((x) => this.expr(x, scope));
      case "Tuple": return tuple(node.items.map((x) => this.expr(x, scope)));
      case "Dict": {
        const d = new Map<Key, Value>();
        for (const p of node.pairs) dictSet(d, this.expr(p.key, scope), this.expr(p.value, scope));
        return d;
      }
      case "Getattr": return this.getattr(this.expr(node.node, scope), node.attr);
      case "Getitem": {
        const obj = this.expr(node.node, scope);
        return node.arg.type === "Slice" ? this.slice(obj, node.arg, scope) : this.getitem(obj, this.expr(node.arg, scope));
      }
      case "Slice": return fail("a slice is only a subscript");
      case "Call": {
        const fn = this.expr(node.node, scope);
        const [args, kwargs] = this.args(node, scope);
        return this.invoke(fn, args, kwargs);
      }
      case "Filter": {
        // (an unknown filter gets here only inside an if: checkFiltersAndTests refused the others)
        if (!hasFilter(node.name)) fail(noFilter(node.name, " found"));
        return this.applyFilterNode(node, node.node ? this.expr(node.node, scope) : new Undefined("a filter has no value"), scope);
      }
      case "Test": {
        if (!hasTest(node.name)) fail(`No test named '${node.name}' found.`);
        const value = this.expr(node.node, scope);
        const [args, kwargs] = this.args(node, scope);
        return applyTest(node.name, value, [...args, ...kwargs.values()]);
      }
      case "Not": return !truthy(this.expr(node.node, scope));
      case "Neg":
      case "Pos": {
        const v = checkDefined(this.expr(node.node, scope));
        const op = node.type === "Neg" ? "-" : "+";
        if (!isNumber(v)) return fail(`bad operand type for unary ${op}: '${typeName(v)}'`);
        if (op === "+") return typeof v === "boolean" ? Number(v) : v;
        // (an int has no -0: 0 - x, not -x, for -0 and -False)
        return v instanceof Float ? new Float(-v.v) : typeof v === "bigint" ? pyInt(-v) : 0 - num(v);
      }
      case "BinOp": return this.binary(node.op, this.expr(node.left, scope), this.expr(node.right, scope));
      case "Concat": {
        let s = "";
        for (const n of node.nodes) {
          s += str(this.expr(n, scope));
          this.check(s.length);
        }
        return s;
      }
      case "Compare": {
        // a < b < c is a < b and b < c, b evaluated once, stopping at the first false (Python's chained comparison)
        let left = this.expr(node.expr, scope);
        let result: Value = true;
        for (const operand of node.ops) {
          const right = this.expr(operand.expr, scope);
          result = this.binary(operand.op, left, right);
          if (!truthy(result)) return result;
          left = right;
        }
        return result;
      }
      case "And": {
        const left = this.expr(node.left, scope);
        return truthy(left) ? this.expr(node.right, scope) : left;
      }
      case "Or": {
        const left = this.expr(node.left, scope);
        return truthy(left) ? left : this.expr(node.right, scope);
      }
      case "CondExpr":
        if (truthy(this.expr(node.test, scope))) return this.expr(node.expr1, scope);
        return node.expr2 ? this.expr(node.expr2, scope) : new Undefined(`the inline if-expression on line ${node.line} evaluated to false and no else section was defined.`);
    }
  }

  /** a call's, filter's or test's arguments: positional, keyword, *args, **kwargs */
  private args(node: Omit<Invocation, "name">, scope: Scope): [Value[], Map<string, Value>] {
    const args = node.args.map((a) => this.expr(a, scope));
    const kwargs = new Map<string, Value>();
    for (const k of node.kwargs) kwargs.set(k.key, this.expr(k.value, scope));
    if (node.dynArgs) args.push(...iterate(this.expr(node.dynArgs, scope)));
    if (node.dynKwargs) {
      const d = this.expr(node.dynKwargs, scope);
      if (!isDict(d)) fail(`argument after ** must be a mapping, not ${typeName(d)}`);
      for (const [k, v] of d as Map<Key, Value>) kwargs.set(str(k), v);
    }
    return [args, kwargs];
  }

  private invoke(fn: Value, args: Value[], kwargs: Map<string, Value>): Value {
    checkDefined(fn);
    const callable = fn instanceof PyObject ? fn.call : fn;
    if (!(callable instanceof Callable)) return fail(`'${typeName(fn)}' object is not callable`);
    return callable.call(args, kwargs);
  }

  private applyFilterNode(node: FilterExpr, value: Value, scope: Scope): Value {
    const [args, kwargs] = this.args(node, scope);
    return this.applyFilterByName(node.name, value, args, kwargs);
  }

  /** a {% filter %} or {% set %} block's chain of filters applied to its body, the leftmost first */
  private applyBlockFilters(node: FilterExpr, body: Value, scope: Scope): Value {
    const inner = node.node?.type === "Filter" ? this.applyBlockFilters(node.node, body, scope) : body;
    return this.applyFilterNode(node, inner, scope);
  }

  private applyFilterByName(name: string, value: Value, args: Value[], kwargs: Map<string, Value>): Value {
    if (!hasFilter(name)) fail(noFilter(name));
    // filters that write a value with str() treat an undefined one as ""; the rest need a value
    if (value instanceof Undefined && !UNDEFINED_OK.has(name)) checkDefined(value);
    return applyFilter(name, value, args, kwargs, this);
  }

  test(name: string, value: Value, args: Value[]): boolean {
    if (!hasTest(name)) fail(`No test named '${name}'.`);
    return applyTest(name, value, args);
  }

  filter(name: string, value: Value, args: Value[], kwargs: Map<string, Value>): Value {
    return this.applyFilterByName(name, value, args, kwargs);
  }

  // ---- operators ----

  binary(op: string, a: Value, b: Value): Value {
    switch (op) {
      case "==": return equals(a, b);
      case "!=": return !equals(a, b);
      case "in": return contains(b, a);
      case "not in": return !contains(b, a);
      case "~": {
        const s = str(a) + str(b);
        this.check(s.length);
        return s;
      }
      case "%":
        if (isStr(a) && b instanceof Undefined) return percentFormat(strOf(a), b, this);
        break;
    }
    checkDefined(a);
    checkDefined(b);
    switch (op) {
      case "<": return compare(a, b, op) < 0;
      case ">": return compare(a, b, op) > 0;
      case "<=": return compare(a, b, op) <= 0;
      case ">=": return compare(a, b, op) >= 0;
    }
    if (isNumber(a) && isNumber(b)) return arithmetic(op, a, b);
    switch (op) {
      case "+": {
        if (isStr(a) && isStr(b)) {
          // Markup + str escapes the str (markupsafe), which functionary v3.1's `"..."|safe + name` relies on
          const joined = a instanceof Markup || b instanceof Markup
            ? new Markup((a instanceof Markup ? a.s : escapeHtml(a)) + (b instanceof Markup ? b.s : escapeHtml(b as string)))
            : (a as string) + (b as string);
          this.check(strOf(joined).length);
          return joined;
        }
        if (Array.isArray(a) && Array.isArray(b) && typeName(a) === typeName(b) && !rangeOf(a)) {
          this.checkItems(a.length + b.length);
          return isTuple(a) ? tuple([...a, ...b]) : [...a, ...b];
        }
        if (isStr(a)) fail(`can only concatenate str (not "${typeName(b)}") to str`);
        if (Array.isArray(a) && !rangeOf(a)) fail(`can only concatenate ${typeName(a)} (not "${typeName(b)}") to ${typeName(a)}`);
        break;
      }
      case "*": {
        const [seq, n] = isNumber(a) ? [b, a] : [a, b];
        if ((isStr(seq) || (Array.isArray(seq) && !rangeOf(seq))) && isNumber(n)) {
          if (n instanceof Float) fail(`can't multiply sequence by non-int of type 'float'`);
          const times = Math.max(0, num(n));
          if (isStr(seq)) {
            this.check(strOf(seq).length * times);
            const s = strOf(seq).repeat(times);
            return seq instanceof Markup ? new Markup(s) : s;
          }
          this.checkItems(seq.length * times);
          const out = Array.from({ length: times }, () => seq).flat();
          return isTuple(seq) ? tuple(out) : out;
        }
        break;
      }
      case "%":
        if (isStr(a)) {
          const s = percentFormat(strOf(a), b, this);
          return a instanceof Markup ? new Markup(s) : s;
        }
        break;
    }
    return fail(`unsupported operand type(s) for ${op}: '${typeName(a)}' and '${typeName(b)}'`);
  }

  // ---- attribute and item lookup (jinja2's Environment.getattr / getitem under the sandbox) ----

  getattr(obj: Value, name: string): Value {
    checkDefined(obj);
    if (name.startsWith("_")) return new Undefined(`access to attribute '${name}' of '${typeName(obj)}' object is unsafe.`);
    const method = this.method(obj, name);
    if (method) return method;
    // (a None value is found: `??` would take it for a missing one)
    if (isDict(obj)) {
      const v = dictGet(obj, name);
      return v === undefined ? noAttribute(obj, name) : v;
    }
    if (obj instanceof PyObject) return obj.attrs.has(name) ? obj.attrs.get(name)! : noAttribute(obj, name);
    if (obj instanceof Callable && obj.macro?.has(name)) return obj.macro.get(name)!;
    if (Array.isArray(obj)) {
      const group = groupMembers(obj);
      if (group?.attrs.has(name)) return group.attrs.get(name)!;
    }
    return noAttribute(obj, name);
  }

  getitem(obj: Value, key: Value): Value {
    checkDefined(obj);
    if (isDict(obj)) {
      const v = isKey(key) ? dictGet(obj, key) : undefined;
      if (v !== undefined) return v;
      return isStr(key) ? this.getattr(obj, strOf(key)) : noElement(obj, key);
    }
    if ((Array.isArray(obj) || isStr(obj)) && (typeof key === "number" || typeof key === "boolean")) {
      const items = isStr(obj) ? [...strOf(obj)] : obj;
      const i = Number(key) < 0 ? items.length + Number(key) : Number(key);
      if (i < 0 || i >= items.length) return noElement(obj, key);
      const v = items[i]!;
      return obj instanceof Markup ? new Markup(v as string) : v;
    }
    // (an item of bytes is an int)
    if (obj instanceof Bytes && (typeof key === "number" || typeof key === "boolean")) {
      const i = Number(key) < 0 ? obj.b.length + Number(key) : Number(key);
      return i >= 0 && i < obj.b.length ? obj.b[i]! : noElement(obj, key);
    }
    if (isStr(key)) return this.getattr(obj, strOf(key));
    return noElement(obj, key);
  }

  /** a method of a str, dict, list or tuple */
  private method(obj: Value, name: string): Callable | undefined {
    if (isStr(obj)) return strMethod(obj, name, this);
    if (isDict(obj)) return dictMethod(obj, name);
    if (Array.isArray(obj)) return listMethod(obj, name);
    if (obj instanceof Bytes) return bytesMethod(obj, name);
    return undefined;
  }

  private slice(obj: Value, node: Extract<Expr, { type: "Slice" }>, scope: Scope): Value {
    checkDefined(obj);
    const [start, stop, stepValue] = [node.start, node.stop, node.step].map((n) => (n ? this.expr(n, scope) : null)) as [Value, Value, Value];
    // jinja2 compiles a slice to Python's own obj[a:b] (not its getitem, which would make an error undefined): Python's TypeErrors
    // (jinja2's optimizer folds a slice of constants through getitem, so `(5)[1:]` is undefined there: templates slice variables)
    if (isDict(obj)) fail("unhashable type: 'slice'");
    if (!(isStr(obj) || Array.isArray(obj))) fail(`'${typeName(obj)}' object is not subscriptable`);
    const isIndex = (v: Value) => v === null || typeof v === "number" || typeof v === "boolean";
    if (![start, stop, stepValue].every(isIndex)) fail("slice indices must be integers or None or have an __index__ method");
    const bound = (v: Value): number | undefined => (v === null ? undefined : Number(v));
    const step = bound(stepValue) ?? 1;
    if (step === 0) fail("slice step cannot be zero");
    const items = isStr(obj) ? [...strOf(obj)] : (obj as Value[]);
    const n = items.length;
    const norm = (i: number | undefined, fallback: number, lo: number, hi: number) => (i === undefined ? fallback : i < 0 ? Math.max(lo, n + i) : Math.min(i, hi));
    const from = step > 0 ? norm(bound(start), 0, 0, n) : norm(bound(start), n - 1, -1, n - 1);
    const to = step > 0 ? norm(bound(stop), n, 0, n) : norm(bound(stop), -1, -1, n - 1);
    // a range's slice is a range (Python computes it from the indices, as here)
    const range = rangeOf(obj);
    if (range) return pyRange(range[0] + from * range[2], range[0] + to * range[2], range[2] * step);
    const out: Value[] = [];
    for (let i = from; step > 0 ? i < to : i > to; i += step) out.push(items[i]!);
    if (isStr(obj)) return obj instanceof Markup ? new Markup(out.join("")) : out.join("");
    return isTuple(obj) ? tuple(out) : out;
  }
}

/** the filters jinja2 lets an undefined value through (they call str() or len() or iterate it, or test it) */
const UNDEFINED_OK = new Set([
  "default", "d", "string", "trim", "upper", "lower", "title", "capitalize", "replace", "striptags", "wordcount", "center", "truncate", "format",
  "length", "count", "list", "items", "groupby", "join", "map", "select", "reject", "selectattr", "rejectattr", "unique", "safe", "escape", "e", "forceescape",
  "first", "last", "batch", "slice", "sort", "sum", "min", "max", "reverse", "tojson", "random", "urlencode", "pprint", "urlize",
]);

/** Python's arithmetic on int, float and bool: // and % floor toward -inf, / is always float, int ** negative int is float, ints exact at any size */
function arithmetic(op: string, a: number | bigint | Float | boolean, b: number | bigint | Float | boolean): Value {
  // two small ints (`messages|length - 1`, `loop.index0 + 1`): no BigInt made, which a long chat's render would make twice a message
  if (typeof a === "number" && typeof b === "number") {
    if (op === "+" || op === "-" || op === "*") {
      const v = op === "+" ? a + b : op === "-" ? a - b : a * b;
      if (Number.isSafeInteger(v)) return v;
    } else if ((op === "%" || op === "//") && b !== 0 && Math.abs(a) <= 2 ** 31 && Math.abs(b) <= 2 ** 31) {
      // (`loop.index0 % 2`: exact in doubles at this size, floored toward -inf as Python floors)
      if (op === "//") return Math.floor(a / b) + 0;
      const r = a % b;
      return r !== 0 && r < 0 !== b < 0 ? r + b : r + 0;
    }
  }
  const i = exactInt(a), j = exactInt(b);
  if (i !== undefined && j !== undefined && op !== "/" && !(op === "**" && j < 0n)) return intArithmetic(op, a, b, i, j);
  const x = num(a), y = num(b);
  const float = a instanceof Float || b instanceof Float;
  switch (op) {
    case "+": return new Float(x + y);
    case "-": return new Float(x - y);
    case "*": return new Float(x * y);
    case "/": return y === 0 ? fail("division by zero") : new Float(x / y);
    case "//": return y === 0 ? fail(float ? "float floor division by zero" : "integer division or modulo by zero") : new Float(Math.floor(x / y));
    case "%": {
      if (y === 0) return fail(float ? "float modulo" : "integer division or modulo by zero");
      const r = x % y;
      return new Float(r !== 0 && (r < 0) !== (y < 0) ? r + y : r);
    }
    case "**": return x === 0 && y < 0 ? fail("0.0 cannot be raised to a negative power") : new Float(x ** y);
    default: return fail(`unsupported operand type(s) for ${op}: '${typeName(a)}' and '${typeName(b)}'`);
  }
}

/** the most bits an int may have: Python refuses to write one of more than 4300 digits (sys.get_int_max_str_digits) */
const MAX_INT_BITS = Math.ceil(4300 * Math.log2(10));

/** + - * // % ** on ints (and bools), exact: in doubles while they are exact, else in BigInt */
function intArithmetic(op: string, a: Value, b: Value, i: bigint, j: bigint): Value {
  const bits = (n: bigint) => (n < 0n ? -n : n).toString(2).length;
  const tooBig = (estimate: number) => {
    if (estimate > MAX_INT_BITS) fail(`the integer result of ${str(a)} ${op} ${str(b)} has more than 4300 digits, which Python refuses to write`);
  };
  switch (op) {
    case "+": return pyInt(i + j);
    case "-": return pyInt(i - j);
    case "*": tooBig(bits(i) + bits(j) - 1); return pyInt(i * j);
    case "//": {
      if (j === 0n) return fail("integer division or modulo by zero");
      const q = i / j;
      return pyInt(i % j !== 0n && (i < 0n) !== (j < 0n) ? q - 1n : q);
    }
    case "%": {
      if (j === 0n) return fail("integer division or modulo by zero");
      const r = i % j;
      return pyInt(r !== 0n && (r < 0n) !== (j < 0n) ? r + j : r);
    }
    case "**": if (i !== 0n && i !== 1n && i !== -1n) tooBig((bits(i) - 1) * Number(j)); return pyInt(i ** j);
    default: return fail(`unsupported operand type(s) for ${op}: '${typeName(a)}' and '${typeName(b)}'`);
  }
}

/** jinja2's own globals: namespace(), dict(), cycler(), joiner() */
export function jinjaGlobals(): [string, Value][] {
  const mapping = (name: string, args: Value[], kwargs: Map<string, Value>): Map<Key, Value> => {
    if (args.length > 1) fail(`${name} expected at most 1 argument, got ${args.length}`);
    const d = new Map<Key, Value>();
    const [source] = args;
    if (source !== undefined) checkDefined(source);
    if (isDict(source ?? null)) for (const [k, v] of dictEntries(source as Map<Key, Value>)) dictSet(d, k, v);
    else if (source !== undefined) {
      for (const pair of iterate(source)) {
        const kv = iterate(pair);
        if (kv.length !== 2) fail(`${name} needs pairs: an item has ${kv.length} elements`);
        dictSet(d, kv[0]!, kv[1]!);
      }
    }
    for (const [k, v] of kwargs) d.set(k, v);
    return d;
  };
  const cycler = (items: Value[]) => {
    const attrs = new Map<string, Value>([["current", items[0] ?? null]]);
    let at = 0;
    const advance = () => { const v = items[at]!; at = (at + 1) % items.length; attrs.set("current", items[at]!); return v; };
    attrs.set("next", new Callable("next", () => (items.length ? advance() : fail("no items for cycling given"))));
    attrs.set("reset", new Callable("reset", () => { at = 0; attrs.set("current", items[0] ?? null); return null; }));
    return new PyObject("Cycler", attrs);
  };
  return [
    ["namespace", new Callable("namespace", (args, kwargs) => {
      const attrs = new Map([...mapping("namespace", args, kwargs)].map(([k, v]) => [str(k), v] as [string, Value]));
      // (its own attrs written, so that a namespace holding itself is written <Namespace {...}> as in Python)
      const ns: PyObject = new PyObject("Namespace", attrs, true, () => `<Namespace ${str(ns.attrs as Map<Key, Value>)}>`);
      return ns;
    })],
    ["dict", new Callable("dict", (args, kwargs) => mapping("dict", args, kwargs))],
    ["cycler", new Callable("cycler", (args) => cycler(args))],
    ["joiner", new Callable("joiner", ([sep = ", "]) => {
      let used = false;
      return new Callable("joiner", () => { if (!used) { used = true; return ""; } return sep; });
    })],
  ];
}
