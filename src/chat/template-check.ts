/*
 * Checks a chat template's token stream and parse tree before @huggingface/jinja parses or
 * renders it. The library's parser reads past the end of the tokens on an unterminated block
 * ("Cannot read properties of undefined (reading 'type')") and recurses once per nesting level in
 * both parser and interpreter, so a deeply nested template overflows the stack
 * ("Maximum call stack size exceeded"). Here blocks and brackets are matched first, naming the
 * statement and its line, and nesting is bounded, so a parse bomb is refused before any
 * recursion.
 */

/** the lexer's tokens as far as the checks read them (its Token class: value and type) */
export interface TemplateToken {
  readonly value: string;
  readonly type: string;
}

/** block statements and what ends them; `set` opens a block only without `=` ({% set x %}...{% endset %}) */
const BLOCKS: Record<string, { end: string; what: string; middles: readonly string[] }> = {
  for: { end: "endfor", what: "for loop", middles: ["else"] },
  if: { end: "endif", what: "if block", middles: ["elif", "else"] },
  macro: { end: "endmacro", what: "macro", middles: [] },
  call: { end: "endcall", what: "call block", middles: [] },
  filter: { end: "endfilter", what: "filter block", middles: [] },
  set: { end: "endset", what: "set block", middles: [] },
};
const ENDS = new Map(Object.entries(BLOCKS).map(([open, b]) => [b.end, open]));
const CLOSING: Record<string, string> = { CloseParen: "OpenParen", CloseSquareBracket: "OpenSquareBracket", CloseCurlyBracket: "OpenCurlyBracket" };
const BRACKET_TEXT: Record<string, string> = { OpenParen: "(", OpenSquareBracket: "[", OpenCurlyBracket: "{", CloseParen: ")", CloseSquareBracket: "]", CloseCurlyBracket: "}" };

interface Opened {
  readonly keyword: string;
  /** the statement as written, e.g. "{% for m in messages %}" */
  readonly text: string;
  /** which statement with this keyword it is (0 = the first), to find its line */
  readonly occurrence: number;
}

/**
 * Throws (with `fail`) when a block is not closed, is closed by the wrong end tag, an end or
 * else tag closes nothing, a bracket is unbalanced inside a tag, or blocks or brackets nest
 * deeper than `maxDepth`.
 */
export function checkTemplateTokens(source: string, tokens: readonly TemplateToken[], maxDepth: number, fail: (message: string) => never): void {
  const blocks: Opened[] = [];
  const seen = new Map<string, number>();
  const totals = new Map<string, number>();
  tokens.forEach((t, i) => {
    const next = tokens[i + 1];
    if (t.type === "OpenStatement" && next?.type === "Identifier") totals.set(next.value, (totals.get(next.value) ?? 0) + 1);
  });
  const at = (keyword: string) => {
    const n = seen.get(keyword) ?? 0;
    seen.set(keyword, n + 1);
    return n;
  };
  const where = (o: Opened) => {
    const line = lineOf(source, o.keyword, o.occurrence, totals.get(o.keyword) ?? 0);
    return `${o.text}${line === undefined ? "" : ` (line ${line})`}`;
  };
  for (let i = 0; i < tokens.length; i++) {
    const t = tokens[i]!;
    if (t.type !== "OpenStatement" && t.type !== "OpenExpression") continue;
    const close = t.type === "OpenStatement" ? "CloseStatement" : "CloseExpression";
    let j = i + 1;
    const brackets: string[] = [];
    let assigns = false;
    for (; j < tokens.length && tokens[j]!.type !== close; j++) {
      const type = tokens[j]!.type;
      if (type === "Equals" && brackets.length === 0) assigns = true;
      if (BRACKET_TEXT[type] && !CLOSING[type]) {
        brackets.push(type);
        if (brackets.length > maxDepth) fail(`brackets nest more than ${maxDepth} deep in ${tagText(tokens, i, j)}; refusing it (a parse bomb?)`);
      } else if (CLOSING[type]) {
        if (brackets.pop() !== CLOSING[type]) fail(`unbalanced "${BRACKET_TEXT[type]}" in ${tagText(tokens, i, j + 1)}`);
      }
    }
    const text = tagText(tokens, i, j + 1);
    if (brackets.length > 0) fail(`unclosed "${BRACKET_TEXT[brackets.at(-1)!]}" in ${text}`);
    // the template ended inside the tag
    if (j >= tokens.length) fail(`unterminated ${t.type === "OpenStatement" ? "tag" : "expression"} ${text}: no ${t.type === "OpenStatement" ? "%}" : "}}"} follows`);
    if (t.type === "OpenExpression") { i = j; continue; }
    const keyword = tokens[i + 1]?.type === "Identifier" ? tokens[i + 1]!.value : "";
    const occurrence = at(keyword);
    const top = blocks.at(-1);
    if (BLOCKS[keyword] && !(keyword === "set" && assigns)) {
      blocks.push({ keyword, text, occurrence });
      if (blocks.length > maxDepth) fail(`blocks nest more than ${maxDepth} deep at ${text}; refusing it (a parse bomb?)`);
    } else if (ENDS.has(keyword)) {
      const opener = ENDS.get(keyword)!;
      if (!top) fail(`{% ${keyword} %} closes no ${BLOCKS[opener]!.what}`);
      if (top.keyword !== opener) fail(`{% ${keyword} %} where {% ${BLOCKS[top.keyword]!.end} %} was expected to close the ${BLOCKS[top.keyword]!.what} ${where(top)}`);
      blocks.pop();
    } else if (Object.values(BLOCKS).some((b) => b.middles.includes(keyword))) {
      if (!top || !BLOCKS[top.keyword]!.middles.includes(keyword)) fail(`{% ${keyword} %} outside an if block${keyword === "else" ? " or for loop" : ""}`);
    }
    i = j;
  }
  const open = blocks.at(-1);
  if (open) fail(`unterminated ${BLOCKS[open.keyword]!.what}: ${where(open)} has no {% ${BLOCKS[open.keyword]!.end} %}`);
}

