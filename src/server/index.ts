// The public surface of the server: an OpenAI-compatible HTTP server on a Model.
export { OpenAIServer, startServer, type ServeOptions } from "./server.js";
export { ApiError } from "./errors.js";
export { templateKwargsProblem } from "./requests.js";
