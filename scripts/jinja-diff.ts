/*
 * The differential fuzzer of tsllm's Jinja engine (src/chat/jinja/): random small templates and
 * contexts from a grammar of what real chat templates use (filters with their keyword arguments,
 * tests with arguments, str / list / dict methods (the sandbox's refusals included), slicing with
 * negative steps, loops and loop.* (cycle, changed, previtem / nextitem, recursive loop(...)),
 * namespaces set in loops, macros with defaults / varargs / kwargs and their attributes,
 * {% call %} blocks passing caller() arguments, set and filter blocks with filter chains, tuple
 * unpacking, whitespace control {%- -%} {%+ +%} with trim_blocks / lstrip_blocks, string escapes,
 * arithmetic with // % **, comparisons, in, ~, tojson, dict and list literals, str.encode()'s bytes,
 * Unicode digits and numerals under str.is*(), HTML entities under striptags), rendered by
 * tsllm and by Python's jinja2 set up as transformers sets it up
 * (scripts/jinja2-oracle.py, one python process per batch). They must agree on the text, or
 * both fail in the same class: when the template is compiled, or when it is rendered.
 * scripts/fuzz-jinja.ts runs it from the command line, test/chat-template-jinja.test.ts a few
 * hundred seeded cases.
 */
import { ChatTemplate, type ChatMessage } from "../src/chat/index.js";
import { Rng } from "../src/testing/rng.js";
import { renderBatchWithJinja2, type Jinja2Outcome } from "./jinja2-oracle.js";

export interface FuzzCase {
  template: string;
  context: Record<string, unknown>;
}

/** how an outcome is compared: the text (Python's object addresses left out), or the class of failure */
type Verdict = { out: string } | { fails: "compile" | "render" } | { skip: string };

const STRINGS = ["a", "b c", "it's", 'say "hi"', "x\\ny", "tab\\there", "é😀", "  padded  ", "Hello, World", "", "a,b,,c", "<b>&amp;", "3", "-2.5", "\\u00e9\\x41",
  "a\\u3000b\\x1cc", "see http://x.com, (www.y.org) me@z.io.", "o'neil-smith {x}", "ǅungla ßtraße ﬁ",
  // numbers of other scripts and kinds (str.isdigit / isnumeric / isdecimal differ on them), and HTML entities for striptags
  "²³", "½Ⅻ", "一二三", "٣٤", "①⑴", "ʕ", "<i>caf&eacute;</i>&nbsp;&hellip;&ampx &notit; &#x41;&copy2"];
const NAMES = ["xs", "s", "d", "n", "f", "msgs", "names", "empty", "nothing", "flag", "nested", "undefined_var", "tree"];
const TESTS = ["defined", "undefined", "none", "string", "number", "integer", "float", "odd", "even", "sequence", "mapping", "iterable", "boolean", "true", "false", "lower", "upper", "divisibleby(2)", "eq(1)", "in([1, 2, 'a'])", "gt(1)", "sameas(none)",
  "divisibleby(0)", "divisibleby 3", "sameas(false)", "sameas 1", "in('abc')", "in(d)", "callable", "escaped", "ne('a')", "le 2", "filter", "test", "sameas(xs)"];