/** Throws (with `fail`) when the parse tree is deeper than `maxDepth`: the interpreter recurses once per level. */
export function checkTreeDepth(root: unknown, maxDepth: number, fail: (message: string) => never): void {
  const stack: [unknown, number][] = [[root, 1]];
  const isNode = (v: unknown): v is object => typeof v === "object" && v !== null && typeof (v as { type?: unknown }).type === "string";
  while (stack.length > 0) {
    const [node, depth] = stack.pop()!;
    if (depth > maxDepth) fail(`expressions nest more than ${maxDepth} deep (a chain of operators, filters or elif branches); refusing it (a parse bomb?)`);
    for (const v of Object.values(node as object)) {
      if (Array.isArray(v)) for (const c of v) { if (isNode(c)) stack.push([c, depth + 1]); }
      else if (isNode(v)) stack.push([v, depth + 1]);
    }
  }
}

const NO_SPACE_BEFORE = new Set(["Dot", "CloseParen", "CloseSquareBracket", "Comma"]);

/** the tag tokens [from, to) as text, shortened: "{% for m in messages %}" */
function tagText(tokens: readonly TemplateToken[], from: number, to: number): string {
  let text = "";
  let prev = "";
  for (const t of tokens.slice(from, Math.min(to, from + 12))) {
    // spaced as people write it: messages[0].content, f(x, y)
    const closesTag = t.type === "CloseExpression" || t.type === "CloseStatement";
    const tight = (!closesTag && (prev === "Dot" || prev === "OpenParen" || prev === "OpenSquareBracket")) || NO_SPACE_BEFORE.has(t.type)
      || (prev === "Identifier" && (t.type === "OpenParen" || t.type === "OpenSquareBracket"));
    text += (text === "" || tight ? "" : " ") + (t.type === "StringLiteral" ? JSON.stringify(t.value) : t.value);
    prev = t.type;
  }
  return to - from > 12 ? `${text} ...` : text;
}

/**
 * The 1-based line of the `occurrence`-th statement starting with `keyword`, found in the source
 * (the lexer's tokens carry no positions, and its trimming moves lines); undefined when the tags
 * found there (outside comments) are not the `count` the lexer saw, e.g. one inside a string.
 */
function lineOf(source: string, keyword: string, occurrence: number, count: number): number | undefined {
  const uncommented = source.replace(/\{#[\s\S]*?#\}/g, (c) => c.replace(/[^\n]/g, " "));
  const starts = [...uncommented.matchAll(new RegExp(`\\{%[-+]?\\s*${keyword}\\b`, "g"))].map((m) => m.index);
  if (starts.length !== count) return undefined;
  return uncommented.slice(0, starts[occurrence]).split("\n").length;
}
