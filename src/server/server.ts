import { createServer as createHttpServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { basename } from "node:path";
import { ChatTemplateError, type ChatFormatter, type ChatTemplateSource } from "../chat/index.js";
import type { Model } from "../llm.js";
import type { EmbeddingModel } from "../pipelines/index.js";
import { handleCompletion } from "./completions.js";
import { handleEmbeddings } from "./embeddings.js";
import type { ServeContext } from "./context.js";
import { ApiError, internal, invalid } from "./errors.js";
import { authorized, parseJsonObject, readBody, sendError, sendJson, sendText } from "./http.js";
import { Metrics } from "./metrics.js";
import { TokenTexts } from "./openai.js";
import { optBoolean, optString, type Body } from "./params.js";
import { PAGE_PATHS, servePage } from "./page.js";
import { SseWriter } from "./sse.js";

export interface ServeOptions {
  /** default 127.0.0.1 */
  host?: string;
  /** default 8080; 0 picks a free port */
  port?: number;
  /** requests to /v1/*, /tokenize and /detokenize need `Authorization: Bearer KEY` */
  apiKey?: string;
  /** generations that may wait for a free sequence (beyond those that run at once); more are answered 429 at once (default 256; 0: only what can run now) */
  maxQueue?: number;
  /** Access-Control-Allow-Origin for browsers on other origins ("*" or an origin) */
  cors?: string;
  /** largest request body in bytes (default 4 MiB) */
  bodyLimit?: number;
  /** the model id /v1/models lists (default: the model file's name) */
  modelName?: string;
  /** a Jinja chat template to use instead of the model's own (with `where`, what its errors name) */
  chatTemplate?: string | ChatTemplateSource;
  /** a stream whose client takes no bytes for this long while an event waits is cut off, freeing its sequences (default 60000, as nginx's send_timeout) */
  writeTimeoutMs?: number;
}

const CLIENT_CLOSED_REQUEST = 499;
const strictUtf8 = new TextDecoder("utf-8", { fatal: true });

type Handler = (req: IncomingMessage, res: ServerResponse) => Promise<void> | void;

/**
 * tsllm's OpenAI-compatible HTTP server: a route table on node:http over one Model (whose engine
 * batches every request). It keeps no state between requests, so replicas scale out behind any
 * load balancer.
 */
export class OpenAIServer {
  private model: Model | undefined;
  /** set instead of `model` when the server serves an embedding model (POST /v1/embeddings) */
  private embedder: EmbeddingModel | undefined;
  private loadError: Error | undefined;
  private readonly http: Server;
  private readonly metrics = new Metrics();
  private readonly inFlight = new Set<AbortController>();
  private readonly routes = new Map<string, Map<string, Handler>>();
  private context: ServeContext | undefined;
  private draining = false;
  private idle: (() => void) | undefined;

  constructor(model: Model | EmbeddingModel | Promise<Model | EmbeddingModel>, private readonly options: ServeOptions = {}) {
    if (options.maxQueue !== undefined && !(Number.isInteger(options.maxQueue) && options.maxQueue >= 0)) throw new RangeError(`maxQueue must be an integer >= 0, got ${options.maxQueue}`);
    if (options.writeTimeoutMs !== undefined && !(Number.isFinite(options.writeTimeoutMs) && options.writeTimeoutMs > 0)) throw new RangeError(`writeTimeoutMs must be a number > 0, got ${options.writeTimeoutMs}`);
    Promise.resolve(model).then((m) => {
      if ("embed" in m) this.embedder = m;
      else this.model = m;
    }, (e: unknown) => { this.loadError = e instanceof Error ? e : new Error(String(e)); });
    this.http = createHttpServer((req, res) => void this.dispatch(req, res));
    const post = (path: string, h: Handler) => this.route("POST", path, h);
    const get = (path: string, h: Handler) => this.route("GET", path, h);
    post("/v1/chat/completions", async (req, res) => handleCompletion(this.ready(), "chat", await this.json(req), res));
    post("/v1/completions", async (req, res) => handleCompletion(this.ready(), "text", await this.json(req), res));
    post("/v1/embeddings", async (req, res) => this.embeddings(await this.json(req), res));
    get("/v1/models", (_req, res) => this.listModels(res));
    get("/health", (_req, res) => this.health(res));
    get("/metrics", (_req, res) => this.renderMetrics(res));
    post("/tokenize", async (req, res) => this.tokenize(await this.json(req), res));
    post("/detokenize", async (req, res) => this.detokenize(await this.json(req), res));
    for (const asset of PAGE_PATHS) get(asset, (req, res) => servePage(req, res, asset));
  }

  /** the address it listens on, e.g. http://127.0.0.1:8080 */
  get url(): string {
    const a = this.http.address() as AddressInfo;
    return `http://${a.family === "IPv6" ? `[${a.address}]` : a.address}:${a.port}`;
  }

  listen(): Promise<this> {
    return new Promise((resolve, reject) => {
      this.http.once("error", reject);
      this.http.listen(this.options.port ?? 8080, this.options.host ?? "127.0.0.1", () => {
        this.http.off("error", reject);
        resolve(this);
      });
    });
  }

  /**
   * Graceful shutdown: stops accepting connections, answers new requests 503, lets the
   * requests in flight finish for up to `graceMs`, then cancels the rest (each answered 503
   * `shutting_down`, or its stream ended by that error event) and closes every connection. The
   * model is not disposed (the caller owns it).
   */
  async close(graceMs = 30_000): Promise<void> {
    this.draining = true;
    const closed = new Promise<void>((resolve) => this.http.close(() => resolve()));
    this.http.closeIdleConnections();
    if (this.inFlight.size > 0) {
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        new Promise<void>((resolve) => (this.idle = resolve)),
        new Promise<void>((resolve) => (timer = setTimeout(resolve, graceMs))),
      ]);
      clearTimeout(timer);
      // the reason is what the handlers answer: the client sees its request did not finish
      const cancelled = new ApiError(503, "the server shut down before the request finished; retry it", "server_error", null, "shutting_down", { Connection: "close" });
      for (const c of this.inFlight) c.abort(cancelled);
      // aborted requests leave at the engine's next step and end their responses
      const deadline = Date.now() + 5_000;
      while (this.inFlight.size > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
    }
    this.http.closeAllConnections();
    await closed;
  }

  private route(method: string, path: string, handler: Handler): void {
    let byMethod = this.routes.get(path);
    if (!byMethod) this.routes.set(path, (byMethod = new Map()));
    byMethod.set(method, handler);
  }

  private async dispatch(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = (req.url ?? "/").split("?")[0]!;
    const byMethod = this.routes.get(path);
    // a client that left before the answer was complete (nothing sent yet, or a stream cut short)
    // counts as nginx's 499 "client closed request"
    res.on("close", () => this.metrics.count(byMethod ? path : "other", res.writableFinished ? res.statusCode : CLIENT_CLOSED_REQUEST));
    if (this.options.cors) {
      res.setHeader("Access-Control-Allow-Origin", this.options.cors);
      res.setHeader("Vary", "Origin");
    }
    try {
      if (req.method === "OPTIONS" && this.options.cors) {
        // the headers the browser asks for are allowed: the openai client sends X-Stainless-*,
        // OpenAI-Organization, OpenAI-Project... beside Authorization, which a "*" would not cover
        const asked = req.headers["access-control-request-headers"];
        res.writeHead(204, {
          "Access-Control-Allow-Methods": "GET, POST, OPTIONS", "Access-Control-Allow-Headers": asked || "Authorization, Content-Type", "Access-Control-Max-Age": "600",
          Vary: "Origin, Access-Control-Request-Headers",
        });
        res.end();
        return;
      }
      if (!byMethod) throw new ApiError(404, `no route for ${req.method} ${path}`, "invalid_request_error", null, "not_found");
      // HEAD is GET without the body (node:http drops it)
      const handler = byMethod.get(req.method === "HEAD" ? "GET" : req.method ?? "");
      if (!handler) throw new ApiError(405, `${req.method} is not allowed on ${path} (allowed: ${[...byMethod.keys()].join(", ")})`, "invalid_request_error", null, "method_not_allowed", { Allow: [...byMethod.keys()].join(", ") });
      if (this.options.apiKey !== undefined && (path.startsWith("/v1/") || path === "/tokenize" || path === "/detokenize") && !authorized(req, this.options.apiKey)) {
        throw new ApiError(401, "missing or invalid API key: send the header 'Authorization: Bearer KEY'", "invalid_request_error", null, "invalid_api_key", { "WWW-Authenticate": "Bearer" });
      }
      if (this.draining && req.method === "POST") {
        res.setHeader("Connection", "close");
        throw new ApiError(503, "the server is shutting down", "server_error", null, "shutting_down", { "Retry-After": "1" });
      }
      await handler(req, res);
    } catch (e) {
      const err = e instanceof ApiError ? e : internal(e);
      if (err.status === 413) res.setHeader("Connection", "close");
      sendError(res, err);
    }
  }

  private async json(req: IncomingMessage): Promise<Body> {
    return parseJsonObject(await readBody(req, this.options.bodyLimit ?? 4 * 2 ** 20));
  }

  /** the handlers' view of the server; 503 while the model loads */
  private ready(): ServeContext {
    const model = this.model;
    if (!model && this.embedder) {
      throw new ApiError(404, `this server serves the embedding model '${this.embedderId(this.embedder)}': use POST /v1/embeddings`, "invalid_request_error", null, "not_found");
    }
    if (!model) throw this.loadError ? internal(this.loadError) : new ApiError(503, "the model is still loading", "server_error", null, "model_loading", { "Retry-After": "1" });
    if (this.context) return this.context;
    const id = this.modelId(model);
    let formatter: ChatFormatter | undefined;
    this.context = {
      model, modelId: id, modelNames: new Set([id, model.path, basename(model.path)]), metrics: this.metrics, texts: new TokenTexts(model.tokenizer),
      formatter: () => {
        try {
          return (formatter ??= model.chatFormatter(this.options.chatTemplate));
        } catch (e) {
          if (e instanceof ChatTemplateError) throw invalid("messages", `${e.message.replace(/; give one with --chat-template FILE$/, "")}: start the server with --chat-template FILE, or use /v1/completions`, "no_chat_template");
          throw e;
        }
      },
      admissible: (prompts, n, param) => {
        const max = this.options.maxQueue ?? 256, parallel = model.engine.maxSequences;
        // an idle server runs floor(parallel / n) prompts at once and lets max more wait
        if (n > parallel) throw invalid("n", `n = ${n} completions exceed the ${parallel} sequences this server runs at once (--parallel)`);
        const most = Math.floor(parallel / n) + max;
        if (prompts > most) {
          throw invalid(param, `'${param}' holds ${prompts} prompts of ${n} choice${n === 1 ? "" : "s"} each, but this server runs ${parallel} sequences at once and lets ${max} requests wait: ` +
            `it can take at most ${most} such prompts in one request; send fewer`, "too_many_prompts");
        }
      },
      admit: (widths) => {
        const max = this.options.maxQueue ?? 256;
        if (model.engine.waitingForRoom(widths) > max) {
          const waiting = model.engine.waitingForRoom();
          throw new ApiError(429, `the server is busy: ${waiting} requests are waiting for room (at most ${max} may wait); retry later`, "rate_limit_error", null, "queue_full", { "Retry-After": "1" });
        }
      },
      track: (controller) => {
        this.inFlight.add(controller);
        return () => {
          this.inFlight.delete(controller);
          if (this.inFlight.size === 0) this.idle?.();
        };
      },
      sse: (res) => new SseWriter(res, {}, this.options.writeTimeoutMs),
      failed: (e) => this.metrics.count("stream_error", e.status),
    };
    return this.context;
  }

  private embedderId(m: EmbeddingModel): string {
    return this.options.modelName ?? basename(m.path);
  }

  private async embeddings(body: Body, res: ServerResponse): Promise<void> {
    const m = this.embedder;
    if (!m) {
      this.ready(); // 503 while loading, 500 if loading failed
      throw new ApiError(404, `this server serves the generative model '${this.modelId(this.model!)}', not an embedding model: start tsllm serve with a sentence-transformers or BERT-family model for /v1/embeddings`, "invalid_request_error", "model", "not_an_embedding_model");
    }
    const id = this.embedderId(m);
    await handleEmbeddings(m, id, new Set([id, m.path, basename(m.path)]), body, res);
  }

  private modelId(model: Model): string {
    return this.options.modelName ?? basename(model.path).replace(/\.gguf$/i, "");
  }

  private listModels(res: ServerResponse): void {
    const e = this.embedder;
    if (e) {
      const i = e.info;
      sendJson(res, 200, {
        object: "list",
        data: [{ id: this.embedderId(e), object: "model", created: Math.floor(Date.now() / 1000), owned_by: "tsllm", meta: { architecture: i.hfArchitecture, n_params: i.parameterCount, n_vocab: i.vocabSize, n_ctx_train: e.maxTokens, n_embd: e.dimensions, n_layer: i.blockCount } }],
      });
      return;
    }
    const model = this.ready().model;
    const i = model.info;
    sendJson(res, 200, {
      object: "list",
      data: [{
        id: this.modelId(model), object: "model", created: Math.floor(Date.now() / 1000), owned_by: "tsllm",
        meta: {
          architecture: i.architecture, n_params: i.parameterCount, n_vocab: i.vocabSize, n_ctx_train: i.contextLength, n_ctx: model.contextSize, n_embd: i.embeddingLength,
          n_layer: i.blockCount, parallel: model.engine.maxSequences, kv_capacity_tokens: model.engine.stats.kvCapacityTokens,
        },
      }],
    });
  }

  private health(res: ServerResponse): void {
    if (this.loadError) sendJson(res, 500, { status: "error", error: this.loadError.message });
    else if (!this.model && !this.embedder) sendJson(res, 503, { status: "loading" });
    else if (this.draining) sendJson(res, 503, { status: "draining" }, { Connection: "close" });
    else if (!this.model) sendJson(res, 200, { status: "ok" });
    else {
      const s = this.model.engine.stats;
      sendJson(res, 200, { status: "ok", requests_running: s.running, requests_waiting: s.waiting });
    }
  }

  private renderMetrics(res: ServerResponse): void {
    const stats = this.model?.engine.stats ?? { waiting: 0, running: 0, steps: 0, rowsComputed: 0, peakStepSequences: 0, cachedPromptTokens: 0, kv: undefined, kvCapacityTokens: 0 };
    sendText(res, 200, this.metrics.render(stats, { draining: this.draining }), "text/plain; version=0.0.4; charset=utf-8");
  }

  /** llama-server's /tokenize: {content, add_special?, with_pieces?} -> {tokens} */
  private tokenize(body: Body, res: ServerResponse): void {
    const tokenizer = this.embedder?.tokenizer ?? this.ready().model.tokenizer;
    const content = optString(body, "content");
    if (content === undefined) throw invalid("content", "'content' (the text to tokenize) is required", "missing_required_parameter");
    const ids = tokenizer.encode(content, { addSpecialTokens: optBoolean(body, "add_special") ?? false, parseSpecial: optBoolean(body, "parse_special") ?? true });
    // a piece is the token's own text (a word's leading space kept), or its bytes where they are part of a character, as llama-server answers
    const piece = (id: number): string | number[] => {
      const bytes = tokenizer.tokenBytes(id);
      try {
        return strictUtf8.decode(bytes);
      } catch {
        return [...bytes];
      }
    };
    sendJson(res, 200, { tokens: optBoolean(body, "with_pieces") ? ids.map((id) => ({ id, piece: piece(id) })) : ids });
  }

  /** llama-server's /detokenize: {tokens} -> {content} */
  private detokenize(body: Body, res: ServerResponse): void {
    const tokenizer = this.embedder?.tokenizer ?? this.ready().model.tokenizer;
    const vocabSize = this.embedder?.info.vocabSize ?? this.ready().model.info.vocabSize;
    const tokens = body.tokens;
    if (!Array.isArray(tokens) || tokens.some((t) => typeof t !== "number" || !Number.isInteger(t) || t < 0 || t >= vocabSize)) {
      throw invalid("tokens", `'tokens' must be an array of token ids in [0, ${vocabSize})`);
    }
    sendJson(res, 200, { content: tokenizer.decode(tokens as number[]) });
  }
}

/**
 * Starts an OpenAI-compatible server on a model (or a model still loading: /health says so
 * meanwhile): a generative Model (completions, chat), or an EmbeddingModel (POST /v1/embeddings).
 */
export function startServer(model: Model | EmbeddingModel | Promise<Model | EmbeddingModel>, options: ServeOptions = {}): Promise<OpenAIServer> {
  return new OpenAIServer(model, options).listen();
}
