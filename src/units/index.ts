/** Formatting for messages (sizes, text safe for a terminal); imports nothing, so every layer may use it. */
export { formatBytes } from "./bytes.js";
export { printable } from "./printable.js";
