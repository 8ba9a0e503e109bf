import { GrammarError, MAX_REPETITION } from "./grammar.js";
import { decimalRangeRegex } from "./decimal-range.js";
import { integerRangeRegex } from "./int-range.js";
import { regexToGbnf } from "./regex.js";

/**
 * JSON Schema to GBNF, for the subset llama.cpp's json_schema_to_grammar covers that matters for
 * structured output: type (one or a list), properties / required / additionalProperties, enum,
 * const, items with minItems / maxItems, tuples (prefixItems, or items as a list with
 * additionalItems), string minLength / maxLength and the formats date, time, date-time and uuid,
 * pattern (a regular expression: regex.ts; a format beside it is left to it, as schema generators
 * such as zod write the format's own expression there), anyOf / oneOf, allOf of objects, $ref into
 * $defs / definitions, propertyNames of type string (what JSON keys are anyway), and {} or
 * no type for any JSON value. Objects list their properties in the schema's order (required ones
 * always, optional ones where the model chooses) and take no others unless additionalProperties
 * says so (OpenAI's strict mode). Whitespace between tokens is bounded as llama.cpp's is (at most
 * one newline and 20 spaces or tabs), so a model cannot spin on it forever. What the grammar
 * cannot express (ranges of non-integer numbers, uniqueItems, ...) is refused with the schema path;
 * integers take minimum / maximum (and the exclusive forms).
 */
export type JsonSchema = boolean | { readonly [key: string]: unknown };

export interface JsonSchemaLimits {
  /** most rules the grammar may have */
  readonly maxRules?: number;
  /** deepest nesting of schemas (and of $ref chains) */
  readonly maxDepth?: number;
}

const SPACE = `space ::= | " " | "\\n" [ \\t]{0,20}`;
const PRIMITIVES: Record<string, string> = {
  boolean: `("true" | "false") space`,
  null: `"null" space`,
  integer: `("-"? ([0-9] | [1-9] [0-9]{0,15})) space`,
  number: `("-"? ([0-9] | [1-9] [0-9]{0,15})) ("." [0-9]{1,16})? ([eE] [-+]? [0-9]{1,15})? space`,
  string: `"\\"" char* "\\"" space`,
};
const CHAR = `char ::= [^"\\\\\\x7F\\x00-\\x1F] | [\\\\] (["\\\\/bfnrt] | "u" [0-9a-fA-F]{4})`;
const FORMATS: Record<string, string> = {
  date: `[0-9]{4} "-" ("0" [1-9] | "1" [0-2]) "-" ("0" [1-9] | [1-2] [0-9] | "3" [0-1])`,
  time: `([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9] ":" [0-5] [0-9] ("." [0-9]{3})? ("Z" | [+-] ([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9])`,
  uuid: `[0-9a-fA-F]{8} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{12}`,
};
const KNOWN_KEYS = new Set([
  "type", "properties", "required", "additionalProperties", "enum", "const", "items", "minItems", "maxItems", "minLength", "maxLength",
  "format", "anyOf", "oneOf", "allOf", "$ref", "$defs", "definitions", "$schema", "$id", "title", "description", "default", "examples",
  "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "strict", "name", "nullable", "pattern",
  "prefixItems", "additionalItems", "propertyNames",
]);

/** a GBNF literal for a string (the grammar's own escapes) */
export function gbnfLiteral(s: string): string {
  return `"${s.replace(/[\\"\n\r\t]/g, (c) => ({ "\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t" })[c]!)}"`;
}

export function jsonSchemaToGbnf(schema: JsonSchema, limits: JsonSchemaLimits = {}): string {
  return new Converter(schema, limits.maxRules ?? 5000, limits.maxDepth ?? 64).convert();
}

/** "any JSON value" and "any JSON object" (response_format json_object) grammars */
export function anyJsonGbnf(topLevel: "value" | "object" = "value"): string {
  return jsonSchemaToGbnf(topLevel === "object" ? { type: "object" } : {});
}

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

/** the largest bound of a non-integer number (decimal-range.ts works on exact decimal digits below it) */
const NUMBER_BOUND_LIMIT = 1e15 - 1;

class Converter {
  private readonly rules = new Map<string, string>();
  private readonly refs = new Map<string, string>();

  constructor(private readonly schema: JsonSchema, private readonly maxRules: number, private readonly maxDepth: number) {}

