/**
 * The page's side: a handle on an engine worker (engine-worker.ts). Each call is a message;
 * generate/chat stream their steps to a callback or an async iterator, and an AbortSignal
 * stops them. Runs on a page's main thread (nothing here blocks).
 */
import { checkChatArguments, NoChatTemplateError, type ChatMessageInput } from "../chat/index.js";
import { checkLogitBiasIds, checkPromptTokens, checkStopTokens, checkTokenPromptKv, checkWidth, compileRequestConstraint } from "../engine/request-checks.js";
import { cancelOnEarlyExit, checkGenerateOptions, checkGenerateRanges, constraintOf, samplingOptionsOf, type GenerationResult, type GenerationStep } from "../generation/index.js";
import { resolveSamplingOptions } from "../sampling/index.js";
import { tokenIdRefusal } from "../tokenizer/index.js";
import { onAbort, OptionError, shownValue } from "../units/index.js";
import type { BrowserLoadOptions, BrowserModelSource } from "./engine.js";
import { rebuiltError } from "./errors.js";
import { checkBrowserLoadOptions } from "./load-options.js";
import type { CachedModel, ForwardTiming, LoadedModel, LoadProgress, Reply, Request, WorkerChatOptions, WorkerGenerateOptions } from "./protocol.js";
import { baseHref, need, type WebWorker } from "../platform/web.js";

type Step = GenerationStep & { choice?: number };
type Pending = { resolve(v: unknown): void; reject(e: Error): void; onStep?: (s: Step) => void; onProgress?: (p: LoadProgress) => void };
/** a request as the page sends it: the id is added here */
type Outgoing = Request extends infer R ? (R extends { id: number } ? Omit<R, "id"> : never) : never;

export interface StreamOptions {
  /** ends the generation early (finishReason "abort") */
  signal?: AbortSignal;
  /** called with each step as it arrives */
  onStep?: (step: Step) => void;
}

/** where in a request the first value postMessage cannot copy (a function or a symbol) lies, e.g. "options.onToken" */
function uncopyable(value: unknown, path = "", seen = new Set<object>()): string | undefined {
  if (typeof value === "function" || typeof value === "symbol") return `${path} (a ${typeof value})`;
  if (value === null || typeof value !== "object" || seen.has(value) || value instanceof Blob) return undefined;
  seen.add(value);
  for (const [key, v] of Object.entries(value)) {
    const found = uncopyable(v, Array.isArray(value) ? `${path}[${key}]` : path ? `${path}.${key}` : key, seen);
    if (found) return found;
  }
  return undefined;
}

/**
 * The generation options of stream() and streamChat(), checked on the page before anything is
 * sent: names and kinds, then every range that needs no model (checkGenerateRanges), as
 * Model.stream refuses them at its call; draftModel passes the library's check but is a Model of
 * this page's, which has none (protocol.ts leaves it out)
 */
function checkStreamOptions(options: object): void {
  checkGenerateOptions(options);
  if ((options as { draftModel?: unknown }).draftModel !== undefined) throw new OptionError("draftModel: not available through the engine worker (its model is the only one loaded)", "draftModel");
  checkGenerateRanges(options);
}

/** the constraints this page compiled (by spec), the last few: a repeated request's grammar is not compiled again on the main thread */
const compiled = new Set<string>();

/** a grammar, JSON schema, choice list or regex that does not compile: Engine.submit's RequestError, naming the option */
function checkConstraint(options: WorkerGenerateOptions): void {
  const spec = constraintOf(options);
  if (spec === undefined) return;
  const key = JSON.stringify(spec);
  if (compiled.has(key)) return;
  compileRequestConstraint(spec);
  if (compiled.size >= 32) compiled.delete(compiled.values().next().value!);
  compiled.add(key);
}

/**
 * The engine's checks that need neither the model's tokenizer nor its KV cache
 * (request-checks.ts), in Engine.submit's order, as it runs them at Model.stream's call: with
 * the model's limits (once its load has answered) a token prompt against the vocabulary and the
 * context, stop tokens and logitBias ids against the vocabulary; the constraint's grammar, which
 * needs no model; then choices or beams against the sequences run at once, and a token prompt's
 * KV worst case against the pool's size (with maxTokens, else the model's default from the load's
 * answer, as Model.stream applies it). `stopTokens`: the
 * request's, as the engine gets them (streamChat's after the template's end-of-turn ids, which
 * Node's message counts in their index); undefined where the page cannot know them (a chat with
 * a chatTemplate option: the worker refuses them, at the first next()).
 */
