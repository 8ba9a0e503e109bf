/*
 * The values a chat template computes with, modelled on the Python objects jinja2 hands a template
 * (transformers renders chat templates with jinja2, and models were trained on that rendering):
 * int and float are different types, a dict keeps any hashable key, a tuple is not a list, `==`
 * compares by value, str() and repr() write what Python writes. test/chat-template-jinja*.test.ts
 * compare the results with jinja2's.
 */

/** jinja2's Undefined: empty when written or looped over, an error when used further; `message` says why it is undefined */
export class Undefined {
  constructor(readonly message: string) {}
}

/** a Python float (a plain JS number is a Python int; an int beyond 2^53 is a bigint, as pyInt makes it) */
export class Float {
  constructor(readonly v: number) {}
}

/** markupsafe's Markup (what `|safe` returns): a str whose `+` escapes the plain str joined to it */
export class Markup {
  constructor(readonly s: string) {}
}

/** an object with attributes and no items: namespace(), a for loop's `loop` (callable in a recursive loop), groupby's groups, cycler() */
export class PyObject {
  constructor(readonly kind: string, readonly attrs: Map<string, Value>, readonly assignable = false, readonly describe?: () => string, readonly call?: Callable) {}
}

/** a function the template can call: a global, a macro, a method of a value, `caller`; a macro's attributes (name, arguments, caller, ...) are `macro` */
export class Callable {
  constructor(readonly name: string, readonly call: (args: Value[], kwargs: Map<string, Value>) => Value, readonly macro?: ReadonlyMap<string, Value>) {}
}

/**
 * What select/map/selectattr/... (generator functions) and reverse (Python's reversed()) return in
 * jinja2: an iterator, consumed by its first loop, with no len(); `origin` is the generator
 * function's name, `type` Python's type of the iterator. Written as Python writes it, with an
 * address that is not one (tests compare these with the address left out).
 */
export class Generator {
  consumed = false;
  private made: Value[] | undefined;
  /** `items` may be a function that makes them: jinja2's generator filters do their work (and fail) only when consumed */
  constructor(private readonly source: Value[] | (() => Value[]), readonly origin: string, readonly type = "generator") {}
  get items(): Value[] {
    if (this.made === undefined) this.made = typeof this.source === "function" ? this.source() : this.source;
    return this.made;
  }
  take(): Value[] {
    if (this.consumed) return [];
    this.consumed = true;
    return this.items;
  }
}

/**
 * a dict key as the Map holds it, one JS value for the keys Python finds alike: 1, 1.0 and True are
 * the number 1; a tuple is one interned array per content (keyOf); the key as the template wrote it
 * (1.0, True, a tuple) is kept beside the dict (dictSet, dictKeys), as Python keeps the first one set
 */
export type Key = string | number | bigint | null | Value[];
export type Dict = Map<Key, Value>;
/** a dict's items(), keys() or values(): iterable again and again, sized, written as dict_items([...]) */
export class DictView {
  constructor(readonly type: "dict_items" | "dict_keys" | "dict_values", readonly items: Value[]) {}
}

/** Python's bytes (what str.encode() gives): written b'...', its items ints */
export class Bytes {
  constructor(readonly b: Uint8Array) {}
}

export type Value = Undefined | null | boolean | number | bigint | Float | string | Markup | Value[] | Dict | PyObject | Callable | Generator | DictView | Bytes;

/** the arrays that are tuples (a JS array is a list) */
const TUPLES = new WeakSet<Value[]>();
export const tuple = (items: Value[]): Value[] => { TUPLES.add(items); return items; };
export const isTuple = (v: Value): v is Value[] => Array.isArray(v) && TUPLES.has(v);
export const isList = (v: Value): v is Value[] => Array.isArray(v) && !TUPLES.has(v) && !RANGES.has(v);

/**
 * the arrays that are range() objects, with their start, stop and step: iterable again and again,
 * sized and indexable like a list, but written as Python writes them (`range(0, 3)`), equal only to
 * a range, and neither added, multiplied, ordered nor JSON-serialized
 */
