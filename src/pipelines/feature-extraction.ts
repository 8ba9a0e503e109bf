import type { EncoderRunner } from "./encoder-runner.js";
import { encoderCallOptions, textsOf, truncationOf, withDefaults, type Truncation } from "./inputs.js";

export interface FeatureExtractionOptions {
  /**
   * transformers' truncation: true cuts an input to the tokens the model reads (its end goes, the
   * special tokens stay). Left out, tsllm truncates too, where transformers would fail on the
   * model's positions, with one warning per input cut (onWarning); false refuses an input past
   * them, naming it. transformers' strategies by name too: "longest_first" (true), "do_not_truncate"
   * (false); "only_first" / "only_second" cut as "longest_first" here (one text), except that
   * "only_second" refuses a text to cut, as tokenizers ("Second sequence not provided").
   */
  readonly truncation?: Truncation;
}

const TASK = "feature-extraction";

/** FeatureExtractionOptions' names */
export const FEATURE_EXTRACTION_OPTIONS: readonly string[] = ["truncation"];

/**
 * feature-extraction, as transformers: the last hidden state of every token, [1][tokens][hidden]
 * per input (a list of inputs: one such array each). `defaults`: options given when the pipeline
 * was made (transformers' pipeline("feature-extraction", truncation=True)), a call's over them.
 * `warn`: where an input cut with truncation left out is told (EncoderRunner.encode).
 */
export function featureExtraction(runner: EncoderRunner, defaults: FeatureExtractionOptions, warn: (message: string) => void) {
  const d = runner.model.info.hiddenSize;
  truncationOf(TASK, withDefaults(defaults, {}).truncation);
  return async (input: string | readonly string[], given?: FeatureExtractionOptions): Promise<number[][][] | number[][][][]> => {
    const texts = textsOf(TASK, input);
    const options = withDefaults(defaults, encoderCallOptions(TASK, given, FEATURE_EXTRACTION_OPTIONS));
    const truncation = truncationOf(TASK, options.truncation);
    const out = await runner.run(runner.encode(TASK, texts.map((text) => ({ text })), typeof input !== "string", truncation, warn));
    const results = out.hidden.map((h) => [Array.from({ length: h.length / d }, (_, t) => Array.from(h.subarray(t * d, (t + 1) * d)))]);
    return typeof input === "string" ? results[0]! : results;
  };
}
