// The JSON Schema fuzzer's cases and checks (scripts/fuzz-json-schema.ts runs them; the test suite
// runs a short seeded stretch): random schemas over the keywords tsllm claims, each compiled to
// its grammar and checked two ways, with ajv (draft 2020-12) as the judge.
//  - soundness: random walks of the recognizer, character by character, to a complete sentence;
//    each must parse as JSON and validate.
//  - completeness: random instances of the schema (inside what tsllm claims: properties in the
//    schema's order, no others unless additionalProperties says so) that ajv validates must be
//    accepted, written as JSON.stringify writes them and with the whitespace llama.cpp's grammar
//    allows (none, one space, or one or two newlines and up to 20 spaces or tabs, after every token but
//    before the first), and with strings' characters written as \u escapes.
//  - known differences, on purpose and documented (docs/structured-output.md), are counted apart
//    from findings (CaseResult.known), each only where the same instance without it is accepted:
//    "exponent": a bounded number is written without an exponent (1e-7 as 0.0000001), so the
//    instance as JSON.stringify writes it (1e-7) is refused; "extra key": an object whose schema
//    leaves additionalProperties unset (an allOf of such objects merged too) takes no key beyond
//    its properties, or its patternProperties' keys (as llama.cpp's converter reads it), so the instance with a key "zx" more,
//    which ajv validates, is refused; an instance ajv validates only through such an object's
//    other keys (through another anyOf alternative: closedSchema) counts so too. "format beside
//    pattern": a format beside a pattern (an allOf's parts merged) is left to the pattern (as zod
//    writes the format's own expression there: README), so a walk's string the format's own grammar
//    refuses is no finding. "lone surrogate": a string's own characters (not an enum's or const's,
//    which are written as JSON.stringify writes them) are Unicode text, without lone surrogates
//    (docs/structured-output.md), so an instance ajv validates with one there (an enum value
//    another alternative's free string takes) is refused, where the same instance with an "x" for
//    it is taken. A run's findings are then only real disagreements.
import { Ajv2020 } from "ajv/dist/2020.js";
import addFormatsModule from "ajv-formats";
import { GrammarError, GrammarMatcher, jsonSchemaToGbnf, parseGbnf, type Grammar, type JsonSchema } from "../src/sampling/constraints/index.js";
import type { Stack } from "../src/sampling/constraints/matcher.js";
import type { Rng } from "../src/testing/rng.js";

// ajv-formats is CommonJS: under Node's ESM its plugin is the module's default export's default
const addFormats = addFormatsModule.default;

type Schema = Record<string, unknown>;

const pick = <T>(rng: Rng, xs: readonly T[]): T => xs[Math.floor(rng.uniform() * xs.length)]!;
const int = (rng: Rng, lo: number, hi: number): number => lo + Math.floor(rng.uniform() * (hi - lo + 1));
const chance = (rng: Rng, p: number): boolean => rng.uniform() < p;
/** the key "then" (a literal one reads to the linter as a thenable object) */
const THEN = "then";

/** strings worth trying: control characters, quotes, escapes, non-ASCII, astral characters */
const STRING_PIECES = ["", "a", "Z", "abc", "0", " ", "\u0000", "\u001f", "\n", "\t", '"', "\\", "/", "\u007f", "é", "日本", "😀", "\uD83D\uDE00x", "x y", "cat", "dog", "123-4567"];
const PATTERNS = ["^[a-z]+$", "^\\d{3}-\\d{4}$", "ab", "^x", "y$", "^(cat|dog)$", "^[A-Z][a-z]{0,5}$", "^.{2,4}$", "é+", "^[^a]*$", "^\\w+$", "^(a|b)*c$", "^[\\w.-]+@[a-z]+\\.[a-z]{2,3}$", "^[0-9a-fA-F]{2,4}$", "^\\S+$", "\\d", "^[^\\s\"]{1,3}$", "^(?:[a-z]|\\d)+$", "^[a-zé]+$", "^\\d+(\\.\\d{1,2})?$", "^\\p{Lu}\\p{Ll}*$", "^[\\p{L}\\p{N}]+$", "^\\P{L}{1,3}$", "\\p{Script=Han}"];
const PATTERN_SAMPLES = ["abc", "123-4567", "xab", "ab", "x", "xy", "y", "cat", "dog", "Abc", "Q", "é", "éé", "日本", "😀😀", "zz", "bbc", "abac", "c", "q_1", "hello", "", "a\nb", "a.b@cd.com", "x-1@q.io", "ff", "0aF", "a b", "x1", "É", "3.14", "42", "é1", "Élan", "Ωμέγα", "٣!", "€ ½"];
const FORMATS = ["date", "time", "date-time", "uuid", "email", "ipv4", "ipv6", "hostname", "duration", "uri"];
const FORMAT_SAMPLES: Record<string, string[]> = {
  date: ["2024-02-29", "1999-12-31", "0000-01-01", "2023-11-30"],
  time: ["00:00:00Z", "23:59:59.123+05:30", "12:30:00-08:00"],
  "date-time": ["2024-01-15T10:20:30Z", "1970-01-01T00:00:00.000+00:00"],
  uuid: ["123e4567-e89b-12d3-a456-426614174000", "ABCDEF01-2345-6789-ABCD-EF0123456789"],
  email: ["a@b.co", "x.y@example.com", "o'hara+tag@mail-1.example.org", "A/B=c@x--y.Z9"],
  ipv4: ["0.0.0.0", "255.255.255.255", "192.168.1.10", "10.0.250.99"],
  ipv6: ["::", "::1", "2001:DB8::8a2e:370:7334", "::ffff:192.0.2.1", "fe80::1:2:3:4:5:6", "1:2:3:4:5:6:7:8", "1:2:3:4:5:6:1.2.3.4"],
  hostname: ["localhost", "example.com.", "a-b.c-d.e", "x".repeat(30) + ".y", "A1.b2.c3.d4.e5.f6.g7.h8"],
  duration: ["P1Y", "PT0S", "P3Y6M4DT12H30M5S", "P2W", "P1DT2M", "PT36H"],
  uri: ["https://example.com/a?b#c", "urn:isbn:0451450523"],
};

/**
 * How many array elements' schemas the one being made lies in: ajv 8.17 validates [[1], []] against
 * {items: {contains: {const: 1}}} (and a contains deeper in an element's schema so), a wrong judge
 * for contains there; test/constraints.test.ts judges contains on its own
 */