const RANGES = new WeakMap<Value[], readonly [number, number, number]>();
/** Python's range(start, stop, step) (step not 0) */
export function pyRange(start: number, stop: number, step: number): Value[] {
  const n = Math.max(0, Math.ceil((stop - start) / step));
  const items = Array.from({ length: n }, (_, i) => start + i * step);
  RANGES.set(items, [start, stop, step]);
  return items;
}
/** a range's start, stop and step, or undefined for what is not a range */
export const rangeOf = (v: Value): readonly [number, number, number] | undefined => (Array.isArray(v) ? RANGES.get(v) : undefined);
export const isDict = (v: Value): v is Dict => v instanceof Map;
export const isStr = (v: Value): v is string | Markup => typeof v === "string" || v instanceof Markup;
export const isNumber = (v: Value): v is number | bigint | Float | boolean => typeof v === "number" || typeof v === "bigint" || v instanceof Float || typeof v === "boolean";
export const strOf = (v: string | Markup): string => (typeof v === "string" ? v : v.s);
/** the JS number of an int, float or bool (an int beyond 2^53 rounded to the nearest double, as Python's float() rounds it) */
export const num = (v: number | bigint | Float | boolean): number => (typeof v === "number" ? v : typeof v === "boolean" || typeof v === "bigint" ? Number(v) : v.v);

/**
 * A Python int as a value: a JS number while it is exact (|x| <= 2^53), else a bigint. Python's
 * ints have no bound ('12345678901234567890'|int prints every digit), so an int is never rounded
 * to a double: arithmetic on ints goes to BigInt when a result would leave the exact range.
 */
export function pyInt(x: number | bigint): number | bigint {
  if (typeof x === "number") return Number.isSafeInteger(x) || !Number.isFinite(x) ? x : BigInt(x);
  return x >= -BigInt(Number.MAX_SAFE_INTEGER) && x <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(x) : x;
}
/** an int or bool as an exact BigInt; undefined for a float (or an int the caller passed as an inexact double) */
export const exactInt = (v: Value): bigint | undefined =>
  typeof v === "bigint" ? v : typeof v === "boolean" ? BigInt(v) : typeof v === "number" && Number.isSafeInteger(v) ? BigInt(v) : undefined;

/** Python's type name, as its error messages say it */
export function typeName(v: Value): string {
  if (v instanceof Undefined) return "Undefined";
  if (v === null) return "NoneType";
  if (typeof v === "boolean") return "bool";
  if (typeof v === "number" || typeof v === "bigint") return "int";
  if (v instanceof Float) return "float";
  if (typeof v === "string") return "str";
  if (v instanceof Markup) return "Markup";
  if (Array.isArray(v)) return isTuple(v) ? "tuple" : RANGES.has(v) ? "range" : "list";
  if (v instanceof Map) return "dict";
  if (v instanceof Generator || v instanceof DictView) return v.type;
  if (v instanceof Callable) return v.macro ? "Macro" : "function";
  if (v instanceof Bytes) return "bytes";
  return v.kind;
}

/** a template error that is the template's fault (Python's TypeError, ValueError, UndefinedError, ...), said in one line; `line` is where in the template */
export class TemplateRuntimeError extends Error {
  line: number | undefined;
}
export const fail = (message: string): never => { throw new TemplateRuntimeError(message); };

/** jinja2's Undefined, used where it cannot be: the error its message describes */
export function checkDefined<T extends Value>(v: T): Exclude<T, Undefined> {
  if (v instanceof Undefined) fail(v.message);
  return v as Exclude<T, Undefined>;
}

// ---- conversion from and to JS data ----

