/*
 * A chat template's source rewritten so that @huggingface/jinja's lexer reads it as jinja2's
 * lexer reads it under transformers' settings (trim_blocks, lstrip_blocks): line endings
 * normalised to \n, lstrip_blocks and trim_blocks applied here with their `{%+` / `+%}`
 * exceptions, string literals re-written with only the escapes the library knows (Python's
 * \N{...}, \U..., octal and unknown escapes such as "\d" included), number literals the library
 * cannot read (1e-7, 1_000, 0x1F) written out, and {% raw %} blocks turned into string
 * expressions. The rest (including `-` whitespace control) is left to the library.
 */

const NAMED: Record<string, string> = { BULLET: "•", "NO-BREAK SPACE": "\u00a0", "EM DASH": "—", "EN DASH": "–", "HORIZONTAL ELLIPSIS": "…" };

/** Python's decoding of a string literal's body (jinja2 decodes with "unicode-escape") */
function decodePythonString(body: string): string {
  return body.replace(/\\(N\{([^}]*)\}|U([0-9a-fA-F]{8})|u([0-9a-fA-F]{4})|x([0-9a-fA-F]{2})|([0-7]{1,3})|([\s\S]))/g, (whole, _e, name?: string, u8?: string, u4?: string, x2?: string, oct?: string, ch?: string) => {
    if (name !== undefined) {
      const c = NAMED[name.toUpperCase()];
      if (c === undefined) throw new SyntaxError(`unknown Unicode character name in \\N{${name}}`);
      return c;
    }
    const hex = u8 ?? u4 ?? x2;
    if (hex !== undefined) return String.fromCodePoint(parseInt(hex, 16));
    if (oct !== undefined) return String.fromCodePoint(parseInt(oct, 8));
    const simple: Record<string, string> = { n: "\n", t: "\t", r: "\r", b: "\b", f: "\f", v: "\v", a: "\x07", "0": "\0", "\\": "\\", "'": "'", '"': '"', "\n": "" };
    // an unknown escape keeps its backslash, as Python's unicode-escape does
    return simple[ch!] ?? whole;
  });
}

/** a string as a literal the library decodes back to it */
const encodeForLibrary = (s: string): string =>
  `"${s.replace(/[\\"]|[^\x20-\x7e]/g, (c) => (c === "\\" || c === '"' ? `\\${c}` : [...c].map((u) => `\\u${u.charCodeAt(0).toString(16).padStart(4, "0")}`).join("")))}"`;

/** a Python number literal the library cannot read, as one it can (the same value, float stays float) */
function rewriteNumber(text: string): string {
  const t = text.replace(/_/g, "");
  if (/^0[xob]/i.test(t)) return String(Number(t));
  if (!/e/i.test(t)) return t;
  const x = Number(t);
  // a double of 2^53 or more is an integer, written out exactly; a small one needs enough decimals for the same double
  const plain = Math.abs(x) >= 2 ** 53 ? BigInt(x).toString() : x !== 0 && Math.abs(x) < 1e-6 ? x.toFixed(100).replace(/0+$/, "") : String(x);
  return plain.includes(".") ? plain : `${plain}.0`;
}

/** the source as the library's lexer (with lstrip_blocks and trim_blocks off) should see it */
export function prepareSource(source: string): string {
  const src = source.replace(/\r\n?/g, "\n");
  let out = "";
  let i = 0;
  let trimNext = false;
  while (i < src.length) {
    const open = src.slice(i).search(/\{[{%#]/);
    const at = open < 0 ? src.length : i + open;
    let text = src.slice(i, at);
    const atLineStart = i === 0 || src[i - 1] === "\n" || (trimNext && text.startsWith("\n"));
    if (trimNext && text.startsWith("\n")) text = text.slice(1);
    trimNext = false;
    if (at >= src.length) { out += text; break; }
    const kind = src[at + 1]!;
    const plus = src[at + 2] === "+";
    // lstrip_blocks: spaces and tabs from the line's start to a block or comment tag go (not with {%+, nor before {{)
    if (kind !== "{" && !plus) {
      const lineStart = text.lastIndexOf("\n") + 1;
      if (/^[ \t]*$/.test(text.slice(lineStart)) && (lineStart > 0 || atLineStart)) text = text.slice(0, lineStart);
    }
    out += text;
    if (kind === "#") {
      const end = src.indexOf("#}", at + 2);
      if (end < 0) { out += src.slice(at); break; }
      out += src.slice(at, end + 2);
      trimNext = src[end - 1] !== "+";
      i = end + 2;
      continue;
    }
    // a tag: copy it, re-writing its string and number literals, up to its closer outside brackets
    const closer = kind === "{" ? "}}" : "%}";
    let j = at + (plus ? 3 : 2);
    out += `{${kind}`;
    let depth = 0;
    let closed = false;
    let tag = "";
    while (j < src.length) {
      const c = src[j]!;
      if (c === "'" || c === '"') {
        let k = j + 1;
        while (k < src.length && src[k] !== c) k += src[k] === "\\" ? 2 : 1;
        if (k >= src.length) { tag += src.slice(j); j = src.length; break; }
        tag += encodeForLibrary(decodePythonString(src.slice(j + 1, k)));
        j = k + 1;
        continue;
      }
      if (/[0-9]/.test(c) && !/[\w.]/.test(src[j - 1] ?? "")) {
        const m = /^(0[xX][0-9a-fA-F_]+|0[oO][0-7_]+|0[bB][01_]+|\d[\d_]*(\.\d[\d_]*)?([eE][+-]?\d[\d_]*)?)/.exec(src.slice(j))!;
        tag += rewriteNumber(m[0]);
        j += m[0].length;
        continue;
      }
      if ("([{".includes(c)) depth++;
      else if (")]}".includes(c) && depth > 0) depth--;
      if (depth === 0 && src.startsWith(closer, j)) { closed = true; break; }
      if (depth === 0 && kind === "%" && src.startsWith("+%}", j)) { j++; closed = true; break; }
      tag += c;
      j++;
    }
    const keepNewline = src[j - 1] === "+" && kind === "%";
    out += tag;
    if (!closed) break;
    out += closer;
    i = j + 2;
    trimNext = kind === "%" && !keepNewline;
    // {% raw %}...{% endraw %}: the text between, as written
    if (kind === "%" && /^\s*-?\s*raw\s*-?\s*$/.test(tag.replace(/^-/, ""))) {
      const end = /\{%-?\s*endraw\s*(-?)%\}/.exec(src.slice(i));
      if (end) {
        out = out.slice(0, out.length - tag.length - 4);
        let body = src.slice(i, i + end.index);
        if (tag.trimEnd().endsWith("-")) body = body.trimStart();
        if (end[0].startsWith("{%-")) body = body.trimEnd();
        out += `{{ ${encodeForLibrary(body)} }}`;
        i += end.index + end[0].length;
        trimNext = end[1] !== "-";
      }
    }
  }
  return out;
}
