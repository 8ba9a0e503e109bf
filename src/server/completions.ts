import { randomUUID } from "node:crypto";
import type { ServerResponse } from "node:http";
import { ChatTemplateError, continuesReasoning } from "../chat/index.js";
import type { Choice, GenerateOptions, GenerationResult } from "../generation/index.js";
import type { GenerationRun } from "../llm.js";
import { RequestError } from "../engine/index.js";
import { GrammarError } from "../sampling/constraints/index.js";
import { ApiError, fromSubmitError, internal, invalid } from "./errors.js";
import { nativeFinal, nativePartial, nativeProbability, pickResponseFields, responseFieldsOf } from "./llama-native.js";
import { decodedTokens, finishReasonOf, joinLogprobs, timingsObject, timingsOf, usageOf, type ChatLogprobEntry, type CompletionLogprobs } from "./openai.js";
import { describeValue, generationOptionsOf, MAX_TOKENS_PARAMS, maxTokensParam, optBoolean, optNumber, optString, responseFormatParam, streamOf, type Body } from "./params.js";
import { messagesOf, promptEndOf, promptsOf, promptTokens, templateKwargsOf } from "./requests.js";
import { messagesForTemplate, readReply, reasoningFormatOf, replyGrammar, replySyntaxOf, ReplyStream, templateVariablesOf, thinkingOf, toolCallsOf, toolsOf, withTemplateParallel, type ReplyDelta, type ReplySyntax } from "./tools.js";
import type { ServeContext } from "./context.js";
import type { SettingNames } from "./setting-names.js";

type Kind = "chat" | "text";

/** A validated completion request: token-id prompts and the library's options. */
interface Job {
  kind: Kind;
  prompts: number[][];
  options: GenerateOptions;
  n: number;
  /** text completions' best_of: choices generated per prompt, of which the n with the highest log probability per token are answered (n when not given) */
  bestOf: number;
  stream: boolean;
  includeUsage: boolean;
  /** stream_options.continuous_usage_stats: every chunk carries its choice's usage so far */
  continuousUsage: boolean;
  /** llama-server's timings_per_token: every streamed chunk carries its request's timings so far */
  timingsPerToken: boolean;
  /** top alternatives to report per token, when logprobs are asked for */
  logprobs: number | undefined;
  /** text completions' echo: each prompt's text, returned before its completion (and its tokens' logprobs, with logprobs) */
  echo?: readonly string[];
  model: string;
  /** what a chat reply is read for: the template's tool calls (with tools) and its reasoning */
  reply?: ReplySyntax;
  /** the parameter whose grammar shapes the reply (what a grammar failing mid-generation names) */
  constraintParam?: string;
  /** the name the request gave its token limit by */
  maxTokensParam: string;
  /** whether the request set its token limit (else the server chose one: what the context and KV cache leave) */
  limitGiven: boolean;
  /** answered in llama-server's own shape (its POST /completion), not OpenAI's */
  native: boolean;
  /** the context's tokens (a native reply that fills it says truncated) */
  contextSize: number;
  /** llama-server's response_fields: a native summary holds only these (paths, "timings/prompt_n") */
  responseFields?: readonly string[];
  /** llama-server's post_sampling_probs: the logprobs are the sampled-from distribution's, answered natively as probabilities */
  postSampling: boolean;
  /** llama-server's return_tokens: a native reply lists its completion's token ids */
  returnTokens: boolean;
}

/** the reply's shape: OpenAI's, or llama-server's own (POST /completion) */
export type ReplyShape = "openai" | "llama";

const PROMPT_PARAM: Record<Kind, string> = { chat: "messages", text: "prompt" };

/** POST /v1/chat/completions, /v1/completions and llama-server's /completion: validate, queue on the engine, answer (streamed or not). */
export async function handleCompletion(ctx: ServeContext, kind: Kind, body: Body, res: ServerResponse, shape: ReplyShape = "openai"): Promise<void> {
  const fields = shape === "llama" ? responseFieldsOf(body) : undefined;
  const job = { ...(await jobOf(ctx, kind, body, shape)), native: shape === "llama", ...(fields ? { responseFields: fields } : {}) };
  ctx.bodyRead(res);
  // a client that left while its prompt was tokenized (the close listener below comes too late
  // for it) gets nothing queued: it would otherwise run to the end for nobody
  if (res.destroyed) return;
  ctx.admit(job.prompts.map(() => job.bestOf));
  const controller = new AbortController();
  // a client that goes away cancels its generation (the engine drops it at the next step)
  const onClose = () => controller.abort();
  res.on("close", onClose);
  // (a prompt refused by submitAll leaves nothing queued to track)
  let release: (() => void) | undefined;
  try {
    const runs = submitAll(ctx, job, controller);
    release = ctx.track(controller, () => runs.every((r) => r.queued()));
    if (job.stream) await stream(ctx, job, runs, res, controller.signal);
    else await respond(ctx, job, runs, res, controller.signal);
  } finally {
    release?.();
    res.off("close", onClose);
  }
}

