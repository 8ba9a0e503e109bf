/*
 * The differential fuzzer of tsllm's Jinja engine (src/chat/jinja/): random small templates and
 * contexts from a grammar of what real chat templates use (filters, tests, str / list / dict
 * methods, slicing, loops and loop.*, namespace, macros, set blocks, whitespace control, string
 * escapes, arithmetic with // % **, comparisons, in, is defined, ~, tojson, dict and list
 * literals), rendered by tsllm and by Python's jinja2 set up as transformers sets it up
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

const STRINGS = ["a", "b c", "it's", 'say "hi"', "x\\ny", "tab\\there", "é😀", "  padded  ", "Hello, World", "", "a,b,,c", "<b>&amp;", "3", "-2.5", "\\u00e9\\x41"];
const NAMES = ["xs", "s", "d", "n", "f", "msgs", "names", "empty", "nothing", "flag", "nested", "undefined_var"];
const TESTS = ["defined", "undefined", "none", "string", "number", "integer", "float", "odd", "even", "sequence", "mapping", "iterable", "boolean", "true", "false", "lower", "upper", "divisibleby(2)", "eq(1)", "in([1, 2, 'a'])", "gt(1)", "sameas(none)"];
const FILTERS = [
  "length", "upper", "lower", "title", "capitalize", "trim", "string", "int", "float", "abs", "round", "round(1)", "list", "first", "last", "join(', ')", "join",
  "sort", "sort(reverse=true)", "reverse", "unique", "min", "max", "sum", "tojson", "tojson(indent=2)", "tojson(sort_keys=true)", "default('dflt')", "default('z', true)",
  "items", "dictsort", "map('upper')", "map('string')", "map(attribute='role')", "select('odd')", "reject('none')", "select", "selectattr('role', 'equalto', 'user')",
  "rejectattr('role')", "replace('a', 'b')", "truncate(5)", "center(7)", "indent(2)", "wordcount", "batch(2)", "slice(2)", "count", "e", "safe", "striptags",
  "int(0, 16)", "float(1.5)", "trim('a')", "list|length", "join('-')", "groupby('role')", "d", "unique|list", "attr('role')", "format(1, 2)",
  "filesizeformat", "filesizeformat(true)", "xmlattr", "xmlattr(false)", "urlencode", "random is defined", "wordwrap(5)", "wordwrap(3, false, '|')",
];
const STR_METHODS = ["upper()", "lower()", "strip()", "split(',')", "split()", "startswith('a')", "endswith('c')", "replace('a', 'x')", "title()", "find('b')", "count('a')",
  "lstrip()", "rstrip(' ')", "capitalize()", "splitlines()", "isdigit()", "zfill(4)", "center(6, '*')", "rsplit(',', 1)", "partition(',')", "format(1, 'q')", "join(['1', '2'])"];
const DICT_METHODS = ["items()", "keys()", "values()", "get('a')", "get('zz', 0)", "get('a', 'x')"];
const LIST_METHODS = ["index(1)", "count(1)", "index('a')"];
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
      case 5: return `${name()}[${pick(["", "1", "-2", "n"])}:${pick(["", "2", "-1"])}${pick(["", ":2", ":-1", ":-2"])}]`;
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
  const ws = () => pick(["", "", "-", "+"]);
  const open = () => `{%${ws() === "-" ? "-" : ""} `;
  const close = () => ` ${chance(0.2) ? "-" : ""}%}`;
  const text = () => pick(["x", " ", "\n", "  \n  ", "a b", "\n\n", "|", "  "]);
  const block = (depth: number): string => Array.from({ length: int(1, 3) }, () => statement(depth)).join("");
  function statement(depth: number): string {
    const k = depth > 2 ? int(0, 2) : int(0, 13);
    switch (k) {
      case 0: return text();
      case 1: case 2: return `{{${ws() === "-" ? "-" : ""} ${expr()} ${chance(0.2) ? "-" : ""}}}`;
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
      default: return `${open()}with w = ${expr(1)}${close()}{{ w }}${block(depth + 1)}${open()}endwith${close()}`;
    }
  }
  const template = Array.from({ length: int(1, 4) }, () => statement(0)).join(pick(["", "\n", "  "]));
  const context = {
    xs: pick([[3, -1, 2, 2, 10], [], [1.5, 2], ["b", "a"]]),
    s: pick(["  Hello, World. hello again  ", "", "a,b", "é😀", "12"]),
    d: pick([{ a: 1, b: [1, 2] }, {}, { role: "user", content: "hi" }, { b: 2, a: 1 }]),
    n: int(-2, 5),
    f: pick([1.5, -0.5, 2.25, 1e-7]),
    msgs: [{ role: "system", content: "Sys" }, { role: "user", content: "Hi <b>" }, { role: "assistant", content: "ok", n: 2 }],
    names: ["b", "A", "c", "a"],
    empty: [],
    nothing: null,
    flag: chance(0.5),
    nested: { b: 1, a: { z: [1, 2.5, null, true], y: "é" } },
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
