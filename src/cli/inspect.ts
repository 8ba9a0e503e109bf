import { existsSync, statSync } from "node:fs";
import { DEFAULT_BLOCK_SIZE, kvBytesForContext, kvBytesPerToken } from "../cache/index.js";
import { FileFieldError } from "../formats/errors.js";
import { firstSplitPart, GGUFError, GGUFMetadata, isEncoderModel, readGGUFHeader, readGGUFSplit, SafetensorsModel, splitCount, type SourceTensorInfo } from "../formats/index.js";
import { defaultContextSize, kvCacheTypesOf, loadPlanRequest, type LoadModelOptions } from "../llm.js";
import { probeWebGPU, type KVCacheTypes } from "../kernels/index.js";
import { checkCacheTypes, decoderShape, matricesWithoutKernel, openEncoder, openModel } from "../models/index.js";
import { hfModuleTree, moduleRepr, type ModuleNode, type ModuleTree } from "../models/module-tree.js";
import { elementCount, typeName } from "../tensor/index.js";
import { tokenizerFromGGUF, type Tokenizer } from "../tokenizer/index.js";
import { formatBytes, printable } from "../units/index.js";
import { autoContextSize, availableMemoryBytes, checkMemoryPlan, DEFAULT_MAX_SEQUENCES, kvPoolBytes, memoryMarginBytes, outgrownKvBlocks, planMemory, type PlanRequest } from "../engine/index.js";
import { isQuantization, QUANTIZATIONS, quantizationType, type Quantization } from "../tensor/index.js";
import { MODEL_MEANING, flag, memoryMarginOption, optionalString, parse, printWarning, requireString, threadsOption, UsageError, type OptionSpec } from "./args.js";
import { cacheTypesFrom, ctxSizeFrom, inFlagWords, TRAINED_CONTEXT } from "./generate.js";
import { resolveInterruptibly } from "./interrupt.js";

export const inspectHelp = `Usage: tsllm inspect --model MODEL [--ctx-size N|auto|0] [--memory-margin SIZE] [--threads N] [--quantize Q] [--cache-type-k T] [--cache-type-v T] [--backend webgpu] [--modules] [--json]

Describes a model without loading its weights: architecture, parameter count, tensor types
(count and bytes per type), trained context length, layers and heads, vocabulary size and
tokenizer kind, special tokens, whether it has a chat template, and the memory it needs at a
context size: its weights as stored plus the KV cache of one sequence of that many tokens
(K and V per layer as --cache-type-k/-v store them, f32 by default, KV heads x head size each, in whole blocks of 16 positions, as the
engine allocates it; encoders keep no KV cache). For a decoder it also prints the load plan
generate and serve check before loading: weights after --quantize + KV cache + a scratch
estimate against the free memory (TSLLM_AVAILABLE_MEMORY=BYTES overrides it, for tests), and
what would fit when it does not.

Options:
  --model MODEL         a .gguf file (any part of a split set describes the whole set; a vocab-only
                        GGUF too), a Hugging Face folder (config.json + safetensors: a decoder, or an
                        encoder such as BERT), or a Hub reference org/name[@rev][:QUANT] (downloaded
                        into the cache, as generate does) (required)
  --ctx-size N|auto|0   context size for the memory estimate (default: the trained context, at most
                        4096, as generate uses; auto: the largest that fits in free memory;
                        0: the trained context)
  --memory-margin SIZE  free memory auto and the default KV pool leave unused, as generate (e.g. 512M, 0;
                        default: TSLLM_MEMORY_MARGIN, else 1G)
  --threads N           plan for N compute threads, as generate --threads (default -1; 0 or less: all cores);
                        each wasm worker thread past the first is counted in the scratch
  --quantize Q          plan the weights as quantized on load to Q (as generate --quantize)
  --cache-type-k T      plan the KV cache's keys as T: f32, f16, q8_0, q4_0 (as generate)
  --cache-type-v T      plan the KV cache's values as T (as generate)
  --backend webgpu      also check the model against this machine's WebGPU adapter (found as generate
                        --backend webgpu finds it; no device is started): its largest buffer, which
                        one layer's K or V array of the KV pool must fit in (the load plan then
                        checks it), and the weight types its matmul lacks; without an adapter it
                        says why (in --json: "webgpu")
  --modules             a Hugging Face folder: also the module tree print(model) shows in PyTorch for
                        its config.json architecture (BERT, RoBERTa, DistilBERT, GPT-2, Llama,
                        Mistral, Qwen2, Qwen3; class names as transformers 5.18.0 has them,
                        repeated layers as "(0-11): 12 x BertLayer(") and its total and trainable
                        parameters, checked against the safetensors (in --json: "modules")
  --json                print the facts as one JSON object
  -h, --help            show this help
`;

