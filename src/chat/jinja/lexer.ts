import { reprString } from "./values.js";

/*
 * A chat template's text as tokens, read as jinja2 3.1's lexer reads it under transformers'
 * settings (trim_blocks, lstrip_blocks, keep_trailing_newline off): data between tags, the tokens
 * inside {{ }} and {% %}, comments and {% raw %} blocks, `-` / `+` whitespace control, Python's
 * string escapes and number literals. Every token carries its line, so that syntax and runtime
 * errors can name it. Brackets are matched as jinja2 matches them (a `}}` inside an open bracket
 * is two braces), and bounded in depth, so a bracket bomb stops here.
 */

/** a syntax error at a line of the template (jinja2's TemplateSyntaxError) */
export class TemplateSyntaxError extends Error {
  /** `message` says what is wrong; `line` (1-based) is added to it unless the message names its line already */
  constructor(readonly reason: string, readonly line: number | undefined) {
    super(line === undefined ? reason : `${reason} (line ${line})`);
  }
}

export interface Token {
  /** jinja2's token types: data, variable_begin, variable_end, block_begin, block_end, name, string, integer, float, eof, and the operators' (add, lparen, ...) */
  readonly type: string;
  /** the text a name, operator or data token stands for; a string literal's decoded value */
  readonly value: string;
  /** an integer or float literal's value */
  readonly number?: number | bigint;
  /** 1-based line of the token's start */
  readonly line: number;
  /** offset of the token's start in the (newline-normalised) source */
  readonly at: number;
}

const OPERATORS: Record<string, string> = {
  "+": "add", "-": "sub", "/": "div", "//": "floordiv", "*": "mul", "%": "mod", "**": "pow", "~": "tilde", "[": "lbracket", "]": "rbracket",
  "(": "lparen", ")": "rparen", "{": "lbrace", "}": "rbrace", "==": "eq", "!=": "ne", ">": "gt", ">=": "gteq", "<": "lt", "<=": "lteq", "=": "assign",
  ".": "dot", ":": "colon", "|": "pipe", ",": "comma", ";": "semicolon",
};
/** the operator text of a token type, as jinja2 describes tokens in its messages */
export const OPERATOR_TEXT: Record<string, string> = Object.fromEntries(Object.entries(OPERATORS).map(([text, type]) => [type, text]));

