import type { ModelInput } from "../tokenizer/index.js";
import { OptionError } from "../units/index.js";
import type { EncoderRunner } from "./encoder-runner.js";
import { describe, encoderCallOptions, textsOf, truncationOf, withDefaults, type Truncation } from "./inputs.js";
import { softmax, topK as best } from "./math.js";

export interface FillMaskOptions {
  /** proposals per mask (default 5; 0: none, as transformers' topk(0)) */
  readonly topK?: number;
  /**
   * score only these tokens, as transformers picks them: a vocabulary entry as written ("##s",
   * "Ġgood"), else the first token the text tokenizes to; texts of no token are left out, and
   * a token named twice is scored once. A target that is not a vocabulary entry, or left out, is
   * one warning through pipeline()'s onWarning, as transformers' logger warns
   */
  readonly targets?: string | readonly string[];
  /**
   * transformers' `tokenizer_kwargs={"truncation": ...}`: true cuts an input to the tokens the
   * model reads. Left out, tsllm cuts too, where transformers would fail in the model, with one
   * warning per input cut (onWarning); false refuses a longer input, naming it. transformers'
   * strategies by name too: "longest_first" (true), "do_not_truncate" (false); "only_first" /
   * "only_second" cut as "longest_first" here (one text), except that "only_second" refuses a text
   * to cut, as tokenizers ("Second sequence not provided").
   */
  readonly truncation?: Truncation;
}

export interface FillMaskProposal {
  score: number;
  token: number;
  token_str: string;
  sequence: string;
}

const TASK = "fill-mask";

/** FillMaskOptions' names */
export const FILL_MASK_OPTIONS: readonly string[] = ["topK", "targets", "truncation"];

/**
 * fill-mask, as transformers' FillMaskPipeline: softmax over the vocabulary at each mask token,
 * the topK proposals each with the sentence it makes (pads dropped; special tokens skipped when
 * there is one mask, kept when there are several so the other masks stay visible). One mask: a
 * list of proposals; several: one list per mask. A list of inputs: one result each (a list of one:
 * its result alone, as transformers returns it). `defaults`: options given when the pipeline was
 * made (transformers' pipeline("fill-mask", targets=[...])), a call's own options over them.
 * `warn`: where a target that is not a vocabulary entry is told, once when it is given (the
 * pipeline's own at its making, a call's at that call), as transformers' get_target_ids; and an
 * input cut with truncation left out (EncoderRunner.encode).
 */
export function fillMask(runner: EncoderRunner, defaults: FillMaskOptions, warn: (message: string) => void) {
  const info = runner.model.info, tok = runner.tokenizer;
  if (info.head !== "masked-lm") throw new Error(`${runner.opened.path}: fill-mask needs a masked-LM head (…ForMaskedLM), found ${info.hfArchitecture}`);
  const maskId = tok.maskId;
  if (maskId === undefined) throw new Error(`${runner.opened.path}: the tokenizer has no mask token`);
  const maskText = tok.piece(maskId);

  let vocabulary: Map<string, number> | undefined;
  const idOfPiece = (piece: string): number | undefined => {
    if (!vocabulary) {
      vocabulary = new Map();
      for (let id = 0; id < tok.vocabSize; id++) if (!vocabulary.has(tok.piece(id))) vocabulary.set(tok.piece(id), id);
    }
    return vocabulary.get(piece);
  };

  /** transformers' get_target_ids: each target's vocabulary entry or first token, once each; `told`: warn of those that are not entries */
  const targetIds = (targets: unknown, told: boolean): number[] => {
    const list = typeof targets === "string" ? [targets] : targets;
    if (!Array.isArray(list) || !list.every((t) => typeof t === "string")) throw new OptionError(`${TASK}: targets: expected a string or a list of strings, got ${describe(targets)}`, "targets");
    const ids = new Set<number>();
    const warnings: string[] = [];
    for (const t of list as string[]) {
      const entry = idOfPiece(t);
      // a text that is no entry scores another token than the one named, or none: the caller should know which
      const id = entry ?? tok.encode(t, { addSpecialTokens: false })[0];
      if (entry === undefined) warnings.push(`${TASK}: targets: ${JSON.stringify(t)} is not in the model's vocabulary; ${id === undefined ? "it has no token, left out" : `scoring its first token ${JSON.stringify(tok.piece(id))} instead`}`);
      if (id !== undefined) ids.add(id);
    }
    // refused: the one line is the refusal, not warnings before it
    if (ids.size === 0) throw new OptionError(`${TASK}: targets: at least one target must be a token (given ${JSON.stringify(list).slice(0, 80)})`, "targets");
    if (told) warnings.forEach((w) => warn(w));
    return [...ids];
  };

  /** the options' values checked, before any work; `told`: whether their targets are newly given (warned of) */
  const settings = (options: FillMaskOptions, told: boolean) => {
    const k = options.topK ?? 5;
    if (!Number.isInteger(k) || k < 0) throw new OptionError(`topK must be a non-negative integer, got ${k}`, "topK");
    return { k, targets: options.targets === undefined ? undefined : targetIds(options.targets, told), truncation: truncationOf(TASK, options.truncation) };
  };
  settings(withDefaults(defaults, {}), true);

  return async (input: string | readonly string[], given?: FillMaskOptions): Promise<unknown> => {
    const own = encoderCallOptions(TASK, given, FILL_MASK_OPTIONS);
    // the pipeline's own targets were warned of when it was made, a call's are at each call (transformers' _sanitize_parameters)
    const { k, targets, truncation } = settings(withDefaults(defaults, own), own.targets !== undefined && own.targets !== null);
    const texts = textsOf(TASK, input);
    const shown = (i: number) => JSON.stringify(texts[i]!.slice(0, 60));
    // a text with no mask at all is told apart from one whose mask a cut dropped on its whole encoding,
    // the one tokenization each text has (transformers' preprocess: "No mask_token ... found on the input")
    const noMask = (whole: ModelInput, i: number, which: string) => {
      if (!whole.ids.includes(maskId)) throw new RangeError(`${TASK}: ${which} has no mask token (${maskText}): ${shown(i)}`);
    };
    const encs = runner.encode(TASK, texts.map((text) => ({ text })), typeof input !== "string", truncation, warn, noMask);
    const positions = encs.map((e, i) => {
      const ps = e.ids.flatMap((id, p) => (id === maskId ? [p] : []));
      // its whole encoding had one (noMask): the cut dropped it
      if (ps.length === 0) throw new RangeError(`${TASK}: ${typeof input === "string" ? "the input" : `input ${i}`}: its mask token (${maskText}) is past the ${runner.maxLength} tokens the model reads: ${shown(i)}`);
      return ps;
    });
    const logits = (await runner.run(encs, positions)).logits!;
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
    // transformers' FillMaskPipeline.__call__: a list of one input gives that input's result, unwrapped
    return typeof input === "string" || results.length === 1 ? results[0] : results;
  };
}
