import * as jinja from "@huggingface/jinja";

/*
 * Python jinja2 semantics where @huggingface/jinja departs from them, for the interpreter in
 * template.ts. Chat templates are written for (and their output checked against) Hugging Face
 * transformers, which renders them with jinja2; test/chat-template-jinja.test.ts renders real
 * templates with both and compares. The library keeps its value classes private, so they are
 * taken from values its Environment makes.
 */

/** a value of the library's runtime (StringValue, ObjectValue, ...): `type` names its class */
export interface Value {
  type: string;
  value: unknown;
  toString(): string;
}
type ValueClass = new (value?: unknown) => Value;

const probe = new (jinja.Environment as unknown as new () => { set(name: string, value: unknown): void; variables: Map<string, Value> })();
const classOf = (v: unknown): ValueClass => {
  probe.set(`v${probe.variables.size}`, v);
  return [...probe.variables.values()].at(-1)!.constructor as ValueClass;
};
const StringValue = classOf("");
const IntegerValue = classOf(1);
const ArrayValue = classOf([]);
const ObjectValue = classOf({});
const UndefinedValue = classOf(undefined);

export const str = (s: string): Value => new StringValue(s);
export const int = (n: number): Value => new IntegerValue(n);
export const undefinedValue = (): Value => new UndefinedValue();

const isArray = (v: Value) => v.type === "ArrayValue" || v.type === "TupleValue";
const isMapping = (v: Value) => v.type === "ObjectValue" || v.type === "KeywordArgumentsValue";

