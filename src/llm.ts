import { chatFormatterFor, checkChatArguments, type ChatTemplateChoice, mapContentText, withSystem, type ChatFormatter, type ChatMessageInput, type ChatTemplateSource } from "./chat/index.js";
import { autoContextSize, availableMemoryBytes, bytesWithPool, checkMemoryPlan, DEFAULT_MAX_SEQUENCES, Engine, exclusive, kvPoolBytes, memoryMarginBytes, planDraft, planFits, planMemory, speculativeExtraBlocks, type Admission, type LoadedMemory, type Decoding, type EngineRequest, type PlanRequest, type RequestEvent, type RequestOutcome } from "./engine/index.js";
import type { GGUFMetadata } from "./formats/index.js";
import { cpuCount } from "./platform/host.js";
import {
  cancelOnEarlyExit, checkGenerateOptions, computeTimings, constraintOf, lineLimitsOf, samplingOptionsOf, usesStrategy, validateChoices, validateTokenBans, warmUpForward, type Choice, type GenerateOptions, type GenerationResult, type GenerationStep, type PromptLogprobs, type Timings,
} from "./generation/index.js";
import { DEFAULT_BLOCK_SIZE, KVBlockPool, KVCache, kvBytesPerToken } from "./cache/index.js";
import type { Backend } from "./kernels/backend.js";
import { createBackend, whileBackendStarts, type BackendName, type KVCacheType, type KVCacheTypes } from "./kernels/index.js";
import { checkCacheTypes, checkMatmulTypes, decoderShape, openModel, type LanguageModel, type LoadQuantization, type ModelInfo, type OpenedModel } from "./models/index.js";
import { resolveModelReference } from "./hub/resolve.js";
import { RANDOM_SEED, randomSeed } from "./sampling/index.js";
import { draftVocabularyMismatch, normalizePrompt, openTokenizer, type Tokenizer } from "./tokenizer/index.js";
import { checkFlags, checkOptionKeys, DisposedError, formatBytes, onAbort, OptionError, shownValue } from "./units/index.js";

/** the tokens a request generates at most where neither it nor the model's generation defaults say (a browser page's checks read it too) */
export const DEFAULT_MAX_TOKENS = 256;

/** a streamed step; with n > 1 it names the choice it belongs to */
export type ChoiceStep = GenerationStep & { choice?: number };

type Prompt = string | readonly number[];

/** A generation queued on the engine (Model.submit). */
export interface GenerationRun {
  /** every choice's steps as they happen, interleaved, and each choice's end */
  events(): AsyncGenerator<RequestEvent, void>;
  /** the steps in stream()'s order: choice 0's, then choice 1's, ... */
  steps(): AsyncGenerator<ChoiceStep, void>;
  /** the result once the request has ended (rejects if the engine failed it) */
  result(): Promise<GenerationResult>;
  /** with the promptLogprobs option: the prompt's logprobs once it is computed, before the first step (undefined without the option) */
  promptLogprobs(): Promise<PromptLogprobs | undefined>;
  /** whether it still waits for room in the engine (nothing of it computed yet): a server shutting down refuses such a run at once instead of starting it */
  queued(): boolean;
  /**
   * the request's timings while it runs (llama-server's timings_per_token), from the engine's own
   * times: `completionTokens` made so far, the first of them at `firstTokenAt` (performance.now(); 0: none yet)
   */
  timingsSoFar(completionTokens: number, firstTokenAt: number): Timings;
  /** the engine slot (0..maxSequences-1) choice `choice` runs in, or ran in last (llama-server's id_slot); undefined before it runs */
  slot(choice: number): number | undefined;
}

export interface LoadModelOptions {
  /** compute backend: "wasm" (SIMD + worker threads, the default when available), "reference" (plain TypeScript) or "webgpu" (a GPU through WebGPU: Dawn from the optional `webgpu` package in Node) */
  backend?: BackendName;
  /** worker threads for the wasm backend (default: available cores) */
  threads?: number;
  /**
   * tokens the KV cache holds (default: the trained context length, at most 4096); "auto": the
   * largest context whose KV cache fits in the free memory beside the weights (at most the
   * trained context) and, on webgpu, whose layer's K or V array fits in one of the adapter's
   * storage bindings (a larger context is refused at load, proposing one that fits)
   */
  contextSize?: number | "auto";
  /**
   * quantize F32/F16/BF16 weight matrices to this format while loading (no full-precision copy is
   * kept): q8_0, q6_k, q5_k, q4_k, q3_k, q2_k, q5_1, q5_0, q4_1, q4_0, iq4_nl, iq4_xs, or tsllm's
   * in-memory nf4 (QLoRA NormalFloat-4, like load_in_4bit) and int8 (per-row absmax, like load_in_8bit)
   */
  quantize?: LoadQuantization;
  /**
   * how the KV cache stores keys (llama.cpp's --cache-type-k): "f32" (default), "f16", "q8_0"
   * (3.8x smaller), "q4_0" (7.1x); as llama.cpp stores and reads such a cache (q8_0 and q4_0
   * need head dims that are multiples of 32; see flashAttention for the order).
   */
  cacheTypeK?: KVCacheType;
  /** how the KV cache stores values (llama.cpp's --cache-type-v): as cacheTypeK */
  cacheTypeV?: KVCacheType;
  /**
   * llama.cpp's flash_attn (-fa): true attends in its flash-attention order (an f32 side cast to
   * f16), false in its matrix-product order (its -fa off and node-llama-cpp's default; not for a
   * q8_0 / q4_0 side). Unset: flash attention for a q8_0 / q4_0 side, else the matrix-product order
   */
  flashAttention?: boolean;
  /**
   * the free memory the load plan is checked against, in bytes (default: the environment
   * variable TSLLM_AVAILABLE_MEMORY, else the host's free memory). For tests and experiments:
   * before reading any weight, loadModel refuses a model whose weights + KV cache + scratch do
   * not fit, in one line that proposes a quantization or context size that does.
   */
  availableMemory?: number;
  /**
   * bytes the automatic sizes leave free: contextSize "auto" (down to 4096 tokens, or the trained
   * context) and the default KV pool (down to one context) are sized to the free memory less this,
   * as llama.cpp's --fit keeps its --fit-target free (default: the environment variable
   * TSLLM_MEMORY_MARGIN, else 1 GiB, llama.cpp's default). Explicit sizes are checked against
   * all of the free memory
   */
  memoryMargin?: number;
  /**
   * bytes of KV cache shared by all running generations (a speculative request's draft-model cache counts too, unless its pool is planned: Engine.planDraftCache), allocated once at the first one
   * (default: room for maxSequences full contexts, at most 1/8 of RAM and 2 GiB, at least one context)
   */
  kvCacheBytes?: number;
  /** generations decoded together at most; more wait their turn (default 16; n choices count n) */
  maxSequences?: number;
  /** tokens one engine step computes at most, decodes plus prompt chunks (default 64; a prompt chunk may exceed it by two, never leaving one token alone) */
  maxBatchTokens?: number;
  /**
   * cache generated tokens' K/V as prefixes too (default true: a chat's next turn reuses the
   * previous reply's rows, as llama.cpp's server does; they were computed one token at a time, so
   * that turn's logits may differ in the last bits from the same prompt computed afresh). false:
   * every answer bit-identical to the request run alone, each reply recomputed in the next turn
   */
  cacheReplies?: boolean;
  /** how requests get KV room: "preempt" (default) or "reserve" (EngineOptions.admission) */
  admission?: Admission;
  /** the prompt share that picks an idle slot by its last tokens, llama-server's --slot-prompt-similarity (default 0.1; EngineOptions.slotPromptSimilarity) */
  slotPromptSimilarity?: number;
  /** where load-time warnings go, one line each (default: process.emitWarning) */
  onWarning?: (message: string) => void;
  /**
   * run a throwaway two-token prompt and one decode step before returning, as llama.cpp's
   * warm-up run does (default true; false is llama.cpp's --no-warmup): the first request then
   * finds every kernel compiled and the lazily built tables made, which took ~50 ms of a
   * 135M model's first prompt
   */
  warmup?: boolean;
}