/** what kind of model the files hold */
type Kind = "decoder" | "encoder" | "vocab-only" | "unsupported";

/** the sizes that decide a model's compute and its KV cache */
interface Shape {
  readonly blockCount: number;
  readonly embeddingLength: number;
  readonly headCount: number;
  /** decoders only */
  readonly headCountKv?: number;
  readonly headDim?: number;
  readonly feedForwardLength: number;
  /** trained context (an encoder's position table) */
  readonly contextLength: number;
}

/** a model's files, opened by the project's loaders (nothing read but headers and configs) */
interface Opened {
  readonly path: string;
  readonly format: "gguf" | "gguf-split" | "hf-folder";
  /** the files of a split set, in order */
  readonly parts?: readonly string[];
  readonly ggufVersion?: number;
  readonly name?: string;
  readonly architecture: string;
  /** a folder's config.json architecture (BertModel, LlamaForCausalLM, ...) */
  readonly hfArchitecture?: string;
  readonly kind: Kind;
  readonly tensors: ReadonlyMap<string, SourceTensorInfo>;
  readonly shape?: Shape;
  readonly tokenizer?: Tokenizer;
  /** why a tokenizer the file declares could not be read */
  readonly tokenizerError?: string;
  readonly metadata?: GGUFMetadata;
}

export const INSPECT_ARGS: OptionSpec = { model: { type: "string" }, "ctx-size": { type: "string" }, "memory-margin": { type: "string" }, threads: { type: "string" }, quantize: { type: "string" }, "cache-type-k": { type: "string" }, "cache-type-v": { type: "string" }, backend: { type: "string" }, modules: { type: "boolean" }, json: { type: "boolean" } };

export async function runInspect(argv: string[]): Promise<void> {
  const values = parse(argv, INSPECT_ARGS);
  if (flag(values, "help")) { process.stdout.write(inspectHelp); return; }
  const model = requireString(values, "model", MODEL_MEANING);
  const ctxArg = ctxSizeFrom(values);
  const quantize = optionalString(values, "quantize");
  if (quantize !== undefined && !isQuantization(quantize)) throw new UsageError(`--quantize must be one of ${QUANTIZATIONS.join(", ")}, got "${quantize}"`);
  const backend = optionalString(values, "backend");
  if (backend !== undefined && backend !== "webgpu") throw new UsageError(`--backend must be webgpu (the CPU backends have no limit beyond memory, which the load plan checks), got "${backend}"`);
  // every flag is checked before a Hub reference is downloaded
  const marginArg = memoryMarginOption(values), threads = threadsOption(values);
  const path = await resolveInterruptibly("inspect", model);
  const opened = statSync(path).isDirectory() ? openFolder(path) : openGGUF(path);
  const available = availableMemoryBytes();
  const margin = marginArg ?? memoryMarginBytes();
  const gpu = backend === "webgpu" ? await probeWebGPU().catch((e: unknown) => ({ error: (e as Error).message })) : undefined;
  const maxBuffer = gpu && "maxBufferBytes" in gpu ? { bytes: gpu.maxBufferBytes, backend: "webgpu" } : undefined;
  const planOptions = { quantize: quantize as Quantization | undefined, ...(threads !== undefined ? { threads } : {}), ...cacheTypesFrom(values), ...(backend ? { backend: "webgpu" as const } : {}) };
  if (opened.shape?.headDim !== undefined) checkCacheTypes(kvCacheTypesOf(planOptions), opened.shape.headDim);
  // 0: the trained context itself (as generate's --ctx-size 0)
  let ctxSize = ctxArg === "auto" ? undefined : ctxArg === TRAINED_CONTEXT ? opened.shape?.contextLength : ctxArg;
  if (ctxArg === "auto") {
    const trained = opened.shape?.contextLength ?? 4096;
    const request = opened.metadata ? loadPlanRequest({ tensors: opened.tensors, metadata: opened.metadata }, planOptions, trained) : undefined;
    const r = request && maxBuffer ? { ...request, maxBuffer } : request;
    ctxSize = r ? autoContextSize(r, available, trained, margin) ?? 16 : undefined;
  }
  const plan = planOf(opened, planOptions, ctxSize, available, margin, maxBuffer);
  const report = { ...describe(model, opened, ctxSize, kvCacheTypesOf(planOptions)), plan, ...(gpu ? { webgpu: webgpuOf(opened, gpu, plan, quantize as Quantization | undefined) } : {}), ...(flag(values, "modules") ? modulesOf(opened) : {}) };
  const trained = opened.shape?.contextLength;
  if (ctxSize !== undefined && trained !== undefined && ctxSize > trained) {
    printWarning(`--ctx-size ${ctxSize} is above the model's trained context of ${trained} tokens`);
  }
  if (flag(values, "json")) { process.stdout.write(JSON.stringify(report, null, 2) + "\n"); return; }
  // names and values come from the files: no control character reaches the terminal
  const lines = formatReport(report);
  if (flag(values, "modules")) lines.push(...formatModules(report));
  process.stdout.write(printable(lines.join("\n")) + "\n");
}

