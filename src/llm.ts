import { chatFormatterFor, normalizePrompt, withSystem, type ChatFormatter, type ChatMessage } from "./chat/index.js";
import type { GGUFMetadata } from "./formats/gguf-reader.js";
import { generateChoices, type ChoiceStep } from "./generation/choices.js";
import type { GenerateOptions, GenerationContext, GenerationResult } from "./generation/generate.js";
import type { Backend } from "./kernels/backend.js";
import { generateBatch } from "./generation/batch.js";
import { createBackend, type BackendName } from "./kernels/index.js";
import type { LanguageModel, ModelInfo } from "./models/model.js";
import { openModel } from "./models/open.js";
import { resolveModelReference } from "./hub/resolve.js";
import { openTokenizer, type Tokenizer } from "./tokenizer/index.js";

export interface LoadModelOptions {
  /** compute backend: "wasm" (SIMD + worker threads, the default when available) or "reference" (plain TypeScript) */
  backend?: BackendName;
  /** worker threads for the wasm backend (default: available cores) */
  threads?: number;
  /** tokens the KV cache holds (default: the trained context length, at most 4096) */
  contextSize?: number;
  /** quantize F32/F16/BF16 weight matrices to this format while loading (no full-precision copy is kept) */
  quantize?: "q8_0" | "q4_0";
}

export interface ChatOptions extends GenerateOptions {
  /** system prompt, placed first (replacing a system message already there) */
  system?: string;
  /** template source to use instead of the model's own chat template */
  chatTemplate?: string;
}

/** A loaded model: tokenizer, weights, one KV cache; generate or stream text from it. */
export class Model {
  private queue: Promise<unknown> = Promise.resolve();
  private disposed = false;

  constructor(
    readonly path: string,
    readonly info: ModelInfo,
    readonly tokenizer: Tokenizer,
    readonly metadata: GGUFMetadata,
    readonly backend: Backend,
    private readonly ctx: GenerationContext,
    /** sampling defaults the model ships (generation_config.json); the caller's options win */
    readonly generationDefaults: GenerateOptions = {},
  ) {}

  get loadMs(): number {
    return this.ctx.loadMs;
  }

  get contextSize(): number {
    return this.ctx.cache.capacity;
  }

  /** the raw forward pass for advanced use (logit inspection, parity tests) */
  get languageModel(): LanguageModel {
    return this.ctx.model;
  }

  /** Generates a completion; the prompt gets BOS when the model's metadata says so. */
  generate(prompt: string | readonly number[], options?: GenerateOptions): Promise<GenerationResult>;
  /** A batch: the prompts run together (one forward pass per step for all of them); each result equals generating it alone. */
  generate(prompts: readonly (string | readonly number[])[], options?: GenerateOptions): Promise<GenerationResult[]>;
  async generate(prompt: string | readonly number[] | readonly (string | readonly number[])[], options: GenerateOptions = {}): Promise<GenerationResult | GenerationResult[]> {
    if (Array.isArray(prompt) && (prompt.length === 0 || prompt.some((p) => typeof p !== "number"))) {
      return this.generateBatch(prompt as readonly (string | readonly number[])[], options);
    }
    const it = this.stream(prompt as string | readonly number[], options);
    for (;;) {
      const r = await it.next();
      if (r.done) return r.value;
    }
  }

  private async generateBatch(prompts: readonly (string | readonly number[])[], options: GenerateOptions): Promise<GenerationResult[]> {
    this.assertUsable();
    // the batch has caches of its own but shares the model's scratch buffers: wait for our turn
    const { previous, release } = this.takeTurn();
    await previous;
    try {
      const { model, tokenizer, cache, loadMs } = this.ctx;
      return await generateBatch({ model, tokenizer, contextSize: cache.capacity, loadMs }, prompts, withDefaults(this.generationDefaults, options));
    } finally {
      release();
    }
  }

