/** Constrained decoding: grammars (GBNF, JSON Schema) enforced on the tokens a sequence may take. */
export { GrammarError, type Grammar } from "./grammar.js";
export { gbnfAlternatives, parseGbnf, type GbnfLimits } from "./gbnf.js";
export { GrammarMatcher } from "./matcher.js";
export { anyJsonGbnf, gbnfLiteral, jsonSchemaToGbnf, strictSchemaProblem, type JsonSchema } from "./json-schema.js";
export { regexToGbnf } from "./regex.js";
export { ConstraintVocabulary } from "./vocabulary.js";
export { TokenConstraint } from "./token-constraint.js";
export { compileConstraint, type ConstraintSpec } from "./spec.js";