  convert(): string {
    const root = this.visit(this.schema, "root", "#", 0);
    if (root !== "root") this.add("root", root);
    return [...this.rules].map(([name, body]) => `${name} ::= ${body}`).join("\n") + "\n";
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
    if (schema === true || (typeof schema === "object" && schema !== null && Object.keys(schema).every((k) => !["type", "properties", "enum", "const", "items", "prefixItems", "anyOf", "oneOf", "allOf", "$ref"].includes(k)))) {
      if (schema !== true) this.checkKeys(schema as Record<string, unknown>, path);
      return this.anyValue();
    }
    if (schema === false) throw new GrammarError(`${path}: the schema false admits no value`);
    if (typeof schema !== "object" || schema === null || Array.isArray(schema)) throw new GrammarError(`${path}: expected a schema object, got ${JSON.stringify(schema)}`);
    const s = schema as Record<string, unknown>;
    this.checkKeys(s, path);
    this.space();
    if (typeof s["$ref"] === "string") return this.ref(s["$ref"], path, depth);
    if (s["const"] !== undefined) return this.add(name, `${gbnfLiteral(JSON.stringify(s["const"]))} space`);
    if (Array.isArray(s["enum"])) {
      if (s["enum"].length === 0) throw new GrammarError(`${path}/enum: an empty enum admits no value`);
      return this.add(name, `(${s["enum"].map((v) => gbnfLiteral(JSON.stringify(v))).join(" | ")}) space`);
    }
    for (const key of ["anyOf", "oneOf"] as const) {
      const alts = s[key];
      if (Array.isArray(alts)) {
        if (alts.length === 0) throw new GrammarError(`${path}/${key}: an empty list admits no value`);
        return this.add(name, alts.map((a, i) => this.visit(a, `${name}-${i}`, `${path}/${key}/${i}`, depth + 1)).join(" | "));
      }
    }
    if (Array.isArray(s["allOf"])) return this.visit(this.mergeAllOf(s["allOf"], path), name, path, depth + 1);
    const type = s["type"];
    if (Array.isArray(type)) return this.add(name, type.map((t, i) => this.visit({ ...s, type: t }, `${name}-${i}`, `${path}/type/${i}`, depth + 1)).join(" | "));
    if (type === undefined && s["properties"] !== undefined) return this.object(s, name, path, depth);
    if (type === undefined && (s["items"] !== undefined || s["prefixItems"] !== undefined)) return this.array(s, name, path, depth);
    switch (type) {
      case "object": return this.object(s, name, path, depth);
      case "array": return this.array(s, name, path, depth);
      case "string": return this.string(s, name, path);
      case "integer":
        return this.integer(s, name, path);
      case "number":
        return this.number(s, name, path);
      case "boolean":
      case "null":
        return this.primitive(type);
      default:
        throw new GrammarError(`${path}/type: expected one of object, array, string, number, integer, boolean, null, got ${JSON.stringify(type)}`);
    }
  }