/** the module tree of a folder's config.json, beside the parameters its safetensors hold */
function modulesOf(o: Opened): { modules?: ReturnType<typeof modulesJson>; modulesError?: string } {
  if (o.format !== "hf-folder") return { modulesError: "a module tree needs a Hugging Face folder (config.json), not a GGUF" };
  let tree: ModuleTree;
  try {
    tree = hfModuleTree(o.path);
  } catch (e) {
    if (!(e instanceof FileFieldError)) throw e;
    return { modulesError: e.message };
  }
  const weights = SafetensorsModel.open(o.path);
  let stored = 0;
  for (const t of weights.tensors.values()) stored += t.shape.reduce((a, x) => a * x, 1);
  return { modules: modulesJson(tree, stored, weights.tensors.size) };
}

function modulesJson(tree: ModuleTree, storedParameters: number, storedTensors: number) {
  const toJson = (m: ModuleNode, name?: string): Record<string, unknown> => ({
    ...(name !== undefined ? { name } : {}), type: m.type, ...(m.args ? { args: m.args } : {}),
    ...(m.parameters?.length ? { parameters: m.parameters } : {}),
    ...(m.children?.length ? { children: m.children.map(([n, c]) => toJson(c, n)) } : {}),
  });
  return {
    architecture: tree.architecture, ...(tree.savedWith ? { savedWith: tree.savedWith } : {}), namesFollow: tree.namesFollow,
    parameters: tree.parameters, trainableParameters: tree.trainableParameters, storedParameters, storedTensors,
    repr: moduleRepr(tree.root), root: toJson(tree.root),
  };
}

function formatModules(r: { modules?: ReturnType<typeof modulesJson>; modulesError?: string }): string[] {
  const m = r.modules;
  if (!m) return [`modules:         - (${r.modulesError})`];
  const saved = m.savedWith ? `; the folder was saved by transformers ${m.savedWith}` : "";
  const check = m.parameters === m.storedParameters ? `the sizes of the ${m.storedTensors} safetensors tensors add up to the same`
    : `but the safetensors hold ${m.storedParameters} in ${m.storedTensors} tensors: config.json and the weights disagree`;
  return [
    `modules:         print(model) of ${m.architecture}, class names as transformers ${m.namesFollow} has them${saved}`,
    m.repr,
    `Total parameters: ${m.parameters} (${check})`,
    `Trainable parameters: ${m.trainableParameters}`,
  ];
}

