import type { GGUFMetadata } from "./formats/gguf-reader.js";
import { generateSteps, type GenerateOptions, type GenerationContext, type GenerationResult, type GenerationStep } from "./generation/generate.js";
import type { Backend } from "./kernels/backend.js";
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
  async generate(prompt: string | readonly number[], options: GenerateOptions = {}): Promise<GenerationResult> {
    const it = this.stream(prompt, options);
    for (;;) {
      const r = await it.next();
      if (r.done) return r.value;
    }
  }

  /** Streams `{ token, text }` steps; the iterator's return value is the full result. */
  stream(prompt: string | readonly number[], options: GenerateOptions = {}): AsyncGenerator<GenerationStep, GenerationResult> {
    this.assertUsable();
    // generations share the KV cache, so they run one after another
    const previous = this.queue;
    let release!: () => void;
    this.queue = new Promise<void>((r) => (release = r));
    const ctx = this.ctx;
    return (async function* () {
      await previous.catch(() => undefined);
      try {
        return yield* generateSteps(ctx, prompt, options);
      } finally {
        release();
      }
    })();
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

/** Loads a model (a .gguf file): header, tokenizer, weights (straight into the backend's memory). */
export async function loadModel(ref: string, options: LoadModelOptions = {}): Promise<Model> {
  const t0 = performance.now();
  const opened = openModel(await resolveModelReference(ref));
  const { path, tokenizer, metadata } = opened;
  const backend = await createBackend(options.backend, { threads: options.threads });
  try {
    const model = opened.build(backend);
    if (tokenizer.vocabSize > model.info.vocabSize) {
      throw new Error(`${path}: the tokenizer has ${tokenizer.vocabSize} tokens but the model's embedding has ${model.info.vocabSize} rows`);
    }
    const contextSize = options.contextSize ?? Math.min(model.info.contextLength, 4096);
    const cache = model.createCache(contextSize);
    const loadMs = performance.now() - t0;
    return new Model(path, model.info, tokenizer, metadata, backend, { model, tokenizer, cache, cachedTokens: [], loadMs });
  } catch (e) {
    backend.dispose();
    throw e;
  }
}

/** Loads just the tokenizer of a model (vocab-only GGUF files work too). */
export async function loadTokenizer(ref: string): Promise<Tokenizer> {
  return openTokenizer(await resolveModelReference(ref));
}