  /** Streams `{ token, text }` steps (with `n` > 1: choice 0's, then choice 1's, ..., each with `choice`); the iterator's return value is the full result. */
  stream(prompt: string | readonly number[], options: GenerateOptions = {}): AsyncGenerator<ChoiceStep, GenerationResult> {
    this.assertUsable();
    // generations share the KV cache, so they run one after another
    const { previous, release } = this.takeTurn();
    const ctx = this.ctx;
    const merged = withDefaults(this.generationDefaults, options);
    return (async function* () {
      await previous;
      try {
        return yield* generateChoices(ctx, prompt, merged);
      } finally {
        release();
      }
    })();
  }

  /** a place in the line of generations: `previous` settles when the one before ends; call `release` when done */
  private takeTurn(): { previous: Promise<unknown>; release: () => void } {
    const previous = this.queue.catch(() => undefined);
    let release!: () => void;
    this.queue = new Promise<void>((r) => (release = r));
    return { previous, release };
  }

  /** The model's chat template bound to its tokenizer (parsed once); throws when the model has none. */
  chatFormatter(chatTemplate?: string): ChatFormatter {
    return chatFormatterFor(this.tokenizer, this.metadata, chatTemplate === undefined ? undefined : { source: chatTemplate, where: "chatTemplate option" });
  }

  /** Renders the conversation with the chat template and generates the assistant's reply. */
  async chat(messages: readonly ChatMessage[], options: ChatOptions = {}): Promise<GenerationResult> {
    const it = this.streamChat(messages, options);
    for (;;) {
      const r = await it.next();
      if (r.done) return r.value;
    }
  }

  /** Streams the assistant's reply to the conversation; stops at the template's end-of-turn token. */
  streamChat(messages: readonly ChatMessage[], options: ChatOptions = {}): AsyncGenerator<ChoiceStep, GenerationResult> {
    const { system, chatTemplate, ...rest } = options;
    const formatter = this.chatFormatter(chatTemplate);
    const conversation = withSystem(messages, system).map((m) => ({ ...m, content: normalizePrompt(m.content, rest.normalize) }));
    return this.stream(formatter.encode(conversation), { ...rest, stopTokens: [...formatter.endOfTurnIds, ...(rest.stopTokens ?? [])] });
  }

  /** Stops the workers and frees the weights; the model cannot be used afterwards. */
  dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    this.backend.dispose();
  }

  private assertUsable(): void {
    if (this.disposed) throw new Error(`model ${this.path} has been disposed`);
  }
}

/** `options` over `defaults`, where an option explicitly set to undefined does not erase a default */
function withDefaults(defaults: GenerateOptions, options: GenerateOptions): GenerateOptions {
  const merged: Record<string, unknown> = { ...defaults };
  for (const [k, v] of Object.entries(options)) if (v !== undefined) merged[k] = v;
  return merged as GenerateOptions;
}

/**
 * Loads a model — a .gguf file, a Hugging Face folder (config.json + safetensors + tokenizer
 * files) or a Hub reference (`org/name`, `org/name@rev`, `org/name:Q4_K_M`) — with its
 * tokenizer, reading the weights straight into the backend's memory.
 */
export async function loadModel(ref: string, options: LoadModelOptions = {}): Promise<Model> {
  const t0 = performance.now();
  const opened = openModel(await resolveModelReference(ref));
  const { path, tokenizer, metadata } = opened;
  const backend = await createBackend(options.backend, { threads: options.threads });
  try {
    const model = opened.build(backend, { quantize: options.quantize });
    if (tokenizer.vocabSize > model.info.vocabSize) {
      throw new Error(`${path}: the tokenizer has ${tokenizer.vocabSize} tokens but the model's embedding has ${model.info.vocabSize} rows`);
    }
    const contextSize = options.contextSize ?? Math.min(model.info.contextLength, 4096);
    const cache = model.createCache(contextSize);
    const loadMs = performance.now() - t0;
    return new Model(path, model.info, tokenizer, metadata, backend, { model, tokenizer, cache, cachedTokens: [], loadMs }, opened.generationDefaults);
  } catch (e) {
    backend.dispose();
    throw e;
  }
}

/** Loads just the tokenizer of a model (vocab-only GGUF files work too). */
export async function loadTokenizer(ref: string): Promise<Tokenizer> {
  return openTokenizer(await resolveModelReference(ref));
}
