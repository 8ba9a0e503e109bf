import { closest } from "./closest.js";
import { OptionError } from "./option-error.js";

/**
 * Refuses an options object's unknown key in one line that names it, suggests the option it
 * likely misspells and lists the known ones: a misspelled option (`contextsize`) would otherwise
 * be ignored and the default used without a word.
 */
export function checkOptionKeys(options: object, known: readonly string[], what?: string): void {
  for (const key of Object.keys(options)) {
    if (known.includes(key)) continue;
    // matched in any case (contextsize, top_k's topk), with the CLI's ranking: the nearest, not the first near one
    const lower = new Map(known.map((name) => [name.toLowerCase(), name]));
    const near = lower.get(closest(key.toLowerCase(), lower.keys()) ?? "");
    throw new OptionError(`${what ? `${what}: ` : ""}unknown option ${JSON.stringify(key)}${near ? ` (did you mean ${near}?)` : ""}; the options are ${known.join(", ")}`, key);
  }
}