/** JS data (JSON-like: what a caller passes as messages and variables) as template values */
export function fromJS(x: unknown, seen = new Set<object>()): Value {
  if (x === undefined) return new Undefined("a value is undefined");
  if (x === null || typeof x === "boolean" || typeof x === "string") return x;
  if (typeof x === "number") {
    if (!Number.isInteger(x)) return new Float(x);
    // an integer past 2^53 is the int its JSON text names (123456789012345680000), or a float where JSON writes an exponent (1e+21), as Python's json reads them
    return Number.isSafeInteger(x) ? x : String(x).includes("e") ? new Float(x) : BigInt(String(x));
  }
  if (typeof x === "bigint") return pyInt(x);
  if (typeof x === "function") return new Callable(x.name || "function", (args) => fromJS((x as (...a: unknown[]) => unknown)(...args.map(toJS))));
  if (typeof x !== "object") return String(x);
  if (seen.has(x)) fail("a variable given to the template refers to itself");
  seen.add(x);
  try {
    if (Array.isArray(x)) return x.map((e) => fromJS(e, seen));
    const d = new Map<Key, Value>();
    if (x instanceof Map) for (const [k, v] of x) d.set(k as Key, fromJS(v, seen));
    // (a loop, not entries().filter().map(): a chat of 100k messages converts each of them before every render)
    else for (const k in x) if (Object.hasOwn(x, k) && (x as Record<string, unknown>)[k] !== undefined) d.set(k, fromJS((x as Record<string, unknown>)[k], seen));
    return d;
  } finally {
    seen.delete(x);
  }
}

/** a template value as JS data (for a JS function the template calls) */
export function toJS(v: Value): unknown {
  if (v instanceof Undefined) return undefined;
  if (v instanceof Float) return v.v;
  if (v instanceof Markup) return v.s;
  if (Array.isArray(v)) return v.map(toJS);
  if (v instanceof Generator || v instanceof DictView) return v.items.map(toJS);
  if (v instanceof Map) return Object.fromEntries(dictEntries(v).map(([k, x]) => [str(k), toJS(x)]));
  if (v instanceof PyObject) return Object.fromEntries([...v.attrs].map(([k, x]) => [k, toJS(x)]));
  if (v instanceof Callable) return v.call;
  return v;
}

// ---- str() and repr() ----

/** Python's repr() of a str: single quotes unless the text has ' and no ", non-printable characters escaped */
export function reprString(s: string): string {
  const quote = s.includes("'") && !s.includes('"') ? '"' : "'";
  let out = quote;
  for (const ch of s) {
    const c = ch.codePointAt(0)!;
    if (ch === quote || ch === "\\") out += `\\${ch}`;
    else if (ch === "\n") out += "\\n";
    else if (ch === "\r") out += "\\r";
    else if (ch === "\t") out += "\\t";
    // str.isprintable(): not a control, format, surrogate, private-use, unassigned or separator character (except the space)
    else if (ch !== " " && /[\p{C}\p{Z}]/u.test(ch)) out += c < 0x100 ? `\\x${c.toString(16).padStart(2, "0")}` : c < 0x10000 ? `\\u${c.toString(16).padStart(4, "0")}` : `\\U${c.toString(16).padStart(8, "0")}`;
    else out += ch;
  }
  return out + quote;
}

/** Python's repr() of a float: the shortest digits, fixed notation for exponents -4..15, else 1e-05 / 1e+16 */
export function reprFloat(x: number): string {
  if (Number.isNaN(x)) return "nan";
  if (!Number.isFinite(x)) return x > 0 ? "inf" : "-inf";
  if (x === 0) return Object.is(x, -0) ? "-0.0" : "0.0";
  const [digits, exp] = x.toExponential().split("e") as [string, string];
  const e = Number(exp);
  if (e < -4 || e >= 16) return `${digits}e${e < 0 ? "-" : "+"}${String(Math.abs(e)).padStart(2, "0")}`;
  const fixed = String(x).includes("e") ? x.toFixed(Math.max(0, -e + (digits.replace(/[-.]/g, "").length - 1))) : String(x);
  return fixed.includes(".") ? fixed : `${fixed}.0`;
}

/**
 * x with `digits` decimals as Python writes it ('%.2f', round()): the exact binary value rounded,
 * a tie to even (JS's toFixed rounds a tie away from zero: 2.25 -> "2.3" where Python has "2.2")
 */
