import { OptionError } from "./option-error.js";

/**
 * Refuses an options object's unknown key in one line that names it, suggests the option it
 * likely misspells and lists the known ones: a misspelled option (`contextsize`) would otherwise
 * be ignored and the default used without a word.
 */
export function checkOptionKeys(options: object, known: readonly string[], what?: string): void {
  for (const key of Object.keys(options)) {
    if (known.includes(key)) continue;
    const near = known.find((name) => editDistance(name.toLowerCase(), key.toLowerCase()) <= 2);
    throw new OptionError(`${what ? `${what}: ` : ""}unknown option ${JSON.stringify(key)}${near ? ` (did you mean ${near}?)` : ""}; the options are ${known.join(", ")}`, key);
  }
}

/** Levenshtein distance, for suggesting the option a misspelled one meant */
function editDistance(a: string, b: string): number {
  let row = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const next = [i];
    for (let j = 1; j <= b.length; j++) next[j] = Math.min(row[j]! + 1, next[j - 1]! + 1, row[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
    row = next;
  }
  return row[b.length]!;
}