async function jobOf(ctx: ServeContext, kind: Kind, body: Body, shape: ReplyShape): Promise<Job> {
  const { model } = ctx;
  const name = optString(body, "model");
  if (name !== undefined && !ctx.modelNames.has(name)) {
    throw new ApiError(404, `the model '${name}' does not exist: this server serves '${ctx.modelId}'`, "invalid_request_error", "model", "model_not_found");
  }
  const echo = kind === "text" && (optBoolean(body, "echo") ?? false);
  // llama-server's own routes (/completion, /infill) take n_predict 0 as "no tokens will be generated
  // but the prompt is evaluated into the cache" (its n_predict's description): llama.vim's and
  // llama.vscode's ring-buffer requests preload their chunks so, and the prompt's full KV blocks stay
  // in the prefix cache for the next request. OpenAI's routes keep OpenAI's 400 without echo
  const prefillOnly = shape === "llama";
  if (kind === "text" && !echo && !prefillOnly) {
    for (const name of MAX_TOKENS_PARAMS) {
      if (body[name] === 0) throw invalid(name, `'${name}' 0 generates nothing: it is allowed only with 'echo': true (the prompt returned, and scored with 'logprobs')`);
    }
  }
  // (logit_bias text as llama-server's common_tokenize reads it: no BOS/EOS, special-token text as plain text)
  const options = generationOptionsOf(body, model.info.vocabSize, echo || prefillOnly, (text) => model.tokenizer.encode(text, { addSpecialTokens: false, parseSpecial: false }));
  const { stream, includeUsage, continuousUsage, timingsPerToken } = streamOf(body);
  const slot = idSlotOf(body, model.engine.maxSequences);
  if (slot !== undefined) options.slot = slot;
  let logprobs: number | undefined;
  let prompts: number[][];
  let replySyntax: ReplySyntax | undefined;
  let constraintParam: string | undefined;
  let echoed: string[] | undefined;
  // the choices answered per prompt, and those generated (best_of of them, for text completions)
  const answered = options.n ?? 1;
  let bestOf = answered;
  if (kind === "chat") {
    if (body.best_of !== undefined && body.best_of !== null && body.best_of !== answered) throw invalid("best_of", "'best_of' is a parameter of /v1/completions, not of chat completions", "unsupported_parameter");
    const top = optNumber(body, "top_logprobs", { integer: true, min: 0, max: 20 });
    const want = optBoolean(body, "logprobs") ?? false;
    if (top !== undefined && !want) throw invalid("top_logprobs", "'top_logprobs' needs 'logprobs': true");
    // llama-server's oaicompat_chat_params_parse: logprobs true sets n_probs to top_logprobs; without
    // logprobs, the request's own n_probs above 0 asks for them (OpenAI's logprobs.content, with n_probs
    // alternatives). n_probs also stands in for a top_logprobs not given (llama-server's default there, 20,
    // is not OpenAI's, 0)
    const nProbs = nProbsOf(body);
    logprobs = want ? top ?? nProbs ?? 0 : nProbs;
    ctx.admissible(1, options.n ?? 1, "messages");
    const { messages, formatter, source, variables, tools, ending, shown } = chatInputOf(ctx, body);
    // (a continued message the template does not write as given is the request's 400, found here)
    const text = thinkingOf(source, "") || ending.continueFinalMessage ? await rendered(() => formatter.prompt(shown, variables, ending)) : "";
    const continued = ending.continueFinalMessage ? messages.at(-1) : undefined;
    const thinking = thinkingOf(source, text, continued?.content, continued !== undefined && continuesReasoning(continued));
    const reasoning = reasoningFormatOf(body);
    replySyntax = replySyntaxOf(source, tools, thinking, reasoning, options.jsonSchema !== undefined || options.json !== undefined);
    const shaped = replyGrammar(options, tools, source, thinking, reasoning);
    if (shaped) {
      options.grammar = shaped.grammar;
      // (a format's markers its vocabulary holds as special tokens: taken whole, kept in the text)
      if (shaped.preserved) options.preservedTokens = shaped.preserved;
      // (the format is in the grammar now)
      delete options.jsonSchema;
      delete options.json;
      constraintParam = shaped.param;
    }
    prompts = [await rendered(() => formatter.encodeAsync(shown, variables, ending))];
    options.stopTokens = [...formatter.endOfTurnIds];
  } else {
    // OpenAI's completions take a count of alternatives; llama-server also reads the chat API's flag
    // here, as the count it converts to: true is 1 alternative, false none (no logprobs)
    logprobs = typeof body.logprobs === "boolean" ? (body.logprobs ? 1 : undefined) : optNumber(body, "logprobs", { integer: true, min: 0, max: 20 });
    // llama-server's own name for the count, n_probs, wins over logprobs where it is above 0 (its
    // params_from_json_cmpl reads logprobs only while n_probs is left at its default, 0)
    const nProbs = nProbsOf(body);
    if (nProbs !== undefined) logprobs = nProbs;
    // the echoed prompt's tokens come with their logprobs: the prompt is scored in its prefill
    if (echo && logprobs !== undefined) options.promptLogprobs = logprobs;
    bestOf = bestOfOf(body, answered, stream);
    // best_of choices run for each prompt: the logprobs they are ranked by come with them
    if (bestOf > answered) {
      options.n = bestOf;
      options.logprobs = logprobs ?? 0;
    }
    const given = promptsOf(body, model.info.vocabSize);
    // a request that could never be taken is refused before its prompts are tokenized
    ctx.admissible(given.length, options.n ?? 1, "prompt");
    // tokenized a slice at a time: a multi-megabyte prompt must not stop /health and the other requests
    prompts = [];
    for (const p of given) prompts.push(await promptTokens(model.tokenizer, p));
    // a prompt of token ids is echoed as their text
    if (echo) echoed = given.map((p, i) => (typeof p === "string" ? p : model.tokenizer.decode(prompts[i]!, { skipSpecialTokens: true })));
  }
  if (logprobs !== undefined) options.logprobs = logprobs;
  // (llama-server's params_from_json_cmpl reads both on every completion route; unstreamed, its
  // reply lists the token ids only with return_tokens, its stream's events always do)
  const postSampling = optBoolean(body, "post_sampling_probs") ?? false;
  if (postSampling && logprobs !== undefined) options.logprobsAfterSampling = true;
  const returnTokens = optBoolean(body, "return_tokens") ?? false;
  const n = options.n ?? 1;
  const context = model.contextSize;
  for (const p of prompts) checkRoom(p.length, context, options.maxTokens, PROMPT_PARAM[kind], maxTokensParam(body), ctx.settings);
  const limitGiven = options.maxTokens !== undefined;
  if (options.maxTokens === undefined) {
    // as vLLM (max_model_len less the prompt) and llama-server (n_predict -1): up to the end of the
    // context, which each of the n choices has to itself; bounded by what the KV cache holds for the
    // n of them together (the prompt shared, a margin for their partial blocks)
    const longest = Math.max(...prompts.map((p) => p.length));
    const kv = model.engine.stats.kvCapacityTokens;
    options.maxTokens = Math.max(1, Math.min(context - longest, Math.floor((kv - longest) / n) - 32));
  }
  contextShiftOf(body, prompts, options.maxTokens, context, maxTokensParam(body));
  draftingOf(ctx, body, options);
  constraintParam ??= options.grammar !== undefined ? (replySyntax?.calls ? "tool_choice" : "grammar") : options.jsonSchema !== undefined || options.json !== undefined ? responseFormatParam(options) : undefined;
  return {
    kind, prompts, options: { ...ctx.model.generationDefaults, ...options }, n: answered, bestOf, stream, includeUsage, continuousUsage, timingsPerToken, logprobs, model: ctx.modelId, maxTokensParam: maxTokensParam(body), limitGiven, native: false, contextSize: context, postSampling, returnTokens,
    ...(echoed ? { echo: echoed } : {}), ...(replySyntax ? { reply: replySyntax } : {}), ...(constraintParam ? { constraintParam } : {}),
  };
}

