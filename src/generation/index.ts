export {
  checkGenerateOptions, constraintOf, samplingOptionsOf, usesStrategy, validateChoices, type Choice, type EndToken, type FinishDetail, type FinishReason, type GenerateOptions, type GenerationResult, type GenerationStep, type TokenStep, type EndStep,
} from "./generate.js";
export { Sequence, type StopRules, type TokenBans } from "./sequence.js";
export { LineWatch, lineLimitsOf, type LineLimitHit, type LineLimits } from "./line-limits.js";
export { cancelOnEarlyExit } from "./early-exit.js";
export { checkGenerateRanges, validateMaxTokens, validateTokenBans } from "./check-ranges.js";
export { tokenLogprobs, validateLogprobs, type PromptLogprobs, type TokenLogprob, type TopLogprob } from "./logprobs.js";
export { createStopMatcher, validateStopStrings, type StopMatcher } from "./stop-strings.js";
export { computeTimings, decodeRates, formatTimings, type Timings } from "./timings.js";
export { timeGreedyForward, warmUpForward, type ForwardTiming } from "./forward-timing.js";
export { BeamSearch, beamSearch, validateBeamOptions, type BeamExtension, type BeamSearchOptions, type BeamSequence } from "./beam.js";
export { SpeculativeDecoder, speculativeGreedy, speculativePositions, validateSpeculative, type DraftPass, type SpeculativeOptions, type SpeculativeSampling, type SpeculativeStats } from "./speculative.js";