export function toFixed(x: number, digits: number): string {
  if (!Number.isFinite(x)) return x.toFixed(digits);
  // JS's toFixed writes 1e21 and past with an exponent; Python writes every digit (a double that large is an integer, which BigInt keeps exact)
  if (Math.abs(x) >= 1e21) return `${BigInt(x)}${digits > 0 ? `.${"0".repeat(digits)}` : ""}`;
  // toFixed gives the exact decimal expansion with enough digits (a double's fraction has at most 1074)
  const exact = x.toFixed(Math.min(100, digits + 40));
  const tail = exact.slice(exact.indexOf(".") + 1 + digits);
  if (!/^50*$/.test(tail)) return x.toFixed(digits);
  // a tie: toFixed rounds it away from zero, right when that makes the last digit even
  const truncated = exact.slice(0, exact.length - tail.length).replace(/\.$/, "");
  return Number(truncated.at(-1)) % 2 === 0 ? truncated : x.toFixed(digits);
}

/** where Python writes an object's address (which cannot be the same) */
const NO_ADDRESS = "0x7f0000000000";

/** the lists and dicts whose repr() is being written: one met again inside itself is written [...] / {...}, as Python does */
const REPRING = new Set<object>();
function guarded<T>(container: object, write: () => T): T {
  REPRING.add(container);
  try {
    return write();
  } finally {
    REPRING.delete(container);
  }
}

/** Python's repr() of a value, as str() shows the items of a list or dict */
export function repr(v: Value): string {
  if (typeof v === "string") return reprString(v);
  if (v instanceof Markup) return `Markup(${reprString(v.s)})`;
  if (v instanceof Float) return reprFloat(v.v);
  if (typeof v === "number" || typeof v === "bigint") return String(v);
  if (typeof v === "boolean") return v ? "True" : "False";
  if (v === null) return "None";
  if (v instanceof Undefined) return "Undefined";
  if (Array.isArray(v)) {
    const range = RANGES.get(v);
    if (range) return `range(${range[0]}, ${range[1]}${range[2] === 1 ? "" : `, ${range[2]}`})`;
    if (!isTuple(v) && REPRING.has(v)) return "[...]";
    const items = guarded(v, () => v.map(repr));
    if (!isTuple(v)) return `[${items.join(", ")}]`;
    return items.length === 1 ? `(${items[0]},)` : `(${items.join(", ")})`;
  }
  if (v instanceof Map) return REPRING.has(v) ? "{...}" : guarded(v, () => `{${dictEntries(v).map(([k, x]) => `${repr(k)}: ${repr(x)}`).join(", ")}}`);
  if (v instanceof Generator) return v.type === "generator" ? `<generator object ${v.origin} at ${NO_ADDRESS}>` : `<${v.type} object at ${NO_ADDRESS}>`;
  if (v instanceof DictView) return `${v.type}(${repr(v.items)})`;
  if (v instanceof Bytes) return reprBytes(v.b);
  if (v instanceof Callable) {
    if (!v.macro) return `<function ${v.name}>`;
    const name = v.macro.get("name") ?? null;
    return `<Macro ${name === null ? "anonymous" : repr(name)}>`;
  }
  return v.describe ? v.describe() : `<${v.kind}>`;
}

/** Python's repr() of bytes: in ' (or " when only ' is in them), \\t \\n \\r and \\xhh for what is not printable ASCII */
function reprBytes(b: Uint8Array): string {
  const q = b.includes(0x27) && !b.includes(0x22) ? '"' : "'";
  let out = "";
  for (const x of b) {
    const c = String.fromCharCode(x);
    out += c === q || c === "\\" ? `\\${c}` : x === 9 ? "\\t" : x === 10 ? "\\n" : x === 13 ? "\\r" : x < 0x20 || x >= 0x7f ? `\\x${x.toString(16).padStart(2, "0")}` : c;
  }
  return `b${q}${out}${q}`;
}

/** Python's str() of a value, as `{{ x }}`, `~` and `|string` write it (an undefined value writes nothing) */
export function str(v: Value): string {
  if (typeof v === "string") return v;
  if (v instanceof Markup) return v.s;
  if (v instanceof Undefined) return "";
  return repr(v);
}

// ---- truth, equality, order ----