/** A GGUF file, a split set (from any of its parts) or a vocab-only GGUF. */
function openGGUF(given: string): Opened {
  let header = readGGUFHeader(given);
  const first = firstSplitPart(header);
  if (first !== undefined) {
    if (!existsSync(first)) throw new GGUFError(given, "split.no", `a later part of a split GGUF, and its first part ${first} is missing`);
    header = readGGUFHeader(first);
  }
  // a later part named otherwise, a missing part, mixed-up sets: readGGUFSplit says which
  const split = splitCount(header) > 1 ? readGGUFSplit(header) : undefined;
  const tensors: ReadonlyMap<string, SourceTensorInfo> = split ? split.tensors : new Map(header.tensors.map((t) => [t.name, t]));
  const meta = new GGUFMetadata(header.path, header.metadata);
  const arch = meta.string("general.architecture") ?? "(none)";
  let tokenizer: Tokenizer | undefined, tokenizerError: string | undefined;
  if (meta.has("tokenizer.ggml.model")) {
    try {
      tokenizer = tokenizerFromGGUF(meta);
    } catch (e) {
      if (!(e instanceof GGUFError)) throw e;
      tokenizerError = e.message;
    }
  }
  let kind: Kind, shape: Shape | undefined;
  if (tensors.size === 0) {
    kind = "vocab-only";
  } else if (arch === "bert") {
    kind = "encoder";
    shape = {
      blockCount: meta.requireNumber("bert.block_count"), embeddingLength: meta.requireNumber("bert.embedding_length"),
      headCount: meta.requireNumber("bert.attention.head_count"), feedForwardLength: meta.requireNumber("bert.feed_forward_length"),
      contextLength: meta.number("bert.context_length") ?? tensors.get("position_embd.weight")?.dims[1] ?? 512,
    };
  } else {
    shape = decoderShape(meta);
    kind = shape ? "decoder" : "unsupported";
  }
  return {
    path: header.path, format: split ? "gguf-split" : "gguf", ...(split ? { parts: split.parts.map((p) => p.path) } : {}),
    ggufVersion: header.version, name: meta.string("general.name"), architecture: arch, kind, tensors, shape, tokenizer, tokenizerError, metadata: meta,
  };
}

/** A Hugging Face folder: an encoder (BERT, RoBERTa, DistilBERT) or a decoder, through the loaders generate and embed use. */
function openFolder(folder: string): Opened {
  if (isEncoderModel(folder)) {
    const e = openEncoder(folder);
    const c = e.config;
    return {
      path: folder, format: "hf-folder", architecture: c.family, hfArchitecture: c.hfArchitecture, kind: "encoder", tensors: e.tensors, tokenizer: e.tokenizer,
      shape: { blockCount: c.blockCount, embeddingLength: c.hiddenSize, headCount: c.headCount, feedForwardLength: c.feedForwardLength, contextLength: c.maxPositions },
    };
  }
  const m = openModel(folder);
  return {
    path: folder, format: "hf-folder", architecture: m.metadata.string("general.architecture")!, hfArchitecture: m.metadata.string("general.name"),
    kind: "decoder", tensors: m.tensors, tokenizer: m.tokenizer, shape: decoderShape(m.metadata), metadata: m.metadata,
  };
}

interface TypeStats { tensors: number; parameters: number; bytes: number }

