/**
 * JSON read a prefix at a time, for tool calls and replies that are still being generated: where
 * a value ends, or that the text so far is a valid beginning of one (it may still end well), or
 * where it stops being JSON. Iterative (an explicit stack), so a reply nesting thousands of
 * brackets cannot overflow the call stack.
 */

/** a value that ends at `end`; or text that runs out before the value ends (`incomplete`), or is not JSON from `end` on */
export type Scan = { readonly ok: true; readonly end: number } | { readonly ok: false; readonly end: number; readonly incomplete: boolean };

const isWs = (c: number) => c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;

export function skipWs(s: string, i: number): number {
  while (i < s.length && isWs(s.charCodeAt(i))) i++;
  return i;
}

const cut = (end: number): Scan => ({ ok: false, end, incomplete: true });
const bad = (end: number): Scan => ({ ok: false, end, incomplete: false });

/** the JSON string starting at s[i] (a quote) */
export function scanString(s: string, i: number): Scan {
  for (let j = i + 1; j < s.length; j++) {
    const c = s.charCodeAt(j);
    if (c === 0x22) return { ok: true, end: j + 1 };
    if (c < 0x20) return bad(j);
    if (c !== 0x5c) continue;
    if (j + 1 >= s.length) return cut(s.length);
    const e = s[j + 1]!;
    if (e === "u") {
      for (let k = j + 2; k < j + 6; k++) {
        if (k >= s.length) return cut(s.length);
        if (!/[0-9a-fA-F]/.test(s[k]!)) return bad(k);
      }
      j += 5;
    } else if ("\"\\/bfnrt".includes(e)) j++;
    else return bad(j + 1);
  }
  return cut(s.length);
}

/**
 * The characters of the JSON string at s[i] decoded as far as they are certain: an escape
 * sequence or a high surrogate cut off by the end of the text waits for the rest.
 */
export function decodeStringPrefix(s: string, i: number): string {
  const r = scanString(s, i);
  if (r.ok) return JSON.parse(s.slice(i, r.end)) as string;
  let end = r.end;
  // back to the last character that cannot be part of an unfinished escape
  const back = s.lastIndexOf("\\", end - 1);
  if (back > i && end - back < 6) {
    let slashes = 0;
    for (let k = back; k > i && s[k] === "\\"; k--) slashes++;
    if (slashes % 2 === 1) end = back;
  }
  let text = JSON.parse(`${s.slice(i, end)}"`) as string;
  if (r.incomplete && text.length > 0 && /[\uD800-\uDBFF]$/.test(text)) text = text.slice(0, -1);
  return text;
}

const LITERALS = ["true", "false", "null"];

function scanScalar(s: string, i: number): Scan {
  const c = s[i]!;
  if (c === "\"") return scanString(s, i);
  for (const lit of LITERALS) {
    if (lit[0] !== c) continue;
    for (let k = 1; k < lit.length; k++) {
      if (i + k >= s.length) return cut(s.length);
      if (s[i + k] !== lit[k]) return bad(i + k);
    }
    return { ok: true, end: i + lit.length };
  }
  if (c === "-" || (c >= "0" && c <= "9")) return scanNumber(s, i);
  return bad(i);
}

/** -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)? — a number at the end of the text may go on */
function scanNumber(s: string, i: number): Scan {
  let j = i;
  if (s[j] === "-") j++;
  const digits = (): number => {
    const from = j;
    while (j < s.length && s[j]! >= "0" && s[j]! <= "9") j++;
    return j - from;
  };
  if (j >= s.length) return cut(j);
  if (s[j] === "0") j++;
  else if (digits() === 0) return bad(j);
  if (j >= s.length) return cut(j);
  if (s[j] === ".") {
    j++;
    if (digits() === 0) return j >= s.length ? cut(j) : bad(j);
    if (j >= s.length) return cut(j);
  }
  if (s[j] === "e" || s[j] === "E") {
    j++;
    if (s[j] === "+" || s[j] === "-") j++;
    if (digits() === 0) return j >= s.length ? cut(j) : bad(j);
    if (j >= s.length) return cut(j);
  }
  return { ok: true, end: j };
}

enum Want { Value, ValueOrClose, Key, KeyOrClose, Colon, After }

/** the JSON value that starts at s[i] (no whitespace before it) */
export function scanValue(s: string, i: number): Scan {
  const stack: string[] = [];
  let want = Want.Value;
  for (;;) {
    if (want === Want.After && stack.length === 0) return { ok: true, end: i };
    if (want !== Want.Value || stack.length > 0) i = skipWs(s, i);
    if (i >= s.length) return cut(s.length);
    const c = s[i]!;
    switch (want) {
      case Want.Value:
      case Want.ValueOrClose: {
        if (want === Want.ValueOrClose && c === "]") { stack.pop(); i++; want = Want.After; break; }
        if (c === "{") { stack.push("}"); i++; want = Want.KeyOrClose; break; }
        if (c === "[") { stack.push("]"); i++; want = Want.ValueOrClose; break; }
        const r = scanScalar(s, i);
        if (!r.ok) return r;
        i = r.end;
        want = Want.After;
        break;
      }
      case Want.Key:
      case Want.KeyOrClose: {
        if (want === Want.KeyOrClose && c === "}") { stack.pop(); i++; want = Want.After; break; }
        if (c !== "\"") return bad(i);
        const r = scanString(s, i);
        if (!r.ok) return r;
        i = r.end;
        want = Want.Colon;
        break;
      }
      case Want.Colon:
        if (c !== ":") return bad(i);
        i++;
        want = Want.Value;
        break;
      case Want.After: {
        const close = stack[stack.length - 1]!;
        if (c === ",") { i++; want = close === "}" ? Want.Key : Want.Value; break; }
        if (c !== close) return bad(i);
        stack.pop();
        i++;
        break;
      }
    }
  }
}