/** what a chat request shows its template: the messages (tools' turns written as it reads them), variables, tools and where the prompt ends */
function chatInputOf(ctx: ServeContext, body: Body) {
  const messages = messagesOf(body);
  const requested = toolsOf(body);
  // a request with tools gets the model's "tool_use" template where it has one, as llama-server and transformers choose it
  const formatter = ctx.formatter(requested !== undefined);
  const source = formatter.template.source;
  // the request's own variables (Qwen3's enable_thinking, a template's custom ones) may replace the server's (firefunction's date)
  const variables = { ...templateVariablesOf(source, requested), ...templateKwargsOf(body, ctx.templateKwargs) };
  const toolsGiven = requested && withTemplateParallel(body, requested, source, () => formatter.writesParallelCalls(variables));
  // the tools that may be called; tool_choice "none" still shows them to the template (llama.cpp renders a request's tools whatever
  // its tool_choice: the model knows of them but its reply is not read for calls)
  const tools = toolsGiven && toolsGiven.choice !== "none" ? toolsGiven : undefined;
  // a template that thinks may leave its prompt inside the reasoning: seen in the prompt's text
  const ending = promptEndOf(body, messages);
  const shown = messagesForTemplate(messages, source, tools, ending.continueFinalMessage);
  return { messages, formatter, source, variables, tools, ending, shown };
}

/**
 * llama-server's POST /apply-template: {messages, ...} -> {prompt}, the text the chat route
 * tokenizes for the same request (its template, tools, variables and generation prompt)
 */
export async function applyTemplate(ctx: ServeContext, body: Body, res: ServerResponse): Promise<void> {
  const { formatter, variables, ending, shown } = chatInputOf(ctx, body);
  const prompt = await rendered(() => formatter.prompt(shown, variables, ending));
  ctx.bodyRead(res);
  await ctx.send(res, { prompt });
}

/**
 * A 400 in the server's words (OpenAI's context_length_exceeded, naming the request's fields and
 * the operator's setting) for a prompt that leaves its completion no room in the context: its
 * tokens and the token limit past the context, or, with no token limit (the reply runs to the end
 * of the context), a prompt that fills the context (the engine's own refusal spoke of its
 * options, not the request's)
 */
