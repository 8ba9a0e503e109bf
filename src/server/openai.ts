import { decodeRates, type Choice, type FinishReason, type GenerationResult, type PromptLogprobs, type Timings, type TokenLogprob } from "../generation/index.js";
import { completionDecoder } from "../engine/index.js";
import type { StreamDecoder, Tokenizer } from "../tokenizer/index.js";

/** The wire shapes of OpenAI's chat and text completions, built from the library's results. */

export interface Usage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
  prompt_tokens_details: { cached_tokens: number };
}

/**
 * finish reasons on the wire ("abort" is never sent as one): a reply cut off by the token limit
 * says "length", calls or not, as OpenAI and llama-server report the limit; one that made tool
 * calls says "tool_calls" only when every call is whole, its arguments a complete JSON value. A
 * call cut short by a stop string (or an end token the model wrote inside it) is kept as read,
 * as llama.cpp's lenient final parse keeps it, but it is no call a client can make: the reply
 * says "stop", as OpenAI's does at a stop sequence.
 */
export function finishReasonOf(r: FinishReason, calls: readonly { readonly arguments: string }[] = []): "stop" | "length" | "tool_calls" {
  if (r === "length") return "length";
  return calls.length > 0 && calls.every((c) => isJson(c.arguments)) ? "tool_calls" : "stop";
}

function isJson(text: string): boolean {
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}

export function usageOf(results: readonly GenerationResult[]): Usage {
  let prompt = 0, completion = 0, cached = 0;
  for (const r of results) {
    prompt += r.promptTokens.length;
    cached += r.timings.cachedPromptTokens;
    for (const c of r.choices ?? [r]) completion += decodedTokens(c);
  }
  return { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion, prompt_tokens_details: { cached_tokens: cached } };
}

/**
 * the tokens llama-server counts as a choice's (its slot's n_decoded, read for usage's
 * completion_tokens, tokens_predicted and timings' predicted_n alike): every token sampled, the
 * end-of-generation token that ended it too (its slot counts it before it sees it is one), though
 * the library's completionTokens, the text's tokens, leave it out
 */
export function decodedTokens(c: Choice): number {
  return c.completionTokens.length + (c.endToken ? 1 : 0);
}

/** llama.cpp server's `timings` object (of the first prompt), with TTFT and queue time added, and its draft counts where the request drafted */
export function timingsOf(r: GenerationResult): Record<string, number> {
  const ended = (r.choices ?? [r]).filter((c) => c.endToken).length;
  return timingsObject(withDecoded(r.timings, r.timings.completionTokens + ended), r.speculative);
}

/**
 * timings counting `decoded` tokens, as llama-server's slot counts them (decodedTokens): its
 * predicted_n, and the decode steps its rates divide by (the engine's decode time already runs to
 * the end-of-generation token's step)
 */
function withDecoded(t: Timings, decoded: number): Timings {
  return decoded === t.completionTokens ? t : { ...t, completionTokens: decoded, ...decodeRates(t.decodeMs, decoded) };
}

/** llama.cpp server's `timings` object of engine timings (a finished request's, or one's so far: timings_per_token) */
export function timingsObject(t: Timings, speculative?: GenerationResult["speculative"]): Record<string, number> {
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
    // (as llama-server's, where the request drafted)
    ...(speculative ? { draft_n: speculative.drafted, draft_n_accepted: speculative.accepted } : {}),
  };
}

/** A generated token's logprob with the text it adds to the completion and where that text starts. */
export interface PlacedLogprob {
  readonly lp: TokenLogprob;
  text: string;
  readonly offset: number;
}

/**
 * Logprobs on the wire. A generated token's `token` text is what it adds to the completion,
 * decoded after the prompt and the tokens before it (as the engine's stream decoder does): a
 * SentencePiece word keeps its leading space, and the tokens join into the text (a character
 * split across tokens shows with the token that completes it). Its `bytes` are the token's own
 * (Tokenizer.tokenBytes), so the bytes of split characters can be rejoined, as OpenAI documents
 * and llama-server sends them. Alternatives in top_logprobs are not in the text: their text is
 * their own bytes decoded. A preserved special token (a tool format's marker taken under the
 * reply's grammar) adds its own text to the completion, as the engine writes it: its entry shows
 * that text, as llama-server's shows the token's text_to_send.
 */