function describe(model: string, o: Opened, ctxSize: number | undefined, cacheTypes: KVCacheTypes) {
  const types = new Map<string, TypeStats>();
  let parameters = 0, weightBytes = 0;
  for (const t of o.tensors.values()) {
    const n = elementCount(t.dims);
    parameters += n;
    weightBytes += t.byteLength;
    const name = typeName(t.type);
    const e = types.get(name) ?? { tensors: 0, parameters: 0, bytes: 0 };
    e.tensors++; e.parameters += n; e.bytes += t.byteLength;
    types.set(name, e);
  }
  const tok = o.tokenizer;
  const special = (id: number | undefined) => (id === undefined || !tok ? undefined : { id, piece: tok.piece(id) });
  const template = tok ? tok.chatTemplate : o.metadata?.has("tokenizer.chat_template") ? { where: "GGUF tokenizer.chat_template" } : undefined;
  const s = o.shape;
  return {
    model,
    file: o.path,
    format: o.format,
    ...(o.parts ? { parts: o.parts } : {}),
    ...(o.ggufVersion !== undefined ? { ggufVersion: o.ggufVersion } : {}),
    name: o.name,
    architecture: o.architecture,
    ...(o.hfArchitecture !== undefined ? { hfArchitecture: o.hfArchitecture } : {}),
    kind: o.kind,
    parameters,
    tensorCount: o.tensors.size,
    tensorTypes: Object.fromEntries(types),
    weightBytes,
    contextLength: s?.contextLength ?? o.metadata?.number(`${o.architecture}.context_length`),
    embeddingLength: s?.embeddingLength,
    blockCount: s?.blockCount,
    headCount: s?.headCount,
    headCountKv: s?.headCountKv,
    headDim: s?.headDim,
    feedForwardLength: s?.feedForwardLength,
    // a GGUF's own tokenizer.ggml.model: tok.type is the kind tsllm runs it as, "gpt2" for llama.cpp's BPE models "gemma4" and "whitespace" too
    vocabulary: tok ? { type: o.metadata?.string("tokenizer.ggml.model") ?? tok.type, pre: tok.pre, size: tok.vocabSize, addBos: tok.addBos, addEos: tok.addEos } : o.tokenizerError ? { error: o.tokenizerError } : undefined,
    specialTokens: tok ? { bos: special(tok.bosId), eos: special(tok.eosId), unk: special(tok.unkId), pad: special(tok.padId), endOfGeneration: [...tok.endOfGenerationIds].map(special) } : undefined,
    chatTemplate: template !== undefined,
    ...(template ? { chatTemplateSource: template.where } : {}),
    memory: memoryOf(o, weightBytes, ctxSize, cacheTypes),
  };
}

type Report = ReturnType<typeof describe> & { plan?: ReturnType<typeof planOf>; webgpu?: ReturnType<typeof webgpuOf> };

/** the plan loadModel checks before reading weights: weights after quantization + KV + scratch vs free memory */
function planOf(o: Opened, options: LoadModelOptions, ctxSize: number | undefined, available: number, margin: number, maxBuffer: PlanRequest["maxBuffer"]) {
  if (o.kind !== "decoder" || !o.metadata || !o.shape) return undefined;
  const request = loadPlanRequest({ tensors: o.tensors, metadata: o.metadata }, options, ctxSize ?? defaultContextSize(o.shape.contextLength));
  if (!request) return undefined;
  // with an adapter: one layer's K or V array must fit in its largest buffer too, as loadModel checks
  const r = maxBuffer ? { ...request, maxBuffer } : request;
  const p = planMemory(r);
  let refusal: string | undefined;
  try {
    checkMemoryPlan(o.path, r, p, available);
  } catch (e) {
    // in the flags' words, as generate and serve refuse the same load
    refusal = inFlagWords((e as Error).message);
  }
  // the pool loadModel allocates: the plan needs one context, but by default the engine reserves
  // room for DEFAULT_MAX_SEQUENCES of them (shrunk to what is free), which a full server fills
  const poolBytes = refusal === undefined ? kvPoolBytes(r, p, available, margin) : undefined;
  const perToken = kvBytesPerToken(r.shape, r.kvCacheTypes);
  // on wasm a full pool also holds the K/V arrays it outgrew on the way (a wasm memory never shrinks)
  const outgrownBytes = poolBytes === undefined || !r.wasm ? 0 : outgrownKvBlocks(poolBytes / (DEFAULT_BLOCK_SIZE * perToken)) * DEFAULT_BLOCK_SIZE * perToken;
  const kvPool = poolBytes === undefined ? {} : { kvPool: { bytes: poolBytes, tokens: Math.round(poolBytes / perToken), maxSequences: DEFAULT_MAX_SEQUENCES, outgrownBytes, fullBytes: p.weightBytes + poolBytes + outgrownBytes + p.scratchBytes } };
  return { ...p, quantize: options.quantize, availableBytes: available, marginBytes: margin, fits: refusal === undefined, ...(refusal ? { refusal } : {}), ...kvPool };
}

