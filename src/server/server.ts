import { randomUUID } from "node:crypto";
import { createServer as createHttpServer, maxHeaderSize, STATUS_CODES, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo, Socket } from "node:net";
import type { Duplex } from "node:stream";
import { basename } from "node:path";
import { ChatTemplateError, NoChatTemplateError, type ChatFormatter, type ChatTemplateSource } from "../chat/index.js";
import { defaultDraftTokens, exclusive } from "../engine/index.js";
import type { Model } from "../llm.js";
import { yieldToEventLoop } from "../platform/host.js";
import { printable } from "../units/index.js";
import { VocabTokenizer } from "../tokenizer/index.js";
import { llamaCppSamplerNames } from "../sampling/index.js";
import { embeddingsOf, type DecoderEmbeddingModel, type EmbeddingModel } from "../pipelines/index.js";
import { applyTemplate, handleCompletion } from "./completions.js";
import { handleInfill } from "./infill.js";
import { handleEmbeddings, type EmbeddingsApi, type EmbeddingsRoute } from "./embeddings.js";
import type { ServeContext } from "./context.js";
import { LIBRARY_SETTING_NAMES, type SettingNames } from "./setting-names.js";
import { ApiError, internal, invalid } from "./errors.js";
import { allowedHostsProblem, hostGuard } from "./allowed-hosts.js";
import { authorized, BodyBudget, BodyCutOff, type BodyLimit, checkBodyHeaders, DEFAULT_BODY_LIMIT, DEFAULT_WRITE_TIMEOUT_MS, MAX_BODY_LIMIT, parseJsonObject, readBody, sendError, sendJson, sendText } from "./http.js";
import { Metrics } from "./metrics.js";
import { TokenTexts } from "./openai.js";
import { defined, optBoolean, type Body } from "./params.js";
import { idsAndTexts, kindOf, promptTokens, templateKwargsProblem, type PromptInput } from "./requests.js";
import { PAGE_PATHS, servePage } from "./page.js";
import { checkSlotFolder } from "./slot-files.js";
import { listSlots, SLOT_PREFIX, SLOT_ROUTE, slotAction, slotsOff } from "./slots.js";
import { DEFAULT_SSE_PING_MS, SseWriter } from "./sse.js";

export interface ServeOptions {
  /** default 127.0.0.1 */
  host?: string;
  /** default 8080; 0 picks a free port */
  port?: number;
  /** requests to /v1/* and every POST (/tokenize, /detokenize, /embedding, ...) need `Authorization: Bearer KEY` */
  apiKey?: string;
  /** generations that may wait for a free sequence (beyond those that run at once); more are answered 429 at once (default 256; 0: only what can run now) */
  maxQueue?: number;
  /** Access-Control-Allow-Origin for browsers on other origins ("*" or an origin); without it (or from another origin than it names) a browser page's POST is refused 403 (fromForeignPage) */
  cors?: string;
  /**
   * the names, beside loopback ones and IP addresses, that a request's Host may carry (a reverse
   * proxy's public name; ".example.com" for it and every name under it; "*" for any): a server
   * bound to loopback refuses others 403 (a DNS-rebinding page sends its own domain), one bound to
   * another address checks Host only where this is given (src/server/allowed-hosts.ts)
   */
  allowedHosts?: readonly string[];
  /** largest request body in bytes, as sent or once unpacked (default 4 MiB; at most MAX_BODY_LIMIT, the longest string: a body is decoded into one) */
  bodyLimit?: number;
  /** bytes of request bodies held, all requests together (past the first 64 KiB of each): while they arrive, and until a completion's prompts are tokenized (other requests: until answered); a body that would take the total past it is answered 503 with Retry-After (default 64 MiB, or 4 bodyLimits where that is more) */
  bodiesLimit?: number;
  /** the model id /v1/models lists (default: the model file's name) */
  modelName?: string;
  /** a Jinja chat template to use instead of the model's own (with `where`, what its errors name) */
  chatTemplate?: string | ChatTemplateSource;
  /** one of the model's own chat templates by name for every chat request ("default", "tool_use", "rag"...; Model.chatFormatter's choice): without it a request with tools gets "tool_use" where the model has it, else the default */
  chatTemplateName?: string;
  /** extra chat-template variables for every chat request (llama-server's --chat-template-kwargs, e.g. `{ enable_thinking: false }`); a request's chat_template_kwargs override them */
  chatTemplateKwargs?: Readonly<Record<string, unknown>>;
  /** embedding inputs past the model's tokens are cut as sentence-transformers cuts them instead of a 400, unless a request sends `truncate: false` (text-embeddings-inference's --auto-truncate) */
  autoTruncate?: boolean;
  /** a response whose client takes no bytes for this long while its bytes wait is cut off (default 60000, as nginx's send_timeout); a stream is cut once its client has kept it waiting this long in all, its waits added (a slow reader's sequences are paused meanwhile), which frees its sequences */
  writeTimeoutMs?: number;
  /** a stream silent this long (waiting in the queue, in a long prefill) gets an SSE comment, `: keep-alive`, so proxies and clients with an idle read timeout do not cut it (default 15000; 0: never) */
  ssePingMs?: number;
  /** a request whose headers and body have not all arrived this long after it began is answered 408 and its connection closed (default 60000) */
  readTimeoutMs?: number;
  /** a kept-alive connection idle this long after an answer is closed (default 65000: longer than the 60 s a load balancer keeps idle connections, AWS ALB's and nginx's keepalive_timeout, so the server is never the one closing a connection the balancer is about to reuse) */
  keepAliveTimeoutMs?: number;
  /**
   * where the server reports what its answers do not tell the operator, one report a call: a
   * request that failed inside the server (answered 500, or its stream ended by that error),
   * with its method, path, X-Request-Id and the error's stack. Default: nowhere; `tsllm serve`
   * writes them to stderr, as llama-server and vLLM log theirs
   */
  log?: (report: string) => void;
  /**
   * every answered request also goes to `log`, one line when it ends: method, path, status (499:
   * the client left first), milliseconds, the client's address and X-Request-Id; GET and HEAD of
   * /health, /metrics, /v1/models and the page are left out (probes and scrapers would fill the
   * log), as llama-server leaves them out of its request log
   */
  logRequests?: boolean;
  /**
   * what refusals call the settings the operator chose, where the defaults (the library's option
   * names: kvCacheBytes, contextSize, maxSequences, maxQueue, ...) are not how they were set;
   * `tsllm serve` gives its flags (--kv-memory, --ctx-size, --parallel, --max-queue, ...)
   */
  settingNames?: Partial<SettingNames>;
  /**
   * speculative decoding for the completion requests that can take it (one choice, no logprobs):
   * a loaded draft model with the model's vocabulary (or one still loading: the server is loading
   * until both are), as llama-server's --model-draft. Greedy answers are the model's own, token for
   * token; sampled ones follow the rejection rule, so their distribution is the model's
   */
  draftModel?: Model | Promise<Model>;
  /** tokens the draft proposes a round (default 8); a request's `speculative.n_max` sets its own, 0 none */
  draftTokens?: number;
  /** llama-server's GET /slots, which lists the requests running and their sampling settings (default true; false: a 501, as llama-server's --no-slots) */
  slots?: boolean;
  /**
   * a folder for the slot files of POST /slots/{id}?action=save|restore (llama-server's
   * --slot-save-path; it must exist): each holds a slot's cached tokens and their KV rows, tsllm's
   * own format. Without it save and restore are a 501, as llama-server's
   */
  slotSavePath?: string;
}

