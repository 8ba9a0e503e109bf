// The public surface of the server: an OpenAI-compatible HTTP server on a Model.
export { OpenAIServer, startServer, type ServeOptions } from "./server.js";
export type { SettingNames } from "./setting-names.js";
export { ApiError } from "./errors.js";
export { DEFAULT_BODY_LIMIT, MAX_BODY_LIMIT } from "./http.js";
export { templateKwargsProblem } from "./requests.js";
export { checkSlotFolder } from "./slot-files.js";
export { allowedHostsProblem } from "./allowed-hosts.js";
