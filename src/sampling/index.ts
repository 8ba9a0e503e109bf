export { createSampler, type Sampler, type TokenProbabilities } from "./sampler.js";
export {
  DEFAULT_SAMPLING,
  RANDOM_SEED,
  resolveSamplingOptions,
  SAMPLER_ORDERS,
  SAMPLING_OPTION_NAMES,
  type ResolvedSamplingOptions,
  type SamplerOrder,
  type SamplerStep,
  type SamplingOptions,
} from "./options.js";
export { llamaCppSamplerNames, samplerStepsFromLlamaCpp } from "./order.js";
export { Mt19937, randomSeed, type UniformSource } from "./rng.js";
export {
  applyLogitBias,
  applyPenalties,
  argmax,
  penaltiesActive,
  type LogitBias,
  type PenaltyOptions,
} from "./logit-processors.js";
export {
  bestIndex,
  createCandidates,
  expCandidates,
  loadCandidates,
  maxLogit,
  normalizeCandidates,
  selectBest,
  softmaxCandidates,
  sortCandidates,
  type Candidates,
} from "./candidates.js";
export { applyTemperature, drawCandidate, epsilonCutoff, etaCutoff, minP, topK, topP, typicalP } from "./filters.js";
export { infillFilter, infillVocabulary, type InfillTokenizer, type InfillVocabulary } from "./infill.js";
