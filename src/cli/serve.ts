import { loadsAsEncoder } from "../formats/index.js";
import { loadModel, type LoadModelOptions, type Model } from "../llm.js";
import { loadEmbeddingModel, type EmbeddingModel } from "../pipelines/index.js";
import { allowedHostsProblem, checkSlotFolder, DEFAULT_BODY_LIMIT, MAX_BODY_LIMIT, startServer, templateKwargsProblem, type SettingNames } from "../server/index.js";
import { loadOptionsFrom, chatTemplateFrom, chatTemplateNameFrom, draftQuantizeFrom, draftTokensOf, loadDraftBeside, loadRefusalInFlagWords, TRAINED_CONTEXT, trainedContextOf } from "./generate.js";
import { MODEL_MEANING, optionalNonEmpty, optionalNumber, optionalString, parse, parseBytes, requireString, UsageError, type OptionSpec, type ParsedValues } from "./args.js";
import { modelNamedBy } from "./input-files.js";
import { downloadInProgress, resolveInterruptibly } from "./interrupt.js";
import { formatBytes } from "../units/index.js";

export const serveHelp = `Usage: tsllm serve --model MODEL [options]

An OpenAI-compatible HTTP server: POST /v1/chat/completions, /v1/completions (streaming or not),
GET /v1/models, /health, /metrics (Prometheus), POST /tokenize, /detokenize, and a chat page at /;
llama-server's own POST /completion (its reply shape), /infill, /apply-template and GET /props too.
With an embedding model (a sentence-transformers folder, or any BERT / RoBERTa / DistilBERT folder):
POST /v1/embeddings (OpenAI's shape, encoding_format float or base64; token ids; dimensions;
truncate) and llama-server's POST /embedding instead of completions.
Concurrent requests are batched by the engine. SIGTERM / SIGINT / SIGHUP drain the requests in flight
(those still queued are answered 503 with Retry-After at once), then exit 0; during loading they exit 0
at once (a hub --model's download stopped as tsllm download's Ctrl-C stops it: its locks let go,
the part fetched kept); a second one exits 1 at once.

Options:
  --model MODEL         .gguf file, Hugging Face model folder, or Hub reference org/name[@rev][:QUANT] (required)
  --host HOST           address to listen on (default 127.0.0.1)
  --port N              port (default 8080; 0 picks a free one)
  --parallel N          sequences decoded together at most (default 16; n choices count n)
  --ctx-size N|auto|0   tokens one sequence may hold (default: the trained context, at most 4096;
                        auto: the largest that fits in free memory; 0: the trained context, and
                        the KV pool sized for it, 128K tokens on some models)
  --kv-memory BYTES     bytes of KV cache shared by all sequences (default: --parallel full contexts, capped)
  --memory-margin SIZE  free memory that auto and the default KV pool leave unused, e.g. 512M, 0
                        (default: TSLLM_MEMORY_MARGIN, else 1G; as llama.cpp's fit target)
  --body-limit BYTES    largest request body, as sent or once unpacked (gzip, deflate, br); a larger one is
                        answered 413 (default 4MiB; at most about 512MiB, the longest text JavaScript holds,
                        which a body is read into; a proxy in front must allow as much: nginx's
                        client_max_body_size is 1m by default)
  --bodies-limit BYTES  bytes of request bodies held, all clients together, each past its first 64KiB: while
                        they arrive, and until a completion's prompts are tokenized (other requests: until
                        answered); a body that would take them past it is answered 503 with Retry-After
                        (default 64MiB, or 4 --body-limit where that is more; at least --body-limit)
  --max-queue N         requests that may wait for a free sequence (those that fit the free --parallel
                        sequences run at once and never count); more get 429 at once (default 256;
                        0: nothing waits, only what can run now is taken)
  --api-key KEY         require "Authorization: Bearer KEY" on /v1/* but /v1/health, and every POST (also read from TSLLM_API_KEY)
  --cors ORIGIN         allow browsers on ORIGIN ("*" for any) to call the API; without it a browser page
                        of another origin is refused 403 (clients that are not browsers never are)
  --allowed-hosts H,... the names, beside localhost and IP addresses, that a request's Host may carry (a
                        reverse proxy's public name; .example.com: it and every name under it; "*": any).
                        A server on loopback refuses other names 403 (a DNS-rebinding page sends its own
                        domain); one on another address checks Host only where this is given
  --alias NAME          the model id in /v1/models (default: the model file's name)
  --chat-template T     Jinja chat template to use instead of the model's own:
                        a file, or the template itself (text holding {{ or {%, as llama.cpp's own option takes it)
  --chat-template-name NAME  which of the model's own templates every chat uses: default, tool_use, rag...
                        (without it a request with tools gets the model's tool_use template where it has one)
  --chat-template-kwargs JSON  extra chat-template variables for every request, e.g. '{"enable_thinking": false}'
                        (a request's chat_template_kwargs override them, as llama-server's)
  --grace-ms N          on SIGTERM, how long requests in flight may finish before they are cancelled (default 30000)
  --write-timeout-ms N  a response whose client takes nothing for this long is cut off; a stream whose
                        client keeps it waiting this long in all, each wait added, is cut off and its
                        generation cancelled (default 60000)
  --sse-ping-interval SECONDS  a stream that has sent nothing for this long (waiting in the queue, in a long
                        prefill) gets an SSE comment line, ": keep-alive", which clients skip, so a proxy's
                        or client's idle read timeout does not cut it (default 15; 0 or -1: never, as llama-server's
                        option of the same name)
  --read-timeout-ms N   a request whose headers and body have not all arrived this long after it began is
                        answered 408 and its connection closed (default 60000; llama-server's timeout
                        option sets its read and write timeouts together, in seconds)
  --keep-alive-timeout-ms N  an idle kept-alive connection is closed this long after its last answer
                        (default 65000: longer than a load balancer keeps idle connections, AWS ALB's
                        and nginx's 60 s, so the balancer closes them first and never reuses one the
                        server is closing; node's and llama-server's 5 s are shorter)
  --threads N           compute threads (default: all cores)
  --backend NAME        wasm (default), reference or webgpu
  --quantize Q          quantize F32/F16/BF16 weights while loading: q8_0, q6_k, q5_k, q4_k, q3_k, q2_k,
                        q5_1, q5_0, q4_1, q4_0, iq4_nl, iq4_xs, or the in-memory nf4 / int8
  --cache-type-k T      KV cache type of keys: f32 (default), f16, q8_0 (3.8x smaller) or q4_0 (7.1x),
                        as llama.cpp's -ctk
  --cache-type-v T      KV cache type of values, as --cache-type-k (llama.cpp's -ctv)
  --flash-attn on|off|auto  llama.cpp's flash-attention order or its matrix-product one, as in generate
  --auto-truncate       embedding inputs past the model's tokens are cut (sentence-transformers' truncation)
                        instead of a 400, unless a request sends "truncate": false (TEI's --auto-truncate)
  --admission preempt|reserve  preempt (default): a request starts once its prompt fits the KV memory; when
                        the memory runs out the newest is paused and recomputed later, its stream going
                        on unchanged (vLLM's way); reserve: a request starts only once prompt + max_tokens
                        fits, so none is ever paused, at the cost of fewer requests at once
  --no-cache-replies    cache only prompts' K/V as prefixes, not replies': every answer bit-identical to the
                        request run alone, each reply recomputed in a chat's next turn (by default a next
                        turn reuses the reply's rows, as llama-server does; its logits may then differ
                        in the last bits)
  --no-log-requests     do not write a line to stderr for each request when it ends (method, path, status,
                        milliseconds, client address, X-Request-Id; /health, /metrics, /v1/models and the
                        page are never written), as llama-server and vLLM log theirs by default
  --no-slots            answer GET /slots (the requests running, their sampling settings) with 501, as
                        llama-server's --no-slots; by default it lists them, as llama-server does
  --slot-prompt-similarity X  a request without id_slot takes the idle slot whose last tokens share the longest
                        prefix with its prompt, where that is more than X of the prompt (0 to 1, default 0.1;
                        0: never), else the least recently used idle slot, as llama-server's -sps (the
                        prefix cache is shared by all slots: this picks the id_slot a reply names)
  --slot-save-path DIR  a folder (it must exist) for POST /slots/{id}?action=save and action=restore, as
                        llama-server's: body {"filename": "..."}, a plain file name in DIR; save writes the
                        slot's cached prompt tokens and their KV rows (tsllm's own format, not llama.cpp's;
                        it names the model, and a file of another model or a damaged one is refused), restore
                        puts them back in the prefix cache, so a request starting with those tokens reuses
                        them. Without it, save and restore answer 501 as llama-server's do
  --draft-model MODEL   speculative decoding with this draft model (a file, folder or Hub reference as --model,
                        with the model's vocabulary; llama-server's -md): every request of one choice without
                        logprobs drafts with it. Greedy replies are the model's own, token for token; sampled
                        ones keep its distribution (the rejection rule). The requests' draft caches share a KV
                        pool of the draft's, planned at start beside --kv-memory (a context and a round; the
                        ready line states it); one that finds no room there decodes without drafting until
                        it does. A request's
                        "speculative.n_max" sets its draft length (at most --draft-tokens; 0: no draft)
  --draft-tokens N      tokens the draft proposes per round (default 8; llama-server's spec-draft-n-max and
                        draft-max spellings of it work too, as -md and model-draft do for --draft-model)
  --draft-quantize Q    quantize the draft model while loading, as --quantize (e.g. a q4_0 copy of --model)
  --no-warmup           skip the throwaway 2-token run at load that compiles every kernel before the first request
  -h, --help            show this help
`;

