import type { Tokenizer } from "./types.js";

/**
 * Ids below this are not compared by text: converters name the same control tokens (unk, BOS,
 * EOS, pad) differently ("<s>" / "<|begin_of_text|>"), which changes no id's meaning. llama.cpp's
 * draft check (common_speculative_are_compatible) starts its text comparison at the same id; the
 * BOS/EOS ids themselves are compared below.
 */
const FIRST_TEXT_ID = 5;

/**
 * Why `draft` cannot draft for `target`, or undefined. Speculative decoding hands the draft's ids
 * to the target as they are, so a token must mean the same to both: the same tokenizer kind,
 * BOS/EOS ids and add-BOS/add-EOS rules, and the same text for every id from FIRST_TEXT_ID on (the rule
 * llama.cpp applies; it also lets the sizes differ by 128, which our engine does not, checked by
 * the callers against the embeddings). A draft that fails this still gives the target's text, but
 * every proposal is wasted. Worded as "its ..., `targetName`'s ...": the callers prefix the draft's
 * name. One pass over the vocabularies (256k tokens: a few milliseconds).
 */
export function draftVocabularyMismatch(target: Tokenizer, draft: Tokenizer, targetName: string): string | undefined {
  if (draft.type !== target.type) return `its tokenizer is ${draft.type}'s, ${targetName}'s ${target.type}'s`;
  // (the add-EOS rule too, as llama.cpp: a prompt ending in EOS for one model and not the other is no shared context)
  for (const [what, d, t] of [["BOS", draft.addBos, target.addBos], ["EOS", draft.addEos, target.addEos]] as const) {
    if (d !== t) return `it ${d ? "adds" : "does not add"} ${what} to a prompt, ${targetName} ${t ? "does" : "does not"}`;
  }
  for (const [what, d, t] of [["BOS", draft.bosId, target.bosId], ["EOS", draft.eosId, target.eosId]] as const) {
    if (d !== t) return `its ${what} id is ${d ?? "none"}, ${targetName}'s ${t ?? "none"}`;
  }
  const n = Math.min(draft.vocabSize, target.vocabSize);
  for (let id = FIRST_TEXT_ID; id < n; id++) {
    const d = draft.piece(id), t = target.piece(id);
    if (d !== t) return `its token ${id} is ${JSON.stringify(d)}, ${targetName}'s ${JSON.stringify(t)}`;
  }
  return undefined;
}
