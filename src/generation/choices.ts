/**
 * `n` independent completions of one prompt that share one prefill. The prompt is prefilled
 * once (by choice 0); its K/V rows stay in the context's cache, and every later choice
 * truncates the cache back to the prompt and starts from the saved last-position logits
 * (GenerationContext.prefill), so no prompt token is computed twice and no cache is copied:
 * decoding only ever appends rows after the prompt. Choices run one after another, each with
 * its own sampler seeded `seed + i` (mod 2^32), so choice i is token for token the solo
 * generation with that seed.
 */
import { randomSeed } from "../sampling/index.js";
import { generateSteps, type Choice, type GenerateOptions, type GenerationContext, type GenerationResult, type GenerationStep } from "./generate.js";
import { computeTimings } from "./timings.js";

/** a streamed step; with n > 1 it names the choice it belongs to */
export type ChoiceStep = GenerationStep & { choice?: number };

export function validateChoices(options: GenerateOptions): number {
  const n = options.n ?? 1;
  if (!Number.isInteger(n) || n < 1) throw new RangeError(`n must be an integer >= 1 (the number of completions), got ${String(options.n)}`);
  if (n > 1 && (options.numBeams !== undefined || options.draftModel !== undefined || options.promptLookup)) {
    throw new RangeError("n > 1 cannot be combined with beam search (use numReturnSequences) or speculative decoding");
  }
  return n;
}

/**
 * Streams choice 0's steps, then choice 1's, ... (each tagged with `choice` when n > 1). The
 * result's top-level completion, tokens, finishReason and logprobs are choice 0's; `choices`
 * lists all of them; timings cover the whole run (prefill once, all choices' tokens).
 */
export async function* generateChoices(ctx: GenerationContext, prompt: string | readonly number[], options: GenerateOptions = {}): AsyncGenerator<ChoiceStep, GenerationResult> {
  const n = validateChoices(options);
  if (n === 1) return yield* generateSteps(ctx, prompt, { ...options, n: undefined });
  const t0 = performance.now();
  // one base seed for all choices, so "seed + i" is defined even when no seed was given
  const seed = options.seed ?? randomSeed();
  const results: GenerationResult[] = [];
  for (let i = 0; i < n; i++) {
    if (i > 0 && options.signal?.aborted) break;
    // choice 0 tokenizes and prefills; later choices reuse its tokens and its cached prefill
    const input = i === 0 ? prompt : results[0]!.promptTokens;
    const it = generateSteps(ctx, input, { ...options, n: undefined, seed: (seed + i) % 2 ** 32 });
    for (;;) {
      const r = await it.next();
      if (r.done) { results.push(r.value); break; }
      yield { ...r.value, choice: i };
    }
  }
  const first = results[0]!;
  const choices: Choice[] = results.map((r) => ({
    completion: r.completion, completionTokens: r.completionTokens, finishReason: r.finishReason, ...(r.logprobs ? { logprobs: r.logprobs } : {}),
  }));
  const tokens = results.reduce((sum, r) => sum + r.completionTokens.length, 0);
  const tEnd = performance.now();
  const t = first.timings;
  return {
    ...first,
    prompt: typeof prompt === "string" ? prompt : first.prompt,
    choices,
    timings: computeTimings(ctx.loadMs, first.promptTokens.length, tokens, t0, t0 + t.prefillMs, t0 + t.ttftMs, tEnd),
  };
}
