import { ConstraintVocabulary } from "../sampling/constraints/index.js";
import type { StreamDecoder, Tokenizer } from "../tokenizer/index.js";

/**
 * A completion's text token by token, the one way every part that shows it decodes it (the
 * engine's sequences, beam search's beam texts, the server's logprobs), so they never disagree:
 * special tokens add nothing, save the request's preserved ones (a tool format's marker taken
 * under its grammar), which add their own text, as llama-server renders a preserved token
 * (accept_special_token) so the reply parser reads the marker. Bytes of a character left open
 * before a preserved token end there, as decoding the whole output would end them.
 */
export function completionDecoder(tokenizer: Tokenizer, promptTokens: readonly number[], preserved?: readonly string[]): StreamDecoder {
  const decoder = tokenizer.createStreamDecoder({ skipSpecialTokens: true, context: promptTokens });
  if (!preserved?.length) return decoder;
  const utf8 = new TextDecoder();
  const kept = new Map([...ConstraintVocabulary.of(tokenizer, preserved).markers.keys()].map((id) => [id, utf8.decode(tokenizer.tokenBytes(id))]));
  return {
    push: (id) => {
      const text = kept.get(id);
      // (not pushed: a special token the decoder would drop, or write itself were it not one it skips)
      return text === undefined ? decoder.push(id) : decoder.flush() + text;
    },
    flush: () => decoder.flush(),
  };
}

/** a whole completion's text, as completionDecoder writes it */
export function completionText(tokenizer: Tokenizer, promptTokens: readonly number[], tokens: readonly number[], preserved?: readonly string[]): string {
  const decoder = completionDecoder(tokenizer, promptTokens, preserved);
  let text = "";
  for (const id of tokens) text += decoder.push(id);
  return text + decoder.flush();
}