/**
 * The model against the webgpu adapter: its largest buffer, whether a layer's K or V array of the
 * planned KV pool fits in it, and the matrices whose type (after --quantize) its matmul lacks
 * (tables only looked up are not counted), which loadModel refuses before reading weights; or why
 * there is no adapter.
 */
function webgpuOf(o: Opened, gpu: Awaited<ReturnType<typeof probeWebGPU>> | { error: string }, plan: ReturnType<typeof planOf>, quantize: Quantization | undefined) {
  if ("error" in gpu) return { error: gpu.error };
  const q = quantize === undefined ? undefined : quantizationType(quantize);
  const missing = matricesWithoutKernel(o.tensors, q, (type) => gpu.matmulTypes.includes(typeName(type)));
  return {
    adapter: gpu.adapter, maxBufferBytes: gpu.maxBufferBytes,
    ...(plan ? { kvArrayBytes: plan.kvArrayBytes, kvArrayFits: plan.kvArrayBytes <= gpu.maxBufferBytes } : {}),
    typesWithoutMatmul: Object.fromEntries([...missing].map(([type, e]) => [typeName(type), e])),
  };
}

/** weights as stored + the KV cache of one sequence of the context size, as the engine lays it out */
function memoryOf(o: Opened, weightBytes: number, ctxSize: number | undefined, types: KVCacheTypes) {
  const s = o.shape;
  if (o.kind === "vocab-only" || s === undefined) return undefined;
  const contextSize = ctxSize ?? defaultContextSize(s.contextLength);
  if (o.kind !== "decoder" || s.headCountKv === undefined || s.headDim === undefined) {
    return { contextSize, weightBytes, kvCacheBytes: 0, kvBytesPerToken: 0, totalBytes: weightBytes };
  }
  const kv = { blockCount: s.blockCount, headCountKv: s.headCountKv, headDim: s.headDim };
  const kvCacheBytes = kvBytesForContext(kv, contextSize, types);
  // the types are named only when not the default f32 K and V
  const named = types.k !== "f32" || types.v !== "f32" ? { kvCacheTypes: types } : {};
  return { contextSize, weightBytes, kvCacheBytes, kvBytesPerToken: kvBytesPerToken(kv, types), ...named, totalBytes: weightBytes + kvCacheBytes };
}