let inElements = 0;

/** `make()` for a schema of array elements (no contains within it) */
function elementSchema<T>(make: () => T): T {
  inElements++;
  try {
    return make();
  } finally {
    inElements--;
  }
}

/** keys a patternProperties pattern takes (none of them a property name randomSchema writes) */
const KEY_PATTERNS: Record<string, string[]> = { "^x[0-9]$": ["x1", "x7"], "^q": ["q", "qq", "q é"], "^[A-Z]+$": ["AB", "Z"] };

/** a random schema over the keywords tsllm claims; `defs` collects $defs (the root gets them) */
export function randomSchema(rng: Rng, depth = 0, defs: Record<string, Schema> = {}): Schema {
  const leaf = depth >= 3;
  const kind = pick(rng, leaf ? ["string", "integer", "number", "boolean", "null", "enum", "const", "union"] : ["string", "integer", "number", "boolean", "enum", "const", "object", "object", "array", "array", "tuple", "anyOf", "oneOf", "allOf", "ref", "union", "nullable", "not", "if", "dependentSchemas"]);
  const s = ((): Schema => {
    switch (kind) {
      case "string": {
        const s: Schema = { type: "string" };
        const r = rng.uniform();
        if (r < 0.25) {
          s["pattern"] = pick(rng, PATTERNS);
          // a length beside a pattern: the pattern's automaton counted
          if (chance(rng, 0.4)) s["minLength"] = int(rng, 0, 3);
          if (chance(rng, 0.4)) s["maxLength"] = int(rng, (s["minLength"] as number | undefined) ?? 0, 6);
        } else if (r < 0.45) s["format"] = pick(rng, FORMATS);
        else if (r < 0.75) {
          if (chance(rng, 0.6)) s["minLength"] = int(rng, 0, 3);
          if (chance(rng, 0.6)) s["maxLength"] = int(rng, (s["minLength"] as number | undefined) ?? 0, 5);
        }
        return s;
      }
      case "integer": {
        const s: Schema = { type: "integer" };
        // multiples (bounds beside them are refused)
        if (chance(rng, 0.15)) return { type: pick(rng, ["integer", "number"]), multipleOf: pick(rng, [1, 2, 3, 7, 10, 25, 250, 0.5, 1000]) };
        // small ranges, and ranges as large as the safe integers (zod's .int())
        const lo = chance(rng, 0.2) ? -int(rng, 0, 2 ** 40) * 4096 : int(rng, -1000, 1000);
        if (chance(rng, 0.5)) s[pick(rng, ["minimum", "exclusiveMinimum"])] = lo;
        if (chance(rng, 0.5)) s[pick(rng, ["maximum", "exclusiveMaximum"])] = lo + (chance(rng, 0.2) ? int(rng, 0, 2 ** 40) * 4096 : int(rng, 2, 3000));
        return s;
      }
      case "number": {
        const s: Schema = { type: "number" };
        // bounds of a few scales: quarters, thousandths, large magnitudes; inclusive or exclusive
        const scale = pick(rng, [4, 1000, 1 / 1e6]);
        if (chance(rng, 0.4)) s[pick(rng, ["minimum", "minimum", "exclusiveMinimum"])] = int(rng, -50, 50) / scale;
        const lo = (s["minimum"] ?? s["exclusiveMinimum"]) as number | undefined;
        if (chance(rng, 0.4)) s[pick(rng, ["maximum", "maximum", "exclusiveMaximum"])] = (lo ?? -50 / scale) + int(rng, 1, 400) / scale;
        return s;
      }
      case "boolean":
      case "null":
        return { type: kind };
      case "enum": {
        const s: Schema = { enum: Array.from({ length: int(rng, 1, 4) }, () => pick(rng, ["a", "é😀", "x\ny", 1, -2.5, 0, true, null, [1, "b"], { k: 1 }, "\u0001", "", "\uD800", "x\uDC00"])) };
        if (chance(rng, 0.3)) s["type"] = "string";
        if (chance(rng, 0.2)) s["maxLength"] = 1;
        return s;
      }
      case "const":
        return { const: pick(rng, ["c", 7, null, false, { a: [1, 2] }, [], "\u001f\"\\"]) };
      case "union":
        return { type: [pick(rng, ["string", "integer"]), pick(rng, ["null", "boolean", "number"])] };
      case "not": {
        // what a grammar can leave out: types, and values of an enum, booleans, null or plain strings
        const values = Array.from({ length: int(rng, 1, 3) }, () => pick(rng, ["a", "ab", "", "é", true, false, null, 1, 0, -1]));
        const out = chance(rng, 0.5) ? { const: values[0] } : { enum: values };
        return pick(rng, [
          { not: { type: pick(rng, ["string", "object", "array", "number", "null", ["boolean", "integer"]]) } },
          { type: ["string", "boolean", "null"], not: out },
          { type: "string", not: out },
          { type: "integer", ...(chance(rng, 0.5) ? { minimum: int(rng, -2, 1), maximum: int(rng, 1, 3) } : {}), not: out },
          { enum: ["a", "ab", 1, true, null, { k: 1 }], not: out },
          { ...randomSchema(rng, depth + 1, defs), not: false },
          // (since the forty-third session) numbers less values, strings of a pattern or length less values, not of a pattern or length
          { type: "number", ...(chance(rng, 0.5) ? { minimum: int(rng, -2, 1), exclusiveMaximum: int(rng, 1, 3) } : {}), not: { enum: [0, 1, 0.5, -1.5].slice(0, int(rng, 1, 4)) } },
          { type: "string", ...(chance(rng, 0.5) ? { pattern: pick(rng, ["^[ab]", "b", "^.{0,2}$"]) } : { maxLength: int(rng, 1, 3) }), not: out },
          { type: "string", not: pick(rng, [{ pattern: "^a" }, { pattern: "b$|é" }, { maxLength: 1 }, { pattern: "a", minLength: 2 }]) },
          { not: { pattern: pick(rng, ["^a", "b"]) } },
        ]);
      }
      case "nullable":
        return { ...randomSchema(rng, depth + 1, defs), nullable: true };
      case "if": {
        // a hand-written discriminator (if a property's const, then / else), or a test of the type
        if (chance(rng, 0.3)) return { if: { type: pick(rng, ["string", "integer", "object", ["null", "boolean"]]) }, [THEN]: randomSchema(rng, depth + 1, defs), else: randomSchema(rng, depth + 1, defs) };
        const s: Schema = { type: pick(rng, ["object", "object", ["object", "null"]]), properties: { kind: { enum: ["a", "b", "c"] }, n: randomSchema(rng, depth + 2, defs) }, required: chance(rng, 0.7) ? ["kind"] : [] };
        if (chance(rng, 0.5)) s["additionalProperties"] = pick(rng, [false, true, { type: "integer" }]);
        s["if"] = { properties: { kind: pick(rng, [{ const: "a" }, { enum: ["a", "c"] }, { type: "string" }]) }, ...(chance(rng, 0.3) ? { required: ["kind"] } : {}) };
        const branch = (): unknown => pick(rng, [{ required: ["n"] }, { properties: { n: randomSchema(rng, depth + 2, defs) } }, false, { properties: { kind: { not: { const: "b" } } } }]);
        if (chance(rng, 0.8)) s[THEN] = branch();
        if (chance(rng, 0.6)) s["else"] = branch();
        return s;
      }
      case "dependentSchemas": {
        const s: Schema = { type: "object", properties: { a: randomSchema(rng, depth + 2, defs), b: randomSchema(rng, depth + 2, defs), c: { type: "integer" } } };
        if (chance(rng, 0.6)) s["additionalProperties"] = pick(rng, [false, true, { type: "string" }]);
        s["dependentSchemas"] = Object.fromEntries(["a", "b"].filter(() => chance(rng, 0.7)).map((k) => [k, pick(rng, [{ required: ["c"] }, { properties: { c: { minimum: 0 } } }, false, { required: [k === "a" ? "b" : "a"] }])]));
        return s;
      }
      case "object": {
        const n = int(rng, 0, 4);
        const properties: Record<string, Schema> = {};
        for (let i = 0; i < n; i++) properties[pick(rng, ["a", "b", "ab", "name", "é", "x y", "a/b", "id"]) + (i === 0 ? "" : String(i))] = randomSchema(rng, depth + 1, defs);
        // a property no value satisfies (zod's z.undefined()): never written
        if (chance(rng, 0.1)) properties["u"] = { not: {} };
        const s: Schema = { type: "object", properties };
        const keys = Object.keys(properties).filter((k) => k !== "u");
        if (keys.length > 0) s["required"] = keys.filter(() => chance(rng, 0.5));
        const r = rng.uniform();
        if (r < 0.25) s["additionalProperties"] = false;
        else if (r < 0.4) s["additionalProperties"] = true;
        else if (r < 0.55) s["additionalProperties"] = randomSchema(rng, depth + 2, defs);
        // zod's catchall(z.never()): no other key
        else if (r < 0.6) s["additionalProperties"] = { not: {} };
        // a required name that is no property: a key of additionalProperties' schema
        if (s["additionalProperties"] !== false && chance(rng, 0.1)) s["required"] = [...((s["required"] as string[] | undefined) ?? []), "zz"];
        // propertyNames: a string type is what keys are anyway; other key schemas are held (refused
        // where a property's name is one of their strings beside other keys)
        if (chance(rng, 0.1)) s["propertyNames"] = pick(rng, [{ type: "string" }, { pattern: "^[a-z]+$" }, { maxLength: 3 }]);
        // a count of keys, on a closed object (beside other keys a minimum two of them must meet is
        // not written: {"x": 1, "y": 2} under minProperties 2 beside a property "a" is refused)
        if (s["additionalProperties"] === false && chance(rng, 0.15)) {
          s["minProperties"] = int(rng, 0, 2);
          if (chance(rng, 0.5)) s["maxProperties"] = int(rng, s["minProperties"] as number, 3);
        }
        // keys of a pattern, with values of its schema (refused where it takes a property's name)
        if (chance(rng, 0.12)) s["patternProperties"] = { [pick(rng, [...Object.keys(KEY_PATTERNS), "^a"])]: randomSchema(rng, depth + 2, defs) };
        // the keys nothing else evaluated (as additionalProperties where nothing is beside it)
        if (s["additionalProperties"] === undefined && chance(rng, 0.1)) s["unevaluatedProperties"] = pick(rng, [false, { type: "integer" }]);
        // where one key is present, so are others
        if (keys.length > 1 && chance(rng, 0.12)) s["dependentRequired"] = { [keys[0]!]: keys.slice(1).filter(() => chance(rng, 0.6)) };
        return s;
      }
      case "array": {
        const s: Schema = { type: "array", items: chance(rng, 0.03) ? false : elementSchema(() => randomSchema(rng, depth + 1, defs)) };
        if (chance(rng, 0.5)) s["minItems"] = int(rng, 0, 2);
        if (chance(rng, 0.5)) s["maxItems"] = int(rng, (s["minItems"] as number | undefined) ?? 0, 4);
        // uniqueItems: held over a finite set of item values (enum, const, boolean, null), else refused naming the path
        if (chance(rng, 0.05)) s["uniqueItems"] = true;
        // elements of a schema anywhere (at least minContains of them; a maxContains below maxItems refused)
        if (inElements === 0 && s["uniqueItems"] === undefined && chance(rng, 0.15)) {
          s["contains"] = pick(rng, [{ const: 1 }, { type: "string" }, { enum: ["a", null] }, { type: "integer", minimum: 5 }]);
          if (chance(rng, 0.4)) s["minContains"] = int(rng, 0, 2);
          if (chance(rng, 0.3)) s["maxContains"] = int(rng, (s["minContains"] as number | undefined) ?? 1, 4);
        }
        return s;
      }
      case "tuple": {
        // (false at a position: the array ends before it)
        const s: Schema = { type: "array", prefixItems: elementSchema(() => Array.from({ length: int(rng, 1, 3) }, (_, i) => (i > 0 && chance(rng, 0.1) ? false : randomSchema(rng, depth + 1, defs)))) };
        const r = rng.uniform();
        // the rest as items, or as unevaluatedItems (the elements no position took)
        const rest = chance(rng, 0.3) ? "unevaluatedItems" : "items";
        if (r < 0.4) s[rest] = false;
        else if (r < 0.7) s[rest] = elementSchema(() => randomSchema(rng, depth + 1, defs));
        if (chance(rng, 0.3)) s["minItems"] = int(rng, 0, 2);
        return s;
      }
      case "anyOf":
        return { anyOf: Array.from({ length: int(rng, 1, 3) }, () => randomSchema(rng, depth + 1, defs)) };
      case "oneOf": {
        // tsllm reads oneOf as anyOf (as llama.cpp does; documented): alternatives of different types, which cannot overlap
        const types = ["string", "integer", "boolean", "null", "object", "array"].sort(() => rng.uniform() - 0.5);
        return {
          oneOf: Array.from({ length: int(rng, 1, 3) }, (_, i) => {
            const { nullable: _n, ...alt } = randomSchema(rng, depth + 1, defs);
            return { ...alt, type: types[i] };
          }),
        };
      }
      case "allOf": {
        const part = (): Schema => ({ type: "object", properties: { [pick(rng, ["a", "b", "c"])]: randomSchema(rng, depth + 2, defs) }, ...(chance(rng, 0.3) ? { additionalProperties: false } : {}) });
        return { allOf: [part(), part()] };
      }
      case "ref": {
        const name = `d${Object.keys(defs).length}`;
        const self = { $ref: `#/$defs/${name}` };
        if (chance(rng, 0.5)) {
          // recursion that can end: a list {value, next: null or another}, next left out, a tree of
          // children that may be none; or (in one of them) that cannot, reached through an optional
          // property, where only the value without it is valid
          const shape = int(rng, 0, 3);
          const v = randomSchema(rng, 3, defs);
          if (shape === 0) defs[name] = { type: "object", properties: { v, next: { anyOf: [{ type: "null" }, self] } }, required: ["v"] };
          else if (shape === 1) defs[name] = { type: "object", properties: { v, next: self }, required: ["v"] };
          else if (shape === 2) defs[name] = { type: "object", properties: { v, children: { type: "array", items: self, maxItems: int(rng, 0, 3) } }, required: ["v", "children"] };
          else {
            defs[name] = { type: "object", properties: { v, next: self }, required: ["v", "next"] };
            return { type: "object", properties: { top: self, w: randomSchema(rng, 3, defs) } };
          }
        } else defs[name] = randomSchema(rng, depth + 1, defs);
        return self;
      }
    }
    throw new Error(kind);
  })();
  return s;
}

