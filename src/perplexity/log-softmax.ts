/**
 * Log-softmax helpers over one logits row, in float64 (llama.cpp's perplexity tool sums the
 * exponentials in double too; doing the whole thing in double keeps us at least as accurate).
 */

/** log(sum(exp(row))) computed stably (shifted by the row's maximum) */
export function logSumExp(row: ArrayLike<number>): number {
  let max = -Infinity;
  for (let i = 0; i < row.length; i++) if (row[i]! > max) max = row[i]!;
  if (max === -Infinity) return -Infinity;
  let sum = 0;
  for (let i = 0; i < row.length; i++) sum += Math.exp(row[i]! - max);
  return max + Math.log(sum);
}

/** -log p(token) under softmax(row) */
export function tokenNll(row: ArrayLike<number>, token: number): number {
  if (!Number.isInteger(token) || token < 0 || token >= row.length) {
    throw new RangeError(`token ${token} is outside the logits row (vocabulary of ${row.length})`);
  }
  return logSumExp(row) - row[token]!;
}

/** out[i] = log softmax(row)[i]; returns out */
export function logSoftmaxInto(out: Float64Array, row: ArrayLike<number>): Float64Array {
  if (out.length !== row.length) throw new RangeError(`logSoftmaxInto: output holds ${out.length} values, the row ${row.length}`);
  const lse = logSumExp(row);
  for (let i = 0; i < row.length; i++) out[i] = row[i]! - lse;
  return out;
}

/** index of the largest value (the lowest index wins ties) */
export function argmaxOf(row: ArrayLike<number>): number {
  let best = 0;
  for (let i = 1; i < row.length; i++) if (row[i]! > row[best]!) best = i;
  return best;
}