/** every LoadModelOptions key (a record of them, so that a new option fails the type check until it is listed) */
const LOAD_OPTION_NAMES: readonly string[] = Object.keys({
  backend: true, threads: true, contextSize: true, quantize: true, cacheTypeK: true, cacheTypeV: true, flashAttention: true,
  availableMemory: true, memoryMargin: true, kvCacheBytes: true, maxSequences: true, maxBatchTokens: true, cacheReplies: true, admission: true, slotPromptSimilarity: true, onWarning: true, warmup: true,
} satisfies Record<keyof LoadModelOptions, true>);

export interface ChatOptions extends GenerateOptions {
  /** system prompt, placed first (replacing a system message already there) */
  system?: string;
  /** template source to use instead of the model's own chat template (with `where`, what its errors name) */
  chatTemplate?: string | ChatTemplateSource;
  /** which of the model's own chat templates to use ("default", "tool_use", "rag"...: a GGUF's tokenizer.chat_template.<name>, a folder's named ones), as transformers' apply_chat_template takes a name */
  chatTemplateName?: string;
  /** let special-token text inside messages become special tokens (by default message content is plain text) */
  parseSpecialInContent?: boolean;
}

/**
 * A loaded model: tokenizer, weights and the engine that runs its generations. Concurrent
 * calls are batched automatically: each becomes a request of the engine, which decodes every
 * running request in one forward pass per step over one shared, prefix-cached KV pool.
 */
export class Model {
  private isDisposed = false;
  /** draftMismatch per draft model a request named (null: none), so that a 256k vocabulary is compared once, not per request */
  private readonly draftChecks = new WeakMap<Model, string | null>();

  constructor(
    readonly path: string,
    readonly info: ModelInfo,
    readonly tokenizer: Tokenizer,
    readonly metadata: GGUFMetadata,
    readonly backend: Backend,
    /** the raw forward pass for advanced use (logit inspection, parity tests); it refuses to start while an engine pass is paused mid-way */
    readonly languageModel: LanguageModel,
    readonly engine: Engine,
    readonly loadMs: number,
    /** sampling defaults the model ships (generation_config.json); the caller's options win */
    readonly generationDefaults: GenerateOptions = {},
    /** the weights and scratch its load planned (beside its KV pool; 0 where the planner knows no shape): see memory */
    private readonly residentBytes = 0,
    /** the format its weight matrices were quantized to while loading (LoadModelOptions.quantize), none: as the file stores them */
    readonly loadQuantization?: LoadQuantization,
  ) {}

  /** positions one sequence may hold (prompt + completion) */
  get contextSize(): number {
    return this.engine.contextSize;
  }

  /** the KV pool's budget and the bytes it holds now (Engine.kvMemory): what a draft model loaded beside this one leaves it */
  get kvMemory(): { readonly budgetBytes: number; readonly storedBytes: number } {
    return this.engine.kvMemory;
  }

  /** the memory this model holds or may still take (memoryBeside: what a model loaded beside it is left) */
  get memory(): LoadedMemory {
    return { residentBytes: this.residentBytes, ...this.engine.kvMemory };
  }

  /**
   * Why `draft` cannot draft for this model, or undefined: its vocabulary's size, or a token that
   * means something else to it (draftVocabularyMismatch: its ids go to this model as they are).
   * Worded "its ..., `modelName`'s ...", for the caller to prefix with the draft's name.
   */
  draftMismatch(draft: Model, modelName = `the model ${this.path}`): string | undefined {
    if (draft.info.vocabSize !== this.info.vocabSize) return `its vocabulary has ${draft.info.vocabSize} tokens, ${modelName}'s ${this.info.vocabSize}`;
    return draftVocabularyMismatch(this.tokenizer, draft.tokenizer, modelName);
  }

  /** refuses a draftModel whose tokens are not this model's (once per draft model) */
  private checkDraft(draft: Model): void {
    let mismatch = this.draftChecks.get(draft);
    if (mismatch === undefined) {
      mismatch = this.draftMismatch(draft) ?? null;
      this.draftChecks.set(draft, mismatch);
    }
    if (mismatch !== null) throw new OptionError(`draftModel ${draft.path}: ${mismatch}: a draft model must share the model's vocabulary`, "draftModel");
  }

