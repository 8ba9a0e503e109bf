/** softmax of one row, as transformers' pipelines compute it (shifted by the max) */
export function softmax(row: ArrayLike<number>): number[] {
  let max = -Infinity;
  for (let i = 0; i < row.length; i++) if (row[i]! > max) max = row[i]!;
  const e = Array.from(row, (x) => Math.exp(x - max));
  const sum = e.reduce((a, b) => a + b, 0);
  return e.map((x) => x / sum);
}

export function sigmoid(row: ArrayLike<number>): number[] {
  return Array.from(row, (x) => 1 / (1 + Math.exp(-x)));
}

/** index of the largest value (the first on a tie, as numpy's argmax) */
export function argmax(row: ArrayLike<number>): number {
  let best = 0;
  for (let i = 1; i < row.length; i++) if (row[i]! > row[best]!) best = i;
  return best;
}

/** the k largest (value, index) pairs, largest first; ties keep index order */
export function topK(row: ArrayLike<number>, k: number): { value: number; index: number }[] {
  if (k <= 0) return [];
  const idx = Array.from({ length: row.length }, (_, i) => i);
  if (k >= row.length) return idx.sort((a, b) => row[b]! - row[a]! || a - b).map((i) => ({ value: row[i]!, index: i }));
  // partial selection: keep a small sorted list
  const best: number[] = [];
  for (let i = 0; i < row.length; i++) {
    const v = row[i]!;
    if (best.length === k && v <= row[best[k - 1]!]!) continue;
    let at = best.length;
    while (at > 0 && row[best[at - 1]!]! < v) at--;
    best.splice(at, 0, i);
    if (best.length > k) best.pop();
  }
  return best.map((i) => ({ value: row[i]!, index: i }));
}
