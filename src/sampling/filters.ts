import {
  bestIndex,
  type Candidates,
  expCandidates,
  maxLogit,
  normalizeCandidates,
  selectBest,
  softmaxCandidates,
  sortCandidates,
} from "./candidates.js";
import type { UniformSource } from "./rng.js";

/**
 * Candidate filters with llama.cpp's semantics (src/llama-sampling.cpp). Each works in place
 * on a `Candidates` set and keeps no state. Probabilities mentioned below are the softmax of
 * the alive candidates' current logits.
 */

/**
 * Keeps the k best candidates, best first; k <= 0 disables. `keepTies`: also every candidate
 * whose logit equals the k-th one, as transformers' TopKLogitsWarper removes only the scores
 * below it (llama.cpp keeps exactly k; ties go to the lower id).
 */
export function topK(c: Candidates, k: number, keepTies = false): void {
  if (k <= 0) return;
  k = Math.min(k, c.size);
  if (!c.sorted) selectBest(c, k);
  if (keepTies) k = gatherTies(c, k);
  c.size = k;
  c.sorted = true;
}

/**
 * Puts the candidates tied with the k-th (of a best-first prefix of k) right after it, lowest id
 * first (the order "better" gives equal logits); returns the new count. What they overwrite lies
 * past the prefix, which top-k drops anyway. Ties at -Infinity carry no probability: left out.
 */
function gatherTies(c: Candidates, k: number): number {
  const { ids, logits } = c;
  const tie = logits[k - 1]!;
  if (tie === -Infinity) return k;
  if (c.sorted) {
    while (k < c.size && logits[k] === tie) k++;
    return k;
  }
  const tied: number[] = [];
  for (let i = k; i < c.size; i++) if (logits[i] === tie) tied.push(ids[i]!);
  tied.sort((a, b) => a - b);
  tied.forEach((id, n) => {
    ids[k + n] = id;
    logits[k + n] = tie;
  });
  return k + tied.length;
}

/** above this many candidates top-p first tries the best 256 only, as llama.cpp does */
const TOP_P_FULL_SORT_LIMIT = 1024;
const TOP_P_FIRST_GUESS = 256;

/**
 * Nucleus sampling: keeps the smallest best-first prefix whose cumulative probability is
 * >= p (and at least `minKeep` tokens); p >= 1 disables. Leaves the set sorted.
 */
export function topP(c: Candidates, p: number, minKeep = 1): void {
  if (p >= 1) return;
  const sum = expCandidates(c); // probs[] now hold unnormalized exps, in the current order
  const max = maxLogit(c);
  // sorting permutes logits but not probs, so the scan recomputes each exp from the logit
  let sortedUpTo = c.size;
  if (!c.sorted) {
    sortedUpTo = c.size > TOP_P_FULL_SORT_LIMIT ? TOP_P_FIRST_GUESS : c.size;
    selectBest(c, sortedUpTo);
  }
  const logits = c.logits;
  let cum = 0;
  let keep = c.size;
  for (let i = 0; i < c.size; i++) {
    if (i === sortedUpTo) {
      // the best 256 were not enough: sort the rest too (the sorted prefix stays put)
      selectBest(c, c.size);
      sortedUpTo = c.size;
    }
    cum += Math.fround(Math.exp(logits[i]! - max)) / sum;
    if (cum >= p && i + 1 >= minKeep) {
      keep = i + 1;
      break;
    }
  }
  c.size = keep;
  c.sorted = true;
}

let typicalOrder = new Int32Array(0);
let typicalScore = new Float64Array(0);

