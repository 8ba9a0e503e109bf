import {
  Callable, DictView, Float, Markup, Undefined, dictCopy, dictEntries, dictGet, dictKeys, fail, isDict, isList, isNumber, isStr, isTuple, num, repr, reprFloat, str, strOf, toFixed, tuple, typeName,
  type Dict, type Value,
} from "./values.js";

/*
 * The methods of Python's str, dict and list that chat templates call (`content.strip()`,
 * `'{}'.format(x)`, `message.get('x')`), Python's `%` formatting and str.format(), as CPython
 * computes them. Methods that change a list or dict are refused, as the
 * ImmutableSandboxedEnvironment transformers renders with refuses them.
 */

/** how long a string or list a method may build (checked before it is built) */
export interface SizeLimit {
  check(chars: number): void;
}

/** what str.format() needs to read `{0[key]}` and `{0.name}` fields: jinja2's item and attribute lookup */
export interface MethodContext extends SizeLimit {
  getattr(obj: Value, name: string): Value;
  getitem(obj: Value, key: Value): Value;
}

/** the characters str.isspace() is true of, which str.split() and str.strip() take as whitespace */
export const SPACE = "\\t\\n\\v\\f\\r \\x1c-\\x1f\\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000";
const SPACE_RE = new RegExp(`[${SPACE}]`, "u");
const isSpace = (c: string) => SPACE_RE.test(c);

function stripChars(s: string, chars: Value, left: boolean, right: boolean): string {
  const strip = chars === null || chars instanceof Undefined ? isSpace : ((set: Set<string>) => (c: string) => set.has(c))(new Set(str(chars)));
  const cs = [...s];
  let a = 0, b = cs.length;
  if (left) while (a < b && strip(cs[a]!)) a++;
  if (right) while (b > a && strip(cs[b - 1]!)) b--;
  return cs.slice(a, b).join("");
}

/** Python's str.islower() and str.isupper() (the `lower` and `upper` tests too) */
export const isLower = (s: string): boolean => /\p{Lowercase}/u.test(s) && !/[\p{Uppercase}\p{Lt}]/u.test(s);
export const isUpper = (s: string): boolean => /\p{Uppercase}/u.test(s) && !/[\p{Lowercase}\p{Lt}]/u.test(s);

/** Python's str.istitle(): an upper- or titlecase letter only after an uncased character, a lowercase one only after a cased one, and some cased letter */
function isTitle(s: string): boolean {
  let cased = false, previousCased = false;
  for (const c of s) {
    if (/[\p{Uppercase}\p{Lt}]/u.test(c)) {
      if (previousCased) return false;
      previousCased = cased = true;
    } else if (/\p{Lowercase}/u.test(c)) {
      if (!previousCased) return false;
      previousCased = cased = true;
    } else previousCased = false;
  }
  return cased;
}

/** Python's str.split / rsplit */
function split(s: string, sep: Value, maxsplit: number, fromRight: boolean): string[] {
  if (sep === null || sep instanceof Undefined) {
    const words = [...s.matchAll(new RegExp(`[^${SPACE}]+`, "gu"))];
    if (maxsplit < 0 || words.length <= maxsplit) return words.map((m) => m[0]);
    if (fromRight) {
      const cut = words[words.length - maxsplit - 1]!;
      const head = stripChars(s.slice(0, cut.index! + cut[0].length), null, true, true);
      return [head, ...words.slice(words.length - maxsplit).map((m) => m[0])];
    }
    const rest = words[maxsplit]!;
    return [...words.slice(0, maxsplit).map((m) => m[0]), stripChars(s.slice(rest.index!), null, false, true)];
  }
  const d = str(sep);
  if (d === "") fail("empty separator");
  const parts = s.split(d);
  if (maxsplit < 0 || parts.length <= maxsplit + 1) return parts;
  return fromRight ? [parts.slice(0, parts.length - maxsplit).join(d), ...parts.slice(parts.length - maxsplit)] : [...parts.slice(0, maxsplit), parts.slice(maxsplit).join(d)];
}

/** Python's str.title(): a letter after a letter is lower case, any other letter upper case */
export function pyTitle(s: string): string {
  let out = "", prevCased = false;
  for (const c of s) {
    const cased = c.toLowerCase() !== c.toUpperCase();
    out += cased ? (prevCased ? c.toLowerCase() : c.toUpperCase()) : c;
    prevCased = cased;
  }
  return out;
}

