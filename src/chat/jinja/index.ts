/**
 * A Jinja engine with Python jinja2 3.1's grammar and semantics (as transformers renders chat
 * templates): lexer, parser with source lines, and an interpreter over Python's value model.
 */
export { Interpreter, RenderLimitError, checkFiltersAndTests, jinjaGlobals } from "./interpreter.js";
export { TemplateSyntaxError, tokenize, type Token } from "./lexer.js";
export { parse, type Stmt } from "./parser.js";
export { Callable, Float, TemplateRuntimeError, fromJS, num, pyRange, str, type Value } from "./values.js";
