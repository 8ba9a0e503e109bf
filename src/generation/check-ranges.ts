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

/** the token-ban options: a decoding other than sampling (greedy included) is refused them when set */
const TOKEN_BANS = ["noRepeatNgramSize", "minNewTokens", "suppressTokens", "beginSuppressTokens", "badWordsIds", "sequenceBias", "forcedBosTokenId", "forcedEosTokenId", "exponentialDecayLengthPenalty"] as const;

/** throws an OptionError naming `name` unless `ids` is an array of token ids (whole numbers >= 0) */
function checkTokenIds(ids: unknown, name: string): void {
  if (!Array.isArray(ids)) throw new OptionError(`${name} must be an array of token ids, got ${shownValue(ids)}`, name);
  ids.forEach((id: unknown) => {
    if (!Number.isSafeInteger(id) || (id as number) < 0) throw new OptionError(`${name} must hold token ids (integers >= 0), got ${shownValue(id)}`, name);
  });
}

/**
 * noRepeatNgramSize and minNewTokens: whole numbers >= 0; suppressTokens, beginSuppressTokens:
 * token ids; badWordsIds: non-empty token sequences; sequenceBias: [non-empty token sequence,
 * finite bias] pairs; forcedBosTokenId a token id, forcedEosTokenId one or a non-empty list
 * (transformers' processors refuse the same). Given only to a decoding that
 * applies them (speculative decoding's accepted tokens are not sampled one row at a time; beam
 * search applies noRepeatNgramSize only)
 */
export function validateTokenBans(o: Pick<GenerateOptions, (typeof TOKEN_BANS)[number]>, decoding: "sample" | "beam" | "speculative"): void {
  for (const name of ["noRepeatNgramSize", "minNewTokens"] as const) {
    const v = o[name];
    if (v === undefined) continue;
    if (!Number.isInteger(v) || v < 0) throw new OptionError(`${name} must be an integer >= 0, got ${shownValue(v)}`, name);
  }
  if (o.suppressTokens !== undefined) checkTokenIds(o.suppressTokens, "suppressTokens");
  if (o.beginSuppressTokens !== undefined) checkTokenIds(o.beginSuppressTokens, "beginSuppressTokens");
  if (o.badWordsIds !== undefined) {
    if (!Array.isArray(o.badWordsIds)) throw new OptionError(`badWordsIds must be an array of token sequences, got ${shownValue(o.badWordsIds)}`, "badWordsIds");
    for (const seq of o.badWordsIds) {
      checkTokenIds(seq, "badWordsIds");
      if (seq.length === 0) throw new OptionError("badWordsIds must hold non-empty token sequences, got []", "badWordsIds");
    }
  }
  if (o.sequenceBias !== undefined) {
    if (!Array.isArray(o.sequenceBias)) throw new OptionError(`sequenceBias must be an array of [token sequence, bias] pairs, got ${shownValue(o.sequenceBias)}`, "sequenceBias");
    for (const pair of o.sequenceBias as readonly unknown[]) {
      if (!Array.isArray(pair) || pair.length !== 2 || typeof pair[1] !== "number" || !Number.isFinite(pair[1])) throw new OptionError(`sequenceBias must hold [token sequence, bias] pairs with a finite bias, got ${shownValue(pair)}`, "sequenceBias");
      checkTokenIds(pair[0], "sequenceBias");
      if ((pair[0] as unknown[]).length === 0) throw new OptionError("sequenceBias must hold non-empty token sequences, got []", "sequenceBias");
    }
  }
  if (o.forcedBosTokenId !== undefined && (!Number.isSafeInteger(o.forcedBosTokenId) || o.forcedBosTokenId < 0)) {
    throw new OptionError(`forcedBosTokenId must be a token id (an integer >= 0), got ${shownValue(o.forcedBosTokenId)}`, "forcedBosTokenId");
  }
  const eos = o.forcedEosTokenId;
  if (eos !== undefined) {
    // ForcedEOSTokenLogitsProcessor takes an id or a list of them; an empty list would leave no token at the last step
    if (Array.isArray(eos)) checkTokenIds(eos, "forcedEosTokenId");
    else if (!Number.isSafeInteger(eos) || (eos as number) < 0) throw new OptionError(`forcedEosTokenId must be a token id or an array of them (integers >= 0), got ${shownValue(eos)}`, "forcedEosTokenId");
    if (Array.isArray(eos) && eos.length === 0) throw new OptionError("forcedEosTokenId must hold at least one token id, got []", "forcedEosTokenId");
  }
  const decay = o.exponentialDecayLengthPenalty;
  // ExponentialDecayLengthPenalty takes a (start index, decay factor) pair; a factor that is not finite would make every end logit infinite or NaN
  if (decay !== undefined && !(Array.isArray(decay) && decay.length === 2 && Number.isSafeInteger(decay[0]) && typeof decay[1] === "number" && Number.isFinite(decay[1]))) {
    throw new OptionError(`exponentialDecayLengthPenalty must be a [start index, decay factor] pair (an integer and a finite number), got ${shownValue(decay)}`, "exponentialDecayLengthPenalty");
  }
  // a forced step whose every forced token suppressTokens bans (it comes after the forcing) has no
  // token left: the sampler's refusal then blamed a logitBias (transformers' greedy takes id 0, its sampling fails)
  const suppressed = new Set(o.suppressTokens ?? []);
  if (o.forcedBosTokenId !== undefined && suppressed.has(o.forcedBosTokenId)) {
    throw new OptionError(`forcedBosTokenId ${o.forcedBosTokenId} is in suppressTokens: the step it forces would have no token left`, "forcedBosTokenId");
  }
  const forcedEos = eos === undefined ? [] : [eos].flat();
  if (forcedEos.length > 0 && forcedEos.every((t) => suppressed.has(t))) {
    throw new OptionError(`forcedEosTokenId ${JSON.stringify(eos)} ${forcedEos.length === 1 ? "is" : "are all"} in suppressTokens: the last step would have no token left`, "forcedEosTokenId");
  }
  for (const name of TOKEN_BANS) {
    const v = o[name];
    // a forced token id 0 is a token, not "none"
    if (v === undefined || (v === 0 && !name.startsWith("forced")) || (Array.isArray(v) && v.length === 0)) continue;
    if (decoding === "speculative") throw new OptionError(`${name} cannot be combined with speculative decoding (draftModel, promptLookup)`, name);
    if (decoding === "beam" && name !== "noRepeatNgramSize") throw new OptionError(`${name} cannot be combined with beam search (numBeams)`, name);
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
