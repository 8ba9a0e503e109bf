import {
  Bytes, Callable, DictView, Float, Markup, Undefined, dictCopy, dictEntries, dictGet, dictKeys, fail, isDict, isList, isNumber, isStr, isTuple, num, repr, reprFloat, str, strOf, toFixed, tuple, typeName,
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

/**
 * The characters Unicode assigned after version 14 (up to 17, Node 20's), which Python 3.11 takes
 * as unassigned: no letter, digit or case of any kind, so `str.isalpha()` and the like are false
 * of them (and isupper/islower skip them, as uncased) however the JS engine's newer tables class them.
 */
const NEWER = `${[
  "\\u{88f}\\u{897}\\u{c5c}\\u{cdc}\\u{cf3}\\u{ece}\\u{1acf}-\\u{1add}\\u{1ae0}-\\u{1aeb}\\u{1b4e}-\\u{1b4f}\\u{1b7f}\\u{1c89}-\\u{1c8a}\\u{20c1}",
  "\\u{2427}-\\u{2429}\\u{2b96}\\u{2ffc}-\\u{2fff}\\u{31e4}-\\u{31e5}\\u{31ef}\\u{a7cb}-\\u{a7cf}\\u{a7d2}\\u{a7d4}\\u{a7da}-\\u{a7dc}\\u{a7f1}",
  "\\u{fbc3}-\\u{fbd2}\\u{fd90}-\\u{fd91}\\u{fdc8}-\\u{fdce}\\u{105c0}-\\u{105f3}\\u{10940}-\\u{10959}\\u{10d40}-\\u{10d65}\\u{10d69}-\\u{10d85}",
  "\\u{10d8e}-\\u{10d8f}\\u{10ec2}-\\u{10ec7}\\u{10ed0}-\\u{10ed8}\\u{10efa}-\\u{10eff}\\u{1123f}-\\u{11241}\\u{11380}-\\u{11389}\\u{1138b}",
  "\\u{1138e}\\u{11390}-\\u{113b5}\\u{113b7}-\\u{113c0}\\u{113c2}\\u{113c5}\\u{113c7}-\\u{113ca}\\u{113cc}-\\u{113d5}\\u{113d7}-\\u{113d8}",
  "\\u{113e1}-\\u{113e2}\\u{116d0}-\\u{116e3}\\u{11b00}-\\u{11b09}\\u{11b60}-\\u{11b67}\\u{11bc0}-\\u{11be1}\\u{11bf0}-\\u{11bf9}\\u{11db0}-",
  "\\u{11ddb}\\u{11de0}-\\u{11de9}\\u{11f00}-\\u{11f10}\\u{11f12}-\\u{11f3a}\\u{11f3e}-\\u{11f5a}\\u{1342f}\\u{13440}-\\u{13455}\\u{13460}-",
  "\\u{143fa}\\u{16100}-\\u{16139}\\u{16d40}-\\u{16d79}\\u{16ea0}-\\u{16eb8}\\u{16ebb}-\\u{16ed3}\\u{16ff2}-\\u{16ff6}\\u{187f8}-\\u{187ff}",
  "\\u{18cff}\\u{18d09}-\\u{18d1e}\\u{18d80}-\\u{18df2}\\u{1b132}\\u{1b155}\\u{1cc00}-\\u{1ccfc}\\u{1cd00}-\\u{1ceb3}\\u{1ceba}-\\u{1ced0}",
  "\\u{1cee0}-\\u{1cef0}\\u{1d2c0}-\\u{1d2d3}\\u{1df25}-\\u{1df2a}\\u{1e030}-\\u{1e06d}\\u{1e08f}\\u{1e4d0}-\\u{1e4f9}\\u{1e5d0}-\\u{1e5fa}",
  "\\u{1e5ff}\\u{1e6c0}-\\u{1e6de}\\u{1e6e0}-\\u{1e6f5}\\u{1e6fe}-\\u{1e6ff}\\u{1f6d8}\\u{1f6dc}\\u{1f774}-\\u{1f77f}\\u{1f7d9}\\u{1f8b2}-",
  "\\u{1f8bb}\\u{1f8c0}-\\u{1f8c1}\\u{1f8d0}-\\u{1f8d8}\\u{1fa54}-\\u{1fa57}\\u{1fa75}-\\u{1fa77}\\u{1fa87}-\\u{1fa8a}\\u{1fa8e}-\\u{1fa8f}",
  "\\u{1faad}-\\u{1faaf}\\u{1fabb}-\\u{1fabf}\\u{1fac6}\\u{1fac8}\\u{1facd}-\\u{1facf}\\u{1fada}-\\u{1fadc}\\u{1fadf}\\u{1fae8}-\\u{1faea}",
  "\\u{1faef}\\u{1faf7}-\\u{1faf8}\\u{1fbcb}-\\u{1fbef}\\u{1fbfa}\\u{2b739}-\\u{2b73f}\\u{2cea2}-\\u{2cead}\\u{2ebf0}-\\u{2ee5d}\\u{31350}-",
  "\\u{33479}",
].join("")}`;
const NEWER_ANY = new RegExp(`[${NEWER}]`, "u"), NEWER_ALL = new RegExp(`[${NEWER}]`, "gu");
/** a predicate that is true of no unassigned character (isalpha, isdigit, isprintable...) */
const assignedOnly = (test: (s: string) => boolean) => (s: string): boolean => !NEWER_ANY.test(s) && test(s);
/** the letters whose case Unicode changed after 14: ʕ was lowercase, the modifier letters ჼ ꟲ ꟳ ꟴ ꭩ were uncased */
const RECASED = /[\u0295\u10fc\ua7f2-\ua7f4\uab69]/gu;
/** a predicate over the cased characters (isupper, islower, istitle): an unassigned one is uncased, and the recased letters as Unicode 14 cased them */
const newerUncased = (test: (s: string) => boolean) => (s: string): boolean =>
  test(NEWER_ANY.test(s) || /[\u0295\u10fc\ua7f2-\ua7f4\uab69]/u.test(s) ? s.replace(NEWER_ALL, " ").replace(RECASED, (c) => (c === "\u0295" ? "a" : " ")) : s);

/*
 * Python's str.isdecimal(), isdigit() and isnumeric(), by Unicode's Numeric_Type (Python 3.11's
 * Unicode 14 tables): decimal is the Nd category; digit adds the No characters of type Digit
 * (superscripts, circled and parenthesized digits); numeric is every N category and the CJK
 * ideographs Unihan gives a numeric value (一 二 十 百 千 万 零 壹...).
 */
const isDecimal = assignedOnly((s) => /^\p{Nd}+$/u.test(s));
const isDigit = assignedOnly((s) => /^[\p{Nd}\u{b2}-\u{b3}\u{b9}\u{1369}-\u{1371}\u{19da}\u{2070}\u{2074}-\u{2079}\u{2080}-\u{2089}\u{2460}-\u{2468}\u{2474}-\u{247c}\u{2488}-\u{2490}\u{24ea}\u{24f5}-\u{24fd}\u{24ff}\u{2776}-\u{277e}\u{2780}-\u{2788}\u{278a}-\u{2792}\u{10a40}-\u{10a43}\u{10e60}-\u{10e68}\u{11052}-\u{1105a}\u{1f100}-\u{1f10a}]+$/u.test(s));
const NUMERIC = new RegExp(`^[\\p{N}${[
  "\\u{3405}\\u{3483}\\u{382a}\\u{3b4d}\\u{4e00}\\u{4e03}\\u{4e07}\\u{4e09}\\u{4e5d}\\u{4e8c}\\u{4e94}\\u{4e96}\\u{4ebf}-\\u{4ec0}\\u{4edf}\\u{4ee8}\\u{4f0d}\\u{4f70}\\u{5104}\\u{5146}\\u{5169}\\u{516b}",
  "\\u{516d}\\u{5341}\\u{5343}-\\u{5345}\\u{534c}\\u{53c1}-\\u{53c4}\\u{56db}\\u{58f1}\\u{58f9}\\u{5e7a}\\u{5efe}-\\u{5eff}\\u{5f0c}-\\u{5f0e}\\u{5f10}\\u{62fe}\\u{634c}\\u{67d2}\\u{6f06}\\u{7396}",
  "\\u{767e}\\u{8086}\\u{842c}\\u{8cae}\\u{8cb3}\\u{8d30}\\u{9621}\\u{9646}\\u{964c}\\u{9678}\\u{96f6}\\u{f96b}\\u{f973}\\u{f978}\\u{f9b2}\\u{f9d1}\\u{f9d3}\\u{f9fd}\\u{20001}\\u{20064}\\u{200e2}",
  "\\u{20121}\\u{2092a}\\u{20983}\\u{2098c}\\u{2099c}\\u{20aea}\\u{20afd}\\u{20b19}\\u{22390}\\u{22998}\\u{23b1b}\\u{2626d}\\u{2f890}",
].join("")}]+$`, "u");
const isNumeric = assignedOnly((s) => NUMERIC.test(s));
const isAlpha = assignedOnly((s) => /^\p{L}+$/u.test(s));
// (a letter, or a number of any kind: ½ and Ⅻ are alphanumeric in Python)
const isAlnum = assignedOnly((s) => /^[\p{L}\p{N}]+$/u.test(s));
const isIdentifier = assignedOnly((s) => /^[\p{XID_Start}_]\p{XID_Continue}*$/u.test(s));
const isPrintable = (s: string): boolean => ![...s].some((c) => (c !== " " && /[\p{C}\p{Z}]/u.test(c)) || NEWER_ANY.test(c));


/** Python's str.islower() and str.isupper() (the `lower` and `upper` tests too) */
export const isLower = newerUncased((s) => /\p{Lowercase}/u.test(s) && !/[\p{Uppercase}\p{Lt}]/u.test(s));
export const isUpper = newerUncased((s) => /\p{Uppercase}/u.test(s) && !/[\p{Lowercase}\p{Lt}]/u.test(s));

/** Python's str.istitle(): an upper- or titlecase letter only after an uncased character, a lowercase one only after a cased one, and some cased letter */
const isTitle = newerUncased((s: string): boolean => {
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
});

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
    case "isdecimal": return m(() => isDecimal(s));
    case "isdigit": return m(() => isDigit(s));
    case "isnumeric": return m(() => isNumeric(s));
    case "isalpha": return m(() => isAlpha(s));
    case "isalnum": return m(() => isAlnum(s));
    case "isascii": return m(() => /^[\x00-\x7f]*$/.test(s));
    case "isidentifier": return m(() => isIdentifier(s));
    case "isprintable": return m(() => isPrintable(s));
    case "istitle": return m(() => isTitle(s));
    case "isspace": return m(() => s.length > 0 && [...s].every(isSpace));
    // (Python's cased letters are Unicode's Lowercase / Uppercase properties and the titlecase category: ª is lowercase, Ⅻ uppercase)
    case "islower": return m(() => isLower(s));
    case "isupper": return m(() => isUpper(s));
    case "encode": return m((args, kwargs) => encode(s, kw(args, kwargs, 0, "encoding") ?? "utf-8", kw(args, kwargs, 1, "errors") ?? "strict"));
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

/** Python's codec names for the codecs str.encode() and bytes.decode() know here: UTF-8, ASCII and Latin-1 */
function codec(encoding: Value): "utf-8" | "ascii" | "latin-1" {
  if (!isStr(encoding)) return fail(`encode() argument 'encoding' must be str, not ${typeName(encoding)}`);
  const name = strOf(encoding).toLowerCase().replace(/[- ]/g, "_");
  if (["utf_8", "utf8", "u8", "utf"].includes(name)) return "utf-8";
  if (["ascii", "us_ascii", "646"].includes(name)) return "ascii";
  if (["latin_1", "latin1", "latin", "l1", "iso8859_1", "iso_8859_1", "8859", "cp819"].includes(name)) return "latin-1";
  return fail(/^(utf_?(16|32)|cp\d+|iso_?8859|mac|koi8|big5|gb|shift_jis|euc)/.test(name) ? `encoding ${repr(encoding)}: only UTF-8, ASCII and Latin-1 are supported here` : `unknown encoding: ${strOf(encoding)}`);
}

function errorHandler(errors: Value): "strict" | "ignore" | "replace" {
  const e = str(errors);
  return e === "strict" || e === "ignore" || e === "replace" ? e : fail(`the error handler ${repr(errors)}: only 'strict', 'ignore' and 'replace' are supported here`);
}

/** Python's str.encode(encoding, errors) */
function encode(s: string, encoding: Value, errors: Value): Bytes {
  const name = codec(encoding), handler = errorHandler(errors);
  const out: number[] = [];
  let position = 0;
  for (const c of s) {
    const cp = c.codePointAt(0)!;
    const limit = name === "ascii" ? 0x80 : name === "latin-1" ? 0x100 : Infinity;
    const surrogate = cp >= 0xd800 && cp <= 0xdfff;
    if (cp >= limit || surrogate) {
      if (handler === "strict") {
        fail(`'${name === "latin-1" ? "latin-1" : name}' codec can't encode character ${repr(c)} in position ${position}: ${surrogate && name === "utf-8" ? "surrogates not allowed" : `ordinal not in range(${limit})`}`);
      }
      if (handler === "replace") out.push(0x3f);
    } else if (name === "utf-8") out.push(...new TextEncoder().encode(c));
    else out.push(cp);
    position++;
  }
  return new Bytes(Uint8Array.from(out));
}

/** the methods of bytes a template may call: decode */
export function bytesMethod(b: Bytes, name: string): Callable | undefined {
  if (name !== "decode") return undefined;
  return new Callable(name, ([encoding = "utf-8", errors = "strict"], kwargs) => {
    const nameOf = codec(kwargs.get("encoding") ?? encoding), handler = errorHandler(kwargs.get("errors") ?? errors);
    if (nameOf === "utf-8") {
      try {
        // (replace writes U+FFFD for each bad sequence, as Python does; ignore drops them)
        const text = new TextDecoder("utf-8", { fatal: handler === "strict", ignoreBOM: true }).decode(b.b);
        return handler === "ignore" ? new TextDecoder("utf-8", { ignoreBOM: true }).decode(b.b).replace(/\ufffd/g, "") : text;
      } catch {
        return fail("'utf-8' codec can't decode the bytes: invalid UTF-8");
      }
    }
    let out = "";
    for (const [i, x] of b.b.entries()) {
      if (nameOf === "ascii" && x >= 0x80) {
        if (handler === "strict") fail(`'ascii' codec can't decode byte 0x${x.toString(16)} in position ${i}: ordinal not in range(128)`);
        if (handler === "replace") out += "\ufffd";
      } else out += String.fromCharCode(x);
    }
    return out;
  });
}

/** the methods of dict a template may call (the ones that change it are refused, as the sandbox refuses them) */
export function dictMethod(d: Dict, name: string): Callable | undefined {
  const m = (f: (args: Value[], kwargs: Map<string, Value>) => Value) => new Callable(name, f);
  switch (name) {
    case "get": return m((args, kwargs) => {
      if (kwargs.size) fail("dict.get() takes no keyword arguments");
      if (args.length < 1 || args.length > 2) fail(`get expected ${args.length < 1 ? "at least 1 argument" : "at most 2 arguments"}, got ${args.length}`);
      const [k = null, fallback = null] = args;
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