  /** Generates a completion; the prompt gets BOS when the model's metadata says so. */
  generate(prompt: Prompt, options?: GenerateOptions): Promise<GenerationResult>;
  /** A batch: the prompts run together (one forward pass per step for all of them); each result equals generating it alone. */
  generate(prompts: readonly Prompt[], options?: GenerateOptions): Promise<GenerationResult[]>;
  async generate(prompt: Prompt | readonly Prompt[], options: GenerateOptions = {}): Promise<GenerationResult | GenerationResult[]> {
    if (Array.isArray(prompt) && (prompt.length === 0 || prompt.some((p) => typeof p !== "number"))) {
      return this.generateBatch(prompt as readonly Prompt[], options);
    }
    return drain(this.stream(prompt as Prompt, options));
  }

  private async generateBatch(prompts: readonly Prompt[], given: GenerateOptions): Promise<GenerationResult[]> {
    if (prompts.length === 0) throw new OptionError("generate: the batch of prompts is empty", "prompt");
    checkGenerateOptions(given);
    // the model's generation defaults, as one prompt's generate (stream) applies them
    const options = withDefaults(this.generationDefaults, given);
    for (const key of ["numBeams", "draftModel", "promptLookup"] as const) {
      if (options[key] !== undefined && options[key] !== false) throw new OptionError(`generate: ${key} is not available for a batch of prompts`, key);
    }
    if (options.n !== undefined && options.n !== 1) throw new OptionError("generate: n > 1 is not available for a batch of prompts", "n");
    // every prompt is validated and queued before any runs, so a bad one fails the batch with nothing computed
    const controller = new AbortController();
    const unlink = link(options.signal, controller);
    try {
      const runs = prompts.map((p) => this.submit(p, { ...options, signal: controller.signal }));
      return await Promise.all(runs.map((r) => r.result()));
    } catch (e) {
      controller.abort();
      throw e;
    } finally {
      unlink();
    }
  }

  /**
   * Streams `{ token, text }` steps (with `n` > 1: choice 0's, then choice 1's, ..., each with
   * `choice`); the iterator's return value is the full result. The generation is queued by this
   * call, so a refused option or prompt, or a disposed model, throws here (nothing queued), not at
   * the first next(); leaving the stream (return(), break), even before its first step, cancels it.
   */
  stream(prompt: Prompt, options: GenerateOptions = {}): AsyncGenerator<ChoiceStep, GenerationResult> {
    checkGenerateOptions(options);
    const merged = withDefaults(this.generationDefaults, options);
    const controller = new AbortController();
    const unlink = link(merged.signal, controller);
    const cancel = () => {
      unlink();
      controller.abort();
    };
    let run: GenerationRun;
    try {
      run = this.submit(prompt, { ...merged, signal: controller.signal });
    } catch (e) {
      unlink();
      throw e;
    }
    // a stream never read to its end lets go of the caller's signal once its request ends
    void run.result().then(unlink, unlink);
    const steps = async function* (): AsyncGenerator<ChoiceStep, GenerationResult> {
      try {
        yield* run.steps();
        return await run.result();
      } finally {
        cancel();
      }
    };
    return cancelOnEarlyExit(steps(), cancel);
  }

  /**
   * Queues one generation on the engine and returns at once (validation errors throw here,
   * nothing queued). For servers and other callers that interleave many: `events` yields every
   * choice's steps as they happen, each choice's end as an event of its own; `steps` yields them
   * in stream()'s order (choice 0's, then choice 1's, ...); read one of the two. Abort with
   * `options.signal`, or leave the events or steps early (break): either ends it, finish reason
   * "abort". The model's generation defaults are not applied here.
   */
  submit(prompt: Prompt, options: GenerateOptions = {}): GenerationRun {
    this.assertUsable();
    checkGenerateOptions(options);
    if (options.draftModel instanceof Model && options.draftModel.disposed) throw new DisposedError(`draftModel: the draft model ${options.draftModel.path} has been disposed`);
    if (options.draftModel instanceof Model) this.checkDraft(options.draftModel);
    const t0 = performance.now();
    const n = validateChoices(options);
    if (usesStrategy(options) && options.logprobs !== undefined) throw new OptionError("logprobs are not available with beam search or speculative decoding", "logprobs");
    validateTokenBans(options, options.numBeams !== undefined ? "beam" : usesStrategy(options) ? "speculative" : "sample");
    const promptTokens = this.encode(prompt, options);
    const sampling = samplingOptionsOf(options);
    const constraint = constraintOf(options);
    const lineLimits = lineLimitsOf(options);
    const request = this.engine.submit({
      // -1 asks for a random seed, as llama.cpp's LLAMA_DEFAULT_SEED does
      promptTokens, decoding: decodingOf(options, n), sampling: { ...sampling, seed: sampling.seed === undefined || sampling.seed === RANDOM_SEED ? randomSeed() : sampling.seed }, maxTokens: options.maxTokens ?? DEFAULT_MAX_TOKENS,
      stop: options.stop === undefined ? [] : typeof options.stop === "string" ? [options.stop] : [...options.stop],
      stopTokens: options.stopTokens ?? [], ignoreEos: options.ignoreEos ?? false, topLogprobs: options.logprobs, signal: options.signal,
      ...(options.logprobsAfterSampling ? { logprobsAfterSampling: true } : {}),
      ...(options.promptLogprobs !== undefined ? { promptLogprobs: options.promptLogprobs } : {}),
      ...(constraint ? { constraint } : {}),
      ...(options.preservedTokens?.length ? { preservedTokens: options.preservedTokens } : {}),
      ...(lineLimits ? { lineLimits } : {}),
      ...(options.slot !== undefined ? { slot: options.slot } : {}),
    });
    return {
      events: () => cancelledIfLeft(request, request[Symbol.asyncIterator]()),
      steps: () => cancelledIfLeft(request, orderedSteps(request)),
      result: async () => this.resultOf(prompt, await request.outcome, t0),
      promptLogprobs: () => request.prompt,
      queued: () => request.scheduledAt === 0 && !request.prefilled,
      timingsSoFar: (made, firstTokenAt) => {
        const now = performance.now();
        const tPrefill = request.prefilledAt || now;
        return computeTimings(this.loadMs, promptTokens.length, made, t0, tPrefill, firstTokenAt || tPrefill, now, {
          queueMs: (request.scheduledAt || now) - request.submittedAt, cachedPromptTokens: request.cachedPromptTokens,
        });
      },
      // (a choice past the request's places, beam search's returned sequences, shows its first slot)
      slot: (choice) => request.slots[choice] ?? request.slots[0],
    };
  }

