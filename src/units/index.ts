/** Formatting and checks for messages (sizes, text safe for a terminal, unknown option names), and one abort listener per signal shared by many calls; imports nothing, so every layer may use it. */
export { formatBytes } from "./bytes.js";
export { printable } from "./printable.js";
export { checkOptionKeys } from "./option-keys.js";
export { closest } from "./closest.js";
export { OptionError } from "./option-error.js";
export { checkFlags, shownValue } from "./option-values.js";
export { DisposedError } from "./disposed-error.js";
export { onAbort } from "./abort-listeners.js";