const CLIENT_CLOSED_REQUEST = 499;

/**
 * The connection errors that mean the client went away (its peer reset or closed the connection,
 * or the network between them failed): node's 'clientError' carries any error of the connection's
 * socket (these, from its reads and writes), besides llhttp's parse errors (HPE_*) and its own
 * request timeout. A client gone sent no malformed HTTP.
 */
const CLIENT_GONE = new Set(["HPE_INVALID_EOF_STATE", "ECONNRESET", "EPIPE", "ETIMEDOUT", "ECONNABORTED", "EHOSTUNREACH", "ENETUNREACH", "ENETDOWN", "EHOSTDOWN"]);

/**
 * The status a connection that node gave up on is counted and logged as (and answered with, where
 * it can still be): nginx's 499 for a client that went away (CLIENT_GONE: it closed or reset its
 * connection while its request was arriving, or the connection failed under an answer), 408 for a
 * request too slow to arrive, 431 for headers too large, 413 for chunk extensions too large, 400
 * for malformed HTTP.
 */
export function clientErrorStatus(e: Pick<NodeJS.ErrnoException, "code">): number {
  if (e.code !== undefined && CLIENT_GONE.has(e.code)) return CLIENT_CLOSED_REQUEST;
  return e.code === "ERR_HTTP_REQUEST_TIMEOUT" ? 408 : e.code === "HPE_HEADER_OVERFLOW" ? 431 : e.code === "HPE_CHUNK_EXTENSIONS_OVERFLOW" ? 413 : 400;
}

