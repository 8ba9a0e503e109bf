import { loadTokenizer } from "../llm.js";
import { Rng } from "../testing/index.js";
import type { Tokenizer } from "../tokenizer/index.js";

/**
 * `n` prompt token ids for `modelPath`: BOS first when the model adds one, then ids drawn
 * (seeded, so every run and both engines see the same prompt) from the non-special tokens.
 */
export async function randomPromptTokens(modelPath: string, n: number, seed = 1): Promise<number[]> {
  return drawPrompt(await loadTokenizer(modelPath), n, seed);
}

/** `count` different prompts of `n` tokens each, as randomPromptTokens draws them (seeds 1, 2, ...: the first is its prompt) */
export async function randomPrompts(modelPath: string, n: number, count: number): Promise<number[][]> {
  const tok = await loadTokenizer(modelPath);
  return Array.from({ length: count }, (_, i) => drawPrompt(tok, n, i + 1));
}

function drawPrompt(tok: Tokenizer, n: number, seed: number): number[] {
  if (!Number.isInteger(n) || n < 1) throw new RangeError(`prompt tokens must be a positive integer, got ${n}`);
  const out: number[] = [];
  if (tok.addBos && tok.bosId !== undefined) out.push(tok.bosId);
  const rng = new Rng(seed);
  while (out.length < n) {
    const id = rng.u32() % tok.vocabSize;
    if (!tok.isSpecial(id)) out.push(id);
  }
  return out;
}

/**
 * The token ids that are not a whole piece of text on their own: special tokens, tokens that
 * decode to nothing, and byte tokens that are part of a UTF-8 character. A server holds such a
 * token's text back (llama-server until the character is complete, tsllm serve sends nothing for
 * empty text), so a random-weight model that keeps sampling one never streams a chunk per token;
 * `npm run bench:serve` bans them with logit_bias on both servers.
 */
export async function partialTextTokens(modelPath: string): Promise<number[]> {
  const tok = await loadTokenizer(modelPath);
  const out: number[] = [];
  for (let id = 0; id < tok.vocabSize; id++) {
    if (tok.isSpecial(id)) { out.push(id); continue; }
    const text = tok.decode([id]);
    if (text === "" || text.includes("\uFFFD")) out.push(id);
  }
  return out;
}
