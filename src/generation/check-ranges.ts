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

/**
 * noRepeatNgramSize and minNewTokens: whole numbers >= 0, given only to a decoding that applies
 * them (speculative decoding's accepted tokens are not sampled one row at a time; beam search
 * applies noRepeatNgramSize only)
 */
export function validateTokenBans(o: Pick<GenerateOptions, "noRepeatNgramSize" | "minNewTokens">, decoding: "sample" | "beam" | "speculative"): void {
  for (const name of ["noRepeatNgramSize", "minNewTokens"] as const) {
    const v = o[name];
    if (v === undefined) continue;
    if (!Number.isInteger(v) || v < 0) throw new OptionError(`${name} must be an integer >= 0, got ${shownValue(v)}`, name);
    if (v === 0) continue;
    if (decoding === "speculative") throw new OptionError(`${name} cannot be combined with speculative decoding (draftModel, promptLookup)`, name);
    if (decoding === "beam" && name === "minNewTokens") throw new OptionError("minNewTokens cannot be combined with beam search (numBeams)", name);
  }
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
  validateTokenBans(options, options.numBeams !== undefined ? "beam" : usesStrategy(options) ? "speculative" : "sample");
  if (options.numBeams !== undefined) {
    const { numBeams, lengthPenalty, earlyStopping, numReturnSequences, noRepeatNgramSize } = options;
    validateBeamOptions({ numBeams, lengthPenalty, earlyStopping, numReturnSequences, noRepeatNgramSize });
  } else if (usesStrategy(options)) {
    validateSpeculative({ draftTokens: options.draftTokens, promptLookup: typeof options.promptLookup === "number" ? options.promptLookup : undefined });
  }
}
