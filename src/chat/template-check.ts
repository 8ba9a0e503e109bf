import type { Token } from "./jinja/index.js";

/*
 * Checks a chat template's block structure before it is parsed, and its parse tree's depth before
 * it is rendered. jinja2's own messages for a block left open or closed by the wrong tag ("Unexpected
 * end of template. Jinja was looking for ...") name neither the block nor where it starts; here
 * blocks are matched first, naming the statement and its line, and their nesting is bounded. The
 * interpreter recurses once per level of the tree, so a left-deep chain (`1 + 1 + ...`, a filter
 * chain, an elif chain) is bounded too.
 */

/** block statements and what ends them; `set` opens a block only without `=` ({% set x %}...{% endset %}) */
const BLOCKS: Record<string, { end: string; what: string; middles: readonly string[] }> = {
  for: { end: "endfor", what: "for loop", middles: ["else"] },
  if: { end: "endif", what: "if block", middles: ["elif", "else"] },
  macro: { end: "endmacro", what: "macro", middles: [] },
  call: { end: "endcall", what: "call block", middles: [] },
  filter: { end: "endfilter", what: "filter block", middles: [] },
  set: { end: "endset", what: "set block", middles: [] },
  with: { end: "endwith", what: "with block", middles: [] },
  generation: { end: "endgeneration", what: "generation block", middles: [] },
};
const ENDS = new Map(Object.entries(BLOCKS).map(([open, b]) => [b.end, open]));
const OPENING = new Set(["lparen", "lbracket", "lbrace"]);
const CLOSING = new Set(["rparen", "rbracket", "rbrace"]);

interface Opened {
  readonly keyword: string;
  /** the statement as written, e.g. "{% for m in messages %}" */
  readonly text: string;
  readonly line: number;
}

/**
 * Throws (with `fail`) when a block is not closed, is closed by the wrong end tag, an end or
 * else tag closes nothing, or blocks nest deeper than `maxDepth`.
 */
export function checkTemplateTokens(tokens: readonly Token[], maxDepth: number, fail: (message: string) => never): void {
  const blocks: Opened[] = [];
  const where = (o: Opened) => `${o.text} (line ${o.line})`;
  for (let i = 0; i < tokens.length; i++) {
    if (tokens[i]!.type !== "block_begin") continue;
    let j = i + 1;
    let depth = 0;
    let assigns = false;
    for (; j < tokens.length && tokens[j]!.type !== "block_end"; j++) {
      const type = tokens[j]!.type;
      if (type === "assign" && depth === 0) assigns = true;
      if (OPENING.has(type)) depth++;
      else if (CLOSING.has(type)) depth--;
    }
    const text = tagText(tokens, i, j + 1);
    const keyword = tokens[i + 1]?.type === "name" ? tokens[i + 1]!.value : "";
    const top = blocks.at(-1);
    if (BLOCKS[keyword] && !(keyword === "set" && assigns)) {
      blocks.push({ keyword, text, line: tokens[i]!.line });
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

const NO_SPACE_BEFORE = new Set(["dot", "rparen", "rbracket", "comma"]);

/** the tag tokens [from, to) as text, shortened: "{% for m in messages %}" */
function tagText(tokens: readonly Token[], from: number, to: number): string {
  let text = "";
  let prev = "";
  for (const t of tokens.slice(from, Math.min(to, from + 12))) {
    // spaced as people write it: messages[0].content, f(x, y)
    const closesTag = t.type === "variable_end" || t.type === "block_end";
    const tight = (!closesTag && (prev === "dot" || prev === "lparen" || prev === "lbracket")) || NO_SPACE_BEFORE.has(t.type)
      || (prev === "name" && (t.type === "lparen" || t.type === "lbracket"));
    const written = t.type === "string" ? JSON.stringify(t.value) : t.type.endsWith("_begin") || closesTag ? t.value.trim() : t.value;
    text += (text === "" || tight ? "" : " ") + written;
    prev = t.type;
  }
  return to - from > 12 ? `${text} ...` : text;
}
