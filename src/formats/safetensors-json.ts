/**
 * A strict JSON parser for safetensors headers. `JSON.parse` silently keeps the last of two
 * equal keys; the reference implementation (serde) rejects a header whose object repeats a
 * key, and so must we: two entries for one tensor name would make "which bytes are this
 * tensor" ambiguous. Nesting is bounded so a hostile header cannot exhaust the stack.
 */

export type JsonValue = null | boolean | number | string | JsonValue[] | { [k: string]: JsonValue };

const MAX_DEPTH = 64;

export class JsonSyntaxError extends Error {}

/** an object with more members than the caller allows (`maxMembers`) */
export class JsonTooLargeError extends Error {}

/**
 * `maxMembers` bounds every object's member count: a 19 MB header of 2M `__metadata__` keys took
 * 816 MB and 29 s to read (the members, then Object.entries over a dictionary-mode object).
 */
export function parseStrictJson(text: string, maxMembers = Number.POSITIVE_INFINITY): JsonValue {
  let i = 0;
  const fail = (what: string): never => {
    throw new JsonSyntaxError(`${what} at character ${i}`);
  };
  const ws = () => {
    while (i < text.length) {
      const c = text.charCodeAt(i);
      if (c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09) i++;
      else break;
    }
  };
  const str = (): string => {
    // the JSON string grammar is the same as JS's JSON.parse for one string literal
    const start = i++;
    while (i < text.length) {
      const c = text.charCodeAt(i);
      if (c === 0x22) break;
      if (c === 0x5c) i++;
      else if (c < 0x20) fail("control character in a string");
      i++;
    }
    if (i >= text.length) fail("unterminated string");
    i++;
    try {
      return JSON.parse(text.slice(start, i)) as string;
    } catch {
      return fail("bad string escape");
    }
  };
  const value = (depth: number): JsonValue => {
    if (depth > MAX_DEPTH) fail(`nesting deeper than ${MAX_DEPTH}`);
    ws();
    const c = text[i];
    if (c === "{") {
      i++;
      const obj: { [k: string]: JsonValue } = Object.create(null) as { [k: string]: JsonValue };
      const seen = new Set<string>();
      ws();
      if (text[i] === "}") { i++; return obj; }
      for (;;) {
        ws();
        if (text[i] !== '"') fail("expected a string key");
        const key = str();
        if (seen.has(key)) throw new JsonSyntaxError(`duplicate key ${JSON.stringify(key)}`);
        seen.add(key);
        if (seen.size > maxMembers) throw new JsonTooLargeError(`an object of more than ${maxMembers} members`);
        ws();
        if (text[i] !== ":") fail("expected ':'");
        i++;
        obj[key] = value(depth + 1);
        ws();
        if (text[i] === ",") { i++; continue; }
        if (text[i] === "}") { i++; return obj; }
        fail("expected ',' or '}'");
      }
    }
    if (c === "[") {
      i++;
      const arr: JsonValue[] = [];
      ws();
      if (text[i] === "]") { i++; return arr; }
      for (;;) {
        arr.push(value(depth + 1));
        ws();
        if (text[i] === ",") { i++; continue; }
        if (text[i] === "]") { i++; return arr; }
        fail("expected ',' or ']'");
      }
    }
    if (c === '"') return str();
    const m = /^(?:true|false|null|-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?)/.exec(text.slice(i, i + 64));
    if (!m) return fail("unexpected token");
    i += m[0].length;
    return m[0] === "true" ? true : m[0] === "false" ? false : m[0] === "null" ? null : Number(m[0]);
  };
  const v = value(0);
  ws();
  if (i !== text.length) fail("trailing characters after the JSON value");
  return v;
}

export function isJsonObject(v: JsonValue | undefined): v is { [k: string]: JsonValue } {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}
