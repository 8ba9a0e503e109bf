import type { Backend } from "../kernels/index.js";
import { EncoderModel, type EncoderConfig } from "./encoder.js";
import type { WeightStore } from "./weights.js";

/**
 * DistilBERT (the architecture of HF's default sentiment model): BERT's blocks (encoder.ts)
 * without token types, x = LN(word[id] + position[p]) with positions 0, 1, ...; its sequence
 * classifier is classifier(relu(pre_classifier(h[CLS]))), no pooler.
 */
export class DistilBertModel extends EncoderModel {
  protected readonly clsActivation = "relu" as const;

  constructor(info: EncoderConfig, backend: Backend, store: WeightStore) {
    super(info, backend, store);
  }

  protected positions(n: number): number[] {
    return Array.from({ length: n }, (_, i) => i);
  }

  protected addEmbeddings(): void {
    // no token types
  }
}
