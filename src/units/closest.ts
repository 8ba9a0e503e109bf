/**
 * "Did you mean": the one ranking of a mistyped name against the names it may mean, for the CLI's
 * options, tasks and quantization types and for the library's options objects alike, so that both
 * suggest the same option for the same typo. Like commander's suggestSimilar, it counts edits with
 * Damerau-Levenshtein's optimal string alignment and refuses suggestions that changed too much of
 * the name; a shortened name counts as one typo (llama.cpp's --temp for temperature).
 */

/** QWERTY's rows, each shifted half a key right of the one above: a key's neighbours, for a typo's tie-break */
const KEY_ROWS = ["1234567890-", "qwertyuiop", "asdfghjkl", "zxcvbnm"];

/** whether two keys are next to each other on a QWERTY keyboard (n and m, s and d, q and a) */
function neighbourKeys(x: string, y: string): boolean {
  const at = (k: string) => KEY_ROWS.map((row, r) => [r, row.indexOf(k)] as const).find(([, c]) => c >= 0);
  const a = at(x.toLowerCase()), b = at(y.toLowerCase());
  if (a === undefined || b === undefined) return false;
  const [[r1, c1], [r2, c2]] = a[0] <= b[0] ? [a, b] : [b, a];
  // a row's key c sits under the keys c and c + 1 of the row above
  return (r1 === r2 && Math.abs(c1 - c2) === 1) || (r2 === r1 + 1 && (c1 === c2 || c1 === c2 + 1));
}

/**
 * edit distance, for "did you mean": Damerau-Levenshtein's optimal string alignment, a swap of two
 * neighbouring letters (--sede for --seed) one edit as a letter changed is. `near` is what a letter
 * changed to a neighbouring key costs (less than 1 only to break a tie: q4_k_n is q4_k_m, not q4_k_s)
 */
function distance(a: string, b: string, near = 1): number {
  let before: number[] = [], prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    for (let j = 1; j <= b.length; j++) {
      const change = a[i - 1] === b[j - 1] ? 0 : neighbourKeys(a[i - 1]!, b[j - 1]!) ? near : 1;
      let d = Math.min(prev[j]! + 1, row[j - 1]! + 1, prev[j - 1]! + change);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) d = Math.min(d, before[j - 2]! + 1);
      row.push(d);
    }
    [before, prev] = [prev, row];
  }
  return prev[b.length]!;
}

/** how many letters two names share at their start */
function sharedStart(a: string, b: string): number {
  let i = 0;
  while (i < a.length && i < b.length && a[i] === b[i]) i++;
  return i;
}

/**
 * the closest of `names` to a mistyped `name` (a third of its letters or fewer changed, or a prefix
 * of one), if any. A shortened name (--ctx for --ctx-size) is as near as one typo, from three letters
 * on; among names as near, the fewest edits wins (q4_k_n is q4_k_m, one letter, not the shorter q4_k
 * it starts with), then the fewest with a letter's neighbouring key counted half (q4_k_m over q4_k_s:
 * n is next to m), then the longest shared start, then the first listed
 */
export function closest(name: string, names: Iterable<string>): string | undefined {
  let best: string | undefined, bestRank: readonly number[] = [Infinity];
  for (const n of names) {
    const edits = distance(name, n);
    const prefix = n.startsWith(name) || name.startsWith(n) ? (Math.min(n.length, name.length) >= 3 ? 1 : Math.abs(n.length - name.length) / 2) : Infinity;
    const rank = [Math.min(prefix, edits), edits, distance(name, n, 0.5), -sharedStart(name, n)];
    const i = rank.findIndex((r, k) => r !== bestRank[k]);
    if (i >= 0 && rank[i]! < (bestRank[i] ?? Infinity)) [best, bestRank] = [n, rank];
  }
  return best !== undefined && bestRank[0]! <= Math.max(1, Math.floor(name.length / 3)) ? best : undefined;
}