function formatReport(r: Report): string[] {
  const fmt = (n: number) => (n >= 1e9 ? `${(n / 1e9).toFixed(2)}B` : n >= 1e6 ? `${(n / 1e6).toFixed(2)}M` : n >= 1e3 ? `${(n / 1e3).toFixed(1)}K` : String(n));
  const tok = (s: { id: number; piece: string } | undefined) => (s ? `${s.id} ${JSON.stringify(s.piece)}` : "-");
  const where = r.format === "gguf-split" ? `split GGUF v${r.ggufVersion}, ${r.parts!.length} parts: ${r.parts!.join(", ")}`
    : r.format === "gguf" ? `GGUF v${r.ggufVersion}` : "Hugging Face folder";
  const kind = r.kind === "vocab-only" ? "vocab only, no tensors" : r.kind === "unsupported" ? "not a model tsllm runs" : r.kind;
  const v = r.vocabulary;
  const vocabulary = !v ? "none" : "error" in v ? `unreadable: ${v.error}` : `${v.size} tokens, ${v.type}${v.pre ? ` (pre: ${v.pre})` : ""}, add BOS ${v.addBos}`;
  const lines = [
    `model:           ${r.file} (${where})`,
    `name:            ${r.name ?? "-"}`,
    `architecture:    ${r.architecture}${r.hfArchitecture ? ` (${r.hfArchitecture})` : ""}, ${kind}`,
    `parameters:      ${fmt(r.parameters)} (${r.parameters}) in ${r.tensorCount} tensors, ${formatBytes(r.weightBytes)}`,
    `tensor types:    ${Object.entries(r.tensorTypes).map(([t, e]) => `${t} x${e.tensors} (${formatBytes(e.bytes)})`).join(", ") || "-"}`,
    `context length:  ${r.contextLength ?? "-"}${r.contextLength !== undefined ? " (trained)" : ""}`,
    `layers:          ${r.blockCount ?? "-"}, embedding ${r.embeddingLength ?? "-"}, heads ${r.headCount ?? "-"}${r.headCountKv !== undefined ? ` / kv ${r.headCountKv}, head size ${r.headDim}` : ""}`,
    `vocabulary:      ${vocabulary}`,
    `special tokens:  BOS ${tok(r.specialTokens?.bos)}, EOS ${tok(r.specialTokens?.eos)}, UNK ${tok(r.specialTokens?.unk)}`,
    `end of turn:     ${r.specialTokens?.endOfGeneration.map(tok).join(", ") || "-"}`,
    `chat template:   ${r.chatTemplate ? `yes (${r.chatTemplateSource})` : "no"}`,
  ];
  const m = r.memory;
  if (!m) {
    lines.push(`memory:          -`);
  } else if (r.kind !== "decoder") {
    lines.push(`memory:          ${formatBytes(m.totalBytes)} at --ctx-size ${m.contextSize}: weights ${formatBytes(m.weightBytes)}${r.kind === "encoder" ? " (an encoder keeps no KV cache)" : ", KV cache unknown for this architecture"}`);
  } else {
    lines.push(`memory:          ${formatBytes(m.totalBytes)} at --ctx-size ${m.contextSize}: weights ${formatBytes(m.weightBytes)} + KV cache ${formatBytes(m.kvCacheBytes)}`
      + ` (${"kvCacheTypes" in m && m.kvCacheTypes ? `${m.kvCacheTypes.k} K, ${m.kvCacheTypes.v} V` : "f32 K and V"}: ${r.blockCount} layers x ${r.headCountKv} KV heads x ${r.headDim} dims x ${m.kvCacheBytes / m.kvBytesPerToken} positions)`);
  }
  const p = r.plan;
  if (p) {
    lines.push(`load plan:       ${formatBytes(p.totalBytes)} = weights ${formatBytes(p.weightBytes)} ${p.weightType}${p.quantize ? ` (--quantize ${p.quantize})` : ""} + KV ${formatBytes(p.kvCacheBytes)} at ${p.contextSize} tokens + scratch ${formatBytes(p.scratchBytes)} (estimate); ${formatBytes(p.availableBytes)} free: ${p.fits ? "fits" : "does not fit"}`);
    if (p.refusal) lines.push(`                 ${p.refusal.slice(p.refusal.indexOf(": ") + 2)}`);
    if (p.kvPool) lines.push(`KV pool:         ${formatBytes(p.kvPool.bytes)} for ${p.kvPool.tokens} tokens, reserved at load (room for up to ${p.kvPool.maxSequences} sequences of ${p.contextSize} tokens, shrunk to what is free less a ${formatBytes(p.marginBytes)} margin): about ${formatBytes(p.kvPool.fullBytes)} in all when every sequence is full${p.kvPool.outgrownBytes > 0 ? ` (with ${formatBytes(p.kvPool.outgrownBytes)} of K/V arrays the pool outgrows on the way, which wasm memory keeps)` : ""}`);
  }
  const g = r.webgpu;
  if (g && "error" in g) lines.push(`webgpu:          no adapter: ${g.error}`);
  else if (g) {
    const kv = g.kvArrayBytes === undefined ? "" : `; one layer's K or V array ${formatBytes(g.kvArrayBytes)} at ${p!.contextSize} tokens: ${g.kvArrayFits ? "fits" : "too large (see the load plan)"}`;
    const missing = Object.entries(g.typesWithoutMatmul);
    const types = missing.length === 0 ? "; its matmul takes every weight type" : `; no matmul kernel for ${missing.map(([t, e]) => `${t} x${e.tensors} (${e.first}${e.tensors > 1 ? ", ..." : ""})`).join(", ")}: use the wasm backend (--quantize converts only float matrices)`;
    lines.push(`webgpu:          ${g.adapter}: largest buffer ${formatBytes(g.maxBufferBytes)} (${g.maxBufferBytes} bytes)${kv}${types}`);
  }
  return lines;
}
