import type { EncoderRunner } from "./encoder-runner.js";
import { textsOf } from "./inputs.js";

/**
 * feature-extraction, as transformers: the last hidden state of every token, [1][tokens][hidden]
 * per input (a list of inputs: one such array each).
 */
export function featureExtraction(runner: EncoderRunner) {
  const d = runner.model.info.hiddenSize;
  return async (input: string | readonly string[]): Promise<number[][][] | number[][][][]> => {
    const texts = textsOf("feature-extraction", input);
    const out = await runner.run(texts.map((t) => runner.tokenize(t)));
    const results = out.hidden.map((h) => [Array.from({ length: h.length / d }, (_, t) => Array.from(h.subarray(t * d, (t + 1) * d)))]);
    return typeof input === "string" ? results[0]! : results;
  };
}