/** Python's repr() of a str: single quotes unless the text has ' and no ", non-printable characters escaped */
function reprString(s: string): string {
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
function reprFloat(x: number): string {
  if (Number.isNaN(x)) return "nan";
  if (!Number.isFinite(x)) return x > 0 ? "inf" : "-inf";
  if (x === 0) return Object.is(x, -0) ? "-0.0" : "0.0";
  const [digits, exp] = x.toExponential().split("e") as [string, string];
  const e = Number(exp);
  if (e < -4 || e >= 16) {
    const mantissa = digits.includes(".") ? digits.replace(/0+$/, "").replace(/\.$/, "") : digits;
    return `${mantissa}e${e < 0 ? "-" : "+"}${String(Math.abs(e)).padStart(2, "0")}`;
  }
  const fixed = String(x).includes("e") ? x.toFixed(Math.max(0, -e + (digits.replace(/[-.]/g, "").length - 1))) : String(x);
  return fixed.includes(".") ? fixed : `${fixed}.0`;
}

/** Python's repr() of a value, as str() shows the items of a list or dict */
export function pyRepr(v: Value): string {
  switch (v.type) {
    case "StringValue": return reprString(v.value as string);
    case "FloatValue": return reprFloat(v.value as number);
    case "IntegerValue": return String(v.value);
    case "BooleanValue": return v.value ? "True" : "False";
    case "NullValue": return "None";
    case "UndefinedValue": return "Undefined";
    case "ArrayValue": return `[${(v.value as Value[]).map(pyRepr).join(", ")}]`;
    case "TupleValue": {
      const items = (v.value as Value[]).map(pyRepr);
      return items.length === 1 ? `(${items[0]},)` : `(${items.join(", ")})`;
    }
    case "ObjectValue":
    case "KeywordArgumentsValue":
      return `{${[...(v.value as Map<string, Value>)].map(([k, x]) => `${reprString(k)}: ${pyRepr(x)}`).join(", ")}}`;
    default: return v.toString();
  }
}

/** Python's str() of a value, as `{{ x }}`, `~` and `|string` write it (an undefined value writes nothing) */
export function pyStr(v: Value): string {
  switch (v.type) {
    case "StringValue": return v.value as string;
    case "UndefinedValue": return "";
    case "FunctionValue": return v.toString();
    default: return pyRepr(v);
  }
}

/** the Python type name jinja2's errors use */
export function pyType(v: Value): string {
  return ({ StringValue: "str", IntegerValue: "int", FloatValue: "float", BooleanValue: "bool", NullValue: "NoneType", UndefinedValue: "Undefined", ArrayValue: "list", TupleValue: "tuple", ObjectValue: "dict", KeywordArgumentsValue: "dict" } as Record<string, string>)[v.type] ?? v.type;
}

/** the statements whose evaluation is not output (they return their own rendering, or nothing) */
export const STATEMENT_TYPES = new Set(["Program", "Set", "If", "For", "Macro", "CallStatement", "FilterStatement", "Break", "Continue", "Comment"]);

/** jinja2's filters that read an undefined value as "" (they call str() on it) */
const STRING_FILTERS = new Set(["trim", "upper", "lower", "title", "capitalize", "string", "indent", "replace", "striptags", "wordcount", "center", "truncate", "wordwrap", "urlencode"]);

/**
 * A filter applied the way jinja2 applies it where the library would differ; undefined when the
 * library's own filter does the same ({ operand }: the library's filter, on this operand instead).
 */
export function applyFilterLikeJinja2(operand: Value, name: string, hasArgs: boolean, fail: (message: string) => never): { value: Value } | { operand: Value } | undefined {
  if (name === "string" && !hasArgs) return { value: str(pyStr(operand)) };
  if (operand.type === "UndefinedValue") {
    // Undefined is an empty string to str(), an empty sequence to len() and iteration
    if (STRING_FILTERS.has(name)) return { operand: str("") };
    if (name === "length" || name === "count") return { value: int(0) };
    if (name === "list") return { value: new ArrayValue([]) };
    if (name === "items" || name === "dictsort") return { value: new ArrayValue([]) };
    return undefined;
  }
  // select_or_reject and map loop over nothing when given None ("if value: for item in value")
  if (operand.type === "NullValue" && ["selectattr", "rejectattr", "select", "reject", "map"].includes(name)) return { value: new ArrayValue([]) };
  if ((name === "min" || name === "max") && !hasArgs && isArray(operand)) {
    const items = operand.value as Value[];
    if (items.length === 0) return { value: undefinedValue() };
    const key = (x: Value) => (x.type === "StringValue" ? (x.value as string).toLowerCase() : x.value);
    let best = items[0]!;
    for (const x of items.slice(1)) {
      const a = key(x) as number | string, b = key(best) as number | string;
      if (typeof a !== typeof b && !(typeof a !== "string" && typeof b !== "string")) fail(`'<' not supported between instances of '${pyType(x)}' and '${pyType(best)}'`);
      if (name === "min" ? a < b : a > b) best = x;
    }
    return { value: best };
  }
  return undefined;
}

/** jinja2's dict(): a mapping of its keyword arguments (and of a mapping or pairs given first) */
export function dictGlobal(args: Value[]): Value {
  const entries = new Map<string, Value>();
  for (const a of args) {
    if (isMapping(a)) for (const [k, v] of a.value as Map<string, Value>) entries.set(k, v);
    else if (isArray(a)) {
      for (const pair of a.value as Value[]) {
        const kv = isArray(pair) ? (pair.value as Value[]) : [];
        if (kv.length !== 2 || kv[0]!.type !== "StringValue") throw new Error("dict() expects pairs of a string key and a value");
        entries.set(kv[0]!.value as string, kv[1]!);
      }
    } else throw new Error(`'${pyType(a)}' object is not iterable`);
  }
  return new ObjectValue(entries);
}

export const array = (items: Value[]): Value => new ArrayValue(items);

const FunctionValue = classOf(() => null);
/** a function the template can call, taking and returning the library's values (keyword arguments come last, as one mapping) */
export const functionValue = (fn: (args: Value[]) => Value): Value => new FunctionValue(fn);

/** Python's str.format() for the fields chat templates use: {} and {0} (positional), {name} (keyword), {{ and }} */
export function formatString(template: string, args: Value[]): Value {
  const kwargs = args.at(-1)?.type === "KeywordArgumentsValue" ? (args.pop()!.value as Map<string, Value>) : new Map<string, Value>();
  let next = 0;
  return str(template.replace(/\{\{|\}\}|\{([^{}]*)\}/g, (m, field: string | undefined) => {
    if (m === "{{") return "{";
    if (m === "}}") return "}";
    const key = field ?? "";
    const v = key === "" ? args[next++] : /^\d+$/.test(key) ? args[Number(key)] : kwargs.get(key);
    if (v === undefined) throw new Error(key === "" || /^\d+$/.test(key) ? "Replacement index out of range for positional args tuple" : `KeyError: '${key}'`);
    return pyStr(v);
  }));
}

/** `a, b` loop variables unpack tuples as they unpack lists */
export function tuplesAsLists(v: Value): Value {
  return isArray(v) && (v.value as Value[]).some((x) => x.type === "TupleValue")
    ? new ArrayValue((v.value as Value[]).map((x) => (x.type === "TupleValue" ? new ArrayValue(x.value) : x)))
    : v;
}
