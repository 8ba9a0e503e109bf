/**
 * JSON read a prefix at a time, for tool calls and replies that are still being generated: where
 * a value ends, or that the text so far is a valid beginning of one (it may still end well), or
 * where it stops being JSON. Iterative (an explicit stack), so a reply nesting thousands of
 * brackets cannot overflow the call stack.
 */

/**
 * A value that ends at `end`; or text that runs out before the value ends (`incomplete`: for a
 * string, `resume` is where its scan may go on once more text has come, outside any escape), or is
 * not JSON from `end` on.
 */
export type Scan = { readonly ok: true; readonly end: number } | { readonly ok: false; readonly end: number; readonly incomplete: boolean; readonly resume?: number };

/**
 * Where scans of a text that only grows (a reply being generated, read again after each token)
 * stopped, so the next scan of the same value goes on from there instead of from its start: a
 * value's state where the text ran out, a string's decoded text so far. One memo serves one text.
 */
export class ScanMemo {
  readonly values = new Map<number, Scan | Checkpoint>();
  readonly strings = new Map<number, { readonly upTo: number; readonly text: string }>();
}

/**
 * The string made flat: a memo's text grows by one piece per reading, and V8 joins such pieces
 * into a chain that every later use walks from end to end; a flat one is copied at memory speed.
 * (charCodeAt flattens the chain in place.)
 */
export function flat(s: string): string {
  s.charCodeAt(0);
  return s;
}

interface Checkpoint {
  readonly stack: readonly string[];
  readonly want: Want;
  /** the token the text ran out in (or its end, between tokens) */
  readonly at: number;
  /** the token is a string scanned clean up to here */
  readonly stringFrom?: number;
}

const isWs = (c: number) => c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;

export function skipWs(s: string, i: number): number {
  while (i < s.length && isWs(s.charCodeAt(i))) i++;
  return i;
}

const cut = (end: number, resume = end): Scan => ({ ok: false, end, incomplete: true, resume });
const bad = (end: number): Scan => ({ ok: false, end, incomplete: false });

/** the JSON string starting at s[i] (a quote), its characters known to be well-formed up to `from` */
export function scanString(s: string, i: number, from = i + 1): Scan {
  for (let j = from; j < s.length; j++) {
    const c = s.charCodeAt(j);
    if (c === 0x22) return { ok: true, end: j + 1 };
    if (c < 0x20) return bad(j);
    if (c !== 0x5c) continue;
    if (j + 1 >= s.length) return cut(s.length, j);
    const e = s[j + 1]!;
    if (e === "u") {
      for (let k = j + 2; k < j + 6; k++) {
        if (k >= s.length) return cut(s.length, j);
        if (!/[0-9a-fA-F]/.test(s[k]!)) return bad(k);
      }
      j += 5;
    } else if ("\"\\/bfnrt".includes(e)) j++;
    else return bad(j + 1);
  }
  // (a text that ends at the opening quote goes on after it)
  return cut(s.length, Math.max(from, s.length));
}

/**
 * The characters of the JSON string at s[i] decoded as far as they are certain: an escape
 * sequence or a high surrogate cut off by the end of the text waits for the rest.
 */