/** case k of a seed: the schema new Rng(seed + k) makes */
export function randomRootSchema(rng: Rng): Schema {
  const defs: Record<string, Schema> = {};
  const s = randomSchema(rng, 0, defs);
  return Object.keys(defs).length > 0 ? { ...s, $defs: defs } : s;
}

/** ajv, draft 2020-12, with the formats checked as RFC 3339 / RFC 4122 say (ajv-formats' full mode) */
export function makeAjv(): Ajv2020 {
  const ajv = new Ajv2020({ strict: false, allErrors: false });
  const daysIn = (y: number, m: number): number => [31, y % 4 === 0 && (y % 100 !== 0 || y % 400 === 0) ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][m - 1] ?? 0;
  const date = (s: string): boolean => {
    const m = /^(\d{4})-(\d{2})-(\d{2})$/.exec(s);
    return m !== null && Number(m[2]) >= 1 && Number(m[2]) <= 12 && Number(m[3]) >= 1 && Number(m[3]) <= daysIn(Number(m[1]), Number(m[2]));
  };
  const time = (s: string): boolean => {
    const m = /^(\d{2}):(\d{2}):(\d{2})(\.\d+)?([zZ]|[+-](\d{2}):(\d{2}))$/.exec(s);
    return m !== null && Number(m[1]) <= 23 && Number(m[2]) <= 59 && Number(m[3]) <= 60 && (m[6] === undefined || (Number(m[6]) <= 23 && Number(m[7]) <= 59));
  };
  ajv.addFormat("date", date);
  ajv.addFormat("time", time);
  ajv.addFormat("date-time", (s: string) => {
    const i = s.search(/[tT ]/);
    return i > 0 && date(s.slice(0, i)) && time(s.slice(i + 1));
  });
  ajv.addFormat("uuid", /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i);
  // the formats OpenAI's strict mode names beyond those, as ajv-formats' full mode checks them
  addFormats(ajv, { mode: "full", formats: ["email", "hostname", "ipv4", "ipv6", "duration"] });
  // uri is an annotation to tsllm, as to llama.cpp (and outside OpenAI's strict mode): any string
  ajv.addFormat("uri", () => true);
  return ajv;
}

