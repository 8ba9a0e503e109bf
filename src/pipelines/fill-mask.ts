import type { EncoderRunner } from "./encoder-runner.js";
import { textsOf } from "./inputs.js";
import { softmax, topK as best } from "./math.js";

export interface FillMaskOptions {
  /** proposals per mask (default 5) */
  readonly topK?: number;
  /** score only these tokens (words; each must be one token of the vocabulary) */
  readonly targets?: readonly string[];
}

export interface FillMaskProposal {
  score: number;
  token: number;
  token_str: string;
  sequence: string;
}

/**
 * fill-mask, as transformers' FillMaskPipeline: softmax over the vocabulary at each mask token,
 * the topK proposals each with the sentence it makes (pads dropped; special tokens skipped when
 * there is one mask, kept when there are several so the other masks stay visible). One mask: a
 * list of proposals; several: one list per mask.
 */
export function fillMask(runner: EncoderRunner) {
  const info = runner.model.info, tok = runner.tokenizer;
  if (info.head !== "masked-lm") throw new Error(`${runner.opened.path}: fill-mask needs a masked-LM head (…ForMaskedLM), found ${info.hfArchitecture}`);
  const maskId = tok.maskId;
  if (maskId === undefined) throw new Error(`${runner.opened.path}: the tokenizer has no mask token`);
  const maskText = tok.piece(maskId);

  const targetIds = (targets: readonly string[]): number[] =>
    targets.map((t) => {
      const ids = tok.encode(t, { addSpecialTokens: false });
      if (ids.length === 0) throw new RangeError(`fill-mask target ${JSON.stringify(t)} is no token`);
      return ids[0]!;
    });

  return async (input: string | readonly string[], options: FillMaskOptions = {}): Promise<unknown> => {
    const k = options.topK ?? 5;
    if (!Number.isInteger(k) || k < 1) throw new RangeError(`topK must be a positive integer, got ${k}`);
    const texts = textsOf("fill-mask", input);
    const encs = texts.map((t) => runner.tokenize(t));
    const positions = encs.map((e, i) => {
      const ps = e.ids.flatMap((id, p) => (id === maskId ? [p] : []));
      if (ps.length === 0) throw new RangeError(`fill-mask: input ${i} has no mask token (${maskText}): ${JSON.stringify(texts[i]!.slice(0, 60))}`);
      return ps;
    });
    const logits = (await runner.run(encs, positions)).logits!;
    const targets = options.targets ? targetIds(options.targets) : undefined;
    const results = encs.map((e, i) => {
      const ps = positions[i]!, v = info.vocabSize, single = ps.length === 1;
      const rows = ps.map((pos, m) => {
        let probs = softmax(logits[i]!.subarray(m * v, (m + 1) * v));
        if (targets) probs = targets.map((t) => probs[t]!);
        return best(probs, Math.min(k, probs.length)).map(({ value, index }) => {
          const token = targets ? targets[index]! : index;
          const ids = e.ids.map((id, p) => (p === pos ? token : id)).filter((id) => id !== tok.padId);
          return { score: value, token, token_str: tok.decode([token]), sequence: tok.decode(ids, { skipSpecialTokens: single }) };
        });
      });
      return single ? rows[0]! : rows;
    });
    return typeof input === "string" ? results[0] : results;
  };
}