/** Python's str.isspace() characters (what `\s` and str.strip() mean in jinja2; JS's \s differs at \x1c-\x1f, \x85 and \ufeff) */
const PY_SPACE = "\\t\\n\\v\\f\\r\\x1c-\\x1f \\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000";
const SPACES = new RegExp(`[${PY_SPACE}]+`, "y");
const TRAILING_SPACE = new RegExp(`[${PY_SPACE}]+$`);
const ONLY_SPACE = new RegExp(`^[${PY_SPACE}]+$`);
const FLOAT = /(?<!\.)(?:\d+_)*\d+(?:(?:\.(?:\d+_)*\d+)?[eE][+-]?(?:\d+_)*\d+|\.(?:\d+_)*\d+)/y;
const INTEGER = /0[bB](?:_?[01])+|0[oO](?:_?[0-7])+|0[xX](?:_?[\da-fA-F])+|[1-9](?:_?\d)*|0(?:_?0)*/y;
/** jinja2's name pattern (Python's \w and the marks identifiers may continue with); isidentifier() is checked after */
const NAME = /[\p{L}\p{N}\p{Mn}\p{Mc}\p{Pc}\u00b7\u0387\u1369-\u1371\u19da\u2118\u212e\u309b\u309c]+/uy;
const IDENTIFIER = /^[\p{XID_Start}_]\p{XID_Continue}*$/u;
const STRING = /'([^'\\]*(?:\\[\s\S][^'\\]*)*)'|"([^"\\]*(?:\\[\s\S][^"\\]*)*)"/y;
const OPERATOR = /\/\/|\*\*|==|!=|>=|<=|[+\-/*%~[\](){}><=.:|,;]/y;
const S = `[${PY_SPACE}]*`;
/** {% raw %} (its end does not take the newline after it, as jinja2's rule has no trim_blocks suffix) and {% endraw %} */
const RAW_BEGIN = new RegExp(`\\{%([-+]?)${S}raw${S}(?:-%\\}${S}|%\\})`, "y");
const RAW_END = new RegExp(`\\{%([-+]?)${S}endraw${S}(?:\\+%\\}|-%\\}${S}|%\\}\\n?)`, "g");
const MAX_SAFE = BigInt(Number.MAX_SAFE_INTEGER);

const NAMED: Record<string, string> = { BULLET: "•", "NO-BREAK SPACE": "\u00a0", "EM DASH": "—", "EN DASH": "–", "HORIZONTAL ELLIPSIS": "…" };
const SIMPLE_ESCAPES: Record<string, string> = { n: "\n", t: "\t", r: "\r", b: "\b", f: "\f", v: "\v", a: "\x07", "\\": "\\", "'": "'", '"': '"', "\n": "" };

/** a string literal's body as jinja2 decodes it (Python's "unicode-escape" after "backslashreplace"); throws the codec's complaint */
export function decodeStringLiteral(body: string): string {
  let out = "";
  for (let i = 0; i < body.length; i++) {
    const c = body[i]!;
    if (c !== "\\") { out += c; continue; }
    const e = body[++i] ?? "";
    if (SIMPLE_ESCAPES[e] !== undefined) { out += SIMPLE_ESCAPES[e]; continue; }
    if (/[0-7]/.test(e)) {
      const oct = /^[0-7]{1,3}/.exec(body.slice(i))![0];
      out += String.fromCodePoint(parseInt(oct, 8));
      i += oct.length - 1;
      continue;
    }
    const hexDigits = { x: 2, u: 4, U: 8 }[e];
    if (hexDigits !== undefined) {
      const hex = body.slice(i + 1, i + 1 + hexDigits);
      if (!new RegExp(`^[0-9a-fA-F]{${hexDigits}}$`).test(hex)) throw new Error(`truncated \\${e}${"X".repeat(hexDigits)} escape`);
      const code = parseInt(hex, 16);
      if (code > 0x10ffff) throw new Error("illegal Unicode character");
      out += String.fromCodePoint(code);
      i += hexDigits;
      continue;
    }
    if (e === "N") {
      const m = /^N\{([^}]*)\}/.exec(body.slice(i));
      if (!m) throw new Error("malformed \\N character escape");
      const ch = NAMED[m[1]!.toUpperCase()];
      if (ch === undefined) throw new Error(`unknown Unicode character name (tsllm knows only ${Object.keys(NAMED).join(", ")})`);
      out += ch;
      i += m[0].length - 1;
      continue;
    }
    // a non-ASCII character after a backslash was written as its \x / \u / \U escape before decoding: the backslash stays, the escape is text
    const code = e.codePointAt(0) ?? 0;
    if (code > 0x7f) {
      out += `\\${code < 0x100 ? `x${code.toString(16).padStart(2, "0")}` : code < 0x10000 ? `u${code.toString(16).padStart(4, "0")}` : `U${code.toString(16).padStart(8, "0")}`}`;
      if (code >= 0x10000) i++;
      continue;
    }
    // an unknown escape keeps its backslash, as Python's unicode-escape does
    out += `\\${e}`;
  }
  return out;
}

/** the value of an integer literal (0x / 0o / 0b, underscores): a number, or a bigint beyond 2^53 (Python's ints are exact at any size) */
function integerValue(text: string, line: number): number | bigint {
  const digits = text.replace(/_/g, "");
  if (digits.length > 4300) throw new TemplateSyntaxError(`the integer literal has ${digits.length} digits, more than the 4300 Python reads`, line);
  const big = /^0[bB]/.test(digits) ? BigInt(digits) : /^0[oO]/.test(digits) ? BigInt(`0o${digits.slice(2)}`) : BigInt(digits);
  return big > MAX_SAFE ? big : Number(big);
}

/** the tokens of a template, ending with an "eof" token; throws TemplateSyntaxError */
export function tokenize(template: string, maxDepth: number): Token[] {
  // jinja2 reads \r\n and \r as \n and drops one trailing newline
  const source = template.replace(/\r\n?/g, "\n").replace(/\n$/, "");
  const lineStarts = [0];
  for (let i = source.indexOf("\n"); i >= 0; i = source.indexOf("\n", i + 1)) lineStarts.push(i + 1);
  const lineAt = (at: number): number => {
    let lo = 0, hi = lineStarts.length - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (lineStarts[mid]! <= at) lo = mid; else hi = mid - 1;
    }
    return lo + 1;
  };
  const tokens: Token[] = [];
  const push = (type: string, value: string, at: number, number?: number | bigint) => tokens.push(number === undefined ? { type, value, line: lineAt(at), at } : { type, value, number, line: lineAt(at), at });
  const quoted = (at: number) => JSON.stringify(source.slice(at, at + 40).split("\n")[0]);
  const fail = (message: string, at: number): never => { throw new TemplateSyntaxError(message, lineAt(at)); };
  const unterminated = (what: string, at: number, closer: string): never => {
    throw new TemplateSyntaxError(`unterminated ${what} ${quoted(at)} (line ${lineAt(at)}): no ${closer} follows`, undefined);
  };

  let pos = 0;
  // whether the last thing read ended a line (lstrip_blocks strips a tag's indentation at the template's or a line's start)
  let lineStarting = true;
  /** data before a tag, with `-` stripping or lstrip_blocks applied */
  const data = (text: string, at: number, sign: string, lstrip: boolean) => {
    if (sign === "-") text = text.replace(TRAILING_SPACE, "");
    else if (sign !== "+" && lstrip) {
      const lineStart = text.lastIndexOf("\n") + 1;
      if ((lineStart > 0 || lineStarting) && ONLY_SPACE.test(text.slice(lineStart))) text = text.slice(0, lineStart);
    }
    if (text) push("data", text, at);
  };
  const skipSpace = (from: number): number => {
    SPACES.lastIndex = from;
    return SPACES.test(source) ? SPACES.lastIndex : from;
  };

  while (pos < source.length) {
    const open = source.slice(pos).search(/\{[{%#]/);
    if (open < 0) {
      push("data", source.slice(pos), pos);
      break;
    }
    const at = pos + open;
    const text = source.slice(pos, at);
    const kind = source[at + 1]!;
    RAW_BEGIN.lastIndex = at;
    const raw = kind === "%" ? RAW_BEGIN.exec(source) : null;
    const sign = raw ? raw[1]! : /[-+]/.test(source[at + 2] ?? "") ? source[at + 2]! : "";
    data(text, pos, sign, kind !== "{");
    if (raw) {
      // {% raw %}...{% endraw %}: the text between, as data
      const bodyAt = at + raw[0].length;
      RAW_END.lastIndex = bodyAt;
      const end = RAW_END.exec(source);
      if (!end) unterminated("raw block", at, "{% endraw %}");
      lineStarting = raw[0].endsWith("\n");
      data(source.slice(bodyAt, end!.index), bodyAt, end![1]!, true);
      pos = end!.index + end![0].length;
      lineStarting = end![0].endsWith("\n");
      continue;
    }
    if (kind === "#") {
      const from = at + 2 + sign.length;
      const close = source.indexOf("#}", from);
      if (close < 0) unterminated("comment", at, "#}");
      const closeSign = close > from ? source[close - 1] : "";
      pos = closeSign === "-" ? skipSpace(close + 2) : close + 2 + (closeSign !== "+" && source[close + 2] === "\n" ? 1 : 0);
      lineStarting = source[pos - 1] === "\n";
      continue;
    }
    // a tag: its tokens up to its end (not inside brackets)
    const block = kind === "%";
    push(block ? "block_begin" : "variable_begin", source.slice(at, at + 2 + sign.length), at);
    pos = at + 2 + sign.length;
    const brackets: string[] = [];
    let closed = false;
    while (pos < source.length) {
      if (brackets.length === 0) {
        let end = 0;
        if (block && source.startsWith("+%}", pos)) end = 3;
        else if (source.startsWith(block ? "-%}" : "-}}", pos)) end = skipSpace(pos + 3) - pos;
        else if (source.startsWith(block ? "%}" : "}}", pos)) end = block && source[pos + 2] === "\n" ? 3 : 2;
        if (end) {
          push(block ? "block_end" : "variable_end", source.slice(pos, pos + end), pos);
          pos += end;
          lineStarting = source[pos - 1] === "\n";
          closed = true;
          break;
        }
      }
      const spaced = skipSpace(pos);
      if (spaced > pos) { pos = spaced; continue; }
      const m = (rule: RegExp): string | undefined => {
        rule.lastIndex = pos;
        const found = rule.exec(source);
        return found ? (found[0] || undefined) : undefined;
      };
      let text: string | undefined;
      if ((text = m(FLOAT)) !== undefined) {
        push("float", text, pos, Number(text.replace(/_/g, "")));
      } else if ((text = m(INTEGER)) !== undefined) {
        push("integer", text, pos, integerValue(text, lineAt(pos)));
      } else if ((text = m(NAME)) !== undefined) {
        if (!IDENTIFIER.test(text)) fail(`Invalid character in identifier ${JSON.stringify(text)}`, pos);
        push("name", text, pos);
      } else if ((text = m(STRING)) !== undefined) {
        let value: string;
        try {
          value = decodeStringLiteral(text.slice(1, -1));
        } catch (e) {
          value = fail(`${(e as Error).message} in the string ${quoted(pos)}`, pos);
        }
        push("string", value, pos);
      } else if ((text = m(OPERATOR)) !== undefined) {
        if ("([{".includes(text)) {
          brackets.push({ "(": ")", "[": "]", "{": "}" }[text]!);
          if (brackets.length > maxDepth) fail(`brackets nest more than ${maxDepth} deep in ${quoted(at)}; refusing it (a parse bomb?)`, pos);
        } else if (")]}".includes(text)) {
          if (brackets.length === 0) fail(`unexpected '${text}'`, pos);
          const expected = brackets.pop()!;
          if (expected !== text) fail(`unexpected '${text}', expected '${expected}'`, pos);
        }
        push(OPERATORS[text]!, text, pos);
      } else {
        text = fail(`unexpected char ${reprString(String.fromCodePoint(source.codePointAt(pos)!))} at ${pos}`, pos);
      }
      pos += text.length;
    }
    if (!closed) {
      unterminated(block ? "tag" : "expression", at, block ? "%}" : "}}");
    }
  }
  tokens.push({ type: "eof", value: "", line: lineAt(source.length), at: source.length });
  return tokens;
}