/** Python's str.capitalize(): the first character upper case, the rest lower case */
export const pyCapitalize = (s: string): string => {
  const [first = "", ...rest] = [...s];
  return first.toUpperCase() + rest.join("").toLowerCase();
};

/** Python's str.replace(old, new, count) */
export function pyReplace(s: string, from: string, to: string, count: number, limit: SizeLimit): string {
  if (count === 0) return s;
  const pieces = from === "" ? ["", ...[...s], ""] : s.split(from);
  if (from === "") {
    // "" matches before every character and at the end
    const cs = [...s], n = count < 0 ? cs.length + 1 : Math.min(count, cs.length + 1);
    limit.check(s.length + n * to.length);
    return cs.slice(0, n).map((c) => to + c).join("") + (n > cs.length ? to : cs.slice(n).join(""));
  }
  const n = count < 0 ? pieces.length - 1 : Math.min(count, pieces.length - 1);
  limit.check(s.length + n * Math.max(0, to.length - from.length));
  return pieces.slice(0, n + 1).join(to) + (n < pieces.length - 1 ? from + pieces.slice(n + 1).join(from) : "");
}

const intArg = (v: Value | undefined, what: string, fallback: number): number => {
  if (v === undefined || v === null) return fallback;
  if (typeof v === "number" || typeof v === "boolean") return Number(v);
  return fail(`${what}: '${typeName(v)}' object cannot be interpreted as an integer`);
};

/** Python's slice arguments of find/count/startswith: [start, end) clamped as Python clamps them (in code points) */
function window(cs: string[], start: Value | undefined, end: Value | undefined): [number, number] {
  const n = cs.length;
  const clamp = (i: number) => (i < 0 ? Math.max(0, n + i) : Math.min(i, n));
  return [clamp(intArg(start, "slice indices", 0)), clamp(intArg(end, "slice indices", n))];
}

function affix(s: string, args: Value[], ends: boolean): boolean {
  const what = ends ? "endswith" : "startswith";
  if (args.length === 0) fail(`${what}() takes at least 1 argument (0 given)`);
  const cs = [...s];
  const [a, b] = window(cs, args[1], args[2]);
  const text = cs.slice(a, b).join("");
  if (a > b) return false;
  const options = isTuple(args[0]!) ? args[0] : [args[0]!];
  return options.some((o) => {
    if (!isStr(o)) fail(`${what} first arg must be str or a tuple of str, not ${typeName(o)}`);
    return ends ? text.endsWith(strOf(o as string)) : text.startsWith(strOf(o as string));
  });
}

function find(s: string, args: Value[], fromRight: boolean): number {
  if (!isStr(args[0] ?? null)) fail(`must be str, not ${typeName(args[0] ?? null)}`);
  const cs = [...s];
  const [a, b] = window(cs, args[1], args[2]);
  const text = cs.slice(a, b), sub = [...strOf(args[0] as string)];
  const at = (i: number) => sub.every((c, j) => text[i + j] === c);
  if (fromRight) {
    for (let i = text.length - sub.length; i >= 0; i--) if (at(i)) return a + i;
  } else {
    for (let i = 0; i + sub.length <= text.length; i++) if (at(i)) return a + i;
  }
  return -1;
}

function pad(s: string, width: number, fill: Value | undefined, where: "left" | "right" | "center", limit: SizeLimit): string {
  const f = fill === undefined ? " " : str(fill);
  if ([...f].length !== 1) fail("The fill character must be exactly one character long");
  const n = [...s].length;
  if (width <= n) return s;
  limit.check(width);
  const total = width - n;
  // CPython centres with the extra character on the left when the string's length is odd... and the padding odd
  const left = where === "right" ? total : where === "left" ? 0 : Math.floor(total / 2) + (total & width & 1);
  return f.repeat(left) + s + f.repeat(total - left);
}