  private encode(prompt: Prompt, options: GenerateOptions): number[] {
    if (typeof prompt === "string") return this.tokenizer.encode(normalizePrompt(prompt, options.normalize), { addSpecialTokens: options.addSpecialTokens ?? true });
    if (!Array.isArray(prompt)) throw new OptionError(`prompt: expected a string or an array of token ids, got ${shownValue(prompt)}`, "prompt");
    return [...prompt];
  }

  private resultOf(prompt: Prompt, o: RequestOutcome, t0: number): GenerationResult {
    const first = o.choices[0]!;
    const tokens = o.choices.reduce((sum, c) => sum + c.completionTokens.length, 0);
    const tPrefill = o.prefilledAt || o.endedAt;
    const tEnd = Math.max(...o.choices.map((c) => c.endedAt));
    const timings = computeTimings(this.loadMs, o.promptTokens.length, tokens, t0, tPrefill, first.firstTokenAt || tPrefill, tEnd, {
      queueMs: o.scheduledAt - o.submittedAt, cachedPromptTokens: o.cachedPromptTokens,
    });
    const choiceOf = (c: (typeof o.choices)[number]): Choice => ({
      completion: c.completion, completionTokens: c.completionTokens, finishReason: c.finishReason, ...(c.finishDetail ? { finishDetail: c.finishDetail } : {}),
      ...(c.logprobs ? { logprobs: c.logprobs } : {}), ...(c.endToken ? { endToken: c.endToken } : {}),
    });
    return {
      prompt: typeof prompt === "string" ? prompt : this.tokenizer.decode(o.promptTokens),
      ...choiceOf(first),
      promptTokens: o.promptTokens,
      ...(o.promptLogprobs ? { promptLogprobs: o.promptLogprobs } : {}),
      timings,
      ...(o.choices.length > 1 ? { choices: o.choices.map(choiceOf) } : {}),
      ...o.extra,
    };
  }

  /**
   * Every token's hidden state after the final norm (tokens x embeddingLength per sequence), the
   * vectors llama.cpp's embedding mode pools: each sequence runs from position 0 in a cache of
   * its own (in one block pool for the call, its blocks held only while it runs). Passes hold at most `passTokens` rows (the scratch grows with them): short sequences
   * share one, a long one runs in chunks through its cache (attention is causal, so a chunk's
   * rows are what the whole sequence's would be). Each pass is queued behind the engine's (they
   * share the activations). `signal` stops the call while it waits for a pass's turn, or between
   * passes (a pass begun is not cut), rejecting with its reason.
   */
  async hiddenStates(sequences: readonly (readonly number[])[], passTokens = 512, signal?: AbortSignal): Promise<Float32Array[]> {
    this.assertUsable();
    if (!Number.isInteger(passTokens) || passTokens < 1) throw new RangeError(`passTokens: expected a positive integer, got ${String(passTokens)}`);
    const lm = this.languageModel, d = this.info.embeddingLength, i0 = this.info;
    // one pool for the call, a sequence's blocks taken when its first rows run and given back
    // once its last have: the KV held is what a pass needs (passTokens rows, each sequence's last
    // block part-filled: twice that; the longest sequence's own on top), not every input's at once
    // (1,000 inputs made 1,000 caches), nor more than the inputs need (one short input: its block)
    const blocksOf = (tokens: readonly number[]) => Math.ceil(tokens.length / DEFAULT_BLOCK_SIZE);
    const need = sequences.reduce((sum, tokens) => sum + blocksOf(tokens), 0);
    const bound = sequences.reduce((most, tokens) => Math.max(most, blocksOf(tokens)), 0) + 2 * Math.ceil(passTokens / DEFAULT_BLOCK_SIZE);
    const pool = new KVBlockPool(i0.blockCount, i0.headCountKv, i0.headDim, Math.max(1, Math.min(need, bound)), this.backend, DEFAULT_BLOCK_SIZE, undefined, lm.kvCacheTypes);
    const caches = new Map<number, KVCache>();
    const cacheOf = (seq: number): KVCache => {
      let c = caches.get(seq);
      if (!c) caches.set(seq, (c = new KVCache(i0.blockCount, i0.headCountKv, i0.headDim, Math.max(1, sequences[seq]!.length), pool)));
      return c;
    };
    const out = sequences.map((tokens) => new Float32Array(tokens.length * d));
    const done = sequences.map(() => 0);
    for (let i = 0; i < sequences.length;) {
      // this pass: what is left of sequence i, then the next sequences' starts, up to passTokens rows
      const parts: { seq: number; tokens: readonly number[] }[] = [];
      let rows = 0;
      for (let j = i; j < sequences.length && rows < passTokens; j++) {
        const take = Math.min(passTokens - rows, sequences[j]!.length - done[j]!);
        if (take > 0) parts.push({ seq: j, tokens: sequences[j]!.slice(done[j]!, done[j]! + take) });
        rows += take;
      }
      const hidden = await exclusive(lm, () => lm.hiddenStatesAsync(parts.map((p) => ({ tokens: p.tokens, cache: cacheOf(p.seq) }))), signal);
      parts.forEach((p, k) => {
        out[p.seq]!.set(hidden[k]!, done[p.seq]! * d);
        done[p.seq]! += p.tokens.length;
        if (done[p.seq] === sequences[p.seq]!.length) {
          caches.get(p.seq)?.free();
          caches.delete(p.seq);
        }
      });
      while (i < sequences.length && done[i] === sequences[i]!.length) i++;
    }
    return out;
  }

  /** The model's chat template bound to its tokenizer (parsed once); throws when the model has none. */
  chatFormatter(chatTemplate?: string | ChatTemplateSource, choice?: ChatTemplateChoice): ChatFormatter {
    const override = typeof chatTemplate === "string" ? { source: chatTemplate, where: "the chatTemplate option" } : chatTemplate;
    return chatFormatterFor(this.tokenizer, override, choice);
  }

  /** Renders the conversation with the chat template and generates the assistant's reply. */
  async chat(messages: readonly ChatMessageInput[], options: ChatOptions = {}): Promise<GenerationResult> {
    return drain(this.streamChat(messages, options));
  }