const FILTERS = [
  "length", "upper", "lower", "title", "capitalize", "trim", "string", "int", "float", "abs", "round", "round(1)", "list", "first", "last", "join(', ')", "join",
  "sort", "sort(reverse=true)", "reverse", "unique", "min", "max", "sum", "tojson", "tojson(indent=2)", "tojson(sort_keys=true)", "default('dflt')", "default('z', true)",
  "items", "dictsort", "map('upper')", "map('string')", "map(attribute='role')", "select('odd')", "reject('none')", "select", "selectattr('role', 'equalto', 'user')",
  "rejectattr('role')", "replace('a', 'b')", "truncate(5)", "center(7)", "indent(2)", "wordcount", "batch(2)", "slice(2)", "count", "e", "safe", "striptags",
  "int(0, 16)", "float(1.5)", "trim('a')", "list|length", "join('-')", "groupby('role')", "d", "unique|list", "attr('role')", "format(1, 2)",
  "filesizeformat", "filesizeformat(true)", "xmlattr", "xmlattr(false)", "urlencode", "random is defined", "wordwrap(5)", "wordwrap(3, false, '|')",
  "pprint", "urlize", "urlize(10, true)", "dictsort(by='value')", "dictsort(reverse=true)", "dictsort(true, 'value', true)", "unique(case_sensitive=true)", "unique(attribute='role')",
  "sum(attribute='n')", "sum(start=10)", "sum(start=[])", "sum('n', 1)", "map(attribute='n', default=0)", "map(attribute='n')", "map('default', 'z')", "map('round', 1)",
  "selectattr('n', 'gt', 1)", "selectattr('content', 'in', ['a', 'ok'])", "rejectattr('n', 'defined')", "selectattr('n')", "select('gt', 2)", "reject('in', [1, 2])", "select('divisibleby', 2)",
  "tojson(separators=(',', ':'))", "tojson(indent=1, sort_keys=true)", "tojson(ensure_ascii=true)", "tojson(indent='--')", "indent(2, true)", "indent(first=true, blank=true)", "indent('> ', true, true)",
  "truncate(5, true)", "truncate(8, false, '..', 0)", "truncate(3, leeway=2)", "center(9)", "center(2)", "replace('a', 'b', 1)", "replace('', '-')", "batch(2, 'x')", "slice(3, 0)",
  "round(1, 'floor')", "round(0, 'ceil')", "join(attribute='role')", "min(attribute='n')", "max(case_sensitive=true)", "groupby('n', default=0)", "sort(attribute='n')", "sort(case_sensitive=true)",
  "title", "striptags", "capitalize", "wordcount", "list|reverse", "string|list", "first|string", "last|tojson",
];
const STR_METHODS = ["upper()", "lower()", "strip()", "split(',')", "split()", "startswith('a')", "endswith('c')", "replace('a', 'x')", "title()", "find('b')", "count('a')",
  "lstrip()", "rstrip(' ')", "capitalize()", "splitlines()", "isdigit()", "zfill(4)", "center(6, '*')", "rsplit(',', 1)", "partition(',')", "format(1, 'q')", "join(['1', '2'])",
  "replace('a', 'x', 1)", "replace('', '.', 2)", "strip('ab')", "split(',', 1)", "split(none, 1)", "startswith(('a', 'H'))", "endswith(('c', 'd'), 1)", "format(a=1)", "format_map({'a': 1})",
  "swapcase()", "casefold()", "isalpha()", "isspace()", "istitle()", "ljust(5, '.')", "rjust(5)", "rfind('a')", "index('a')", "expandtabs(4)", "removeprefix('a')", "removesuffix('c')",
  "splitlines(true)", "rpartition(' ')", "upper", "__class__", "mro()", "isupper()", "rindex('z')", "strip(none)", "split('')",
  "isnumeric()", "isdecimal()", "isalnum()", "islower()", "isprintable()", "encode()", "encode('ascii')", "encode('latin-1', 'replace')", "encode().decode()",
  "encode()|list", "encode()|length", "encode()[0]", "encode() == s.encode()"];
const DICT_METHODS = ["items()", "keys()", "values()", "get('a')", "get('zz', 0)", "get('a', 'x')", "update({'a': 2})", "pop('a')", "setdefault('a', 1)", "copy()", "get()", "items()|list", "keys()|sort|list"];
const LIST_METHODS = ["index(1)", "count(1)", "index('a')", "append(1)", "pop()", "copy()", "index(1, 1)", "sort()", "reverse()", "insert(0, 1)", "extend([1])", "remove(1)", "clear()"];
const BINARY = ["+", "-", "*", "/", "//", "%", "~", "==", "!=", "<", ">", "<=", ">=", "in", "not in", "and", "or"];