/** str's methods, as `value.name` finds them; undefined when str has no such method */
export function strMethod(value: string | Markup, name: string, limit: MethodContext): Callable | undefined {
  const s = strOf(value);
  // Markup's methods return Markup (and escape their str arguments); only the common ones keep that type here
  const same = (r: string) => (value instanceof Markup ? new Markup(r) : r);
  const m = (f: (args: Value[], kwargs: Map<string, Value>) => Value) => new Callable(name, f);
  const kw = (args: Value[], kwargs: Map<string, Value>, i: number, key: string) => args[i] ?? kwargs.get(key);
  switch (name) {
    case "strip": return m(([c = null]) => same(stripChars(s, c, true, true)));
    case "lstrip": return m(([c = null]) => same(stripChars(s, c, true, false)));
    case "rstrip": return m(([c = null]) => same(stripChars(s, c, false, true)));
    case "split":
    case "rsplit":
      return m((args, kwargs) => {
        const parts = split(s, kw(args, kwargs, 0, "sep") ?? null, intArg(kw(args, kwargs, 1, "maxsplit"), "maxsplit", -1), name === "rsplit");
        limit.check(parts.length);
        return parts.map(same);
      });
    case "splitlines": return m(([keep = false]) => {
      const lines = s.match(/[^\n\r\v\f\x1c-\x1e\x85\u2028\u2029]*(\r\n|[\n\r\v\f\x1c-\x1e\x85\u2028\u2029]|$)/g)!.filter((l, i, all) => l !== "" || i < all.length - 1);
      return lines.map((l) => same(keep === true ? l : l.replace(/(\r\n|[\n\r\v\f\x1c-\x1e\x85\u2028\u2029])$/, "")));
    });
    case "upper": return m(() => same(s.toUpperCase()));
    case "lower": return m(() => same(s.toLowerCase()));
    case "casefold": return m(() => s.toLowerCase());
    case "swapcase": return m(() => same([...s].map((c) => (c === c.toUpperCase() ? c.toLowerCase() : c.toUpperCase())).join("")));
    case "title": return m(() => same(pyTitle(s)));
    case "capitalize": return m(() => same(pyCapitalize(s)));
    case "startswith": return m((args) => affix(s, args, false));
    case "endswith": return m((args) => affix(s, args, true));
    case "find": return m((args) => find(s, args, false));
    case "rfind": return m((args) => find(s, args, true));
    case "index":
    case "rindex": return m((args) => {
      const i = find(s, args, name === "rindex");
      return i < 0 ? fail("substring not found") : i;
    });
    case "count": return m((args) => {
      if (!isStr(args[0] ?? null)) fail(`must be str, not ${typeName(args[0] ?? null)}`);
      const cs = [...s];
      const [a, b] = window(cs, args[1], args[2]);
      const sub = strOf(args[0] as string), text = cs.slice(a, b).join("");
      return a > b ? 0 : sub === "" ? [...text].length + 1 : text.split(sub).length - 1;
    });
    case "replace": return m((args, kwargs) => {
      const [from, to] = args;
      if (!isStr(from ?? null) || !isStr(to ?? null)) fail(`replace() arguments must be str, not ${typeName(from ?? null)} and ${typeName(to ?? null)}`);
      return same(pyReplace(s, strOf(from as string), strOf(to as string), intArg(kw(args, kwargs, 2, "count"), "count", -1), limit));
    });
    case "join": return m(([items = null]) => {
      const parts = (Array.isArray(items) ? items : items !== null && isStr(items) ? [...strOf(items)] : fail(`can only join an iterable, not ${typeName(items)}`)) as Value[];
      return same(parts.map((p, i) => (isStr(p) ? strOf(p) : fail(`sequence item ${i}: expected str instance, ${typeName(p)} found`))).join(s));
    });
    case "format": return m((args, kwargs) => same(formatString(s, args, kwargs, limit)));
    // the sandbox's format_map: exactly one argument, whose items the fields name
    case "format_map": return m((args, kwargs) => {
      if (args.length !== 1 || kwargs.size) fail(`format_map() takes exactly one argument (${args.length + (kwargs.size ? 1 : 0)} given)`);
      const mapping = args[0]!;
      if (isDict(mapping)) return same(formatString(s, [], new Map(dictEntries(mapping).map(([k, v]) => [str(k), v])), limit));
      // (what is not a dict is looked up only when a field names something)
      try {
        return same(formatString(s, [], new Map(), limit));
      } catch {
        return fail(`format_map() needs a mapping for the fields of ${repr(s)}, not ${typeName(mapping)}`);
      }
    });
    case "zfill": return m(([w = 0]) => {
      const width = intArg(w, "zfill", 0), sign = s[0] === "+" || s[0] === "-" ? s[0] : "";
      return same(sign + pad(s.slice(sign.length), width - sign.length, "0", "right", limit));
    });
    case "center": return m(([w = 0, f]) => same(pad(s, intArg(w, "center", 0), f, "center", limit)));
    case "ljust": return m(([w = 0, f]) => same(pad(s, intArg(w, "ljust", 0), f, "left", limit)));
    case "rjust": return m(([w = 0, f]) => same(pad(s, intArg(w, "rjust", 0), f, "right", limit)));
    case "partition":
    case "rpartition": return m(([sep = null]) => {
      const d = isStr(sep) ? strOf(sep) : fail(`must be str, not ${typeName(sep)}`);
      if (d === "") fail("empty separator");
      const at = name === "partition" ? s.indexOf(d) : s.lastIndexOf(d);
      if (at < 0) return tuple(name === "partition" ? [same(s), same(""), same("")] : [same(""), same(""), same(s)]);
      return tuple([same(s.slice(0, at)), same(d), same(s.slice(at + d.length))]);
    });
    case "removeprefix": return m(([p = ""]) => same(s.startsWith(str(p)) ? s.slice(str(p).length) : s));
    case "removesuffix": return m(([p = ""]) => same(str(p) !== "" && s.endsWith(str(p)) ? s.slice(0, s.length - str(p).length) : s));
    case "isdigit":
    case "isdecimal":
    case "isnumeric": return m(() => s.length > 0 && /^\p{Nd}+$/u.test(s));
    case "isalpha": return m(() => s.length > 0 && /^\p{L}+$/u.test(s));
    // (a letter, or a number of any kind: ½ and Ⅻ are alphanumeric in Python)
    case "isalnum": return m(() => s.length > 0 && /^[\p{L}\p{N}]+$/u.test(s));
    case "isascii": return m(() => /^[\x00-\x7f]*$/.test(s));
    case "isidentifier": return m(() => /^[\p{XID_Start}_]\p{XID_Continue}*$/u.test(s));
    case "isprintable": return m(() => ![...s].some((c) => c !== " " && /[\p{C}\p{Z}]/u.test(c)));
    case "istitle": return m(() => isTitle(s));
    case "isspace": return m(() => s.length > 0 && [...s].every(isSpace));
    // (Python's cased letters are Unicode's Lowercase / Uppercase properties and the titlecase category: ª is lowercase, Ⅻ uppercase)
    case "islower": return m(() => isLower(s));
    case "isupper": return m(() => isUpper(s));
    case "expandtabs": return m(([size = 8]) => {
      let out = "", col = 0;
      const n = intArg(size, "tabsize", 8);
      for (const c of s) {
        if (c === "\t") { const k = n > 0 ? n - (col % n) : 0; limit.check(out.length + k); out += " ".repeat(k); col += k; }
        else { out += c; col = c === "\n" || c === "\r" ? 0 : col + 1; }
      }
      return same(out);
    });
    default: return undefined;
  }
}

