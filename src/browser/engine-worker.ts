/**
 * The engine worker: a dedicated module Worker that owns the model (a page's main thread may
 * not Atomics.wait, which the wasm backend's thread pool does) and answers the page's requests
 * (protocol.ts). One model at a time; a new `load` replaces the old one.
 */
import { DEFAULT_MAX_TOKENS, type ChoiceStep, type Model } from "../llm.js";
import { timeGreedyForward } from "../generation/index.js";
import type { WasmBackend } from "../kernels/wasm/backend.js";
import { hostRunsRelaxedSimd } from "../kernels/wasm/host.browser.js";
import { wasmThreading } from "./backends.js";
import { loadBrowserModelFrom, modelSource, sourceName } from "./engine.js";
import { sentError } from "./errors.js";
import { abortError } from "./files.js";
import { deleteCachedModels, listCachedModels } from "./model-cache.js";
import type { LoadedModel, LoadProgress, Reply, Request } from "./protocol.js";
import type { WorkerScope } from "../platform/web.js";

const scope = globalThis as unknown as WorkerScope;
let model: Model | undefined;
let backendName = "wasm";
/** why the last load failed (cleared by a load that works, or an unload): what a call that needs the model is told */
let loadFailure: string | undefined;
const running = new Map<number, AbortController>();

const send = (reply: Reply): void => scope.postMessage(reply);

/**
 * Loads and unloads run one after another: a load that arrives while another is under way
 * waits for it and then disposes what it built (run side by side, the first one's model, its
 * kernel threads and memory, were overwritten without being disposed).
 */
let modelChanges: Promise<unknown> = Promise.resolve();
function changeModel<T>(change: () => Promise<T>): Promise<T> {
  const next = modelChanges.then(change);
  modelChanges = next.catch(() => undefined);
  return next;
}

function loaded(): Model {
  if (!model) throw new Error(`no model is loaded (${loadFailure ? `the last load failed: ${loadFailure}` : "send load first"})`);
  return model;
}

/**
 * The model, once the loads and unloads sent before this request are done: messages are handled
 * in the order the page sent them, so `load(url)` then `generate(...)` without awaiting the load
 * generates with that model (it said "no model is loaded" while the load ran).
 */
async function current(): Promise<Model> {
  await modelChanges;
  return loaded();
}

/** a request that an abort message may end: registered at once (it may be aborted while it waits), aborted already when the page's signal was */
function abortable(req: Extract<Request, { op: "load" | "generate" | "chat" }>): AbortController {
  const controller = new AbortController();
  running.set(req.id, controller);
  if (req.aborted) controller.abort();
  return controller;
}

async function streamTo(id: number, it: AsyncGenerator<ChoiceStep, unknown>): Promise<unknown> {
  for (;;) {
    const r = await it.next();
    if (r.done) return r.value;
    send({ id, kind: "step", step: r.value });
  }
}

/** replaces the model with the one `req` names */
async function load(req: Extract<Request, { op: "load" }>, signal: AbortSignal): Promise<LoadedModel> {
  // aborted while it waited for the load before it: the model loaded before stays
  // a source that is none (undefined, a Response) fails here, leaving the model loaded before
  const source = modelSource(req.source);
  if (signal.aborted) throw abortError(sourceName(source));
  model?.dispose();
  model = undefined;
  backendName = req.options?.backend ?? "wasm";
  const progress = req.progress ? (p: LoadProgress) => send({ id: req.id, kind: "progress", progress: p }) : undefined;
  const loaded = await loadBrowserModelFrom(source, { ...req.options, onProgress: progress, signal }).catch((e: unknown) => {
    loadFailure = e instanceof Error ? e.message : String(e);
    throw e;
  });
  loadFailure = undefined;
  model = loaded.model;
  const m = model;
  const wasm = backendName === "wasm" ? (m.backend as WasmBackend) : undefined;
  const note = wasm ? wasmThreading(req.options?.threads).note : undefined;
  // the tokenizer's reading of the template, as Model.chat's; a field that gives none (of the wrong
  // type) counts, so the worker's chat says why rather than the page saying there is none
  const hasChatTemplate = m.tokenizer.chatTemplate !== undefined || m.tokenizer.chatTemplateProblem !== undefined;
  let endOfTurnIds: number[] | undefined;
  try {
    // (a template that does not parse is the chat's own refusal, at its call in the worker)
    if (hasChatTemplate) endOfTurnIds = [...m.chatFormatter().endOfTurnIds];
  } catch {
    endOfTurnIds = undefined;
  }
  return {
    // defaultMaxTokens: Model.stream's default (DEFAULT_MAX_TOKENS where the generation defaults name none)
    // the backend's own count: 1 on a page that is not cross-origin isolated, whatever was asked
    source: m.path, info: m.info, backend: backendName, threads: wasm?.threads ?? 1, ...(note ? { threadsNote: note } : {}),
    ...(wasm ? { simd: req.options?.simd === "plain" || !hostRunsRelaxedSimd() ? "plain" : "relaxed", memories: wasm.memoryCount } : {}),
    contextSize: m.contextSize, limits: m.engine.limits, defaultMaxTokens: m.generationDefaults.maxTokens ?? DEFAULT_MAX_TOKENS, loadMs: m.loadMs, hasChatTemplate, ...(endOfTurnIds ? { endOfTurnIds } : {}),
    size: loaded.size, fromCache: loaded.fromCache, cached: loaded.cached, ...(loaded.notCached ? { notCached: loaded.notCached } : {}),
    ...(loaded.refetched ? { refetched: loaded.refetched } : {}),
  };
}

async function handle(req: Request): Promise<unknown> {
  switch (req.op) {
    case "load": {
      const controller = abortable(req);
      return changeModel(() => load(req, controller.signal)).finally(() => running.delete(req.id));
    }
    case "tokenize":
      return (await current()).tokenizer.encode(req.text, { addSpecialTokens: req.addSpecialTokens ?? true });
    case "detokenize":
      return (await current()).tokenizer.decode(req.tokens);
    case "generate": {
      const controller = abortable(req);
      try {
        return await streamTo(req.id, (await current()).stream(req.prompt, { ...req.options, signal: controller.signal }));
      } finally {
        running.delete(req.id);
      }
    }
    case "chat": {
      const controller = abortable(req);
      try {
        return await streamTo(req.id, (await current()).streamChat(req.messages, { ...req.options, signal: controller.signal }));
      } finally {
        running.delete(req.id);
      }
    }
    case "timeForward":
      return timeGreedyForward((await current()).languageModel, req.promptTokens, req.genTokens, req.contextSize);
    case "abort":
      running.get(req.target)?.abort();
      return undefined;
    case "unload":
      return changeModel(async () => {
        model?.dispose();
        model = undefined;
        loadFailure = undefined;
      });
    case "cachedModels":
      return listCachedModels();
    case "deleteCachedModels":
      return deleteCachedModels(req.url);
    default:
      throw new Error(`unknown request ${JSON.stringify((req as { op?: unknown }).op)}`);
  }
}

scope.onmessage = (e) => {
  const req = e.data as Request;
  handle(req).then(
    (value) => send({ id: req.id, kind: "result", value }),
    (err: unknown) => send({ id: req.id, kind: "error", ...sentError(err) }),
  );
};
// a request that could not be read here carries no id: the page is told, or its call would wait forever
scope.onmessageerror = () => send({ id: 0, kind: "lost", message: "a request could not be read by the engine worker (messageerror)" });
// last: the module ran to its end (an error event before this is a script that never started)
send({ id: 0, kind: "ready" });
