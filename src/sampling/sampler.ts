import { type Candidates, createCandidates, loadCandidates, softmaxCandidates, sortCandidates } from "./candidates.js";
import { applyTemperature, drawCandidate, epsilonCutoff, etaCutoff, minP, topK, topP, typicalP } from "./filters.js";
import { infillFilter, type InfillVocabulary } from "./infill.js";
import { applyLogitBias, applyPenalties } from "./logit-processors.js";
import { OptionError } from "../units/index.js";
import { resolveSamplingOptions, SAMPLER_ORDERS, type ResolvedSamplingOptions, type SamplerStep, type SamplingOptions } from "./options.js";
import { Mt19937 } from "./rng.js";

/** views into the sampler's buffers, valid until its next sample() call */
export interface TokenProbabilities {
  /** token ids, best first (higher probability, then lower id) */
  ids: Int32Array;
  /** their probabilities (summing to 1) */
  probs: Float32Array;
}

export interface Sampler {
  /** the validated options with defaults filled in, including the seed in use */
  readonly options: Readonly<ResolvedSamplingOptions>;
  /**
   * Picks the next token from a whole-vocabulary logits row; `history` holds the tokens so
   * far (prompt and generated), which the penalties look at. Does not modify `logits`.
   * `afterPenalties` changes the row (indexed by token id) after the logit bias and the
   * penalties, before temperature and the filters: where transformers' ExponentialDecayLengthPenalty
   * stands, after its RepetitionPenaltyLogitsProcessor.
   */
  sample(logits: Float32Array, history: ArrayLike<number>, afterPenalties?: (row: Float32Array) => void): number;
  /**
   * The candidates that survived the last sample() call and the probabilities they were
   * drawn with (after temperature), for logprobs. Greedy sampling leaves one candidate, p = 1.
   */
  lastProbabilities(): TokenProbabilities;
  /**
   * The distribution sample() would draw from, without drawing (no random number is used):
   * the candidates that survive the processors and their probabilities after temperature,
   * in the chain's order (not necessarily sorted). Greedy gives one candidate with p = 1.
   * Speculative sampling compares these for the draft and the target. Views as above.
   */
  distribution(logits: Float32Array, history: ArrayLike<number>): TokenProbabilities;
}

/** each step of a chain on the candidates, with its option's value */
const STEPS: Record<Exclude<SamplerStep, "penalties" | "infill">, (c: Candidates, o: ResolvedSamplingOptions) => void> = {
  temperature: (c, o) => applyTemperature(c, o.temperature),
  // transformers' TopKLogitsWarper keeps the ties of the k-th score; llama.cpp keeps exactly k
  topK: (c, o) => topK(c, o.topK, o.samplerOrder === "transformers"),
  topP: (c, o) => topP(c, o.topP, o.minKeep),
  minP: (c, o) => minP(c, o.minP, o.minKeep),
  // transformers' TypicalLogitsWarper keeps the mass reaching p and the ties of its last score; llama.cpp the prefix exceeding p
  typicalP: (c, o) => typicalP(c, o.typicalP, o.minKeep, o.samplerOrder === "transformers"),
};

/**
 * A sampler: logit bias -> penalties -> temperature and the filters in `samplerOrder`'s order
 * (default llama.cpp's chain: top-k -> typical-p -> top-p -> min-p -> temperature; see
 * SAMPLER_ORDERS; "transformers" then runs epsilon and eta sampling) -> softmax -> draw (mt19937, so a seed gives the same stream of random numbers
 * as llama.cpp's). It holds one candidate buffer and one RNG: use one sampler per sequence.
 * A chain with the "infill" step reads the model's `vocabulary` (infillVocabulary(tokenizer)).
 */
export function createSampler(options: SamplingOptions = {}, vocabulary?: InfillVocabulary): Sampler {
  const o = resolveSamplingOptions(options);
  const rng = new Mt19937(o.seed);
  const c = createCandidates(0);
  let sampled = false;
  const preset = typeof o.samplerOrder === "string";
  const steps = typeof o.samplerOrder === "string" ? SAMPLER_ORDERS[o.samplerOrder] : o.samplerOrder;
  // a chain without temperature draws from the unscaled logits even at temperature 0, as llama.cpp's does
  const greedy = o.temperature <= 0 && (preset || steps.includes("temperature"));
  if (steps.includes("infill") && vocabulary === undefined) throw new OptionError(`samplerOrder: the "infill" step needs the model's vocabulary (createSampler's second argument)`, "samplerOrder");

  /** every processor of the chain, leaving the survivors in `c` (greedy: the argmax, p = 1) */
  function process(logits: Float32Array, history: ArrayLike<number>, afterPenalties?: (row: Float32Array) => void): void {
    loadCandidates(c, logits);
    // candidates are in id order here, so c.logits is indexable by token id
    const row = c.logits;
    if (o.logitBias.size > 0) applyLogitBias(row, o.logitBias);
    // a preset always applies the penalties first; a chain where it lists them (only first: see resolveOrder)
    if (preset || steps[0] === "penalties") applyPenalties(row, history, o);
    afterPenalties?.(row);
    if (greedy && preset) applyTemperature(c, 0);
    else {
      for (const step of steps) {
        if (step === "infill") infillFilter(c, vocabulary!);
        else if (step !== "penalties") STEPS[step](c, o);
      }
      // transformers' EpsilonLogitsWarper and EtaLogitsWarper come after its typical-p (resolveSamplingOptions refuses them in other orders)
      if (o.samplerOrder === "transformers") {
        epsilonCutoff(c, o.epsilonCutoff, o.minKeep);
        etaCutoff(c, o.etaCutoff, o.minKeep);
      }
    }
    if (greedy) softmaxCandidates(c);
  }

  return {
    options: o,
    sample(logits: Float32Array, history: ArrayLike<number>, afterPenalties?: (row: Float32Array) => void): number {
      sampled = false;
      process(logits, history, afterPenalties);
      const token = greedy ? c.ids[0]! : drawCandidate(c, rng);
      sampled = true;
      return token;
    },
    distribution(logits: Float32Array, history: ArrayLike<number>): TokenProbabilities {
      sampled = false;
      process(logits, history);
      if (!greedy) softmaxCandidates(c);
      sampled = true;
      return { ids: c.ids.subarray(0, c.size), probs: c.probs.subarray(0, c.size) };
    },
    lastProbabilities(): TokenProbabilities {
      if (!sampled) throw new Error("lastProbabilities(): sample() has not completed yet");
      if (!c.sorted) {
        // sorting permutes ids and logits only; recomputing from the logits gives the same probs
        sortCandidates(c);
        softmaxCandidates(c);
      }
      return { ids: c.ids.subarray(0, c.size), probs: c.probs.subarray(0, c.size) };
    },
  };
}