export const SERVE_ARGS: OptionSpec = {
  model: { type: "string" }, host: { type: "string" }, port: { type: "string" }, parallel: { type: "string" }, "ctx-size": { type: "string" },
  "kv-memory": { type: "string" }, "memory-margin": { type: "string" }, "body-limit": { type: "string" }, "bodies-limit": { type: "string" }, "max-queue": { type: "string" }, "api-key": { type: "string" }, cors: { type: "string" }, "allowed-hosts": { type: "string" }, alias: { type: "string" },
  "chat-template": { type: "string" }, "chat-template-name": { type: "string" }, "chat-template-kwargs": { type: "string" }, "grace-ms": { type: "string" }, "write-timeout-ms": { type: "string" }, "read-timeout-ms": { type: "string" }, "sse-ping-interval": { type: "string" }, "keep-alive-timeout-ms": { type: "string" }, threads: { type: "string" }, backend: { type: "string" }, quantize: { type: "string" },
  "cache-type-k": { type: "string" }, "cache-type-v": { type: "string" }, "flash-attn": { type: "string" }, "no-warmup": { type: "boolean" }, "auto-truncate": { type: "boolean" },
  "no-cache-replies": { type: "boolean" }, "no-log-requests": { type: "boolean" }, "no-slots": { type: "boolean" }, "slot-prompt-similarity": { type: "string" }, "slot-save-path": { type: "string" }, admission: { type: "string" },
  "draft-model": { type: "string" }, "draft-tokens": { type: "string" }, "draft-quantize": { type: "string" },
};