/**
 * Locally typical sampling (Meister et al. 2022), as llama.cpp's typical sampler: with H the
 * entropy of the softmax, candidates are ranked by |-ln p - H| (closest to the expected
 * surprise first) and the shortest such prefix whose probability mass exceeds p (strictly)
 * is kept, at least `minKeep` entries. p >= 1 disables. Leaves the survivors in that
 * typicality order (not sorted), as llama.cpp does, so a following draw walks them in it.
 *
 * Differences from llama.cpp, both at degenerate inputs: a candidate with probability 0
 * contributes 0 to H (llama.cpp computes 0 * -inf = NaN, which poisons every comparison),
 * and ties in |-ln p - H| keep the best-first order (llama.cpp's std::sort leaves them
 * unspecified). llama.cpp's common defaults pass min_keep = 0, which its unsigned
 * `i >= min_keep - 1` wraps to "never cut"; here minKeep <= 1 both mean "at least one".
 * `transformersRule`: transformers' TypicalLogitsWarper instead, which keeps the prefix whose
 * mass reaches p (>=, not >) and every token whose score ties the last kept one's.
 */
export function typicalP(c: Candidates, p: number, minKeep = 1, transformersRule = false): void {
  if (p >= 1 || c.size === 0) return;
  sortCandidates(c);
  softmaxCandidates(c);
  const n = c.size;
  const { ids, logits, probs } = c;
  let entropy = 0;
  for (let i = 0; i < n; i++) {
    const q = probs[i]!;
    if (q > 0) entropy -= q * Math.log(q);
  }
  if (typicalOrder.length < n) {
    typicalOrder = new Int32Array(n);
    typicalScore = new Float64Array(n);
  }
  const order = typicalOrder.subarray(0, n);
  const score = typicalScore;
  for (let i = 0; i < n; i++) {
    order[i] = i;
    score[i] = Math.abs(-Math.log(probs[i]!) - entropy);
  }
  // stable on ties because the index breaks them: equal scores stay best first
  order.sort((a, b) => score[a]! - score[b]! || a - b);
  let keep = n;
  let cum = 0;
  for (let i = 0; i < n; i++) {
    cum += probs[order[i]!]!;
    // transformers' TypicalLogitsWarper: the first index whose running mass reaches p (last_ind = count of cum < mass)
    if ((transformersRule ? cum >= p : cum > p) && i + 1 >= minKeep) {
      keep = i + 1;
      break;
    }
  }
  // ... and it removes only the scores above that index's: the tokens tied with it stay
  if (transformersRule) while (keep < n && score[order[keep]!] === score[order[keep - 1]!]) keep++;
  // gather the survivors in typicality order; sources are read before the in-place overwrite
  const keptIds = new Int32Array(keep);
  const keptLogits = new Float32Array(keep);
  const keptProbs = new Float32Array(keep);
  for (let i = 0; i < keep; i++) {
    const j = order[i]!;
    keptIds[i] = ids[j]!;
    keptLogits[i] = logits[j]!;
    keptProbs[i] = probs[j]!;
  }
  ids.set(keptIds);
  logits.set(keptLogits);
  probs.set(keptProbs);
  c.size = keep;
  c.sorted = false;
}

/**
 * transformers' EpsilonLogitsWarper: drops the candidates whose probability (the softmax of the
 * alive ones) is below `epsilon`, except those whose logit is not below the minKeep-th best one's
 * (at least the best and its ties stay). Outside (0, 1) it does nothing, as generate() adds the
 * warper only for 0 < epsilon_cutoff < 1. Keeps the relative order of the survivors.
 */
export function epsilonCutoff(c: Candidates, epsilon: number, minKeep = 1): void {
  if (!(epsilon > 0 && epsilon < 1) || c.size === 0) return;
  softmaxCandidates(c);
  dropBelow(c, epsilon, minKeep);
}

/**
 * transformers' EtaLogitsWarper: as epsilonCutoff with the cutoff min(eta, sqrt(eta) * exp(-H)),
 * H the entropy of the alive candidates' softmax (a flatter distribution cuts less). Outside
 * (0, 1) it does nothing, as generate() adds the warper only for 0 < eta_cutoff < 1.
 */
export function etaCutoff(c: Candidates, eta: number, minKeep = 1): void {
  if (!(eta > 0 && eta < 1) || c.size === 0) return;
  softmaxCandidates(c);
  const probs = c.probs;
  let entropy = 0;
  for (let i = 0; i < c.size; i++) {
    const q = probs[i]!;
    if (q > 0) entropy -= q * Math.log(q);
  }
  // the warper holds eta as a float32 tensor, so the cutoff is float32 arithmetic
  const f = Math.fround;
  dropBelow(c, Math.min(f(eta), f(f(Math.sqrt(eta)) * f(Math.exp(-entropy)))), minKeep);
}