/** Python's bool() */
export function truthy(v: Value): boolean {
  if (v instanceof Undefined || v === null) return false;
  if (typeof v === "boolean") return v;
  if (typeof v === "number") return v !== 0;
  if (typeof v === "bigint") return v !== 0n;
  if (v instanceof Float) return v.v !== 0;
  if (typeof v === "string") return v.length > 0;
  if (v instanceof Markup) return v.s.length > 0;
  if (Array.isArray(v)) return v.length > 0;
  if (v instanceof Map) return v.size > 0;
  if (v instanceof DictView) return v.items.length > 0;
  if (v instanceof Bytes) return v.b.length > 0;
  return true;
}

/** Python's == (by value: lists item by item, dicts key by key; a list never equals a tuple or a range; 1 == 1.0 == True) */
export function equals(a: Value, b: Value): boolean {
  if (isNumber(a) && isNumber(b)) return compareNumbers(a, b) === 0;
  if (isStr(a) && isStr(b)) return strOf(a) === strOf(b);
  if (a instanceof Bytes && b instanceof Bytes) return a.b.length === b.b.length && a.b.every((x, i) => x === b.b[i]);
  if (Array.isArray(a) && Array.isArray(b)) {
    return typeName(a) === typeName(b) && a.length === b.length && a.every((x, i) => equals(x, b[i]!));
  }
  if (a instanceof Map && b instanceof Map) {
    if (a.size !== b.size) return false;
    for (const [k, x] of a) {
      if (!b.has(k) || !equals(x, b.get(k)!)) return false;
    }
    return true;
  }
  if (a instanceof Undefined && b instanceof Undefined) return true;
  return a === b;
}

/** the interned tuple keys, by their content written out (keyText) */
const TUPLE_KEYS = new Map<string, Value[]>();
const keyText = (k: Key): string =>
  typeof k === "string" ? JSON.stringify(k) : typeof k === "bigint" ? `${k}n` : Array.isArray(k) ? `(${k.map((x) => keyText(x as Key)).join(",")})` : String(k);

/** a dict key as the Map holds it: Python hashes 1, 1.0 and True alike, and a tuple by its items; TypeError for what is unhashable */
export function keyOf(v: Value): Key {
  if (v instanceof Float) return Number.isInteger(v.v) && !Number.isSafeInteger(v.v) ? BigInt(v.v) : v.v;
  if (typeof v === "boolean") return Number(v);
  if (v instanceof Markup) return v.s;
  if (v === null || typeof v === "string" || typeof v === "number" || typeof v === "bigint") return v;
  if (isTuple(v)) {
    const items = v.map(keyOf);
    const text = keyText(items);
    let interned = TUPLE_KEYS.get(text);
    if (!interned) TUPLE_KEYS.set(text, (interned = tuple(items)));
    return interned;
  }
  return fail(`unhashable type: '${typeName(v)}'`);
}

/** the keys of the dicts that were set with a key other than the Map's (1.0, True, a tuple): the one first set, which Python keeps and writes */
const WRITTEN_KEYS = new WeakMap<Dict, Map<Key, Value>>();

/** Python's d[k] = v */
export function dictSet(d: Dict, k: Value, v: Value): void {
  const key = keyOf(k);
  if (!d.has(key) && key !== k) {
    let written = WRITTEN_KEYS.get(d);
    if (!written) WRITTEN_KEYS.set(d, (written = new Map()));
    written.set(key, k);
  }
  d.set(key, v);
}

/** a key of the dict as the template set it */
export const dictKey = (d: Dict, key: Key): Value => WRITTEN_KEYS.get(d)?.get(key) ?? key;
/** the dict's keys, as the template set them */
export const dictKeys = (d: Dict): Value[] => [...d.keys()].map((k) => dictKey(d, k));
/** the dict's (key, value) pairs, the keys as the template set them */
export const dictEntries = (d: Dict): [Value, Value][] => [...d].map(([k, v]) => [dictKey(d, k), v]);
/** a copy of the dict, with the keys as the template set them */
export function dictCopy(d: Dict): Dict {
  const copy: Dict = new Map(d);
  const written = WRITTEN_KEYS.get(d);
  if (written) WRITTEN_KEYS.set(copy, new Map(written));
  return copy;
}

