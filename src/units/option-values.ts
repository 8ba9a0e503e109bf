import { OptionError } from "./option-error.js";

/** a value as an error message shows it: strings quoted, so "8" is not taken for 8 */
export function shownValue(value: unknown): string {
  return typeof value === "string" ? JSON.stringify(value) : Array.isArray(value) ? `an array` : value === null ? "null" : typeof value === "object" ? "an object" : String(value);
}

/**
 * Refuses, naming it, a flag of `options` that is given but is not a boolean (`warmup: "no"`,
 * `addSpecialTokens: "false"`: a string is truthy, so it would turn the flag on without a word).
 * `what` prefixes the message (the call or task it belongs to).
 */
export function checkFlags(options: Readonly<Record<string, unknown>>, flags: readonly string[], what?: string): void {
  for (const flag of flags) {
    const v = options[flag];
    if (v !== undefined && typeof v !== "boolean") throw new OptionError(`${what ? `${what}: ` : ""}${flag}: expected true or false, got ${shownValue(v)}`, flag);
  }
}
