/**
 * Processors over a whole-vocabulary logits row indexed by token id. They modify `logits`
 * in place and keep no state, so the sampler, beam search and the server can call them on
 * any row.
 */

/** token id -> additive bias; -Infinity bans a token */
export type LogitBias = ReadonlyMap<number, number>;

/** logits[id] += bias for every entry, as llama.cpp's logit-bias sampler does */
export function applyLogitBias(logits: Float32Array, bias: LogitBias): void {
  for (const [id, b] of bias) {
    if (id >= logits.length) {
      throw new RangeError(
        `logitBias: token id ${id} is outside the vocabulary (expected 0 <= id < ${logits.length})`,
      );
    }
    logits[id] = logits[id]! + b;
  }
}

export interface PenaltyOptions {
  /** > 0; 1 = off */
  repeatPenalty: number;
  /** window of most recent history tokens that count; -1 = the whole history, 0 = off */
  repeatLastN: number;
  /** subtracted once per occurrence in the window; 0 = off */
  frequencyPenalty: number;
  /** subtracted once if the token occurs in the window; 0 = off */
  presencePenalty: number;
}

export function penaltiesActive(p: PenaltyOptions): boolean {
  return (
    p.repeatLastN !== 0 &&
    (p.repeatPenalty !== 1 || p.frequencyPenalty !== 0 || p.presencePenalty !== 0)
  );
}

/**
 * llama.cpp's penalties sampler. For every token that occurs `count` > 0 times among the last
 * `repeatLastN` entries of `history`:
 *   logit = logit <= 0 ? logit * repeatPenalty : logit / repeatPenalty
 *   logit -= count * frequencyPenalty + presencePenalty
 * (multiplying negative logits keeps a penalty a penalty; dividing them would raise them).
 */
export function applyPenalties(
  logits: Float32Array,
  history: ArrayLike<number>,
  p: PenaltyOptions,
): void {
  if (!penaltiesActive(p)) return;
  const start = p.repeatLastN < 0 ? 0 : Math.max(0, history.length - p.repeatLastN);
  const counts = new Map<number, number>();
  for (let i = start; i < history.length; i++) {
    const id = history[i]!;
    if (!Number.isInteger(id) || id < 0 || id >= logits.length) {
      throw new RangeError(
        `history[${i}] = ${id}: expected a token id, an integer in [0, ${logits.length})`,
      );
    }
    counts.set(id, (counts.get(id) ?? 0) + 1);
  }
  for (const [id, count] of counts) {
    let l = logits[id]!;
    l = l <= 0 ? l * p.repeatPenalty : l / p.repeatPenalty;
    logits[id] = l - (count * p.frequencyPenalty + p.presencePenalty);
  }
}

/** greedy choice over a logits row: the highest logit, the lowest id on ties */
export function argmax(logits: ArrayLike<number>): number {
  if (logits.length === 0) throw new RangeError("logits: expected at least one token, got an empty array");
  let best = 0;
  let max = logits[0]!;
  for (let i = 1; i < logits.length; i++) {
    // strict > keeps the first (lowest) id among equal maxima
    if (logits[i]! > max) {
      max = logits[i]!;
      best = i;
    }
  }
  return best;
}
