import type { Pooling } from "../formats/index.js";
import type { EncoderRunner } from "./encoder-runner.js";
import { textsOf } from "./inputs.js";

export interface EmbedOptions {
  /** L2-normalize each vector (default: true when the folder has a Normalize module, else false) */
  readonly normalize?: boolean;
  /** how token vectors become one (default: the folder's 1_Pooling config, else "mean") */
  readonly pooling?: Pooling;
}

const POOLINGS: readonly Pooling[] = ["mean", "cls", "max", "mean_sqrt_len", "lasttoken"];

/**
 * Sentence embeddings as sentence-transformers' encode(): tokens truncated to max_seq_length,
 * the last hidden state pooled over the sequence's tokens (special tokens included, padding never
 * present), then normalized when asked or when the model has a Normalize module.
 */
export async function embedWith(runner: EncoderRunner, texts: readonly string[], options: EmbedOptions = {}): Promise<Float32Array[]> {
  const st = runner.opened.sentenceTransformers;
  const pooling = options.pooling ?? st?.pooling ?? "mean";
  if (!POOLINGS.includes(pooling)) throw new RangeError(`pooling: expected one of ${POOLINGS.join(", ")}, got ${JSON.stringify(pooling)}`);
  const normalize = (options.normalize ?? false) || (st?.normalize ?? false);
  const maxLength = Math.min(runner.maxLength, st?.maxSeqLength ?? Infinity);
  const d = runner.model.info.hiddenSize;
  const inputs = textsOf("embed", texts).map((t) => runner.tokenize(st?.doLowerCase ? t.toLowerCase() : t, undefined, maxLength));
  return (await runner.run(inputs)).hidden.map((h) => {
    const n = h.length / d, v = new Float64Array(d);
    if (pooling === "cls") for (let j = 0; j < d; j++) v[j] = h[j]!;
    else if (pooling === "lasttoken") for (let j = 0; j < d; j++) v[j] = h[(n - 1) * d + j]!;
    else if (pooling === "max") {
      v.fill(-Infinity);
      for (let t = 0; t < n; t++) for (let j = 0; j < d; j++) v[j] = Math.max(v[j]!, h[t * d + j]!);
    } else {
      for (let t = 0; t < n; t++) for (let j = 0; j < d; j++) v[j] = v[j]! + h[t * d + j]!;
      const div = pooling === "mean" ? n : Math.sqrt(n);
      for (let j = 0; j < d; j++) v[j] = v[j]! / div;
    }
    if (normalize) {
      // torch.nn.functional.normalize: x / max(||x||, 1e-12)
      let s = 0;
      for (let j = 0; j < d; j++) s += v[j]! * v[j]!;
      const norm = Math.max(Math.sqrt(s), 1e-12);
      for (let j = 0; j < d; j++) v[j] = v[j]! / norm;
    }
    return Float32Array.from(v);
  });
}