// --- soundness: random walks ---

/** characters a walk tries when a negated class is on top (any character but a few) */
const WALK_POOL = [..."abcxyzAZ0123456789-+.eE:T\"\\/{}[],nul trfé日😀\n\t_@"].map((c) => c.codePointAt(0)!);
const CLOSERS = [..."\"]}0123456789"].map((c) => c.codePointAt(0)!);

/** one random sentence of the grammar (undefined: the walk ran too long) */
export function randomWalk(m: GrammarMatcher, rng: Rng, maxLength = 400): string | undefined {
  let stacks: Stack[] = m.initial();
  const out: number[] = [];
  while (out.length < maxLength) {
    if (GrammarMatcher.complete(stacks) && chance(rng, out.length > 20 ? 0.6 : 0.25)) return String.fromCodePoint(...out);
    // candidates: a character from each class on top, and the pool
    const cands: number[] = [];
    for (const s of stacks) {
      const c = m.top(s);
      if (c === undefined) continue;
      if (!c.negated && c.ranges.length > 0) {
        const [lo, hi] = pick(rng, c.ranges);
        cands.push(chance(rng, 0.5) ? lo : int(rng, lo, hi));
      }
    }
    cands.push(...WALK_POOL);
    const long = out.length > 60;
    const order = long ? [...CLOSERS, ...cands] : cands;
    let moved = false;
    for (let tries = 0; tries < 40 && !moved; tries++) {
      const c = long && tries < 10 ? pick(rng, CLOSERS) : pick(rng, order);
      const next = m.advance(stacks, c);
      if (next.length > 0) {
        stacks = next;
        out.push(c);
        moved = true;
      }
    }
    if (!moved) {
      // the rare character the pool misses: try every candidate in order
      for (const c of [...cands, ...Array.from({ length: 128 }, (_, i) => i)]) {
        const next = m.advance(stacks, c);
        if (next.length > 0) {
          stacks = next;
          out.push(c);
          moved = true;
          break;
        }
      }
    }
    if (!moved) return GrammarMatcher.complete(stacks) ? String.fromCodePoint(...out) : undefined;
  }
  return undefined;
}

