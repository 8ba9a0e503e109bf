/**
 * The checks of a generation's options that need no model: the ranges of the numbers, the stop
 * strings, the combinations of decoding strategies. Model.submit and the engine run them where
 * the options are used (with the model's own checks: token ids against its vocabulary, the
 * prompt against its context); a caller that has no model at hand — the browser build's page,
 * whose model lives in a worker — runs them here, so that a bad value throws at its call with
 * the message Node gives, not at the first step of a stream.
 */
import { resolveSamplingOptions } from "../sampling/index.js";
import { OptionError, shownValue } from "../units/index.js";
import { validateBeamOptions } from "./beam.js";
import { constraintOf, samplingOptionsOf, usesStrategy, validateChoices, type GenerateOptions } from "./generate.js";
import { validateLogprobs } from "./logprobs.js";
import { validateSpeculative } from "./speculative.js";
import { validateStopStrings } from "./stop-strings.js";

/** throws an OptionError naming maxTokens unless it is a whole number >= 0 */
export function validateMaxTokens(maxTokens: unknown): void {
  if (!Number.isInteger(maxTokens) || (maxTokens as number) < 0) throw new OptionError(`maxTokens must be a non-negative integer, got ${shownValue(maxTokens)}`, "maxTokens");
}

/** what an option's own validator threw, as an OptionError naming the option (as the engine's RequestError does) */
function naming(option: string, check: () => void): void {
  try {
    check();
  } catch (e) {
    throw e instanceof OptionError ? e : new OptionError((e as Error).message, option);
  }
}

/**
 * Refuses, in the order Model.submit and the engine do, every option value that is wrong whatever
 * the model: `n` and the strategies it cannot be combined with, two constraints at once, logprobs
 * with a strategy, maxTokens, logprobs and promptLogprobs, the sampling options' ranges, the stop
 * strings, beam search's and speculative decoding's numbers. Run after checkGenerateOptions.
 */
export function checkGenerateRanges(options: GenerateOptions): void {
  validateChoices(options);
  if (usesStrategy(options) && options.logprobs !== undefined) throw new OptionError("logprobs are not available with beam search or speculative decoding", "logprobs");
  constraintOf(options);
  if (options.maxTokens !== undefined) validateMaxTokens(options.maxTokens);
  validateLogprobs(options.logprobs);
  validateLogprobs(options.promptLogprobs, "promptLogprobs");
  resolveSamplingOptions(samplingOptionsOf(options));
  const stop = options.stop === undefined ? [] : typeof options.stop === "string" ? [options.stop] : [...options.stop];
  naming("stop", () => validateStopStrings(stop));
  if (options.numBeams !== undefined) {
    const { numBeams, lengthPenalty, earlyStopping, numReturnSequences, noRepeatNgramSize } = options;
    validateBeamOptions({ numBeams, lengthPenalty, earlyStopping, numReturnSequences, noRepeatNgramSize });
  } else if (usesStrategy(options)) {
    validateSpeculative({ draftTokens: options.draftTokens, promptLookup: typeof options.promptLookup === "number" ? options.promptLookup : undefined });
  }
}