/** keeps the candidates whose probability (c.probs, normalized) reaches `cutoff` or whose logit reaches the minKeep-th best, in their order */
function dropBelow(c: Candidates, cutoff: number, minKeep: number): void {
  const k = Math.min(Math.max(minKeep, 1), c.size);
  const { ids, logits, probs } = c;
  const floor = k === 1 ? maxLogit(c) : Float32Array.from(logits.subarray(0, c.size)).sort().at(-k)!;
  // torch compares its float32 probabilities with the cutoff as a float32
  const limit = Math.fround(cutoff);
  let w = 0;
  for (let i = 0; i < c.size; i++) {
    if (probs[i]! >= limit || logits[i]! >= floor) {
      ids[w] = ids[i]!;
      logits[w] = logits[i]!;
      probs[w] = probs[i]!;
      w++;
    }
  }
  c.size = w;
}

/**
 * Keeps candidates whose probability is >= p times the best one's, i.e. whose logit is
 * >= max + ln(p); the best is always kept, and at least `minKeep`. p <= 0 disables.
 * Keeps the relative order of the survivors.
 */
export function minP(c: Candidates, p: number, minKeep = 1): void {
  if (p <= 0 || c.size === 0) return;
  const threshold = maxLogit(c) + Math.log(p);
  const logits = c.logits;
  let count = 0;
  for (let i = 0; i < c.size; i++) if (logits[i]! >= threshold) count++;
  if (count < minKeep) {
    topK(c, minKeep);
    return;
  }
  if (c.sorted) {
    c.size = count; // survivors are exactly the sorted prefix
    return;
  }
  const ids = c.ids;
  let w = 0;
  for (let i = 0; i < c.size; i++) {
    if (logits[i]! >= threshold) {
      ids[w] = ids[i]!;
      logits[w] = logits[i]!;
      w++;
    }
  }
  c.size = w;
}

/**
 * Divides logits by t (after subtracting the max when that is needed to stay finite: the
 * softmax is unchanged). t <= 0 means greedy: only the best candidate survives (the lowest id
 * among equal maxima).
 */
export function applyTemperature(c: Candidates, t: number): void {
  if (t <= 0) {
    const b = bestIndex(c);
    c.ids[0] = c.ids[b]!;
    c.logits[0] = c.logits[b]!;
    c.size = 1;
    c.sorted = true;
    return;
  }
  const logits = c.logits;
  // a tiny t can push max / t past the float32 range, and Infinity - Infinity is NaN in the
  // softmax; subtracting the max first gives the same softmax with the top at 0
  const max = maxLogit(c);
  const shift = max > -Infinity && !Number.isFinite(Math.fround(max / t)) ? max : 0;
  for (let i = 0; i < c.size; i++) logits[i] = (logits[i]! - shift) / t;
}

/**
 * Draws one token from the softmax of the alive candidates, as llama.cpp's dist sampler
 * does: u from `rng`, then the first candidate (in the current order) whose running sum of
 * unnormalized probabilities reaches u * total. Exactly one number is drawn per call, even
 * for a single candidate (as llama.cpp does since it aligned CPU and backend sampling), so
 * the random stream does not depend on how many candidates survived. Leaves normalized
 * probabilities in `c.probs`.
 */
export function drawCandidate(c: Candidates, rng: UniformSource): number {
  const sum = expCandidates(c);
  const target = sum * rng.nextDouble();
  const probs = c.probs;
  let chosen = c.size - 1; // only reachable through rounding, as in llama.cpp
  let run = 0;
  for (let i = 0; i < c.size; i++) {
    run += probs[i]!;
    if (run >= target) {
      chosen = i;
      break;
    }
  }
  normalizeCandidates(c, sum);
  return c.ids[chosen]!;
}