// --- completeness: random instances ---

function resolve(root: Schema, ref: string): Schema {
  // ("#" is the root itself: no key to follow)
  if (ref === "#") return root;
  let t: unknown = root;
  for (const k of ref.slice(2).split("/")) t = (t as Schema)[k];
  return t as Schema;
}

/** the strings randomInstance made up (not const, enum or pattern ones, which the grammar holds as written) */
const freeStrings = new Set<string>();
/** strings of patterns and formats, whose grammars take their characters raw */
const rawStrings = new Set<string>();
/** numbers written as they are: bounded ones (no exponent, no -0: documented), enum and const values */
const plainNumbers = new Set<number>();
/** bounded numbers, and enum and const numbers (one literal each: no trailing zeros) */
const boundedNumbers = new Set<number>(), literalNumbers = new Set<number>();
/** objects made for a schema that leaves additionalProperties unset (no key beyond the properties is written: a known difference) */
const openObjects = new WeakSet<object>();

/** `x` as JSON.stringify writes it, but without an exponent (1e-7 as 0.0000001), as a bounded number's grammar writes it */
export function plainDecimal(x: number): string {
  const m = /^(-?)(\d)(?:\.(\d+))?e([+-]\d+)$/.exec(String(x));
  if (!m) return JSON.stringify(x);
  const digits = m[2]! + (m[3] ?? ""), e = Number(m[4]);
  if (e < 0) return `${m[1]}0.${"0".repeat(-e - 1)}${digits}`;
  return digits.length > e + 1 ? `${m[1]}${digits.slice(0, e + 1)}.${digits.slice(e + 1)}` : `${m[1]}${digits.padEnd(e + 1, "0")}`;
}

/** the strings among a schema's const and enum values (written as literals: not to be escaped) */
function literalStrings(s: unknown, out = new Set<string>()): Set<string> {
  if (typeof s === "string") out.add(s);
  else if (Array.isArray(s)) for (const x of s) literalStrings(x, out);
  else if (typeof s === "object" && s !== null) for (const x of Object.values(s)) literalStrings(x, out);
  return out;
}