/** the flags that set what the server's refusals name (the library's option names otherwise) */
export const SETTING_FLAGS: SettingNames = {
  kvCacheBytes: "--kv-memory", contextSize: "--ctx-size", maxSequences: "--parallel", maxQueue: "--max-queue", readTimeoutMs: "--read-timeout-ms", chatTemplate: "--chat-template FILE", chatTemplateName: "--chat-template-name NAME",
  cacheTypes: "--cache-type-k / --cache-type-v", slots: "--no-slots", slotSavePath: "--slot-save-path DIR", cors: "--cors ORIGIN", allowedHosts: "--allowed-hosts", bodyLimit: "--body-limit", bodiesLimit: "--bodies-limit",
};

/** --allowed-hosts: comma-separated host names, checked before the model loads */
function allowedHostsFrom(values: ParsedValues): { allowedHosts?: string[] } {
  const list = optionalString(values, "allowed-hosts");
  if (list === undefined) return {};
  const allowedHosts = list.split(",").map((h) => h.trim()).filter((h) => h !== "");
  const problem = allowedHostsProblem(allowedHosts, "--allowed-hosts");
  if (problem) throw new UsageError(problem);
  return { allowedHosts };
}

/** --slot-save-path: an existing folder, checked before the model loads (llama-server's "not a directory") */
function slotSavePathFrom(values: ParsedValues): { slotSavePath?: string } {
  const folder = optionalNonEmpty(values, "slot-save-path", "a folder for the slot files");
  if (folder === undefined) return {};
  try {
    checkSlotFolder(folder, "--slot-save-path");
  } catch (e) {
    throw new UsageError((e as Error).message);
  }
  return { slotSavePath: folder };
}

