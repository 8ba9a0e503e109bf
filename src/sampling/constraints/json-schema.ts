import { parseGbnf, withoutUnmatchable } from "./gbnf.js";
import { GrammarError, MAX_REPETITION } from "./grammar.js";
import { GrammarMatcher } from "./matcher.js";
import { decimalRangeRegex } from "./decimal-range.js";
import { integerRangeRegex } from "./int-range.js";
import { commonMultiple } from "./multiple-of.js";
import { checkPattern, finiteStrings, regexLengthGbnf, regexToGbnf, wholeMatch } from "./regex.js";
import { stringLanguageGbnf, type StringTest } from "./string-language.js";
import { admitsNothing, conditionalBranches, emptyAt, type Part } from "./conditional.js";

/**
 * JSON Schema to GBNF, for the subset llama.cpp's json_schema_to_grammar covers that matters for
 * structured output: type (one or a list), properties / required / additionalProperties, enum,
 * const, items with minItems / maxItems, tuples (prefixItems, or items as a list with
 * additionalItems), string minLength / maxLength and the formats date, time, date-time, uuid,
 * ipv4, ipv6, hostname, email and duration,
 * pattern (a regular expression: regex.ts; a format beside it is left to it, as schema generators
 * such as zod write the format's own expression there), anyOf / oneOf, allOf of objects, $ref into
 * $defs / definitions, propertyNames of type string (what JSON keys are anyway), and {} or
 * no type for any JSON value. Objects list their properties in the schema's order (required ones
 * always, optional ones where the model chooses) and take no others unless additionalProperties
 * says so (OpenAI's strict mode). Whitespace between tokens is bounded as llama.cpp's is (one
 * space, or one or two newlines then up to 20 spaces or tabs: RFC 8259's whitespace, never \f or
 * \v), so a model cannot spin on it forever. What the grammar
 * cannot express (ranges of non-integer numbers, uniqueItems, ...) is refused with the schema path;
 * integers take minimum / maximum (and the exclusive forms), or multipleOf.
 */
export type JsonSchema = boolean | { readonly [key: string]: unknown };

export interface JsonSchemaLimits {
  /** most rules the grammar may have */
  readonly maxRules?: number;
  /** deepest nesting of schemas (and of $ref chains) */
  readonly maxDepth?: number;
}

/** llama.cpp's SPACE_RULE (common/json-schema-to-grammar.cpp): a blank line between tokens is taken too */
const SPACE = `space ::= | " " | "\\n"{1,2} [ \\t]{0,20}`;
const PRIMITIVES: Record<string, string> = {
  boolean: `("true" | "false") space`,
  null: `"null" space`,
  integer: `("-"? ([0-9] | [1-9] [0-9]{0,15})) space`,
  number: `("-"? ([0-9] | [1-9] [0-9]{0,15})) ("." [0-9]{1,16})? ([eE] [-+]? [0-9]{1,15})? space`,
  string: `"\\"" char* "\\"" space`,
};
/**
 * A JSON string's character: raw (DEL too, which JSON.stringify writes raw; llama.cpp's leaves it
 * out), or an escape. A character outside the BMP written as \u escapes is a surrogate pair: one
 * element, so minLength / maxLength count it once, as ajv (code points) does; a lone surrogate is
 * not Unicode text and is not taken.
 */
const ESCAPE = `[\\\\] (["\\\\/bfnrt] | "u" ([0-9a-cA-CeEfF] [0-9a-fA-F]{3} | [dD] [0-7] [0-9a-fA-F]{2} | [dD] [89abAB] [0-9a-fA-F]{2} "\\\\u" [dD] [c-fC-F] [0-9a-fA-F]{2}))`;
const CHAR = `char ::= [^"\\\\\\x00-\\x1F] | ${ESCAPE}`;
const IPV4_PART = `("25" [0-5] | "2" [0-4] [0-9] | "1" [0-9] [0-9] | [1-9] [0-9] | [0-9])`;
const HOST_LABEL = `[a-zA-Z0-9] ([a-zA-Z0-9-]{0,28} [a-zA-Z0-9])?`;
const ATEXT = "[a-zA-Z0-9!#$%&'*+/=?^_`{|}~-]";
// letters and digits, hyphens only between them (written so that each character has one reading)
const DOMAIN_LABEL = `[a-zA-Z0-9]+ ("-"+ [a-zA-Z0-9]+)*`;
const DURATION_DATE = `([0-9]+ "Y" ([0-9]+ "M")? ([0-9]+ "D")? | [0-9]+ "M" ([0-9]+ "D")? | [0-9]+ "D")`;
const DURATION_TIME = `([0-9]+ "H" ([0-9]+ "M")? ([0-9]+ "S")? | [0-9]+ "M" ([0-9]+ "S")? | [0-9]+ "S")`;
// RFC 3986's IPv6address: eight 16-bit pieces (the last two may be an IPv4 address), a run of
// them written "::" once; each alternative is one place of that run, the pieces before it at most
// as many as the rest leaves
const H16 = "[0-9a-fA-F]{1,4}";
const LS32 = `(${H16} ":" ${H16} | ${IPV4_PART} "." ${IPV4_PART} "." ${IPV4_PART} "." ${IPV4_PART})`;
const IPV6 = `(${[
  `(${H16} ":"){6} ${LS32}`,
  `"::" (${H16} ":"){5} ${LS32}`,
  ...[4, 3, 2, 1, 0].map((after, k) => `((${H16} ":"){0,${k}} ${H16})? "::" ${after > 0 ? `(${H16} ":"){${after}} ` : ""}${LS32}`),
  `((${H16} ":"){0,5} ${H16})? "::" ${H16}`,
  `((${H16} ":"){0,6} ${H16})? "::"`,
].join(" | ")})`;
const FORMATS: Record<string, string> = {
  // RFC 3339's full-date: each month's days, February 29 only in leap years (every 4th, of centuries every 4th)
  date: `([0-9]{4} "-" (("0" [13578] | "1" [02]) "-" ("0" [1-9] | [1-2] [0-9] | "3" [0-1]) | ("0" [469] | "11") "-" ("0" [1-9] | [1-2] [0-9] | "30") | "02-" ("0" [1-9] | "1" [0-9] | "2" [0-8])) | ([0-9]{2} ("0" [48] | [2468] [048] | [13579] [26]) | ([02468] [048] | [13579] [26]) "00") "-02-29")`,
  time: `([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9] ":" [0-5] [0-9] ("." [0-9]{3})? ("Z" | [+-] ([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9])`,
  uuid: `[0-9a-fA-F]{8} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{12}`,
  // the formats OpenAI's strict mode names beside those, as ajv-formats' full mode checks them
  // Dotted decimal, each part 0 to 255 without leading zeros
  ipv4: `${IPV4_PART} "." ${IPV4_PART} "." ${IPV4_PART} "." ${IPV4_PART}`,
  ipv6: IPV6,
  // RFC 1123 labels of letters, digits and inner hyphens; the name is at most 253 characters,
  // which a grammar cannot count across labels: at most 8 labels of at most 30 characters here
  hostname: `${HOST_LABEL} ("." ${HOST_LABEL}){0,7} "."?`,
  // dot-atoms before the @ (RFC 5322's atext), then a domain of two labels or more
  email: `${ATEXT}+ ("." ${ATEXT}+)* "@" (${DOMAIN_LABEL} ".")+ ${DOMAIN_LABEL}`,
  // ISO 8601 duration: P, then some of Y M D in order and T with some of H M S, or weeks alone
  duration: `"P" (${DURATION_DATE} ("T" ${DURATION_TIME})? | "T" ${DURATION_TIME} | [0-9]+ "W")`,
};
const KNOWN_KEYS = new Set([
  "type", "properties", "required", "additionalProperties", "enum", "const", "items", "minItems", "maxItems", "minLength", "maxLength",
  "format", "anyOf", "oneOf", "allOf", "$ref", "$defs", "definitions", "$schema", "$id", "title", "description", "default", "examples",
  "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "strict", "name", "nullable", "pattern",
  "prefixItems", "additionalItems", "propertyNames", "uniqueItems", "minProperties", "maxProperties", "patternProperties", "contains", "minContains", "maxContains", "unevaluatedProperties", "dependentRequired",
  "not", "unevaluatedItems", "if", "then", "else", "dependentSchemas",
  // annotations: they say nothing about which values are valid
  "$comment", "readOnly", "writeOnly", "deprecated", "example", "contentMediaType", "contentEncoding", "discriminator",
]);

/**
 * The keywords that apply to one type only: a schema without `type` that has some of them is
 * taken as of those types (as llama.cpp's converter takes `pattern` alone for a string), so the
 * keyword shapes the output rather than being passed over for "any value". Every value the
 * grammar admits then validates (the schema would also take values of the other types).
 */
const TYPE_KEYWORDS: readonly [string, readonly string[]][] = [
  ["string", ["pattern", "format", "minLength", "maxLength"]],
  ["number", ["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"]],
  ["array", ["items", "prefixItems", "additionalItems", "minItems", "maxItems", "uniqueItems", "contains", "unevaluatedItems"]],
  ["object", ["properties", "additionalProperties", "required", "propertyNames", "minProperties", "maxProperties", "patternProperties", "unevaluatedProperties", "dependentRequired", "dependentSchemas"]],
];

const isMap = (v: unknown): boolean => typeof v === "object" && v !== null && !Array.isArray(v);
/**
 * The shapes JSON Schema's meta-schema gives the keywords read here as lists, maps, strings or
 * flags (ajv refuses to compile a schema that breaks them): a keyword of another shape was passed
 * over (prefixItems as an object gave any array, required as a string no required property), or
 * an anyOf, enum or type of no list made an empty grammar
 */
const KEYWORD_SHAPES: Record<string, readonly [(v: unknown) => boolean, string]> = {
  type: [(v) => typeof v === "string" || (Array.isArray(v) && v.length > 0), "a type name or a non-empty list of them"],
  enum: [Array.isArray, "a list of values"],
  anyOf: [Array.isArray, "a list of schemas"],
  oneOf: [Array.isArray, "a list of schemas"],
  allOf: [Array.isArray, "a list of schemas"],
  required: [(v) => Array.isArray(v) && v.every((x) => typeof x === "string"), "a list of property names"],
  properties: [isMap, "an object of property names to schemas"],
  patternProperties: [isMap, "an object of regular expressions to schemas"],
  $defs: [isMap, "an object of names to schemas"],
  definitions: [isMap, "an object of names to schemas"],
  $ref: [(v) => typeof v === "string", "a URI reference string"],
  nullable: [(v) => typeof v === "boolean", "a boolean"],
  not: [(v) => typeof v === "boolean" || isMap(v), "a schema"],
  unevaluatedItems: [(v) => typeof v === "boolean" || isMap(v), "a schema"],
};

/**
 * A schema without type as it reads for values of type `type` alone: less the keywords of other
 * types (they say nothing of such a value; taken alone they would make it of their type)
 */
function narrowedTo(sub: unknown, type: string): unknown {
  if (!isMap(sub) || (sub as Record<string, unknown>)["type"] !== undefined) return sub;
  const own = type === "integer" ? ["integer", "number"] : [type];
  const others = new Set(TYPE_KEYWORDS.filter(([t]) => !own.includes(t)).flatMap(([, keys]) => keys));
  return Object.fromEntries(Object.entries(sub as Record<string, unknown>).filter(([k]) => !others.has(k)));
}

/** the keywords whose schema is alternatives (conditional.ts) */
const CONDITIONAL_KEYS = ["if", "then", "else", "dependentSchemas"];

/** keywords that say which values are valid apart from the type ones (a schema with none of them and no type is any value) */
const VALUE_KEYWORDS = ["type", "enum", "const", "anyOf", "oneOf", "allOf", "$ref", "if"];

/** the types a schema without `type` is taken as, from its type-specific keywords */
function impliedTypes(s: Record<string, unknown>): string[] {
  return TYPE_KEYWORDS.filter(([, keys]) => keys.some((k) => s[k] !== undefined)).map(([t]) => t);
}

/** whether a schema constrains values at all (else it is an annotation: any value) */
function constrains(s: Record<string, unknown>): boolean {
  return VALUE_KEYWORDS.some((k) => s[k] !== undefined) || impliedTypes(s).length > 0 || s["nullable"] === true || (s["not"] !== undefined && s["not"] !== false);
}

/**
 * A schema no value satisfies: false, or `not` of a schema every value satisfies (zod writes
 * z.never() and z.undefined() as {"not": {}}: a property of it may not be present, other keys of
 * it none, an element of it none)
 */
function never(schema: unknown): boolean {
  if (schema === false) return true;
  if (!isMap(schema)) return false;
  const n = (schema as Record<string, unknown>)["not"];
  return n === true || (isMap(n) && !constrains(n as Record<string, unknown>));
}

/** whether a JSON value is of a JSON Schema type (an integer is a number too) */
function ofType(v: unknown, t: string): boolean {
  const own = v === null ? "null" : Array.isArray(v) ? "array" : typeof v;
  return t === "integer" ? typeof v === "number" && Number.isInteger(v) : own === t;
}

/**
 * A way an object fails a test of `required` / `properties` (objectTest): a name it requires is
 * absent, or a property is present with a value its schema refuses (`refused` that schema, at
 * `at`; undefined: the schema is false, any value fails it)
 */
type ObjectWay = { absent: string } | { present: string; refused: unknown; at: string };

/** the types a schema takes where nothing says which */
const ALL_TYPES = ["object", "array", "string", "number", "boolean", "null"];

/** a JSON value's text with object keys sorted: equal for values equal as JSON (keys in any order) */
function canonicalJson(v: unknown): string {
  return JSON.stringify(v, (_, x) => (x !== null && typeof x === "object" && !Array.isArray(x) ? Object.fromEntries(Object.entries(x).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) : x));
}

/** where the parts of an allOf the converter makes (of keywords written apart: beside a $ref, an anyOf, in two parts) lie in the schema */
const partPaths = new WeakMap<object, readonly string[]>();

/** the schemas a `not` rules out: each alternative of a not of anyOf alone (not of A or B is not of A and not of B), else itself */
function notsOf(not: unknown): unknown[] {
  if (!isMap(not)) return [not];
  const n = not as Record<string, unknown>;
  const keys = Object.keys(n).filter((k) => constrains({ [k]: n[k] }));
  return keys.length === 1 && keys[0] === "anyOf" && Array.isArray(n["anyOf"]) ? (n["anyOf"] as unknown[]).flatMap(notsOf) : [not];
}

/** the patterns of parts of allOf merged into one string schema, each of which a string matches (a list as `pattern`, made here only) */
const patternLists = new WeakSet<object>();

/**
 * The keywords written beside an allOf, anyOf or $ref, as the converter makes them a part of an
 * allOf: what unevaluatedProperties there sees evaluated is every part's keys, not only its own
 */
const besideParts = new WeakSet<object>();

/** `beside` (keywords of a schema apart from its allOf / anyOf / $ref), marked as such */
function besidePart(beside: Record<string, unknown>): Record<string, unknown> {
  besideParts.add(beside);
  return beside;
}

/**
 * `build()`, a rule builder that recurses once per key or element (its states are bounded by the
 * rule cap, but a raised cap lets them outgrow the stack): a stack overflow as the schema's refusal
 */
function withinStack<T>(at: string, build: () => T): T {
  try {
    return build();
  } catch (e) {
    if (e instanceof RangeError && /call stack/i.test(e.message)) throw new GrammarError(`${at}: too many grammar states to build (the keys or elements counted run deeper than the stack)`);
    throw e;
  }
}

/** an allOf of `parts`, each with the path it was written at (what a fault in it names) */
function allOfAt(parts: readonly (readonly [unknown, string])[]): Record<string, unknown> {
  const s = { allOf: parts.map(([p]) => p) };
  partPaths.set(s, parts.map(([, at]) => at));
  return s;
}

/** the JSON Schema types two `type` values both admit, integer where one says number and the other integer */
function commonTypes(a: unknown, b: unknown): string[] {
  const as = [a].flat().map(String), bs = [b].flat().map(String);
  const both = as.flatMap((t) => (bs.includes(t) ? [t] : (t === "integer" && bs.includes("number")) || (t === "number" && bs.includes("integer")) ? ["integer"] : []));
  return [...new Set(both)];
}

/**
 * A fault met in a schema merged from allOf's parts (at `path`), named at the spot in the schema
 * the keyword it lies in was written (`from`: keyword, or properties/name, -> that spot)
 */
function relocated(e: unknown, path: string, from: ReadonlyMap<string, string>): unknown {
  if (!(e instanceof GrammarError)) return e;
  for (const [sub, to] of from) {
    const at = `${path}/${sub}`;
    if (e.message.startsWith(at) && /^[:/]/.test(e.message.slice(at.length))) {
      const moved = new GrammarError(to + e.message.slice(at.length));
      return emptyFaults.has(e) ? noValue(moved) : moved;
    }
  }
  return e;
}

/**
 * Faults that say the schema being written admits no value, wherever they are named (an anyOf whose
 * every alternative met the keywords beside it in no value): an alternative around it that meets
 * one is left out. (Leaving an alternative out only ever takes values away from the grammar.)
 */
const emptyFaults = new WeakSet<object>();

const noValue = (e: GrammarError): GrammarError => {
  emptyFaults.add(e);
  return e;
};

/** a GBNF literal for a string (the grammar's own escapes) */
export function gbnfLiteral(s: string): string {
  return `"${s.replace(/[\\"\n\r\t]/g, (c) => ({ "\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t" })[c]!)}"`;
}

/** the JSON types a schema's values can have, where its `type` or its values say (integer and number one), else undefined */
function jsonTypesOf(schema: unknown): string[] | undefined {
  if (typeof schema !== "object" || schema === null || Array.isArray(schema)) return undefined;
  const s = schema as Record<string, unknown>;
  const of = (v: unknown) => (v === null ? "null" : Array.isArray(v) ? "array" : typeof v);
  let types: string[] | undefined;
  if (typeof s["type"] === "string" || Array.isArray(s["type"])) types = [s["type"]].flat().map((t) => (t === "integer" ? "number" : String(t)));
  else if (s["const"] !== undefined) types = [of(s["const"])];
  else if (Array.isArray(s["enum"])) types = (s["enum"] as unknown[]).map(of);
  if (types !== undefined && s["nullable"] === true) types.push("null");
  return types === undefined ? undefined : [...new Set(types)];
}

/** a JSON value as GBNF: its tokens as JSON.stringify writes them, with whitespace between them where any value takes it */
/**
 * Where a const or enum value holds something JSON cannot write, and what (a library caller's
 * schema can hold any JavaScript value: a function or symbol broke the literal writer, NaN and
 * Infinity became null and a Date or Map an empty object, each a silently different constraint)
 */