  /** Streams the assistant's reply to the conversation; stops at the template's end-of-turn token. */
  streamChat(messages: readonly ChatMessageInput[], options: ChatOptions = {}): AsyncGenerator<ChoiceStep, GenerationResult> {
    // a disposed model says so, not that its chat template is missing or bad
    this.assertUsable();
    checkChatArguments(messages, options);
    const { system, chatTemplate, chatTemplateName, parseSpecialInContent, ...rest } = options;
    const formatter = this.chatFormatter(chatTemplate, { name: chatTemplateName });
    const conversation = withSystem(messages, system).map((m) => ({ ...m, content: mapContentText(m.content, (t) => normalizePrompt(t, rest.normalize)) }));
    return this.stream(formatter.encode(conversation, undefined, { parseSpecialInContent }), { ...rest, stopTokens: [...formatter.endOfTurnIds, ...(rest.stopTokens ?? [])] });
  }

  /** Stops the workers and frees the weights; requests still running fail; the model cannot be used afterwards. */
  dispose(): void {
    if (this.isDisposed) return;
    this.isDisposed = true;
    this.engine.close();
    this.backend.dispose();
  }

  /** whether dispose() has been called: the model cannot be used any more */
  get disposed(): boolean {
    return this.isDisposed;
  }

  /** `using model = await loadModel(...)` (or `await using`) disposes it when the block ends */
  [Symbol.dispose](): void {
    this.dispose();
  }

  private assertUsable(): void {
    if (this.isDisposed) throw new DisposedError(`model ${this.path} has been disposed`);
  }
}

/** a request's steps, choice 0's as they happen and each later choice's once the ones before it have ended */
async function* orderedSteps(request: EngineRequest): AsyncGenerator<ChoiceStep, void> {
  const d = request.params.decoding;
  const n = d.kind === "sample" ? d.n : 1;
  const held: ChoiceStep[][] = Array.from({ length: n }, () => []);
  const ended = new Array<boolean>(n).fill(false);
  let current = 0;
  for await (const e of request) {
    if (e.step && n === 1) yield e.step;
    else if (e.step) held[e.choice]!.push({ ...e.step, choice: e.choice });
    else ended[e.choice] = true;
    while (current < n) {
      yield* held[current]!;
      held[current] = [];
      if (!ended[current]) break;
      current++;
    }
  }
}

/**
 * `it` (a request's events or steps), whose leaving before the request's end (break, return(),
 * even before the first step) cancels the request, as leaving stream() does: a reader gone would
 * otherwise hold it past the backlog limit for good, its slot and KV blocks with it, its result()
 * never settling and the engine's loop polling for that reader, so the process never exited.
 */
function cancelledIfLeft<T>(request: EngineRequest, it: AsyncGenerator<T, void>): AsyncGenerator<T, void> {
  // (return() and throw() are how a reader leaves, started or not; a reader that reads to the end leaves an ended request)
  return cancelOnEarlyExit(it, () => request.cancel());
}

/** how the options ask for tokens to be chosen */
function decodingOf(o: GenerateOptions, n: number): Decoding {
  if (o.numBeams !== undefined) {
    return { kind: "beam", numBeams: o.numBeams, lengthPenalty: o.lengthPenalty, earlyStopping: o.earlyStopping, numReturnSequences: o.numReturnSequences, noRepeatNgramSize: o.noRepeatNgramSize };
  }
  if (o.draftModel !== undefined || o.promptLookup) {
    return { kind: "speculative", draft: o.draftModel?.languageModel, draftTokens: o.draftTokens, promptLookup: typeof o.promptLookup === "number" ? o.promptLookup : undefined };
  }
  const { noRepeatNgramSize, minNewTokens, suppressTokens, beginSuppressTokens, badWordsIds, sequenceBias, forcedBosTokenId, forcedEosTokenId, exponentialDecayLengthPenalty } = o;
  const bans = { noRepeatNgramSize, minNewTokens, suppressTokens, beginSuppressTokens, badWordsIds, sequenceBias, exponentialDecayLengthPenalty };
  // (an option left out, 0 or empty bans nothing; a forced token id 0 is a token)
  const forced = { ...(forcedBosTokenId === undefined ? {} : { forcedBosTokenId }), ...(forcedEosTokenId === undefined ? {} : { forcedEosTokenId }) };
  return { kind: "sample", n, ...Object.fromEntries(Object.entries(bans).filter(([, v]) => v !== undefined && v !== 0 && !(Array.isArray(v) && v.length === 0))), ...forced };
}

/** aborts `controller` when `signal` does; returns the unlinking (one listener on a signal however many calls share it: onAbort) */
function link(signal: AbortSignal | undefined, controller: AbortController): () => void {
  if (!signal) return () => undefined;
  if (signal.aborted) controller.abort();
  return onAbort(signal, () => controller.abort());
}

async function drain<T>(it: AsyncGenerator<unknown, T>): Promise<T> {
  for (;;) {
    const r = await it.next();
    if (r.done) return r.value;
  }
}

/** `options` over `defaults`, where an option explicitly set to undefined does not erase a default */
function withDefaults(defaults: GenerateOptions, options: GenerateOptions): GenerateOptions {
  const merged: Record<string, unknown> = { ...defaults };
  for (const [k, v] of Object.entries(options)) if (v !== undefined) merged[k] = v;
  return merged as GenerateOptions;
}

/** the KV cache size loadModel uses when none is given: the trained context, at most 4096 tokens */
export function defaultContextSize(trainedContextLength: number): number {
  return Math.min(trainedContextLength, 4096);
}

/**
 * Loads a model — a .gguf file, a Hugging Face folder (config.json + safetensors + tokenizer
 * files) or a Hub reference (`org/name`, `org/name@rev`, `org/name:Q4_K_M`) — with its
 * tokenizer, reading the weights straight into the backend's memory.
 */
export async function loadModel(ref: string, options: LoadModelOptions = {}): Promise<Model> {
  // load() checks options: one given as null (or no object) from JavaScript gets its OptionError there
  return load(ref, options, typeof options === "object" && options !== null ? options.maxSequences : undefined);
}

/**
 * loadModel for a caller that runs one request of `width` sequences (the CLI's generate with
 * --n or --num-beams): the engine is made that wide where the default is not, without the
 * warning about maxSequences full contexts, which is about concurrent requests (serve's
 * --parallel): n choices or beams of one request share its prompt's rows.
 */
