import { GrammarError } from "./grammar.js";

/**
 * `if` / `then` / `else` and `dependentSchemas` as the alternatives they are (JSON Schema 2020-12,
 * 10.2.2): a value takes `then` where it validates against `if`, `else` where it does not; and for
 * each key of dependentSchemas, an object with that key takes its schema. A grammar has no
 * complement of a schema, so `if` is taken where its complement is a union of schemas the converter
 * writes: a type, const or enum (ruled out by `not`), or an object test of properties (each a
 * type, const or enum) and required names. Each alternative here is a list of parts (a schema and
 * the path a fault in it names) that all apply, as an allOf; the alternatives do not overlap where
 * `if` decides between them, so every value valid under the schema is in one of them.
 */

type Schema = Record<string, unknown>;
export type Part = readonly [unknown, string];

/** the most alternatives if / then / else and dependentSchemas may make together */
const MAX_BRANCHES = 16;

const isMap = (v: unknown): v is Schema => typeof v === "object" && v !== null && !Array.isArray(v);

/** keywords that say nothing about which values are valid */
const ANNOTATIONS = new Set(["title", "description", "$comment", "default", "examples", "example", "deprecated", "readOnly", "writeOnly"]);

/** the keys of a schema that are not annotations */
const meaningful = (s: Schema): string[] => Object.keys(s).filter((k) => !ANNOTATIONS.has(k));

/**
 * A schema beside others in an allOf, where it names properties without additionalProperties: its
 * additionalProperties as JSON Schema reads it unset (true). The converter closes an object whose
 * additionalProperties is unset to its properties (the documented reading of a lone object), which
 * in a `then` that adds a property's bound would close an object the rest leaves open.
 */
function open(s: unknown): unknown {
  return isMap(s) && s["properties"] !== undefined && s["additionalProperties"] === undefined ? { ...s, additionalProperties: true } : s;
}

/** whether `not` of the schema is one the converter writes: a type, a const or an enum alone */
function ruledOutable(s: Schema): boolean {
  const keys = meaningful(s);
  return keys.length === 1 && ["type", "const", "enum"].includes(keys[0]!);
}

/**
 * {"type": T}'s complement as the other types, where they say it (an integer test's complement,
 * the numbers that are not integers, is no type): a type list merges with the schemas beside it
 * as a type, where a not merges only as a part of objects
 */
function otherTypes(cond: Schema): Schema | undefined {
  if (cond["type"] === undefined) return undefined;
  const types = [cond["type"]].flat();
  if (types.includes("integer") && !types.includes("number")) return undefined;
  const rest = ["object", "array", "string", "number", "boolean", "null"].filter((t) => !types.includes(t));
  return rest.length === 0 ? undefined : { type: rest };
}

/** whether the schema `rest` (the keywords beside if / dependentSchemas) admits values other than objects */
function admitsNonObjects(rest: Schema): boolean {
  const type = rest["type"];
  if (type !== undefined) return [type].flat().some((t) => t !== "object");
  return !["properties", "additionalProperties", "required", "patternProperties", "propertyNames", "minProperties", "maxProperties", "dependentRequired", "unevaluatedProperties"].some((k) => rest[k] !== undefined);
}

const NOT_OBJECT: Schema = { not: { type: "object" } };

/** the keywords of an `if` that tests a string (its complement is `not` of them, which the converter writes) */
const STRING_TEST = ["type", "pattern", "minLength", "maxLength"];

/** whether the schema `rest` (the keywords beside if) admits values other than strings */
function admitsNonStrings(rest: Schema): boolean {
  const type = rest["type"];
  if (type !== undefined) return [type].flat().some((t) => t !== "string");
  return !["pattern", "format", "minLength", "maxLength"].some((k) => rest[k] !== undefined);
}

const NOT_STRING: Schema = { not: { type: "string" } };

/**
 * `if` and its complement as alternatives of parts: [where it holds, where it does not]. `cond`
 * true or saying nothing: it always holds; false: never.
 */