/** the methods of dict a template may call (the ones that change it are refused, as the sandbox refuses them) */
export function dictMethod(d: Dict, name: string): Callable | undefined {
  const m = (f: (args: Value[], kwargs: Map<string, Value>) => Value) => new Callable(name, f);
  switch (name) {
    case "get": return m(([k = null, fallback = null]) => {
      const v = dictGet(d, k);
      return v === undefined ? fallback : v;
    });
    case "items": return m(() => new DictView("dict_items", dictEntries(d).map(([k, v]) => tuple([k, v]))));
    case "keys": return m(() => new DictView("dict_keys", dictKeys(d)));
    case "values": return m(() => new DictView("dict_values", [...d.values()]));
    case "copy": return m(() => dictCopy(d));
    case "clear": case "pop": case "popitem": case "setdefault": case "update":
      return m(() => fail(`access to attribute '${name}' of 'dict' object is unsafe.`));
    default: return undefined;
  }
}

/** the methods of list and tuple a template may call */
export function listMethod(items: Value[], name: string): Callable | undefined {
  const m = (f: (args: Value[]) => Value) => new Callable(name, f);
  switch (name) {
    case "index": return m(([x = null]) => {
      const i = items.findIndex((e) => equalsLoose(e, x));
      return i < 0 ? fail(`${repr(x)} is not in ${typeName(items)}`) : i;
    });
    case "count": return m(([x = null]) => items.filter((e) => equalsLoose(e, x)).length);
    case "copy": return isList(items) ? m(() => items.slice()) : undefined;
    case "append": case "extend": case "insert": case "pop": case "remove": case "reverse": case "sort": case "clear":
      return isList(items) ? m(() => fail(`access to attribute '${name}' of 'list' object is unsafe.`)) : undefined;
    default: return undefined;
  }
}
let equalsLoose: (a: Value, b: Value) => boolean = () => false;
/** (set by the interpreter: list.index and count compare with ==) */
export const useEquals = (f: (a: Value, b: Value) => boolean): void => { equalsLoose = f; };