function checkRequest(model: Pick<LoadedModel, "limits" | "defaultMaxTokens"> | undefined, prompt: string | readonly number[] | undefined, options: WorkerGenerateOptions, stopTokens: readonly number[] | undefined): void {
  const limits = model?.limits;
  if (limits) {
    if (Array.isArray(prompt)) checkPromptTokens(prompt, limits, options.maxTokens ?? model.defaultMaxTokens);
    if (stopTokens) checkStopTokens(stopTokens, limits.tokenIds);
    checkLogitBiasIds(resolveSamplingOptions(samplingOptionsOf(options)).logitBias.keys(), limits.rows);
  }
  checkConstraint(options);
  if (limits) checkWidth(options.numBeams ?? options.n ?? 1, options.numBeams !== undefined, limits.maxSequences);
  if (limits && Array.isArray(prompt)) checkTokenPromptKv(prompt.length, options, limits, model?.defaultMaxTokens);
}

/** a URL relative to the page, as the worker (and the cache) sees it */
const absolute = (url: string | URL): string => new URL(url, baseHref()).href;

const isResponse = (v: unknown): v is Response => typeof Response === "function" && v instanceof Response;

/** the body of a fetch() Response as a File named by its URL; one clear error for a failed or already read one */
async function responseFile(response: Response): Promise<File> {
  const name = response.url || "a Response";
  if (!response.ok) throw new Error(`load: ${name}: HTTP ${response.status} ${response.statusText}`.trimEnd());
  if (response.bodyUsed) throw new Error(`load: the Response for ${name} was read already (its body is gone): pass a fresh one, or its URL`);
  return new File([await response.blob()], name);
}

export class TsllmWorker {
  private readonly worker: WebWorker;
  private nextId = 1;
  private readonly pending = new Map<number, Pending>();
  /** why the worker cannot answer any more (terminated, or its script failed to load): later calls reject with it */
  private dead: Error | undefined;
  /** the loaded model's limits and whether it has a chat template, from its load's answer; undefined while a load or unload sent since may change the model (the worker checks then) */
  private model: Pick<LoadedModel, "limits" | "defaultMaxTokens" | "hasChatTemplate" | "endOfTurnIds"> | undefined;
  /** loads and unloads sent: a load's answer is the model only when none was sent after it */
  private modelChanges = 0;

  /**
   * Starts an engine worker. `workerUrl` is the build's engine-worker.js (default: beside this
   * module's bundle, tsllm.js); the page must be cross-origin isolated for the wasm backend.
   */
  constructor(workerUrl: string | URL = new URL("./engine-worker.js", import.meta.url)) {
    const Worker = need("Worker", "tsllm");
    // (as the page named it)
    const script = String(workerUrl);
    this.worker = new Worker(workerUrl, { type: "module", name: "tsllm engine" });
    /** the worker's module ran to its end (its "ready"): an error before is a worker that will never answer */
    let started = false;
    this.worker.onmessage = (e) => {
      const reply = e.data as Reply;
      if (reply.kind === "ready") started = true;
      else if (reply.kind === "lost") this.rejectPending(new Error(`tsllm engine worker: ${reply.message}`));
      else this.receive(reply);
    };
    this.worker.onerror = (e) => {
      // no message: the script did not load (404, not JavaScript); before "ready": it threw at its top level and
      // set no handler. Either way no worker answers: this call and every later one reject (a later one waited forever)
      const error = new Error(`tsllm engine worker: ${!e.message ? `${script} failed to load` : started ? e.message : `${script} failed to start: ${e.message}`}`);
      if (!e.message || !started) this.dead = error;
      this.rejectPending(error);
    };
    // a reply that could not be read on the page: which call it answered is unknown, and that call would wait forever
    this.worker.onmessageerror = () => this.rejectPending(new Error("tsllm engine worker: a reply could not be read on the page (messageerror)"));
  }

  /** every call waiting for an answer rejects with `error` */
  private rejectPending(error: Error): void {
    for (const p of this.pending.values()) p.reject(error);
    this.pending.clear();
  }

  private receive(reply: Exclude<Reply, { id: 0 }>): void {
    const p = this.pending.get(reply.id);
    if (!p) return;
    if (reply.kind === "step" || reply.kind === "progress") {
      try {
        if (reply.kind === "step") p.onStep?.(reply.step);
        else p.onProgress?.(reply.progress);
      } catch (e) {
        // the page's callback threw: the call rejects with that error and the worker stops it, as a throw in
        // a stream() loop does (the error was lost and the generation or download ran on to its end)
        this.pending.delete(reply.id);
        void this.call({ op: "abort", target: reply.id }).done.catch(() => undefined);
        p.reject(e instanceof Error ? e : new Error(String(e)));
      }
    } else {
      this.pending.delete(reply.id);
      if (reply.kind === "result") p.resolve(reply.value);
      // the library's error class again (an OptionError was a plain Error on the page), with its option
      else p.reject(rebuiltError(reply));
    }
  }

