import { escapeHtml, pformat, urlize } from "./pretty.js";
import { LEGACY_ENTITIES, NAMED_ENTITIES } from "./entities.js";
import { SPACE, dictMethod, isLower, isUpper, type MethodContext, percentFormat, pyCapitalize, pyReplace, strMethod } from "./methods.js";
import {
  Bytes, Callable, DictView, Float, Generator, Markup, PyObject, Undefined, compare, contains, dictEntries, dictGet, equals, fail, hashable, isDict, isNumber, isStr, isTuple, iterate, keyOf, length, num, str, strOf,
  pyInt, rangeOf, repr, toFixed, toJson, truthy, tuple, typeName, type Dict, type Value,
} from "./values.js";

/*
 * jinja2's built-in filters and tests (jinja2/filters.py, jinja2/tests.py, version 3.1) over the
 * values of values.ts, with transformers' tojson. Filters jinja2 writes as generators
 * (select, map, selectattr, unique, batch, slice, items) give a Generator: like jinja2's, it has no
 * len(), is always true, and a second loop over it finds nothing.
 */

/** what a filter needs from the interpreter */
export interface FilterContext extends MethodContext {
  /** jinja2's environment.getattr (`x.name`: the attribute, else the item) */
  getattr(obj: Value, name: string): Value;
  /** jinja2's environment.getitem (`x[key]`: the item, else the attribute) */
  getitem(obj: Value, key: Value): Value;
  /** a test by name, applied (select, selectattr) */
  test(name: string, value: Value, args: Value[]): boolean;
  /** a filter by name, applied (map) */
  filter(name: string, value: Value, args: Value[], kwargs: Map<string, Value>): Value;
}

type Filter = (value: Value, args: Value[], kwargs: Map<string, Value>, ctx: FilterContext) => Value;

/** the n-th argument, by position or keyword, else the default */
const arg = (args: Value[], kwargs: Map<string, Value>, i: number, name: string, fallback: Value): Value => (i < args.length ? args[i]! : kwargs.has(name) ? kwargs.get(name)! : fallback);

/** jinja2's make_attrgetter: "a.b.0" walks attributes and items, integers as indexes; lower-cased for case-insensitive sorting */
function attrGetter(ctx: FilterContext, attribute: Value, fallback?: Value, lower = false): (item: Value) => Value {
  const parts = attribute === null ? [] : typeof attribute === "number" ? [attribute] : str(attribute).split(".").map((p) => (/^\d+$/.test(p) ? Number(p) : p));
  return (item) => {
    let v = item;
    for (const p of parts) {
      v = ctx.getitem(v, p);
      if (v instanceof Undefined && fallback !== undefined) { v = fallback; break; }
    }
    return lower && isStr(v) ? strOf(v).toLowerCase() : v;
  };
}

/** jinja2's sort / dictsort / unique / min / max key: strings compared case-insensitively unless asked */
const ignoreCase = (v: Value, caseSensitive: Value) => (!truthy(caseSensitive) && isStr(v) ? strOf(v).toLowerCase() : v);

/** Python's sorted(): stable, by <, TypeError for mixed types */
function sorted(items: Value[], key: (v: Value) => Value, reverse: boolean): Value[] {
  const keyed = items.map((v) => ({ v, k: key(v) }));
  keyed.sort((a, b) => (reverse ? compare(b.k, a.k) : compare(a.k, b.k)));
  return keyed.map((e) => e.v);
}

/** Python's str.splitlines() (for indent) */
const splitLines = (s: string) => s.split(/\r\n|[\n\r\v\f\x1c-\x1e\x85\u2028\u2029]/).slice(0, s.match(/(\r\n|[\n\r\v\f\x1c-\x1e\x85\u2028\u2029])$/) ? -1 : undefined);

/** jinja2's _word_beginning_split_re, with Python's whitespace */
const WORD_BEGINNING = new RegExp(`([-${SPACE}({[<]+)`, "u");
const SPACES = new RegExp(`[${SPACE}]+`, "u");

/** markupsafe's Markup.striptags: comments removed first, then tags, each from the first opening to the first close after it; whitespace runs made one space; then entities unescaped */
function stripTags(value: string): string {
  for (let start = value.indexOf("<!--"); start !== -1; start = value.indexOf("<!--")) {
    const end = value.indexOf("-->", start);
    if (end === -1) break;
    value = value.slice(0, start) + value.slice(end + 3);
  }
  for (let start = value.indexOf("<"); start !== -1; start = value.indexOf("<")) {
    const end = value.indexOf(">", start);
    if (end === -1) break;
    value = value.slice(0, start) + value.slice(end + 1);
  }
  return unescapeHtml(value.split(SPACES).filter(Boolean).join(" "));
}