// ---- Python's % formatting and str.format() ----

/** one formatted number or string under a format spec: fill, align, sign, zero padding, width, precision, type */
interface Spec { fill: string; align: string; sign: string; alt: boolean; zero: boolean; width: number; grouping: string; precision: number | undefined; type: string }

function formatNumber(value: number | bigint, isInt: boolean, spec: Spec, forPercent: boolean): string {
  // an int beyond 2^53 keeps its digits where it is written as an int (d, x, o, b, none), else it is a double
  const big = typeof value === "bigint" ? (value < 0n ? -value : value) : undefined;
  const x = Number(value);
  let t = spec.type;
  if (t === "" ) t = isInt ? "d" : "";
  let body: string;
  const neg = x < 0 || Object.is(x, -0);
  const a = Math.abs(x);
  const p = spec.precision;
  switch (t) {
    case "d": case "i": case "u":
      if (!isInt && !forPercent) fail(`Unknown format code 'd' for object of type 'float'`);
      body = String(big ?? Math.trunc(a));
      break;
    case "x": case "X": case "o": case "b": {
      if (!isInt && !forPercent) fail(`Unknown format code '${t}' for object of type 'float'`);
      const base = t === "o" ? 8 : t === "b" ? 2 : 16;
      body = (big ?? Math.trunc(a)).toString(base);
      if (t === "X") body = body.toUpperCase();
      if (spec.alt) body = (t === "o" ? "0o" : t === "b" ? "0b" : t === "X" ? "0X" : "0x") + body;
      break;
    }
    case "f": case "F": body = Number.isFinite(a) ? toFixed(a, p ?? 6) : a === Infinity ? "inf" : "nan"; break;
    case "e": case "E": {
      body = Number.isFinite(a) ? a.toExponential(p ?? 6).replace(/e([+-])(\d)$/, "e$10$2") : a === Infinity ? "inf" : "nan";
      if (t === "E") body = body.toUpperCase();
      break;
    }
    case "%": body = `${toFixed(a * 100, p ?? 6)}%`; break;
    case "g": case "G": case "": {
      if (!Number.isFinite(a)) { body = a === Infinity ? "inf" : "nan"; break; }
      if (t === "" && p === undefined) { body = isInt ? String(big ?? a) : reprFloat(a); break; }
      const prec = p === 0 ? 1 : p ?? 6;
      const exp = a === 0 ? 0 : Math.floor(Math.log10(Number(a.toPrecision(prec))));
      if (exp < -4 || exp >= prec) {
        body = a.toExponential(prec - 1);
        if (!spec.alt) body = body.replace(/\.?0+e/, "e");
        body = body.replace(/e([+-])(\d)$/, "e$10$2");
      } else {
        body = toFixed(a, Math.max(0, prec - 1 - exp));
        if (!spec.alt && body.includes(".")) body = body.replace(/\.?0+$/, "");
      }
      if (t === "" && !body.includes(".") && !body.includes("e") && !isInt) body += ".0";
      if (t === "G") body = body.toUpperCase();
      break;
    }
    default: return fail(`Unknown format code '${t}' for object of type '${isInt ? "int" : "float"}'`);
  }
  if (spec.grouping) {
    const [int, frac] = body.split(".") as [string, string | undefined];
    body = int.replace(/\B(?=(\d{3})+(?!\d))/g, spec.grouping) + (frac !== undefined ? `.${frac}` : "");
  }
  const sign = neg && !(body === "0" && !Object.is(x, -0) && x === 0) ? "-" : spec.sign === "+" ? "+" : spec.sign === " " ? " " : "";
  if (spec.zero && spec.align === "" ) return sign + body.padStart(spec.width - sign.length, "0");
  if (spec.align === "=") return sign + body.padStart(spec.width - sign.length, spec.fill);
  return align(sign + body, spec, ">");
}