  private checkKeys(s: Record<string, unknown>, path: string): void {
    for (const k of Object.keys(s)) {
      if (!KNOWN_KEYS.has(k)) throw new GrammarError(`${path}/${k}: this schema keyword is not supported in a grammar (supported: ${[...KNOWN_KEYS].slice(0, 16).join(", ")}, ...)`);
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
    if (done) return done;
    const m = /^#\/(\$defs|definitions)\/([^/]+)$/.exec(ref);
    const defs = m ? (this.schema as Record<string, unknown>)[m[1]!] : undefined;
    const target = m && typeof defs === "object" && defs !== null && Object.hasOwn(defs, m[2]!) ? (defs as Record<string, unknown>)[m[2]!] : undefined;
    if (target === undefined) throw new GrammarError(`${path}/$ref: ${JSON.stringify(ref)} does not name a schema under #/$defs or #/definitions`);
    const name = `ref-${m![2]!.replace(/[^A-Za-z0-9-]/g, "-")}`;
    // named before it is visited, so a recursive schema refers to itself
    this.refs.set(ref, name);
    const body = this.visit(target, `${name}-body`, ref, depth + 1);
    this.rules.set(name, body);
    return name;
  }

  private mergeAllOf(parts: unknown[], path: string): Record<string, unknown> {
    const properties: Record<string, unknown> = {};
    const required: string[] = [];
    for (const [i, p] of parts.entries()) {
      const o = p as Record<string, unknown>;
      if (typeof o !== "object" || o === null || (o["type"] !== undefined && o["type"] !== "object") || o["properties"] === undefined) {
        throw new GrammarError(`${path}/allOf/${i}: only objects with properties can be combined with allOf`);
      }
      Object.assign(properties, o["properties"]);
      if (Array.isArray(o["required"])) required.push(...(o["required"] as string[]));
    }
    return { type: "object", properties, required };
  }

  /** a number, within minimum / maximum / exclusiveMinimum / exclusiveMaximum where given (decimal-range.ts) */
  private number(s: Record<string, unknown>, name: string, path: string): string {
    const [min, max, xmin, xmax] = RANGE_KEYS.map((k) => rangeBound(s, k, path, NUMBER_BOUND_LIMIT));
    if (min === undefined && max === undefined && xmin === undefined && xmax === undefined) return this.primitive("number");
    // the tighter of each side's bounds (an exclusive one wins a tie)
    const lower = min === undefined ? (xmin === undefined ? undefined : { value: xmin, inclusive: false }) : xmin !== undefined && xmin >= min ? { value: xmin, inclusive: false } : { value: min, inclusive: true };
    const upper = max === undefined ? (xmax === undefined ? undefined : { value: xmax, inclusive: false }) : xmax !== undefined && xmax <= max ? { value: xmax, inclusive: false } : { value: max, inclusive: true };
    let re: string;
    try {
      re = decimalRangeRegex(lower, upper);
    } catch (e) {
      throw new GrammarError(`${path}: ${(e as Error).message}`);
    }
    this.space();
    return this.add(name, `${regexToGbnf(re)} space`);
  }

  /** an integer, within minimum / maximum / exclusiveMinimum / exclusiveMaximum where given (int-range.ts) */
  private integer(s: Record<string, unknown>, name: string, path: string): string {
    const [min, max, xmin, xmax] = RANGE_KEYS.map((k) => rangeBound(s, k, path, Number.MAX_SAFE_INTEGER));
    if (min === undefined && max === undefined && xmin === undefined && xmax === undefined) return this.primitive("integer");
    const lows = [min === undefined ? undefined : Math.ceil(min), xmin === undefined ? undefined : Math.floor(xmin) + 1].filter((v): v is number => v !== undefined);
    const highs = [max === undefined ? undefined : Math.floor(max), xmax === undefined ? undefined : Math.ceil(xmax) - 1].filter((v): v is number => v !== undefined);
    const lo = lows.length > 0 ? Math.max(...lows) : undefined, hi = highs.length > 0 ? Math.min(...highs) : undefined;
    if (lo !== undefined && hi !== undefined && lo > hi) throw new GrammarError(`${path}: no integer lies between the bounds (${lo} > ${hi})`);
    this.space();
    return this.add(name, `${regexToGbnf(integerRangeRegex(lo, hi))} space`);
  }

  private string(s: Record<string, unknown>, name: string, path: string): string {
    const pattern = s["pattern"];
    if (pattern !== undefined) {
      if (typeof pattern !== "string") throw new GrammarError(`${path}/pattern: expected a regular expression string`);
      // a format beside a pattern is left to the pattern (zod writes the format's own expression there)
      for (const k of ["minLength", "maxLength"]) if (s[k] !== undefined) throw new GrammarError(`${path}/${k}: not supported together with pattern`);
      // a JSON Schema pattern matches anywhere in the string unless anchored
      const start = pattern.startsWith("^"), end = pattern.endsWith("$") && !pattern.endsWith("\\$");
      const core = pattern.slice(start ? 1 : 0, end ? -1 : undefined);
      let body: string;
      try {
        body = regexToGbnf(`${start ? "" : "[\\s\\S]*"}(?:${core})${end ? "" : "[\\s\\S]*"}`, true);
      } catch (e) {
        throw new GrammarError(`${path}/pattern: ${(e as Error).message}`);
      }
      this.space();
      return this.add(name, `"\\"" ${body} "\\"" space`);
    }
    const format = s["format"];
    if (format !== undefined) {
      const inner = format === "date-time" ? `${FORMATS["date"]} "T" ${FORMATS["time"]}` : typeof format === "string" && Object.hasOwn(FORMATS, format) ? FORMATS[format]! : undefined;
      if (!inner) throw new GrammarError(`${path}/format: ${JSON.stringify(format)} is not supported (date, time, date-time, uuid)`);
      return this.add(name, `"\\"" ${inner} "\\"" space`);
    }
    const min = s["minLength"] ?? 0, max = s["maxLength"];
    if (min === 0 && max === undefined) return this.primitive("string");
    for (const [k, v] of [["minLength", min], ["maxLength", max ?? 0]] as const) {
      if (!Number.isInteger(v) || (v as number) < 0 || (v as number) > MAX_REPETITION) throw new GrammarError(`${path}/${k}: expected an integer from 0 to ${MAX_REPETITION}, got ${JSON.stringify(v)}`);
    }
    this.primitive("string");
    return this.add(name, `"\\"" char{${min},${max ?? ""}} "\\"" space`);
  }

  private array(s: Record<string, unknown>, name: string, path: string, depth: number): string {
    const min = (s["minItems"] ?? 0) as number, max = s["maxItems"] as number | undefined;
    for (const [k, v] of [["minItems", min], ["maxItems", max ?? 0]] as const) {
      if (!Number.isInteger(v) || v < 0 || v > MAX_REPETITION) throw new GrammarError(`${path}/${k}: expected an integer from 0 to ${MAX_REPETITION}, got ${JSON.stringify(v)}`);
    }
    if (max !== undefined && max < min) throw new GrammarError(`${path}/maxItems: ${max} is below minItems ${min}`);
    // tuples: prefixItems (then items for the rest), or (draft 7) items as a list (then additionalItems)
    if (Array.isArray(s["prefixItems"])) return this.tuple(s["prefixItems"], "prefixItems", s["items"], "items", min, max, name, path, depth);
    if (Array.isArray(s["items"])) return this.tuple(s["items"], "items", s["additionalItems"], "additionalItems", min, max, name, path, depth);
    const item = s["items"] === undefined ? this.anyValue() : this.visit(s["items"], `${name}-item`, `${path}/items`, depth + 1);
    return this.list(item, min, max, name);
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
    const names = s["propertyNames"];
    // keys are strings anyway: only a string type (or any) says nothing more
    if (names !== undefined && names !== true && !(typeof names === "object" && names !== null && Object.keys(names).every((k) => k === "type" ? (names as Record<string, unknown>)[k] === "string" : ["title", "description"].includes(k)))) {
      throw new GrammarError(`${path}/propertyNames: only {"type": "string"} is supported`);
    }
    const props = (s["properties"] ?? {}) as Record<string, unknown>;
    if (typeof props !== "object" || Array.isArray(props)) throw new GrammarError(`${path}/properties: expected an object`);
    const required = new Set(Array.isArray(s["required"]) ? (s["required"] as unknown[]).map(String) : []);
    for (const r of required) if (!Object.hasOwn(props, r)) throw new GrammarError(`${path}/required: "${r}" is not among the properties`);
    const keys = Object.keys(props);
    const additional = s["additionalProperties"];
    if (keys.length === 0) {
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
    if (additional !== undefined && additional !== false) throw new GrammarError(`${path}/additionalProperties: only false is supported next to properties`);
    const kv = keys.map((k, i) => this.add(`${name}-${k.replace(/[^A-Za-z0-9-]/g, "-")}-kv`, `${gbnfLiteral(JSON.stringify(k))} space ":" space ${this.visit(props[k], `${name}-${i}`, `${path}/properties/${k}`, depth + 1)}`));
    // required properties in order, each optional one where it stands: a chain whose commas
    // come before every property but the first one present
    const tail = (i: number): string => keys.slice(i).map((k, j) => (required.has(k) ? `"," space ${kv[i + j]}` : `("," space ${kv[i + j]})?`)).join(" ");
    const firstRequired = keys.findIndex((k) => required.has(k));
    let body: string;
    if (firstRequired >= 0) {
      // optional ones before the first required: each followed by a comma
      const lead = keys.slice(0, firstRequired).map((_, i) => `(${kv[i]} "," space)?`).join(" ");
      body = `${lead ? `${lead} ` : ""}${kv[firstRequired]}${tail(firstRequired + 1) ? ` ${tail(firstRequired + 1)}` : ""}`;
    } else {
      // all optional: none, or a first one then any of the later ones
      const starts = keys.map((_, i) => `${kv[i]}${tail(i + 1) ? ` ${tail(i + 1)}` : ""}`);
      body = `(${starts.join(" | ")})?`;
    }
    return this.add(name, `"{" space ${body} "}" space`);
  }
}