/** a random value of the schema, within what tsllm claims (undefined: none made) */
export function randomInstance(root: Schema, s: unknown, rng: Rng, depth = 0): unknown {
  if (depth > 8) return undefined;
  if (s === true || (typeof s === "object" && s !== null && Object.keys(s).length === 0)) return pick(rng, [1, "s", null, [], {}, { q: [true] }]);
  const o = s as Schema;
  // not: an instance of the schema beside it (ajv then keeps those not ruled out); {not: {}}: none
  if (o["not"] !== undefined) {
    const { not, ...rest } = o;
    if (not === true || (typeof not === "object" && not !== null && Object.keys(not).length === 0)) return undefined;
    const v = randomInstance(root, Object.keys(rest).length === 0 ? true : rest, rng, depth + 1);
    // a number with values left out is ranges of numbers, which (as bounded ones) never write -0 or an exponent
    if (typeof v === "number") {
      plainNumbers.add(v);
      boundedNumbers.add(v);
    }
    // a string less a pattern or length, or beside one, or less a value JSON escapes, is written by
    // the patterns' automata, whose characters are raw as a pattern's (documented)
    const tests = (x: unknown) => typeof x === "object" && x !== null && ["pattern", "minLength", "maxLength"].some((k) => (x as Schema)[k] !== undefined);
    const escaped = (x: unknown): boolean => (typeof x === "string" && JSON.stringify(x).slice(1, -1).includes("\\")) || (typeof x === "object" && x !== null && Object.values(x).some(escaped));
    if (typeof v === "string" && (tests(not) || tests(rest) || escaped(not))) rawStrings.add(v);
    return v;
  }
  if (o["nullable"] === true && chance(rng, 0.3)) return null;
  if (typeof o["$ref"] === "string") return randomInstance(root, resolve(root, o["$ref"]), rng, depth + 1);
  if (o["const"] !== undefined || Array.isArray(o["enum"])) {
    // ajv takes -0 for an enum's 0 (deep equality); the grammar writes the value as it is
    const v = o["const"] !== undefined ? o["const"] : pick(rng, o["enum"] as unknown[]);
    if (typeof v === "number") {
      plainNumbers.add(v);
      literalNumbers.add(v);
    }
    return v;
  }
  for (const k of ["anyOf", "oneOf"]) {
    if (!Array.isArray(o[k])) continue;
    // the keywords beside (an allOf's parts merged: bounds beside an anyOf) apply to the alternative too
    const { [k]: alts, ...beside } = o;
    const alt = pick(rng, alts as unknown[]);
    return randomInstance(root, typeof alt === "object" && alt !== null && Object.keys(beside).length > 0 ? { ...beside, ...alt } : alt, rng, depth + 1);
  }
  if (Array.isArray(o["allOf"])) {
    const properties: Schema = {};
    // a property in several parts: their keywords together (bounds beside a type; ajv judges the value)
    for (const p of o["allOf"] as Schema[]) for (const [k, v] of Object.entries((p["properties"] ?? {}) as Schema)) properties[k] = typeof properties[k] === "object" && typeof v === "object" ? { ...(properties[k] as Schema), ...(v as Schema) } : v;
    const v = randomInstance(root, { type: "object", properties, additionalProperties: false }, rng, depth + 1);
    if (v !== undefined && (o["allOf"] as Schema[]).every((p) => p["additionalProperties"] === undefined)) openObjects.add(v as object);
    return v;
  }
  const type = Array.isArray(o["type"]) ? pick(rng, o["type"] as string[]) : (o["type"] as string);
  switch (type) {
    case "null":
      return null;
    case "boolean":
      return chance(rng, 0.5);
    case "integer":
    case "number": {
      if (typeof o["multipleOf"] !== "number") break;
      const k = o["multipleOf"];
      const n = pick(rng, [0, k, -k, k * int(rng, -1e6, 1e6), k * 123456789012, Math.floor(999999999999999 / k) * k]);
      // bounded multiples are never written as -0 (documented)
      if (RANGE_KEYS.some((r) => o[r] !== undefined)) plainNumbers.add(n);
      return n;
    }
  }
  switch (type) {
    case "integer": {
      const lo = typeof o["minimum"] === "number" ? o["minimum"] : typeof o["exclusiveMinimum"] === "number" ? o["exclusiveMinimum"] + 1 : -1e6;
      const hi = typeof o["maximum"] === "number" ? o["maximum"] : typeof o["exclusiveMaximum"] === "number" ? o["exclusiveMaximum"] - 1 : 1e6;
      const n = pick(rng, [lo, hi, int(rng, lo, hi), 0, -1, 1e5, Number.MAX_SAFE_INTEGER % 1e15]);
      // a bounded integer's grammar does not write -0 (as llama.cpp's does not)
      if (o["minimum"] !== undefined || o["maximum"] !== undefined || o["exclusiveMinimum"] !== undefined || o["exclusiveMaximum"] !== undefined) plainNumbers.add(n);
      return n;
    }
    case "number": {
      const bound = (k: string, x: string): number | undefined => (typeof o[k] === "number" ? (o[k] as number) : typeof o[x] === "number" ? (o[x] as number) : undefined);
      const lo = bound("minimum", "exclusiveMinimum") ?? -1e3, hi = bound("maximum", "exclusiveMaximum") ?? 1e3;
      const bounded = RANGE_KEYS.some((k) => o[k] !== undefined);
      // next to the bounds (an exclusive one's value itself is invalid: ajv leaves it out), and tiny
      // ones; where bounded only those with at most 16 fraction digits written out (llama.cpp's
      // decimal-part; the double's 17th digit is noise); one JSON.stringify writes with an exponent
      // is written out (1e-7 as 0.0000001), and with its exponent is a known difference
      const n = pick(rng, [lo, hi, lo + 1e-7, hi - 1e-7, lo + 0.001, Math.round((lo + (hi - lo) * rng.uniform()) * 1e6) / 1e6, 0, 1e5, 1e-7, -2.5e-5, -2.5, 0.1].filter((x) => !bounded || /^-?\d+(\.\d{1,16})?$/.test(plainDecimal(x))));
      if (bounded) {
        plainNumbers.add(n);
        boundedNumbers.add(n);
      }
      return n;
    }
    case "string": {
      if (typeof o["format"] === "string" && o["pattern"] === undefined) {
        const v = pick(rng, FORMAT_SAMPLES[o["format"]]!);
        rawStrings.add(v);
        return v;
      }
      if (typeof o["pattern"] === "string") {
        const re = new RegExp(o["pattern"], "u");
        const min = (o["minLength"] as number | undefined) ?? 0, max = (o["maxLength"] as number | undefined) ?? Infinity;
        const ok = PATTERN_SAMPLES.filter((x) => re.test(x) && [...x].length >= min && [...x].length <= max);
        const v = ok.length > 0 ? pick(rng, ok) : undefined;
        // a pattern's grammar takes its characters raw (as llama.cpp's does; documented): not escaped
        if (v !== undefined) rawStrings.add(v);
        return v;
      }
      let str = "";
      const n = int(rng, 0, 6);
      for (let i = 0; i < n; i++) str += pick(rng, STRING_PIECES);
      const chars = [...str];
      const min = (o["minLength"] as number | undefined) ?? 0, max = (o["maxLength"] as number | undefined) ?? Infinity;
      while (chars.length < min) chars.push(pick(rng, ["q", "é", "😀", "\u0000"]));
      const made = chars.slice(0, max).join("");
      freeStrings.add(made);
      return made;
    }
    case "array": {
      const prefix = (o["prefixItems"] as unknown[] | undefined) ?? [];
      const min = (o["minItems"] as number | undefined) ?? 0;
      const closedAt = prefix.indexOf(false);
      // (unevaluatedItems beside no items: the elements past the positions)
      const rest = o["items"] ?? o["unevaluatedItems"];
      const max = closedAt >= 0 ? closedAt : rest === false ? prefix.length : ((o["maxItems"] as number | undefined) ?? prefix.length + 3);
      const n = int(rng, Math.min(min, max), max);
      const out: unknown[] = [];
      // (some elements of the contains schema, wherever no position holds them)
      for (let i = 0; i < n; i++) out.push(randomInstance(root, i >= prefix.length && o["contains"] !== undefined && chance(rng, 0.5) ? o["contains"] : i < prefix.length ? prefix[i] : (rest ?? true), rng, depth + 1));
      // (an element none was made for is no element: JSON.stringify would write it as null, which ajv did not judge)
      if (out.includes(undefined)) return undefined;
      // a maxContains below maxItems writes the other elements as the items less contains: integers
      // with values left out are ranges, which (as bounded ones) never write -0
      if (o["maxContains"] !== undefined) for (const e of out) if (typeof e === "number") plainNumbers.add(e);
      return out;
    }
    case "object": {
      const props = (o["properties"] ?? {}) as Schema;
      const required = new Set((o["required"] as string[] | undefined) ?? []);
      const out: Record<string, unknown> = {};
      for (const [k, v] of Object.entries(props)) {
        if (!(required.has(k) || chance(rng, 0.5))) continue;
        const e = randomInstance(root, v, rng, depth + 1);
        if (e !== undefined) out[k] = e;
      }
      const extra = o["additionalProperties"] ?? o["unevaluatedProperties"];
      for (const k of required) if (!Object.hasOwn(props, k)) out[k] = randomInstance(root, extra ?? true, rng, depth + 1);
      // keys of patternProperties' patterns, after the properties and the other required names (the grammar's order)
      for (const [p, sub] of Object.entries((o["patternProperties"] ?? {}) as Schema)) for (const k of KEY_PATTERNS[p] ?? []) if (chance(rng, 0.4)) out[k] = randomInstance(root, sub, rng, depth + 1);
      if (extra !== undefined && extra !== false && chance(rng, 0.5)) {
        for (const k of ["zz", "\u0000k", "é", "a\"b"]) if (!Object.hasOwn(props, k) && !Object.hasOwn(out, k) && chance(rng, 0.5)) out[k] = randomInstance(root, extra, rng, depth + 1);
      }
      if (extra === undefined) openObjects.add(out);
      return out;
    }
  }
  return undefined;
}

/** whitespace llama.cpp's grammar takes between tokens */
function space(rng: Rng): string {
  const r = rng.uniform();
  if (r < 0.4) return "";
  if (r < 0.7) return " ";
  return `${r < 0.85 ? "\n" : "\n\n"}${Array.from({ length: int(rng, 0, 20) }, () => pick(rng, [" ", "\t"])).join("")}`;
}