export async function loadModelForOneRequest(ref: string, options: LoadModelOptions, width: number, draft?: DraftBeside): Promise<Model> {
  return load(ref, width > DEFAULT_MAX_SEQUENCES ? { ...options, maxSequences: Math.max(width, options.maxSequences ?? 0) } : options, options.maxSequences, { width, draft });
}

/**
 * The one request a load is made for (loadModelForOneRequest): its sequences, and the draft model
 * (a file or Hub reference) a speculative request drafts with, whose KV cache lives in a pool of
 * its own beside the model's, of its planned size (planDraft, Engine.planDraftCache)
 */
interface OneRequest {
  readonly width: number;
  readonly draft?: DraftBeside;
}

/** a draft model to be loaded beside the model (loadDraftBeside), with its load options (its quantization) and the tokens it proposes a round (its cache holds them past the context) */
export interface DraftBeside {
  readonly ref: string;
  readonly options: LoadModelOptions;
  readonly draftTokens: number;
}

/**
 * loadModel, with the concurrent requests asked for (checked against the KV pool) apart from the
 * engine's width, and the sequences of the one request it is loaded for (`width`: the default
 * pool holds that many contexts where the free memory does, past the margin: kvPoolBytes)
 */
async function load(ref: string, options: LoadModelOptions, parallelRequests: number | undefined, oneRequest: OneRequest = { width: 1 }): Promise<Model> {
  const t0 = performance.now();
  checkLoadOptions(options);
  const resolved = await resolveModelReference(ref);
  const warn = options.onWarning ?? ((message: string) => process.emitWarning(message));
  // the backend starts first, booting on the other cores while this thread parses the model
  // (~80 ms off a SmolLM-sized load here); a model's error is still the one reported
  const [{ opened, planned: hostPlan, request }, backend] = await whileBackendStarts(createBackend(options.backend, { threads: options.threads, onWarning: warn }), () => {
    const opened = openModel(resolved);
    const headDim = decoderShape(opened.metadata)?.headDim;
    if (headDim !== undefined) checkCacheTypes(kvCacheTypesOf(options), headDim);
    // (the draft's header read once, for both plans)
    const request = contextsOf(oneRequest);
    return { opened, planned: planContextSize(opened, options, undefined, request, warn), request };
  });
  const { path, tokenizer, metadata } = opened;
  try {
    // a matrix type the backend cannot multiply is refused now, before its weights are read
    checkMatmulTypes(path, opened.tensors, options.quantize, backend);
    // the plan again where the backend caps one buffer (a GPU adapter's largest storage binding,
    // known once the backend has started): a layer's K or V array past it is refused here, with a
    // context that fits (contextSize "auto" picks one), not at the first request
    const planned = backend.maxBufferBytes === undefined ? hostPlan : planContextSize(opened, options, { bytes: backend.maxBufferBytes, backend: backend.name }, request, warn);
    const model = opened.build(backend, { quantize: options.quantize, kvCacheTypes: kvCacheTypesOf(options) });
    checkVocabulary(path, tokenizer.vocabSize, model.info.vocabSize, warn);
    const contextSize = planned.contextSize ?? (options.contextSize === "auto" ? undefined : options.contextSize) ?? defaultContextSize(model.info.contextLength);
    if (!Number.isInteger(contextSize) || contextSize < 1) throw new OptionError(`contextSize must be a positive integer, got ${contextSize}`, "contextSize");
    checkContextSize(path, contextSize, model.info, warn);
    const kvCacheBytes = options.kvCacheBytes ?? planned.kvCacheBytes?.(contextSize);
    const engine = new Engine(model, tokenizer, {
      contextSize, kvCacheBytes, maxSequences: options.maxSequences, maxBatchTokens: options.maxBatchTokens,
      cacheReplies: options.cacheReplies, admission: options.admission, slotPromptSimilarity: options.slotPromptSimilarity, storage: backend,
      source: path,
    });
    if (parallelRequests !== undefined && options.kvCacheBytes === undefined) checkParallelPool(path, engine.stats.kvCapacityTokens, contextSize, parallelRequests, kvBytesPerToken(model.info, model.kvCacheTypes), warn, planned.budgetFits);
    if (options.warmup !== false) await warmUpForward(model);
    const loadMs = performance.now() - t0;
    return new Model(path, model.info, tokenizer, metadata, backend, model, engine, loadMs, opened.generationDefaults, planned.residentBytes?.(contextSize, engine.kvMemory.budgetBytes) ?? 0, options.quantize);
  } catch (e) {
    backend.dispose();
    throw e;
  }
}

/**
 * Refuses, with an OptionError naming it, a load option the typed signature would: options that
 * are not an object, an unknown key, a flag that is not a boolean (`warmup: "no"` warmed up,
 * `cacheReplies: "false"` cached), an onWarning that is not a function (it would throw at the
 * first warning, mid-load) and an availableMemory that is not a number of bytes (the plan then refused every
 * model with "x B free"). The other options' values are checked where they are used.
 */
function checkLoadOptions(options: unknown): asserts options is LoadModelOptions {
  if (typeof options !== "object" || options === null || Array.isArray(options)) throw new OptionError(`loadModel: options must be an object, got ${shownValue(options)}`, "options");
  checkOptionKeys(options, LOAD_OPTION_NAMES, "loadModel");
  const o = options as Record<string, unknown>;
  checkFlags(o, ["cacheReplies", "warmup", "flashAttention"], "loadModel");
  if (o["onWarning"] !== undefined && typeof o["onWarning"] !== "function") throw new OptionError(`loadModel: onWarning: expected a function (message: string) => void, got ${shownValue(o["onWarning"])}`, "onWarning");
  const memory = o["availableMemory"];
  if (memory !== undefined && !(Number.isSafeInteger(memory) && (memory as number) >= 0)) throw new OptionError(`loadModel: availableMemory: expected a number of bytes (an integer >= 0), got ${shownValue(memory)}`, "availableMemory");
  const margin = o["memoryMargin"];
  if (margin !== undefined && !(Number.isSafeInteger(margin) && (margin as number) >= 0)) throw new OptionError(`loadModel: memoryMargin: expected a number of bytes (an integer >= 0), got ${shownValue(margin)}`, "memoryMargin");
}

/** the KV cache types the options ask for (f32 where unset) */
export function kvCacheTypesOf(options: Pick<LoadModelOptions, "cacheTypeK" | "cacheTypeV" | "flashAttention">): KVCacheTypes {
  const types = { k: options.cacheTypeK ?? "f32", v: options.cacheTypeV ?? "f32" };
  return options.flashAttention === undefined ? types : { ...types, flashAttention: options.flashAttention };
}