function checkRoom(promptTokens: number, context: number, maxTokens: number | undefined, param: string, maxTokensName: string, settings: SettingNames): void {
  if (maxTokens !== undefined && promptTokens + maxTokens > context) {
    throw new ApiError(400, `This model's maximum context length is ${context} tokens. However, you requested ${promptTokens + maxTokens} tokens ` +
      `(${promptTokens} in the ${param}, ${maxTokens} in the completion). Please reduce the length of the ${param} or completion.`,
    "invalid_request_error", param, "context_length_exceeded");
  }
  if (maxTokens === undefined && promptTokens >= context) {
    throw new ApiError(400, `This model's maximum context length is ${context} tokens (n_ctx in GET /v1/models). However, your ${param} resulted in ${promptTokens} tokens, ` +
      `${promptTokens > context ? "more than the context holds" : "which leaves no room for the completion"} (with no limit set by ${maxTokensName} the completion runs to the end of the context, and needs at least 1 token). ` +
      `Please reduce the length of the ${param}, or start the server with a larger ${settings.contextSize}.`,
    "invalid_request_error", param, "context_length_exceeded");
  }
}

/**
 * llama-server's `n_keep` (the prompt's tokens kept when a full context is shifted, -1 all of them)
 * and `n_discard` (the tokens then dropped, 0 half of what is left), in its hard limits. They act
 * only once a completion fills its context, and only where the context is shifted (llama-server's
 * --context-shift, off by default); this server never shifts it: a completion stops at the
 * context's end (finish_reason "length", stop_type "limit"). So 0 (their default, sent by clients
 * with every request) asks nothing, and so does any value for a completion that ends before its
 * context is full; one that could fill it with n_keep or n_discard set asks for a shift this
 * server would not make, a 400 naming the field (it was answered as if not sent: the completion
 * cut short where the client expected it to go on)
 */
function contextShiftOf(body: Body, prompts: readonly number[][], maxTokens: number, context: number, maxTokensName: string): void {
  const nKeep = optNumber(body, "n_keep", { integer: true, min: -1, max: 2 ** 31 - 1 });
  const nDiscard = optNumber(body, "n_discard", { integer: true, min: 0, max: 2 ** 31 - 1 });
  const [name, value] = nKeep !== undefined && nKeep !== 0 ? ["n_keep", nKeep] as const : nDiscard !== undefined && nDiscard !== 0 ? ["n_discard", nDiscard] as const : [];
  if (name === undefined) return;
  const longest = Math.max(...prompts.map((p) => p.length));
  if (longest + maxTokens < context) return;
  const asks = name === "n_keep" ? `keeping ${value === -1 ? "all of the prompt's" : `${value} of the prompt's`} tokens` : `dropping ${value} tokens`;
  const room = context - longest - 1;
  const limit = room >= 1 ? `, or set ${maxTokensName} to at most ${room} so the completion ends before the context is full` : "";
  throw invalid(name, `'${name}' ${value} asks that the context be shifted once the completion fills it (${asks}) so that it goes on: this server never shifts the context ` +
    `(as llama-server without --context-shift, its default), a completion stops at the context's end (${context} tokens). Leave ${name} out (or 0)${limit}`, "unsupported_parameter");
}

/**
 * The server's draft model for a request that can draft with it: one choice (n and best_of 1),
 * no logprobs of its tokens or its prompt's, a token to generate. llama-server's
 * `speculative.n_max` (a flat key, as its requests give it) sets the tokens proposed a round, at
 * most the server's draftTokens, 0 none; its `speculative.n_min` and `speculative.p_min` are not taken: the draft proposes n_max
 * tokens a round, cut short only by the reply's end. Speculation changes no answer (greedy tokens
 * are the model's own, sampled ones follow the rejection rule), only how fast it comes
 */
function draftingOf(ctx: ServeContext, body: Body, options: GenerateOptions): void {
  // (checked with a draft or without, as any parameter is: a client's malformed one is its 400 on every server)
  const nMax = optNumber(body, "speculative.n_max", { integer: true, min: 0 });
  const draft = ctx.draft;
  if (!draft || nMax === 0 || (options.n ?? 1) > 1 || options.logprobs !== undefined || options.promptLogprobs !== undefined || !options.maxTokens) return;
  options.draftModel = draft.model;
  // n_max at most the server's draft tokens, which the draft's KV pool is planned for (a larger one
  // would take more of it than the plan counts a request; llama-server's params_from_json keeps it
  // only >= 0, its slot's draft batch sized by the server's draft max), and at most the tokens left
  // to generate: a larger one would only reserve KV blocks no proposal fills
  options.draftTokens = Math.min(nMax ?? draft.tokens, draft.tokens, options.maxTokens);
}

