import type { Choice, GenerateOptions, GenerationResult, TokenLogprob } from "../generation/index.js";
import { llamaCppSamplerNames } from "../sampling/index.js";
import type { Tokenizer } from "../tokenizer/index.js";
import { decodedTokens, timingsOf, type ChatLogprobEntry } from "./openai.js";
import { invalid } from "./errors.js";
import { defined } from "./params.js";

/*
 * llama-server's own reply to POST /completion (and /completions), not OpenAI's: one object per
 * completion, {content, tokens, stop, tokens_predicted, tokens_evaluated, stop_type, ...} (its
 * to_json_non_oaicompat), an array of them for several prompts; streamed, one event per token
 * {content, stop: false} (to_json_non_oaicompat_partial) and a last one with stop true and the
 * summary, whose content is "" (the text went in the partial events), and no [DONE].
 */

/** what a native reply says of its request */
export interface NativeRequest {
  model: string;
  options: GenerateOptions;
  stream: boolean;
  logprobs: number | undefined;
  /** post_sampling_probs: the logprobs are the sampled-from distribution's, shown as probabilities */
  postSampling: boolean;
  /** return_tokens: an unstreamed reply lists its token ids */
  returnTokens: boolean;
  /** the context's tokens: a completion that fills it is truncated */
  contextSize: number;
}

/**
 * llama-server's id_slot in a reply (server-task.cpp: to_json_non_oaicompat, final and partial):
 * the slot the completion ran in, here the engine's (GenerationRun.slot, the place GET /slots
 * lists it in); -1 for one that never ran (cancelled while it waited)
 */
function slotOf(slot: number | undefined): number {
  return slot ?? -1;
}

/** a streamed token's event (the end-of-generation token's too, whose text is what was held back) */
export function nativePartial(text: string, token: number | undefined, index: number, predicted: number, evaluated: number, slot: number | undefined): Record<string, unknown> {
  return { index, content: text, tokens: token === undefined ? [] : [token], stop: false, id_slot: slotOf(slot), tokens_predicted: predicted, tokens_evaluated: evaluated };
}

/** a completion's summary; streamed, its text and tokens were sent already; unstreamed, its tokens are listed with return_tokens only (llama-server keeps them only then) */
export function nativeFinal(req: NativeRequest, r: GenerationResult, c: Choice, index: number, tokenizer: Tokenizer, slot: number | undefined): Record<string, unknown> {
  const { type, word } = stopOf(req.options, c, tokenizer, r.promptTokens);
  const tokens = generatedTokens(c);
  return {
    index, content: req.stream ? "" : c.completion, tokens: req.stream || !req.returnTokens ? [] : tokens, id_slot: slotOf(slot), stop: true, model: req.model,
    tokens_predicted: decodedTokens(c), tokens_evaluated: r.promptTokens.length, generation_settings: settingsOf(req),
    prompt: r.prompt, has_new_line: c.completion.includes("\n"), truncated: truncated(req, r, c), stop_type: type, stopping_word: word,
    tokens_cached: r.promptTokens.length + c.completionTokens.length, timings: timingsOf(r),
  };
}

/**
 * the tokens llama-server counts as generated: the completion's, then the end-of-generation token
 * that ended it (its slot samples and counts it, and lists it with return_tokens, though it adds no
 * text)
 */
function generatedTokens(c: Choice): number[] {
  return c.endToken ? [...c.completionTokens, c.endToken.token] : c.completionTokens;
}

/**
 * llama-server's truncated: the completion stopped because the context was full (process_token:
 * the slot's tokens + 1 reached n_ctx, context shift off), whatever n_predict was
 */
function truncated(req: NativeRequest, r: GenerationResult, c: Choice): boolean {
  return c.finishReason === "length" && r.promptTokens.length + c.completionTokens.length >= req.contextSize;
}