/** the dict's entry for a key, as Python finds it (True finds 1, 1 finds True, (1, 2) finds (1.0, 2)) */
export function dictGet(d: Dict, k: Value): Value | undefined {
  return d.get(keyOf(k));
}

/** Python's <, >, <=, >= as a sign: numbers, strings, lists and tuples item by item; TypeError otherwise */
export function compare(a: Value, b: Value, op = "<"): number {
  if (isNumber(a) && isNumber(b)) return compareNumbers(a, b);
  if (isStr(a) && isStr(b)) {
    const x = strOf(a), y = strOf(b);
    return x === y ? 0 : codePointLess(x, y) ? -1 : 1;
  }
  if (Array.isArray(a) && Array.isArray(b) && typeName(a) === typeName(b) && !RANGES.has(a)) {
    for (let i = 0; i < Math.min(a.length, b.length); i++) {
      if (!equals(a[i]!, b[i]!)) return compare(a[i]!, b[i]!, op);
    }
    return a.length - b.length;
  }
  // (jinja2's Undefined fails any ordering with its own error: "'dict object' has no attribute 'a'")
  checkDefined(a);
  checkDefined(b);
  return fail(`'${op}' not supported between instances of '${typeName(a)}' and '${typeName(b)}'`);
}

/**
 * two numbers' order as Python finds it: ints exactly (2^53 + 1 > 2^53), an int and a float exactly
 * too (2^53 + 1 > 2.0 ** 53, where rounding the int to a double would make them equal), two floats
 * as doubles (NaN where one is NaN: every comparison false)
 */
function compareNumbers(a: number | bigint | Float | boolean, b: number | bigint | Float | boolean): number {
  const i = exactInt(a), j = exactInt(b);
  if (i !== undefined && j !== undefined) return i < j ? -1 : i > j ? 1 : 0;
  if (i !== undefined) return intVersusDouble(i, num(b));
  if (j !== undefined) return -intVersusDouble(j, num(a));
  const x = num(a), y = num(b);
  return x < y ? -1 : x > y ? 1 : x === y ? 0 : Number.NaN;
}

/** an exact int against a double, without rounding the int */
function intVersusDouble(i: bigint, y: number): number {
  if (Number.isNaN(y)) return Number.NaN;
  if (!Number.isFinite(y)) return y > 0 ? -1 : 1;
  // i < y exactly when i <= floor(y) and y is not an integer, or i < y where y is one
  const floor = BigInt(Math.floor(y));
  if (Number.isInteger(y)) return i < floor ? -1 : i > floor ? 1 : 0;
  return i <= floor ? -1 : 1;
}

/** Python orders strings by code point (JS's < compares UTF-16 units, which puts U+FFFF after 😀) */
function codePointLess(x: string, y: string): boolean {
  const a = [...x], b = [...y];
  for (let i = 0; i < Math.min(a.length, b.length); i++) {
    if (a[i] !== b[i]) return a[i]!.codePointAt(0)! < b[i]!.codePointAt(0)!;
  }
  return a.length < b.length;
}

/** the values a dict of these holds as keys (keyOf): Python hashes them by value */
export const isKey = (v: Value): boolean => v === null || typeof v !== "object" || v instanceof Float || v instanceof Markup || (isTuple(v) && v.every(isKey));
/** Python's hash() succeeds: not a list, dict or dict view, nor a tuple holding one */
export const hashable = (v: Value): boolean => {
  if (v instanceof Map || v instanceof DictView || isList(v)) return false;
  return !isTuple(v) || v.every(hashable);
};

/** Python's `x in container` */
export function contains(container: Value, x: Value): boolean {
  if (isStr(container)) {
    if (!isStr(x)) fail(`'in <string>' requires string as left operand, not ${typeName(x)}`);
    return strOf(container).includes(strOf(x as string));
  }
  if (Array.isArray(container)) return container.some((e) => equals(e, x));
  if (container instanceof Generator) return container.take().some((e) => equals(e, x));
  if (container instanceof DictView) return container.items.some((e) => equals(e, x));
  if (container instanceof Map) {
    if (isKey(x)) return dictGet(container, x) !== undefined;
    // a tuple holding a namespace or the like, a range of hashable items, a namespace, function, generator or Undefined is hashable in Python, and never one of these dicts' keys
    if (!hashable(x)) fail(`unhashable type: '${typeName(x)}'`);
    return false;
  }
  if (container instanceof Undefined) return false;
  return fail(`argument of type '${typeName(container)}' is not iterable`);
}