  /** a request that cannot be sent throws here: a worker that is gone, a value postMessage cannot copy */
  private post<T>(request: Outgoing, onStep?: (s: Step) => void, onProgress?: (p: LoadProgress) => void): { id: number; done: Promise<T> } {
    const id = this.nextId++;
    // a terminated (or never started) worker drops messages without a word: the call would wait forever
    if (this.dead) throw this.dead;
    try {
      this.worker.postMessage({ ...request, id });
    } catch (e) {
      // a value that cannot be copied to the worker (a function, a DOM node), named by its place where it can be found
      throw new Error(`tsllm ${request.op}: ${uncopyable(request) ?? "the request"} cannot be sent to the engine worker (${e instanceof Error ? e.message : String(e)})`);
    }
    const done = new Promise<T>((resolve, reject) => this.pending.set(id, { resolve: resolve as (v: unknown) => void, reject, onStep, onProgress }));
    return { id, done };
  }

  /** post(), with a request that cannot be sent rejecting its promise (the calls that return one) */
  private call<T>(request: Outgoing, onStep?: (s: Step) => void, onProgress?: (p: LoadProgress) => void): { id: number; done: Promise<T> } {
    try {
      return this.post<T>(request, onStep, onProgress);
    } catch (e) {
      return { id: 0, done: Promise.reject(e) };
    }
  }

  /** `sent`: post (a request that cannot be sent throws) or call (it rejects) */
  private streamed<T>(request: Extract<Outgoing, { op: "load" | "generate" | "chat" }>, options: StreamOptions & { onProgress?: (p: LoadProgress) => void }, sent: "post" | "call" = "call"): Promise<T> {
    const send = sent === "post" ? this.post.bind(this) : this.call.bind(this);
    const signal = options.signal;
    // aborted before it was sent: the request says so (an abort message is read only after the generation's first token)
    if (signal?.aborted) return send<T>({ ...request, aborted: true }, options.onStep, options.onProgress).done;
    const { id, done } = send<T>(request, options.onStep, options.onProgress);
    if (!signal) return done;
    // one listener on a signal shared by many calls (onAbort), not one per call
    const release = onAbort(signal, () => void this.call({ op: "abort", target: id }).done.catch(() => undefined));
    return done.finally(release);
  }

  /**
   * Loads a GGUF from a URL (relative to the page), a Blob / user-picked File, or its bytes (an
   * ArrayBuffer or typed array, copied to the worker); replaces the
   * model loaded before (loads called together run one after another; the last one's model stays). A URL's file is kept in the model cache (the Cache API) and read from
   * there next time, with no request (`cache: false`: no cache, Range reads; "revalidate": ask
   * the server whether it changed). `onProgress` gets the bytes downloaded, then read. `signal`
   * cancels it: the promise rejects with an AbortError and no model is loaded.
   */
  load(source: BrowserModelSource | URL | Response, options: BrowserLoadOptions = {}): Promise<LoadedModel> {
    // an option of the wrong name or kind rejects here, with nothing sent and the model loaded before kept
    try {
      checkBrowserLoadOptions(options);
    } catch (e) {
      return Promise.reject(e);
    }
    // a fetch() Response cannot be posted to the worker (it was "Response object could not be cloned"): its body, as a File named by its URL
    if (isResponse(source)) return responseFile(source).then((file) => this.load(file, options));
    const s = typeof source === "string" || source instanceof URL ? absolute(source) : source;
    const { onProgress, signal, ...rest } = options;
    const change = ++this.modelChanges;
    this.model = undefined;
    return this.streamed<LoadedModel>({ op: "load", source: s, options: rest, progress: onProgress !== undefined }, { signal, onProgress }).then((loaded) => {
      if (change === this.modelChanges) this.model = { limits: loaded.limits, defaultMaxTokens: loaded.defaultMaxTokens, hasChatTemplate: loaded.hasChatTemplate, endOfTurnIds: loaded.endOfTurnIds };
      return loaded;
    });
  }

  /** The models in the model cache (URL, size, validators, when stored). */
  cachedModels(): Promise<CachedModel[]> {
    return this.call<CachedModel[]>({ op: "cachedModels" }).done;
  }

  /** Removes a URL's model from the model cache (true when it was there). */
  async deleteCachedModel(url: string | URL): Promise<boolean> {
    return (await this.call<number>({ op: "deleteCachedModels", url: absolute(url) }).done) > 0;
  }