/**
 * llama-server's `id_slot` (its handle_completions_impl: json_value(data, "id_slot", -1)), on every
 * completion route: -1 any slot; another id names a slot modulo the slot count (get_slot_by_id:
 * "allow id_slot to be out of bounds (wrap around)"; a negative one but -1 names none, so any), the
 * request deferred until that slot is idle and run there (GenerateOptions.slot: the engine's slots
 * are its maxSequences places). The slot's cache follows as there: this engine's slots share one
 * prefix cache, where the rows the slot's last request left are found. An id that is no integer
 * was read nowhere (llama-server logs it and takes -1): a 400 naming it, not a request whose slot
 * is silently another. Returns the slot, or undefined for any.
 */
function idSlotOf(body: Body, slots: number): number | undefined {
  const v = body["id_slot"];
  if (v === undefined || v === null) return undefined;
  if (!Number.isSafeInteger(v)) throw invalid("id_slot", `'id_slot' must be an integer: -1 (any slot, the default) or a slot's id (0..${slots - 1}; a larger one wraps around, as llama-server's), got ${describeValue(v)}`, "invalid_type");
  return (v as number) >= 0 ? (v as number) % slots : undefined;
}

/** llama-server's `n_probs`: the alternatives reported per token, where above 0 (0 or none: not asked for) */
function nProbsOf(body: Body): number | undefined {
  const n = optNumber(body, "n_probs", { integer: true, min: 0, max: 20 });
  return n !== undefined && n > 0 ? n : undefined;
}

/**
 * The chat prompt rendered from the request's messages. A template that cannot render them is the
 * request's 400 naming messages, as vLLM answers a template's failure: its raise_exception refusing
 * them (Mistral's refuse call ids that are not 9 letters and digits), a value it cannot take, a
 * continued message it does not write as given. A 500 would tell the client the server is broken
 * (and the openai client sends it again, twice).
 */
async function rendered<T>(render: () => T | Promise<T>): Promise<T> {
  try {
    return await render();
  } catch (e) {
    if (e instanceof ChatTemplateError) throw invalid("messages", `'messages' cannot be rendered by the chat template: ${e.message}`);
    throw e;
  }
}

/**
 * `best_of` of a text completion, as OpenAI's: at least n, at most 20, and not streamed (the best
 * are known only once all have ended)
 */
function bestOfOf(body: Body, n: number, stream: boolean): number {
  const bestOf = optNumber(body, "best_of", { integer: true, min: 1, max: 20 });
  if (bestOf === undefined) return n;
  if (bestOf < n) throw invalid("best_of", `'best_of' must be at least n (${n}), got ${bestOf}`);
  if (bestOf > n && stream) throw invalid("best_of", "'best_of' above n cannot be streamed: the best choices are known only once all have ended");
  return bestOf;
}

/**
 * The n of a prompt's choices to answer: all of them, or with best_of the n with the highest
 * log probability per token (OpenAI's definition), best first
 */
function answeredChoices(job: Job, choices: readonly Choice[]): readonly Choice[] {
  if (job.bestOf === job.n) return choices;
  const perToken = (c: Choice) => {
    const lps = c.logprobs ?? [];
    return lps.length === 0 ? -Infinity : lps.reduce((sum, lp) => sum + lp.logprob, 0) / lps.length;
  };
  return choices.map((c) => ({ c, score: perToken(c) })).sort((a, b) => b.score - a.score).slice(0, job.n).map(({ c }) => c);
}

/**
 * A prompt's run; one drafting whose KV room (its own, and the draft model's cache where that
 * counts in the same pool: a draft whose pool has no plan, as a library caller's startServer
 * gives it; tsllm serve plans it apart) the pool could never hold runs without the draft where it
 * fits so: speculation only speeds a reply up, it must not refuse one the server takes without a draft
 */
function submitOne(ctx: ServeContext, prompt: number[], options: GenerateOptions): GenerationRun {
  try {
    return ctx.model.submit(prompt, options);
  } catch (e) {
    if (options.draftModel === undefined || !(e instanceof RequestError && e.code === "context_length_exceeded")) throw e;
    return ctx.model.submit(prompt, { ...options, draftModel: undefined, draftTokens: undefined });
  }
}

/** every prompt's run, all queued before any answer is written (a bad one fails the request with nothing left running) */
function submitAll(ctx: ServeContext, job: Job, controller: AbortController): GenerationRun[] {
  const runs: GenerationRun[] = [];
  try {
    for (const p of job.prompts) runs.push(submitOne(ctx, p, { ...job.options, signal: controller.signal }));
  } catch (e) {
    controller.abort();
    throw fromSubmitError(e, { prompt: PROMPT_PARAM[job.kind], maxTokens: job.maxTokensParam, settings: ctx.settings, schema: responseFormatParam(job.options), limitGiven: job.limitGiven });
  }
  return runs;
}

async function results(ctx: ServeContext, runs: readonly GenerationRun[]): Promise<GenerationResult[]> {
  const out = await Promise.all(runs.map((r) => r.result()));
  // (after its end a run still queued never left the queue to run)
  out.forEach((r, i) => ctx.metrics.observe(r.timings, !runs[i]!.queued(), (r.choices ?? [r]).reduce((n, c) => n + decodedTokens(c), 0)));
  return out;
}