/** the items a for loop, list() or a filter walks: a str's characters, a dict's keys; TypeError for what holds no items */
export function iterate(v: Value): Value[] {
  if (Array.isArray(v)) return v;
  if (typeof v === "string") return [...v];
  // (Python iterates a Markup as a str: its characters are plain str; an item taken by index is Markup)
  if (v instanceof Markup) return [...v.s];
  if (v instanceof Map) return dictKeys(v);
  if (v instanceof Generator) return v.take();
  if (v instanceof DictView) return v.items;
  if (v instanceof Bytes) return [...v.b];
  if (v instanceof Undefined) return [];
  return fail(`'${typeName(v)}' object is not iterable`);
}

/** Python's len() */
export function length(v: Value): number {
  if (isStr(v)) return [...strOf(v)].length;
  if (Array.isArray(v)) return v.length;
  if (v instanceof Map) return v.size;
  if (v instanceof DictView) return v.items.length;
  if (v instanceof Bytes) return v.b.length;
  if (v instanceof Undefined) return 0;
  return fail(`object of type '${typeName(v)}' has no len()`);
}

// ---- JSON (transformers' tojson is json.dumps with ensure_ascii=False) ----

export interface JsonOptions {
  indent?: string | undefined;
  itemSeparator?: string | undefined;
  keySeparator?: string | undefined;
  sortKeys?: boolean | undefined;
  ensureAscii?: boolean | undefined;
}

/** Python's json.dumps of a value */
export function toJson(v: Value, options: JsonOptions = {}, depth = 0): string {
  const itemSep = options.itemSeparator ?? (options.indent !== undefined ? "," : ", ");
  const keySep = options.keySeparator ?? ": ";
  const quote = (s: string) => {
    const q = JSON.stringify(s);
    return options.ensureAscii ? q.replace(/[\u007f-\uffff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`) : q;
  };
  const wrap = (open: string, close: string, parts: string[]) => {
    if (parts.length === 0) return open + close;
    if (options.indent === undefined) return open + parts.join(itemSep) + close;
    const inner = `\n${options.indent.repeat(depth + 1)}`;
    return `${open}${inner}${parts.join(itemSep + inner)}\n${options.indent.repeat(depth)}${close}`;
  };
  if (v === null) return "null";
  if (typeof v === "boolean") return v ? "true" : "false";
  if (typeof v === "number" || typeof v === "bigint") return String(v);
  if (v instanceof Float) return Number.isNaN(v.v) ? "NaN" : !Number.isFinite(v.v) ? (v.v > 0 ? "Infinity" : "-Infinity") : reprFloat(v.v);
  if (isStr(v)) return quote(strOf(v));
  if (Array.isArray(v) && !RANGES.has(v)) return wrap("[", "]", v.map((x) => toJson(x, options, depth + 1)));
  if (v instanceof Map) {
    // json.dumps writes a key that is not a str as JSON writes it (1.0 -> "1.0", True -> "true"); a tuple key is a TypeError
    const jsonKey = (k: Value): string =>
      isStr(k) ? strOf(k) : k === null || typeof k === "boolean" || typeof k === "number" || typeof k === "bigint" || k instanceof Float ? toJson(k)
        : fail(`keys must be str, int, float, bool or None, not ${typeName(k)}`);
    // sort_keys sorts the items by the keys as they are (sorted(d.items())): True before 1.5, a str and None a TypeError
    const items = dictEntries(v);
    if (options.sortKeys) items.sort(([a], [b]) => compare(a, b));
    const entries = items.map(([k, x]) => [jsonKey(k), x] as const);
    return wrap("{", "}", entries.map(([k, x]) => `${quote(k)}${keySep}${toJson(x, options, depth + 1)}`));
  }
  return fail(`Object of type ${typeName(v)} is not JSON serializable`);
}