  /** Empties the model cache; returns how many models it held. */
  clearModelCache(): Promise<number> {
    return this.call<number>({ op: "deleteCachedModels" }).done;
  }

  /** The model's token ids for `text`; text that is no string rejects naming it, with nothing sent (it was the worker's "text.replace is not a function"). */
  tokenize(text: string, addSpecialTokens = true): Promise<number[]> {
    if (typeof text !== "string") return Promise.reject(new OptionError(`tokenize: text: expected a string, got ${shownValue(text)}`, "text"));
    if (typeof addSpecialTokens !== "boolean") return Promise.reject(new OptionError(`tokenize: addSpecialTokens: expected a boolean, got ${shownValue(addSpecialTokens)}`, "addSpecialTokens"));
    return this.call<number[]>({ op: "tokenize", text, addSpecialTokens }).done;
  }

  /**
   * The text of token ids; a value that is no array rejects naming it, with nothing sent (a string
   * was spread into its characters: "token id a is outside the vocabulary"), and so does an id
   * outside the loaded model's vocabulary once its load has answered (Node's tokenizer's message,
   * after `detokenize: tokens[i]: `; it was the worker's RangeError, naming no option).
   */
  detokenize(tokens: readonly number[]): Promise<string> {
    if (!Array.isArray(tokens) && !(ArrayBuffer.isView(tokens) && !(tokens instanceof DataView))) {
      return Promise.reject(new OptionError(`detokenize: tokens: expected an array of token ids, got ${shownValue(tokens)}`, "tokens"));
    }
    const vocabSize = this.model?.limits.tokenIds;
    if (vocabSize !== undefined) {
      for (let i = 0; i < tokens.length; i++) {
        const refusal = tokenIdRefusal(tokens[i]!, vocabSize);
        if (refusal) return Promise.reject(new OptionError(`detokenize: tokens[${i}]: ${refusal}`, "tokens"));
      }
    }
    return this.call<string>({ op: "detokenize", tokens: [...tokens] }).done;
  }

  /**
   * Generates a completion of a text or token prompt, with the library's generation and sampling
   * options. What stream() refuses at its call rejects the promise here, with nothing sent.
   */
  generate(prompt: string | readonly number[], options: WorkerGenerateOptions & StreamOptions = {}): Promise<GenerationResult> {
    const { signal, onStep, ...rest } = options;
    try {
      this.checkGeneration(prompt, signal === undefined ? rest : { ...rest, signal });
    } catch (e) {
      return Promise.reject(e);
    }
    return this.streamed({ op: "generate", prompt: typeof prompt === "string" ? prompt : [...prompt], options: rest }, { signal, onStep });
  }

  /**
   * The assistant's reply to a conversation, through the model's chat template. What
   * streamChat() refuses at its call rejects the promise here, with nothing sent.
   */
  chat(messages: readonly ChatMessageInput[], options: WorkerChatOptions & StreamOptions = {}): Promise<GenerationResult> {
    const { signal, onStep, ...rest } = options;
    try {
      this.checkChat(messages, signal === undefined ? rest : { ...rest, signal });
    } catch (e) {
      return Promise.reject(e);
    }
    return this.streamed({ op: "chat", messages: [...messages], options: rest }, { signal, onStep });
  }

  /** what the page can tell of a generation request before it is sent (stream() and generate()) */
  private checkGeneration(prompt: string | readonly number[], options: WorkerGenerateOptions & { signal?: AbortSignal }): void {
    checkStreamOptions(options);
    if (typeof prompt !== "string" && !Array.isArray(prompt)) throw new OptionError(`prompt: expected a string or an array of token ids, got ${shownValue(prompt)}`, "prompt");
    checkRequest(this.model, prompt, options, Array.isArray(options.stopTokens) ? options.stopTokens : undefined);
  }

  /** what the page can tell of a chat request before it is sent (streamChat() and chat()) */
  private checkChat(messages: readonly ChatMessageInput[], options: WorkerChatOptions & { signal?: AbortSignal }): void {
    checkChatArguments(messages, options);
    // (as Model.streamChat finds no template before it checks the generation options)
    if (this.model && !this.model.hasChatTemplate && options.chatTemplate === undefined) throw new NoChatTemplateError();
    const { system: _s, chatTemplate: _t, chatTemplateName: _n, parseSpecialInContent: _p, ...generation } = options;
    checkStreamOptions(generation);
    // (the model's own template's end-of-turn ids, from its load; another template's need the worker's tokenizer)
    const endOfTurn = options.chatTemplate === undefined ? this.model?.endOfTurnIds : undefined;
    checkRequest(this.model, undefined, generation, endOfTurn ? [...endOfTurn, ...(Array.isArray(generation.stopTokens) ? generation.stopTokens : [])] : undefined);
  }