function header(job: Job): { id: string; object: string; created: number; model: string; system_fingerprint: string } {
  return {
    id: `${job.kind === "chat" ? "chatcmpl" : "cmpl"}-${randomUUID().replaceAll("-", "")}`,
    object: job.kind === "chat" ? "chat.completion" : "text_completion",
    created: Math.floor(Date.now() / 1000), model: job.model, system_fingerprint: "tsllm",
  };
}

/**
 * Why a run ended with "abort": a client that went away aborts with no reason and gets nothing;
 * the server aborts with the error the client is to see (a shutdown's 503).
 */
function cancellation(signal: AbortSignal): ApiError | undefined {
  return signal.reason instanceof ApiError ? signal.reason : undefined;
}

async function respond(ctx: ServeContext, job: Job, runs: readonly GenerationRun[], res: ServerResponse, signal: AbortSignal): Promise<void> {
  let all: GenerationResult[];
  try {
    all = await results(ctx, runs);
  } catch (e) {
    throw failure(job, e, ctx.settings);
  }
  if (res.destroyed) return;
  const cancelled = cancellation(signal);
  if (cancelled && all.some((r) => (r.choices ?? [r]).some((c) => c.finishReason === "abort"))) throw cancelled;
  if (job.native) return sendNative(ctx, job, runs, all, res);
  const choices = all.flatMap((r, i) => answeredChoices(job, r.choices ?? [r]).map((c, j) => {
    const index = i * job.n + j;
    const finish_reason = finishReasonOf(c.finishReason);
    // (best_of's ranking asks for logprobs the client may not have)
    const placed = job.logprobs !== undefined && c.logprobs && ctx.texts.placed(r.promptTokens, c.logprobs, c.completion, job.options.preservedTokens);
    if (job.kind === "chat") {
      const logprobs = placed ? { content: placed.map((p) => ctx.texts.chatEntry(p)), refusal: null } : null;
      const reply = readReply(c.completion, job.reply, c.finishReason === "length");
      const calls = toolCallsOf(reply, job.reply);
      const message = {
        role: "assistant", content: calls.length > 0 ? reply.content || null : reply.content,
        ...(reply.reasoning ? { reasoning_content: reply.reasoning } : {}), ...(calls.length > 0 ? { tool_calls: calls } : {}), refusal: null,
      };
      return { index, message, logprobs, finish_reason: finishReasonOf(c.finishReason, reply.calls) };
    }
    const echoed = job.echo?.[i] ?? "";
    let logprobs: CompletionLogprobs | null = placed ? ctx.texts.completionLogprobs(placed, echoed.length) : null;
    // (a chat's logprobs stop at its content, as OpenAI's: the end of turn is not listed there)
    const end = c.endToken?.logprob;
    if (logprobs && end) logprobs = joinLogprobs(logprobs, ctx.texts.endLogprobs(end, echoed.length + c.completion.length));
    if (logprobs && job.echo) logprobs = joinLogprobs(ctx.texts.promptLogprobs(r.promptTokens, r.promptLogprobs ?? []), logprobs);
    return { index, text: echoed + c.completion, logprobs, finish_reason };
  }));
  await ctx.send(res, { ...header(job), choices, usage: usageOf(all), timings: timingsOf(all[0]!) });
}

/** llama-server's /completion reply: one completion's object, or an array of them (several prompts or choices) */
function sendNative(ctx: ServeContext, job: Job, runs: readonly GenerationRun[], all: readonly GenerationResult[], res: ServerResponse): Promise<void> {
  const replies = all.flatMap((r, i) => answeredChoices(job, r.choices ?? [r]).map((c, j) => {
    // (best_of answers its best choices first: the slot is the one the choice itself ran in)
    const reply = nativeFinal(job, r, c, i * job.n + j, ctx.model.tokenizer, runs[i]!.slot((r.choices ?? [r]).indexOf(c)));
    // (n_probs: each token's logprob and its alternatives, as the chat API places them on the text,
    // then the end-of-generation token's, whose text is none, as llama-server lists it)
    const placed = job.logprobs !== undefined && c.logprobs && ctx.texts.placed(r.promptTokens, c.logprobs, c.completion, job.options.preservedTokens);
    const end = c.endToken?.logprob;
    if (placed && end) placed.push({ lp: end, text: "", offset: c.completion.length });
    const whole = placed ? { ...reply, completion_probabilities: placed.map((p) => nativeProbability(ctx.texts.chatEntry(p), p.lp, job.postSampling)) } : reply;
    return job.responseFields ? pickResponseFields(job.responseFields, whole) : whole;
  }));
  return ctx.send(res, replies.length === 1 ? replies[0]! : replies);
}

/**
 * What a run that failed inside the engine tells the client: a grammar the recognizer cannot
 * follow past some point (rules nesting too deep without a character, found only once the
 * output reaches them) is the request's fault, a 400 naming the parameter that gave it; anything
 * else is a 500.
 */