/**
 * llama-server's stop_type: "eos" (an end-of-generation token), "word" (a stop string, named in
 * stopping_word), "limit" (n_predict or the context), "none" (cancelled). The stop string is the
 * one the completion's tokens spell right after the text answered (the tokens run past the cut),
 * decoded after the prompt as the answer's text was: alone, a SentencePiece tokenizer drops the
 * first token's leading space and every offset after it is one off
 */
function stopOf(options: GenerateOptions, c: Choice, tokenizer: Tokenizer, prompt: readonly number[]): { type: string; word: string } {
  if (c.finishReason === "length") return { type: "limit", word: "" };
  if (c.finishReason === "abort") return { type: "none", word: "" };
  if (c.endToken) return { type: "eos", word: "" };
  const before = tokenizer.decode(prompt, { skipSpecialTokens: true }).length;
  const after = tokenizer.decode([...prompt, ...c.completionTokens], { skipSpecialTokens: true }).slice(before + c.completion.length);
  const stops = options.stop === undefined ? [] : typeof options.stop === "string" ? [options.stop] : options.stop;
  return { type: "word", word: stops.find((s) => s !== "" && after.startsWith(s)) ?? "" };
}

/** the request's sampling as llama-server's generation_settings names it */
function settingsOf(req: NativeRequest): Record<string, unknown> {
  const o = req.options;
  const stop = o.stop === undefined ? [] : typeof o.stop === "string" ? [o.stop] : [...o.stop];
  return defined({
    n_predict: o.maxTokens ?? -1, seed: o.seed, temperature: o.temperature, top_k: o.topK, top_p: o.topP, min_p: o.minP,
    stop, stream: req.stream, n_probs: req.logprobs ?? 0, post_sampling_probs: req.postSampling,
    // (the chain the request sampled with, by llama.cpp's names, as GET /props lists the default one)
    samplers: llamaCppSamplerNames(o.samplerOrder),
  });
}

/**
 * a token's entry of llama-server's completion_probabilities (with n_probs): the chat API's entry
 * with each token's id beside it, as llama-server's probs_vector_to_json writes it; with
 * post_sampling_probs (`post`) the probabilities themselves, {prob, top_probs: [{id, token, bytes,
 * prob}]}, in place of their logarithms
 */
export function nativeProbability(entry: ChatLogprobEntry, lp: TokenLogprob, post: boolean): Record<string, unknown> {
  const top = entry.top_logprobs.map((t, k) => ({ id: lp.top[k]!.token, ...t }));
  if (!post) return { id: lp.token, ...entry, top_logprobs: top };
  return {
    id: lp.token, token: entry.token, bytes: entry.bytes, prob: Math.exp(entry.logprob),
    top_probs: top.map(({ id, token, bytes, logprob }) => ({ id, token, bytes, prob: Math.exp(logprob) })),
  };
}

/**
 * llama-server's `response_fields`: a native summary cut down to the listed fields, each a path
 * of keys joined by "/" ("timings/prompt_n") and kept under that path as its key, flat; a path
 * that names nothing is left out (its json_get_nested_values, read for this). Absent or empty:
 * the whole summary. Only the summary: streamed token events are sent whole, as there.
 */
export function responseFieldsOf(body: Readonly<Record<string, unknown>>): readonly string[] | undefined {
  const v = body["response_fields"];
  if (v === undefined || v === null) return undefined;
  if (!Array.isArray(v) || v.some((f) => typeof f !== "string")) throw invalid("response_fields", `'response_fields' must be a list of field paths ("content", "timings/prompt_n"), got ${Array.isArray(v) ? "a list with a non-string" : typeof v}`, "invalid_type");
  return v.length === 0 ? undefined : (v as string[]);
}

/** the summary's fields that `paths` name, under their paths */
export function pickResponseFields(paths: readonly string[], reply: Readonly<Record<string, unknown>>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const path of paths) {
    let current: unknown = reply;
    let found = true;
    for (const key of path.split("/")) {
      if (typeof current === "object" && current !== null && !Array.isArray(current) && Object.hasOwn(current, key)) current = (current as Record<string, unknown>)[key];
      else { found = false; break; }
    }
    if (found) out[path] = current;
  }
  return out;
}