/** Python's float() of a string: decimal, exponent, inf, nan, surrounding whitespace and underscores between digits */
function parseFloatStrict(s: string): number | undefined {
  const t = s.trim().replace(/(?<=\d)_(?=\d)/g, "");
  if (/^[+-]?(\d+\.?\d*|\.\d+)(e[+-]?\d+)?$/i.test(t)) return Number(t);
  if (/^[+-]?(inf|infinity)$/i.test(t)) return t.startsWith("-") ? -Infinity : Infinity;
  if (/^[+-]?nan$/i.test(t)) return Number.NaN;
  return undefined;
}

/** Python's round(x, n): the exact binary value to n decimals, a tie to even */
function pyRound(x: number, n: number): number {
  if (!Number.isFinite(x)) return x;
  if (n >= 0) return Number(toFixed(x, n));
  const m = 10 ** -n;
  return Number(toFixed(x / m, 0)) * m;
}

function minMax(value: Value, kwargs: Map<string, Value>, args: Value[], ctx: FilterContext, max: boolean): Value {
  const items = iterate(value);
  if (items.length === 0) return new Undefined("No aggregated item, sequence was empty.");
  const attribute = arg(args, kwargs, 1, "attribute", null);
  const get = attrGetter(ctx, attribute);
  const key = (v: Value) => ignoreCase(get(v), arg(args, kwargs, 0, "case_sensitive", false));
  let best: Value = items[0] as Value;
  for (const x of items.slice(1)) if (max ? compare(key(x), key(best), ">") > 0 : compare(key(x), key(best), "<") < 0) best = x;
  return best;
}

function selectOrReject(value: Value, args: Value[], ctx: FilterContext, select: boolean, byAttribute: boolean): Value {
  // jinja2 walks the value only if it is true: a false one (none, 0, false, "") selects nothing, not a TypeError
  if (!truthy(value)) return new Generator([], "select_or_reject");
  return new Generator(() => selectedItems(value, args, ctx, select, byAttribute), "select_or_reject");
}
function selectedItems(value: Value, args: Value[], ctx: FilterContext, select: boolean, byAttribute: boolean): Value[] {
  const items = iterate(value);
  const [first, ...rest] = args;
  const get = byAttribute ? attrGetter(ctx, first ?? fail("selectattr/rejectattr need the name of an attribute")) : (v: Value) => v;
  const [testName, ...testArgs] = byAttribute ? rest : args;
  const pass = (v: Value) => (testName === undefined ? truthy(get(v)) : ctx.test(str(testName), get(v), testArgs));
  return items.filter((v) => pass(v) === select);
}

