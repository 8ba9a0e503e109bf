/** Formatting of quantities for messages; imports nothing, so every layer may use it. */
export { formatBytes } from "./bytes.js";