/** one random case of the grammar (deterministic in the rng) */
export function randomCase(rng: Rng): FuzzCase {
  const pick = <T>(xs: readonly T[]): T => xs[rng.u32() % xs.length]!;
  const chance = (p: number) => rng.u32() / 2 ** 32 < p;
  const int = (lo: number, hi: number) => lo + (rng.u32() % (hi - lo + 1));
  const quote = (s: string) => (chance(0.5) ? `'${s.replace(/'/g, "\\'")}'` : `"${s.replace(/"/g, '\\"')}"`);
  const locals: string[] = [];

  const literal = (depth: number): string => {
    switch (int(0, 9)) {
      case 0: case 1: return String(int(-3, 12));
      case 2: return pick(["0.5", "2.0", "-1.5", "1e3", "0.1", "3.14159", "1_000", "0x1F", "12345678901234567890"]);
      case 3: case 4: return quote(pick(STRINGS));
      case 5: return pick(["none", "true", "false", "True", "None"]);
      case 6: return `[${Array.from({ length: int(0, 3) }, () => expr(depth + 1)).join(", ")}]`;
      case 7: return `{${Array.from({ length: int(0, 2) }, () => `${quote(pick(["a", "b", "role", "k"]))}: ${expr(depth + 1)}`).join(", ")}}`;
      case 8: return pick(["(1, 2)", "('a',)", "()", `(${expr(depth + 1)}, ${expr(depth + 1)})`]);
      default: return pick([`range(${int(0, 4)})`, `range(${int(-2, 2)}, ${int(0, 6)}, ${pick(["1", "2", "-1"])})`]);
    }
  };
  const name = () => (locals.length && chance(0.4) ? pick(locals) : pick(NAMES));
  const atom = (depth: number): string => (chance(0.5) ? name() : literal(depth));
  const postfix = (e: string): string => {
    switch (int(0, 7)) {
      case 0: return `${e}|${pick(FILTERS)}`;
      case 1: return `${e}|${pick(FILTERS)}|${pick(FILTERS)}`;
      case 2: return `${e}.${pick(STR_METHODS)}`;
      case 3: return `${e}.${pick([...DICT_METHODS, ...LIST_METHODS])}`;
      case 4: return `${e}[${pick(["0", "-1", "1", "'a'", "'role'", "n"])}]`;
      // a variable sliced: jinja2's optimizer folds a slice of constants through its getitem, which makes Python's TypeError undefined
      case 5: return chance(0.5)
        ? `${name()}[${pick(["", "1", "-2", "n"])}:${pick(["", "2", "-1"])}${pick(["", ":2", ":-1", ":-2"])}]`
        : `${name()}[${pick(["", "3", "-1", "0", "n", "-10", "10"])}:${pick(["", "0", "-3", "1", "10", "-10"])}:${pick(["-1", "-2", "-3", "n", "0", "none"])}]`;
      case 6: return `${e}.${pick(["role", "content", "a", "length"])}`;
      default: return `${e} is ${chance(0.3) ? "not " : ""}${pick(TESTS)}`;
    }
  };
  function expr(depth = 0): string {
    if (depth > 2) return atom(depth);
    switch (int(0, 9)) {
      case 0: case 1: return atom(depth);
      case 2: case 3: return postfix(chance(0.5) ? name() : `(${expr(depth + 1)})`);
      case 4: case 5: return `${expr(depth + 1)} ${pick(BINARY)} ${expr(depth + 1)}`;
      case 6: return `${expr(depth + 1)} ** ${int(0, 3)}`;
      case 7: return `${expr(depth + 1)} if ${expr(depth + 1)} else ${expr(depth + 1)}`;
      case 8: return `${pick(["not ", "-", ""])}(${expr(depth + 1)})`;
      default: return more(depth);
    }
  }
  /** formatting, chained comparisons, jinja2's globals */
  function more(depth: number): string {
    switch (int(0, 5)) {
      case 0: return `${expr(depth + 1)} ~ ${quote(pick(STRINGS))}`;
      case 1: return `${quote(pick(["%s|%d", "%5.2f", "%-4s|%r", "%x %o", "%(a)s", "%s%%", "%+d %e", "%c"]))} % ${pick([`(${expr(depth + 1)}, ${expr(depth + 1)})`, expr(depth + 1), "{'a': 1}"])}`;
      case 2: return `${quote(pick(["{}|{}", "{:>5}|{!r}", "{0}-{0}", "{:.1f}", "{:05d}", "{:,}", "{a}", "{:^7}"]))}.format(${expr(depth + 1)}, ${expr(depth + 1)}${chance(0.3) ? ", a=1" : ""})`;
      case 3: return `${expr(depth + 1)} ${pick(["<", "<=", "=="])} ${expr(depth + 1)} ${pick(["<", "!=", ">"])} ${expr(depth + 1)}`;
      case 4: return pick([`dict(a=${expr(depth + 1)}, b=2)`, `dict(${pick(["[('a', 1)]", "d", "{}"])})`, `namespace(a=${expr(depth + 1)}).a`]);
      default: return `${expr(depth + 1)} is ${pick(["in", "not in"]) === "in" ? "" : "not "}in ${pick(["xs", "names", "s", "d", "[1, 'a']", "range(3)"])}`;
    }
  }
  // whitespace control: {%- and -%} strip, {%+ keeps what lstrip_blocks would strip, +%} the newline trim_blocks would drop
  const open = () => `{%${pick(["", "", "", "-", "+"])} `;
  const close = () => ` ${pick(["", "", "", "-", "+"])}%}`;
  const text = () => pick(["x", " ", "\n", "  \n  ", "a b", "\n\n", "|", "  "]);
  const block = (depth: number): string => Array.from({ length: int(1, 3) }, () => statement(depth)).join("");
  function statement(depth: number): string {
    const k = depth > 2 ? int(0, 2) : int(0, 21);
    switch (k) {
      case 0: return text();
      case 1: case 2: return `{{${pick(["", "", "-"])} ${expr()} ${chance(0.2) ? "-" : ""}}}`;
      case 3: return `${open()}if ${expr()}${close()}${block(depth + 1)}${chance(0.5) ? `${open()}elif ${expr()}${close()}${block(depth + 1)}` : ""}${chance(0.5) ? `${open()}else${close()}${block(depth + 1)}` : ""}${open()}endif${close()}`;
      case 4: case 5: {
        const v = pick(["x", "item", "m"]);
        locals.push(v);
        const loopUse = pick(["loop.index", "loop.index0", "loop.first", "loop.last", "loop.length", "loop.revindex", "loop.previtem", "loop.nextitem", "loop.cycle('a', 'b')", "loop.depth"]);
        const body = `${chance(0.6) ? `{{ ${loopUse} }}` : ""}${block(depth + 1)}${chance(0.15) ? `${open()}if ${expr()}${close()}${open()}${pick(["break", "continue"])}${close()}${open()}endif${close()}` : ""}`;
        const out = `${open()}for ${v} in ${pick([name(), expr(1), "msgs", "xs", "range(3)", "d", "d.items()", "s"])}${chance(0.2) ? ` if ${expr(1)}` : ""}${close()}${body}${chance(0.3) ? `${open()}else${close()}${block(depth + 1)}` : ""}${open()}endfor${close()}`;
        locals.pop();
        return out;
      }
      case 6: case 7: {
        const v = pick(["y", "z"]);
        const out = `${open()}set ${v} = ${expr()}${close()}`;
        locals.push(v);
        return out;
      }
      case 8: {
        locals.push("ns");
        return `${open()}set ns = namespace(c=${expr(1)}, t=${quote(pick(STRINGS))})${close()}${open()}set ns.c = ${pick(["ns.c", "ns.t", expr(1)])} ${pick(["+", "~", "or"])} ${expr(1)}${close()}{{ ns.c }}`;
      }
      case 9: {
        locals.push("b");
        return `${open()}set b${chance(0.3) ? ` | ${pick(["upper", "trim", "length", "tojson"])}` : ""}${close()}${block(depth + 1)}${open()}endset${close()}{{ b }}`;
      }
      case 10: {
        const m = `${open()}macro mac(p, q=${literal(2)})${close()}${block(depth + 1)}{{ p }}{{ q }}${open()}endmacro${close()}`;
        return `${m}{{ mac(${expr(1)}) }}${chance(0.5) ? `{{ mac(${expr(1)}, q=${expr(1)}) }}` : ""}`;
      }
      case 11: switch (int(0, 4)) {
        case 0: return `{# ${pick(["c", "{{ x }}", "%}"])} #}${text()}`;
        case 1: return `${open()}raw${close()}{{ ${pick(["x", "1 +"])} }}${text()}${open()}endraw${close()}`;
        case 2: return `${open()}for k, v in ${pick(["d.items()", "d|items", "d|dictsort", "[(1, 2), ('a', 'b')]", "msgs|groupby('role')"])}${close()}{{ k }}={{ v }}${chance(0.5) ? "{{ loop.changed(v) }}" : ""}${open()}endfor${close()}`;
        case 3: return `${open()}macro wrap(t)${close()}[{{ caller() }}|{{ t }}]${open()}endmacro${close()}${open()}call wrap(${expr(1)})${close()}${block(depth + 1)}${open()}endcall${close()}`;
        default: return `${open()}set j = joiner(${quote(pick([", ", "|"]))})${close()}${open()}set c = cycler('a', 'b')${close()}${open()}for i in ${pick(["xs", "range(3)", "names"])}${close()}{{ j() }}{{ c.next() }}{{ i }}${open()}endfor${close()}`;
      }
      case 12: return `${open()}filter ${pick(["upper", "trim", "replace('a', 'b')"])}${close()}${block(depth + 1)}${open()}endfilter${close()}`;
      case 13: return `${open()}with w = ${expr(1)}${close()}{{ w }}${block(depth + 1)}${open()}endwith${close()}`;
      default: return moreStatements(depth);
    }
  }
  /** macros with varargs / kwargs / caller(args), recursive loops, loop helpers, namespaces in loops, unpacking, filter blocks, comments and expressions with whitespace control */
  function moreStatements(depth: number): string {
    switch (int(0, 7)) {
      case 0: {
        const uses = [chance(0.5) ? "{{ varargs }}" : "", chance(0.5) ? "{{ kwargs }}" : "", chance(0.2) ? "{{ v.name }}|{{ v.arguments }}|{{ v.catch_kwargs }}|{{ v.catch_varargs }}" : ""].join("");
        const call = pick(["v(1)", "v(1, 2, 3)", "v(a=1, b=3)", "v(1, k=2)", "v()", "v(1, a=2)", "v(*xs)", "v(**d)", "v(1, *[2, 3])", `v(${expr(1)}, c=${expr(1)})`, "v(b=1)"]);
        return `${open()}macro v(a, b=${literal(2)}, c=none)${close()}{{ a }}|{{ b }}|{{ c }}${uses}${block(depth + 1)}${open()}endmacro${close()}{{ ${call} }}`;
      }
      case 1: {
        const params = pick(["", "(a)", "(a, b=5)", "(a, b)", "(*args)"]);
        const callerArgs = pick(["x", "x, 1", "", "x, b=2", "*xs"]);
        return `${open()}macro m(x)${close()}<{{ caller(${callerArgs}) }}>${chance(0.3) ? "{{ m.caller }}" : ""}${open()}endmacro${close()}${open()}call${params} m(${expr(1)})${close()}${params ? "{{ a is defined and a }}{{ b is defined and b }}{{ args is defined and args }}" : ""}${block(depth + 1)}${open()}endcall${close()}`;
      }
      case 2: {
        const inner = pick(["{{ loop(node.children) }}", "{{ loop(node.children)|upper }}", "{{ loop(node.children or []) }}", "{% set r = loop(node.children) %}{{ r|length }}"]);
        return `${open()}for node in tree${chance(0.3) ? " if node.name != 'c'" : ""} recursive${close()}{{ node.name }}@{{ loop.depth }}/{{ loop.depth0 }}/{{ loop.index }}${open()}if node.children${close()}[${inner}]${open()}endif${close()}${open()}endfor${close()}`;
      }
      case 3: {
        const helpers = ["{{ loop.cycle('a', 'b', 'c') }}", "{{ loop.changed(x) }}", "{{ loop.changed(x, loop.index is even) }}", "{{ loop.previtem }}", "{{ loop.nextitem }}", "{{ loop.previtem is defined }}",
          "{{ loop.nextitem is undefined }}", "{{ loop.revindex0 }}", "{{ loop.cycle() }}", "{{ loop.length - loop.index }}", "{{ loop }}", "{{ loop.changed() }}"];
        const body = Array.from({ length: int(1, 3) }, () => pick(helpers)).join("|");
        return `${open()}for x in ${pick(["xs", "names", "[1, 1, 2, 2, 1]", "s", "range(4)", "msgs|map(attribute='role')", "empty"])}${chance(0.2) ? " if x" : ""}${close()}${body};${open()}endfor${close()}`;
      }
      case 4: {
        locals.push("ns");
        // (a `loop` kept in the namespace reads as the loop left it: one object advanced by each iteration)
        const keep = chance(0.3);
        return `${open()}set ns = namespace(found=false, items=[], c=0, l=none)${close()}${open()}for m in msgs${close()}${keep ? `${open()}set ns.l = loop${close()}` : ""}${open()}if m.role ${pick(["==", "!="])} ${quote(pick(["user", "system", "assistant"]))}${close()}${open()}set ns.found = true${close()}${open()}set ns.items = ns.items + [m.content]${close()}${open()}set ns.c = ns.c + ${pick(["1", "loop.index", "m.n|default(0)", "m.n"])}${close()}${open()}endif${close()}${open()}endfor${close()}{{ ns.found }}{{ ns.items }}{{ ns.c }}${keep ? "{{ ns.l.index }}|{{ ns.l.last }}|{{ ns.l.previtem }}|{{ ns.l }}" : ""}`;
      }
      case 5: {
        const [a, b] = ["u1", "u2"];
        locals.push(a, b);
        return `${open()}set ${a}, ${b} = ${pick(["(1, 2)", "xs", "'ab'", "d", "[none, 'x']", "msgs[0].items()|list|first", expr(1)])}${close()}{{ ${a} }}|{{ ${b} }}`;
      }
      case 6: return `${open()}filter ${pick(["indent(2, true)", "center(20)", "truncate(4)", "tojson", "title|trim", "wordcount", "replace('\n', '/')", "urlize", "striptags", "indent(first=true)|upper"])}${close()}${block(depth + 1)}${open()}endfilter${close()}`;
      default: return `${text()}{{${pick(["", "-", "+"])} ${expr(1)} ${pick(["", "-", "+"])}}}${text()}{#${pick(["", "-", "+"])} c ${pick(["", "-", "+"])}#}${text()}`;
    }
  }
  const template = Array.from({ length: int(1, 4) }, () => statement(0)).join(pick(["", "\n", "  "]));
  const context = {
    xs: pick([[3, -1, 2, 2, 10], [], [1.5, 2], ["b", "a"]]),
    s: pick(["  Hello, World. hello again  ", "", "a,b", "é😀", "12", "²½", "&eacute;<b>x</b>"]),
    d: pick([{ a: 1, b: [1, 2] }, {}, { role: "user", content: "hi" }, { b: 2, a: 1 }]),
    n: int(-2, 5),
    f: pick([1.5, -0.5, 2.25, 1e-7]),
    msgs: [{ role: "system", content: "Sys" }, { role: "user", content: "Hi <b>" }, { role: "assistant", content: "ok", n: 2 }],
    names: ["b", "A", "c", "a"],
    empty: [],
    nothing: null,
    flag: chance(0.5),
    nested: { b: 1, a: { z: [1, 2.5, null, true], y: "é" } },
    tree: [{ name: "a", children: [{ name: "b", children: [] }, { name: "c", children: [{ name: "d" }] }] }, { name: "e" }],
  };
  return { template, context };
}