/** one token of a chat answer's logprobs.content, as OpenAI's */
export interface ChatLogprobEntry {
  token: string;
  logprob: number;
  bytes: number[];
  top_logprobs: { token: string; logprob: number; bytes: number[] }[];
}

export class TokenTexts {
  private readonly utf8 = new TextDecoder();

  constructor(private readonly tokenizer: Tokenizer) {}

  /** one choice's tokens, generated after `promptTokens`, decoded as the engine writes the completion (`preserved`: the request's preserved special tokens, whose text it holds) */
  choice(promptTokens: readonly number[], preserved?: readonly string[]): ChoiceLogprobs {
    return new ChoiceLogprobs(completionDecoder(this.tokenizer, promptTokens, preserved));
  }

  /** a finished choice's logprobs within its completion */
  placed(promptTokens: readonly number[], logprobs: readonly TokenLogprob[], completion: string, preserved?: readonly string[]): PlacedLogprob[] {
    const choice = this.choice(promptTokens, preserved);
    for (const lp of logprobs) choice.push(lp);
    choice.end();
    return choice.take(completion.length);
  }

  /** a token's own bytes, and their text (U+FFFD for part of a character) */
  private own(id: number): { token: string; bytes: number[] } {
    const bytes = this.tokenizer.tokenBytes(id);
    return { token: this.utf8.decode(bytes), bytes: [...bytes] };
  }

  /** chat's logprobs.content entry */
  chatEntry(p: PlacedLogprob): ChatLogprobEntry {
    return {
      token: p.text, logprob: p.lp.logprob, bytes: this.own(p.lp.token).bytes,
      // (the sampled token among its alternatives as `token` shows it: a client comparing the two finds its greedy choice)
      top_logprobs: p.lp.top.map((t) => ({ ...this.own(t.token), ...(t.token === p.lp.token ? { token: p.text } : {}), logprob: t.logprob })),
    };
  }

  /**
   * text completions' logprobs (parallel arrays); offsets count from the completion's start, or
   * from the text's start when the prompt's `echoed` characters come before the completion
   */
  completionLogprobs(placed: readonly PlacedLogprob[], echoed = 0): CompletionLogprobs {
    return {
      tokens: placed.map((p) => p.text),
      token_logprobs: placed.map((p) => p.lp.logprob),
      top_logprobs: placed.map((p) => this.topOf(p.lp, p.text)),
      text_offset: placed.map((p) => echoed + p.offset),
    };
  }

  /**
   * The entry of the end-of-generation token that ended a completion, after its tokens: its own
   * text, which the completion does not hold (OpenAI's legacy completions list "<|endoftext|>",
   * vLLM the token's string), at `offset`, the completion's end. lm-evaluation-harness reads an
   * echoed prompt's logprobs as every entry but the last, so the entry must be there when the
   * model's greedy choice after the prompt is its end.
   */
  endLogprobs(end: TokenLogprob, offset: number): CompletionLogprobs {
    const own = this.own(end.token).token;
    return { tokens: [own], token_logprobs: [end.logprob], top_logprobs: [this.topOf(end, own)], text_offset: [offset] };
  }