function ifBranches(cond: unknown, at: string, rest: Schema): [Part[][], Part[][]] {
  if (cond === true || (isMap(cond) && meaningful(cond).length === 0)) return [[[]], []];
  if (cond === false || (isMap(cond) && isMap(cond["not"]) && meaningful(cond["not"] as Schema).length === 0 && meaningful(cond).length === 1)) return [[], [[]]];
  if (!isMap(cond)) throw new GrammarError(`${at}: expected a schema, got ${JSON.stringify(cond)}`);
  if (ruledOutable(cond)) return [[[[cond, at]]], [[[otherTypes(cond) ?? { not: cond }, at]]]];
  const keys = meaningful(cond);
  // a string test (pattern, lengths): strings it takes, and strings it does not (not of it, written
  // as the patterns' automata run together); a value other than a string passes it without type
  // string, and fails it with
  if (keys.length > 0 && keys.every((k) => STRING_TEST.includes(k)) && keys.some((k) => k !== "type") && (cond["type"] === undefined || cond["type"] === "string")) {
    const { type: _, ...test } = cond;
    const holds: Part[][] = [[[{ ...test, type: "string" }, at]]], fails: Part[][] = [[[{ type: "string", not: test }, at]]];
    if (admitsNonStrings(rest)) (cond["type"] === "string" ? fails : holds).push([[NOT_STRING, at]]);
    return [holds, fails];
  }
  const odd = keys.find((k) => !["type", "properties", "required", "additionalProperties"].includes(k));
  const typed = cond["type"] === "object";
  if (odd !== undefined || (cond["type"] !== undefined && !typed) || (cond["additionalProperties"] !== undefined && cond["additionalProperties"] !== true)) {
    throw new GrammarError(`${at}: only a type, a const or an enum, a string's pattern and lengths, or an object's properties (each a type, const or enum) and required names, can be tested in a grammar (else is taken where it fails: its complement, which a grammar does not write)`);
  }
  const properties = (isMap(cond["properties"]) ? cond["properties"] : {}) as Schema;
  const required = Array.isArray(cond["required"]) ? (cond["required"] as unknown[]) : [];
  if (cond["required"] !== undefined && !required.every((r) => typeof r === "string")) throw new GrammarError(`${at}/required: expected a list of property names, got ${JSON.stringify(cond["required"])}`);
  const fails: Part[][] = [];
  for (const r of required as string[]) fails.push([[{ type: "object", properties: { [r]: false }, additionalProperties: true }, `${at}/required`]]);
  for (const [k, p] of Object.entries(properties)) {
    const pAt = `${at}/properties/${k}`;
    if (p === true || (isMap(p) && meaningful(p).length === 0)) continue;
    if (p === false) fails.push([[{ type: "object", required: [k], additionalProperties: true }, pAt]]);
    else if (isMap(p) && ruledOutable(p)) fails.push([[{ type: "object", required: [k], properties: { [k]: { not: p } }, additionalProperties: true }, pAt]]);
    else throw new GrammarError(`${pAt}: a property tested by if can be a type, a const or an enum only (else is taken where it fails: its complement, which a grammar does not write)`);
  }
  // a value other than an object passes an object test without type, and fails one with it
  const holds: Part[][] = [[[{ ...open(cond) as Schema, type: "object" }, at]]];
  if (admitsNonObjects(rest)) (typed ? fails : holds).push([[NOT_OBJECT, at]]);
  return [holds, fails];
}