function notJson(v: unknown, path: string, seen: Set<object> = new Set()): string | undefined {
  if (v === null || typeof v === "string" || typeof v === "boolean") return undefined;
  if (typeof v === "number") return Number.isFinite(v) ? undefined : `${path}: expected a JSON value, got ${v}`;
  if (typeof v !== "object") return `${path}: expected a JSON value, got ${v === undefined ? "undefined" : `a ${typeof v}`}`;
  const proto = Object.getPrototypeOf(v);
  if (!Array.isArray(v) && proto !== Object.prototype && proto !== null) return `${path}: expected a JSON value, got a ${proto?.constructor?.name ?? "non-plain"} object`;
  if (seen.has(v)) return `${path}: expected a JSON value, got an object that contains itself`;
  seen.add(v);
  for (const [k, x] of Object.entries(v)) {
    const fault = notJson(x, `${path}/${k}`, seen);
    if (fault) return fault;
  }
  seen.delete(v);
  return undefined;
}

function jsonLiteral(v: unknown): string {
  if (Array.isArray(v)) return v.length === 0 ? `"[" space "]"` : `"[" space ${v.map((x) => `${jsonLiteral(x)} space`).join(` "," space `)} "]"`;
  if (v !== null && typeof v === "object") {
    const entries = Object.entries(v);
    return entries.length === 0 ? `"{" space "}"` : `"{" space ${entries.map(([k, x]) => `${gbnfLiteral(JSON.stringify(k))} space ":" space ${jsonLiteral(x)} space`).join(` "," space `)} "}"`;
  }
  return gbnfLiteral(JSON.stringify(v));
}

export function jsonSchemaToGbnf(schema: JsonSchema, limits: JsonSchemaLimits = {}): string {
  return new Converter(schema, limits.maxRules ?? 5000, limits.maxDepth ?? 64).convert();
}

/**
 * An object schema's propertyNames where it says more than that keys are strings (which they are
 * anyway): false (no key) or the schema; undefined where it says nothing
 */
function propertyNamesOf(s: Record<string, unknown>, path: string): false | Record<string, unknown> | undefined {
  const names = s["propertyNames"];
  if (names === undefined || names === true) return undefined;
  if (names === false) return false;
  if (!isMap(names)) throw new GrammarError(`${path}/propertyNames: expected a schema, got ${JSON.stringify(names)}`);
  const n = names as Record<string, unknown>;
  return Object.keys(n).every((k) => (k === "type" ? n[k] === "string" : !constrains({ [k]: n[k] }))) ? undefined : n;
}

/** a part of allOf's propertyNames: only where it says nothing more than strings (the merged object has none of its own) */
function checkPropertyNames(s: Record<string, unknown>, path: string): void {
  if (propertyNamesOf(s, path) !== undefined) throw new GrammarError(`${path}/propertyNames: only {"type": "string"} is supported in a part of allOf beside other object parts`);
}

/** keywords whose value is a schema, a list of schemas, or a map of names to schemas */
const SUBSCHEMA_ONE = ["items", "prefixItems", "additionalProperties", "additionalItems", "propertyNames", "not", "contains", "if", "then", "else"];
const SUBSCHEMA_LIST = ["anyOf", "oneOf", "allOf", "prefixItems", "items"];
const SUBSCHEMA_MAP = ["properties", "$defs", "definitions", "patternProperties", "dependentSchemas"];

/**
 * Every schema object inside `schema`, itself first, with its schema path and how many schema
 * levels below the root it lies (depth first, in the order of the keywords that hold them): for checks of the schema's shape such as OpenAI's strict
 * mode makes
 */
function* subschemas(schema: unknown, path = "#", depth = 0): Generator<[string, Record<string, unknown>, number]> {
  // deeper than the converter goes: it refuses the schema itself
  if (depth > 64 || typeof schema !== "object" || schema === null || Array.isArray(schema)) return;
  const s = schema as Record<string, unknown>;
  yield [path, s, depth];
  for (const k of SUBSCHEMA_ONE) yield* subschemas(s[k], `${path}/${k}`, depth + 1);
  for (const k of SUBSCHEMA_LIST) {
    const list = s[k];
    if (Array.isArray(list)) for (let i = 0; i < list.length; i++) yield* subschemas(list[i], `${path}/${k}/${i}`, depth + 1);
  }
  for (const k of SUBSCHEMA_MAP) {
    const map = s[k];
    if (typeof map !== "object" || map === null || Array.isArray(map)) continue;
    for (const [name, sub] of Object.entries(map)) yield* subschemas(sub, `${path}/${k}/${name}`, depth + 1);
  }
}

/**
 * OpenAI's structured outputs guide, "Supported schemas"
 * (https://developers.openai.com/api/docs/guides/structured-outputs#supported-schemas):
 * "Some type-specific keywords are not yet supported — Composition: allOf, not, dependentRequired,
 * dependentSchemas, if, then, else"; then the type keywords its "Supported properties" does not
 * list for any model (it lists, besides the structure, only pattern and format for strings, the
 * numbers' bounds and multipleOf, and minItems / maxItems) among those the same page names as
 * unsupported for fine-tuned models: the string keywords minLength, maxLength, the object keywords
 * patternProperties, unevaluatedProperties, propertyNames, minProperties, maxProperties and the
 * array keywords unevaluatedItems, contains, minContains, maxContains, uniqueItems (OpenAI's Java
 * SDK's JsonSchemaValidator allows a string schema only type, title, description, enum, const,
 * pattern and format). Without strict they stay taken as before (best effort).
 */
const STRICT_UNSUPPORTED = [
  "allOf", "not", "dependentRequired", "dependentSchemas", "if", "then", "else",
  "minLength", "maxLength",
  "patternProperties", "unevaluatedProperties", "propertyNames", "minProperties", "maxProperties",
  "unevaluatedItems", "contains", "minContains", "maxContains", "uniqueItems",
];

/**
 * The same page's size limits: "A schema may have up to 5000 object properties total, with up to 10
 * levels of nesting"; "total string length of all property names, definition names, enum values,
 * and const values cannot exceed 120,000 characters"; "up to 1000 enum values across all enum
 * properties"; "For a single enum property with string values, the total string length of all enum
 * values cannot exceed 15,000 characters when there are more than 250 enum values". The page does
 * not say what a level of nesting is: as OpenAI's Java SDK counts (JsonSchemaValidator), each
 * schema inside another (a property, items, an anyOf branch, a definition) is one level below it,
 * the root at level 0. String length is counted in UTF-16 units, as that SDK counts it.
 */
const STRICT_LIMITS = { properties: 5000, depth: 10, stringLength: 120_000, enumValues: 1000, bigEnum: 250, bigEnumLength: 15_000 };

/**
 * Where `schema` breaks OpenAI's strict mode (its structured outputs' "Supported schemas"), as
 * "path: what is wrong" in the words of OpenAI's refusals, or undefined. The root is an object
 * schema (type "object", not an anyOf); every object schema is closed (additionalProperties
 * false) and lists every property in required, so that the grammar writes each of them and no
 * other key; no oneOf anywhere (read here as anyOf, which admits a value two alternatives both
 * take), nor a keyword the page lists as unsupported; and the schema within its size limits. The
 * first problem in schema order ($defs too) is told; the totals last, at the root.
 */
export function strictSchemaProblem(schema: unknown): string | undefined {
  const root = schema as Record<string, unknown>;
  if (root["type"] !== "object") return `#/type: the root must be an object schema (type "object"), got ${JSON.stringify(root["type"] ?? null)}`;
  if (root["anyOf"] !== undefined) return "#/anyOf: the root must be an object schema, not anyOf";
  const L = STRICT_LIMITS;
  let properties = 0, stringLength = 0, enumValues = 0;
  for (const [path, s, depth] of subschemas(schema)) {
    if (depth > L.depth) return `${path}: ${depth} levels of nesting exceeds limit of ${L.depth}`;
    if (s["oneOf"] !== undefined) return `${path}/oneOf: oneOf is not supported with strict: true (it would be read as anyOf, admitting a value two alternatives both take); use anyOf`;
    const unsupported = STRICT_UNSUPPORTED.find((k) => s[k] !== undefined);
    if (unsupported !== undefined) return `${path}/${unsupported}: '${unsupported}' is not supported with strict: true`;
    const props = s["properties"];
    const names = typeof props === "object" && props !== null && !Array.isArray(props) ? Object.keys(props) : [];
    properties += names.length;
    for (const n of names) stringLength += n.length;
    for (const k of ["$defs", "definitions"]) {
      const defs = s[k];
      if (typeof defs === "object" && defs !== null && !Array.isArray(defs)) for (const n of Object.keys(defs)) stringLength += n.length;
    }
    if (typeof s["const"] === "string") stringLength += s["const"].length;
    const values = Array.isArray(s["enum"]) ? (s["enum"] as unknown[]) : [];
    enumValues += values.length;
    const enumLength = values.reduce<number>((n, v) => n + (typeof v === "string" ? v.length : 0), 0);
    stringLength += enumLength;
    if (values.length > L.bigEnum && values.some((v) => typeof v === "string") && enumLength > L.bigEnumLength) {
      return `${path}/enum: total string length of enum values (${enumLength}) exceeds limit of ${L.bigEnumLength} for an enum of more than ${L.bigEnum} values (it has ${values.length})`;
    }
    const type = s["type"];
    if (!(type === "object" || (Array.isArray(type) && type.includes("object")) || (type === undefined && s["properties"] !== undefined))) continue;
    if (s["additionalProperties"] !== false) return `${path}: 'additionalProperties' is required to be supplied and to be false`;
    const required = Array.isArray(s["required"]) ? (s["required"] as unknown[]) : [];
    const missing = names.filter((k) => !required.includes(k));
    if (missing.length > 0) return `${path}: 'required' is required to be supplied and to be an array including every key in properties; missing ${missing.map((k) => JSON.stringify(k)).join(", ")}`;
  }
  if (properties > L.properties) return `#: total number of object properties (${properties}) exceeds limit of ${L.properties}`;
  if (enumValues > L.enumValues) return `#: total number of enum values (${enumValues}) exceeds limit of ${L.enumValues}`;
  if (stringLength > L.stringLength) return `#: total string length of property names, definition names, enum values and const values (${stringLength}) exceeds limit of ${L.stringLength}`;
  return undefined;
}

/** "any JSON value" and "any JSON object" (response_format json_object) grammars */
export function anyJsonGbnf(topLevel: "value" | "object" = "value"): string {
  return jsonSchemaToGbnf(topLevel === "object" ? { type: "object" } : {});
}

/**
 * Four hex digits (either case) of a BMP code point that is no surrogate and none of `except`: the
 * range cut digit by digit, as int-range.ts cuts decimal ones
 */
function hexExcept(except: readonly number[]): string {
  const surrogates: [number, number] = [0xd800, 0xdfff];
  const cut = [surrogates, ...except.filter((c) => c <= 0xffff).map((c): [number, number] => [c, c])].sort((x, y) => x[0] - y[0]);
  const ranges: [number, number][] = [];
  let from = 0;
  for (const [lo, hi] of cut) {
    if (from < lo) ranges.push([from, lo - 1]);
    from = Math.max(from, hi + 1);
  }
  if (from <= 0xffff) ranges.push([from, 0xffff]);
  const digits = (a: number, b: number): string => {
    const hex = Array.from({ length: b - a + 1 }, (_, k) => (a + k).toString(16));
    return `[${[...new Set([...hex, ...hex.map((h) => h.toUpperCase())])].join("")}]`;
  };
  const part = (lo: number, hi: number, width: number): string => {
    if (width === 0) return "";
    const unit = 16 ** (width - 1);
    const a = Math.floor(lo / unit), b = Math.floor(hi / unit);
    const alts: string[] = [];
    for (let d = a; d <= b; d++) {
      const l = d === a ? lo % unit : 0, h = d === b ? hi % unit : unit - 1;
      if (l === 0 && h === unit - 1) {
        // a run of whole digits: one class
        let e = d;
        while (e + 1 <= b && (e + 1 < b || hi % unit === unit - 1)) e++;
        alts.push(`${digits(d, e)}${width > 1 ? ` [0-9a-fA-F]{${width - 1}}` : ""}`);
        d = e;
      } else alts.push(`${digits(d, d)} (${part(l, h, width - 1)})`);
    }
    return alts.join(" | ");
  };
  return ranges.map(([lo, hi]) => part(lo, hi, 4)).join(" | ");
}

/** bounds that allOf can meet in one schema, the tighter of two kept */
const LOWER_BOUNDS = new Set(["minimum", "exclusiveMinimum", "minLength", "minItems", "minProperties"]);
const UPPER_BOUNDS = new Set(["maximum", "exclusiveMaximum", "maxLength", "maxItems", "maxProperties"]);

const RANGE_KEYS = ["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"] as const;

/**
 * a numeric bound of a schema, checked: finite and at most `limit` in size (integers: the safe
 * integers, which zod writes as the bounds of any integer; numbers: below 1e15)
 */
function rangeBound(s: Record<string, unknown>, k: string, path: string, limit: number): number | undefined {
  const v = s[k];
  if (v === undefined) return undefined;
  if (typeof v !== "number" || !Number.isFinite(v) || Math.abs(v) > limit) throw new GrammarError(`${path}/${k}: expected a number of at most ${limit} in size, got ${JSON.stringify(v)}`);
  return v;
}

/**
 * An integer schema's bounds as the integers they leave (undefined: open), refused where they leave
 * none, named at the upper bound's keyword (which a bound merged from a part of allOf names where it
 * was written)
 */
function integerBounds(s: Record<string, unknown>, path: string): { lo: number | undefined; hi: number | undefined } {
  const [min, max, xmin, xmax] = RANGE_KEYS.map((k) => rangeBound(s, k, path, Number.MAX_SAFE_INTEGER));
  // each side's tightest bound, with the keyword that set it
  const bounds = (pairs: [string, number | undefined][]): [string, number][] => pairs.filter((b): b is [string, number] => b[1] !== undefined);
  const lows = bounds([["minimum", min === undefined ? undefined : Math.ceil(min)], ["exclusiveMinimum", xmin === undefined ? undefined : Math.floor(xmin) + 1]]).sort((a, b) => b[1] - a[1]);
  const highs = bounds([["maximum", max === undefined ? undefined : Math.floor(max)], ["exclusiveMaximum", xmax === undefined ? undefined : Math.ceil(xmax) - 1]]).sort((a, b) => a[1] - b[1]);
  const lo = lows[0]?.[1], hi = highs[0]?.[1];
  if (lo !== undefined && hi !== undefined && lo > hi) throw new GrammarError(`${path}/${highs[0]![0]}: no integer lies between ${lows[0]![0]} ${s[lows[0]![0]]} and ${highs[0]![0]} ${s[highs[0]![0]]}`);
  return { lo, hi };
}

/** integerBounds(), where no integer lies between the bounds an empty range (lo above hi) rather than a fault */
function integerBoundsOrEmpty(s: Record<string, unknown>, path: string): { lo: number | undefined; hi: number | undefined } {
  try {
    return integerBounds(s, path);
  } catch (e) {
    if (e instanceof GrammarError && / no integer lies between /.test(e.message)) return { lo: 1, hi: 0 };
    throw e;
  }
}

/**
 * The most alternatives of if / then / else and dependentSchemas one schema may lie in (those of
 * the schemas around it multiplied: each writes the schemas inside it again; dependentSchemas of
 * 4 keys nested ten deep took 16 seconds to reach the rule cap)
 */
const MAX_ALTERNATIVES = 256;

/** an object schema's minProperties (0 where unset) and maxProperties, each a non-negative integer, max not below min */
function propertyCounts(s: Record<string, unknown>, path: string): { min: number; max: number | undefined } {
  const bound = (k: string): number | undefined => {
    const v = s[k];
    if (v === undefined) return undefined;
    if (!Number.isInteger(v) || (v as number) < 0) throw new GrammarError(`${path}/${k}: expected a non-negative integer, got ${JSON.stringify(v)}`);
    return v as number;
  };
  const min = bound("minProperties") ?? 0, max = bound("maxProperties");
  if (max !== undefined && max < min) throw new GrammarError(`${path}/maxProperties: ${max} is below minProperties ${min}`);
  return { min, max };
}

/**
 * the most keys written so far that a rule of an object's key list tells apart: past maxProperties
 * (or minProperties where there is no maximum, or the keys there are) every count is the same; at
 * least 1, as a state past it must still know a key was written, for the commas
 */
const countCap = (min: number, max: number | undefined, keys: number): number => Math.max(1, Math.min(max ?? min, keys + 1));

/**
 * Other keys after an object's named ones, `c` keys written before them: at least what min still
 * needs, at most what max leaves (alternatives; none where no count fits). At most one is needed:
 * two keys of any string could be one key written twice, which a validator counts once.
 */
function otherKeys(c: number, min: number, max: number | undefined, extra: string | undefined): string[] {
  const lo = Math.max(0, min - c), hi = max === undefined ? undefined : max - c;
  const alts: string[] = [];
  if (lo === 0) alts.push('""');
  if (extra !== undefined && lo <= 1 && (hi === undefined || hi >= 1)) {
    const more = hi === undefined ? `("," space ${extra})*` : hi > 1 ? `("," space ${extra}){0,${hi - 1}}` : "";
    alts.push(`${c > 0 ? `"," space ` : ""}${extra}${more ? ` ${more}` : ""}`);
  }
  return alts;
}

/**
 * the most keys a pattern of finitely many (propertyNames', patternProperties') is written out to,
 * each an optional property (with minProperties / maxProperties, a rule per key and count)
 */
const MAX_NAMED_KEYS = 64;

/** the most different schemas of patternProperties' patterns (each set of them is written apart: 2^n - 1) */
const MAX_PATTERN_SCHEMAS = 4;

/** the largest multipleOf written as a grammar (a rule per remainder and digit position) */
const MAX_MULTIPLE = 250;

/** the largest bound of a non-integer number (decimal-range.ts works on exact decimal digits below it) */
const NUMBER_BOUND_LIMIT = 1e15 - 1;

class Converter {
  private readonly rules = new Map<string, string>();
  private readonly refs = new Map<string, string>();
  /** how many alternatives of if / then / else and dependentSchemas the schema being written lies in (conditional()) */
  private alternatives = 1;
  /** the $refs met while their own schema was being converted: [the $ref's schema path, the pointer, its rule] */
  private readonly recursions: [string, string, string][] = [];

  constructor(private readonly schema: JsonSchema, private readonly maxRules: number, private readonly maxDepth: number) {}

  convert(): string {
    const root = this.visit(this.schema, "root", "#", 0);
    if (root !== "root") this.add("root", root);
    const { text, endless } = this.text();
    if (endless !== undefined) throw new GrammarError(`${endless[0]}: $ref ${JSON.stringify(endless[1])} recurs without end (each value of ${JSON.stringify(endless[1])} needs another one here), so no finite JSON value satisfies it (a validator compiles such a schema, but no instance is valid)`);
    return text;
  }