/** the load plan of `opened` with `options` (undefined for a model whose shape the planner does not know) */
export function loadPlanRequest(opened: Pick<OpenedModel, "tensors" | "metadata">, options: LoadModelOptions, contextSize: number): PlanRequest | undefined {
  const shape = decoderShape(opened.metadata);
  const embd = opened.tensors.get("token_embd.weight");
  if (!shape || shape.headCountKv === undefined || shape.headDim === undefined || !embd) return undefined;
  return {
    tensors: [...opened.tensors.values()], contextSize, quantize: options.quantize, kvCacheTypes: kvCacheTypesOf(options), kvCacheBytes: options.kvCacheBytes, maxSequences: options.maxSequences, maxBatchTokens: options.maxBatchTokens,
    wasm: options.backend === undefined || options.backend === "wasm",
    // the backend's own default; a bad value is its refusal to make (createBackend), not the plan's
    threads: Number.isInteger(options.threads) && options.threads! >= 1 ? options.threads : cpuCount(),
    shape: { ...shape, headCountKv: shape.headCountKv, headDim: shape.headDim, vocabSize: embd.dims[1] ?? 0 },
  };
}

/**
 * Checks that the weights (after quantization) + the KV pool at the context size + scratch fit
 * in the free memory, before anything is read; with contextSize "auto" returns the largest
 * context that fits (at most the trained one), else undefined (the given or default context).
 * With `maxBuffer` (the backend's largest buffer) one layer's K or V array of the KV pool must
 * fit in it too, and the default pool shrinks to it (at least one context).
 */
function planContextSize(opened: OpenedModel, options: LoadModelOptions, maxBuffer?: PlanRequest["maxBuffer"], request: Contexts = { contexts: 1, speculative: false }, warn?: (message: string) => void): { contextSize?: number; kvCacheBytes?: (contextSize: number) => number; budgetFits?: (contextSize: number, kvCacheBytes: number) => boolean; residentBytes?: (contextSize: number, kvCacheBytes: number) => number } {
  const c = options.contextSize;
  const auto = c === "auto";
  if (c !== undefined && c !== "auto" && (!Number.isInteger(c) || c < 1)) throw new OptionError(`contextSize must be a positive integer or "auto", got ${shownValue(c)}`, "contextSize");
  const available = options.availableMemory ?? availableMemoryBytes();
  const margin = options.memoryMargin ?? memoryMarginBytes();
  const shape = decoderShape(opened.metadata);
  const trained = shape?.contextLength ?? 4096;
  const asked = c === undefined || c === "auto" ? (auto ? trained : defaultContextSize(trained)) : c;
  const planRequest = loadPlanRequest(opened, options, asked);
  // one account with the draft model loaded beside (request.beside): its bytes come off what the pool may take
  const r = planRequest && { ...planRequest, ...(maxBuffer ? { maxBuffer } : {}), ...(request.beside ? { beside: request.beside } : {}) };
  if (!r) {
    if (auto) throw new Error(`${opened.path}: contextSize "auto" needs a decoder whose KV cache shape tsllm knows`);
    return {};
  }
  // the default KV pool shrinks to what is free less the margin (at least one context; for one
  // wide request, its width of contexts where all of the free memory holds them, with a warning)
  const pool = (contextSize: number) => {
    const at = { ...r, contextSize };
    const plan = planMemory(at);
    const bytes = kvPoolBytes(at, plan, available, margin, request.contexts, request.extraBlocks);
    if (bytes > kvPoolBytes(at, plan, available, margin)) warnMarginGivenUp(opened.path, bytes / (DEFAULT_BLOCK_SIZE * kvBytesPerToken(at.shape, at.kvCacheTypes)) * DEFAULT_BLOCK_SIZE, contextSize, request, available - bytesWithPool(at, plan, bytes), margin, warn);
    return bytes;
  };
  // whether a load with that --kv-memory would pass the plan (a warning proposes only such a budget)
  const budgetFits = (contextSize: number, kvCacheBytes: number) => planFits({ ...r, contextSize, kvCacheBytes }, available);
  // the weights and scratch (and on wasm the K/V arrays the pool outgrows) beside the pool, the model beside it not counted
  const residentBytes = (contextSize: number, kvCacheBytes: number) => {
    const at = { ...r, contextSize, beside: undefined };
    return bytesWithPool(at, planMemory(at), kvCacheBytes) - kvCacheBytes;
  };
  if (auto) {
    const maxPositions = opened.tensors.get("position_embd.weight")?.dims[1];
    const ctx = autoContextSize(r, available, Math.min(trained, maxPositions ?? trained), margin);
    if (ctx !== undefined) return { contextSize: ctx, kvCacheBytes: pool, budgetFits, residentBytes };
    const min = { ...r, contextSize: Math.min(trained, 16) };
    checkMemoryPlan(opened.path, min, planMemory(min), available);
    throw new Error(`${opened.path}: contextSize "auto": no context fits in ${available} bytes`);
  }
  checkMemoryPlan(opened.path, r, planMemory(r), available);
  return { kvCacheBytes: pool, budgetFits, residentBytes };
}

/** the contexts the default pool holds for one request (contextsOf), the blocks it adds past them, and the draft model loaded beside it */
interface Contexts {
  readonly contexts: number;
  /** blocks past the contexts (kvPoolBytes' extraBlocks): a speculative round's proposal past the context */
  readonly extraBlocks?: number;
  readonly speculative: boolean;
  readonly beside?: PlanRequest["beside"];
}

/**
 * The contexts the default pool holds for one request where all of the free memory does: its
 * width, and for a speculative request the proposal its rounds write past the context (its own
 * rows: the engine's worst case of it, speculativeExtraBlocks). A draft model's KV cache is not
 * in this pool: the engine keeps it in a pool of its own, of its planned size (planDraft,
 * Engine.planDraftCache), which this plan counts once, beside (as serve's plan counts it):
 * counted in the pool too, a draft of the model's own shape took a second context there
 */