/** the numbers' range keywords */
const RANGE_KEYS = ["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"];



/**
 * `v` as JSON with random legal whitespace, numbers in other spellings, string values with \u
 * escapes (keys as JSON.stringify writes them: a named property is one literal in the grammar, as
 * in llama.cpp's)
 */
export function writeJson(v: unknown, rng: Rng, escapes: boolean, literals = new Set<string>(), spaced = true): string {
  const ws = (r: Rng): string => (spaced ? space(r) : "");
  const w = (x: unknown, key = false): string => {
    if (typeof x === "number") {
      if (Object.is(x, 0) && !plainNumbers.has(x) && chance(rng, 0.3)) return "-0";
      if (!Number.isInteger(x) && !plainNumbers.has(x) && chance(rng, 0.5)) return x.toExponential().replace("e", pick(rng, ["e", "E"]));
      // a bounded number is written without an exponent; its fraction may end in zeros (an enum's
      // or const's number is one literal)
      if (boundedNumbers.has(x) && !literalNumbers.has(x) && !Number.isInteger(x) && chance(rng, 0.3)) return plainDecimal(x) + "0".repeat(int(rng, 1, 3));
      return plainNumbers.has(x) ? plainDecimal(x) : JSON.stringify(x);
    }
    if (typeof x === "string") {
      if (!escapes || key || !freeStrings.has(x) || rawStrings.has(x) || literals.has(x)) return JSON.stringify(x);
      let out = '"';
      for (let i = 0; i < x.length; i++) {
        const c = x.charCodeAt(i);
        out += c >= 0x80 || c < 0x20 || chance(rng, 0.2) ? `\\u${c.toString(16).padStart(4, "0")}` : JSON.stringify(x[i]).slice(1, -1);
      }
      return `${out}"`;
    }
    // as JSON.stringify: undefined is null in an array, left out of an object
    if (Array.isArray(x)) return `[${ws(rng)}${x.map((e) => `${w(e ?? null)}${ws(rng)}`).join(`,${ws(rng)}`)}]`;
    if (x !== null && typeof x === "object") return `{${ws(rng)}${Object.entries(x).filter(([, e]) => e !== undefined).map(([k, e]) => `${w(k, true)}${ws(rng)}:${ws(rng)}${w(e)}${ws(rng)}`).join(`,${ws(rng)}`)}}`;
    return JSON.stringify(x);
  };
  return w(v) + ws(rng);
}

/** whether the grammar of {type: "string", format} takes `s` (written as JSON) */
function formatAccepts(format: string, s: string): boolean {
  try {
    return accepts(new GrammarMatcher(parseGbnf(jsonSchemaToGbnf({ type: "string", format }))), JSON.stringify(s));
  } catch {
    return false;
  }
}

/** whether the grammar takes `text` whole */
export function accepts(m: GrammarMatcher, text: string): boolean {
  let stacks = m.initial();
  for (const ch of text) {
    stacks = m.advance(stacks, ch.codePointAt(0)!);
    if (stacks.length === 0) return false;
  }
  return GrammarMatcher.complete(stacks);
}

export interface Finding {
  readonly kind: "unsound" | "incomplete" | "crash";
  readonly schema: unknown;
  readonly text: string;
  readonly detail: string;
}

/** the differences from ajv tsllm makes on purpose (documented): see the header */
export type KnownKind = "exponent" | "extra key" | "format beside pattern" | "lone surrogate";

export interface CaseResult {
  readonly refused?: string;
  readonly walks: number;
  readonly instances: number;
  readonly findings: Finding[];
  /** instances the grammar refused only for a known difference, by kind (not findings) */
  readonly known: Record<KnownKind, number>;
}

const noKnown = (): Record<KnownKind, number> => ({ exponent: 0, "extra key": 0, "format beside pattern": 0, "lone surrogate": 0 });

/** `v` with each lone surrogate of its strings (keys too) an "x" (undefined: none held one) */
function withoutLoneSurrogates(v: unknown): unknown {
  let changed = false;
  const copy = (x: unknown): unknown => {
    if (typeof x === "string") {
      const out = x.replace(/\p{Cs}/gu, "x");
      changed ||= out !== x;
      return out;
    }
    if (Array.isArray(x)) return x.map(copy);
    if (typeof x !== "object" || x === null) return x;
    return Object.fromEntries(Object.entries(x).map(([k, e]) => [copy(k), copy(e)]));
  };
  const out = copy(v);
  return changed ? out : undefined;
}

/**
 * `schema` as the grammar reads objects: one with properties and additionalProperties unset takes no
 * other key, nor does an allOf of objects where a part has such properties (or additionalProperties
 * false); other keys are refused through propertyNames (names in required stay taken)
 */
export function closedSchema(schema: unknown, allOfPart = false): unknown {
  if (Array.isArray(schema)) return schema.map((x) => closedSchema(x));
  if (typeof schema !== "object" || schema === null) return schema;
  const o = schema as Schema;
  const out: Schema = {};
  for (const [k, v] of Object.entries(o)) {
    if (k === "enum" || k === "const") out[k] = v;
    else if (k === "properties" || k === "$defs") out[k] = Object.fromEntries(Object.entries(v as Schema).map(([n, x]) => [n, closedSchema(x)]));
    else if (k === "allOf" && Array.isArray(v)) out[k] = v.map((x) => closedSchema(x, true));
    else out[k] = typeof v === "object" ? closedSchema(v) : v;
  }
  const named = (x: Schema): string[] => [...Object.keys((x["properties"] ?? {}) as Schema), ...((x["required"] as string[] | undefined) ?? [])];
  // (patternProperties with additionalProperties unset: the keys of the patterns, and of no other)
  const closes = (x: Schema): boolean => x["additionalProperties"] === undefined && x["unevaluatedProperties"] === undefined && (Object.keys((x["properties"] ?? {}) as Schema).length > 0 || x["patternProperties"] !== undefined);
  let names: string[] | undefined;
  if (!allOfPart && closes(o)) names = named(o);
  const parts = Array.isArray(o["allOf"]) ? (o["allOf"] as unknown[]).filter((p): p is Schema => typeof p === "object" && p !== null) : [];
  if (parts.some(closes)) names = [...named(o), ...parts.flatMap(named)];
  const patterns = Object.keys((o["patternProperties"] ?? {}) as Schema).map((pattern) => ({ pattern }));
  const keys = names === undefined ? [] : [...(names.length > 0 ? [{ enum: [...new Set(names)] }] : []), ...patterns];
  if (names !== undefined) out["allOf"] = [...((out["allOf"] as unknown[] | undefined) ?? []), { propertyNames: keys.length > 0 ? { anyOf: keys } : false }];
  return out;
}