  /**
   * The rules as GBNF. A $ref whose schema holds itself in every value ({properties: {a: {$ref:
   * "#"}}, required: ["a"]}) makes rules no string ends: where the value may do without them (an
   * optional property, an array that may be empty, another alternative of an anyOf) they are left
   * out, as no finite value (none a validator takes) goes through them, so a model is never led
   * into a value it cannot end; where the root needs them, no value is valid: `endless` names the
   * $ref that recurs (its schema path, and the pointer)
   */
  private text(): { text: string; endless?: readonly [string, string] } {
    const source = [...this.rules].map(([name, body]) => `${name} ::= ${body}`).join("\n") + "\n";
    if (this.recursions.length === 0) return { text: source };
    const { text, dead } = withoutUnmatchable(source);
    if (!dead.includes("root")) return { text };
    const cycle = this.recursions.find(([, , rule]) => dead.includes(rule)) ?? this.recursions[0]!;
    return { text, endless: [cycle[0], cycle[1]] };
  }

  private add(name: string, body: string): string {
    if (this.rules.has(name) && this.rules.get(name) !== body) {
      let k = 1;
      while (this.rules.has(`${name}-${k}`)) k++;
      name = `${name}-${k}`;
    }
    if (this.rules.size >= this.maxRules) throw new GrammarError(`the schema needs more than ${this.maxRules} grammar rules`);
    this.rules.set(name, body);
    return name;
  }

  private primitive(type: string): string {
    if (type === "string") this.rules.set("char", CHAR.slice("char ::= ".length));
    this.rules.set("space", SPACE.slice("space ::= ".length));
    return this.add(type, PRIMITIVES[type]!);
  }

  /** a rule name (or a GBNF expression) for the schema at `path` */
  private visit(schema: unknown, name: string, path: string, depth: number): string {
    if (depth > this.maxDepth) throw new GrammarError(`${path}: schemas nest more than ${this.maxDepth} deep`);
    if (schema === false) throw new GrammarError(`${path}: the schema false admits no value`);
    if (schema === true) return this.anyValue();
    if (typeof schema !== "object" || schema === null || Array.isArray(schema)) throw new GrammarError(`${path}: expected a schema object, got ${JSON.stringify(schema)}`);
    const s = schema as Record<string, unknown>;
    this.checkKeys(s, path);
    if (CONDITIONAL_KEYS.some((k) => s[k] !== undefined)) return this.conditional(s, name, path, depth);
    if (!constrains(s)) return this.anyValue();
    this.space();
    // OpenAPI's nullable (which ajv honours too): the schema, or null; beside an enum or const it
    // adds nothing (OpenAPI 3.0.3: null must then be among the values, as ajv reads it)
    if (s["nullable"] === true && s["enum"] === undefined && s["const"] === undefined && s["not"] !== undefined) {
      // (null joins the type, so that a not beside it applies to null too)
      const { nullable: _, ...rest } = s;
      const types = [s["type"]].flat();
      return this.visit({ ...rest, type: types.includes("null") ? s["type"] : [...types, "null"] }, name, path, depth + 1);
    }
    if (s["nullable"] === true && s["enum"] === undefined && s["const"] === undefined) {
      const { nullable: _, ...rest } = s;
      return this.add(name, `${this.visit(rest, `${name}-value`, path, depth + 1)} | ${this.primitive("null")}`);
    }
    // keywords beside $ref apply too (draft 2019-09 on): the two as an allOf
    if (typeof s["$ref"] === "string") {
      const { $ref, ...beside } = s;
      if (constrains(beside)) return this.visit(allOfAt([[{ $ref }, path], [besidePart(beside), path]]), name, path, depth + 1);
      return this.ref($ref as string, path, depth);
    }
    if (s["not"] !== undefined) {
      const { not, ...rest } = s;
      if (not === false) return this.visit(rest, name, path, depth + 1);
      if (never(s)) throw new GrammarError(`${path}/not: ${JSON.stringify(not)} admits every value, so the schema admits none`);
      // beside an enum (or const): the values it does not rule out
      if (rest["const"] !== undefined || Array.isArray(rest["enum"])) {
        const key = rest["const"] !== undefined ? "const" : "enum";
        const { const: listed, enum: _e, ...others } = rest;
        const listedValues = key === "const" ? [listed] : (rest["enum"] as unknown[]);
        let keep: unknown[];
        // (not of a pattern or length: the values its grammar takes)
        if (this.stringTest(not, `${path}/not`) !== undefined || notsOf(not).every((n) => this.objectTest(n, `${path}/not`) !== undefined)) keep = this.admitted({ not }, listedValues, path, depth);
        else {
          const { types, values } = this.ruledOut(not, `${path}/not`);
          keep = listedValues.filter((v) => !types.some((t) => ofType(v, t)) && !values.some((w) => canonicalJson(w) === canonicalJson(v)));
        }
        if (keep.length === 0) throw new GrammarError(`${path}/not: rules out every value of the ${key} beside it`);
        return this.visit({ ...others, enum: keep }, name, path, depth + 1);
      }
      // (beside anyOf / oneOf / allOf: taken into each alternative or part below)
    }
    if (s["const"] !== undefined || Array.isArray(s["enum"])) {
      const key = s["const"] !== undefined ? "const" : "enum";
      const values = key === "const" ? [s["const"]] : (s["enum"] as unknown[]);
      if (values.length === 0) throw new GrammarError(`${path}/enum: an empty enum admits no value`);
      for (const [i, v] of values.entries()) {
        const fault = notJson(v, key === "const" ? `${path}/const` : `${path}/enum/${i}`);
        if (fault) throw new GrammarError(fault);
      }
      // the keywords beside (type, maxLength, ...) keep the values they admit, as a validator reads them together
      const { const: _c, enum: _e, ...beside } = s;
      const keep = constrains(beside) ? this.admitted(beside, values, path, depth) : values;
      if (keep.length === 0) throw new GrammarError(`${path}/${key}: no value of it satisfies the keywords beside it`);
      return this.add(name, `(${keep.map(jsonLiteral).join(" | ")}) space`);
    }
    for (const key of ["anyOf", "oneOf"] as const) {
      const list = s[key];
      if (Array.isArray(list)) {
        if (list.length === 0) throw new GrammarError(`${path}/${key}: an empty list admits no value`);
        // an alternative false admits nothing: left out (each kept one named at its own index)
        const kept = list.flatMap((a, i) => (never(a) ? [] : [[a, i] as const]));
        if (kept.length === 0) throw new GrammarError(`${path}/${key}: every alternative is false, which admits no value`);
        // keywords beside the list apply to every alternative
        const { [key]: _, ...beside } = s;
        if (!constrains(beside)) return this.add(name, kept.map(([a, i]) => this.visit(a, `${name}-${i}`, `${path}/${key}/${i}`, depth + 1)).join(" | "));
        // an alternative the keywords beside leave no value of (another type, a second list of
        // alternatives' that meets none of it) is left out, as a validator finds no value there;
        // beside an allOf (whose parts each alternative writes again) they count as conditional()'s do
        const outer = this.alternatives;
        if (beside["allOf"] !== undefined) this.alternatives *= kept.length;
        if (this.alternatives > MAX_ALTERNATIVES) throw new GrammarError(`${path}/${key}: its alternatives, each written with the allOf beside it, nested in those of the schemas around it make more than ${MAX_ALTERNATIVES} alternatives, which is not supported`);
        const alts: string[] = [];
        let empty: unknown;
        try {
          for (const [a, i] of kept) {
            const parts: Part[] = [[besidePart(beside), path], [a, `${path}/${key}/${i}`]];
            const alt = this.unlessEmpty(() => this.visit(allOfAt(parts), `${name}-${i}`, `${path}/${key}/${i}`, depth + 1), (e) => emptyFaults.has(e as object) || admitsNothing(e, parts, `${path}/${key}/${i}`));
            if (alt.made !== undefined) alts.push(alt.made);
            else empty ??= alt.fault;
          }
        } finally {
          this.alternatives = outer;
        }
        // (where the first is such a fault already, it names the place and cause)
        if (alts.length === 0) throw emptyFaults.has(empty as object) ? empty : noValue(new GrammarError(`${path}/${key}: every alternative admits no value with the keywords beside it (the first: ${(empty as Error).message})`));
        return this.add(name, alts.join(" | "));
      }
    }
    if (Array.isArray(s["allOf"])) {
      const alternatives = this.conditionalPart(s, name, path, depth);
      if (alternatives !== undefined) return alternatives;
      const { merged, at, from } = this.mergeAllOf(s, path, depth);
      try {
        return this.visit(merged, name, at, depth + 1);
      } catch (e) {
        throw relocated(e, at, from);
      }
    }
    if (s["not"] !== undefined) return this.negated(s, name, path, depth);
    const implied = impliedTypes(s);
    const type: unknown = s["type"] ?? (implied.length === 1 ? implied[0] : implied);
    if (Array.isArray(type)) return this.add(name, type.map((t, i) => this.visit({ ...s, type: t }, `${name}-${i}`, `${path}/type/${i}`, depth + 1)).join(" | "));
    switch (type) {
      case "object": return this.object(s, name, path, depth);
      case "array": return this.array(s, name, path, depth);
      case "string": return this.string(s, name, path);
      case "integer": {
        // an integer multiple of a fraction is a multiple of its least common multiple with 1 (1.5: 3)
        const k = s["multipleOf"];
        if (typeof k === "number" && k > 0 && Number.isFinite(k) && !Number.isInteger(k)) {
          const whole = commonMultiple([k, 1]);
          if ("fault" in whole) throw new GrammarError(`${path}/multipleOf: ${k} of an integer: ${whole.fault}`);
          return this.integer({ ...s, multipleOf: whole.value }, name, path);
        }
        return this.integer(s, name, path);
      }
      case "number":
        return this.number(s, name, path);
      case "boolean":
      case "null":
        return this.primitive(type as string);
      default:
        throw new GrammarError(`${path}/type: expected one of object, array, string, number, integer, boolean, null, got ${JSON.stringify(type)}`);
    }
  }

  /**
   * A schema with if / then / else or dependentSchemas: its alternatives (conditional.ts), each an
   * allOf of its parts; one that admits no value (then false, an enum if rules all out) is left out,
   * with the rules and $refs it began undone
   */
  private conditional(s: Record<string, unknown>, name: string, path: string, depth: number, others: readonly Part[] = []): string {
    // a value of one type takes the schema exactly where it takes the schema of that type alone (an
    // object test then decides alone between objects, or says nothing of the other types)
    const { nullable, ...own } = s;
    const types = own["type"] === undefined ? [] : [own["type"]].flat();
    if (nullable === true && types.length > 0 && !types.includes("null")) types.push("null");
    if (types.length > 1 && others.length === 0) return this.add(name, types.map((t, i) => this.visit({ ...own, type: t }, `${name}-${i}`, `${path}/type/${i}`, depth + 1)).join(" | "));
    const alts: string[] = [];
    let empty: unknown;
    const branches = conditionalBranches(s, path, besidePart, narrowedTo);
    // (each alternative writes the schemas inside it again: nested ones multiply)
    const outer = this.alternatives;
    this.alternatives *= branches.length;
    if (this.alternatives > MAX_ALTERNATIVES) throw new GrammarError(`${path}: if / then / else and dependentSchemas nested in those of the schemas around it make more than ${MAX_ALTERNATIVES} alternatives (each writes the schemas inside it again), which is not supported`);
    try {
      for (const [i, branch] of branches.entries()) {
        const parts = [...others, ...branch];
        const alt = this.unlessEmpty(() => this.visit(allOfAt(parts), `${name}-${i}`, others[0]?.[1] ?? path, depth + 1), (e) => admitsNothing(e, parts, others[0]?.[1] ?? path));
        if (alt.made !== undefined) alts.push(alt.made);
        else empty ??= alt.fault;
      }
    } finally {
      this.alternatives = outer;
    }
    if (alts.length === 0) throw empty;
    return this.add(name, alts.join(" | "));
  }

  /**
   * An allOf with a part (or the keywords beside it) holding if / then / else or dependentSchemas:
   * that part's alternatives, each with the other parts; undefined where no part holds them
   */
  private conditionalPart(s: Record<string, unknown>, name: string, path: string, depth: number): string | undefined {
    const { allOf, ...beside } = s;
    const parts: Part[] = [[besidePart(beside), path], ...(allOf as unknown[]).map((p, i) => [p, partPaths.get(s)?.[i] ?? `${path}/allOf/${i}`] as const)];
    const j = parts.findIndex(([p]) => isMap(p) && CONDITIONAL_KEYS.some((k) => (p as Record<string, unknown>)[k] !== undefined));
    if (j < 0) return undefined;
    const [part, at] = parts[j] as [Record<string, unknown>, string];
    return this.conditional(part, name, at, depth, [...parts.slice(0, j), ...parts.slice(j + 1)]);
  }

  /** `build()`, or where it fails for a fault `empty` says means no value: the rules and $refs it began undone, the fault */
  private unlessEmpty(build: () => string, empty: (e: unknown) => boolean): { made?: string; fault?: unknown } {
    const rules = new Map(this.rules), refs = new Map(this.refs), recursions = this.recursions.length;
    try {
      return { made: build() };
    } catch (e) {
      if (!empty(e)) throw e;
      this.rules.clear();
      for (const [k, v] of rules) this.rules.set(k, v);
      this.refs.clear();
      for (const [k, v] of refs) this.refs.set(k, v);
      this.recursions.length = recursions;
      return { fault: e };
    }
  }

  /** the values (of an enum or const) whose JSON the schema `beside` admits, compact as the grammar writes them */
  private admitted(beside: Record<string, unknown>, values: readonly unknown[], path: string, depth: number): unknown[] {
    const sub = new Converter(this.schema, this.maxRules, this.maxDepth);
    // a keyword of one type (maxLength) says nothing of the values of other types: not taken as their type here
    const alone = beside["type"] === undefined && impliedTypes(beside).length > 0 && !["anyOf", "oneOf", "allOf", "$ref"].some((k) => beside[k] !== undefined);
    const root = sub.visit(alone ? { ...beside, type: ["string", "number", "boolean", "null", "object", "array"] } : beside, "root", path, depth + 1);
    if (root !== "root") sub.add("root", root);
    // (keywords beside that recur without end admit no value)
    const { text, endless } = sub.text();
    if (endless !== undefined) return [];
    const matcher = new GrammarMatcher(parseGbnf(text));
    return values.filter((v) => {
      let stacks = matcher.initial();
      // a lone surrogate, which JSON.stringify escapes (\ud800), read as the one character it is to a
      // validator (maxLength counts it once, a pattern's class takes it): the grammar beside writes no
      // such escape, and the value itself is written as its literal
      const text = JSON.stringify(v).replace(/(?<!\\)((?:\\\\)*)\\u(d[89a-f][0-9a-f]{2})/g, (_, slashes: string, unit: string) => slashes + String.fromCharCode(parseInt(unit, 16)));
      for (const ch of text) {
        stacks = matcher.advance(stacks, ch.codePointAt(0)!);
        if (stacks.length === 0) return false;
      }
      return GrammarMatcher.complete(stacks);
    });
  }

  private checkKeys(s: Record<string, unknown>, path: string): void {
    for (const k of Object.keys(s)) {
      if (!KNOWN_KEYS.has(k)) throw new GrammarError(`${path}/${k}: this schema keyword is not supported in a grammar (supported: ${[...KNOWN_KEYS].slice(0, 16).join(", ")}, ...)`);
      const shape = KEYWORD_SHAPES[k];
      if (shape !== undefined && s[k] !== undefined && !shape[0](s[k])) throw new GrammarError(`${path}/${k}: expected ${shape[1]}, got ${JSON.stringify(s[k])}`);
    }
    // what JSON Schema's meta-schema and OpenAPI's nullable also ask (ajv refuses to compile a schema that breaks it)
    const required = s["required"] as readonly string[] | undefined;
    const twice = required?.find((r, i) => required.indexOf(r) !== i);
    if (twice !== undefined) throw new GrammarError(`${path}/required: ${JSON.stringify(twice)} is listed twice (the names in required must be unique)`);
    if (s["nullable"] !== undefined) {
      const types = s["type"] === undefined ? [] : [s["type"]].flat();
      if (types.length === 0) throw new GrammarError(`${path}/nullable: only taken beside a type (OpenAPI 3.0.3: it adds null to the type only where type is given in the same schema; ajv refuses it without one); write type with "null" in it, or anyOf with {"type": "null"}`);
      if (s["nullable"] === false && types.includes("null")) throw new GrammarError(`${path}/nullable: false, but type ${JSON.stringify(s["type"])} admits null`);
    }
  }

  private space(): void {
    this.rules.set("space", SPACE.slice("space ::= ".length));
  }

  private anyValue(): string {
    if (this.rules.has("value")) return "value";
    this.primitive("string");
    for (const t of ["number", "boolean", "null"]) this.primitive(t);
    this.rules.set("value", "object | array | string | number | boolean | null");
    this.rules.set("object", `"{" space (string ":" space value ("," space string ":" space value)*)? "}" space`);
    this.rules.set("array", `"[" space (value ("," space value)*)? "]" space`);
    return "value";
  }

  private ref(ref: string, path: string, depth: number): string {
    const done = this.refs.get(ref);
    if (done) {
      // still being converted: the schema refers to itself
      if (!this.rules.has(done)) this.recursions.push([path, ref, done]);
      return done;
    }
    const target = this.resolve(ref, path);
    const last = ref.slice(ref.lastIndexOf("/") + 1);
    const name = `ref-${(ref === "#" ? "root" : last).replace(/[^A-Za-z0-9-]/g, "-") || "x"}`;
    // named before it is visited, so a recursive schema refers to itself
    this.refs.set(ref, name);
    const body = this.visit(target, `${name}-body`, ref, depth + 1);
    this.rules.set(name, body);
    return name;
  }

  /** the schema a $ref points at: "#" or a JSON pointer into this document (#/$defs/x, #/properties/a/items, ...) */
  private resolve(ref: string, path: string): unknown {
    let target: unknown = ref.startsWith("#") ? this.schema : undefined;
    if (target !== undefined && ref !== "#") {
      if (!ref.startsWith("#/")) target = undefined;
      for (const raw of ref.slice(2).split("/")) {
        if (target === undefined) break;
        let key: string;
        try {
          key = decodeURIComponent(raw).replaceAll("~1", "/").replaceAll("~0", "~");
        } catch {
          target = undefined;
          break;
        }
        target = typeof target === "object" && target !== null && Object.hasOwn(target, key) ? (target as Record<string, unknown>)[key] : undefined;
      }
    }
    if (target === undefined) throw new GrammarError(`${path}/$ref: ${JSON.stringify(ref)} does not point at a schema in this document (# or a JSON pointer such as #/$defs/name)`);
    return target;
  }