const DEFAULT_READ_TIMEOUT_MS = 60_000;
const DEFAULT_KEEP_ALIVE_TIMEOUT_MS = 65_000;
/** OpenAI's GET /v1/models/{model}: the one route whose path holds a value */
const MODEL_PREFIX = "/v1/models/";
/** the ids /detokenize decodes between turns of the event loop (a few milliseconds' work) */
const DETOKENIZE_SLICE = 16_384;
const MODEL_ROUTE = `${MODEL_PREFIX}{model}`;
/** an absolute-form request target's scheme and authority (`GET http://host:8080/health`), which RFC 9112 (3.2.2) says a server must accept */
const ABSOLUTE_FORM = /^[a-z][a-z0-9+.-]*:\/\/[^/?#]*/i;

/** resolves true once the answer has its connection to itself (those before it are answered), false once it is closed first */
function ownTurn(res: ServerResponse): Promise<boolean> {
  return new Promise((resolve) => {
    const settle = (mine: boolean) => () => {
      res.off("socket", onSocket);
      res.off("close", onClose);
      resolve(mine);
    };
    const onSocket = settle(true);
    const onClose = settle(false);
    res.once("socket", onSocket);
    res.once("close", onClose);
  });
}

/** the request target's path, without its query, also for an absolute-form target */
function pathOf(req: IncomingMessage): string {
  const target = req.url ?? "/";
  const origin = ABSOLUTE_FORM.exec(target);
  const path = (origin ? target.slice(origin[0].length) : target).split("?")[0]!;
  // (after an authority comes "/", "?" or the end)
  return origin && path === "" ? "/" : path;
}
/** the request target's query */
function queryOf(req: IncomingMessage): URLSearchParams {
  try {
    return new URL(req.url ?? "/", "http://localhost").searchParams;
  } catch {
    return new URLSearchParams();
  }
}

/** the health probe's routes, open without the API key as llama-server's are */
const HEALTH_PATHS = ["/health", "/v1/health"] as const;
/** GET routes a request log leaves out: health probes, metric scrapes, model lists, /props and the page are sent over and over (llama-server leaves out /props too) */
const UNLOGGED: ReadonlySet<string> = new Set([...HEALTH_PATHS, "/metrics", "/v1/models", "/models", "/props", MODEL_ROUTE, ...PAGE_PATHS]);
/** a client's X-Request-Id that is echoed back (visible ASCII, as OpenAI's and proxies' ids are); any other gets one of the server's */
const REQUEST_ID = /^[\x21-\x7e]{1,200}$/;
const strictUtf8 = new TextDecoder("utf-8", { fatal: true });

/** an X-Request-Id of the server's own, for a request that brought none */
function serverRequestId(): string {
  return `req_${randomUUID().replaceAll("-", "")}`;
}

/**
 * A shutdown's answer to a generation that had not started: a 503 with Retry-After, which the
 * openai client and proxies retry, on a new connection (another replica, behind a load balancer).
 */
function refusedQueued(): ApiError {
  return new ApiError(503, "the server is shutting down and the request had not started; retry it", "server_error", null, "shutting_down", { "Retry-After": "1", Connection: "close" });
}

type Handler = (req: IncomingMessage, res: ServerResponse) => Promise<void> | void;

/**
 * Whether a request was sent by a browser page of an origin `cors` does not allow (none where it
 * is unset, any where it is "*"). A page on any site may POST to a server on the user's machine
 * with a text/plain body (a "simple" request: no preflight asks first) and, though it cannot read
 * the answer, have it run: a generation, a slot erased, or saved over. Modern browsers say where
 * a request came from in Sec-Fetch-Site ("same-site" is another port of the same host, still
 * another origin); older ones only in Origin, compared with the Host the request was sent to.
 * Clients that are not browsers (curl, the openai SDKs) send neither and are not refused.
 * Ollama refuses other origins' requests the same way (a 403 from gin's cors middleware unless
 * OLLAMA_ORIGINS names them); llama-server's --cors-origins limits them to localhost where its
 * tools can reach files.
 */
export function fromForeignPage(req: IncomingMessage, cors: string | undefined): boolean {
  if (cors === "*") return false;
  const origin = req.headers.origin;
  if (cors !== undefined && origin === cors) return false;
  const site = req.headers["sec-fetch-site"];
  if (site !== undefined) return site === "cross-site" || site === "same-site";
  if (origin === undefined) return false;
  try {
    return new URL(origin).host !== (req.headers.host ?? "").toLowerCase();
  } catch {
    // ("null": a sandboxed frame, a file:// page)
    return true;
  }
}

/**
 * tsllm's OpenAI-compatible HTTP server: a route table on node:http over one Model (whose engine
 * batches every request). It keeps no state between requests, so replicas scale out behind any
 * load balancer.
 */
export class OpenAIServer {
  private model: Model | undefined;
  /** set instead of `model` when the server serves an embedding model (POST /v1/embeddings) */
  private embedder: EmbeddingModel | undefined;
  /** the generative model's embeddings (made at the first request for them; freed with the model) */
  private decoderEmbeddings: DecoderEmbeddingModel | undefined;
  private loadError: Error | undefined;
  private readonly http: Server;
  private readonly metrics = new Metrics();
  /** the generations in flight, each with whether it still waits for room in the engine */
  private readonly inFlight = new Map<AbortController, () => boolean>();
  /** the embedding requests being computed: a shutdown returns only once they have left (their pass in progress cannot be cut, and the caller disposes the model next) */
  private readonly embeddingRequests = new Set<Promise<void>>();
  /** requests being handled, from their headers on (a body still arriving, a prompt being tokenized, a generation): a shutdown lets them finish */
  private handling = 0;
  /** the responses of the requests being handled: a shutdown makes those not yet begun close their connections */
  private readonly responses = new Set<ServerResponse>();
  private readonly routes = new Map<string, Map<string, Handler>>();
  /** connections node:http gave up on (a request too slow to arrive, malformed HTTP): the status they were answered */
  private readonly clientErrors = new WeakMap<Duplex, number>();
  /** answers of requests pipelined behind another on a connection, not yet given its socket (closesWithSocket) */
  private readonly waitingForSocket = new WeakMap<Duplex, Set<ServerResponse>>();
  private readonly writeTimeoutMs: number;
  private readonly readTimeoutMs: number;
  private readonly settings: SettingNames;
  /** whether a request's Host is one this server answers (undefined: every one is), set once it listens */
  private hostAllowed: ((host: string) => boolean) | undefined;
  private readonly bodies: BodyBudget;
  /** the models' `created` (Unix seconds): when the server started, the same in every answer */
  private readonly created = Math.floor(Date.now() / 1000);
  private context: ServeContext | undefined;
  /** the loaded draft model (ServeOptions.draftModel) */
  private draft: Model | undefined;
  private draining = false;
  private idle: (() => void) | undefined;

  constructor(model: Model | EmbeddingModel | Promise<Model | EmbeddingModel>, private readonly options: ServeOptions = {}) {
    if (options.maxQueue !== undefined && !(Number.isInteger(options.maxQueue) && options.maxQueue >= 0)) throw new RangeError(`maxQueue must be an integer >= 0, got ${options.maxQueue}`);
    if (options.writeTimeoutMs !== undefined && !(Number.isFinite(options.writeTimeoutMs) && options.writeTimeoutMs > 0)) throw new RangeError(`writeTimeoutMs must be a number > 0, got ${options.writeTimeoutMs}`);
    if (options.ssePingMs !== undefined && !(Number.isFinite(options.ssePingMs) && options.ssePingMs >= 0 && options.ssePingMs < 2 ** 31)) throw new RangeError(`ssePingMs must be a number in [0, 2^31), got ${options.ssePingMs}`);
    if (options.readTimeoutMs !== undefined && !(Number.isInteger(options.readTimeoutMs) && options.readTimeoutMs > 0)) throw new RangeError(`readTimeoutMs must be an integer > 0, got ${options.readTimeoutMs}`);
    if (options.bodyLimit !== undefined && !(Number.isInteger(options.bodyLimit) && options.bodyLimit >= 1 && options.bodyLimit <= MAX_BODY_LIMIT)) throw new RangeError(`bodyLimit must be an integer in [1, ${MAX_BODY_LIMIT}], got ${options.bodyLimit}`);
    if (options.bodiesLimit !== undefined && !(Number.isInteger(options.bodiesLimit) && options.bodiesLimit >= this.bodyLimit)) throw new RangeError(`bodiesLimit must be an integer >= bodyLimit, got ${options.bodiesLimit}`);
    if (options.keepAliveTimeoutMs !== undefined && !(Number.isInteger(options.keepAliveTimeoutMs) && options.keepAliveTimeoutMs > 0)) throw new RangeError(`keepAliveTimeoutMs must be an integer > 0, got ${options.keepAliveTimeoutMs}`);
    if (options.chatTemplateName !== undefined && (typeof options.chatTemplateName !== "string" || options.chatTemplateName === "")) throw new RangeError(`chatTemplateName must be the name of one of the model's chat templates, got ${JSON.stringify(options.chatTemplateName)}`);
    if (options.chatTemplateName !== undefined && options.chatTemplate !== undefined) throw new RangeError("chatTemplateName names one of the model's own templates and chatTemplate replaces them: give one of the two");
    const kwargsProblem = options.chatTemplateKwargs === undefined ? undefined : templateKwargsProblem(options.chatTemplateKwargs, "chatTemplateKwargs");
    if (kwargsProblem) throw new RangeError(kwargsProblem.message);
    this.writeTimeoutMs = options.writeTimeoutMs ?? DEFAULT_WRITE_TIMEOUT_MS;
    this.readTimeoutMs = options.readTimeoutMs ?? DEFAULT_READ_TIMEOUT_MS;
    this.settings = { ...LIBRARY_SETTING_NAMES, ...options.settingNames };
    const hostsProblem = options.allowedHosts && allowedHostsProblem(options.allowedHosts, "allowedHosts");
    if (hostsProblem) throw new RangeError(hostsProblem);
    this.bodies = new BodyBudget(options.bodiesLimit ?? Math.max(64 * 2 ** 20, 4 * this.bodyLimit), this.settings.bodiesLimit);
    if (options.draftTokens !== undefined && !(Number.isInteger(options.draftTokens) && options.draftTokens >= 1)) throw new RangeError(`draftTokens must be an integer >= 1, got ${options.draftTokens}`);
    if (options.slotSavePath !== undefined) checkSlotFolder(options.slotSavePath, "slotSavePath");
    Promise.all([model, options.draftModel]).then(([m, draft]) => {
      if (draft !== undefined) {
        if ("embed" in m) throw new RangeError(`draftModel: ${m.path} is an embedding model, which generates nothing to draft for`);
        // (its size and its tokens' texts: a draft whose ids mean other tokens would waste every proposal)
        const mismatch = m.draftMismatch(draft);
        if (mismatch !== undefined) throw new RangeError(`draftModel ${draft.path}: ${mismatch}: a draft model must share the model's vocabulary`);
        this.draft = draft;
      }
      if ("embed" in m) this.embedder = m;
      else this.model = m;
    }).catch((e: unknown) => { this.loadError = e instanceof Error ? e : new Error(String(e)); });
    // node:http answers 408 to a request whose headers and body have not arrived within the
    // timeout (a client trickling bytes would otherwise hold its connection for node's 300 s),
    // checked as often as the timeout is short. The read timeout runs from a request's first byte:
    // a kept-alive connection idle between requests is closed by keepAliveTimeout alone, however
    // the two compare (a connection that never sends a first request is closed by the read timeout).
    // requireHostHeader: an HTTP/1.1 request without Host is refused by dispatch, in OpenAI's error
    // shape and counted in /metrics, where node would answer a bare 400 the handlers never see
    this.http = createHttpServer({
      requestTimeout: this.readTimeoutMs, headersTimeout: this.readTimeoutMs, connectionsCheckingInterval: Math.min(1000, this.readTimeoutMs),
      keepAliveTimeout: options.keepAliveTimeoutMs ?? DEFAULT_KEEP_ALIVE_TIMEOUT_MS, requireHostHeader: false,
    }, (req, res) => void this.dispatch(req, res));
    this.http.on("clientError", (e: NodeJS.ErrnoException, socket: Duplex) => this.clientError(e, socket));
    // a client sending `Expect: 100-continue` waits for "100 Continue" before it sends the body:
    // node would send it at once; it is sent only once the headers have not refused the request
    this.http.on("checkContinue", (req: IncomingMessage, res: ServerResponse) => void this.dispatch(req, res, true));
    const post = (path: string, h: Handler) => this.route("POST", path, h);
    const get = (path: string, h: Handler) => this.route("GET", path, h);
    // (and without /v1, as llama-server also serves them: a client whose base URL leaves out /v1 still reaches them)
    for (const path of ["/v1/chat/completions", "/chat/completions"]) post(path, async (req, res) => handleCompletion(this.ready(), "chat", await this.json(req), res));
    post("/v1/completions", async (req, res) => handleCompletion(this.ready(), "text", await this.json(req), res));
    // llama-server's own completion routes, answered in its own shape ({content, stop, tokens_predicted, ...}), and its template route
    for (const path of ["/completion", "/completions"]) post(path, async (req, res) => handleCompletion(this.ready(), "text", await this.json(req), res, "llama"));
    post("/apply-template", async (req, res) => applyTemplate(this.ready(), await this.json(req), res));
    // llama-server's fill-in-the-middle route (llama.vim, llama.vscode): the FIM prompt assembled, then completed as /completion
    post("/infill", async (req, res) => handleInfill(this.ready(), await this.json(req), res));
    post("/v1/embeddings", async (req, res) => this.embeddings(await this.json(req), res, "openai"));
    // llama-server's own routes ({content} -> [{index, embedding: [vector]}]), and its reranking ones answered, not "no route"
    for (const path of ["/embedding", "/embeddings"]) post(path, async (req, res) => this.embeddings(await this.json(req), res, "llama"));
    for (const path of ["/rerank", "/reranking", "/v1/rerank", "/v1/reranking"]) post(path, () => this.rerank());
    for (const path of ["/v1/models", "/models"]) get(path, (_req, res) => this.listModels(res));
    get(MODEL_ROUTE, (req, res) => this.retrieveModel(req, res));
    // (llama-server serves /v1/health too: a client whose base URL ends in /v1 probes its own /health)
    for (const path of HEALTH_PATHS) get(path, (_req, res) => this.health(res));
    get("/props", (_req, res) => this.props(res));
    // llama-server's POST /props changes nothing even where its --props allows it, and without that flag is this 501
    post("/props", () => {
      throw new ApiError(501, "POST /props is not supported: this server's properties cannot be changed while it runs (GET /props reads them); restart tsllm serve with other options to change them", "not_supported_error", null, "not_supported");
    });
    get("/metrics", (_req, res) => this.renderMetrics(res));
    get("/slots", (req, res) => this.slots(req, res));
    post(SLOT_ROUTE, async (req, res) => this.slotAction(req, res));
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
        this.hostAllowed = hostGuard(this.options.host ?? "127.0.0.1", (this.http.address() as AddressInfo).address, this.options.allowedHosts);
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
    // an answer that keeps its connection alive during the drain invites the client's next
    // request onto a connection about to close: it would fail with a reset, not a 503 to retry
    for (const res of this.responses) res.shouldKeepAlive = false;
    const closed = new Promise<void>((resolve) => this.http.close(() => resolve()));
    this.http.closeIdleConnections();
    // generations still waiting for room are refused now: they would only wait out the grace
    // period and be cut off, while their clients could retry them on another replica at once
    for (const [c, queued] of this.inFlight) if (queued()) c.abort(refusedQueued());
    if (this.handling > 0) {
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        new Promise<void>((resolve) => (this.idle = resolve)),
        new Promise<void>((resolve) => (timer = setTimeout(resolve, graceMs))),
      ]);
      clearTimeout(timer);
      // the reason is what the handlers answer: the client sees its request did not finish
      const cancelled = new ApiError(503, "the server shut down before the request finished; retry it", "server_error", null, "shutting_down", { Connection: "close" });
      for (const c of this.inFlight.keys()) c.abort(cancelled);
      // aborted requests leave at the engine's next step and end their responses
      await this.inFlightLeft(5_000);
      // a pass under way (a long prompt chunk) cannot be cut: its requests leave once it ends, and
      // answer before their connections are closed
      if (this.model && this.inFlight.size > 0) {
        await exclusive(this.model.languageModel, async () => {});
        await this.inFlightLeft(5_000);
      }
    }
    // the caller disposes the model next: the passes queued on it so far end first (each ends,
    // and none is started for a request gone)
    if (this.model) await exclusive(this.model.languageModel, async () => {});
    this.http.closeAllConnections();
    // (an embedding pass can outlast the wait above; the model must outlive it)
    await Promise.allSettled(this.embeddingRequests);
    await closed;
  }

  /** resolves once every request in flight has left, or after `ms` */
  private async inFlightLeft(ms: number): Promise<void> {
    const deadline = Date.now() + ms;
    while (this.inFlight.size > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
  }

  private route(method: string, path: string, handler: Handler): void {
    let byMethod = this.routes.get(path);
    if (!byMethod) this.routes.set(path, (byMethod = new Map()));
    byMethod.set(method, handler);
  }

  /**
   * What node:http would answer a connection it gives up on (408 for a request too slow to
   * arrive, 431 for headers too large, 400 for malformed HTTP), in OpenAI's error shape; a
   * connection already answered, or gone, is only closed.
   */
  private clientError(e: NodeJS.ErrnoException, socket: Duplex): void {
    const status = clientErrorStatus(e);
    this.clientErrors.set(socket, status);
    // a client gone has nothing to be answered
    if (status === CLIENT_CLOSED_REQUEST) {
      socket.destroy();
      return;
    }
    if (socket.writable && (socket as Socket).bytesWritten === 0) {
      const err = status === 408
        ? new ApiError(408, `the request did not arrive in full within the ${this.readTimeoutMs} ms this server waits for a request's headers and body (${this.settings.readTimeoutMs})`, "invalid_request_error", null, "request_timeout")
        : status === 431 ? new ApiError(431, `the request's headers are larger than the ${maxHeaderSize} bytes this server reads`, "invalid_request_error", null, "headers_too_large")
        : new ApiError(status, `the request is not valid HTTP: ${e.message}`, "invalid_request_error", null, "invalid_http_request");
      const body = JSON.stringify(err.body), id = serverRequestId();
      socket.write(`HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nX-Request-Id: ${id}\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`);
      // a request node gave up on before any handler saw it (a request of a handler is logged when its answer closes)
      if (this.options.logRequests && ![...this.responses].some((r) => r.req.socket === socket)) {
        this.options.log?.(`(no request read) ${status} from ${(socket as Socket).remoteAddress ?? "?"} (X-Request-Id ${id}): ${err.message}`);
      }
    }
    socket.destroy();
  }

  /** the methods a path takes: HEAD wherever GET is, OPTIONS for preflights when CORS is on */
  private allowed(byMethod: ReadonlyMap<string, Handler>): string {
    const methods = [...byMethod.keys()];
    if (byMethod.has("GET")) methods.push("HEAD");
    if (this.options.cors) methods.push("OPTIONS");
    return methods.join(", ");
  }

  /** `expectsContinue`: the client waits for "100 Continue" before it sends the body (sent once the headers pass) */
  private async dispatch(req: IncomingMessage, res: ServerResponse, expectsContinue = false): Promise<void> {
    this.handling++;
    this.responses.add(res);
    if (this.draining) res.shouldKeepAlive = false;
    // an answer whose headers promised keep-alive before the drain began (a stream) closes its
    // connection once it ends during the drain, as those begun after say Connection: close (node
    // detaches the socket from the response when it finishes: it is taken now)
    const socket = req.socket;
    res.once("finish", () => {
      if (this.draining) socket.end();
    });
    this.closesWithSocket(socket, res);
    try {
      await this.handle(req, res, expectsContinue);
    } finally {
      this.bodies.release(req);
      this.responses.delete(res);
      if (--this.handling === 0) this.idle?.();
    }
  }

  /**
   * A request pipelined behind another on its connection has an answer waiting for the one before
   * to finish, with no socket yet: node emits no "close" on it when the client leaves, so its
   * handler (a generation, queued or running) would go on for nobody, all of a pipelining
   * client's queue of them. Such answers are closed, once, with their connection.
   */
  private closesWithSocket(socket: Duplex, res: ServerResponse): void {
    if (res.socket) return; // node emits this answer's "close" itself
    let waiting = this.waitingForSocket.get(socket);
    if (!waiting) {
      const answers = new Set<ServerResponse>();
      waiting = answers;
      this.waitingForSocket.set(socket, answers);
      socket.once("close", () => {
        for (const r of answers) {
          r.destroy();
          r.emit("close");
        }
        answers.clear();
      });
    }
    waiting.add(res);
    // its turn came: the socket is its own, and node reports its close
    res.once("socket", () => waiting.delete(res));
  }

  private async handle(req: IncomingMessage, res: ServerResponse, expectsContinue: boolean): Promise<void> {
    const url = pathOf(req);
    // a model's own path goes to its route, and is counted under the route's name
    const path = url.startsWith(MODEL_PREFIX) && url.length > MODEL_PREFIX.length ? MODEL_ROUTE : url.startsWith(SLOT_PREFIX) && url.length > SLOT_PREFIX.length ? SLOT_ROUTE : url;
    const byMethod = this.routes.get(path);
    const socket = req.socket;
    // a client that left before the answer was complete (nothing sent yet, or a stream cut short)
    // counts as nginx's 499 "client closed request"; one cut off by the read timeout as its 408
    // (read now: a socket the client has reset no longer knows its peer when the answer closes)
    const began = performance.now(), address = socket.remoteAddress ?? "?";
    res.on("close", () => {
      const status = this.clientErrors.get(socket) ?? (res.writableFinished ? res.statusCode : CLIENT_CLOSED_REQUEST);
      this.metrics.count(byMethod ? path : "other", status);
      if (this.options.logRequests && !((req.method === "GET" || req.method === "HEAD") && UNLOGGED.has(path))) {
        // (the path as the client sent it: a control character in it cannot reach the operator's terminal)
        this.options.log?.(`${req.method} ${printable(url)} ${status} ${Math.round(performance.now() - began)} ms from ${address} (X-Request-Id ${String(res.getHeader("X-Request-Id"))})`);
      }
    });
    // the client's request id comes back with its answer (log correlation through proxies; the
    // openai client reports it as _request_id), or the server's own when it sent none
    const id = req.headers["x-request-id"];
    res.setHeader("X-Request-Id", typeof id === "string" && REQUEST_ID.test(id) ? id : serverRequestId());
    if (this.options.cors) {
      res.setHeader("Access-Control-Allow-Origin", this.options.cors);
      res.setHeader("Access-Control-Expose-Headers", "X-Request-Id");
      res.setHeader("Vary", "Origin");
    }
    try {
      // RFC 9112 (3.2): a server must answer 400 to an HTTP/1.1 request without Host; its
      // connection is closed, as node closes it
      if (req.httpVersion === "1.1" && req.headers.host === undefined) {
        res.setHeader("Connection", "close");
        throw new ApiError(400, "the request has no Host header, which HTTP/1.1 requires (RFC 9112, section 3.2)", "invalid_request_error", null, "invalid_http_request");
      }
      // (an HTTP/1.0 request without Host is no browser's)
      const host = req.headers.host;
      if (host !== undefined && this.hostAllowed && !this.hostAllowed(host)) {
        const name = printable(host).replace(/:\d+$/, "");
        throw new ApiError(403, `the Host header ${JSON.stringify(printable(host))} is not a name of this server, which listens on ${this.url} (a page whose domain was re-pointed at this machine sends such a name: DNS rebinding); start it with ${this.settings.allowedHosts} ${name} to answer requests sent to that name`, "invalid_request_error", null, "host_not_allowed");
      }
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
      if (!byMethod) throw new ApiError(404, `no route for ${req.method} ${url}`, "invalid_request_error", null, "not_found");
      // HEAD is GET without the body (node:http drops it)
      const handler = byMethod.get(req.method === "HEAD" ? "GET" : req.method ?? "");
      if (!handler) throw new ApiError(405, `${req.method} is not allowed on ${url} (allowed: ${this.allowed(byMethod)})`, "invalid_request_error", null, "method_not_allowed", { Allow: this.allowed(byMethod) });
      if (req.method === "POST" && fromForeignPage(req, this.options.cors)) {
        const origin = req.headers.origin;
        throw new ApiError(403, `a browser page of another origin${origin ? ` (${printable(origin)})` : ""} may not call this server: start it with ${this.settings.cors} naming that origin to let its pages call the API`, "invalid_request_error", null, "origin_not_allowed");
      }
      // every route under /v1/, /models, /props (the model's path and template), /slots (the requests running) and every POST (llama-server's /tokenize, /embedding, /rerank, ...); /health, /v1/health, /metrics and the page stay open
      if (this.options.apiKey !== undefined && ((path.startsWith("/v1/") && path !== "/v1/health") || path === "/models" || path === "/props" || path === "/slots" || req.method === "POST") && !authorized(req, this.options.apiKey)) {
        throw new ApiError(401, "missing or invalid API key: send the header 'Authorization: Bearer KEY'", "invalid_request_error", null, "invalid_api_key", { "WWW-Authenticate": "Bearer" });
      }
      // one request of a connection at a time (HTTP/1.1 answers them in order anyway): a request
      // pipelined behind another waits for that one's answer, as llama-server's reads them, so one
      // connection cannot fill the queue every client shares (20000 pipelined took all 256 places)
      if (!res.socket && !(await ownTurn(res))) return;
      if (this.draining && req.method === "POST") {
        res.setHeader("Connection", "close");
        throw new ApiError(503, "the server is shutting down", "server_error", null, "shutting_down", { "Retry-After": "1" });
      }
      if (expectsContinue) {
        checkBodyHeaders(req, this.namedBodyLimit);
        res.writeContinue();
      }
      await handler(req, res);
    } catch (e) {
      // (its connection is gone, or going with node's own answer: nothing to answer or report)
      if (e instanceof BodyCutOff) {
        res.destroy();
        return;
      }
      const err = e instanceof ApiError ? e : internal(e, this.settings);
      // a body refused unread (too large, or never sent: its client still waits for "100 Continue") leaves the connection unusable
      if (err.status === 413 || (expectsContinue && !req.complete)) res.setHeader("Connection", "close");
      this.reportFailure(res, err);
      await sendError(res, err, this.writeTimeoutMs);
    }
  }

  /** a failure inside the server (a 500) goes to the operator's log, with what finds its request: the client sees only its message */
  private reportFailure(res: ServerResponse, e: ApiError): void {
    const log = this.options.log;
    if (e.status !== 500 || !log) return;
    const cause = e.cause instanceof Error && e.cause.stack ? e.cause.stack : e.message;
    log(`${res.req.method} ${printable(pathOf(res.req))} (X-Request-Id ${String(res.getHeader("X-Request-Id"))}) failed with a 500: ${cause}`);
  }

  private async json(req: IncomingMessage): Promise<Body> {
    return parseJsonObject(await readBody(req, this.namedBodyLimit, this.bodies));
  }

  /** tokens the draft model proposes a round at most (draftTokens, else the engine's default): what its KV pool is planned for */
  private get draftTokens(): number {
    return this.options.draftTokens ?? defaultDraftTokens(true);
  }

  private get bodyLimit(): number {
    return this.options.bodyLimit ?? DEFAULT_BODY_LIMIT;
  }

  /** the body limit with what its 413 calls it */
  private get namedBodyLimit(): BodyLimit {
    return { bytes: this.bodyLimit, setting: this.settings.bodyLimit };
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
    const formatters = new Map<boolean, ChatFormatter>();
    this.context = {
      model, modelId: id, modelNames: new Set([id, model.path, basename(model.path)]), metrics: this.metrics, texts: new TokenTexts(model.tokenizer), settings: this.settings,
      ...(this.draft ? { draft: { model: this.draft, tokens: this.draftTokens } } : {}),
      templateKwargs: { ...this.options.chatTemplateKwargs },
      formatter: (tools = false) => {
        try {
          const f = formatters.get(tools) ?? model.chatFormatter(this.options.chatTemplate, { name: this.options.chatTemplateName, tools });
          formatters.set(tools, f);
          return f;
        } catch (e) {
          if (e instanceof ChatTemplateError) throw invalid("messages", `${e instanceof NoChatTemplateError ? e.reason : e.message}: ${templateRemedy(e, this.settings)}`, "no_chat_template");
          throw e;
        }
      },
      admissible: (prompts, n, param) => {
        const max = this.options.maxQueue ?? 256, parallel = model.engine.maxSequences;
        // an idle server runs floor(parallel / n) prompts at once and lets max more wait
        if (n > parallel) throw invalid("n", `n = ${n} completions exceed the ${parallel} sequences this server runs at once (${this.settings.maxSequences})`);
        const most = Math.floor(parallel / n) + max;
        if (prompts > most) {
          throw invalid(param, `'${param}' holds ${prompts} prompts of ${n} choice${n === 1 ? "" : "s"} each, but this server runs ${parallel} sequences at once and lets ${max} requests wait: ` +
            `it can take at most ${most} such prompts in one request; send fewer`, "too_many_prompts");
        }
      },
      admit: (widths) => {
        // a request arriving during a shutdown (its body was still coming) runs if it can start now; else it would wait for nothing
        if (this.draining && model.engine.waitingForRoom(widths) > 0) throw refusedQueued();
        const max = this.options.maxQueue ?? 256;
        if (model.engine.waitingForRoom(widths) > max) {
          const waiting = model.engine.waitingForRoom();
          // (with no queue, "0 requests are waiting" would say nothing of why this one was refused)
          const parallel = model.engine.maxSequences;
          const why = max === 0 ? `this request cannot start now (the server runs ${parallel} sequence${parallel === 1 ? "" : "s"} at once) and no request may wait for a free one` : `${waiting === 1 ? "1 request is" : `${waiting} requests are`} waiting for a free sequence`;
          throw new ApiError(429, `the server is busy: ${why} (at most ${max} may wait: ${this.settings.maxQueue}); retry later`, "rate_limit_error", null, "queue_full", { "Retry-After": "1" });
        }
      },
      bodyRead: (res) => this.bodies.release(res.req),
      track: (controller, queued) => {
        this.inFlight.set(controller, queued);
        return () => this.inFlight.delete(controller);
      },
      sse: (res) => new SseWriter(res, {}, this.writeTimeoutMs, this.options.ssePingMs ?? DEFAULT_SSE_PING_MS),
      send: (res, value) => this.reply(res, 200, value),
      failed: (res, e) => {
        this.metrics.streamFailed(e.status);
        this.reportFailure(res, e);
      },
    };
    return this.context;
  }

  /** a JSON answer, cut off if its client takes none of it for the write timeout */
  private reply(res: ServerResponse, status: number, value: unknown, headers: Readonly<Record<string, string>> = {}): Promise<void> {
    return sendJson(res, status, value, headers, this.writeTimeoutMs);
  }

  private embedderId(m: EmbeddingModel): string {
    return this.options.modelName ?? basename(m.path);
  }

  private rerank(): never {
    const serves = this.embedder ? "the embedding model at POST /v1/embeddings" : "a generative model at POST /v1/chat/completions and /v1/completions";
    throw new ApiError(501, `reranking is not supported: it needs a cross-encoder (reranker) model, which tsllm serve does not load; this server serves ${serves}`, "not_supported_error", null, "not_supported");
  }

  private async embeddings(body: Body, res: ServerResponse, api: EmbeddingsApi): Promise<void> {
    // tracked as a generation is: on a generative model, until its first vectors it is queued (its
    // passes wait behind the engine's and each other's), so a shutdown refuses it at once; an
    // encoder's computes at once. Once begun, it is stopped past the grace period before its next pass
    const controller = new AbortController();
    let begun = false;
    this.inFlight.set(controller, () => !begun && !this.embedder);
    const running = this.computeEmbeddings(body, res, { api, autoTruncate: this.options.autoTruncate ?? false, writeTimeoutMs: this.writeTimeoutMs, signal: controller.signal, began: () => (begun = true) });
    this.embeddingRequests.add(running);
    try {
      await running;
    } finally {
      this.embeddingRequests.delete(running);
      this.inFlight.delete(controller);
    }
  }

  private async computeEmbeddings(body: Body, res: ServerResponse, route: EmbeddingsRoute): Promise<void> {
    const m = this.embedder;
    if (!m) {
      // a generative model serves embeddings as llama-server --embeddings does (llama.cpp's embedding mode: embeddingsOf); no flag, as it costs nothing until asked
      const { model, modelNames } = this.ready(); // 503 while loading, 500 if loading failed
      if (!this.decoderEmbeddings) {
        try {
          this.decoderEmbeddings = embeddingsOf(model);
        } catch (e) {
          throw new ApiError(501, (e as Error).message, "not_supported_error", null, "not_supported");
        }
      }
      await handleEmbeddings(this.decoderEmbeddings, this.modelId(model), modelNames, body, res, route);
      return;
    }
    const id = this.embedderId(m);
    await handleEmbeddings(m, id, new Set([id, m.path, basename(m.path)]), body, res, route);
  }

  private modelId(model: Model): string {
    return this.options.modelName ?? basename(model.path).replace(/\.gguf$/i, "");
  }

  /** the served model in OpenAI's model object (with llama.cpp's meta), and the names a request may call it by */
  private modelEntry(): { entry: Record<string, unknown>; names: ReadonlySet<string> } {
    const e = this.embedder;
    if (e) {
      const i = e.info, id = this.embedderId(e);
      return {
        entry: { id, object: "model", created: this.created, owned_by: "tsllm", meta: { architecture: i.hfArchitecture, n_params: i.parameterCount, n_vocab: i.vocabSize, n_ctx_train: e.maxTokens, n_embd: e.dimensions, n_layer: i.blockCount } },
        names: new Set([id, e.path, basename(e.path)]),
      };
    }
    const { model, modelNames } = this.ready();
    const i = model.info;
    return {
      entry: {
        id: this.modelId(model), object: "model", created: this.created, owned_by: "tsllm",
        meta: {
          architecture: i.architecture, n_params: i.parameterCount, n_vocab: i.vocabSize, n_ctx_train: i.contextLength, n_ctx: model.contextSize, n_embd: i.embeddingLength,
          n_layer: i.blockCount, parallel: model.engine.maxSequences, kv_capacity_tokens: model.engine.stats.kvCapacityTokens,
        },
      },
      names: modelNames,
    };
  }

  private listModels(res: ServerResponse): Promise<void> {
    return this.reply(res, 200, { object: "list", data: [this.modelEntry().entry] });
  }

  /** GET /v1/models/{model}: OpenAI's models.retrieve, by any name a request may give the model */
  private retrieveModel(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const raw = pathOf(req).slice(MODEL_PREFIX.length);
    let name: string;
    try {
      name = decodeURIComponent(raw);
    } catch {
      name = raw;
    }
    const { entry, names } = this.modelEntry();
    if (!names.has(name)) throw new ApiError(404, `the model '${name}' does not exist: this server serves '${entry["id"] as string}'`, "invalid_request_error", "model", "model_not_found");
    return this.reply(res, 200, entry);
  }

  /**
   * llama-server's GET /props, which its web UI and clients read for the served model: the context
   * a request has (default_generation_settings.n_ctx), the sequences run at once (total_slots), the
   * chat template ("" where the model has none), no image or audio input, and the sampling
   * defaults the model sets, by llama-server's names (was a 404: a client reading n_ctx there had none)
   */
  private props(res: ServerResponse): Promise<void> {
    const { model, modelId, formatter } = this.ready();
    let template = "";
    try {
      template = formatter().template.source;
    } catch {
      // (no chat template: llama-server's props hold "" then)
    }
    const d = model.generationDefaults;
    const params = { n_predict: d.maxTokens ?? -1, temperature: d.temperature, top_k: d.topK, top_p: d.topP, min_p: d.minP, typical_p: d.typicalP, repeat_penalty: d.repeatPenalty, repeat_last_n: d.repeatLastN,
      // (the chain by llama.cpp's names, as llama-server lists its samplers: what a client sends back as `samplers` is the same chain)
      samplers: llamaCppSamplerNames(d.samplerOrder) };
    return this.reply(res, 200, {
      default_generation_settings: { n_ctx: model.contextSize, params: defined(params) },
      total_slots: model.engine.maxSequences, model_alias: modelId, model_path: model.path,
      modalities: { vision: false, audio: false }, chat_template: template,
    });
  }

  /** llama-server's GET /slots (slots.ts) */
  private slots(req: IncomingMessage, res: ServerResponse): Promise<void> {
    if (this.options.slots === false) throw slotsOff(this.settings.slots);
    const { model } = this.ready();
    return this.reply(res, 200, listSlots(model, this.draft !== undefined, queryOf(req)));
  }

  /** llama-server's POST /slots/{id_slot}?action=erase|save|restore (slots.ts); the body (save and restore's filename) is parsed only for those two */
  private async slotAction(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const { model } = this.ready();
    const raw = await readBody(req, this.namedBodyLimit, this.bodies);
    const files = { setting: this.settings.slotSavePath, ...(this.options.slotSavePath !== undefined ? { folder: this.options.slotSavePath } : {}) };
    await this.reply(res, 200, await slotAction(model, pathOf(req).slice(SLOT_PREFIX.length), queryOf(req), () => parseJsonObject(raw), files));
  }

  private health(res: ServerResponse): Promise<void> {
    if (this.loadError) return this.reply(res, 500, { status: "error", error: this.loadError.message });
    // Retry-After as the API routes' loading 503 (llama-server's /health answers 503 while loading too, without it)
    if (!this.model && !this.embedder) return this.reply(res, 503, { status: "loading" }, { "Retry-After": "1" });
    if (this.draining) return this.reply(res, 503, { status: "draining" }, { Connection: "close" });
    // a backend that runs nothing any more (a kernel worker died, the GPU device lost) fails every request: not ready, as a failed load
    const failure = this.model ? this.model.backend.failure ?? this.draft?.backend.failure : this.embedder?.failure;
    if (failure) return this.reply(res, 500, { status: "error", error: failure });
    if (!this.model) return this.reply(res, 200, { status: "ok" });
    const s = this.model.engine.stats;
    return this.reply(res, 200, { status: "ok", requests_running: s.running, requests_waiting: s.waiting });
  }

  private renderMetrics(res: ServerResponse): Promise<void> {
    const stats = this.model?.engine.stats ?? { waiting: 0, running: 0, steps: 0, rowsComputed: 0, peakStepSequences: 0, cachedPromptTokens: 0, prefilledPromptTokens: 0, promptStepTokens: 0, promptStepMs: 0, preemptions: 0, draftPasses: 0, draftRowsComputed: 0, draftTokensProposed: 0, draftTokensAccepted: 0, draftRounds: 0, kv: undefined, kvCapacityTokens: 0, draftKvBytes: 0, draftKvUsedBytes: 0, draftKvPeakBytes: 0, draftFallbacks: 0, draftResumes: 0 };
    return sendText(res, 200, this.metrics.render(stats, { draining: this.draining, bodyBytesHeld: this.bodies.held }), "text/plain; version=0.0.4; charset=utf-8", this.writeTimeoutMs);
  }

  /** llama-server's /tokenize: {content, add_special?, with_pieces?} -> {tokens} */
  private async tokenize(body: Body, res: ServerResponse): Promise<void> {
    const tokenizer = this.embedder?.tokenizer ?? this.ready().model.tokenizer;
    const ids = await promptTokens(tokenizer, this.tokenizeContent(body), { addSpecial: optBoolean(body, "add_special") ?? false, parseSpecial: optBoolean(body, "parse_special") ?? true });
    // a piece is the token's own text (a word's leading space kept), or its bytes where they are part of a character, as llama-server answers
    const piece = (id: number): string | number[] => {
      const bytes = tokenizer.tokenBytes(id);
      try {
        return strictUtf8.decode(bytes);
      } catch {
        return [...bytes];
      }
    };
    // awaited, as every answer is: a shutdown waits for the requests being handled, and an answer
    // still being written when its handler returned was cut off by it (a long /tokenize, mid-JSON)
    await this.reply(res, 200, { tokens: optBoolean(body, "with_pieces") ? ids.map((id) => ({ id, piece: piece(id) })) : ids });
  }

  /**
   * /tokenize's `content`: a text, or as llama-server's (tokenize_mixed) token ids and texts in one
   * list, the ids kept and each text tokenized in its place (refused, a client's mixed prompt could
   * not be counted here as llama-server counts it)
   */
  private tokenizeContent(body: Body): PromptInput {
    const content = body.content;
    if (content === undefined || content === null) throw invalid("content", "'content' (the text to tokenize) is required", "missing_required_parameter");
    if (typeof content === "string") return content;
    if (Array.isArray(content) && content.every((t) => typeof t === "string" || typeof t === "number")) return idsAndTexts(content, "content", this.embedder?.info.vocabSize ?? this.ready().model.info.vocabSize);
    throw invalid("content", `'content' must be a string, or a list of token ids and strings (llama-server's mixed form), got ${kindOf(content)}`, "invalid_type");
  }

  /**
   * llama-server's /detokenize: {tokens} -> {content}, the tokens' pieces joined. Decoded a slice of
   * ids at a time, the event loop turning between slices (a million ids took ~0.5-1.5 s in one
   * piece, /health unanswered)
   */
  private async detokenize(body: Body, res: ServerResponse): Promise<void> {
    const tokenizer = this.embedder?.tokenizer ?? this.ready().model.tokenizer;
    const vocabSize = this.embedder?.info.vocabSize ?? this.ready().model.info.vocabSize;
    const tokens = body.tokens;
    if (!Array.isArray(tokens) || tokens.some((t) => typeof t !== "number" || !Number.isInteger(t) || t < 0 || t >= vocabSize)) {
      throw invalid("tokens", `'tokens' must be an array of token ids in [0, ${vocabSize})`);
    }
    const ids = tokens as number[];
    if (tokenizer instanceof VocabTokenizer) {
      // llama-server answers tokens_to_str: each token's common_token_to_piece joined (a special
      // token's text included), not llama_detokenize, which drops a SentencePiece text's first
      // space as decode() does: the id of " Once" alone is " Once", as /tokenize's with_pieces shows it
      // (llama.cpp's own test strips the answer for it). A GGUF vocabulary's tokenBytes are those
      // pieces; a tokenizer.json model, which llama-server never loads, keeps decode()'s text.
      const utf8 = new TextDecoder("utf-8");
      let content = "";
      for (let i = 0; i < ids.length; i++) {
        if (i > 0 && i % DETOKENIZE_SLICE === 0) {
          await yieldToEventLoop();
          if (res.destroyed) return;
        }
        content += utf8.decode(tokenizer.tokenBytes(ids[i]!), { stream: true });
      }
      await this.reply(res, 200, { content: content + utf8.decode() });
      return;
    }
    // a slice's worth in one piece (a tokenizer.json's stream decoder is 2-4x slower than its decode)
    if (ids.length <= DETOKENIZE_SLICE) {
      await this.reply(res, 200, { content: tokenizer.decode(ids) });
      return;
    }
    // (a stream decoder's pieces, joined, are decode()'s text)
    const decoder = tokenizer.createStreamDecoder();
    let content = "";
    for (let i = 0; i < ids.length; i++) {
      if (i > 0 && i % DETOKENIZE_SLICE === 0) {
        await yieldToEventLoop();
        // (a client gone meanwhile is owed nothing)
        if (res.destroyed) return;
      }
      content += decoder.push(ids[i]!);
    }
    await this.reply(res, 200, { content: content + decoder.flush() });
  }
}

/**
 * Starts an OpenAI-compatible server on a model (or a model still loading: /health says so
 * meanwhile): a generative Model (completions, chat), or an EmbeddingModel (POST /v1/embeddings).
 */
export function startServer(model: Model | EmbeddingModel | Promise<Model | EmbeddingModel>, options: ServeOptions = {}): Promise<OpenAIServer> {
  return new OpenAIServer(model, options).listen();
}

/**
 * What an operator does for a chat request the model has no template for: a model with named
 * templates (none "default", or not the name given) needs only one of them named, which the
 * 400 once left out ("start the server with --chat-template FILE" alone)
 */
function templateRemedy(e: ChatTemplateError, settings: SettingNames): string {
  const names = e instanceof NoChatTemplateError ? e.names : [];
  const named = names.length > 0 ? `, or with ${settings.chatTemplateName} naming one of ${names.map((n) => JSON.stringify(n)).join(", ")}` : "";
  return `start the server with ${settings.chatTemplate}${named}, or use /v1/completions`;
}