  /**
   * Times the raw forward pass (what `npm run bench` measures): the prompt's tokens in one batched
   * forward into a fresh KV cache of `contextSize` tokens (default: just enough), then `genTokens`
   * greedy single-token steps; no sampler, detokenizer or scheduler.
   */
  timeForward(promptTokens: readonly number[], genTokens: number, contextSize = promptTokens.length + genTokens + 1): Promise<ForwardTiming> {
    return this.call<ForwardTiming>({ op: "timeForward", promptTokens: [...promptTokens], genTokens, contextSize }).done;
  }

  /**
   * Streams the steps of a generation; the iterator's return value is the result. The request is
   * sent by this call, so what the page can check (the options' names, kinds and ranges, the
   * prompt's kind, a terminated worker, a value that cannot be sent) throws here with nothing
   * sent, as Model.stream does; so does what the loaded model's limits tell (a token id outside
   * its vocabulary in the prompt, stopTokens or logitBias, a token prompt that fills its context,
   * n or numBeams past its sequences at once, a token prompt whose KV worst case, with maxTokens
   * or the model's default, its KV cache can never hold), once its load has answered, and a
   * grammar, JSON schema, choice list or regex that does not compile (the engine's RequestError).
   * What needs its tokenizer (a text prompt longer than the context or than the KV cache holds)
   * rejects the first next(). Leaving the loop (break, return, a throw), even before its first
   * step, stops the generation in the worker.
   */
  stream(prompt: string | readonly number[], options: WorkerGenerateOptions & { signal?: AbortSignal } = {}): AsyncGenerator<Step, GenerationResult> {
    this.checkGeneration(prompt, options);
    const { signal, ...rest } = options;
    return this.steps({ op: "generate", prompt: typeof prompt === "string" ? prompt : [...prompt], options: rest }, signal);
  }

  /**
   * Streams the assistant's reply to a conversation, through the model's chat template (or
   * `chatTemplate`), as Model.streamChat does: the same checks at the call as stream() (and the
   * messages' and chat options' own), the template's end-of-turn token ends it, and leaving the
   * loop early stops it in the worker. A model without a chat template (once its load has
   * answered) throws a NoChatTemplateError here, as Model.streamChat does.
   */
  streamChat(messages: readonly ChatMessageInput[], options: WorkerChatOptions & { signal?: AbortSignal } = {}): AsyncGenerator<Step, GenerationResult> {
    this.checkChat(messages, options);
    const { signal, ...rest } = options;
    return this.steps({ op: "chat", messages: [...messages], options: rest }, signal);
  }

  /** a request sent now, its steps read as they come; leaving early (even before the first step) aborts it in the worker */
  private steps(request: Extract<Outgoing, { op: "generate" | "chat" }>, outer: AbortSignal | undefined): AsyncGenerator<Step, GenerationResult> {
    const queue: Step[] = [];
    let wake: (() => void) | undefined;
    let finished = false;
    const controller = new AbortController();
    if (outer?.aborted) controller.abort();
    const release = outer === undefined ? () => undefined : onAbort(outer, () => controller.abort());
    const cancel = (): void => {
      release();
      if (!finished) controller.abort();
    };
    let result: Promise<GenerationResult>;
    try {
      const onStep = (s: Step): void => {
        queue.push(s);
        wake?.();
      };
      result = this.streamed<GenerationResult>(request, { signal: controller.signal, onStep }, "post");
    } catch (e) {
      release();
      throw e;
    }
    result = result.finally(() => {
      finished = true;
      // a stream never read to its end lets go of the caller's signal once its request ends
      release();
      wake?.();
    });
    result.catch(() => undefined);
    const steps = async function* (): AsyncGenerator<Step, GenerationResult> {
      try {
        for (;;) {
          while (queue.length > 0) yield queue.shift()!;
          if (finished) return await result;
          await new Promise<void>((r) => (wake = r));
          wake = undefined;
        }
      } finally {
        cancel();
      }
    };
    return cancelOnEarlyExit(steps(), cancel);
  }

  /** Frees the model (the worker stays). */
  unload(): Promise<void> {
    this.modelChanges++;
    this.model = undefined;
    return this.call<void>({ op: "unload" }).done;
  }

  /** Stops the worker; pending calls reject, and so do later ones. */
  terminate(): void {
    const error = new Error("tsllm engine worker terminated");
    this.dead = error;
    this.worker.terminate();
    this.rejectPending(error);
  }
}
