import { tokenIndex } from "./vocab-tokenizer.js";
import { TokenType, type FimTokenIds } from "./types.js";

/**
 * llama.cpp's recognition of chat / fill-in-the-middle / end-of-generation tokens by their text
 * (llama-vocab.cpp, "auto-detect special tokens by text"): converters often leave these ids out of
 * the metadata. Every recognised token is forced to control type, as llama.cpp does.
 */
const EOT_TEXTS = ["<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>", "<EOT>", "_<EOT>", "[EOT]", "<end_of_utterance>"];
const EOM_TEXTS = ["<|eom_id|>"];
const FIM_PRE_TEXTS = ["<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<PRE>", "<|code_prefix|>", "<|prefix|>"];
const FIM_SUF_TEXTS = ["<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<SUF>", "<|code_suffix|>", "<|suffix|>"];
const FIM_MID_TEXTS = ["<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<MID>", "<|code_middle|>", "<|middle|>"];
const FIM_PAD_TEXTS = ["<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"];
const FIM_REP_TEXTS = ["<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"];
const FIM_SEP_TEXTS = ["<|file_sep|>"];
/** every token with one of these texts ends generation */
const EOG_TEXTS = [
  "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>", "<end_of_turn>", "<|endoftext|>",
  "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]", "<|end_of_text|>", "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>",
];
/** gpt-oss markers that llama.cpp always renders (user-defined, never skipped) */
const ALWAYS_RENDERED = ["<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"];

export interface SpecialIdsFromMetadata {
  eos?: number; eot?: number; eom?: number;
  fimPre?: number; fimSuf?: number; fimMid?: number; fimPad?: number; fimRep?: number; fimSep?: number;
}

/** the ids that end generation, and the fill-in-the-middle tokens (metadata's or found by text) */
export interface DetectedSpecialTokens {
  readonly endOfGeneration: Set<number>;
  /** the end-of-turn token (llama.cpp's special_eot_id: metadata's, else found by text), if any */
  readonly endOfTurn?: number;
  readonly fim: FimTokenIds;
}

/**
 * Fills in the ids the metadata lacks, updates `types` in place, and returns the ids that end
 * generation and the fill-in-the-middle tokens.
 */
export function detectSpecialTokens(tokens: readonly string[], types: Int32Array, given: SpecialIdsFromMetadata, byText: ReadonlyMap<string, number> = tokenIndex(tokens)): DetectedSpecialTokens {
  const find = (texts: readonly string[]): number | undefined => {
    let best: number | undefined;
    for (const t of texts) {
      const id = byText.get(t);
      if (id !== undefined && (best === undefined || id < best)) best = id;
    }
    if (best !== undefined) types[best] = TokenType.Control;
    return best;
  };
  const eot = given.eot ?? find(EOT_TEXTS);
  const eom = given.eom ?? find(EOM_TEXTS);
  const fimPre = given.fimPre ?? find(FIM_PRE_TEXTS);
  const fimSuf = given.fimSuf ?? find(FIM_SUF_TEXTS);
  const fimMid = given.fimMid ?? find(FIM_MID_TEXTS);
  const fimPad = given.fimPad ?? find(FIM_PAD_TEXTS);
  const fimRep = given.fimRep ?? find(FIM_REP_TEXTS);
  const fimSep = given.fimSep ?? find(FIM_SEP_TEXTS);

  const eog = new Set<number>();
  for (const id of [fimPad, fimRep, fimSep]) if (id !== undefined) eog.add(id);
  for (const t of EOG_TEXTS) {
    const id = byText.get(t);
    if (id !== undefined) { eog.add(id); types[id] = TokenType.Control; }
  }
  for (const t of ALWAYS_RENDERED) {
    const id = byText.get(t);
    if (id !== undefined) types[id] = TokenType.UserDefined;
  }
  for (const id of [given.eos, eot, eom]) if (id !== undefined) eog.add(id);

  const has = (t: string) => { const id = byText.get(t); return id !== undefined && eog.has(id); };
  // harmony / solar-open: "<|end|>" only ends a message there, not the generation
  if (has("<|end|>") && ((has("<|return|>") && has("<|call|>")) || (has("<|calls|>") && has("<|flush|>")))) {
    const id = byText.get("<|end|>")!;
    eog.delete(id);
    types[id] = TokenType.UserDefined;
  }
  // gemma4 / paddleocr: "</s>" is an ordinary token when "<|tool_response>" exists
  if (has("<|tool_response>") && has("</s>")) {
    const id = byText.get("</s>")!;
    eog.delete(id);
    types[id] = TokenType.Normal;
  }
  const fim: FimTokenIds = {
    ...(fimPre === undefined ? {} : { prefix: fimPre }), ...(fimSuf === undefined ? {} : { suffix: fimSuf }), ...(fimMid === undefined ? {} : { middle: fimMid }),
    ...(fimPad === undefined ? {} : { pad: fimPad }), ...(fimRep === undefined ? {} : { repo: fimRep }), ...(fimSep === undefined ? {} : { fileSeparator: fimSep }),
  };
  return { endOfGeneration: eog, ...(eot === undefined ? {} : { endOfTurn: eot }), fim };
}