const FILTERS: Record<string, Filter> = {
  abs: (v) => (v instanceof Float ? new Float(Math.abs(v.v)) : typeof v === "bigint" ? pyInt(v < 0n ? -v : v) : isNumber(v) ? Math.abs(num(v)) : fail(`bad operand type for abs(): '${typeName(v)}'`)),
  // a Python attribute only (jinja2's do_attr uses getattr()): a dict's item is not one
  attr: (v, [name = ""], _kw, ctx) => (isDict(v) ? (dictMethod(v, str(name)) ?? new Undefined(`'dict object' has no attribute '${str(name)}'`)) : ctx.getattr(v, str(name))),
  batch: (v, args, kwargs) => new Generator(() => {
    const size = Number(num(arg(args, kwargs, 0, "linecount", 1) as number));
    if (!(size >= 1)) fail("batch() needs a line count of at least 1");
    const fill = arg(args, kwargs, 1, "fill_with", null);
    const items = iterate(v), out: Value[] = [];
    for (let i = 0; i < items.length; i += size) {
      const row = items.slice(i, i + size);
      if (row.length < size && fill !== null) while (row.length < size) row.push(fill);
      out.push(row);
    }
    return out;
  }, "do_batch"),
  capitalize: (v) => pyCapitalize(str(v)),
  center: (v, args, kwargs, ctx) => strMethod(str(v), "center", ctx)!.call([arg(args, kwargs, 0, "width", 80)], new Map()),
  count: (v) => length(v),
  default: (v, args, kwargs) => (v instanceof Undefined || (truthy(arg(args, kwargs, 1, "boolean", false)) && !truthy(v)) ? arg(args, kwargs, 0, "default_value", "") : v),
  dictsort: (v, args, kwargs) => {
    if (!isDict(v)) fail("You can only sort by either \"key\" or \"value\" of a mapping");
    const by = str(arg(args, kwargs, 1, "by", "key"));
    if (by !== "key" && by !== "value") fail('You can only sort by either "key" or "value"');
    const pairs = dictEntries(v as Dict).map(([k, x]) => tuple([k, x]));
    return sorted(pairs, (p) => ignoreCase((p as Value[])[by === "key" ? 0 : 1]!, arg(args, kwargs, 0, "case_sensitive", false)), truthy(arg(args, kwargs, 2, "reverse", false)));
  },
  escape: (v) => (v instanceof Markup ? v : new Markup(escapeHtml(str(v)))),
  // Python's float(value), then "%.1f" of the value in the largest unit it reaches (past Y, still Y)
  filesizeformat: (v, args, kwargs, ctx) => {
    const bytes = isNumber(v) ? num(v) : isStr(v) ? (parseFloatStrict(strOf(v)) ?? fail(`could not convert string to float: ${repr(v)}`))
      : fail(`float() argument must be a string or a real number, not '${typeName(v)}'`);
    const binary = truthy(arg(args, kwargs, 0, "binary", false)), base = binary ? 1024 : 1000;
    if (bytes === 1) return "1 Byte";
    if (bytes < base) return Number.isFinite(bytes) ? `${str(pyInt(Math.trunc(bytes)))} Bytes` : fail("cannot convert float infinity to integer");
    const prefixes = binary ? ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB", "ZiB", "YiB"] : ["kB", "MB", "GB", "TB", "PB", "EB", "ZB", "YB"];
    // Python divides by the exact int base ** (i + 2), converted to the nearest float
    const unitOf = (i: number) => Number(BigInt(base) ** BigInt(i + 2));
    const reached = prefixes.findIndex((_, j) => bytes < unitOf(j)), at = reached < 0 ? prefixes.length - 1 : reached;
    return `${percentFormat("%.1f", tuple([new Float((base * bytes) / unitOf(at))]), ctx)} ${prefixes[at]}`;
  },
  first: (v) => {
    const items = iterate(v);
    return items.length ? items[0]! : new Undefined("No first item, sequence was empty.");
  },
  float: (v, args, kwargs) => {
    const fallback = arg(args, kwargs, 0, "default", new Float(0));
    if (isNumber(v)) return new Float(num(v));
    const x = isStr(v) ? parseFloatStrict(strOf(v)) : undefined;
    return x === undefined ? fallback : new Float(x);
  },
  forceescape: (v) => new Markup(escapeHtml(str(v))),
  format: (v, args, kwargs, ctx) => {
    if (args.length && kwargs.size) fail("can't handle positional and keyword arguments at the same time");
    return percentFormat(str(v), kwargs.size ? kwargs as Map<never, Value> : tuple(args), ctx);
  },
  groupby: (v, args, kwargs, ctx) => {
    const attribute = arg(args, kwargs, 0, "attribute", null);
    const fallback = arg(args, kwargs, 1, "default", null);
    const caseSensitive = truthy(arg(args, kwargs, 2, "case_sensitive", false));
    const key = attrGetter(ctx, attribute, fallback === null ? undefined : fallback, !caseSensitive);
    const real = attrGetter(ctx, attribute, fallback === null ? undefined : fallback);
    const groups: { key: Value; items: Value[] }[] = [];
    for (const item of sorted(iterate(v), key, false)) {
      const k = key(item), last = groups.at(-1);
      if (last && equals(last.key, k)) last.items.push(item);
      else groups.push({ key: k, items: [item] });
    }
    return groups.map((g) => groupTuple(caseSensitive ? g.key : real(g.items[0]!), g.items));
  },
  indent: (v, args, kwargs) => {
    // jinja2 appends "\n" to the value itself: anything but a str is Python's TypeError
    if (!isStr(v)) fail(`unsupported operand type(s) for +=: '${typeName(v)}' and 'str'`);
    const width = arg(args, kwargs, 0, "width", 4);
    const indention = isStr(width) ? strOf(width) : " ".repeat(Number(num(width as number)));
    const first = truthy(arg(args, kwargs, 1, "first", false)), blank = truthy(arg(args, kwargs, 2, "blank", false));
    const lines = splitLines(`${str(v)}\n`);
    let out: string;
    if (blank) out = lines.join(`\n${indention}`);
    else out = lines[0]! + (lines.length > 1 ? `\n${lines.slice(1).map((l) => (l ? indention + l : l)).join("\n")}` : "");
    return first ? indention + out : out;
  },
  int: (v, args, kwargs) => {
    const fallback = arg(args, kwargs, 0, "default", 0);
    const base = Number(num(arg(args, kwargs, 1, "base", 10) as number));
    if (typeof v === "boolean") return Number(v);
    if (typeof v === "bigint") return v;
    // int(1e20) is exact: every double beyond 2^53 is an integer, which pyInt keeps as a BigInt
    if (isNumber(v)) return Number.isFinite(num(v)) ? pyInt(Math.trunc(num(v))) : fallback;
    if (!isStr(v)) return fallback;
    let t = strOf(v).trim().replace(/(?<=[0-9a-z])_(?=[0-9a-z])/gi, "");
    // int(s, 16) takes "0x1A" (and 8 "0o", 2 "0b")
    const prefix = { 16: /^([+-]?)0x/i, 8: /^([+-]?)0o/i, 2: /^([+-]?)0b/i }[base];
    if (prefix) t = t.replace(prefix, "$1");
    const digits = "0123456789abcdefghijklmnopqrstuvwxyz".slice(0, base);
    const m = new RegExp(`^([+-]?)([${digits}]+)$`, "i").exec(t);
    if (m) {
      // every digit kept, as Python's int() keeps them ('12345678901234567890'|int is exact)
      const magnitude = [...m[2]!.toLowerCase()].reduce((n, c) => n * BigInt(base) + BigInt(digits.indexOf(c)), 0n);
      return pyInt(m[1] === "-" ? -magnitude : magnitude);
    }
    const x = parseFloatStrict(strOf(v));
    return x === undefined || !Number.isFinite(x) ? fallback : pyInt(Math.trunc(x));
  },
  items: (v) => {
    if (v instanceof Undefined) return new Generator([], "do_items");
    return new Generator(() => (isDict(v) ? dictEntries(v).map(([k, x]) => tuple([k, x])) : fail("Can only get item pairs from a mapping.")), "do_items");
  },
  join: (v, args, kwargs, ctx) => {
    const attribute = arg(args, kwargs, 1, "attribute", null);
    const get = attribute === null ? (x: Value) => x : attrGetter(ctx, attribute);
    return iterate(v).map((x) => str(get(x))).join(str(arg(args, kwargs, 0, "d", "")));
  },
  last: (v) => {
    if (v instanceof Generator) fail("'generator' object is not reversible");
    const items = iterate(v);
    return items.length ? items.at(-1)! : new Undefined("No last item, sequence was empty.");
  },
  length: (v) => length(v),
  list: (v) => iterate(v).slice(),
  lower: (v) => str(v).toLowerCase(),
  map: (v, args, kwargs, ctx) => {
    if (!truthy(v) && !(v instanceof Generator)) return new Generator([], "sync_do_map");
    return new Generator(() => {
      const items = iterate(v);
      if (kwargs.has("attribute")) return items.map(attrGetter(ctx, kwargs.get("attribute")!, kwargs.get("default")));
      const [name, ...rest] = args;
      if (name === undefined) fail("map requires a filter argument");
      return items.map((x) => ctx.filter(str(name!), x, rest, kwargs));
    }, "sync_do_map");
  },
  pprint: (v) => pformat(v),
  max: (v, args, kwargs, ctx) => minMax(v, kwargs, args, ctx, true),
  min: (v, args, kwargs, ctx) => minMax(v, kwargs, args, ctx, false),
  // Python's random.choice: len(), then an item by a random index (a dict's by that index as a key: a KeyError unless it has it)
  random: (v) => {
    const n = v instanceof Generator ? fail("object of type 'generator' has no len()") : length(v);
    if (n === 0) return new Undefined("No random item, sequence was empty.");
    const i = Math.floor(Math.random() * n);
    if (isDict(v)) return dictGet(v, i) ?? fail(`${i}`);
    if (v instanceof DictView) fail(`'${v.type}' object is not subscriptable`);
    if (isStr(v)) { const c = [...strOf(v)][i]!; return v instanceof Markup ? new Markup(c) : c; }
    return iterate(v)[i]!;
  },
  reject: (v, args, _kw, ctx) => selectOrReject(v, args, ctx, false, false),
  rejectattr: (v, args, _kw, ctx) => selectOrReject(v, args, ctx, false, true),
  replace: (v, args, kwargs, ctx) => {
    const count = arg(args, kwargs, 2, "count", null);
    return pyReplace(str(v), str(arg(args, kwargs, 0, "old", "")), str(arg(args, kwargs, 1, "new", "")), count === null ? -1 : Number(num(count as number)), ctx);
  },
  // Python's reversed(): an iterator of its own type for what is reversible; a generator is made a list first
  reverse: (v) => {
    if (isStr(v)) return [...strOf(v)].reverse().join("");
    // reversed() of an Undefined (it has a len() and items) is an empty iterator
    if (v instanceof Undefined) return new Generator([], "", "reversed");
    const reversed = iterate(v).slice().reverse();
    if (v instanceof Generator || v instanceof Undefined) return reversed;
    const type = isTuple(v) ? "reversed" : rangeOf(v) ? "range_iterator" : Array.isArray(v) ? "list_reverseiterator" : isDict(v) ? "dict_reversekeyiterator"
      : v instanceof DictView ? `dict_reverse${v.type.slice(5, -1)}iterator` : "reversed";
    return new Generator(reversed, "", type);
  },
  round: (v, args, kwargs) => {
    const precision = Number(num(arg(args, kwargs, 0, "precision", 0) as number));
    const method = str(arg(args, kwargs, 1, "method", "common"));
    if (!isNumber(v)) fail(`type ${typeName(v)} doesn't define __round__ method`);
    const x = num(v as number), m = 10 ** precision;
    // Python's round() of an int is an int
    if (method === "common") return typeof v === "bigint" ? v : typeof v === "number" ? pyRound(x, precision) : new Float(pyRound(x, precision));
    if (method === "ceil") return new Float(Math.ceil(x * m) / m);
    if (method === "floor") return new Float(Math.floor(x * m) / m);
    return fail("method must be common, ceil or floor");
  },
  safe: (v) => new Markup(str(v)),
  select: (v, args, _kw, ctx) => selectOrReject(v, args, ctx, true, false),
  selectattr: (v, args, _kw, ctx) => selectOrReject(v, args, ctx, true, true),
  slice: (v, args, kwargs) => new Generator(() => {
    const items = iterate(v), slices = Number(num(arg(args, kwargs, 0, "slices", 1) as number));
    if (!(slices >= 1)) fail("slice() needs at least 1 slice");
    const fill = arg(args, kwargs, 1, "fill_with", null);
    const per = Math.floor(items.length / slices), extra = items.length % slices, out: Value[] = [];
    let offset = 0;
    for (let i = 0; i < slices; i++) {
      const start = offset + i * per;
      if (i < extra) offset++;
      const row = items.slice(start, offset + (i + 1) * per);
      if (fill !== null && i >= extra) row.push(fill);
      out.push(row);
    }
    return out;
  }, "sync_do_slice"),
  sort: (v, args, kwargs, ctx) => {
    const attribute = arg(args, kwargs, 2, "attribute", null);
    const getters = attribute === null ? [(x: Value) => x] : (isStr(attribute) ? strOf(attribute).split(",") : [attribute]).map((a) => attrGetter(ctx, a));
    const caseSensitive = arg(args, kwargs, 1, "case_sensitive", false);
    // jinja2's make_multi_attrgetter: the key is always a list, compared item by item with == first (two undefined attributes are equal, never ordered)
    const key = (x: Value) => getters.map((g) => ignoreCase(g(x), caseSensitive));
    return sorted(iterate(v), key, truthy(arg(args, kwargs, 0, "reverse", false)));
  },
  string: (v) => (v instanceof Markup ? v : str(v)),
  striptags: (v) => stripTags(str(v)),
  sum: (v, args, kwargs, ctx) => {
    const attribute = arg(args, kwargs, 0, "attribute", null);
    const get = attribute === null ? (x: Value) => x : attrGetter(ctx, attribute);
    return iterate(v).reduce<Value>((total, x) => add(total, get(x)), arg(args, kwargs, 1, "start", 0));
  },
  title: (v) => str(v).split(WORD_BEGINNING).map((w) => (w ? [...w][0]!.toUpperCase() + [...w].slice(1).join("").toLowerCase() : w)).join(""),
  tojson: (v, args, kwargs) => {
    const indent = arg(args, kwargs, 1, "indent", null);
    const separators = arg(args, kwargs, 2, "separators", null);
    if (separators !== null && (!Array.isArray(separators) || separators.length !== 2)) fail("tojson: separators must be a pair of strings");
    return toJson(v, {
      ensureAscii: truthy(arg(args, kwargs, 0, "ensure_ascii", false)),
      // json.dumps writes ' ' * indent for what is not a str: an int or bool repeats, anything else is a TypeError
      indent: indent === null ? undefined : isStr(indent) ? strOf(indent)
        : typeof indent === "number" || typeof indent === "boolean" ? " ".repeat(Math.max(0, Number(indent)))
        : fail(`can't multiply sequence by non-int of type '${typeName(indent)}'`),
      itemSeparator: separators === null ? undefined : str((separators as Value[])[0]!),
      keySeparator: separators === null ? undefined : str((separators as Value[])[1]!),
      sortKeys: truthy(arg(args, kwargs, 3, "sort_keys", false)),
    });
  },
  trim: (v, args, kwargs, ctx) => strMethod(str(v), "strip", ctx)!.call([arg(args, kwargs, 0, "chars", null)], new Map()),
  truncate: (v, args, kwargs) => {
    const len = Number(num(arg(args, kwargs, 0, "length", 255) as number));
    // jinja2 measures the value with len() before it treats it as a str: a short list comes back as it is, an int has no len()
    if (!isStr(v) && length(v) <= len + Number(num(arg(args, kwargs, 3, "leeway", 5) as number))) return v;
    const s = isStr(v) ? strOf(v) : fail(`'${typeName(v)}' object has no attribute 'rfind'`), cs = [...s];
    const killwords = truthy(arg(args, kwargs, 1, "killwords", false));
    const end = str(arg(args, kwargs, 2, "end", "..."));
    const leeway = Number(num(arg(args, kwargs, 3, "leeway", 5) as number));
    if (len < [...end].length) fail(`expected length >= ${[...end].length}, got ${len}`);
    if (leeway < 0) fail(`expected leeway >= 0, got ${leeway}`);
    if (cs.length <= len + leeway) return s;
    const head = cs.slice(0, len - [...end].length).join("");
    if (killwords) return head + end;
    const cut = head.lastIndexOf(" ");
    return (cut < 0 ? head : head.slice(0, cut)) + end;
  },
  unique: (v, args, kwargs, ctx) => new Generator(() => {
    const get = attrGetter(ctx, arg(args, kwargs, 1, "attribute", null));
    const seen: Value[] = [], out: Value[] = [];
    for (const x of iterate(v)) {
      const k = ignoreCase(get(x), arg(args, kwargs, 0, "case_sensitive", false));
      keyOf(k);
      if (!seen.some((s) => equals(s, k))) { seen.push(k); out.push(x); }
    }
    return out;
  }, "sync_do_unique"),
  upper: (v) => str(v).toUpperCase(),
  urlize: (v, args, kwargs) => {
    const schemes = arg(args, kwargs, 4, "extra_schemes", null);
    return urlize(v, {
      trimUrlLimit: arg(args, kwargs, 0, "trim_url_limit", null), nofollow: truthy(arg(args, kwargs, 1, "nofollow", false)), target: arg(args, kwargs, 2, "target", null),
      rel: arg(args, kwargs, 3, "rel", null), extraSchemes: schemes === null ? [] : iterate(schemes),
    });
  },
  // jinja2's url_quote: a str (or what is not iterable, as str()) quoted with "/" kept; a dict or pairs as a query string
  urlencode: (v) => {
    if (isStr(v) || !(Array.isArray(v) || isDict(v) || v instanceof Generator || v instanceof DictView || v instanceof Undefined)) return urlQuote(str(v), false);
    const pairs = isDict(v) ? dictEntries(v).map(([k, x]) => [k, x] as Value[]) : iterate(v).map((p) => {
      const kv = isStr(p) ? [...strOf(p)] : Array.isArray(p) || isDict(p) || p instanceof DictView || p instanceof Generator ? iterate(p) : fail(`cannot unpack non-iterable ${typeName(p)} object`);
      return kv.length === 2 ? kv : fail(kv.length < 2 ? `not enough values to unpack (expected 2, got ${kv.length})` : "too many values to unpack (expected 2)");
    });
    return pairs.map(([k, x]) => `${urlQuote(str(k!), true)}=${urlQuote(str(x!), true)}`).join("&");
  },
  wordcount: (v) => (str(v).match(/[\p{L}\p{N}_]+/gu) ?? []).length,
  // textwrap.wrap of each line (expand_tabs and replace_whitespace off), the lines joined with wrapstring
  wordwrap: (v, args, kwargs) => {
    if (!isStr(v)) fail(`'${typeName(v)}' object has no attribute 'splitlines'`);
    const width = Number(num(arg(args, kwargs, 0, "width", 79) as number));
    const breakLong = truthy(arg(args, kwargs, 1, "break_long_words", true));
    const wrapstring = arg(args, kwargs, 2, "wrapstring", null);
    const hyphens = truthy(arg(args, kwargs, 3, "break_on_hyphens", true));
    const join = wrapstring === null ? "\n" : str(wrapstring);
    // Python's "".splitlines() is [] (splitLines gives [""]): no line, so no check of the width
    return (str(v) === "" ? [] : splitLines(str(v))).map((line) => textWrap(line, width, breakLong, hyphens).join(join)).join(join);
  },
  // autoescape is off (transformers' environment): a str, with the values (not none, not undefined) escaped
  xmlattr: (v, args, kwargs) => {
    if (!isDict(v)) fail(`'${typeName(v)}' object has no attribute 'items'`);
    const items: string[] = [];
    for (const [k, x] of v as Map<Value, Value>) {
      if (x === null || x instanceof Undefined) continue;
      if (!isStr(k)) fail("expected string or bytes-like object");
      if (/[ \t\n\r\f\v/>=]/.test(strOf(k as string))) fail(`Invalid character in attribute name: ${repr(k)}`);
      items.push(`${escapeHtml(strOf(k as string))}="${x instanceof Markup ? x.s : escapeHtml(str(x))}"`);
    }
    const out = items.join(" ");
    return truthy(arg(args, kwargs, 0, "autospace", true)) && out ? ` ${out}` : out;
  },
};
FILTERS.d = FILTERS.default!;
FILTERS.e = FILTERS.escape!;