  /**
   * allOf as one schema: its parts ($refs followed) and the keywords beside it. One part that
   * constrains anything is that part; parts that are all objects are merged (their properties
   * and required lists joined, as llama.cpp does); anything else cannot be one grammar. `at`: the
   * path to name the merged schema's faults at (the one part's own, where one part is all);
   * `from`: where in the schema a merged keyword (or property) was written, where that was a part
   * (a fault of it names that spot, not the allOf's holder).
   */
  private mergeAllOf(s: Record<string, unknown>, path: string, depth: number): { merged: Record<string, unknown>; at: string; from: Map<string, string> } {
    const { allOf, ...beside } = s;
    const parts: Record<string, unknown>[] = [];
    const wheres: string[] = [];
    // which parts are keywords beside the allOf (anyOf, $ref) rather than in it
    const outer: boolean[] = [];
    const from = new Map<string, string>();
    const done = (merged: Record<string, unknown>, at = path) => ({ merged, at, from });
    const take = (p: unknown, where: string, hops: number): void => {
      if (p === true || (typeof p === "object" && p !== null && !Array.isArray(p) && !constrains(p as Record<string, unknown>))) return;
      if (never(p)) throw new GrammarError(`${where}: the schema ${JSON.stringify(p)} admits no value, so the allOf it is part of admits none`);
      if (typeof p !== "object" || p === null || Array.isArray(p)) throw new GrammarError(`${where}: expected a schema object, got ${JSON.stringify(p)}`);
      const o = p as Record<string, unknown>;
      this.checkKeys(o, where);
      // (a part's own alternatives are no keywords to merge)
      const conditional = CONDITIONAL_KEYS.find((k) => o[k] !== undefined);
      if (conditional !== undefined) throw new GrammarError(`${where}/${conditional}: not supported in a part of allOf (nor in then / else); write it beside the allOf`);
      if (typeof o["$ref"] === "string" && Object.keys(o).every((k) => k === "$ref" || !constrains({ [k]: o[k] }))) {
        if (hops > this.maxDepth) throw new GrammarError(`${where}/$ref: $refs chain more than ${this.maxDepth} deep`);
        take(this.resolve(o["$ref"], where), o["$ref"], hops + 1);
      } else if (Array.isArray(o["allOf"]) && hops <= this.maxDepth) {
        const { allOf: inner, ...rest } = o;
        take(rest, where, hops + 1);
        (inner as unknown[]).forEach((q, i) => take(q, partPaths.get(o)?.[i] ?? `${where}/allOf/${i}`, hops + 1));
      } else {
        // nullable is of its own part's type: null joins that type (else beside another part's type it added null to both)
        const { nullable, ...rest } = o;
        const types = [rest["type"]].flat();
        parts.push(nullable === undefined ? o : nullable === true && !types.includes("null") ? { ...rest, type: [...types, "null"] } : rest);
        wheres.push(where);
        outer.push(besideParts.has(o));
      }
    };
    if (depth > this.maxDepth) throw new GrammarError(`${path}: schemas nest more than ${this.maxDepth} deep`);
    take(besidePart(beside), path, 0);
    (allOf as unknown[]).forEach((p, i) => take(p, partPaths.get(s)?.[i] ?? `${path}/allOf/${i}`, 0));
    if (parts.length === 0) return done({});
    if (parts.length === 1) return done(parts[0]!, wheres[0]);
    // enums (and consts): the values every part takes
    if (parts.some((o) => o["enum"] !== undefined || o["const"] !== undefined)) {
      const valuesOf = (o: Record<string, unknown>): unknown[] | undefined => (o["const"] !== undefined ? [o["const"]] : Array.isArray(o["enum"]) ? o["enum"] : undefined);
      const lists = parts.map(valuesOf);
      const typeOk = (v: unknown, t: unknown): boolean => t === undefined || (Array.isArray(t) ? t : [t]).some((x) => x === (v === null ? "null" : Array.isArray(v) ? "array" : typeof v === "number" && Number.isInteger(v) && x === "integer" ? "integer" : typeof v));
      let keep = lists.find((l) => l !== undefined)!.filter((v) => lists.every((l, i) => (l === undefined || l.some((w) => JSON.stringify(w) === JSON.stringify(v))) && typeOk(v, parts[i]!["type"])));
      // the keywords beside a part's enum (maxLength, ...) keep the values they admit, as beside an enum alone
      for (const [i, o] of parts.entries()) {
        const { const: _c, enum: _e, type: _t, ...beside } = o;
        if (lists[i] !== undefined && constrains(beside)) keep = this.admitted(beside, keep, wheres[i]!, depth);
        // a part of no enum (a bound, a not, an object's properties) keeps the values its grammar takes, as beside an enum alone
        else if (lists[i] === undefined && constrains(beside)) keep = this.admitted(o, keep, wheres[i]!, depth);
      }
      if (keep.length === 0) throw new GrammarError(`${path}/allOf: no value is in every enum`);
      return done({ enum: keep });
    }
    // unevaluatedProperties in a part says which of that part's own keys it evaluated: no keyword to merge
    // (and unevaluatedItems which of its own elements: another part's prefixItems are none of them)
    for (const [i, o] of parts.entries()) {
      if (o["unevaluatedItems"] !== undefined && !outer[i]) throw new GrammarError(`${wheres[i]}/unevaluatedItems: only beside allOf (or anyOf, $ref) is supported, not in one of its parts`);
      if (o["unevaluatedProperties"] !== undefined && (o["unevaluatedProperties"] !== false || !outer[i])) throw new GrammarError(`${wheres[i]}/unevaluatedProperties: only false beside allOf (or anyOf, $ref) is supported, not in one of its parts or as a schema`);
    }
    const objectPart = (o: Record<string, unknown>): boolean => !((o["type"] !== undefined && o["type"] !== "object") || impliedTypes(o).some((t) => t !== "object") || ["enum", "const", "anyOf", "oneOf", "$ref"].some((k) => o[k] !== undefined));
    // (parts that say nothing of objects, only nots, are no object parts: {not: A} and {not: B}
    // merged as objects took objects alone, where ajv takes every value that is neither)
    if (!parts.every(objectPart) || !parts.some((o) => o["type"] === "object" || impliedTypes(o).includes("object"))) {
      // parts of one type whose keywords do not meet (minimum in one, maximum in another): one schema
      const merged: Record<string, unknown> = {};
      // multipleOfs after the first, with where each was written
      const multiples: [number, string][] = [];
      // lists of alternatives met again: parts of an allOf beside the merged schema
      const distributed: [Record<string, unknown>, string][] = [];
      for (const [i, o] of parts.entries()) {
        const where = wheres[i]!;
        for (const [k, v] of Object.entries(o)) {
          if (!constrains({ [k]: v }) && k !== "type") continue;
          const had = k in merged, before = merged[k];
          if (!had) merged[k] = v;
          else if (typeof v === "number" && typeof before === "number" && (LOWER_BOUNDS.has(k) || UPPER_BOUNDS.has(k))) {
            // a bound in two parts: the tighter one
            merged[k] = LOWER_BOUNDS.has(k) ? Math.max(before, v) : Math.min(before, v);
          } else if (k === "uniqueItems" && typeof v === "boolean" && typeof before === "boolean") merged[k] = v || before;
          else if ((k === "anyOf" || k === "oneOf") && Array.isArray(v) && canonicalJson(v) !== canonicalJson(before)) {
            // a second list of alternatives: a part of its own beside the first (visit writes each
            // alternative of the first with it, so every pair is written: the intersection)
            distributed.push([{ [k]: v }, where]);
            continue;
          } else if (k === "not" && canonicalJson(v) !== canonicalJson(before)) {
            // a value that is neither: not of either one (negated() reads not of an anyOf so)
            merged[k] = { anyOf: [...notsOf(before), ...notsOf(v)] };
          } else if (k === "multipleOf" && [v, before].every((x) => typeof x === "number" && x > 0 && Number.isFinite(x))) {
            // (merged once all are read: below)
            multiples.push([v as number, `${where}/${k}`]);
            continue;
          }
          else if (k === "pattern" && typeof v === "string" && v !== before && (typeof before === "string" || patternLists.has(before as object))) {
            // a string every part's pattern matches: the patterns run together (string-language.ts)
            const list = [...[before].flat(), v] as string[];
            patternLists.add(list);
            merged[k] = list;
          }
          else if (k === "type" && canonicalJson(v) !== canonicalJson(before)) {
            // the types every part takes (an integer is a number)
            const types = commonTypes(before, v);
            if (types.length === 0) throw new GrammarError(`${where}/type: no value is of type ${JSON.stringify(v)} and of type ${JSON.stringify(before)} (at ${from.get(k) ?? `${path}/${k}`}), which both apply`);
            merged[k] = types.length === 1 ? types[0] : types;
          }
          else if (k === "items" && !Array.isArray(v) && !Array.isArray(before) && canonicalJson(v) !== canonicalJson(before)) {
            // every element takes both schemas (a new allOf: its faults name that); false in either: no element
            merged[k] = v === false || before === false ? false : allOfAt([[before, from.get(k) ?? `${path}/${k}`], [v, `${where}/${k}`]]);
            from.delete(k);
            continue;
          } else if (canonicalJson(v) !== canonicalJson(before)) {
            throw new GrammarError(`${where}/${k}: ${k} is in two parts of allOf with different values (also at ${from.get(k) ?? `${path}/${k}`}): only objects (properties, required), or parts whose keywords differ or agree, can be combined into one grammar`);
          }
          // (the value kept is the one a fault names)
          if (!had || merged[k] !== before) {
            if (where !== path) from.set(k, `${where}/${k}`);
            else from.delete(k);
          }
        }
      }
      if (multiples.length > 0) {
        // a number is a multiple of them all exactly where it is a multiple of their least common
        // multiple (of the decimals written: 0.5 and 3 make 3), where that is an integer a
        // validator's division by each tells apart (multiple-of.ts)
        const all: [number, string][] = [[merged["multipleOf"] as number, from.get("multipleOf") ?? `${path}/multipleOf`], ...multiples];
        const [last, lastAt] = all[all.length - 1]!;
        // (of an integer type: 1 too, as an integer is a multiple of it)
        const common = commonMultiple([...all.map(([k]) => k), ...(merged["type"] === "integer" && all.some(([k]) => !Number.isInteger(k)) ? [1] : [])]);
        if ("fault" in common) throw new GrammarError(`${lastAt}: ${last} here and ${all.slice(0, -1).map(([k, at]) => `${k} at ${at}`).join(", ")} cannot be one multipleOf: ${common.fault}`);
        merged["multipleOf"] = common.value;
      }
      // a tuple's items (or additionalItems) are the elements past its positions; a part without the
      // tuple says them of every element: read together, the merged schema would say otherwise
      const tupleKey = Array.isArray(merged["prefixItems"]) ? "prefixItems" : Array.isArray(merged["items"]) ? "items" : undefined;
      if (tupleKey !== undefined) {
        for (const [i, o] of parts.entries()) {
          const rest = ["items", "additionalItems"].find((k) => o[k] !== undefined && !Array.isArray(o[k]));
          if (rest !== undefined && !Array.isArray(o[tupleKey]) && !(rest === "items" && tupleKey === "items")) {
            throw new GrammarError(`${wheres[i]}/${rest}: ${rest} without the tuple ${tupleKey} (at ${from.get(tupleKey) ?? `${path}/${tupleKey}`}) in another part of allOf cannot be one grammar: put them in one part`);
          }
        }
      }
      if (distributed.length > 0) {
        merged["allOf"] = distributed.map(([p]) => p);
        partPaths.set(merged, distributed.map(([, at]) => at));
      }
      return done(merged);
    }
    // objects: every part's properties (a property named in several parts takes all their schemas),
    // their required lists joined; a part's additionalProperties applies to the others' properties
    const properties: Record<string, unknown> = {};
    // where each property's schema was written (the merged object's own path for one made here)
    const propertyAt = new Map<string, string>();
    const required: string[] = [];
    const combine = (k: string, v: unknown, at: string) => {
      // (a property false in one part may not be present: false in the merged object too)
      if (Object.hasOwn(properties, k) && (never(v) || never(properties[k]))) {
        if (never(v)) propertyAt.set(k, at);
        properties[k] = false;
      } else if (Object.hasOwn(properties, k)) {
        // a property of several parts: a new allOf of their schemas, whose parts name their own spots
        properties[k] = allOfAt([[properties[k], propertyAt.get(k)!], [v, at]]);
        propertyAt.set(k, `${path}/properties/${k}`);
        from.delete(`properties/${k}`);
      } else {
        properties[k] = v;
        propertyAt.set(k, at);
        if (at !== `${path}/properties/${k}`) from.set(`properties/${k}`, at);
      }
    };
    const objectNots: Part[] = [];
    for (const [i, o] of parts.entries()) {
      // (a part's propertyNames as an object's own: the merged object has none)
      checkPropertyNames(o, wheres[i]!);
      // a part's not of required / properties (each alternative of a not of anyOf one): of the merged
      // object, as negated() writes it; where it rules out only other types or values no object is:
      // says nothing of the merged object
      if (o["not"] !== undefined && o["not"] !== false && notsOf(o["not"]).every((n) => this.objectTest(n, `${wheres[i]}/not`) !== undefined)) {
        objectNots.push([o["not"], `${wheres[i]}/not`]);
      } else if (o["not"] !== undefined && o["not"] !== false) {
        const { types, values } = this.ruledOut(o["not"], `${wheres[i]}/not`);
        if (types.includes("object")) throw new GrammarError(`${wheres[i]}/not: rules out objects, which the other parts of allOf are`);
        if (values.some(isMap)) throw new GrammarError(`${wheres[i]}/not: ruling out an object value in a part of allOf beside object parts is not supported`);
      }
      // (which keys another part's properties or additionalProperties leave to a part's patterns is no merge of keywords)
      if (o["patternProperties"] !== undefined) throw new GrammarError(`${wheres[i]}/patternProperties: not supported in a part of allOf beside other object parts; write the object in one schema`);
      for (const [k, v] of Object.entries((o["properties"] ?? {}) as Record<string, unknown>)) combine(k, v, `${wheres[i]}/properties/${k}`);
      if (Array.isArray(o["required"])) required.push(...(o["required"] as string[]));
    }
    // a required name no part has as a property: any value, as far as these parts say (each part's additionalProperties below)
    for (const r of required) if (!Object.hasOwn(properties, r)) combine(r, true, `${path}/properties/${r}`);
    for (const [i, o] of parts.entries()) {
      const own = (o["properties"] ?? {}) as Record<string, unknown>;
      const additional = o["additionalProperties"];
      if (additional === undefined || additional === true) continue;
      for (const k of Object.keys(properties)) {
        if (Object.hasOwn(own, k)) continue;
        if (additional !== false) combine(k, additional, `${wheres[i]}/additionalProperties`);
        else if (required.includes(k)) throw new GrammarError(`${wheres[i]}/additionalProperties: false, but another part requires "${k}"`);
        else delete properties[k];
      }
    }
    // the merged object takes no other keys where a part said so, or named properties and left
    // additionalProperties unset (as such an object takes none here); a part with properties and an
    // additionalProperties schema (or true) leaves other keys to that schema
    const closed = parts.some((o) => o["additionalProperties"] === false || (o["additionalProperties"] === undefined && Object.keys((o["properties"] ?? {}) as object).length > 0));
    // unevaluatedProperties false beside the allOf: only the parts' properties (the merged object
    // closed), where no part evaluates other keys (additionalProperties true or a schema); a part's
    // own (its keys are those it evaluates, no merge of keywords) or a schema is refused
    for (const [i, o] of parts.entries()) {
      if (o["unevaluatedProperties"] === undefined) continue;
      const at = `${wheres[i]}/unevaluatedProperties`;
      const open = parts.findIndex((q) => q["additionalProperties"] !== undefined && q["additionalProperties"] !== false);
      if (open >= 0) throw new GrammarError(`${at}: not supported beside ${wheres[open]}/additionalProperties (the keys it evaluates are no property to write)`);
      const other = required.find((r) => !parts.some((q) => Object.hasOwn((q["properties"] ?? {}) as object, r)));
      if (other !== undefined) throw new GrammarError(`${at}: false, but "${other}" is required and no part has it as a property: no object has it`);
    }
    const unevaluatedClosed = parts.some((o) => o["unevaluatedProperties"] === false);
    // (a name several parts require is required once)
    const names = [...new Set(required)];
    // how many keys: the tightest bound of any part (each applies)
    const counts: Record<string, number> = {};
    for (const o of parts) {
      for (const k of ["minProperties", "maxProperties"]) {
        const v = o[k];
        if (typeof v !== "number") {
          if (v !== undefined) counts[k] = v as number; // (refused, naming it, where the merged object is read)
          continue;
        }
        counts[k] = counts[k] === undefined ? v : k === "minProperties" ? Math.max(counts[k]!, v) : Math.min(counts[k]!, v);
      }
    }
    // (nots of several parts: not of an anyOf of them, each named where it was written)
    if (objectNots.length === 1) from.set("not", objectNots[0]![1]);
    const not = objectNots.length === 0 ? {} : { not: objectNots.length === 1 ? objectNots[0]![0] : { anyOf: objectNots.flatMap(([n]) => notsOf(n)) } };
    if (closed || unevaluatedClosed) return done({ type: "object", properties, required: names, additionalProperties: false, ...counts, ...not });
    // other keys: their values take every part's additionalProperties schema (it was passed over: any value)
    const others = parts.flatMap((o, i) => (o["additionalProperties"] === undefined || o["additionalProperties"] === true ? [] : [[o["additionalProperties"], `${wheres[i]}/additionalProperties`] as const]));
    if (others.length === 1 && others[0]![1] !== `${path}/additionalProperties`) from.set("additionalProperties", others[0]![1]);
    const additionalProperties = others.length === 0 ? true : others.length === 1 ? others[0]![0] : allOfAt(others);
    return done({ type: "object", properties, required: names, additionalProperties, ...counts, ...not });
  }

  /** a number, within minimum / maximum / exclusiveMinimum / exclusiveMaximum where given (decimal-range.ts) */
  private number(s: Record<string, unknown>, name: string, path: string): string {
    // a multiple of an integer is an integer: written as one (10.0 would validate too)
    if (s["multipleOf"] !== undefined) return this.integer(s, name, path);
    const [min, max, xmin, xmax] = RANGE_KEYS.map((k) => rangeBound(s, k, path, NUMBER_BOUND_LIMIT));
    if (min === undefined && max === undefined && xmin === undefined && xmax === undefined) return this.primitive("number");
    // the tighter of each side's bounds (an exclusive one wins a tie)
    const lower = min === undefined ? (xmin === undefined ? undefined : { value: xmin, inclusive: false }) : xmin !== undefined && xmin >= min ? { value: xmin, inclusive: false } : { value: min, inclusive: true };
    const upper = max === undefined ? (xmax === undefined ? undefined : { value: xmax, inclusive: false }) : xmax !== undefined && xmax <= max ? { value: xmax, inclusive: false } : { value: max, inclusive: true };
    let re: string;
    try {
      re = decimalRangeRegex(lower, upper);
    } catch (e) {
      // named at the upper bound's keyword (else the lower's), as integer() names its bounds
      const at = upper === undefined ? (lower!.inclusive ? "minimum" : "exclusiveMinimum") : upper.inclusive ? "maximum" : "exclusiveMaximum";
      throw new GrammarError(`${path}/${at}: ${(e as Error).message}`);
    }
    this.space();
    return this.add(name, `${regexToGbnf(re)} space`);
  }