export function decodeStringPrefix(s: string, i: number, memo?: ScanMemo): string {
  const known = memo?.strings.get(i);
  const from = known?.upTo ?? i + 1;
  const r = scanString(s, i, from);
  if (r.ok) return (known?.text ?? "") + (JSON.parse(`"${s.slice(from, r.end)}`) as string);
  if (r.incomplete) {
    // (the text decoded so far is kept whole: a high surrogate at its end may yet get its pair)
    const text = flat((known?.text ?? "") + (JSON.parse(`"${s.slice(from, r.resume)}"`) as string));
    memo?.strings.set(i, { upTo: r.resume!, text });
    return text.length > 0 && /[\uD800-\uDBFF]$/.test(text) ? text.slice(0, -1) : text;
  }
  let end = r.end;
  // back to the last character that cannot be part of an unfinished escape
  const back = s.lastIndexOf("\\", end - 1);
  if (back > i && end - back < 6) {
    let slashes = 0;
    for (let k = back; k > i && s[k] === "\\"; k--) slashes++;
    if (slashes % 2 === 1) end = back;
  }
  return JSON.parse(`${s.slice(i, end)}"`) as string;
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

/** the JSON value that starts at s[i] (no whitespace before it); with a memo, going on from where its last scan ran out */
export function scanValue(s: string, i: number, memo?: ScanMemo): Scan {
  const start = i;
  const known = memo?.values.get(start);
  if (known && "ok" in known) return known;
  const stack: string[] = known ? [...known.stack] : [];
  let want = known ? known.want : Want.Value;
  if (known) i = known.at;
  /** the text ran out in the token at `at` (a string scanned clean up to `stringFrom`) */
  const ranOut = (at: number, stringFrom?: number): Scan => {
    memo?.values.set(start, { stack: [...stack], want, at, ...(stringFrom === undefined ? {} : { stringFrom }) });
    return cut(s.length);
  };
  const final = (r: Scan): Scan => {
    memo?.values.set(start, r);
    return r;
  };
  const string = (at: number): Scan => scanString(s, at, known?.stringFrom !== undefined && at === known.at ? known.stringFrom : at + 1);
  for (;;) {
    if (want === Want.After && stack.length === 0) return final({ ok: true, end: i });
    if (want !== Want.Value || stack.length > 0) i = skipWs(s, i);
    if (i >= s.length) return ranOut(i);
    const c = s[i]!;
    switch (want) {
      case Want.Value:
      case Want.ValueOrClose: {
        if (want === Want.ValueOrClose && c === "]") { stack.pop(); i++; want = Want.After; break; }
        if (c === "{") { stack.push("}"); i++; want = Want.KeyOrClose; break; }
        if (c === "[") { stack.push("]"); i++; want = Want.ValueOrClose; break; }
        const r = c === "\"" ? string(i) : scanScalar(s, i);
        if (!r.ok) return r.incomplete ? ranOut(i, c === "\"" ? r.resume : undefined) : final(r);
        i = r.end;
        want = Want.After;
        break;
      }
      case Want.Key:
      case Want.KeyOrClose: {
        if (want === Want.KeyOrClose && c === "}") { stack.pop(); i++; want = Want.After; break; }
        if (c !== "\"") return final(bad(i));
        const r = string(i);
        if (!r.ok) return r.incomplete ? ranOut(i, r.resume) : final(r);
        i = r.end;
        want = Want.Colon;
        break;
      }
      case Want.Colon:
        if (c !== ":") return final(bad(i));
        i++;
        want = Want.Value;
        break;
      case Want.After: {
        const close = stack[stack.length - 1]!;
        if (c === ",") { i++; want = close === "}" ? Want.Key : Want.Value; break; }
        if (c !== close) return final(bad(i));
        stack.pop();
        i++;
        break;
      }
    }
  }
}

/**
 * Where in JSON text the value that starts at `at` lies: the keys and list indexes leading to it
 * from the outermost value (`["messages", 0, "content"]`). Read from the characters up to `at`, so
 * it serves text no parse may take (nested too deep, cut off); a key that is no valid JSON string
 * keeps its raw characters.
 */
export function pathAt(text: string, at: number): (string | number)[] {
  type Frame = { list: true; index: number } | { list: false; key: string; wantKey: boolean };
  const frames: Frame[] = [];
  const marks = /[\\"[\]{},]/g;
  let start = -1;
  for (let m = marks.exec(text); m !== null && m.index < at; m = marks.exec(text)) {
    const c = text[m.index]!;
    const top = frames[frames.length - 1];
    if (start >= 0) {
      if (c === "\\") marks.lastIndex = m.index + 2; // an escape: the next character is never the string's end
      else if (c === "\"") {
        if (top && !top.list && top.wantKey) {
          top.key = keyText(text.slice(start, m.index + 1));
          top.wantKey = false;
        }
        start = -1;
      }
    } else if (c === "\"") start = m.index;
    else if (c === "{") frames.push({ list: false, key: "", wantKey: true });
    else if (c === "[") frames.push({ list: true, index: 0 });
    else if (c === "}" || c === "]") frames.pop();
    else if (top?.list) top.index++;
    else if (top) top.wantKey = true;
  }
  return frames.map((f) => (f.list ? f.index : f.key));
}

function keyText(literal: string): string {
  try {
    return JSON.parse(literal) as string;
  } catch {
    return literal.slice(1, -1);
  }
}