export async function runServe(argv: string[]): Promise<void> {
  const values = parse(argv, SERVE_ARGS);
  if (values.help === true) { process.stdout.write(serveHelp); return; }
  // a server outlives the reader of its stderr (a `| tee` ended by the same Ctrl-C, a restarted log
  // collector): a failed write loses its line instead of ending the process with exit 141, as it
  // ends a one-shot command (src/cli/main.ts), which would cut off the requests being drained
  process.stderr.removeAllListeners("error");
  process.stderr.on("error", () => {});
  const modelRef = requireString(values, "model", MODEL_MEANING);
  const kvMemory = optionalString(values, "kv-memory");
  const kvCacheBytes = kvMemory === undefined ? undefined : parseBytes(kvMemory, "kv-memory");
  const graceMs = optionalNumber(values, "grace-ms", { integer: true, min: 0 }) ?? 30_000;
  const options = loadOptionsFrom(values);
  const maxSequences = optionalNumber(values, "parallel", { integer: true, min: 1 });
  const admission = admissionFrom(values);
  const slotPromptSimilarity = optionalNumber(values, "slot-prompt-similarity", { min: 0, max: 1 });
  const draftRef = optionalNonEmpty(values, "draft-model", "a draft model with the model's vocabulary");
  const draftQuantize = draftQuantizeFrom(values);
  const draftTokens = optionalNumber(values, "draft-tokens", { integer: true, min: 1 });
  if (draftRef === undefined && (draftQuantize !== undefined || draftTokens !== undefined)) throw new UsageError("--draft-quantize and --draft-tokens need --draft-model");
  // every option is checked before the model starts loading: a usage error must not wait for the load
  const serverOptions = {
    host: optionalNonEmpty(values, "host", "an address such as 127.0.0.1 (0.0.0.0 for every interface)"),
    port: optionalNumber(values, "port", { integer: true, min: 0, max: 65535 }),
    apiKey: optionalNonEmpty(values, "api-key", "the key clients must send") ?? (process.env.TSLLM_API_KEY || undefined), cors: optionalString(values, "cors"),
    maxQueue: optionalNumber(values, "max-queue", { integer: true, min: 0 }), modelName: optionalString(values, "alias"), chatTemplate: chatTemplateFrom(values), chatTemplateName: chatTemplateNameFrom(values),
    chatTemplateKwargs: templateKwargsFrom(optionalString(values, "chat-template-kwargs")), writeTimeoutMs: optionalNumber(values, "write-timeout-ms", { integer: true, min: 1 }),
    ...bodyLimitsFrom(values), ssePingMs: ssePingFrom(values), readTimeoutMs: optionalNumber(values, "read-timeout-ms", { integer: true, min: 1 }), keepAliveTimeoutMs: optionalNumber(values, "keep-alive-timeout-ms", { integer: true, min: 1 }), autoTruncate: values["auto-truncate"] === true,
    log: (report: string) => process.stderr.write(`tsllm serve: ${report}\n`), logRequests: values["no-log-requests"] !== true, settingNames: SETTING_FLAGS, slots: values["no-slots"] !== true,
    ...slotSavePathFrom(values), ...allowedHostsFrom(values),
    ...(draftTokens !== undefined ? { draftTokens } : {}),
  };
  // a stop asked for while the model loads is honoured too (the loading would otherwise run on, and
  // a process manager's SIGTERM kill it by the signal: exit 143, a failure to Docker and shells)
  const stopped = stopSignals();
  // a draft model not found is named by its flag before the model loads
  const draftFile = draftRef === undefined ? undefined : modelNamedBy("serve", "--draft-model", draftRef, stoppedWhileLoading);
  const target = Promise.all([resolveInterruptibly("serve", modelRef, stoppedWhileLoading), draftFile]).then(([path]): Promise<Model | EmbeddingModel> =>
    // the library's rule (loadsAsEncoder): a decoder in 0_Transformer/ is refused naming it, not the folder's top served
    loadsAsEncoder(path) ? loadEmbeddingModel(path, { backend: options.backend, threads: options.threads }) : loadModel(path, { ...options, ...(options.contextSize === TRAINED_CONTEXT ? { contextSize: trainedContextOf(path, "--ctx-size") } : {}), kvCacheBytes, maxSequences, cacheReplies: values["no-cache-replies"] !== true, ...(admission ? { admission } : {}), ...(slotPromptSimilarity !== undefined ? { slotPromptSimilarity } : {}) }).catch(loadRefusalInFlagWords));
  const draft = draftFile && Promise.all([target, draftFile]).then(([model, file]) => loadDraft(model, file, { ...options, quantize: draftQuantize }, draftTokensOf({ draftTokens })));
  // (the server is loading until both are loaded; a draft refused fails the start as the model's refusal does)
  const load = draft ? Promise.all([target, draft]).then(([model]) => model) : target;
  const server = await startServer(load, { ...serverOptions, ...(draft ? { draftModel: draft } : {}) }).catch((e: unknown) => {
    throw listenRefusalInFlagWords(e, serverOptions.host, serverOptions.port);
  });
  process.stderr.write(`tsllm serve: listening on ${server.url} (loading ${modelRef})\n`);
  let loaded;
  try {
    loaded = await Promise.race([load.then((model) => ({ model })), stopped.then((signal) => ({ signal }))]);
  } catch (e) {
    await server.close(0);
    throw e;
  }
  if ("signal" in loaded) {
    await server.close(0);
    // (written before the exit: stderr on a pipe is asynchronous outside Linux)
    await new Promise<void>((resolve) => process.stderr.write(`tsllm serve: ${stoppedWhileLoading(loaded.signal)}\n`, () => resolve()));
    // the loading cannot be cancelled (a download, file reads, worker threads) and would keep
    // the process alive: a requested stop exits 0, as it does after serving
    process.exit(0);
  }
  const { model } = loaded;
  if ("embed" in model) process.stderr.write(`tsllm serve: ready: embeddings from ${model.info.hfArchitecture}, ${model.dimensions} dimensions, up to ${model.maxTokens} tokens an input\n`);
  else {
    // the draft's KV pool as planned (a context and a round's proposal), which its requests share: one finding no room drafts nothing that round
    const pool = draft && model.engine.draftPoolPlan((await draft).languageModel);
    const drafting = draftRef === undefined ? "" : `, drafting with ${draftRef}${pool ? ` (its KV pool ${pool.tokens} tokens, ${formatBytes(pool.bytes)})` : ""}`;
    process.stderr.write(`tsllm serve: ready: ${model.info.architecture}, context ${model.contextSize}, ${model.engine.maxSequences} parallel sequences, ${model.engine.stats.kvCapacityTokens} KV tokens${drafting} (load ${model.loadMs.toFixed(0)} ms)\n`);
  }
  const signal = await stopped;
  process.stderr.write(`tsllm serve: ${signal}: draining the requests in flight (up to ${graceMs} ms)\n`);
  await server.close(graceMs);
  model.dispose();
  (await draft)?.dispose();
  process.stderr.write("tsllm serve: stopped\n");
}