/** Python writes an object's address in its repr (`<generator object f at 0x7f...>`); tsllm cannot write the same one */
const withoutAddresses = (s: string) => s.replace(/0x[0-9a-f]{9,}/gi, "0x…");

function jinja2Verdict(o: Jinja2Outcome): Verdict {
  if ("out" in o) return { out: withoutAddresses(o.out) };
  if (/^(TimeoutError|RecursionError|MemoryError|OverflowError)/.test(o.error)) return { skip: o.error };
  return { fails: /^(TemplateSyntaxError|TemplateAssertionError)/.test(o.error) ? "compile" : "render" };
}

function tsllmVerdict(c: FuzzCase): Verdict & { message?: string } {
  let template: ChatTemplate;
  try {
    template = new ChatTemplate(c.template, "t");
  } catch (e) {
    return { fails: "compile", message: (e as Error).message };
  }
  try {
    const { msgs, ...variables } = c.context;
    return { out: withoutAddresses(template.render(msgs as ChatMessage[], { variables: { ...variables, msgs } })) };
  } catch (e) {
    const message = (e as Error).message;
    // tsllm's own bounds (time, output size, range() elements) are not jinja2's
    if (/took too long|more than the \d+ allowed|characters; the template may be runaway|nest more than/.test(message)) return { skip: message };
    return { fails: "render", message };
  }
}