  /**
   * An echoed prompt's logprobs, as OpenAI's legacy completions gave them with `echo`: every prompt
   * token with its text (the prompt decoded token by token: a special token such as BOS adds none)
   * and its offset in that text; the first token has no logprob and no alternatives (null), as
   * nothing before it predicts it.
   */
  promptLogprobs(promptTokens: readonly number[], logprobs: PromptLogprobs): CompletionLogprobs {
    const decoder = this.tokenizer.createStreamDecoder({ skipSpecialTokens: true });
    const out: CompletionLogprobs = { tokens: [], token_logprobs: [], top_logprobs: [], text_offset: [] };
    let offset = 0;
    promptTokens.forEach((token, i) => {
      let text = decoder.push(token);
      if (i === promptTokens.length - 1) text += decoder.flush();
      const lp = logprobs[i] ?? null;
      out.tokens.push(text);
      out.token_logprobs.push(lp?.logprob ?? null);
      out.top_logprobs.push(lp && this.topOf(lp, text));
      out.text_offset.push(offset);
      offset += text.length;
    });
    return out;
  }

  /**
   * a token's alternatives keyed by their own text, with the token itself where it is not among
   * them: OpenAI's completions "always return the logprob of the sampled token, so there may be up
   * to logprobs+1 elements", as vLLM's do (a sampled token outside the top, or logprobs 0, left it
   * out: `{}` for every token). The sampled token is keyed by `shown`, its text in `tokens` (a
   * text's first word without its leading space, "" for a byte that begins a character): its own
   * text there made lm-evaluation-harness's is_greedy (tokens[i] equal to top_logprobs[i]'s best
   * key) false for a greedy continuation
   */
  private topOf(lp: TokenLogprob, shown: string): Record<string, number> {
    // (in rank order; an alternative whose own text is the sampled token's shown text does not hide it)
    const entries = lp.top.map((t): [string, number] => [t.token === lp.token ? shown : this.own(t.token).token, t.logprob]).filter(([key], i) => key !== shown || lp.top[i]!.token === lp.token);
    if (!lp.top.some((t) => t.token === lp.token)) entries.push([shown, lp.logprob]);
    return Object.fromEntries(entries);
  }
}

/** text completions' `logprobs`: parallel arrays; an echoed prompt's first token has null for its logprob and alternatives */
export interface CompletionLogprobs {
  tokens: string[];
  token_logprobs: (number | null)[];
  top_logprobs: (Record<string, number> | null)[];
  text_offset: number[];
}

/** the logprobs of an echoed prompt followed by its completion's */
export function joinLogprobs(prompt: CompletionLogprobs, completion: CompletionLogprobs): CompletionLogprobs {
  return {
    tokens: [...prompt.tokens, ...completion.tokens], token_logprobs: [...prompt.token_logprobs, ...completion.token_logprobs],
    top_logprobs: [...prompt.top_logprobs, ...completion.top_logprobs], text_offset: [...prompt.text_offset, ...completion.text_offset],
  };
}

/**
 * One choice's logprobs placed in its text. Only tokens whose text starts inside the text the
 * client gets are reported: where a stop string cuts the text, a token that begins before the
 * cut stays even where it runs on into the stop string, and the tokens after it go, as none of
 * their text is in the answer. (llama-server drops as many final tokens as the stop string has
 * when tokenized alone: an estimate of the same cut.)
 */
export class ChoiceLogprobs {
  private readonly placed: PlacedLogprob[] = [];
  private taken = 0;
  private decoded = 0;

  constructor(private readonly decoder: StreamDecoder) {}

  /** places the next token's logprob; returns its placement (its text as decoded so far) */
  push(lp: TokenLogprob): PlacedLogprob {
    const placed = { lp, text: this.decoder.push(lp.token), offset: this.decoded };
    this.placed.push(placed);
    this.decoded += placed.text.length;
    return placed;
  }

  /** the generation has ended: bytes the decoder still holds (an unfinished character) belong to the last token */
  end(): void {
    const tail = this.decoder.flush();
    const last = this.placed.at(-1);
    if (last) last.text += tail;
  }

  /** the tokens not taken yet whose text starts within the first `shown` characters of the completion */
  take(shown: number): PlacedLogprob[] {
    const from = this.taken;
    while (this.taken < this.placed.length && this.placed[this.taken]!.offset < shown) this.taken++;
    return this.placed.slice(from, this.taken);
  }
}
