import { SPACE as PY_SPACE } from "./methods.js";
import { Undefined, compare, dictEntries, fail, isDict, isList, isStr, isTuple, repr, str, strOf, typeName, type Value } from "./values.js";

/*
 * jinja2's pprint and urlize filters: Python's pprint.pformat (width 80, dicts sorted, long
 * containers one item a line, a long str cut at spaces into adjacent literals) and jinja2's
 * utils.urlize (3.1) with the sandbox's policies (rel="noopener", no target, no extra schemes).
 */

const WIDTH = 80;
/** Python's len() of a str: code points */
const len = (s: string): number => [...s].length;

/** pprint's _safe_key ordering: by <, else by the type's name (Python's str(type(x))), as sorted() meets them */
function safeLess(a: Value, b: Value): boolean {
  try {
    return compare(a, b) < 0;
  } catch {
    const ta = `<class '${typeName(a)}'>`, tb = `<class '${typeName(b)}'>`;
    return ta < tb;
  }
}

/** a dict's items in pprint's order (sorted by key) */
function sortedItems(d: Map<unknown, Value>): [Value, Value][] {
  return dictEntries(d as never).sort(([a], [b]) => (safeLess(a, b) ? -1 : safeLess(b, a) ? 1 : 0));
}

/** pprint's _safe_repr: repr(), but a dict's items sorted by key, at every depth of lists, tuples and dicts */
function safeRepr(v: Value): string {
  if (isDict(v)) return `{${sortedItems(v).map(([k, x]) => `${safeRepr(k)}: ${safeRepr(x)}`).join(", ")}}`;
  if (isList(v)) return `[${v.map(safeRepr).join(", ")}]`;
  if (isTuple(v)) return v.length === 1 ? `(${safeRepr(v[0]!)},)` : `(${v.map(safeRepr).join(", ")})`;
  return repr(v);
}

/** Python's pprint.pformat(v) */
export function pformat(v: Value): string {
  const out: string[] = [];
  format(v, 0, 0, 0, out);
  return out.join("");
}

/** PrettyPrinter._format: the repr where it fits in what the line has left, else the container split */
function format(v: Value, indent: number, allowance: number, level: number, out: string[]): void {
  const rep = safeRepr(v);
  if (len(rep) > WIDTH - indent - allowance) {
    if (isDict(v)) {
      out.push("{");
      const items = sortedItems(v);
      const inner = indent + 1;
      items.forEach(([k, x], i) => {
        const last = i === items.length - 1, key = safeRepr(k);
        out.push(key, ": ");
        format(x, inner + len(key) + 2, last ? allowance + 1 : 1, level + 1, out);
        if (!last) out.push(`,\n${" ".repeat(inner)}`);
      });
      out.push("}");
      return;
    }
    if (isList(v) || isTuple(v)) {
      const items: Value[] = v;
      const [open, close] = isList(v) ? ["[", "]"] : ["(", items.length === 1 ? ",)" : ")"];
      out.push(open);
      items.forEach((x, i) => {
        const last = i === items.length - 1;
        if (i) out.push(`,\n${" ".repeat(indent + 1)}`);
        format(x, indent + 1, last ? allowance + close.length : 1, level + 1, out);
      });
      out.push(close);
      return;
    }
    if (typeof v === "string") return formatStr(v, indent, allowance, level + 1, out);
  }
  out.push(rep);
}

/** Python's str.splitlines(keepends=True) */
const linesKeepingEnds = (s: string): string[] => s.match(/[^\n\r\v\f\x1c-\x1e\x85\u2028\u2029]*(\r\n|[\n\r\v\f\x1c-\x1e\x85\u2028\u2029]|$)/gu)!.filter(Boolean);
const WORD_AND_SPACE = new RegExp(`[^${PY_SPACE}]*[${PY_SPACE}]*`, "gu");

/** PrettyPrinter._pprint_str: a str too long for its line, cut into literals at its line ends and spaces */
function formatStr(s: string, indent: number, allowance: number, level: number, out: string[]): void {
  if (!s) { out.push(repr(s)); return; }
  const chunks: string[] = [];
  const lines = linesKeepingEnds(s);
  if (level === 1) { indent += 1; allowance += 1; }
  let maxWidth1 = WIDTH - indent;
  const maxWidth = WIDTH - indent;
  lines.forEach((line, i) => {
    const rep = repr(line);
    if (i === lines.length - 1) maxWidth1 -= allowance;
    if (len(rep) <= maxWidth1) { chunks.push(rep); return; }
    const parts = line.match(WORD_AND_SPACE)!.slice(0, -1);
    let maxWidth2 = maxWidth, current = "";
    parts.forEach((part, j) => {
      const candidate = current + part;
      if (j === parts.length - 1 && i === lines.length - 1) maxWidth2 -= allowance;
      if (len(repr(candidate)) > maxWidth2) {
        if (current) chunks.push(repr(current));
        current = part;
      } else current = candidate;
    });
    if (current) chunks.push(repr(current));
  });
  if (chunks.length === 1) { out.push(repr(s)); return; }
  out.push(`${level === 1 ? "(" : ""}${chunks.join(`\n${" ".repeat(indent)}`)}${level === 1 ? ")" : ""}`);
}

// ---- urlize ----