export const hasFilter = (name: string): boolean => Object.hasOwn(FILTERS, name);

/** why a filter cannot be applied: jinja2 has none of that name (tsllm has all of jinja2's built-in filters) */
export const noFilter = (name: string, found = ""): string => `No filter named '${name}'${found}.`;

/** a filter applied; `name` must be one hasFilter knows */
export function applyFilter(name: string, value: Value, args: Value[], kwargs: Map<string, Value>, ctx: FilterContext): Value {
  return FILTERS[name]!(value, args, kwargs, ctx);
}

/** groupby's items: a tuple (grouper, list) whose members are also .grouper and .list */
const GROUPS = new WeakMap<Value[], PyObject>();
function groupTuple(key: Value, items: Value[]): Value[] {
  const t = tuple([key, items]);
  GROUPS.set(t, new PyObject("_GroupTuple", new Map([["grouper", key], ["list", items]])));
  return t;
}
/** the named members of a groupby item, if it is one */
export const groupMembers = (v: Value[]): PyObject | undefined => GROUPS.get(v);

/** textwrap's chunks: whitespace runs, words, and (breaking on hyphens) the pieces of hyphenated words and em-dashes */
const WS = "[\\t\\n\\v\\f\\r ]", WP = "[\\p{L}\\p{N}_!\"'&.,?]", LT = "[\\p{L}\\p{Nl}\\p{No}_]";
const WORDSEP = new RegExp(`(${WS}+|(?<=${WP})-{2,}(?=[\\p{L}\\p{N}_])|[^\\t\\n\\v\\f\\r ]+?(?:-(?:(?<=${LT}{2}-)|(?<=${LT}-${LT}-))(?=${LT}-?${LT})|(?=${WS}|$)|(?<=${WP})(?=-{2,}[\\p{L}\\p{N}_])))`, "u");
const WORDSEP_SIMPLE = new RegExp(`(${WS}+)`, "u");
/** Python's str.strip() == "" */
const blank = (s: string) => /^[\t\n\v\f\r \x1c-\x1f\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]*$/.test(s);
/** textwrap.TextWrapper(width, break_long_words, break_on_hyphens, expand_tabs=False, replace_whitespace=False).wrap(text); lengths in code points */
function textWrap(text: string, width: number, breakLong: boolean, hyphens: boolean): string[] {
  if (width <= 0) fail(`invalid width ${width} (must be > 0)`);
  const chunks = text.split(hyphens ? WORDSEP : WORDSEP_SIMPLE).filter(Boolean).map((c) => [...c]).reverse();
  const lines: string[] = [];
  while (chunks.length) {
    const line: string[][] = [];
    let len = 0;
    if (blank(chunks.at(-1)!.join("")) && lines.length) chunks.pop();
    while (chunks.length && len + chunks.at(-1)!.length <= width) { len += chunks.at(-1)!.length; line.push(chunks.pop()!); }
    if (chunks.length && chunks.at(-1)!.length > width) {
      // _handle_long_word: cut the word at the space left (after its last hyphen there, if any), or put it alone on a line
      const spaceLeft = width < 1 ? 1 : width - len, chunk = chunks.at(-1)!;
      if (breakLong) {
        let end = spaceLeft;
        if (hyphens && chunk.length > spaceLeft) {
          const hyphen = chunk.slice(0, spaceLeft).lastIndexOf("-");
          if (hyphen > 0 && chunk.slice(0, hyphen).some((c) => c !== "-")) end = hyphen + 1;
        }
        line.push(chunk.slice(0, end));
        chunks[chunks.length - 1] = chunk.slice(end);
      } else if (!line.length) line.push(chunks.pop()!);
      len = line.reduce((n, c) => n + c.length, 0);
    }
    if (line.length && blank(line.at(-1)!.join(""))) line.pop();
    if (line.length) lines.push(line.map((c) => c.join("")).join(""));
  }
  return lines;
}