function contextsOf({ width, draft }: OneRequest): Contexts {
  if (draft === undefined) return { contexts: width, speculative: false };
  const draftOpened = openModel(draft.ref);
  // the draft's weights, scratch and draft cache at each context the plan tries (planDraft), as loadDraftBeside plans it
  const draftAt = (contextSize: number) => loadPlanRequest(draftOpened, { ...draft.options, maxSequences: 1, kvCacheBytes: undefined }, contextSize);
  const beside = draftAt(1) && { what: `--draft-model ${draft.ref}`, smaller: "a smaller --draft-model (or --draft-quantize)", bytesAt: (contextSize: number) => planDraft(draftAt(contextSize)!, draft.draftTokens).totalBytes };
  // (the proposal's blocks depend on the draft tokens alone, not on the prompt or room)
  return { contexts: width, extraBlocks: speculativeExtraBlocks(0, 0, draft.draftTokens, DEFAULT_BLOCK_SIZE), speculative: true, ...(beside ? { beside } : {}) };
}

/** the warning of a default KV pool sized for one request's contexts into the memory margin (kvPoolBytes) */
function warnMarginGivenUp(path: string, poolTokens: number, contextSize: number, request: { contexts: number; speculative: boolean }, left: number, margin: number, warn: ((message: string) => void) | undefined): void {
  const contexts = Math.floor(poolTokens / (Math.ceil(contextSize / DEFAULT_BLOCK_SIZE) * DEFAULT_BLOCK_SIZE));
  const what = request.speculative ? "one speculative request (its context and a round's proposal past it; the draft model's KV cache has its own pool, planned beside)" : `one request of ${request.contexts} sequences (n / numBeams)`;
  warn?.(`${path}: the KV pool for ${what} holds ${poolTokens} tokens (${contexts} full context${contexts === 1 ? "" : "s"} of ${contextSize}), which leaves ${formatBytes(Math.max(0, left))} free, less than the ${formatBytes(margin)} memory margin (memoryMargin, --memory-margin): the margin is given up for the request's sequences, as llama.cpp's fit keeps a context per sequence and loads when its target cannot be met`);
}

/**
 * The tokenizer against the embedding. More tokens than rows: ids the tokenizer produces have no
 * row, refused (llama.cpp refuses any mismatch: its tensors are shaped by the token count). Fewer
 * tokens than rows is how Hugging Face checkpoints pad their embeddings (Qwen2.5: 151665 tokens,
 * 151936 rows); the engine never samples the padding rows. A tokenizer that covers less than 90%
 * of the rows is more likely the wrong one: a warning.
 */
function checkVocabulary(path: string, tokens: number, rows: number, warn: (message: string) => void): void {
  if (tokens > rows) {
    throw new Error(`${path}: the tokenizer has ${tokens} tokens but the model's embedding (token_embd) has only ${rows} rows; every token id needs a row (wrong tokenizer for this model?)`);
  }
  if (tokens < 0.9 * rows) warn(`${path}: the tokenizer has ${tokens} tokens but the model's embedding has ${rows} rows; the ${rows - tokens} ids past the tokenizer are never sampled (wrong tokenizer for this model?)`);
}

/**
 * A warning when the asked maxSequences (--parallel) full contexts do not fit in the KV pool the
 * load sized itself (no kvCacheBytes: room for maxSequences contexts, capped at 1/8 of RAM, 2 GiB,
 * what is free and the backend's largest buffer). Not an error: the pool is paged and shared, so maxSequences requests still
 * run at once while they fit and the rest wait or are preempted and recomputed, as llama-server's
 * slots share (or split) its -c cells; but the user asked for maxSequences full contexts and is
 * told at start which of them to change. An explicit kvCacheBytes is the user's own sizing, as
 * llama-server's explicit -c with -np is: no warning.
 */
function checkParallelPool(path: string, poolTokens: number, contextSize: number, maxSequences: number, bytesPerToken: number, warn: (message: string) => void, budgetFits?: (contextSize: number, kvCacheBytes: number) => boolean): void {
  const perContext = Math.ceil(contextSize / DEFAULT_BLOCK_SIZE) * DEFAULT_BLOCK_SIZE;
  const full = Math.floor(poolTokens / perContext);
  if (full >= maxSequences) return;
  const wanted = maxSequences * perContext * bytesPerToken;
  const ctx = Math.floor(poolTokens / maxSequences / DEFAULT_BLOCK_SIZE) * DEFAULT_BLOCK_SIZE;
  // the budget for all of them only where a load with it passes the plan: past the free memory it is refused
  const budget = budgetFits?.(contextSize, wanted) ? [`kvCacheBytes ${wanted} (--kv-memory; ${formatBytes(wanted)}, which fits in the free memory)`] : [];
  const tries = [...budget, ...(ctx >= DEFAULT_BLOCK_SIZE ? [`contextSize ${ctx} (--ctx-size)`] : []), `maxSequences ${full} (--parallel)`];
  warn(`${path}: the KV pool holds ${poolTokens} tokens, ${full} full context${full === 1 ? "" : "s"} of ${contextSize}, not the ${maxSequences} x ${contextSize} = ${maxSequences * contextSize} that maxSequences ${maxSequences} (--parallel) asks for (the pool is sized to the free memory less the memory margin, at most 1/8 of RAM, 2 GiB and the backend's largest buffer): past ${poolTokens} tokens in all, requests wait or are preempted and recomputed; for ${maxSequences} full contexts try ${tries.join(" or ")}`);
}

/** the context size against what the model can compute (an error) and what it was trained with (a warning) */
function checkContextSize(path: string, contextSize: number, info: ModelInfo, warn: (message: string) => void): void {
  if (!Number.isInteger(contextSize) || contextSize < 1) throw new OptionError(`contextSize must be a positive integer, got ${contextSize}`, "contextSize");
  if (info.maxPositions !== undefined && contextSize > info.maxPositions) {
    throw new OptionError(`${path}: context size ${contextSize} is more than the ${info.maxPositions} positions the model has embeddings for (position_embd); use at most ${info.maxPositions}`, "contextSize");
  }
  if (contextSize > info.contextLength) {
    warn(`${path}: context size ${contextSize} is more than the ${info.contextLength} tokens the model was trained with; text past ${info.contextLength} tokens may degrade`);
  }
}

/** Loads just the tokenizer of a model (vocab-only GGUF files work too). */
export async function loadTokenizer(ref: string): Promise<Tokenizer> {
  return openTokenizer(await resolveModelReference(ref));
}