  /** an integer, within minimum / maximum / exclusiveMinimum / exclusiveMaximum where given (int-range.ts) */
  private integer(s: Record<string, unknown>, name: string, path: string): string {
    if (s["multipleOf"] !== undefined) return this.multiple(s, name, path);
    if (!RANGE_KEYS.some((k) => s[k] !== undefined)) return this.primitive("integer");
    const { lo, hi } = integerBounds(s, path);
    this.space();
    return this.add(name, `${regexToGbnf(integerRangeRegex(lo, hi))} space`);
  }

  /**
   * The multiples of k within the bounds (of up to 15 digits where a side is open, as unbounded
   * multiples): per sign, the magnitudes from a to b, each length of digits apart, read left to
   * right through the remainders modulo k while the digits written so far equal a's or b's (then
   * the next digit is held to theirs); never -0
   */
  private boundedMultiple(s: Record<string, unknown>, k: number, base: string, name: string, path: string): string {
    const { lo, hi } = integerBounds(s, path);
    const TOP = 999_999_999_999_999;
    const alts: string[] = [];
    if ((lo ?? -1) <= 0 && (hi ?? 1) >= 0) alts.push('"0"');
    // rule for "`left` more digits from remainder r, to remainder 0", or undefined where none can follow
    const made = new Map<string, string | undefined>();
    const exact = (r: number, left: number): string | undefined => {
      if (left === 0) return r === 0 ? '""' : undefined;
      const id = `${base}-e${left}-${r}`;
      if (!made.has(id)) made.set(id, this.digits(id, [0, 9], (d) => exact((r * 10 + d) % k, left - 1)));
      return made.get(id);
    };
    const magnitudes = (a: number, b: number, id: string): string | undefined => {
      const lens: string[] = [];
      for (let len = String(a).length; len <= String(b).length; len++) {
        const low = len > String(a).length ? undefined : String(a), high = len < String(b).length ? undefined : String(b);
        // position i with remainder r, the digits so far equal to low's (tl) or high's (th)
        const tight = (i: number, r: number, tl: boolean, th: boolean): string | undefined => {
          // (the first digit is never 0, so it is written here even where no bound holds it)
          if (!tl && !th && i > 0) return exact(r, len - i);
          if (i === len) return r === 0 ? '""' : undefined;
          const from = tl ? Number(low![i]) : i === 0 ? 1 : 0, to = th ? Number(high![i]) : 9;
          return this.digits(`${base}-${id}${len}-${i}-${r}${tl ? "l" : ""}${th ? "h" : ""}`, [from, to], (d) => tight(i + 1, (r * 10 + d) % k, tl && d === from, th && d === to));
        };
        const first = tight(0, 0, low !== undefined, high !== undefined);
        if (first !== undefined) lens.push(first);
      }
      return lens.length === 0 ? undefined : lens.length === 1 ? lens[0] : `(${lens.join(" | ")})`;
    };
    if ((hi ?? 1) >= 1) {
      const pos = magnitudes(Math.max(1, lo ?? 1), Math.min(TOP, hi ?? TOP), "p");
      if (pos !== undefined && Math.max(1, lo ?? 1) <= Math.min(TOP, hi ?? TOP)) alts.push(pos);
    }
    if ((lo ?? -1) <= -1) {
      const neg = magnitudes(Math.max(1, -(hi ?? -1)), Math.min(TOP, -(lo ?? -TOP)), "n");
      if (neg !== undefined && Math.max(1, -(hi ?? -1)) <= Math.min(TOP, -(lo ?? -TOP))) alts.push(`"-" ${neg}`);
    }
    if (alts.length === 0) throw new GrammarError(`${path}/multipleOf: no multiple of ${k} lies within the bounds (from ${lo ?? "any"} to ${hi ?? "any"}, up to 15 digits)`);
    return this.add(name, `(${alts.join(" | ")}) space`);
  }

  /** a rule of digits from..to, each going on with `next(d)` (grouped by it); undefined where none goes on */
  private digits(id: string, [from, to]: readonly [number, number], next: (d: number) => string | undefined): string | undefined {
    const by = new Map<string, number[]>();
    for (let d = from; d <= to; d++) {
      const n = next(d);
      if (n !== undefined) by.set(n, [...(by.get(n) ?? []), d]);
    }
    if (by.size === 0) return undefined;
    return this.add(id, [...by].map(([n, ds]) => `[${ds.join("")}]${n === '""' ? "" : ` ${n}`}`).join(" | "));
  }