/**
 * --draft-model, loaded as the model was (its backend, threads, cache types, the --quantize of
 * --draft-quantize), beside it as one memory plan (loadDraftBeside: the model's weights and KV
 * pool as planned, the draft's weights and first draft cache; within --kv-memory the draft's caches too) and held to the
 * library's rule, the model's vocabulary (Model.draftMismatch): refused in one line naming both
 * files before the server takes requests (each request would otherwise be refused, naming neither)
 */
async function loadDraft(model: Model | EmbeddingModel, file: string, options: LoadModelOptions, draftTokens: number): Promise<Model> {
  if ("embed" in model) throw new UsageError(`--draft-model: --model ${model.path} is an embedding model, which generates nothing to draft for`);
  return loadDraftBeside(model, file, options, "--kv-memory, --parallel or --ctx-size", draftTokens);
}

/** the last line of a stop asked for before the model was served (exit 0: a requested stop) */
/**
 * A listen that failed in the words of --port / --host (as llama-server's "couldn't bind HTTP server
 * socket, hostname: H, port: P" names both): Node's "listen EADDRINUSE: address already in use"
 * named neither, nor what to do. The server's defaults (127.0.0.1, 8080) are said to be defaults.
 */
function listenRefusalInFlagWords(e: unknown, host: string | undefined, port: number | undefined): unknown {
  const h = host ?? "127.0.0.1", p = port ?? 8080;
  const portFlag = `--port ${p}${port === undefined ? " (the default)" : ""}`, hostFlag = `--host ${h}${host === undefined ? " (the default)" : ""}`;
  const at = `${h.includes(":") ? `[${h}]` : h}:${p}`;
  switch ((e as NodeJS.ErrnoException | undefined)?.code) {
    case "EADDRINUSE":
      return new Error(`${portFlag}: ${at} is in use (another server listens there); give another --port, or --port 0 for a free one`);
    case "EACCES":
      return new Error(`${portFlag}: no permission to listen on ${at} (ports below 1024 need privileges); give a port above 1023`);
    case "EADDRNOTAVAIL":
      return new Error(`${hostFlag}: no interface of this machine has that address (127.0.0.1: this machine only; 0.0.0.0: every interface)`);
    case "ENOTFOUND":
    case "EAI_AGAIN":
    case "EAI_FAIL":
      return new Error(`${hostFlag}: the host name does not resolve (${(e as NodeJS.ErrnoException).code}); give an address such as 127.0.0.1, or 0.0.0.0 for every interface`);
    default:
      return e;
  }
}

