import type { Backend, DeviceArray } from "../kernels/index.js";
import type { Tensor } from "../tensor/index.js";
import { EncoderModel, type EncoderConfig, type EncoderInput } from "./encoder.js";
import type { WeightStore } from "./weights.js";

/**
 * BERT and RoBERTa / XLM-RoBERTa (the same network; encoder.ts has the blocks and heads):
 *   x = LN(word[id] + position[p] + token_type[type])
 * BERT numbers positions 0, 1, ...; RoBERTa from padding_idx + 1 (its position table has
 * padding_idx + 1 extra rows), and has one token type. Sequence classification: BERT's pooler
 * (tanh) then the classifier; RoBERTa's classifier.dense (tanh) then out_proj — the same shape.
 */
export class BertModel extends EncoderModel {
  protected readonly clsActivation = "tanh" as const;
  private readonly tokenTypes: Tensor;

  private readonly positionOffset: number;

  constructor(info: EncoderConfig, backend: Backend, store: WeightStore) {
    super(info, backend, store);
    this.tokenTypes = store.get("token_types.weight", [info.hiddenSize, store.info("token_types.weight").dims[1]!]);
    this.positionOffset = info.positionOffset;
  }

  protected positions(n: number): number[] {
    return Array.from({ length: n }, (_, i) => this.positionOffset + i);
  }

  protected addEmbeddings(x: DeviceArray, inputs: readonly EncoderInput[]): void {
    const rows = this.tokenTypes.dims[1]!;
    // a model with one token type (RoBERTa) takes none: transformers does not pass a pair's segment ids to it
    const types = inputs.flatMap((s) => (rows > 1 && s.typeIds ? s.typeIds : new Array<number>(s.ids.length).fill(0)));
    for (const t of types) if (!Number.isInteger(t) || t < 0 || t >= rows) throw new RangeError(`encode: token type id ${t} is outside [0, ${rows})`);
    const e = this.backend.allocActivations(x.length);
    this.backend.getRows(e, this.tokenTypes, types);
    this.backend.add(x, e);
  }
}
