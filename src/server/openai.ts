import type { FinishReason, GenerationResult, TokenLogprob } from "../generation/index.js";
import type { Tokenizer } from "../tokenizer/index.js";

/** The wire shapes of OpenAI's chat and text completions, built from the library's results. */

export interface Usage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
  prompt_tokens_details: { cached_tokens: number };
}

/** finish reasons on the wire ("abort" only happens when the client is gone, so it is never sent) */
export function finishReasonOf(r: FinishReason): "stop" | "length" {
  return r === "length" ? "length" : "stop";
}

export function usageOf(results: readonly GenerationResult[]): Usage {
  let prompt = 0, completion = 0, cached = 0;
  for (const r of results) {
    prompt += r.promptTokens.length;
    cached += r.timings.cachedPromptTokens;
    for (const c of r.choices ?? [r]) completion += c.completionTokens.length;
  }
  return { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion, prompt_tokens_details: { cached_tokens: cached } };
}

/** llama.cpp server's `timings` object (of the first prompt), with TTFT and queue time added */
export function timingsOf(r: GenerationResult): Record<string, number> {
  const t = r.timings;
  const promptMs = Math.max(0, t.prefillMs - t.queueMs);
  const computed = t.promptTokens - t.cachedPromptTokens;
  const round = (x: number) => Math.round(x * 1000) / 1000;
  return {
    cache_n: t.cachedPromptTokens,
    prompt_n: computed,
    prompt_ms: round(promptMs),
    prompt_per_token_ms: round(computed > 0 ? promptMs / computed : 0),
    prompt_per_second: round(promptMs > 0 ? (computed * 1000) / promptMs : 0),
    predicted_n: t.completionTokens,
    predicted_ms: round(t.decodeMs),
    predicted_per_token_ms: t.tpotMs,
    predicted_per_second: t.decodeTokensPerSecond,
    ttft_ms: t.ttftMs,
    queue_ms: t.queueMs,
    total_ms: t.totalMs,
  };
}

/** The text of single tokens for logprobs, decoded once each. */
export class TokenTexts {
  private readonly cache = new Map<number, string>();

  constructor(private readonly tokenizer: Tokenizer) {}

  text(id: number): string {
    let s = this.cache.get(id);
    if (s === undefined) {
      s = this.tokenizer.decode([id]);
      if (this.cache.size < 65536) this.cache.set(id, s);
    }
    return s;
  }

  /** chat's logprobs.content entry */
  chatEntry(lp: TokenLogprob): { token: string; logprob: number; bytes: number[]; top_logprobs: { token: string; logprob: number; bytes: number[] }[] } {
    const one = (id: number, logprob: number) => {
      const token = this.text(id);
      return { token, logprob, bytes: [...Buffer.from(token, "utf8")] };
    };
    return { ...one(lp.token, lp.logprob), top_logprobs: lp.top.map((t) => one(t.token, t.logprob)) };
  }

  /** text completions' logprobs (parallel arrays), from `offset` characters into the completion */
  completionLogprobs(lps: readonly TokenLogprob[], offset = 0): { tokens: string[]; token_logprobs: number[]; top_logprobs: Record<string, number>[]; text_offset: number[] } {
    const out = { tokens: [] as string[], token_logprobs: [] as number[], top_logprobs: [] as Record<string, number>[], text_offset: [] as number[] };
    for (const lp of lps) {
      const token = this.text(lp.token);
      out.tokens.push(token);
      out.token_logprobs.push(lp.logprob);
      out.top_logprobs.push(Object.fromEntries(lp.top.map((t) => [this.text(t.token), t.logprob])));
      out.text_offset.push(offset);
      offset += token.length;
    }
    return out;
  }
}