const stoppedWhileLoading = (signal: string) => `${signal} while loading the model: stopped before serving`;

/**
 * Resolves with the name of the first stop signal: SIGTERM (process managers), SIGINT (Ctrl-C)
 * or SIGHUP (the terminal closed; Node's default would kill the process with its requests). A
 * second one exits 1 at once, for whoever will not wait for the drain (during a hub --model's
 * download interruptibleDownload has SIGTERM and SIGINT, and ends the run as this would).
 */
function stopSignals(): Promise<string> {
  return new Promise((resolve) => {
    let first: string | undefined;
    for (const signal of ["SIGTERM", "SIGINT", "SIGHUP"] as const) {
      process.on(signal, () => {
        // while --model downloads, its own handler stops it (interruptibleDownload: locks let go, the line below, exit 0)
        if (signal !== "SIGHUP" && downloadInProgress()) return;
        if (first !== undefined) {
          process.stderr.write(`tsllm serve: ${signal} again: exiting now\n`);
          process.exit(1);
        }
        first = signal;
        resolve(signal);
      });
    }
  });
}

/** --chat-template-kwargs: a JSON object of template variables */
function templateKwargsFrom(text: string | undefined): Record<string, unknown> | undefined {
  if (text === undefined) return undefined;
  let kwargs: unknown;
  try {
    kwargs = JSON.parse(text);
  } catch (e) {
    throw new UsageError(`--chat-template-kwargs expects a JSON object such as '{"enable_thinking": false}': ${(e as Error).message}`);
  }
  const problem = templateKwargsProblem(kwargs, "--chat-template-kwargs");
  if (problem) throw new UsageError(problem.message);
  return kwargs as Record<string, unknown>;
}

/**
 * --body-limit and --bodies-limit, checked against each other (and the defaults) here, before the
 * model loads, as the server's constructor would check them only after
 */
function bodyLimitsFrom(values: ParsedValues): { bodyLimit?: number; bodiesLimit?: number } {
  const one = optionalString(values, "body-limit"), all = optionalString(values, "bodies-limit");
  const bodyLimit = one === undefined ? undefined : parseBytes(one, "body-limit");
  if (bodyLimit !== undefined && bodyLimit > MAX_BODY_LIMIT) {
    throw new UsageError(`--body-limit must be at most ${MAX_BODY_LIMIT} bytes (the longest text JavaScript holds, which a body is read into), got "${one}"`);
  }
  const bodiesLimit = all === undefined ? undefined : parseBytes(all, "bodies-limit");
  const oneBody = bodyLimit ?? DEFAULT_BODY_LIMIT;
  if (bodiesLimit !== undefined && bodiesLimit < oneBody) {
    throw new UsageError(`--bodies-limit must be at least --body-limit (${oneBody} bytes${bodyLimit === undefined ? ", its default" : ""}): one whole body must fit, got "${all}"`);
  }
  return { ...(bodyLimit !== undefined ? { bodyLimit } : {}), ...(bodiesLimit !== undefined ? { bodiesLimit } : {}) };
}

/** 512MiB, 2G, 1048576 ... (a whole number of bytes: at most 2^53) */
/** --admission preempt|reserve: the engine's admission policy (unset: the engine's default) */
/** --sse-ping-interval in seconds (fractions allowed), as milliseconds; 0 or llama-server's -1: no pings */
function ssePingFrom(values: ParsedValues): number | undefined {
  if (values["sse-ping-interval"] === "-1") return 0;
  // (at most a day: node fires a timer past 2^31 - 1 ms at once)
  const seconds = optionalNumber(values, "sse-ping-interval", { min: 0, max: 86_400 });
  return seconds === undefined ? undefined : Math.round(seconds * 1000);
}

function admissionFrom(values: ParsedValues): "preempt" | "reserve" | undefined {
  const v = optionalString(values, "admission");
  if (v === undefined || v === "preempt" || v === "reserve") return v;
  throw new UsageError(`--admission must be preempt or reserve, got "${v}"`);
}