function align(s: string, spec: Spec, defaultAlign: string): string {
  const n = [...s].length, total = spec.width - n;
  if (total <= 0) return s;
  const a = spec.align || defaultAlign;
  const fill = spec.fill;
  if (a === "<") return s + fill.repeat(total);
  if (a === "^") return fill.repeat(Math.floor(total / 2)) + s + fill.repeat(total - Math.floor(total / 2));
  return fill.repeat(total) + s;
}

/** str.format()'s format spec applied to a value */
function applyFormatSpec(v: Value, specText: string, limit: SizeLimit): string {
  const m = /^(?:(.)?([<>=^]))?([+\- ])?(#)?(0)?(\d+)?([,_])?(?:\.(\d+))?([bcdeEfFgGnosxX%])?$/su.exec(specText);
  if (!m) return fail(`Invalid format specifier '${specText}' for object of type '${typeName(v)}'`);
  const spec: Spec = { fill: m[1] ?? (m[5] && !m[2] ? "0" : " "), align: m[2] ?? (m[5] && !m[2] && !isStr(v) ? "=" : ""), sign: m[3] ?? "", alt: !!m[4], zero: false, width: Number(m[6] ?? 0), grouping: m[7] ?? "", precision: m[8] === undefined ? undefined : Number(m[8]), type: m[9] ?? "" };
  limit.check(spec.width);
  // a bool is an int under a format spec ('{:^7}' of True is '   1   '), and itself only under none
  if (isNumber(v) && !(typeof v === "boolean" && specText === "")) {
    if (spec.type === "s") fail(`Unknown format code 's' for object of type '${typeName(v)}'`);
    if (spec.type === "c") return align(String.fromCodePoint(num(v)), spec, "<");
    return formatNumber(typeof v === "bigint" ? v : num(v), !(v instanceof Float), spec, false);
  }
  if (spec.type !== "" && spec.type !== "s") fail(`Unknown format code '${spec.type}' for object of type '${typeName(v)}'`);
  // only str (and numbers) take a format spec: object.__format__ refuses any but ""
  if (!isStr(v) && specText !== "") fail(`unsupported format string passed to ${typeName(v)}.__format__`);
  if (spec.grouping) fail(`Cannot specify '${spec.grouping}' with 's'.`);
  let s = str(v);
  if (spec.precision !== undefined) s = [...s].slice(0, spec.precision).join("");
  return align(s, spec, "<");
}

/** Python's str.format(): {} {0} {name} {0[key]} {x.attr}, !r / !s, and format specs */
export function formatString(template: string, args: Value[], kwargs: Map<string, Value>, ctx: MethodContext): string {
  const limit = ctx;
  let next = 0;
  let out = "";
  const re = /\{\{|\}\}|\{([^{}!:]*)(?:!([rsa]))?(?::((?:[^{}]|\{[^{}]*\})*))?\}|[{}]/g;
  let last = 0;
  for (let m = re.exec(template); m; m = re.exec(template)) {
    out += template.slice(last, m.index);
    last = re.lastIndex;
    if (m[0] === "{{") { out += "{"; continue; }
    if (m[0] === "}}") { out += "}"; continue; }
    if (m[0] === "{" || m[0] === "}") fail(`Single '${m[0]}' encountered in format string`);
    const field = m[1]!;
    const [, head = "", rest = ""] = /^([^.[]*)(.*)$/s.exec(field)!;
    let v: Value | undefined;
    if (head === "") {
      v = args[next++];
      if (v === undefined) fail(`Replacement index ${next - 1} out of range for positional args tuple`);
    } else if (/^\d+$/.test(head)) {
      v = args[Number(head)];
      if (v === undefined) fail(`Replacement index ${head} out of range for positional args tuple`);
    } else {
      v = kwargs.get(head);
      if (v === undefined) fail(`'${head}'`);
    }
    for (const part of rest.matchAll(/\.([^.[]+)|\[([^\]]+)\]/g)) {
      v = part[1] !== undefined ? ctx.getattr(v!, part[1]) : ctx.getitem(v!, /^\d+$/.test(part[2]!) ? Number(part[2]) : part[2]!);
    }
    let value = v as Value;
    if (m[2] === "r" || m[2] === "a") value = repr(value);
    else if (m[2] === "s") value = str(value);
    const spec = (m[3] ?? "").replace(/\{([^{}]*)\}/g, (_, f: string) => str(f === "" ? args[next++] ?? null : /^\d+$/.test(f) ? args[Number(f)] ?? null : kwargs.get(f) ?? null));
    out += applyFormatSpec(value, spec, limit);
    limit.check(out.length);
  }
  return out + template.slice(last);
}

/** Python's `template % values` (printf-style): %s %r %d %i %f %e %g %x %o %c %%, flags, width, precision, %(key)s */
export function percentFormat(template: string, values: Value, limit: SizeLimit): string {
  const positional = isTuple(values) ? values : [values];
  const mapping = isDict(values) ? values : undefined;
  let next = 0, usedMapping = false;
  const out = template.replace(/%(?:\(([^)]*)\))?([-+ #0]*)(\*|\d+)?(?:\.(\*|\d+))?[hlL]?(.)?/gs, (whole, key: string | undefined, flags: string, w: string | undefined, p: string | undefined, conv: string | undefined) => {
    if (conv === undefined) return fail("incomplete format");
    if (conv === "%" && whole === "%%") return "%";
    const take = (): Value => {
      if (key !== undefined) {
        usedMapping = true;
        if (!mapping) return fail("format requires a mapping");
        const v = dictGet(mapping, key);
        return v === undefined ? fail(`'${key}'`) : v;
      }
      if (next >= positional.length) return fail("not enough arguments for format string");
      return positional[next++]!;
    };
    const width = w === "*" ? Number(take()) : Number(w ?? 0);
    const precision = p === "*" ? Number(take()) : p === undefined ? undefined : Number(p);
    limit.check(width);
    const v = take();
    const spec: Spec = { fill: " ", align: flags.includes("-") ? "<" : "", sign: flags.includes("+") ? "+" : flags.includes(" ") ? " " : "", alt: flags.includes("#"), zero: flags.includes("0") && !flags.includes("-"), width, grouping: "", precision, type: conv };
    switch (conv) {
      case "s": case "r": case "a": {
        let s = conv === "s" ? str(v) : repr(v);
        if (precision !== undefined) s = [...s].slice(0, precision).join("");
        return align(s, spec, ">");
      }
      case "c": {
        // an int (or bool) as its code point, or a str of one character
        const c = typeof v === "number" || typeof v === "boolean" ? String.fromCodePoint(Number(v)) : isStr(v) && [...strOf(v)].length === 1 ? strOf(v) : fail("%c requires int or char");
        return align(c, spec, ">");
      }
      case "d": case "i": case "u": case "x": case "X": case "o": case "f": case "F": case "e": case "E": case "g": case "G": {
        if (!isNumber(v)) return fail(`%${conv} format: a real number is required, not ${typeName(v)}`);
        const x = num(v);
        const isInt = !(v instanceof Float) || "diuxXo".includes(conv);
        if ("xXo".includes(conv) && v instanceof Float) fail(`%${conv} format: an integer is required, not float`);
        return formatNumber(typeof v === "bigint" ? v : "diu".includes(conv) ? Math.trunc(x) : x, isInt, spec, true);
      }
      default: return fail(`unsupported format character '${conv}' (0x${conv.codePointAt(0)!.toString(16)})`);
    }
  });
  // Python does not count the arguments when the value has items (a dict, a list, a range: PyMapping_Check): 'abc' % [] is 'abc'
  const hasItems = mapping !== undefined || (Array.isArray(values) && !isTuple(values)) || values instanceof Undefined;
  if (!hasItems && !usedMapping && next < positional.length) fail("not all arguments converted during string formatting");
  return out;
}

