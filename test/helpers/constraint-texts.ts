import type { Tokenizer } from "../../src/tokenizer/index.js";

/**
 * Each token's text as a constraint sees it, decoded independently of ConstraintVocabulary: the
 * token after a plain one (so a SentencePiece word start keeps its space), undefined for special
 * tokens and for text that is empty or not whole UTF-8.
 */
export function constraintTexts(tok: Tokenizer): (string | undefined)[] {
  const context = tok.encode("a", { addSpecialTokens: false }).slice(0, 1);
  return Array.from({ length: tok.vocabSize }, (_, id) => {
    if (tok.isSpecial(id)) return undefined;
    const d = tok.createStreamDecoder({ context });
    const t = d.push(id);
    return t === "" || d.flush() !== "" || t.includes("\uFFFD") ? undefined : t;
  });
}