  /**
   * The integers that are multiples of multipleOf (an integer up to MAX_MULTIPLE), of up to 15
   * digits as an unbounded integer's (past them a double is no longer exact, and the value ajv
   * reads need not be a multiple): the digits read left to right through the remainders modulo it
   * (after r comes digit d to (10r + d) mod k), ending at remainder 0; "-" before a multiple is one too
   */
  private multiple(s: Record<string, unknown>, name: string, path: string): string {
    const k = s["multipleOf"];
    if (typeof k !== "number" || !Number.isInteger(k) || k < 1 || k > MAX_MULTIPLE) throw new GrammarError(`${path}/multipleOf: expected an integer from 1 to ${MAX_MULTIPLE}, got ${JSON.stringify(k)}`);
    const bounded = RANGE_KEYS.some((b) => s[b] !== undefined);
    if (k === 1) return this.integer({ ...s, multipleOf: undefined }, name, path);
    this.space();
    let base = `${name}-mod`;
    for (let n = 1; [...this.rules.keys()].some((r) => r.startsWith(`${base}-`)); n++) base = `${name}-mod${n}`;
    if (bounded) return this.boundedMultiple(s, k, base, name, path);
    // rule for "remainder r, at most `left` more digits", or undefined where no multiple can follow
    const made = new Map<string, string | undefined>();
    const state = (r: number, left: number): string | undefined => {
      const id = `${base}-${left}-${r}`;
      if (made.has(id)) return made.get(id);
      const alts = [...(r === 0 ? ['""'] : []), ...(left > 0 ? step(r, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9], left - 1) : [])];
      const rule = alts.length === 0 ? undefined : r === 0 && alts.length === 1 ? '""' : this.add(id, alts.join(" | "));
      made.set(id, rule);
      return rule;
    };
    // digits grouped by the state they lead to
    const step = (r: number, digits: readonly number[], left: number): string[] => {
      const to = new Map<string, number[]>();
      for (const d of digits) {
        const next = state((r * 10 + d) % k, left);
        if (next !== undefined) to.set(next, [...(to.get(next) ?? []), d]);
      }
      return [...to].map(([next, ds]) => `[${ds.join("")}]${next === '""' ? "" : ` ${next}`}`);
    };
    return this.add(name, `"-"? ("0" | ${step(0, [1, 2, 3, 4, 5, 6, 7, 8, 9], 14).join(" | ")}) space`);
  }

  private string(s: Record<string, unknown>, name: string, path: string, none: readonly (readonly StringTest[])[] = [], noneAt = `${path}/not`): string {
    const pattern = s["pattern"];
    if (none.length > 0 || patternLists.has(pattern as object)) return this.stringLanguage(s, none, name, path, noneAt);
    if (pattern !== undefined) {
      if (typeof pattern !== "string") throw new GrammarError(`${path}/pattern: expected a regular expression string`);
      // a format beside a pattern is left to the pattern (zod writes the format's own expression there)
      const [min, max] = this.lengths(s, path);
      const body = this.patternText(pattern, min, max, name, `${path}/pattern`);
      this.space();
      return this.add(name, `"\\"" ${body} "\\"" space`);
    }
    const format = s["format"];
    if (format !== undefined && typeof format !== "string") throw new GrammarError(`${path}/format: expected a string, got ${JSON.stringify(format)}`);
    // other formats (uri, ...) are annotations, as JSON Schema 2020-12 makes every format by default and llama.cpp treats them: a plain string
    if (format !== undefined && (format === "date-time" || Object.hasOwn(FORMATS, format))) {
      // the format's grammar has its own length: a length beside it would be passed over
      for (const k of ["minLength", "maxLength"]) if (s[k] !== undefined) throw new GrammarError(`${path}/${k}: not supported together with format ${format}`);
      const inner = format === "date-time" ? `${FORMATS["date"]} "T" ${FORMATS["time"]}` : FORMATS[format]!;
      return this.add(name, `"\\"" ${inner} "\\"" space`);
    }
    const [min, max] = this.lengths(s, path);
    if (min === 0 && max === undefined) return this.primitive("string");
    this.primitive("string");
    return this.add(name, `"\\"" char{${min},${max ?? ""}} "\\"" space`);
  }

  /**
   * A string of the patterns (several where parts of allOf each have one) and lengths beside, that
   * no group of `none` takes whole (`not` of a pattern, values ruled out), as string-language.ts
   * writes it; a format beside is refused (its grammar is no pattern to run with them)
   */
  private stringLanguage(s: Record<string, unknown>, none: readonly (readonly StringTest[])[], name: string, path: string, noneAt: string): string {
    const inside = this.stringInside(s, none, name, path, noneAt);
    this.space();
    return this.add(name, `"\\"" ${inside} "\\"" space`);
  }

  /** the inside of stringLanguage()'s string: the first of the rules made for it */
  private stringInside(s: Record<string, unknown>, none: readonly (readonly StringTest[])[], name: string, path: string, noneAt: string, all: readonly StringTest[] = []): string {
    if (s["format"] !== undefined && (s["format"] === "date-time" || Object.hasOwn(FORMATS, s["format"] as string)) && s["pattern"] === undefined) {
      throw new GrammarError(`${path}/format: ${JSON.stringify(s["format"])} beside ${none.length > 0 ? noneAt : "another pattern"} is not supported (write the format as a pattern)`);
    }
    const patterns = s["pattern"] === undefined ? [] : typeof s["pattern"] === "string" ? [s["pattern"]] : (s["pattern"] as string[]);
    for (const p of patterns) {
      if (typeof p !== "string") throw new GrammarError(`${path}/pattern: expected a regular expression string`);
      try {
        checkPattern(p);
      } catch (e) {
        throw new GrammarError(`${path}/pattern: ${(e as Error).message}`);
      }
    }
    const [min, max] = this.lengths(s, path);
    let prefix = `${name}-str`;
    for (let n = 1; [...this.rules.keys()].some((r) => r.startsWith(`${prefix}-`)); n++) prefix = `${name}-str${n}`;
    let rules: [string, string][];
    try {
      rules = stringLanguageGbnf({ all: [...patterns.map((pattern) => ({ pattern })), ...all], none, min, max }, prefix, this.maxRules - this.rules.size);
    } catch (e) {
      if (!(e instanceof GrammarError)) throw e;
      throw new GrammarError(`${none.length > 0 ? noneAt : `${path}/pattern`}: ${e.message}${none.length > 0 ? " beside the pattern and lengths it applies to" : " of the patterns"}`);
    }
    for (const [rule, text] of rules) this.add(rule, text);
    return `${prefix}-0`;
  }

  /**
   * A JSON Schema pattern's strings of `min` to `max` characters, as the inside of a JSON string
   * (a GBNF expression or the first of the rules made for it); `at` is the pattern's schema path
   */
  private patternText(pattern: string, min: number, max: number | undefined, name: string, at: string): string {
    const whole = wholeMatch(pattern);
    let prefix = `${name}-len`;
    for (let n = 1; [...this.rules.keys()].some((r) => r.startsWith(`${prefix}-`)); n++) prefix = `${name}-len${n}`;
    let body: string, rules: [string, string][] = [];
    try {
      // the pattern read alone first: a fault in it is named at its own position, not the wrapped expression's
      checkPattern(pattern);
      // with a length: the pattern's strings of those lengths, its automaton paired with a count of characters
      if (min === 0 && max === undefined) body = regexToGbnf(whole, true);
      else {
        rules = regexLengthGbnf(whole, true, min, max, prefix, this.maxRules - this.rules.size);
        body = `${prefix}-0`;
      }
    } catch (e) {
      throw new GrammarError(`${at}: ${(e as Error).message}`);
    }
    for (const [rule, text] of rules) this.add(rule, text);
    return body;
  }

  /** a string's minLength and maxLength (undefined: none), checked */
  private lengths(s: Record<string, unknown>, path: string): [number, number | undefined] {
    const min = s["minLength"] ?? 0, max = s["maxLength"];
    for (const [k, v] of [["minLength", min], ["maxLength", max ?? 0]] as const) {
      if (!Number.isInteger(v) || (v as number) < 0 || (v as number) > MAX_REPETITION) throw new GrammarError(`${path}/${k}: expected an integer from 0 to ${MAX_REPETITION}, got ${JSON.stringify(v)}`);
    }
    if (max !== undefined && (max as number) < (min as number)) throw new GrammarError(`${path}/maxLength: ${max} is below minLength ${min}`);
    return [min as number, max as number | undefined];
  }

  private array(s: Record<string, unknown>, name: string, path: string, depth: number): string {
    const min = (s["minItems"] ?? 0) as number, max = s["maxItems"] as number | undefined;
    for (const [k, v] of [["minItems", min], ["maxItems", max ?? 0]] as const) {
      if (!Number.isInteger(v) || v < 0 || v > MAX_REPETITION) throw new GrammarError(`${path}/${k}: expected an integer from 0 to ${MAX_REPETITION}, got ${JSON.stringify(v)}`);
    }
    if (max !== undefined && max < min) throw new GrammarError(`${path}/maxItems: ${max} is below minItems ${min}`);
    // elements of a schema no value satisfies ({"not": {}}): none may stand there, as of false
    const nothing = ["items", "additionalItems"].filter((k) => s[k] !== undefined && s[k] !== false && never(s[k]));
    const tuple = Array.isArray(s["prefixItems"]) ? "prefixItems" : Array.isArray(s["items"]) ? "items" : undefined;
    if (nothing.length > 0 || (tuple !== undefined && (s[tuple] as unknown[]).some((p) => p !== false && never(p)))) {
      const positions = tuple === undefined ? {} : { [tuple]: (s[tuple] as unknown[]).map((p) => (never(p) ? false : p)) };
      return this.array({ ...s, ...Object.fromEntries(nothing.map((k) => [k, false])), ...positions }, name, path, depth);
    }
    // unevaluatedItems: the elements no tuple position (prefixItems) or items took; with no
    // allOf / anyOf / $ref beside (which reach here merged, or each alternative with it) that is
    // what items (after prefixItems) or additionalItems (after items as a list) would apply to,
    // and where that is given, none. contains evaluates the elements it matches: refused there
    if (s["unevaluatedItems"] !== undefined) {
      const { unevaluatedItems: rest, ...others } = s;
      if (others["contains"] !== undefined) throw new GrammarError(`${path}/unevaluatedItems: not supported beside contains (the elements it matches are evaluated, the others not)`);
      const after = Array.isArray(others["items"]) ? "additionalItems" : "items";
      return this.array(others[after] !== undefined ? others : { ...others, [after]: rest }, name, path, depth);
    }
    const one = s["prefixItems"];
    if (one !== undefined && !Array.isArray(one)) {
      // prefixItems as one schema (not a list, which JSON Schema asks for): the schema of every
      // element, as llama.cpp's converter reads it; beside items each element takes both
      if (Array.isArray(s["items"])) throw new GrammarError(`${path}/prefixItems: expected a list of schemas (one schema is read as every element's, but not beside items as a list)`);
      const { prefixItems: _, ...rest } = s;
      const items = allOfAt([...(s["items"] === undefined ? [] : [[s["items"], `${path}/items`] as const]), [one, `${path}/prefixItems`]]);
      return this.array({ ...rest, items }, name, path, depth);
    }
    // false for a tuple's position: no element may stand there, so the array ends before it
    const tupleKey = Array.isArray(s["prefixItems"]) ? "prefixItems" : Array.isArray(s["items"]) ? "items" : undefined;
    const closedAt = tupleKey === undefined ? -1 : (s[tupleKey] as unknown[]).indexOf(false);
    if (tupleKey !== undefined && closedAt >= 0) {
      if (min > closedAt) throw new GrammarError(`${path}/minItems: ${min} items, but ${tupleKey}/${closedAt} is false: no element may stand there`);
      const restKey = tupleKey === "prefixItems" ? "items" : "additionalItems";
      return this.array({ ...s, [tupleKey]: (s[tupleKey] as unknown[]).slice(0, closedAt), [restKey]: false }, name, path, depth);
    }
    // items false without a tuple: no element at all
    if (tupleKey === undefined && s["items"] === false) {
      if (min > 0) throw new GrammarError(`${path}/minItems: ${min} items, but items is false: no element may stand in the array`);
      // (an empty array has no element contains matches: it was written, which no validator takes)
      if (s["contains"] !== undefined && s["minContains"] !== 0) throw new GrammarError(`${path}/contains: ${JSON.stringify(s["minContains"] ?? 1)} matching elements, but items is false: no element may stand in the array`);
      this.space();
      return this.add(name, `"[" space "]" space`);
    }
    const unique = s["uniqueItems"];
    if (unique !== undefined && typeof unique !== "boolean") throw new GrammarError(`${path}/uniqueItems: expected a boolean, got ${JSON.stringify(unique)}`);
    if (s["contains"] !== undefined) {
      const made = this.containing(s, min, max, tupleKey !== undefined || unique === true, name, path, depth);
      if (made !== undefined) return made;
    }
    // (at most one element is always distinct: a plain list)
    if (unique === true && (max === undefined || max > 1)) return this.uniqueList(s, min, max, name, path, depth);
    // tuples: prefixItems (then items for the rest), or (draft 7) items as a list (then additionalItems)
    if (Array.isArray(s["prefixItems"])) return this.tuple(s["prefixItems"], "prefixItems", s["items"], "items", min, max, name, path, depth);
    if (Array.isArray(s["items"])) return this.tuple(s["items"], "items", s["additionalItems"], "additionalItems", min, max, name, path, depth);
    const item = s["items"] === undefined ? this.anyValue() : this.visit(s["items"], `${name}-item`, `${path}/items`, depth + 1);
    return this.list(item, min, max, name);
  }

  /**
   * contains (with minContains, default 1): at least that many elements of the items' schema and
   * the contains schema, among minItems to maxItems elements of the items' schema, anywhere: a rule
   * per count of elements written and of those written as matches (each capped where more says
   * nothing new). An element written as a plain one may match too, which only adds matches, so
   * with no maxContains this is exact; a maxContains below maxItems would need elements that do not
   * match (the contains schema's complement), refused, as is contains beside a tuple or
   * uniqueItems. Undefined where contains says nothing (minContains 0, no maxContains).
   */
  private containing(s: Record<string, unknown>, min: number, max: number | undefined, besideTupleOrUnique: boolean, name: string, path: string, depth: number): string | undefined {
    const count = (k: string): number | undefined => {
      const v = s[k];
      if (v === undefined) return undefined;
      if (!Number.isInteger(v) || (v as number) < 0 || (v as number) > MAX_REPETITION) throw new GrammarError(`${path}/${k}: expected an integer from 0 to ${MAX_REPETITION}, got ${JSON.stringify(v)}`);
      return v as number;
    };
    const least = count("minContains") ?? 1, most = count("maxContains");
    if (most !== undefined && most < least) throw new GrammarError(`${path}/maxContains: ${most} is below minContains ${least}`);
    const at = `${path}/contains`;
    if (max !== undefined && least > max) throw new GrammarError(`${path}/minContains: ${least} matching elements, but maxItems is ${max}: no array has them`);
    if (most !== undefined && (max === undefined || most < max)) {
      if (besideTupleOrUnique) throw new GrammarError(`${at}: not supported beside a tuple (prefixItems, or items as a list) or uniqueItems`);
      if (!this.canRuleOut(s["contains"])) throw new GrammarError(`${path}/maxContains: not supported where contains is more than a type, a const or an enum (below maxItems it needs elements the contains schema does not match, its complement, which a grammar here does not write)`);
      return this.boundedContains(s, min, max, least, most, name, path, depth);
    }
    if (least === 0) return undefined;
    if (besideTupleOrUnique) throw new GrammarError(`${at}: not supported beside a tuple (prefixItems, or items as a list) or uniqueItems`);
    const items = s["items"];
    const plain = items === undefined ? this.anyValue() : this.visit(items, `${name}-item`, `${path}/items`, depth + 1);
    const match = this.visit(items === undefined ? s["contains"] : allOfAt([[items, `${path}/items`], [s["contains"], at]]), `${name}-match`, at, depth + 1);
    const cap = max ?? Math.max(min, least);
    const made = new Map<number, string>();
    // the rest of the array after n elements (n capped at cap), c of them matches (capped at least)
    const rest = (n: number, c: number): string => {
      const id = n * (least + 1) + c;
      const known = made.get(id);
      if (known !== undefined) return known;
      const alts: string[] = [];
      // (n > 0 here: every match is written)
      const plainMore = (from: number) => {
        const lo = Math.max(0, min - from);
        return max === from ? '""' : max === undefined && lo === 0 ? `("," space ${plain})*` : `("," space ${plain}){${lo},${max === undefined ? "" : max - from}}`;
      };
      if (c >= least || (max === undefined && n === cap)) {
        // every match written: plain elements up to the bounds; or past minItems with no maxItems:
        // plain elements repeated, then the next match (a loop, not a rule per element)
        const rule = this.add(`${name}-c${n}-${c}`, c >= least ? plainMore(n) : `("," space ${plain})* "," space ${match} ${rest(n, c + 1)}`);
        made.set(id, rule);
        return rule;
      }
      if (n >= min && c >= least) alts.push('""');
      if (max === undefined || n < max) {
        const sep = n > 0 ? `"," space ` : "";
        const next = Math.min(n + 1, cap);
        // (a plain element only where the slots left still hold the matches needed)
        if (max === undefined || max - n - 1 >= least - c) alts.push(`${sep}${plain} ${rest(next, c)}`);
        alts.push(`${sep}${match} ${rest(next, Math.min(c + 1, least))}`);
      }
      const rule = this.add(`${name}-c${n}-${c}`, alts.join(" | "));
      made.set(id, rule);
      return rule;
    };
    const body = withinStack(at, () => rest(0, 0));
    this.space();
    return this.add(name, `"[" space ${body} "]" space`);
  }

  /** whether `not` of the schema is one a grammar writes (a type, const or enum: ruledOut) */
  private canRuleOut(schema: unknown): boolean {
    try {
      this.ruledOut(schema, "#");
      return true;
    } catch (e) {
      if (e instanceof GrammarError) return false;
      throw e;
    }
  }

  /**
   * contains with a maxContains below maxItems (or no maxItems): elements that match (the items'
   * schema and contains) and elements that do not (the items' schema and not contains, which
   * canRuleOut allowed), a rule per count of elements and of matches written, so that from least
   * to most elements match: exact, as the two kinds of element do not overlap
   */
  private boundedContains(s: Record<string, unknown>, min: number, max: number | undefined, least: number, most: number, name: string, path: string, depth: number): string {
    const at = `${path}/contains`;
    const items = s["items"];
    const both = (other: Record<string, unknown>, id: string) => this.visit(items === undefined ? other : allOfAt([[items, `${path}/items`], [other, at]]), `${name}-${id}`, at, depth + 1);
    const match = both(s["contains"] as Record<string, unknown>, "match");
    let other: string;
    try {
      other = both({ not: s["contains"] }, "other");
    } catch (e) {
      if (!(e instanceof GrammarError)) throw e;
      throw new GrammarError(`${path}/maxContains: not supported here: below maxItems it needs elements contains does not match (${e.message})`);
    }
    // (with no maxItems, counts of elements past minItems, and past the first, say nothing new)
    const cap = max ?? Math.max(min, 1);
    const made = new Map<number, string>();
    const rest = (n: number, c: number): string => {
      const id = n * (most + 1) + c;
      const known = made.get(id);
      if (known !== undefined) return known;
      // named before its body is made: past the cap it refers to itself (a loop of elements)
      const rule = this.add(`${name}-k${n}-${c}`, '""');
      made.set(id, rule);
      const alts: string[] = [];
      if (n >= min && c >= least) alts.push('""');
      if (max === undefined || n < max) {
        const sep = n > 0 ? `"," space ` : "";
        const next = Math.min(n + 1, cap);
        if (max === undefined || max - n - 1 >= least - c) alts.push(`${sep}${other} ${rest(next, c)}`);
        if (c < most) alts.push(`${sep}${match} ${rest(next, c + 1)}`);
      }
      if (alts.length === 0) throw new GrammarError(`${path}/maxContains: no array of ${min} to ${max} elements has ${least} to ${most} matching ones`);
      this.rules.set(rule, alts.join(" | "));
      return rule;
    };
    const body = withinStack(at, () => rest(0, 0));
    this.space();
    return this.add(name, `"[" space ${body} "]" space`);
  }

  /**
   * uniqueItems: an array of distinct values, for items of a finite set (enum, const, boolean,
   * null): a rule per set of values written so far (values equal as JSON, as ajv compares them,
   * are one), each going on with a value not in it, in any order. Elsewhere no grammar can say
   * that no two elements are equal: refused.
   */
  private uniqueList(s: Record<string, unknown>, min: number, max: number | undefined, name: string, path: string, depth: number): string {
    const tuple = Array.isArray(s["prefixItems"]) ? { prefix: s["prefixItems"] as unknown[], key: "prefixItems", rest: s["items"], restKey: "items" }
      : Array.isArray(s["items"]) ? { prefix: s["items"] as unknown[], key: "items", rest: s["additionalItems"], restKey: "additionalItems" } : undefined;
    if (tuple) {
      const unique = this.uniqueTuple(tuple.prefix, tuple.key, tuple.rest, min, max, name, path, depth);
      if (unique !== undefined) return unique;
    }
    const values = tuple === undefined && s["prefixItems"] === undefined ? this.finiteValues(s["items"], `${path}/items`, depth + 1) : undefined;
    if (values === undefined) {
      throw new GrammarError(`${path}/uniqueItems: true is supported only for items of a finite set of values (enum, const, boolean, null, or an anyOf / oneOf of those), for a closed tuple (no elements past ${tuple ? tuple.key : "prefixItems"}) whose positions each take a finite set or take pairwise different types, or with maxItems at most 1, not beside ${tuple ? "tuple items like these" : "these items"}: ` +
        "a grammar keeps elements distinct by a rule per set of values written so far, and items of unboundedly many values (a string, a number, an object) would need infinitely many (no context-free grammar says that no two of them are equal)");
    }
    // values equal as JSON (object keys in any order) are one
    const classes = new Map<string, unknown[]>();
    for (const v of values) {
      const c = canonicalJson(v);
      classes.set(c, [...(classes.get(c) ?? []), v]);
    }
    const distinct = [...classes.values()];
    const n = distinct.length, most = Math.min(max ?? n, n);
    if (min > n) throw new GrammarError(`${path}/minItems: ${min} distinct items, but the items take only ${n} values`);
    // the subsets of up to `most` values: 2^n of them at most
    let subsets = 0;
    for (let k = 0, c = 1; k <= most; k++, c = (c * (n - k + 1)) / k) subsets += c;
    if (subsets > this.maxRules - this.rules.size) throw new GrammarError(`${path}/uniqueItems: ${n} distinct values need ${subsets} grammar rules (at most ${this.maxRules - this.rules.size} are left)`);
    this.space();
    // a value as any of its members is written (an object's keys in either order)
    const item = distinct.map((same, i) => this.add(`${name}-unique-${i}`, `(${[...new Set(same.map(jsonLiteral))].join(" | ")}) space`));
    // per set of values written so far (their indices, ascending): another value, or the end once there are min
    const made = new Map<string, string>();
    const after = (used: readonly number[]): string => {
      const key = used.join("-");
      const done = made.get(key);
      if (done !== undefined) return done;
      const alts: string[] = [];
      if (used.length < most) for (let i = 0; i < n; i++) if (!used.includes(i)) alts.push(`"," space ${item[i]} ${after([...used, i].sort((a, b) => a - b))}`);
      if (used.length >= min) alts.push(`"]" space`);
      const rule = this.add(`${name}-used-${key}`, alts.join(" | "));
      made.set(key, rule);
      return rule;
    };
    const first = most === 0 ? [] : item.map((it, i) => `${it} ${after([i])}`);
    return this.add(name, `"[" space (${[...first, ...(min === 0 ? [`"]" space`] : [])].join(" | ")})`);
  }

  /**
   * uniqueItems beside a tuple that no element passes (the rest false, or maxItems at most its
   * length), exactly, or undefined where these cannot say: positions of pairwise different JSON
   * types (their `type`, or their values' types; integer and number one type) can never hold
   * equal values, so the tuple is the plain one; positions that each take a finite set are a rule
   * per position and set of values written so far, each going on with a value not in it.
   */
  private uniqueTuple(prefix: unknown[], key: string, rest: unknown, min: number, max: number | undefined, name: string, path: string, depth: number): string | undefined {
    const count = max === undefined ? prefix.length : Math.min(prefix.length, max);
    if (rest !== false && (max === undefined || max > prefix.length)) return undefined;
    if (min > count) throw new GrammarError(`${path}/minItems: ${min} items, but no element may follow the ${prefix.length} of ${key}`);
    const types = prefix.slice(0, count).map((p) => jsonTypesOf(p));
    const typed = types.every((t) => t !== undefined) ? (types as string[][]).flat() : undefined;
    if (typed !== undefined && new Set(typed).size === typed.length) {
      return this.tuple(prefix, key, false, key === "prefixItems" ? "items" : "additionalItems", min, max, name, path, depth);
    }
    const sets = prefix.slice(0, count).map((p, i) => this.finiteValues(p, `${path}/${key}/${i}`, depth + 1));
    if (sets.some((v) => v === undefined)) return undefined;
    this.space();
    // the values of all positions, equal ones as JSON one class, each written as any of its members
    const classes = new Map<string, unknown[]>();
    for (const v of sets.flat()) classes.set(canonicalJson(v), [...(classes.get(canonicalJson(v)) ?? []), v]);
    const literal = new Map([...classes].map(([c, same]) => [c, `(${[...new Set(same.map(jsonLiteral))].join(" | ")}) space`]));
    // per position and set of values written so far: the rule, or null where no array can end from there
    const made = new Map<string, string | null>();
    const at = (k: number, used: readonly string[]): string | null => {
      const id = `${k} ${JSON.stringify(used)}`;
      const done = made.get(id);
      if (done !== undefined) return done;
      if (made.size >= this.maxRules - this.rules.size) throw new GrammarError(`${path}/uniqueItems: the tuple's distinct values need more than ${this.maxRules - this.rules.size} grammar rules`);
      const alts: string[] = [];
      if (k >= min) alts.push(`"]" space`);
      if (k < count) {
        for (const c of new Set(sets[k]!.map(canonicalJson))) {
          const next = used.includes(c) ? null : at(k + 1, [...used, c].sort());
          if (next !== null) alts.push(`${k > 0 ? `"," space ` : ""}${literal.get(c)!} ${next}`);
        }
      }
      const rule = alts.length > 0 ? this.add(`${name}-u${made.size}`, alts.join(" | ")) : null;
      made.set(id, rule);
      return rule;
    };
    const first = at(0, []);
    if (first === null) throw new GrammarError(`${path}/uniqueItems: no array of ${min} or more distinct elements fits these tuple items`);
    return this.add(name, `"[" space ${first}`);
  }

  /** the values a schema admits, where they are a finite set (enum, const, boolean, null, a $ref to one), else undefined */
  /**
   * What a `not` rules out, where a grammar can leave it out: types ({"not": {"type": ...}}) or
   * values (const, enum); `not` of any other schema would be the complement of its grammar
   */
  private ruledOut(not: unknown, at: string): { types: string[]; values: unknown[] } {
    if (!isMap(not)) throw new GrammarError(`${at}: expected a schema, got ${JSON.stringify(not)}`);
    const n = not as Record<string, unknown>;
    this.checkKeys(n, at);
    const keys = Object.keys(n).filter((k) => constrains({ [k]: n[k] }));
    if (keys.length === 1 && keys[0] === "type") return { types: [n["type"]].flat() as string[], values: [] };
    if (keys.length === 1 && keys[0] === "const") return { types: [], values: [n["const"]] };
    if (keys.length === 1 && keys[0] === "enum") return { types: [], values: n["enum"] as unknown[] };
    throw new GrammarError(`${at}: only a type, a const or an enum can be ruled out in a grammar (not of ${keys.join(", ")} would need the complement of its grammar)`);
  }

  /**
   * `not` of a string test ({pattern}, lengths, optionally type string): the strings it takes, as
   * a group string-language.ts rules out, and whether it says they are strings (type string:
   * `not` then leaves other types alone; without it, every other value passes the test, so `not`
   * rules them all out); undefined where `not` is something else
   */
  private stringTest(not: unknown, at: string): { group: StringTest[]; typed: boolean } | undefined {
    if (!isMap(not)) return undefined;
    const n = not as Record<string, unknown>;
    const keys = Object.keys(n).filter((k) => constrains({ [k]: n[k] }));
    if (keys.length === 0 || !keys.every((k) => ["type", "pattern", "minLength", "maxLength"].includes(k)) || (n["type"] !== undefined && n["type"] !== "string") || keys.every((k) => k === "type")) return undefined;
    this.checkKeys(n, at);
    const group: StringTest[] = [];
    if (n["pattern"] !== undefined) {
      if (typeof n["pattern"] !== "string") throw new GrammarError(`${at}/pattern: expected a regular expression string`);
      try {
        checkPattern(n["pattern"]);
      } catch (e) {
        throw new GrammarError(`${at}/pattern: ${(e as Error).message}`);
      }
      group.push({ pattern: n["pattern"] });
    }
    if (n["minLength"] !== undefined || n["maxLength"] !== undefined) group.push({ length: this.lengths(n, at) });
    return { group, typed: n["type"] === "string" };
  }

  /**
   * `not` of an object test (required and / or properties, optionally type object): the ways an
   * object fails it, and whether it says type object (without it every other value passes
   * required and properties, so `not` rules them all out); undefined where `not` is something
   * else. No way to fail it (required [], properties that take any value): every object passes.
   */
  private objectTest(not: unknown, at: string): { ways: ObjectWay[]; typed: boolean } | undefined {
    if (!isMap(not)) return undefined;
    const n = not as Record<string, unknown>;
    const keys = Object.keys(n).filter((k) => constrains({ [k]: n[k] }));
    if (!keys.some((k) => k === "required" || k === "properties") || !keys.every((k) => ["type", "required", "properties"].includes(k)) || (n["type"] !== undefined && n["type"] !== "object")) return undefined;
    this.checkKeys(n, at);
    const props = n["properties"] ?? {};
    if (!isMap(props)) throw new GrammarError(`${at}/properties: expected an object`);
    const ways: ObjectWay[] = ((n["required"] ?? []) as unknown[]).map((r) => ({ absent: String(r) }));
    for (const [k, v] of Object.entries(props as Record<string, unknown>)) {
      // (a property schema every value passes: no way to fail there)
      if (v === true || (isMap(v) && !constrains(v as Record<string, unknown>))) continue;
      ways.push({ present: k, refused: never(v) ? undefined : v, at: `${at}/properties/${k}` });
    }
    return { ways, typed: n["type"] === "object" };
  }

  /**
   * The objects of `rest` that fail every test of `nots` (each its ways to fail, objectTest): an
   * object schema per choice of one way from each, `rest` with a name absent (its property
   * false) or a property present (required, its value of the schema `rest` gives it and `not`
   * of the test's). A choice no object of `rest` meets (a name it requires made absent, a
   * property it takes no key for made present) is left out. Each is exact where `rest` is, so
   * their union is: an object fails the tests exactly where it meets one choice.
   */
  private objectsFailing(rest: Record<string, unknown>, nots: readonly (readonly ObjectWay[])[], name: string, path: string, at: string, depth: number): string[] {
    const choices = nots.reduce((n, ways) => n * ways.length, 1);
    if (choices * this.alternatives > MAX_ALTERNATIVES) throw new GrammarError(`${at}: the ways an object fails it (a required name absent or a property's value refused, one per test) make more than ${MAX_ALTERNATIVES} alternatives, which is not supported`);
    const props = (rest["properties"] ?? {}) as Record<string, unknown>;
    if (!isMap(props)) throw new GrammarError(`${path}/properties: expected an object`);
    const required = Array.isArray(rest["required"]) ? (rest["required"] as unknown[]).map(String) : [];
    // which keys other than the properties `rest` takes, as object() reads them: additionalProperties
    // (or unevaluatedProperties) where given, else any key only where there are no properties or patterns
    const given = rest["additionalProperties"] ?? rest["unevaluatedProperties"];
    const hasPatterns = isMap(rest["patternProperties"]) && Object.keys(rest["patternProperties"] as object).length > 0;
    const open = given === undefined && Object.keys(props).length === 0 && !hasPatterns;
    const other = given !== undefined ? (never(given) ? false : given) : open;
    const present = nots.flat().flatMap((w) => ("present" in w && !Object.hasOwn(props, w.present) ? [w.present] : []));
    const matched = new Set(hasPatterns ? this.patterns(rest, path, depth, present).flatMap(([, m]) => [...m]) : []);
    const made: string[] = [];
    const choose = (i: number, chosen: readonly ObjectWay[]): void => {
      if (i < nots.length) {
        for (const w of nots[i]!) choose(i + 1, [...chosen, w]);
        return;
      }
      const p: Record<string, unknown> = { ...props };
      const req = new Set(required);
      const absent = new Set(chosen.flatMap((w) => ("absent" in w ? [w.absent] : [])));
      for (const a of absent) {
        if (req.has(a)) return;
        p[a] = false;
      }
      for (const w of chosen) {
        if (!("present" in w)) continue;
        const k = w.present;
        if (absent.has(k)) return;
        // (the schema its key takes in rest: its property's, else a pattern's (object() adds it), else other keys')
        const own = Object.hasOwn(p, k) ? p[k] : matched.has(k) ? true : other;
        if (own === false || never(own)) return;
        const ownAt = Object.hasOwn(props, k) ? `${path}/properties/${k}` : `${path}/additionalProperties`;
        p[k] = w.refused === undefined ? own : allOfAt([[own, ownAt], [{ not: w.refused }, w.at]]);
        req.add(k);
      }
      // (a property added to an object without any keeps its other keys open, as they were)
      const schema = { ...rest, type: "object", properties: p, required: [...req], ...(open ? { additionalProperties: true } : {}) };
      const id = `${name}-${made.length}`;
      const alt = this.unlessEmpty(() => this.visit(schema, id, path, depth + 1), (e) => emptyFaults.has(e as object) || admitsNothing(e, [[schema, path]], path));
      if (alt.made !== undefined) made.push(alt.made);
    };
    choose(0, []);
    // (none: negated() says the not rules out every type beside it, where no other is left)
    return made;
  }

  /**
   * A schema with `not` (the enum beside it and never() done in visit): its types less the types
   * `not` rules out; values it rules out are left out of booleans, null, numbers (the ranges
   * between them, within the bounds), plain strings (any string but them, as other keys are any
   * string but the properties' names), strings of a pattern or length (the pattern's automaton run
   * beside theirs); `not` of a string's pattern or length leaves those strings out the same way;
   * `not` of an object's required / properties writes the objects that fail it (objectsFailing);
   * other values (arrays, objects) and `not` of any other schema (its complement) are refused
   */
  private negated(s: Record<string, unknown>, name: string, path: string, depth: number): string {
    const { not, ...rest } = s;
    const at = `${path}/not`;
    // (not of an anyOf: not of each alternative)
    const list = notsOf(not);
    const types: string[] = [], values: unknown[] = [], groups: StringTest[][] = [], objectNots: ObjectWay[][] = [];
    for (const [i, n] of list.entries()) {
      const where = list.length === 1 ? at : `${at}/anyOf/${i}`;
      const test = this.stringTest(n, where);
      if (test !== undefined) {
        groups.push(test.group);
        // (a string test without type string is passed by every other value: not rules them all out)
        if (!test.typed) types.push(...ALL_TYPES.filter((t) => t !== "string"));
        continue;
      }
      const objects = this.objectTest(n, where);
      if (objects !== undefined) {
        // (as a string test: without type object every other value passes it; one no object fails rules objects out)
        if (!objects.typed) types.push(...ALL_TYPES.filter((t) => t !== "object"));
        if (objects.ways.length === 0) types.push("object");
        else objectNots.push(objects.ways);
        continue;
      }
      const out = this.ruledOut(n, where);
      types.push(...out.types);
      values.push(...out.values);
    }
    const implied = impliedTypes(rest);
    const own = rest["type"] !== undefined ? ([rest["type"]].flat() as string[]) : implied.length > 0 ? implied : ALL_TYPES;
    const alts: string[] = [];
    for (const t of own) {
      const id = `${name}-${alts.length}`;
      if (types.includes(t) || (t === "integer" && types.includes("number"))) continue;
      if (t === "number" && types.includes("integer")) throw new GrammarError(`${at}: ruling the integers out of numbers is not supported in a grammar`);
      const out = values.filter((v) => ofType(v, t));
      if (t === "object" && objectNots.length > 0 && out.length === 0) alts.push(...this.objectsFailing(rest, objectNots, id, path, at, depth));
      else if (t === "string" && groups.length > 0) alts.push(this.string({ ...rest, type: t }, id, path, [...groups, ...(out as string[]).map((literal) => [{ literal }])], at));
      else if (out.length === 0) alts.push(this.visit({ ...rest, type: t }, id, path, depth + 1));
      else if (t === "boolean" || t === "null") {
        const left = (t === "null" ? [null] : [true, false]).filter((v) => !out.includes(v));
        if (left.length > 0) alts.push(this.visit({ type: t, enum: left }, id, path, depth + 1));
      } else if (t === "string" && !["pattern", "format", "minLength", "maxLength"].some((k) => rest[k] !== undefined) && !(out as string[]).some((w) => JSON.stringify(w).slice(1, -1).includes("\\"))) {
        this.space();
        alts.push(this.add(id, `${this.stringExcept(out as string[], id)} space`));
      } else if (t === "string") {
        // (a value JSON escapes, or beside a pattern or length: the strings' automaton less each value)
        alts.push(this.string({ ...rest, type: t }, id, path, (out as string[]).map((literal) => [{ literal }]), at));
      } else if (t === "integer" || t === "number") {
        alts.push(...this.numbersBetween(rest, t, out as number[], id, path, at, depth));
      } else {
        throw new GrammarError(`${at}: ruling ${JSON.stringify(out[0])} out of a ${t} schema is not supported in a grammar (only out of an enum, numbers, strings, booleans or null)`);
      }
    }
    if (alts.length === 0) throw new GrammarError(`${at}: rules out every type the schema beside it admits`);
    return this.add(name, alts.join(" | "));
  }

  /**
   * Numbers of `rest` (integers where `t` is integer) other than `out`: the schema once per range
   * between the values, each bounded by them (exclusively: a nonzero exclusive bound is the next
   * double inward, as number() writes it, so a text that reads as a value ruled out is never
   * written), ranges outside the bounds beside left out
   */
  private numbersBetween(rest: Record<string, unknown>, t: string, out: readonly number[], name: string, path: string, at: string, depth: number): string[] {
    const limit = t === "integer" ? Number.MAX_SAFE_INTEGER : NUMBER_BOUND_LIMIT;
    const cuts = [...new Set(out)].sort((x, y) => x - y);
    const far = cuts.find((c) => Math.abs(c) > limit);
    if (far !== undefined) throw new GrammarError(`${at}: ruling out ${far} is not supported (a bound of at most ${limit} in size)`);
    // the bounds beside: the tighter of each side's (inclusive or not)
    const [min, max, xmin, xmax] = RANGE_KEYS.map((k) => rangeBound(rest, k, path, limit));
    const lower = Math.max(min ?? -Infinity, xmin ?? -Infinity), upper = Math.min(max ?? Infinity, xmax ?? Infinity);
    const lowerOpen = xmin !== undefined && xmin >= (min ?? -Infinity), upperOpen = xmax !== undefined && xmax <= (max ?? Infinity);
    const alts: string[] = [];
    for (let i = 0; i <= cuts.length; i++) {
      const a = cuts[i - 1], b = cuts[i];
      // (nothing between the bounds beside and this range: left out)
      if ((b !== undefined && b <= lower) || (a !== undefined && a >= upper)) continue;
      const bounds: Record<string, number> = {};
      if (a !== undefined && !(a < lower || (a === lower && lowerOpen))) bounds["exclusiveMinimum"] = a;
      if (b !== undefined && !(b > upper || (b === upper && upperOpen))) bounds["exclusiveMaximum"] = b;
      // (an exclusive bound beside beats the one here where it is tighter: the tighter one kept)
      const own: Record<string, unknown> = { ...rest, type: t, ...bounds };
      if (bounds["exclusiveMinimum"] !== undefined && xmin !== undefined && xmin > a!) own["exclusiveMinimum"] = xmin;
      if (bounds["exclusiveMaximum"] !== undefined && xmax !== undefined && xmax < b!) own["exclusiveMaximum"] = xmax;
      // (an integer range with no integer in it, between two values or a value and a bound: left out)
      if (t === "integer") {
        const { lo, hi } = integerBoundsOrEmpty(own, path);
        if (lo !== undefined && hi !== undefined && lo > hi) continue;
      }
      alts.push(this.visit(own, `${name}-${alts.length}`, path, depth + 1));
    }
    if (alts.length === 0) throw new GrammarError(`${at}: rules out every ${t} the schema beside it admits`);
    return alts;
  }

  private finiteValues(schema: unknown, path: string, depth: number): unknown[] | undefined {
    if (depth > this.maxDepth || typeof schema !== "object" || schema === null || Array.isArray(schema)) return undefined;
    const s = schema as Record<string, unknown>;
    if (typeof s["$ref"] === "string" && !constrains(Object.fromEntries(Object.entries(s).filter(([k]) => k !== "$ref")))) return this.finiteValues(this.resolve(s["$ref"], path), s["$ref"], depth + 1);
    if (s["const"] !== undefined || Array.isArray(s["enum"])) {
      const values = s["const"] !== undefined ? [s["const"]] : (s["enum"] as unknown[]);
      const { const: _c, enum: _e, ...beside } = s;
      return constrains(beside) ? this.admitted(beside, values, path, depth) : values;
    }
    for (const key of ["anyOf", "oneOf"] as const) {
      const list = s[key];
      if (!Array.isArray(list)) continue;
      const parts = list.map((p, i) => this.finiteValues(p, `${path}/${key}/${i}`, depth + 1));
      if (parts.some((p) => p === undefined)) return undefined;
      // oneOf over finite sets is exact: a value in more than one alternative's set is in none
      const sets = parts.map((p) => new Set(p!.map(canonicalJson)));
      const taken = (v: unknown) => {
        const c = canonicalJson(v);
        return sets.filter((set) => set.has(c)).length;
      };
      const values = key === "anyOf" ? parts.flat() : parts.flat().filter((v) => taken(v) === 1);
      const { [key]: _, ...beside } = s;
      return constrains(beside) ? this.admitted(beside, values, path, depth) : values;
    }
    const rest = Object.keys(s).filter((k) => k !== "type" && constrains({ [k]: s[k] }));
    if (rest.length > 0 || s["nullable"] === true) return undefined;
    const types = Array.isArray(s["type"]) ? s["type"] : [s["type"]];
    if (types.length === 0 || !types.every((t) => t === "boolean" || t === "null")) return undefined;
    return types.flatMap((t) => (t === "boolean" ? [true, false] : [null]));
  }

  /** an array of `item`s, from min to max of them */
  private list(item: string, min: number, max: number | undefined, name: string): string {
    if (max === 0) return this.add(name, `"[" space "]" space`);
    const more = `("," space ${item}){${Math.max(0, min - 1)},${max === undefined ? "" : max - 1}}`;
    const list = `${item} ${more}`;
    return this.add(name, `"[" space ${min === 0 ? `(${list})?` : list} "]" space`);
  }

  /**
   * An array whose first elements each have their own schema, then (where `rest` allows) more of
   * one schema: between minItems and maxItems elements in all, each position after the
   * minItems-th optional, in order
   */
  private tuple(prefix: unknown[], prefixKey: string, rest: unknown, restKey: string, min: number, max: number | undefined, name: string, path: string, depth: number): string {
    const closed = rest === false;
    if (closed && min > prefix.length) throw new GrammarError(`${path}/minItems: ${min} items, but ${restKey} is false after ${prefix.length}`);
    const count = max === undefined ? prefix.length : Math.min(prefix.length, max);
    const extra = closed || (max !== undefined && max <= count) ? undefined : rest === undefined || rest === true ? this.anyValue() : this.visit(rest, `${name}-rest`, `${path}/${restKey}`, depth + 1);
    // no positions of their own: a plain list of the rest (or nothing)
    if (count === 0) return extra === undefined ? this.add(name, `"[" space "]" space`) : this.list(extra, min, max, name);
    const items = prefix.slice(0, count).map((p, i) => this.visit(p, `${name}-${i}`, `${path}/${prefixKey}/${i}`, depth + 1));
    const more = extra === undefined ? "" : `("," space ${extra}){${Math.max(0, min - count)},${max === undefined ? "" : max - count}}`;
    // from the last position back: position k is "," then its element then what follows; the first has no comma
    let after = more;
    for (let k = count - 1; k >= 1; k--) {
      const seq = `"," space ${items[k]}${after ? ` ${after}` : ""}`;
      after = k < min ? seq : `(${seq})?`;
    }
    const first = `${items[0]}${after ? ` ${after}` : ""}`;
    return this.add(name, `"[" space ${min >= 1 ? first : `(${first})?`} "]" space`);
  }

  private object(s: Record<string, unknown>, name: string, path: string, depth: number): string {
    const keyNames = propertyNamesOf(s, path);
    const given = (s["properties"] ?? {}) as Record<string, unknown>;
    if (typeof given !== "object" || Array.isArray(given)) throw new GrammarError(`${path}/properties: expected an object`);
    // a property of a schema no value satisfies ({"not": {}}) is one of schema false: not present
    const written = Object.fromEntries(Object.entries(given).map(([k, v]) => [k, never(v) ? false : v]));
    const required = new Set(Array.isArray(s["required"]) ? (s["required"] as unknown[]).map(String) : []);
    // a pattern of finitely many keys: each an optional property of the schemas of the patterns that
    // match it, written once, so that it is never repeated (the key counted once, its value the
    // last) and minProperties / maxProperties count it
    const finite = new Map<string, string[]>();
    let enumerated = 0;
    for (const p of Object.keys(isMap(s["patternProperties"]) ? (s["patternProperties"] as object) : {})) {
      const names = finiteStrings(p, MAX_NAMED_KEYS - enumerated);
      if (names === undefined) continue;
      finite.set(p, names);
      enumerated += names.length;
    }
    const finiteKeys = [...new Set([...finite.values()].flat())].filter((k) => !Object.hasOwn(written, k));
    const patterns = this.patterns(s, path, depth, [...new Set([...Object.keys(written), ...required, ...finiteKeys])]);
    // an object without properties takes other keys unless additionalProperties says not (one with
    // them, or with patternProperties, does not)
    // (with no allOf / anyOf / $ref beside, which reach here merged, the keys unevaluatedProperties
    // applies to are those additionalProperties would: where that is given, none)
    const given2 = s["additionalProperties"] ?? s["unevaluatedProperties"];
    const additional = given2 !== undefined && never(given2) ? false : given2 ?? (Object.keys(written).length === 0 && patterns.length === 0 ? true : undefined);
    const keyAt = new Map(Object.keys(written).map((k) => [k, `${path}/properties/${k}`]));
    const props: Record<string, unknown> = { ...written };
    // a property a pattern matches takes the pattern's schema too (its key is left out of the pattern's keys: patternKv)
    for (const [k, v] of Object.entries(written)) {
      const also = patterns.filter(([, matches]) => matches.has(k)).map(([, , schema, at]): [unknown, string] => [schema, at]);
      if (also.length > 0 && v !== false) props[k] = allOfAt([[v, keyAt.get(k)!], ...also]);
    }
    for (const k of finiteKeys) {
      const also = patterns.filter(([, matches]) => matches.has(k)).map(([, , schema, at]): [unknown, string] => [schema, at]);
      props[k] = also.length === 1 ? also[0]![0] : allOfAt(also);
      keyAt.set(k, also[0]![1]);
    }
    // a required name that is no property is another key, of its patterns' schemas or else
    // additionalProperties' (any value where it says nothing): written after the properties, as ajv takes it
    const ofPatterns: string[] = [];
    for (const r of required) {
      if (Object.hasOwn(props, r)) continue;
      const also = patterns.filter(([, matches]) => matches.has(r)).map(([, , schema, at]): [unknown, string] => [schema, at]);
      if (also.length > 0) {
        props[r] = also.length === 1 ? also[0]![0] : allOfAt(also);
        keyAt.set(r, also[0]![1]);
        ofPatterns.push(r);
        continue;
      }
      if (additional === false) throw new GrammarError(`${path}/required: "${r}" is not among the properties, and additionalProperties is false: no object has it`);
      props[r] = additional ?? true;
      keyAt.set(r, `${path}/additionalProperties`);
    }
    // what other keys are: additionalProperties' (undefined or false: none)
    let other = additional;
    if (keyNames !== undefined) {
      // the names propertyNames refuses may not be present; with finitely many names, each no
      // property has is an optional property of additionalProperties' schema; else the other keys
      // are its strings, which must then hold no property's name (it could be written twice)
      if (patterns.length > 0) throw new GrammarError(`${path}/propertyNames: not supported beside patternProperties`);
      const admitted = new Set(keyNames === false ? [] : this.admitted(keyNames, Object.keys(props), `${path}/propertyNames`, depth));
      for (const k of Object.keys(props)) {
        if (admitted.has(k)) continue;
        if (required.has(k)) throw new GrammarError(`${path}/propertyNames: the required name "${k}" is not one it admits: no object has it`);
        props[k] = false;
      }
      const names = keyNames === false ? [] : this.finiteNames(keyNames, `${path}/propertyNames`, depth);
      if (other !== undefined && other !== false && names !== undefined) {
        for (const k of names) {
          if (typeof k !== "string" || Object.hasOwn(props, k)) continue;
          props[k] = other;
          keyAt.set(k, `${path}/additionalProperties`);
        }
        other = false;
      } else if (other !== undefined && other !== false && admitted.size > 0) {
        throw new GrammarError(`${path}/propertyNames: admits the property name "${[...admitted][0]}", which another key of its strings could repeat (its value escaping the property's schema): not supported beside properties it admits, unless it is a finite set of names (enum, const, or a pattern of at most ${MAX_NAMED_KEYS} strings)`);
      }
    }
    // a property whose schema is false may not be present: not written (nor taken as another key)
    for (const r of required) if (props[r] === false) throw new GrammarError(`${path}/properties/${r}: false admits no value, but "${r}" is required`);
    const named = Object.keys(props);
    const keys: string[] = [], kv: string[] = [];
    for (const k of named) {
      if (props[k] === false) continue;
      // an optional property whose schema admits no value (then false, an enum a bound rules out) may not be present
      const at = keyAt.get(k)!;
      const value = this.unlessEmpty(() => this.visit(props[k], `${name}-${keys.length}`, at, depth + 1), (e) => !required.has(k) && emptyAt(e, [at]));
      if (value.made === undefined) {
        props[k] = false;
        continue;
      }
      kv.push(this.add(`${name}-${k.replace(/[^A-Za-z0-9-]/g, "-")}-kv`, `${gbnfLiteral(JSON.stringify(k))} space ":" space ${value.made}`));
      keys.push(k);
    }
    // other keys: those of the patterns, or additionalProperties true or a schema
    // (a required key of the patterns' schema written again as a pattern's key is still valid, but not where keys are counted)
    const apart = s["minProperties"] === undefined ? named.filter((k) => !ofPatterns.includes(k)) : named;
    const open = patterns.filter(([p]) => !finite.has(p));
    const extra = open.length > 0 ? this.patternKv(open, apart, additional, name, path, depth)
      : other === undefined || other === false ? undefined
      : keyNames !== undefined && keyNames !== false ? this.namesKv(keyNames, other, name, path, depth)
      : this.additionalKv(named, other, name, path, depth);
    if (s["dependentRequired"] !== undefined) return this.dependent(s["dependentRequired"], propertyCounts(s, path), keys, kv, required, extra, name, path);
    if (s["minProperties"] !== undefined || s["maxProperties"] !== undefined) return this.counted(s, keys, kv, required, extra, other, name, path);
    if (named.length === 0 && patterns.length === 0 && keyNames === undefined) {
      // no properties: any object, or (additionalProperties a schema) any keys with values of it
      if (additional === false) return this.add(name, `"{" space "}" space`);
      if (additional === undefined || additional === true) {
        this.anyValue();
        return this.add(name, `"{" space (string ":" space value ("," space string ":" space value)*)? "}" space`);
      }
      const v = this.visit(additional, `${name}-value`, `${path}/additionalProperties`, depth + 1);
      this.primitive("string");
      return this.add(name, `"{" space (string ":" space ${v} ("," space string ":" space ${v})*)? "}" space`);
    }
    // required properties in order, each optional one where it stands: a chain whose commas
    // come before every property but the first one present
    const tail = (i: number): string => keys.slice(i).map((k, j) => (required.has(k) ? `"," space ${kv[i + j]}` : `("," space ${kv[i + j]})?`)).join(" ");
    const firstRequired = keys.findIndex((k) => required.has(k));
    // other keys: any number of them after the named ones
    const more = extra === undefined ? "" : ` ("," space ${extra})*`;
    let body: string;
    if (firstRequired >= 0) {
      // optional ones before the first required: each followed by a comma
      const lead = keys.slice(0, firstRequired).map((_, i) => `(${kv[i]} "," space)?`).join(" ");
      body = `${lead ? `${lead} ` : ""}${kv[firstRequired]}${tail(firstRequired + 1) ? ` ${tail(firstRequired + 1)}` : ""}${more}`;
    } else {
      // all optional: none, or a first one then any of the later ones (then other keys), or only other keys
      const starts = keys.map((_, i) => `${kv[i]}${tail(i + 1) ? ` ${tail(i + 1)}` : ""}${more}`);
      if (extra !== undefined) starts.push(`${extra}${more}`);
      body = starts.length === 0 ? "" : `(${starts.join(" | ")})?`;
    }
    return this.add(name, `"{" space ${body} "}" space`);
  }

  /**
   * An object with minProperties / maxProperties: its keys in the order object() writes them (the
   * properties in the schema's order, then other keys), a rule per place in that list and count of
   * keys written so far (up to maxProperties, or up to minProperties where there is no maximum: past
   * it every count is the same), so that exactly the objects of min to max keys are written. Other
   * keys (additionalProperties) are any strings but the named ones, which no grammar can keep apart
   * from each other (`{"x": 1, "x": 2}` is one key to a validator): where the count needs two or
   * more of them the grammar leads to the named properties instead, and where no object is left
   * that way it is refused.
   */
  private counted(s: Record<string, unknown>, keys: readonly string[], kv: readonly string[], required: ReadonlySet<string>, extra: string | undefined, additional: unknown, name: string, path: string): string {
    const { min, max } = propertyCounts(s, path);
    const cap = countCap(min, max, keys.length);
    // per (place, keys so far): the rule's name, or null where no object of min to max keys ends from there
    const made = new Map<number, string | null>();
    const rest = (i: number, c: number): string | null => {
      const id = i * (cap + 1) + Math.min(c, cap);
      if (made.has(id)) return made.get(id)!;
      const comma = c > 0 ? `"," space ` : "";
      const alts: string[] = [];
      if (i === keys.length) alts.push(...otherKeys(c, min, max, extra));
      else {
        if (max === undefined || c < max) {
          const then = rest(i + 1, c + 1);
          if (then !== null) alts.push(`${comma}${kv[i]} ${then}`);
        }
        if (!required.has(keys[i]!)) {
          const skip = rest(i + 1, c);
          if (skip !== null) alts.push(skip);
        }
      }
      const rule = alts.length === 0 ? null : this.add(`${name}-n${i}-${Math.min(c, cap)}`, alts.join(" | "));
      made.set(id, rule);
      return rule;
    };
    const body = withinStack(`${path}/${s["maxProperties"] !== undefined ? "maxProperties" : "minProperties"}`, () => rest(0, 0));
    if (body === null) {
      const reason = extra !== undefined
        ? `the ${keys.length} named properties and one other key: two other keys must differ (a key written twice is one property to a validator), and no grammar keeps keys of any string apart; name the keys in properties, give propertyNames an enum of them or a pattern of at most ${MAX_NAMED_KEYS} strings, or lower minProperties to ${keys.length + 1}`
        : `these properties and no other key (additionalProperties ${additional === false ? "false" : "unset, which beside properties takes none here"})`;
      const tooMany = max !== undefined && keys.filter((k) => required.has(k)).length > max;
      throw new GrammarError(`${path}/${tooMany ? "maxProperties" : "minProperties"}: no object of ${max === undefined ? `at least ${min}` : min === max ? `${min}` : min === 0 ? `at most ${max}` : `${min} to ${max}`} keys can be written with ${reason}`);
    }
    return this.add(name, `"{" space ${body} "}" space`);
  }

  /**
   * dependentRequired ({a: ["b"]}: where a is present, so is b), over the properties written in
   * order: a rule per place in the key list, the later keys that are now required (by a key
   * written before them) and those now ruled out (they need a key passed over), and whether a key
   * was written (for the commas). Names that are no property: a dependent one, where no other key
   * may be written, rules its key out; otherwise (another key could be it) refused.
   */
  private dependent(deps: unknown, counts: { min: number; max: number | undefined }, keys: readonly string[], kv: readonly string[], required: ReadonlySet<string>, extra: string | undefined, name: string, path: string): string {
    const at = `${path}/dependentRequired`;
    if (!isMap(deps)) throw new GrammarError(`${at}: expected an object of property names to lists of names, got ${JSON.stringify(deps)}`);
    const needs = new Map<string, string[]>();
    for (const [k, list] of Object.entries(deps as Record<string, unknown>)) {
      if (!Array.isArray(list) || !list.every((x) => typeof x === "string")) throw new GrammarError(`${at}/${k}: expected a list of property names, got ${JSON.stringify(list)}`);
      const known = keys.includes(k);
      if (!known && extra === undefined) continue; // (its key is never written)
      const missing = [k, ...list].find((x) => !keys.includes(x));
      if (missing !== undefined && extra !== undefined) throw new GrammarError(`${at}/${k}: "${missing}" is no property here, and other keys may be written (it could be one): not supported`);
      needs.set(k, list as string[]);
    }
    // a key whose needs include a name that is never written is never written itself
    const never = new Set([...needs].filter(([, list]) => list.some((x) => !keys.includes(x))).map(([k]) => k));
    for (const k of never) if (required.has(k)) throw new GrammarError(`${at}/${k}: "${k}" is required, but needs ${JSON.stringify(needs.get(k)!.find((x) => !keys.includes(x)))}, which no object here has`);
    // (each key's place, and the keys that need it: looked up per state, not searched)
    const place = new Map(keys.map((k, i) => [k, i]));
    const neededBy = new Map<string, string[]>();
    for (const [d, list] of needs) for (const x of list) neededBy.set(x, [...(neededBy.get(x) ?? []), d]);
    // (with minProperties / maxProperties, also the count of keys written so far, as counted() keeps it)
    const { min, max } = counts, cap = countCap(min, max, keys.length);
    const made = new Map<string, string | null>();
    const rest = (i: number, must: ReadonlySet<string>, banned: ReadonlySet<string>, c: number): string | null => {
      const id = `${i}|${[...must].sort().join(",")}|${[...banned].sort().join(",")}|${Math.min(c, cap)}`;
      if (made.has(id)) return made.get(id)!;
      const alts: string[] = [];
      if (i === keys.length) alts.push(...otherKeys(c, min, max, extra));
      else {
        const k = keys[i]!, later = { has: (x: string) => (place.get(x) ?? -1) > i };
        if (!banned.has(k) && !never.has(k) && (max === undefined || c < max)) {
          // written: the later keys it needs are required
          const then = rest(i + 1, new Set([...must, ...(needs.get(k) ?? []).filter((x) => later.has(x))]), banned, c + 1);
          if (then !== null) alts.push(`${c > 0 ? `"," space ` : ""}${kv[i]} ${then}`);
        }
        if (!must.has(k) && !required.has(k)) {
          // passed over: the later keys that need it are ruled out
          const nowBanned = new Set([...banned, ...(neededBy.get(k) ?? []).filter((d) => later.has(d))]);
          const skip = rest(i + 1, must, nowBanned, c);
          if (skip !== null) alts.push(skip);
        }
      }
      const rule = alts.length === 0 ? null : this.add(`${name}-d${made.size}`, alts.join(" | "));
      made.set(id, rule);
      return rule;
    };
    const body = withinStack(at, () => rest(0, new Set(), new Set(), 0));
    const counted = min > 0 || max !== undefined;
    if (body === null) throw new GrammarError(`${at}: no object satisfies it beside required${counted ? ` and ${max === undefined ? `minProperties ${min}` : min === 0 ? `maxProperties ${max}` : `minProperties ${min} and maxProperties ${max}`}` : ""}`);
    return this.add(name, `"{" space ${body} "}" space`);
  }

  /**
   * The names a propertyNames schema admits where they are finitely many: an enum or a const, or
   * the strings of a pattern of at most MAX_NAMED_KEYS of them (less those the keywords beside refuse)
   */
  private finiteNames(keyNames: Record<string, unknown>, path: string, depth: number): unknown[] | undefined {
    const listed = this.finiteValues(keyNames, path, depth);
    if (listed !== undefined) return listed;
    const pattern = keyNames["pattern"], type = keyNames["type"];
    if (typeof pattern !== "string" || (type !== undefined && type !== "string")) return undefined;
    const strings = finiteStrings(pattern, MAX_NAMED_KEYS);
    return strings === undefined ? undefined : this.admitted(keyNames, strings, path, depth);
  }

  /** `"key": value` for other keys of an object whose propertyNames says what they are: its strings, values of additionalProperties' schema */
  private namesKv(keyNames: Record<string, unknown>, additional: unknown, name: string, path: string, depth: number): string {
    const at = `${path}/propertyNames`;
    const key = this.visit(allOfAt([[{ type: "string" }, at], [keyNames, at]]), `${name}-key`, at, depth + 1);
    const value = additional === true ? this.anyValue() : this.visit(additional, `${name}-additional-value`, `${path}/additionalProperties`, depth + 1);
    return this.add(`${name}-names-kv`, `${key} ":" space ${value}`);
  }

  /**
   * An object schema's patternProperties: each pattern (one ajv compiles: the u flag), which of
   * `names` it matches, its schema and schema path. The names are matched by the pattern's grammar,
   * not by a RegExp, which a request's pattern could make backtrack for ever.
   */
  private patterns(s: Record<string, unknown>, path: string, depth: number, names: readonly string[]): [string, ReadonlySet<string>, unknown, string][] {
    const map = (s["patternProperties"] ?? {}) as Record<string, unknown>;
    return Object.entries(map).map(([p, schema]) => {
      const at = `${path}/patternProperties/${p}`;
      try {
        // (compiled, never run)
        new RegExp(p, "u");
      } catch (e) {
        throw new GrammarError(`${at}: not a regular expression JavaScript's RegExp reads with the u flag, as ajv compiles it: ${(e as Error).message}`);
      }
      try {
        checkPattern(p);
      } catch (e) {
        throw new GrammarError(`${at}: ${(e as Error).message}`);
      }
      return [p, new Set(this.admitted({ type: "string", pattern: p }, names, at, depth) as string[]), schema, at];
    });
  }

  /**
   * `"key": value` for a key of patternProperties: the key one of the patterns' strings (as a
   * schema's pattern is read), the value of its schema; none of `named` (the named properties: such
   * a key would be written twice, its value escaping the property's schema). Patterns of one schema
   * are one union. Patterns of different schemas: a key takes the schema of every pattern it
   * matches, so the keys are split by which of them they match (each such set its own keys, those
   * matching its patterns and none of the others', string-language.ts; the value every schema of
   * the set), at most MAX_PATTERN_SCHEMAS different schemas. additionalProperties true or a schema:
   * the keys no pattern matches, its values. Where it is unset the object takes no other keys (as
   * beside properties).
   */
  private patternKv(patterns: readonly [string, ReadonlySet<string>, unknown, string][], named: readonly string[], additional: unknown, name: string, path: string, depth: number): string {
    // the patterns grouped by their schema: [the patterns (one union), names they match, schema, schema path]
    const groups: [string[], Set<string>, unknown, string][] = [];
    for (const [p, matches, schema, at] of patterns) {
      const g = groups.find(([, , other]) => canonicalJson(other) === canonicalJson(schema));
      if (g === undefined) groups.push([[p], new Set(matches), schema, at]);
      else {
        g[0].push(p);
        for (const m of matches) g[1].add(m);
      }
    }
    const others = additional !== undefined && additional !== false;
    if (groups.length === 1 && !others) {
      // a pattern that matches a named property: its keys less those names
      const keys = patterns.map(([p, matches, , pAt], i) => {
        const clash = named.filter((k) => matches.has(k));
        if (clash.length === 0) return this.patternText(p, 0, undefined, `${name}-pattern-${i}`, pAt);
        return this.stringInside({ pattern: p }, clash.map((literal) => [{ literal }]), `${name}-pattern-${i}`, pAt, pAt);
      });
      this.space();
      const value = this.visit(groups[0]![2], `${name}-pattern-value`, groups[0]![3], depth + 1);
      return this.add(`${name}-pattern-kv`, `"\\"" (${keys.join(" | ")}) "\\"" space ":" space ${value}`);
    }
    if (groups.length > MAX_PATTERN_SCHEMAS) throw new GrammarError(`${groups[MAX_PATTERN_SCHEMAS]![3]}: patterns of more than ${MAX_PATTERN_SCHEMAS} different schemas are not supported (a key takes the schema of every pattern it matches: each set of them is written apart)`);
    const union = (g: (typeof groups)[number]): StringTest => ({ pattern: g[0].join("|") });
    const kvs: string[] = [];
    // each non-empty set of groups (a bit per group), then (bits 0) the keys no pattern matches
    for (let bits = (1 << groups.length) - 1; bits >= (others ? 0 : 1); bits--) {
      const inSet = groups.filter((_, i) => bits & (1 << i)), outSet = groups.filter((_, i) => !(bits & (1 << i)));
      const at = inSet[0]?.[3] ?? `${path}/additionalProperties`;
      // (the named properties among these keys: left out of them)
      const clash = named.filter((k) => inSet.every((g) => g[1].has(k)) && outSet.every((g) => !g[1].has(k)));
      const id = `${name}-pattern-set${bits}`;
      const made = this.unlessEmpty(
        () => this.stringInside({}, [...outSet.map((g) => [union(g)]), ...clash.map((literal) => [{ literal }])], id, at, at, inSet.map(union)),
        (e) => e instanceof GrammarError && e.message.includes(": no string satisfies all of them"),
      );
      // (no key matches exactly these patterns: none written)
      if (made.made === undefined) continue;
      this.space();
      const value = inSet.length === 0 ? (additional === true ? this.anyValue() : this.visit(additional, `${name}-additional-value`, `${path}/additionalProperties`, depth + 1))
        : this.visit(inSet.length === 1 ? inSet[0]![2] : allOfAt(inSet.map((g): Part => [g[2], g[3]])), `${id}-value`, at, depth + 1);
      kvs.push(`"\\"" ${made.made} "\\"" space ":" space ${value}`);
    }
    if (kvs.length === 0) throw new GrammarError(`${path}/patternProperties: no key is left to write (each pattern's keys are named properties)`);
    return this.add(`${name}-pattern-kv`, kvs.join(" | "));
  }

  /**
   * `"key": value` for a key that is none of the named properties (so no property can be written
   * twice, its value escaping the property's schema), the value of the additionalProperties schema.
   * The keys are told apart as written, character by character along a trie of the names.
   */
  private additionalKv(names: readonly string[], additional: unknown, name: string, path: string, depth: number): string {
    const value = additional === true ? this.anyValue() : this.visit(additional, `${name}-additional-value`, `${path}/additionalProperties`, depth + 1);
    this.primitive("string");
    const escaped = names.find((k) => JSON.stringify(k).slice(1, -1).includes("\\"));
    if (escaped !== undefined) throw new GrammarError(`${path}/additionalProperties: not supported beside a property whose name JSON escapes (${JSON.stringify(escaped)})`);
    const key = names.length === 0 ? "string" : `${this.stringExcept(names, name)} space`;
    return this.add(`${name}-additional-kv`, `${key} ":" space ${value}`);
  }

  /**
   * A JSON string other than `names` (none of which JSON escapes), as a GBNF expression: a trie
   * of the names, left at every place where the text is none of them
   */
  private stringExcept(names: readonly string[], name: string): string {
    this.primitive("string");
    const written = names.map((k) => JSON.stringify(k).slice(1, -1));
    interface Node { end: boolean; next: Map<string, Node> }
    const trie: Node = { end: false, next: new Map() };
    for (const w of written) {
      let n = trie;
      for (const c of w) {
        if (!n.next.has(c)) n.next.set(c, { end: false, next: new Map() });
        n = n.next.get(c)!;
      }
      n.end = true;
    }
    // per trie node: the rest of a key that, after the node's prefix, is not a name. Where the trie
    // goes on, an escape may not spell a character it goes on with ("\u0061" is "a": the key would be
    // a name, written twice, its value escaping the property's schema); there a \u escape is of a
    // BMP character the trie does not go on with
    let count = 0;
    // a name's character as JSON may write it: raw, as \u escapes (either case; a pair beyond the BMP), "/" as "\/"
    const spellings = (c: string): string => {
      const units = Array.from({ length: c.length }, (_, k) => c.charCodeAt(k));
      const hex = units.map((u) => `"\\\\u" ${[...u.toString(16).padStart(4, "0")].map((d) => (/[a-f]/.test(d) ? `[${d}${d.toUpperCase()}]` : `"${d}"`)).join(" ")}`).join(" ");
      return [gbnfLiteral(c), hex, ...(c === "/" ? ['"\\\\/"'] : [])].join(" | ");
    };
    const other = (n: Node): string => {
      const id = `${name}-other-key-${count++}`;
      const outside = [...n.next.keys()].map((c) => (c === "]" || c === "^" || c === "-" ? `\\${c}` : c)).join("");
      // (an escaped surrogate pair spells a character beyond the BMP: any, where the trie goes on with none)
      const pair = [...n.next.keys()].some((c) => c.codePointAt(0)! > 0xffff) ? "" : ` | "u" [dD] [89abAB] [0-9a-fA-F]{2} "\\\\u" [dD] [c-fC-F] [0-9a-fA-F]{2}`;
      const escapes = n.next.size === 0 ? ESCAPE : `[\\\\] (["\\\\${n.next.has("/") ? "" : "/"}bfnrt] | "u" (${hexExcept([...n.next.keys()].map((c) => c.codePointAt(0)!))})${pair})`;
      const alts = [`[^"\\\\\\x00-\\x1F${outside}] char*`, `${escapes} char*`];
      for (const [c, child] of n.next) alts.push(`(${spellings(c)}) ${other(child)}`);
      if (!n.end) alts.push(`""`);
      return this.add(id, alts.join(" | "));
    };
    return `"\\"" ${other(trie)} "\\""`;
  }
}