function failure(job: Job, e: unknown, settings: SettingNames): ApiError {
  if (e instanceof GrammarError && job.constraintParam) return invalid(job.constraintParam, `'${job.constraintParam}': the grammar cannot be followed: ${e.message}`);
  return internal(e, settings);
}

/** each run's events, tagged with the run's index, as they come */
async function* merged(runs: readonly GenerationRun[]) {
  const its = runs.map((r) => r.events());
  const next = (i: number) => its[i]!.next().then((r) => ({ i, r }));
  const pending = new Map(its.map((_, i) => [i, next(i)] as const));
  try {
    while (pending.size > 0) {
      const { i, r } = await Promise.race(pending.values());
      if (r.done) { pending.delete(i); continue; }
      pending.set(i, next(i));
      yield { run: i, event: r.value };
    }
  } finally {
    // a stream that stops reading (its client left) leaves an event asked of each run: how the run
    // ends is no one's to hear, a failure too (the model disposed right after a shutdown), which
    // unheard would be an unhandled rejection, fatal to the process
    for (const p of pending.values()) p.catch(() => {});
  }
}

async function stream(ctx: ServeContext, job: Job, runs: readonly GenerationRun[], res: ServerResponse, signal: AbortSignal): Promise<void> {
  const sse = ctx.sse(res);
  const head = header(job);
  head.object = job.kind === "chat" ? "chat.completion.chunk" : "text_completion";
  const total = runs.length * job.n;
  // each choice's tokens so far (continuous usage: vLLM's chunk usage is its choice's prompt and tokens)
  const made = new Array<number>(total).fill(0);
  // and when each choice's first token came (timings_per_token's decode time starts there)
  const firstAt = new Array<number>(total).fill(0);
  const usageSoFar = (index: number) => {
    if (!job.includeUsage) return {};
    if (!job.continuousUsage) return { usage: null };
    const prompt = job.prompts[Math.floor(index / job.n)]!.length;
    return { usage: { prompt_tokens: prompt, completion_tokens: made[index]!, total_tokens: prompt + made[index]! } };
  };
  // (llama-server's send_partial_response: the slot's timings on each partial result, its tokens so far counted: `decoded`, the end token's event counting it)
  const timingsSoFar = (index: number, decoded = made[index]!) => job.timingsPerToken ? { timings: timingsObject(runs[Math.floor(index / job.n)]!.timingsSoFar(decoded, firstAt[index]!)) } : {};
  const extra = (index: number) => ({ ...usageSoFar(index), ...timingsSoFar(index) });
  const chunk = (index: number, text: string | undefined, finish: "stop" | "length" | "tool_calls" | null, logprobs: unknown = null) => job.kind === "chat"
    ? { ...head, choices: [{ index, delta: text === undefined ? {} : { content: text }, logprobs, finish_reason: finish }], ...extra(index) }
    : { ...head, choices: [{ index, text: text ?? "", logprobs, finish_reason: finish }], ...extra(index) };
  /** whether the runs' results went into the metrics */
  let observed = false;
  // a chat stream's first chunks give each choice its role: sent with the first event, so that a
  // request refused while it waits for room has sent nothing (and is answered with its own status)
  let opened = job.kind !== "chat";
  const open = async (): Promise<boolean> => {
    if (opened) return true;
    opened = true;
    for (let index = 0; index < total; index++) {
      if (!(await sse.send({ ...head, choices: [{ index, delta: { role: "assistant", content: "" }, logprobs: null, finish_reason: null }], ...extra(index) }))) return false;
    }
    return true;
  };
  try {
    let ended = 0;
    // each choice's text sent so far, and its logprobs: sent with the text they are part of
    const shown = new Array<number>(total).fill(0);
    const logprobs = job.logprobs === undefined ? undefined : Array.from({ length: total }, (_, i) => ctx.texts.choice(job.prompts[Math.floor(i / job.n)]!, job.options.preservedTokens));
    // with tools or reasoning, each choice's text goes through a parser that streams reasoning, content and calls apart
    const syntax = job.reply;
    const parsers = syntax ? Array.from({ length: total }, () => new ReplyStream(syntax)) : undefined;
    // with echo, each choice's first chunk is its prompt's text (and the prompt's logprobs), sent at the choice's first event
    const echoSent = new Array<boolean>(total).fill(false);
    // the logprobs of a parsed choice's tokens, not yet sent: they go with its next delta (the
    // parser holds text back, so a token's delta may come later than the token), else with its finish
    const unsent = Array.from({ length: total }, (): ChatLogprobEntry[] => []);
    const takeUnsent = (index: number) => {
      if (!logprobs || unsent[index]!.length === 0) return null;
      const content = unsent[index]!;
      unsent[index] = [];
      return { content, refusal: null };
    };
    const sendDeltas = async (index: number, deltas: readonly ReplyDelta[]): Promise<boolean> => {
      for (const d of deltas) {
        const delta = "call" in d ? { tool_calls: [d.call] } : d;
        if (!(await sse.send({ ...head, choices: [{ index, delta, logprobs: takeUnsent(index), finish_reason: null }], ...extra(index) }))) return false;
      }
      return true;
    };
    for await (const { run, event } of merged(runs)) {
      if (sse.gone) break;
      // (a run cancelled before it began opens nothing: its answer is the cancellation's error)
      if (event.finishReason !== "abort" && !(await open())) break;
      const index = run * job.n + event.choice;
      const echoed = job.echo?.[run];
      if (echoed !== undefined && !job.native && !echoSent[index] && event.finishReason !== "abort") {
        echoSent[index] = true;
        const lp = job.logprobs === undefined ? null : ctx.texts.promptLogprobs(job.prompts[run]!, (await runs[run]!.promptLogprobs()) ?? []);
        if (!(await sse.send(chunk(index, echoed, null, lp)))) break;
      }
      if (event.step) {
        const { token, text, logprob, endToken } = event.step;
        if (token !== undefined && made[index]!++ === 0) firstAt[index] = performance.now();
        const choice = logprobs?.[index];
        const pushed = logprob ? choice?.push(logprob) : undefined;
        // a step without a token releases the text held back until the end
        if (token === undefined) choice?.end();
        shown[index]! += text.length;
        if (job.native) {
          // (n_probs: each token's event carries its own entry, as llama-server's partial results do;
          // the end-of-generation token has an event of its own, with the text held back till then)
          const listed = pushed ?? (endToken?.logprob && choice ? { lp: endToken.logprob, text: "", offset: shown[index]! } : undefined);
          const probs = listed ? { completion_probabilities: [nativeProbability(ctx.texts.chatEntry(listed), listed.lp, job.postSampling)] } : {};
          const id = token ?? endToken?.token;
          const predicted = made[index]! + (token === undefined && id !== undefined ? 1 : 0);
          if ((text !== "" || id !== undefined) && !(await sse.send({ ...nativePartial(text, id, index, predicted, job.prompts[run]!.length, runs[run]!.slot(event.choice)), ...timingsSoFar(index, predicted), ...probs }))) break;
          continue;
        }
        const placed = choice?.take(shown[index]!) ?? [];
        if (parsers) {
          unsent[index]!.push(...placed.map((p) => ctx.texts.chatEntry(p)));
          if (!(await sendDeltas(index, parsers[index]!.push(text)))) break;
          continue;
        }
        // a text completion lists the token that ended it after its own (as the answer unstreamed)
        const end = choice && job.kind === "text" ? endToken?.logprob : undefined;
        if (text === "" && placed.length === 0 && !end) continue;
        let lp = !choice ? null : job.kind === "chat" ? { content: placed.map((p) => ctx.texts.chatEntry(p)), refusal: null } : ctx.texts.completionLogprobs(placed, echoed?.length);
        if (end && lp && "tokens" in lp) lp = joinLogprobs(lp, ctx.texts.endLogprobs(end, (echoed?.length ?? 0) + shown[index]!));
        if (!(await sse.send(chunk(index, text, null, lp)))) break;
        continue;
      }
      if (event.finishReason === "abort") {
        const cancelled = cancellation(signal);
        if (cancelled) throw cancelled;
        break;
      }
      const last = ++ended === total;
      // (llama-server's summaries: each choice's once all have ended, the results known; no [DONE])
      if (job.native) {
        if (last) {
          observed = true;
          const all = await results(ctx, runs);
          for (const [i, r] of all.entries()) for (const [j, c] of (r.choices ?? [r]).entries()) {
            const reply = nativeFinal(job, r, c, i * job.n + j, ctx.model.tokenizer, runs[i]!.slot(j));
            await sse.send(job.responseFields ? pickResponseFields(job.responseFields, reply) : reply);
          }
        }
        continue;
      }
      const parser = parsers?.[index];
      if (parser && !(await sendDeltas(index, parser.end(event.finishReason === "length")))) break;
      const finish = chunk(index, undefined, finishReasonOf(event.finishReason, parser?.calls), parser ? takeUnsent(index) : null);
      if (last) {
        const all = await results(ctx, runs);
        observed = true;
        await sse.send({ ...finish, timings: timingsOf(all[0]!) });
        if (job.includeUsage) await sse.send({ ...head, choices: [], usage: usageOf(all) });
        await sse.send("[DONE]");
      } else {
        await sse.send(finish);
      }
    }
    // a run cancelled while it still waited for room ends without an event: the stream says why
    // it stopped instead of ending empty, with neither [DONE] nor an error
    const cancelled = cancellation(signal);
    if (cancelled && ended < total && !sse.gone) throw cancelled;
  } catch (e) {
    const err = failure(job, e, ctx.settings);
    // nothing sent yet: the failure is the answer, with its status and headers (a shutdown's 503 and Retry-After)
    if (!sse.begun) {
      sse.release();
      throw err;
    }
    // the status line is sent: the failure goes in the stream, in OpenAI's error shape
    ctx.failed(res, err);
    await sse.send(err.body);
  } finally {
    sse.end();
    // a stream cut short (its client left, or the server cancelled it) is observed as a
    // non-streamed request is: its runs' results once they end, the tokens made so far with them
    if (!observed) void results(ctx, runs).catch(() => {});
  }
}