export interface Mismatch {
  index: number;
  template: string;
  context: Record<string, unknown>;
  jinja2: Jinja2Outcome;
  tsllm: string;
}

/** renders the cases with both engines (jinja2 once for the whole batch); the cases where they differ, and how many were compared */
export function compareCases(cases: readonly FuzzCase[]): { mismatches: Mismatch[]; compared: number; skipped: number } {
  const expected = renderBatchWithJinja2(cases.map((c) => ({ template: c.template, contexts: [{ messages: c.context.msgs, add_generation_prompt: true, bos_token: "", eos_token: "", unk_token: "", pad_token: "", ...c.context }] })));
  const mismatches: Mismatch[] = [];
  let compared = 0, skipped = 0;
  cases.forEach((c, i) => {
    const outcome = expected[i]![0]!;
    const want = jinja2Verdict(outcome), got = tsllmVerdict(c);
    if ("skip" in want || "skip" in got) { skipped++; return; }
    compared++;
    const same = "out" in want ? "out" in got && got.out === want.out : "fails" in got && got.fails === want.fails;
    if (!same) mismatches.push({ index: i, template: c.template, context: c.context, jinja2: outcome, tsllm: "out" in got ? JSON.stringify({ out: got.out }) : `${got.fails}: ${got.message}` });
  });
  return { mismatches, compared, skipped };
}

/** case k of a seed: the one new Rng(seed + k) makes */
export const fuzzCases = (seed: number, count: number, first = 0): FuzzCase[] => Array.from({ length: count }, (_, k) => randomCase(new Rng(seed + first + k)));