/** Python's Unicode \w (letters, numbers, _), \d and \S */
const WC = "\\p{L}\\p{N}_", W = `[${WC}]`, D = "\\p{Nd}", NOT_SPACE = `[^${PY_SPACE}]`;
/** jinja2's _http_re (re.IGNORECASE | re.VERBOSE) */
const HTTP = new RegExp(
  "^(" +
    `(https?://|www\\.)(([${WC}%-]+\\.)+)?([a-z]{2,63}|xn--[${WC}%]{2,59})` +
    `|([${WC}%-]{2,63}\\.)+(com|net|int|edu|gov|org|info|mil)` +
    `|(https?://)(((${D}{1,3})(\\.${D}{1,3}){3})|(\\[([${D}a-f]{0,4}:){2}([${D}a-f]{0,4}:?){1,6}\\]))` +
    `)(?::${D}{1,5})?(?:[/?#]${NOT_SPACE}*)?$`,
  "iu",
);
const EMAIL = new RegExp(`^${NOT_SPACE}+@${W}[${WC}.-]*\\.${W}+$`, "u");
const URI_SCHEME = new RegExp(`^([${WC}.+-]{2,}:(/){0,2})$`, "u");
const SPACES = new RegExp(`([${PY_SPACE}]+)`, "u");

/** markupsafe.escape of a str: & < > " ' as entities */
export const escapeHtml = (s: string): string => s.replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&#34;", "'": "&#39;" })[c]!);
/** markupsafe.escape of a value: a Markup as it is, anything else str() and escaped */
const htmlEscape = (v: Value): string => (isStr(v) && typeof v !== "string" ? strOf(v) : escapeHtml(str(v)));
/** Python's str.count (non-overlapping) */
const count = (s: string, sub: string): number => s.split(sub).length - 1;

export interface UrlizeOptions {
  trimUrlLimit: Value;
  nofollow: boolean;
  target: Value;
  rel: Value;
  extraSchemes: Value[];
}

/** jinja2's do_urlize: the URLs and e-mail addresses in the (escaped) text made links */
export function urlize(value: Value, o: UrlizeOptions): string {
  const relParts = new Set(o.rel === null || o.rel instanceof Undefined || !str(o.rel) ? [] : str(o.rel).split(new RegExp(`[${PY_SPACE}]+`, "u")).filter(Boolean));
  if (o.nofollow) relParts.add("nofollow");
  relParts.add("noopener");
  const rel = [...relParts].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0)).join(" ");
  for (const scheme of o.extraSchemes) {
    if (!isStr(scheme)) return fail(`expected string or bytes-like object, got '${typeName(scheme)}'`);
    if (!URI_SCHEME.test(strOf(scheme))) fail(`${repr(scheme)} is not a valid URI scheme prefix.`);
  }
  const trim = (x: string): string => {
    const limit = o.trimUrlLimit;
    if (limit === null) return x;
    // (checked only when a link is made, as Python meets len(x) > trim_url_limit)
    if (typeof limit !== "number" && typeof limit !== "boolean") fail(`'>' not supported between instances of 'int' and '${typeName(limit)}'`);
    const cs = [...x], n = Number(limit);
    return cs.length > n ? `${cs.slice(0, n).join("")}...` : x;
  };
  const relAttr = ` rel="${htmlEscape(rel)}"`;
  const targetAttr = o.target !== null && !(o.target instanceof Undefined) && str(o.target) ? ` target="${htmlEscape(o.target)}"` : "";
  const words = htmlEscape(value).split(SPACES);
  return words.map((word) => {
    let head = "", middle = word, tail = "";
    const lead = /^([(<]|&lt;)+/.exec(middle);
    if (lead) { head = lead[0]; middle = middle.slice(head.length); }
    if ([")", ">", ".", ",", "\n", "&gt;"].some((e) => middle.endsWith(e))) {
      const trail = /([)>.,\n]|&gt;)+$/.exec(middle);
      if (trail) { tail = trail[0]; middle = middle.slice(0, trail.index); }
    }
    // parentheses balanced by moving what closes them back from the tail
    for (const [open, close] of [["(", ")"], ["<", ">"], ["&lt;", "&gt;"]] as const) {
      const opens = count(middle, open);
      if (opens <= count(middle, close)) continue;
      for (let k = Math.min(opens, count(tail, close)); k > 0; k--) {
        const end = tail.indexOf(close) + close.length;
        middle += tail.slice(0, end);
        tail = tail.slice(end);
      }
    }
    if (HTTP.test(middle)) {
      const href = middle.startsWith("https://") || middle.startsWith("http://") ? middle : `https://${middle}`;
      middle = `<a href="${href}"${relAttr}${targetAttr}>${trim(middle)}</a>`;
    } else if (middle.startsWith("mailto:") && EMAIL.test(middle.slice(7))) {
      middle = `<a href="${middle}">${middle.slice(7)}</a>`;
    } else if (middle.includes("@") && !middle.startsWith("www.") && !middle.startsWith("@") && !middle.includes(":") && EMAIL.test(middle)) {
      middle = `<a href="mailto:${middle}">${middle}</a>`;
    } else {
      for (const scheme of o.extraSchemes.map((s) => strOf(s as string))) {
        if (middle !== scheme && middle.startsWith(scheme)) middle = `<a href="${middle}"${relAttr}${targetAttr}>${middle}</a>`;
      }
    }
    return head + middle + tail;
  }).join("");
}