/** urllib.parse.quote_from_bytes of the UTF-8 bytes, "/" kept unless for a query string, where a space is "+" */
function urlQuote(s: string, forQuery: boolean): string {
  if (/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/.test(s)) fail("'utf-8' codec can't encode a lone surrogate: surrogates not allowed");
  const keep = forQuery ? /[A-Za-z0-9_.~-]/ : /[A-Za-z0-9_.~/-]/;
  let out = "";
  for (const b of new TextEncoder().encode(s)) {
    const c = String.fromCharCode(b);
    out += b < 128 && keep.test(c) ? c : forQuery && b === 32 ? "+" : `%${b.toString(16).toUpperCase().padStart(2, "0")}`;
  }
  return out;
}

/** markupsafe.escape of a str (the interpreter escapes with it too) */
export { escapeHtml };
/**
 * Python's html.unescape (what Markup.unescape calls): numeric references (decimal or hex, ";"
 * optional, the Windows-1252 remapping of 0x80-0x9f, U+FFFD for what is no character, nothing for
 * controls and noncharacters), and the named ones templates meet (amp, lt, gt, quot, apos, nbsp); the
 * rest of HTML5's named references stay as written
 */
/** Python's html.unescape: numeric references, and every HTML5 named one (a legacy name needs no ";"; an unknown name keeps its longest known legacy prefix) */
const unescapeHtml = (s: string): string =>
  s.replace(/&(#[0-9]+;?|#[xX][0-9a-fA-F]+;?|[^\t\n\f <&#;]{1,32};?)/g, (ref: string, body: string) => {
    if (body[0] !== "#") {
      const named = body.endsWith(";") ? NAMED_ENTITIES.get(body.slice(0, -1)) : LEGACY_ENTITIES.has(body) ? NAMED_ENTITIES.get(body) : undefined;
      if (named !== undefined) return named;
      for (let n = body.length - 1; n > 1; n--) {
        if (LEGACY_ENTITIES.has(body.slice(0, n))) return NAMED_ENTITIES.get(body.slice(0, n))! + body.slice(n);
      }
      return ref;
    }
    const digits = body.replace(/;$/, "");
    return charRef(/^#[xX]/.test(digits) ? Number.parseInt(digits.slice(2), 16) : Number(digits.slice(1))) ?? ref;
  });
/** Windows-1252's characters for the bytes 0x80-0x9f (a byte it leaves undefined is its own code point) */
const CP1252 = "\u20ac\x81\u201a\u0192\u201e\u2026\u2020\u2021\u02c6\u2030\u0160\u2039\u0152\x8d\u017d\x8f\x90\u2018\u2019\u201c\u201d\u2022\u2013\u2014\u02dc\u2122\u0161\u203a\u0153\x9d\u017e\u0178";
function charRef(n: number): string {
  if (n === 0) return "\ufffd";
  if (n === 0x0d) return "\r";
  if (n >= 0x80 && n <= 0x9f) return CP1252[n - 0x80]!;
  if ((n >= 0xd800 && n <= 0xdfff) || !(n <= 0x10ffff)) return "\ufffd";
  if ((n >= 1 && n <= 8) || n === 0xb || (n >= 0xe && n <= 0x1f) || n === 0x7f || (n >= 0xfdd0 && n <= 0xfdef) || (n & 0xfffe) === 0xfffe) return "";
  return String.fromCodePoint(n);
}

let add: (a: Value, b: Value) => Value = () => fail("sum() is not available");
/** (set by the interpreter: sum() adds with +) */
export const useAdd = (f: (a: Value, b: Value) => Value): void => { add = f; };

type Test = (value: Value, args: Value[]) => boolean;
const TESTS: Record<string, Test> = {
  boolean: (v) => typeof v === "boolean",
  // (jinja2's Undefined and LoopContext define __call__: an undefined value and any loop's `loop` are callable, a namespace is not)
  callable: (v) => v instanceof Callable || v instanceof Undefined || (v instanceof PyObject && v.kind === "LoopContext"),
  defined: (v) => !(v instanceof Undefined),
  divisibleby: (v, [n = 1]) => {
    if (!isNumber(v) || !isNumber(n)) fail(isStr(v) ? "not all arguments converted during string formatting" : `unsupported operand type(s) for %: '${typeName(v)}' and '${typeName(n)}'`);
    const d = num(n as number);
    return d === 0 ? fail("integer division or modulo by zero") : num(v as number) % d === 0;
  },
  eq: (v, [x = null]) => equals(v, x),
  escaped: (v) => v instanceof Markup,
  // Python's `value in env.filters`: a list or dict is a TypeError, not False
  filter: (v) => (hashable(v) ? isStr(v) && hasFilter(strOf(v)) : fail(`unhashable type: '${typeName(v)}'`)),
  test: (v) => (hashable(v) ? isStr(v) && hasTest(strOf(v)) : fail(`unhashable type: '${typeName(v)}'`)),
  even: (v) => (typeof v === "bigint" ? v % 2n === 0n : isNumber(v) ? ((num(v) % 2) + 2) % 2 === 0 : fail(`not all arguments converted during string formatting`)),
  false: (v) => v === false,
  float: (v) => v instanceof Float,
  ge: (v, [x = null]) => compare(v, x, ">=") >= 0,
  gt: (v, [x = null]) => compare(v, x, ">") > 0,
  in: (v, [x = null]) => contains(x, v),
  integer: (v) => typeof v === "number" || typeof v === "bigint",
  iterable: (v) => isStr(v) || Array.isArray(v) || isDict(v) || v instanceof Generator || v instanceof DictView || v instanceof Bytes || v instanceof Undefined,
  le: (v, [x = null]) => compare(v, x, "<=") <= 0,
  lower: (v) => isLower(str(v)),
  lt: (v, [x = null]) => compare(v, x, "<") < 0,
  mapping: (v) => isDict(v),
  ne: (v, [x = null]) => !equals(v, x),
  none: (v) => v === null,
  number: (v) => isNumber(v),
  odd: (v) => (typeof v === "bigint" ? v % 2n !== 0n : isNumber(v) ? ((num(v) % 2) + 2) % 2 === 1 : fail(`not all arguments converted during string formatting`)),
  sameas: (v, [x = null]) => v === x || (isTuple(v) && v === x),
  sequence: (v) => isStr(v) || Array.isArray(v) || isDict(v) || v instanceof Bytes || v instanceof Undefined,
  string: (v) => isStr(v),
  true: (v) => v === true,
  undefined: (v) => v instanceof Undefined,
  upper: (v) => isUpper(str(v)),
};
Object.assign(TESTS, { "==": TESTS.eq, equalto: TESTS.eq, "!=": TESTS.ne, ">": TESTS.gt, greaterthan: TESTS.gt, ">=": TESTS.ge, "<": TESTS.lt, lessthan: TESTS.lt, "<=": TESTS.le });

export const hasTest = (name: string): boolean => Object.hasOwn(TESTS, name);
/** the tests that take an argument besides the value (the rest take none: Python's TypeError for more) */
const TESTS_WITH_ARGUMENT = new Set(["divisibleby", "eq", "ne", "gt", "ge", "lt", "le", "in", "sameas", "==", "equalto", "!=", ">", "greaterthan", ">=", "<", "lessthan", "<="]);
export function applyTest(name: string, value: Value, args: Value[]): boolean {
  const most = TESTS_WITH_ARGUMENT.has(name) ? 1 : 0;
  if (args.length > most) fail(`test ${name} takes ${most + 1} positional argument${most ? "s" : ""} but ${args.length + 1} were given`);
  return TESTS[name]!(value, args);
}