/** dependentSchemas as alternatives of parts: per key, present with its schema or absent; values other than objects apart */
function dependentBranches(deps: unknown, at: string, rest: Schema): Part[][] {
  if (!isMap(deps)) throw new GrammarError(`${at}: expected an object of property names to schemas, got ${JSON.stringify(deps)}`);
  let branches: Part[][] = [[]];
  for (const [k, dep] of Object.entries(deps)) {
    const kAt = `${at}/${k}`;
    const present: Part[] = [[{ type: "object", required: [k], additionalProperties: true }, kAt], [open(dep), kAt]];
    const absent: Part[] = [[{ type: "object", properties: { [k]: false }, additionalProperties: true }, kAt]];
    branches = branches.flatMap((b) => [[...b, ...present], [...b, ...absent]]);
    if (branches.length > MAX_BRANCHES) throw new GrammarError(`${at}: more than ${Math.log2(MAX_BRANCHES)} keys are not supported (each doubles the object's alternatives)`);
  }
  return admitsNonObjects(rest) ? [...branches, [[NOT_OBJECT, at]]] : branches;
}

/**
 * The alternatives a schema with if / then / else or dependentSchemas is, each a list of parts that
 * all apply (the keywords beside first, as `beside`); none of them holds those keywords any more
 */
export function conditionalBranches(s: Schema, path: string, beside: (rest: Schema) => Schema, narrow: (sub: unknown, type: string) => unknown): Part[][] {
  const { if: cond, then, else: otherwise, dependentSchemas, ...rest } = s;
  for (const k of ["unevaluatedProperties", "unevaluatedItems"]) {
    if (rest[k] !== undefined) throw new GrammarError(`${path}/${k}: not supported beside ${cond !== undefined ? "if" : "dependentSchemas"} (the keys or elements it evaluates depend on which branch holds)`);
  }
  let branches: Part[][] = [[[beside(rest), path]]];
  const times = (options: Part[][]): void => {
    branches = branches.flatMap((b) => options.map((o) => [...b, ...o]));
    if (branches.length > MAX_BRANCHES) throw new GrammarError(`${path}: if / then / else and dependentSchemas together make more than ${MAX_BRANCHES} alternatives, which is not supported`);
  };
  // (then and else without if are passed over, as the specification says)
  if (cond !== undefined) {
    const [holds, fails] = ifBranches(cond, `${path}/if`, rest);
    // (of a schema of one type, then / else without a type say nothing through another type's keywords)
    const own = typeof rest["type"] === "string" ? rest["type"] : undefined;
    const also = (parts: Part[][], sub: unknown, at: string): Part[][] => parts.map((p) => (sub === undefined ? p : [...p, [open(own === undefined ? sub : narrow(sub, own)), at] as const]));
    times([...also(holds, then, `${path}/then`), ...also(fails, otherwise, `${path}/else`)]);
  }
  if (dependentSchemas !== undefined) times(dependentBranches(dependentSchemas, `${path}/dependentSchemas`, rest));
  return branches;
}

/**
 * Whether `e` says that the schema at one of `roots` admits no value: a fault of emptiness named at
 * a root or a keyword of it. One deeper (an optional property's schema the converter cannot write,
 * say) is no proof of that.
 */
export function emptyAt(e: unknown, roots: readonly string[]): boolean {
  if (!(e instanceof GrammarError) || !/admits no value|admits none|no value is|rules out every|rules out objects, which|no integer lies|no string satisfies|which no object here has|another part requires/.test(e.message)) return false;
  const at = e.message.slice(0, e.message.indexOf(": "));
  return roots.some((r) => at === r || (at.startsWith(`${r}/`) && !at.slice(r.length + 1).includes("/")));
}

/**
 * Whether a fault met in one alternative (its parts at `path`) says that it admits no value (then
 * it is left out): named at the alternative, one of its parts, or a property one of them requires
 */
export function admitsNothing(e: unknown, parts: readonly Part[], path: string): boolean {
  const required = parts.flatMap(([p]) => (isMap(p) && Array.isArray(p["required"]) ? (p["required"] as unknown[]) : []));
  const bases = [path, ...parts.map(([, where]) => where)];
  return emptyAt(e, [...bases, ...bases.flatMap((b) => required.map((k) => `${b}/properties/${String(k)}`))]);
}
