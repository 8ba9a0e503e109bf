import { parseGbnf } from "./gbnf.js";
import { GrammarError, type Grammar } from "./grammar.js";
import { anyJsonGbnf, gbnfLiteral, jsonSchemaToGbnf, type JsonSchema } from "./json-schema.js";
import { GrammarMatcher } from "./matcher.js";
import { regexToGbnf } from "./regex.js";

/**
 * What a request's output must be: a GBNF grammar, a JSON Schema, any JSON value / object
 * (`json: "object"` is OpenAI's json_object mode), one of a list of strings, or a match of a
 * regular expression (the whole output).
 */
export type ConstraintSpec =
  | { readonly grammar: string }
  | { readonly jsonSchema: JsonSchema }
  | { readonly json: "value" | "object" }
  | { readonly choice: readonly string[] }
  | { readonly regex: string };

/**
 * The grammar a spec stands for; GrammarError (naming the position or schema path) when it is
 * invalid, or when its start cannot be expanded (rules that nest too deep without a character),
 * so such a grammar is refused when the request is submitted rather than failing mid-generation.
 */
export function compileConstraint(spec: ConstraintSpec): Grammar {
  const g = compileSpec(spec);
  new GrammarMatcher(g).initial();
  return g;
}

function compileSpec(spec: ConstraintSpec): Grammar {
  if ("grammar" in spec) return parseGbnf(spec.grammar);
  if ("jsonSchema" in spec) return parseGbnf(jsonSchemaToGbnf(spec.jsonSchema));
  if ("json" in spec) return parseGbnf(anyJsonGbnf(spec.json));
  if ("choice" in spec) {
    if (!Array.isArray(spec.choice) || spec.choice.length === 0 || spec.choice.some((c) => typeof c !== "string")) throw new GrammarError("choice: expected a non-empty list of strings");
    return parseGbnf(`root ::= ${spec.choice.map(gbnfLiteral).join(" | ")}`);
  }
  if ("regex" in spec) {
    if (typeof spec.regex !== "string") throw new GrammarError("regex: expected a string");
    return parseGbnf(`root ::= ${regexToGbnf(spec.regex)}`);
  }
  throw new GrammarError("expected one of grammar, jsonSchema, json, choice or regex");
}