/** the value at a JSON pointer (ajv's instancePath) */
function at(v: unknown, pointer: string): unknown {
  for (const raw of pointer.split("/").slice(1)) v = (v as Record<string, unknown>)[raw.replaceAll("~1", "/").replaceAll("~0", "~")];
  return v;
}

/** whether `v` holds a bounded number JSON.stringify writes with an exponent */
function holdsExponent(v: unknown): boolean {
  if (typeof v === "number") return boundedNumbers.has(v) && !literalNumbers.has(v) && plainDecimal(v) !== JSON.stringify(v);
  if (typeof v === "object" && v !== null) return Object.values(v).some(holdsExponent);
  return false;
}

/** `v` with a key "zx" more in each object whose schema leaves additionalProperties unset (undefined: none is) */
function withExtraKeys(v: unknown): unknown {
  let added = false;
  const copy = (x: unknown): unknown => {
    if (Array.isArray(x)) return x.map(copy);
    if (typeof x !== "object" || x === null) return x;
    const out = Object.fromEntries(Object.entries(x).map(([k, e]) => [k, copy(e)]));
    if (openObjects.has(x) && !Object.hasOwn(out, "zx")) {
      out["zx"] = 1;
      added = true;
    }
    return out;
  };
  const out = copy(v);
  return added ? out : undefined;
}

/** one schema: compiled (or refused with a GrammarError), walked, and fed instances */
export function checkSchema(schema: Schema, rng: Rng, ajv: Ajv2020, walks = 20, instances = 20): CaseResult {
  let grammar: Grammar;
  try {
    grammar = parseGbnf(jsonSchemaToGbnf(schema as JsonSchema));
  } catch (e) {
    if (e instanceof GrammarError) return { refused: e.message, walks: 0, instances: 0, findings: [], known: noKnown() };
    return { walks: 0, instances: 0, findings: [{ kind: "crash", schema, text: "", detail: String((e as Error).stack) }], known: noKnown() };
  }
  let validate: ReturnType<Ajv2020["compile"]>;
  try {
    validate = ajv.compile(schema);
  } catch (e) {
    // a schema ajv itself refuses (nullable without type, ...) is no test of the grammar
    return { refused: `ajv: ${(e as Error).message}`, walks: 0, instances: 0, findings: [], known: noKnown() };
  }
  // ajv recurses without end on a schema that refers to itself first ({$defs: {d: {anyOf: [{$ref: d}, ...]}}}):
  // the judge cannot judge it, which says nothing of the grammar
  try {
    validate(null);
  } catch (e) {
    return { refused: `ajv: ${(e as Error).message}`, walks: 0, instances: 0, findings: [], known: noKnown() };
  }
  const m = new GrammarMatcher(grammar);
  const closed = ajv.compile(closedSchema(schema) as Schema);
  const findings: Finding[] = [];
  const known = noKnown();
  let walked = 0, fed = 0;
  freeStrings.clear();
  rawStrings.clear();
  plainNumbers.clear();
  boundedNumbers.clear();
  literalNumbers.clear();
  const literals = literalStrings(schema);
  for (let i = 0; i < walks; i++) {
    const text = randomWalk(m, rng);
    if (text === undefined) continue;
    walked++;
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch (e) {
      findings.push({ kind: "unsound", schema, text, detail: `not JSON: ${(e as Error).message}` });
      continue;
    }
    if (validate(value)) continue;
    const errors = validate.errors ?? [];
    // a format the pattern beside it decided (when the format's own grammar refuses the string too)
    if (JSON.stringify(schema).includes('"pattern"') && errors.length > 0 && errors.every((e) => e.keyword === "format" && typeof at(value, e.instancePath) === "string" && !formatAccepts(String(e.params["format"]), at(value, e.instancePath) as string))) {
      known["format beside pattern"]++;
      continue;
    }
    findings.push({ kind: "unsound", schema, text, detail: `ajv: ${ajv.errorsText(errors)}` });
  }
  for (let i = 0; i < instances; i++) {
    const v = randomInstance(schema, schema, rng);
    if (v === undefined || !validate(v)) continue;
    fed++;
    const exponent = holdsExponent(v);
    let refused = false;
    for (const text of [exponent ? writeJson(v, rng, false, new Set(), false) : JSON.stringify(v), writeJson(v, rng, false), writeJson(v, rng, true, literals)]) {
      if (accepts(m, text)) continue;
      refused = true;
      // a lone surrogate where it is a string's own character, not a literal's (valid only through
      // another alternative's free string, say): the same instance with an "x" there is taken
      const plain = withoutLoneSurrogates(v);
      if (plain !== undefined && validate(plain) && accepts(m, JSON.stringify(plain))) {
        known["lone surrogate"]++;
        break;
      }
      // valid only through a key the grammar's objects do not take (another alternative's open object)
      if (!closed(v)) {
        known["extra key"]++;
        break;
      }
      findings.push({ kind: "incomplete", schema, text, detail: "refused by the grammar" });
    }
    // the known differences, where the instance itself was accepted
    if (refused) continue;
    if (exponent && !accepts(m, JSON.stringify(v))) known.exponent++;
    const extra = withExtraKeys(v);
    // (written as the instance's own texts are: bounded numbers without an exponent)
    const extraText = extra === undefined ? "" : writeJson(extra, rng, false, new Set(), false);
    if (extra !== undefined && validate(extra) && !accepts(m, extraText)) {
      // (valid with the key only through another alternative's free string, which holds no lone surrogate)
      const plain = withoutLoneSurrogates(extra);
      if (!closed(extra)) known["extra key"]++;
      else if (plain !== undefined && validate(plain) && accepts(m, writeJson(plain, rng, false, new Set(), false))) known["lone surrogate"]++;
      else findings.push({ kind: "incomplete", schema, text: extraText, detail: "refused by the grammar" });
    }
  }
  return { walks: walked, instances: fed, findings, known };
}
