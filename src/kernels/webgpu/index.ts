import type { Backend, DeviceArray, MatmulEpilogue, UnaryOp } from "../backend.js";
import { typeName, type GGMLType, type Tensor } from "../../tensor/index.js";
import { dequantizeRow, f16BitsToF32 } from "../../tensor/quant/index.js";
import { ropeAngles, type RopeParams } from "../ops/rope.js";
import { gelu } from "../ops/activations.js";
import { checkRows } from "../ops/attention.js";
import { KV_CACHE_TYPES, kvRowFloats, matrixDims, matrixShape, type KVCacheEncoding, type KVCacheType, type KVRowEncoding } from "../reference/index.js";
import { findAdapter, type AdapterOptions } from "./adapter.js";
import { KernelProfiler, type KernelTime } from "./profiler.js";
import {
  BufferUsage, MapMode, ShaderStage,
  type GPUBindGroupEntryLike, type GPUBindGroupLayoutEntryLike, type GPUBindGroupLayoutLike, type GPUBindGroupLike, type GPUBufferLike, type GPUCommandEncoderLike, type GPUComputePassLike,
  type GPUComputePipelineLike, type GPUDeviceLike, type GPUQueueLike,
} from "./gpu-types.js";
import {
  ADD, ADD_BIAS, ATTENTION_COMBINE, COPY_2D, GATHER_ROWS, MATMUL_GRIDS, MATMUL_TILE, MATMUL_TYPES, TILED_MATMUL, TILED_MATMUL_TYPES, tiledMatmulDef, MAX_ROTATION, NORMS, QUERY_Q8_0, QUANT_Q8_0, QUANT_Q8_K, ROPE, ROPE_SCATTER, ROPE_TWO, ROTATE_CHUNKS,
  SCATTER_ROWS, SCATTER_ROWS_F16, SCATTER_ROWS_TWO, SCATTER_ROWS_Q4_0, SCATTER_ROWS_Q8_0, SWIGLU, SWIGLU_Q8_0, UNARY, TILE_MAX_HEAD_DIM, TILE_QUERIES, attentionKernel, buildShader, matmulDef, paramLayout, tileKeys, type KVSide, type KernelDef, type ParamType,
} from "./shaders.js";

export type { KernelTime } from "./profiler.js";
export { TILED_MATMUL_TYPES } from "./shaders.js";

/**
 * The WebGPU backend: activations, the KV cache and the weights live in GPU buffers; every op is
 * a WGSL compute dispatch (shaders.ts) recorded into one command encoder, submitted at `read`,
 * before a host `write`, or every MAX_BATCH dispatches. `read` is the only point that waits.
 *
 * Ordering: queue.writeBuffer is ordered with queue.submit, not with the commands of an encoder
 * still being recorded, so each dispatch's parameters get their own 256-byte slice of one uniform
 * buffer and its small host arrays (row indices, RoPE tables) their own range of one data buffer;
 * both are uploaded with one writeBuffer each just before the batch is submitted. A host `write`
 * first submits what is recorded, so it lands after every op recorded before it.
 *
 * Weights: allocWeights hands out host memory (the loader fills it); a matmul uploads a tensor's
 * bytes once, as they are (quantized), and the shader dequantizes. Weights must not change after
 * their first matmul. Small host arrays (norm weights, biases) are uploaded once each, too.
 */

const ALIGN = 64;
const SLOT = 256;
const SLOTS = 512;
/** tokens from which the tiled matmul kernel is taken (fewer fill too little of its 64-token tile) */
const TILED_MATMUL_MIN_TOKENS = 16;
/**
 * the weight types tiled by default: the float ones, whose one-row kernel ran at 0.42 TFLOP/s on
 * the H200 (on lavapipe the tiled one is ~2x faster; Q8_0 / Q4_0 there about even)
 */
export const DEFAULT_TILED_MATMUL_TYPES: readonly string[] = ["F32", "F16", "BF16"];

function tiledTypes(types: readonly string[] = DEFAULT_TILED_MATMUL_TYPES): ReadonlySet<string> {
  for (const t of types) if (!TILED_MATMUL_TYPES.includes(t)) throw new Error(`createWebGPUBackend: tiledMatmulTypes: ${JSON.stringify(t)} has no tiled matmul kernel (expected some of ${TILED_MATMUL_TYPES.join(", ")})`);
  return new Set(types);
}
/**
 * dispatches recorded before a submit (default of the dispatchesPerSubmit option). A decode step
 * is bound by the host's recording; smaller batches let the GPU run the first ones meanwhile, so
 * less is left to wait for at the read. SmolLM's shape on an H200 (334 dispatches a step): 256 a
 * batch 9.6 ms a step, 64 6.6 ms, 32 6.8 ms, 16 6.9 ms (each submit costs the host too).
 */
const MAX_BATCH = 64;
/**
 * How long a map's AbortError waits for the device's lost promise, in milliseconds. Chromium
 * rejects a map pending on a device being lost at once ("Buffer was unmapped before mapping was
 * resolved"), and settles the lost promise only after a round trip to its GPU process; the
 * backend never unmaps a buffer being mapped itself, so the loss is all but certain, and its news
 * is waited for (a bound, not a timing: an AbortError with no loss behind it says so after it).
 */
const LOST_NEWS_MS = 5_000;
/** staging buffers kept for later reads (a pass reads one array; a few reads may overlap) */
const STAGING_KEPT = 4;
/** cached bind groups at most (all are dropped when full; a model's steady state needs a few hundred) */
const MAX_BIND_GROUPS = 4096;
const MAX_GROUPS = 65535;
/** workgroups of one split attention dispatch at most (a few thousand fill a large GPU) */
const MAX_SPLIT_GROUPS = 4096;

let nextBackendId = 1;

/** an op the backend holds back one call for a fusion (WebGPUBackend.held) */
type HeldOp =
  | { readonly op: "add"; readonly x: GpuArray; readonly y: GpuArray }
  | { readonly op: "rope"; readonly x: GpuArray; readonly pairs: number; readonly params: readonly [number, number, number, number, number]; readonly table: Float32Array }
  | { readonly op: "scatter"; readonly dst: GpuArray; readonly src: GpuArray; readonly width: number; readonly rows: Uint32Array }
  /** an rmsNorm (after the held add of `y` into x, when y is set) */
  | { readonly op: "norm"; readonly out: GpuArray; readonly x: GpuArray; readonly y: GpuArray | null; readonly weight: GPUBufferLike; readonly width: number; readonly rows: number; readonly eps: number; readonly hasWeight: boolean }
  | { readonly op: "swiglu"; readonly out: GpuArray; readonly gate: GpuArray; readonly up: GpuArray; readonly n: number }
  /** two RoPEs at the same positions (a layer's q, then k: ROPE_TWO), held for the scatters of k and v into their caches */
  | { readonly op: "rope2"; readonly x: GpuArray; readonly x2: GpuArray; readonly pairs: number; readonly pairs2: number; readonly nHeads2: number; readonly params: readonly [number, number, number, number, number]; readonly table: Float32Array }
  /** ... and the scatter of x2 (the rotated keys) into dst, its f32 cache, awaiting the values' */
  | { readonly op: "ropeScatter"; readonly rope: RopeTwo; readonly dst: GpuArray; readonly width: number; readonly rows: Uint32Array }
  /** attention's last kernel, which can also quantize its output (n floats of `out`) to Q8_0 */
  | { readonly op: "attention"; readonly out: GpuArray; readonly n: number; readonly dispatch: (quant: QuantizedOutput | null) => void };

type RopeTwo = Extract<HeldOp, { op: "rope2" }>;

/** where an attention kernel puts the Q8_0 blocks of its output: XQ, its scales from word nqw, block 0 at float `base` of the output's buffer */
interface QuantizedOutput {
  readonly xq: GPUBufferLike;
  readonly nqw: number;
  readonly base: number;
}

/** element by element (a held op's RoPE angles or row index against the next op's) */
function sameValues(a: ArrayLike<number>, b: ArrayLike<number>): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

/** whether two views share any float of one buffer */
function overlaps(a: GpuArray, b: GpuArray): boolean {
  return a.buffer === b.buffer && a.offset < b.offset + b.length && b.offset < a.offset + a.length;
}

/** a kernel compiled for one aliasing pattern of its arrays */
interface CompiledKernel {
  /** its name and aliasing pattern: the bind groups' cache key starts with it */
  readonly key: string;
  readonly pipeline: GPUComputePipelineLike;
  readonly layout: GPUBindGroupLayoutLike;
  /** the uniform fields (paramLayout), in the order the host writes them */
  readonly params: readonly (readonly [string, ParamType])[];
}

interface WeightBlock {
  readonly buffer: GPUBufferLike;
  /** the first row it holds, and how many */
  readonly row: number;
  readonly rows: number;
}

/** a device array of this backend: a range of floats of one GPU buffer (handed out as DeviceArray, see `device`) */
class GpuArray {
  constructor(
    readonly buffer: GPUBufferLike,
    /** float offset of the view in `buffer` */
    readonly offset: number,
    readonly length: number,
    readonly owner: number,
    /** the allocation a view comes from, kept alive by the view */
    readonly root: GpuArray | null,
  ) {}
}

/** a GpuArray as the contract's opaque device array (the same object; `arr` checks it back) */
function device(a: GpuArray): DeviceArray {
  return a as unknown as DeviceArray;
}

export interface WebGPUBackendOptions extends AdapterOptions {
  /**
   * Attention scores kept at once, in floats (default 2^24 = 64 MiB): a prefill whose
   * nTokens x nHeads x nKeys is larger runs as several dispatches over blocks of query tokens.
   */
  attentionScratchFloats?: number;
  /**
   * Keys per workgroup when attention is split over keys (default 256): a query's keys are cut
   * into ranges of this many when that leaves few enough workgroups (see `attention`). Small values
   * force the split path in tests.
   */
  attentionKeysPerSplit?: number;
  /**
   * Every chunk of 2 or more queries (and encoders) through the tiled attention kernel where the
   * head size is at most TILE_MAX_HEAD_DIM (default true); false keeps the scores-buffer kernels
   * (tests of both paths). Single queries (decode) keep the single-pass or split kernels.
   */
  tiledAttention?: boolean;
  /** reduce quantized matmul sums (the float types' fold in column order: see matmulDef), norm sums and the attention softmax's max and sum with subgroup operations where the adapter has the "subgroups" feature (default true; false: trees in workgroup memory) */
  subgroups?: boolean;
  /** the largest weight buffer, in bytes (default: the adapter's storage binding limit); larger tensors are uploaded as blocks of rows */
  maxWeightBytes?: number;
  /**
   * keep every weight's host bytes after its upload (default false: once a tensor is on the GPU
   * and a read has passed, its host ArrayBuffer is detached — the model's weights are then held
   * once, on the device — except tensors getRows reads, which it dequantizes on the host)
   */
  keepHostWeights?: boolean;
  /**
   * dispatches recorded before the batch is submitted (default 64): smaller batches let the GPU
   * start on a pass while the host still records the rest of it
   */
  dispatchesPerSubmit?: number;
  /**
   * the weight types that go through the matmul kernel tiled in workgroup memory against
   * TILED_MATMUL_MIN_TOKENS or more tokens (any of TILED_MATMUL_TYPES; default the float types,
   * DEFAULT_TILED_MATMUL_TYPES; [] keeps the one-row kernel everywhere). Every quantized type has
   * a tiled kernel too, not the default until a GPU has timed it against its one-row kernel. A row
   * gets the same bits in a batch of any size either way: a type named here has its one-row kernel
   * add the 32-weight units' values in order, as the tiled kernel does, instead of strided
   * partial sums reduced by a tree or subgroupAdd (whose order WGSL leaves to the driver); that
   * changes the type's bits against the default (within the reference's tolerance) and its
   * one-row speed, untimed on a GPU (see docs/webgpu.md; `bench-webgpu` times both kernels of
   * every type).
   */
  tiledMatmulTypes?: readonly string[];
  /**
   * time every dispatch on the GPU with timestamp queries (needs the adapter's "timestamp-query"
   * feature; each dispatch then runs in a pass of its own, which costs time): `kernelTimes()`
   * gives the GPU time per kernel (default false)
   */
  profileKernels?: boolean;
}

/** the webgpu backend's extra: which adapter it runs on */
export interface WebGPUBackendInfo extends Backend {
  /** the adapter, its features and where it came from, e.g. "google swiftshader, subgroups; dawn, Vulkan ICD ..." */
  readonly adapter: string;
  /** dispatches recorded and batches submitted since the backend was created (what a pass costs the host) */
  counters(): { dispatches: number; submits: number };
  /**
   * staging buffers mapped by reads since the backend was created, and the most mapping at once
   * (each one is a staging buffer held and a promise pending: what a slot's save keeps bounded)
   */
  readCounters(): { maps: number; mostInFlight: number };
  /** Backend.readParts: one staging buffer and one map for every part */
  readonly readParts: NonNullable<Backend["readParts"]>;
  /** with `profileKernels`: the GPU time per kernel of the batches submitted since the last call, largest first (it waits for them) */
  kernelTimes(): Promise<KernelTime[]>;
}

export async function createWebGPUBackend(options: WebGPUBackendOptions = {}): Promise<WebGPUBackendInfo> {
  const { adapter, source } = await findAdapter(options);
  const lim = adapter.limits;
  const subgroups = options.subgroups !== false && adapter.features.has("subgroups");
  const profile = options.profileKernels === true;
  if (profile && !adapter.features.has("timestamp-query")) throw new Error(`createWebGPUBackend: profileKernels needs the adapter's "timestamp-query" feature, which ${adapterName(adapter.info, source, subgroups)} lacks`);
  const features = [...(subgroups ? ["subgroups"] : []), ...(profile ? ["timestamp-query"] : [])];
  const device: GPUDeviceLike = await adapter.requestDevice({
    requiredFeatures: features,
    requiredLimits: {
      maxStorageBufferBindingSize: lim["maxStorageBufferBindingSize"]!,
      maxBufferSize: lim["maxBufferSize"]!,
      maxStorageBuffersPerShaderStage: lim["maxStorageBuffersPerShaderStage"]!,
    },
  });
  return new WebGPUBackend(device, adapterName(adapter.info, source, subgroups), options.attentionScratchFloats ?? 1 << 24, options.maxWeightBytes, subgroups, options.attentionKeysPerSplit ?? 256, options.tiledAttention !== false, options.keepHostWeights === true, options.dispatchesPerSubmit ?? MAX_BATCH, profile, tiledTypes(options.tiledMatmulTypes));
}

/**
 * What a model must fit on this machine's adapter, asked without creating a device (tsllm
 * inspect --backend webgpu): the adapter createWebGPUBackend would take, its largest buffer (the
 * backend's maxBufferBytes: it asks its device for the adapter's maxStorageBufferBindingSize)
 * and the weight types matmul has a kernel for. Throws findAdapter's error without one.
 */
export async function probeWebGPU(options: AdapterOptions = {}): Promise<{ adapter: string; maxBufferBytes: number; matmulTypes: readonly string[] }> {
  const { adapter, source } = await findAdapter(options);
  return { adapter: adapterName(adapter.info, source, adapter.features.has("subgroups")), maxBufferBytes: adapter.limits["maxStorageBufferBindingSize"]!, matmulTypes: Object.keys(MATMUL_TYPES) };
}

/** the storage of one cache side (every type of reference/kv-encoding.ts, rotated in chunks up to MAX_ROTATION) */
function kvSide(op: string, e: KVRowEncoding | undefined): KVSide {
  if (!e) return "f32";
  if (e.rotation > MAX_ROTATION) throw new Error(`${op}: ${e.type} rows rotated in chunks of ${e.rotation}: the webgpu backend rotates chunks of at most ${MAX_ROTATION} (a head dim of ${e.rotation}; use --cache-type-k / --cache-type-v f16 or f32)`);
  return e.type;
}

/** the row stride the attention kernels take for a side: elements (f32, f16) or bytes (the block formats) */
function kvStride(type: KVSide, width: number): number {
  const floats = kvRowFloats(type, width);
  return type === "f32" ? floats : type === "f16" ? 2 * floats : 4 * floats;
}

function adapterName(info: { vendor?: string; architecture?: string; description?: string } | undefined, source: string, subgroups: boolean): string {
  const what = [info?.vendor, info?.architecture].filter((s) => s).join(" ") || info?.description || "unknown adapter";
  return `${what}${subgroups ? ", subgroups" : ""}; ${source}`;
}

class WebGPUBackend implements WebGPUBackendInfo {
  readonly name = "webgpu";
  readonly canMultiply = (type: GGMLType): boolean => MATMUL_TYPES[typeName(type)] !== undefined;
  readonly adapter: string;
  readonly llamaCppOrder = "none" as const;
  /** K/V rows of every type: f32, f16 (two halves a float), q8_0 and q4_0 blocks (rotated as llama.cpp rotates them) */
  readonly kvCacheTypes: readonly KVCacheType[] = KV_CACHE_TYPES;
  readonly threads = 1;

  private readonly id = nextBackendId++;
  private readonly queue: GPUQueueLike;
  /** the adapter's maxStorageBufferBindingSize: every activation array (a layer's K or V of the KV pool too) is one binding */
  private readonly maxBinding: number;
  private disposed = false;
  /** Backend.failure once the device is lost (a driver reset, the GPU process gone, device.destroy() from outside) */
  private lostFailure: string | undefined;

  private encoder: GPUCommandEncoderLike | null = null;
  /** the compute pass every dispatch of the batch goes into (ended before a copy and at the submit) */
  private pass: GPUComputePassLike | null = null;
  private dispatches = 0;
  private dispatchTotal = 0;
  /** with profileKernels: timestamps around every dispatch */
  private readonly profiler: KernelProfiler | null;
  private submitTotal = 0;
  /** staging buffers mapped by reads (readCounters), those mapping now and the most at once */
  private maps = 0;
  private mapsInFlight = 0;
  private mostMapsInFlight = 0;
  private readonly uniformBuffer: GPUBufferLike;
  private readonly uniformMirror = new ArrayBuffer(SLOT * SLOTS);
  private readonly uniformU32 = new Uint32Array(this.uniformMirror);
  private readonly uniformF32 = new Float32Array(this.uniformMirror);
  private readonly uniformI32 = new Int32Array(this.uniformMirror);
  private slotsUsed = 0;
  private dataBuffer: GPUBufferLike;
  private dataMirror: Uint32Array;
  private dataUsed = 0;
  private readonly dummy: GPUBufferLike;
  /** bound where a kernel's optional output goes unused (a writable binding may not share dummy's buffer) */
  private readonly unusedOutput: GPUBufferLike;
  private readonly scratch = new Map<string, GPUBufferLike>();
  private deferredDestroy: GPUBufferLike[] = [];
  private readonly allBuffers = new Set<GPUBufferLike>();
  /** compiled kernels by definition, then by aliasing pattern (slotsCode) */
  private readonly kernels = new Map<KernelDef, Map<number, CompiledKernel>>();
  /** unmapped staging buffers of past reads, for the next ones (takeStaging) */
  private readonly stagingPool: GPUBufferLike[] = [];
  /** attentionRows' last checked row index (and the cache rows it was checked against) */
  private lastRows: { readonly copy: Uint32Array; readonly cacheRows: number } | null = null;
  /** the data array last copied into this batch's data buffer, and where: reused by identity */
  private lastData: { readonly data: Uint32Array; readonly offset: number } | null = null;
  /** setBindGroup's dynamic offset (Dawn copies it during the call, so one array serves every dispatch) */
  private readonly dynamicOffset = new Uint32Array(1);
  /**
   * An op held back one call so that the next may fuse with it: a residual add with the rmsNorm of
   * its sum, a RoPE with the RoPE of another array at the same positions (a layer's q, then k), an
   * f32 scatter with another through the same rows (a layer's keys, then its values), both RoPEs
   * with both scatters (rope2, then ropeScatter), an rmsNorm, a SwiGLU or attention with the
   * Q8_0 quantization of its output for the matmul that reads it.
   * Dispatching anything else, a copy and a submit release it first, so the order never changes.
   * A decode step of SmolLM's shape goes from 544 dispatches to 274: each one costs the host
   * ~14 us on an H200's host (Dawn and the driver), which bounds decode on a fast GPU (docs/webgpu.md).
   */
  private held: HeldOp | null = null;
  /**
   * Bind groups by kernel and bound buffers. Creating one costs more than the rest of a dispatch
   * (27 us of ~40 on lavapipe, 2 vCPUs); a decode step binds the same scratch, cache and weight
   * buffers every time (their offsets travel in the uniforms, whose slice is a dynamic offset), so
   * after the first step every dispatch finds its group here.
   */
  private readonly bindGroups = new Map<string, GPUBindGroupLike>();
  /** the bindGroups keys that hold each buffer (by bufferId), dropped when the buffer is destroyed */
  private readonly groupsOfBuffer = new Map<number, string[]>();
  private readonly bufferIds = new WeakMap<GPUBufferLike, number>();
  private nextBufferId = 0;
  private readonly weightBuffers = new WeakMap<object, Map<string, readonly WeightBlock[]>>();
  private readonly constBuffers = new WeakMap<Float32Array | Uint32Array, GPUBufferLike>();
  private geluTable: GPUBufferLike | null = null;
  private errors: Promise<string | null>[] = [];
  private readonly finalizer: FinalizationRegistry<GPUBufferLike>;

  private readonly scoresLimit: number;

  private readonly keysPerSplit: number;

  private readonly maxWeightBytes: number;

  /** host buffers of weights uploaded since the last read: their host bytes go at the next one (keepHostWeights aside) */
  private uploadedSinceRead: ArrayBufferLike[] = [];
  /** host buffers getRows reads: kept on the host, where it dequantizes their rows */
  private readonly rowsOnHost = new WeakSet<ArrayBufferLike>();
  /** the device copy of each weight whose host bytes were released (the detached buffer is the key) */
  private readonly released = new WeakMap<ArrayBufferLike, readonly WeightBlock[]>();

  constructor(private readonly device: GPUDeviceLike, adapter: string, scoresLimit: number, maxWeightBytes: number | undefined, private readonly subgroups: boolean, keysPerSplit: number, private readonly tiled: boolean, private readonly keepHostWeights: boolean, private readonly dispatchesPerSubmit: number, profile: boolean, private readonly tiledMatmulTypes: ReadonlySet<string>) {
    this.adapter = adapter;
    this.queue = device.queue;
    this.maxBinding = device.limits["maxStorageBufferBindingSize"] ?? 128 * 1024 * 1024;
    this.scoresLimit = Math.max(1, Math.min(scoresLimit, Math.floor(this.maxBinding / 4)));
    if (!(Number.isInteger(keysPerSplit) && keysPerSplit >= 1)) throw new Error(`createWebGPUBackend: attentionKeysPerSplit ${keysPerSplit} is not a positive integer`);
    this.keysPerSplit = keysPerSplit;
    if (!(Number.isInteger(dispatchesPerSubmit) && dispatchesPerSubmit >= 1)) throw new Error(`createWebGPUBackend: dispatchesPerSubmit ${dispatchesPerSubmit} is not a positive integer`);
    const maxBuffer = device.limits["maxBufferSize"] ?? this.maxBinding;
    this.maxWeightBytes = Math.floor(Math.min(maxWeightBytes ?? Infinity, this.maxBinding, maxBuffer) / 4) * 4;
    this.uniformBuffer = this.createBuffer(SLOT * SLOTS, BufferUsage.UNIFORM | BufferUsage.COPY_DST);
    this.dataMirror = new Uint32Array(1 << 16);
    this.dataBuffer = this.createBuffer(this.dataMirror.byteLength, BufferUsage.STORAGE | BufferUsage.COPY_DST);
    this.dummy = this.createBuffer(16, BufferUsage.STORAGE);
    this.unusedOutput = this.createBuffer(16, BufferUsage.STORAGE);
    this.profiler = profile ? new KernelProfiler(device) : null;
    this.finalizer = new FinalizationRegistry((buffer) => {
      // the buffer may still be used by recorded commands: destroy it after the next submit
      if (this.allBuffers.delete(buffer)) this.deferredDestroy.push(buffer);
    });
    // (dispose()'s own destroy() resolves it too: failure says nothing once disposed)
    void device.lost.then((info) => {
      const why = [info.reason, info.message].filter((part) => part !== undefined && part !== "").join("; ") || "none given";
      this.lostFailure = `webgpu backend: the GPU device was lost (reason: ${why}): load the model again`;
    });
  }

  get failure(): string | undefined {
    return this.disposed ? undefined : this.lostFailure;
  }

  // ---- plumbing ----

  private alive(op: string): void {
    if (this.disposed) throw new Error(`webgpu backend: ${op} called after dispose()`);
    if (this.lostFailure !== undefined) throw new Error(this.lostFailure);
  }

  /** a device call's rejection: the device's loss where that is the cause, else the call's own error named (as it was after dispose()) */
  private async lostOr(op: string, e: unknown): Promise<unknown> {
    if (!this.disposed && this.lostFailure === undefined && e instanceof Error && e.name === "AbortError") {
      let timer: ReturnType<typeof setTimeout> | undefined;
      // the constructor's handler of the lost promise runs before this wait's end: lostFailure is set then
      await Promise.race([this.device.lost, new Promise((resolve) => (timer = setTimeout(resolve, LOST_NEWS_MS)))]);
      clearTimeout(timer);
    }
    if (this.disposed) return e;
    if (this.lostFailure !== undefined) return new Error(this.lostFailure);
    const what = e instanceof Error ? [e.name, e.message].filter((part) => part !== "").join(": ") : String(e);
    return new Error(`webgpu backend: ${op}: the GPU answered ${what}`, { cause: e });
  }

  private createBuffer(size: number, usage: number): GPUBufferLike {
    const buffer = this.device.createBuffer({ size: Math.max(16, Math.ceil(size / 16) * 16), usage });
    this.allBuffers.add(buffer);
    return buffer;
  }

  private arr(op: string, what: string, a: DeviceArray): GpuArray {
    if (!(a instanceof GpuArray) || a.owner !== this.id) throw new Error(`${op}: ${what} is not an array of this webgpu backend (allocActivations / view)`);
    return a;
  }

  /**
   * the kernel's pipeline for this aliasing pattern, on an explicit layout: the uniform slice is
   * bound at a dynamic offset, so one bind group serves every dispatch on the same buffers
   */
  private kernel(def: KernelDef, slots: readonly number[], slotsCode: number): CompiledKernel {
    let byPattern = this.kernels.get(def);
    if (!byPattern) this.kernels.set(def, (byPattern = new Map()));
    let k = byPattern.get(slotsCode);
    if (!k) {
      const code = buildShader(def, slots);
      const module = this.device.createShaderModule({ code, label: def.name });
      const nSlots = slots.length === 0 ? 0 : Math.max(...slots) + 1;
      const storage = (binding: number, written: boolean): GPUBindGroupLayoutEntryLike => ({ binding, visibility: ShaderStage.COMPUTE, buffer: { type: written ? "storage" : "read-only-storage" } });
      const entries: GPUBindGroupLayoutEntryLike[] = [{ binding: 0, visibility: ShaderStage.COMPUTE, buffer: { type: "uniform", hasDynamicOffset: true } }];
      for (let b = 0; b < nSlots; b++) entries.push(storage(1 + b, def.arrays.some((a, i) => slots[i] === b && a.write)));
      def.extras.forEach((e, i) => entries.push(storage(1 + nSlots + i, e.write === true)));
      const layout = this.device.createBindGroupLayout({ entries, label: def.name });
      const pipeline = this.device.createComputePipeline({ layout: this.device.createPipelineLayout({ bindGroupLayouts: [layout], label: def.name }), compute: { module, entryPoint: "main" }, label: def.name });
      k = { key: `${def.name}|${slots.join(",")}`, pipeline, layout, params: paramLayout(def) };
      byPattern.set(slotsCode, k);
    }
    return k;
  }

  private bufferId(b: GPUBufferLike): number {
    let id = this.bufferIds.get(b);
    if (id === undefined) {
      id = this.nextBufferId++;
      this.bufferIds.set(b, id);
    }
    return id;
  }

  /** the kernel's bind group over these buffers (uniforms first, at offset 0: the dispatch gives the slice) */
  private bindGroup(k: CompiledKernel, buffers: readonly GPUBufferLike[]): GPUBindGroupLike {
    const ids: number[] = [];
    let key = `${k.key}#`;
    for (const b of buffers) {
      const id = this.bufferId(b);
      ids.push(id);
      key += `${id},`;
    }
    let group = this.bindGroups.get(key);
    if (!group) {
      // bounded however buffers come and go (each destroyed buffer also takes its groups along)
      if (this.bindGroups.size >= MAX_BIND_GROUPS) {
        this.bindGroups.clear();
        this.groupsOfBuffer.clear();
      }
      const entries: GPUBindGroupEntryLike[] = buffers.map((buffer, i) => ({ binding: i, resource: i === 0 ? { buffer, offset: 0, size: SLOT } : { buffer } }));
      group = this.device.createBindGroup({ layout: k.layout, entries });
      this.bindGroups.set(key, group);
      for (const id of new Set(ids)) {
        const keys = this.groupsOfBuffer.get(id);
        if (keys) keys.push(key);
        else this.groupsOfBuffer.set(id, [key]);
      }
    }
    return group;
  }

  /** destroys a buffer no recorded command uses any more, with the bind groups that hold it */
  private destroyBuffer(b: GPUBufferLike): void {
    const id = this.bufferIds.get(b);
    if (id !== undefined) {
      for (const key of this.groupsOfBuffer.get(id) ?? []) this.bindGroups.delete(key);
      this.groupsOfBuffer.delete(id);
    }
    b.destroy();
  }

  /** a scratch buffer of at least `floats` floats, reused across dispatches (WebGPU orders dispatches that share it) */
  private scratchBuffer(name: string, floats: number): GPUBufferLike {
    const bytes = Math.max(16, floats * 4);
    const old = this.scratch.get(name);
    if (old && old.size >= bytes) return old;
    if (bytes > this.maxBinding) throw new Error(`webgpu backend: scratch ${name} needs ${bytes} bytes, more than this adapter's maxStorageBufferBindingSize ${this.maxBinding}`);
    if (old) {
      this.allBuffers.delete(old);
      this.deferredDestroy.push(old);
    }
    const b = this.createBuffer(Math.max(bytes, (old?.size ?? 0) * 2), BufferUsage.STORAGE);
    this.scratch.set(name, b);
    return b;
  }

  private beginBatch(): GPUCommandEncoderLike {
    if (!this.encoder) {
      this.device.pushErrorScope("validation");
      this.encoder = this.device.createCommandEncoder();
    }
    return this.encoder;
  }

  /** holds `op` back for a fusion with the next call, dispatching what was held before */
  private hold(op: HeldOp): void {
    this.releaseHeld();
    this.held = op;
  }

  /** dispatches the held op (see `held`) */
  private releaseHeld(): void {
    const h = this.held;
    if (!h) return;
    this.held = null;
    if (h.op === "add") this.dispatch(ADD, [h.x, h.y], [], [h.x.length], Math.ceil(h.x.length / 256));
    else if (h.op === "norm") this.dispatchNorm(h, null);
    else if (h.op === "swiglu") this.dispatch(SWIGLU, [h.out, h.gate, h.up], [], [h.n], Math.ceil(h.n / 256));
    else if (h.op === "attention") h.dispatch(null);
    else if (h.op === "rope2") this.dispatchRopeTwo(h);
    else if (h.op === "ropeScatter") {
      this.dispatchRopeTwo(h.rope);
      this.dispatchScatter(h.dst, h.rope.x2, h.width, h.rows);
    }
    else if (h.op === "rope") this.dispatch(ROPE, [h.x], ["D"], [h.pairs, ...h.params, 0], Math.ceil(h.pairs / 256), new Uint32Array(h.table.buffer));
    else this.dispatchScatter(h.dst, h.src, h.width, h.rows);
  }

  /** an f32 scatter of src's rows of `width` to dst's rows `rows` */
  private dispatchScatter(dst: GpuArray, src: GpuArray, width: number, rows: Uint32Array): void {
    this.dispatch(SCATTER_ROWS, [dst, src], ["D"], [rows.length * width, width, 0], Math.ceil((rows.length * width) / 256), rows);
  }

  private dispatchRopeTwo(h: RopeTwo): void {
    this.dispatch(ROPE_TWO, [h.x, h.x2], ["D"], [h.pairs + h.pairs2, ...h.params, 0, h.pairs, h.nHeads2], Math.ceil((h.pairs + h.pairs2) / 256), new Uint32Array(h.table.buffer));
  }

  /** a held rmsNorm (with its add, if any), and with `xq` the Q8_0 or Q8_K (`superBlocks`) quantization of its output into that scratch */
  private dispatchNorm(h: Extract<HeldOp, { op: "norm" }>, xq: GPUBufferLike | null, superBlocks = false): void {
    const kernels = xq
      ? superBlocks ? (h.y ? NORMS.addRmsQ8_K : NORMS.rmsQ8_K) : h.y ? NORMS.addRmsQ8_0 : NORMS.rmsQ8_0
      : h.y ? NORMS.addRms : NORMS.rms;
    const arrays = h.y ? [h.out, h.x, h.y] : [h.out, h.x];
    const params = [h.width, h.eps, h.hasWeight ? 1 : 0];
    if (xq) params.push((h.width * h.rows) / 4);
    this.dispatch(this.subgroups ? kernels.subgroups : kernels.plain, arrays, xq ? [h.weight, xq] : [h.weight], params, h.rows);
  }

  /** the batch's encoder for a command outside a compute pass (a copy): the open pass is ended first */
  private encoderOutsidePass(): GPUCommandEncoderLike {
    this.releaseHeld();
    this.pass?.end();
    this.pass = null;
    return this.beginBatch();
  }

  /**
   * the batch's compute pass: one for all its dispatches (a pass per dispatch cost ~6 us more each
   * on lavapipe); WebGPU still orders each dispatch's storage writes before the next one's reads
   */
  private computePass(kernel: string): GPUComputePassLike {
    if (this.profiler) {
      // timestamps are written at a pass's start and end only: a pass per dispatch
      this.pass?.end();
      this.pass = this.beginBatch().beginComputePass(this.profiler.passFor(kernel));
    }
    this.pass ??= this.beginBatch().beginComputePass();
    return this.pass;
  }

  counters(): { dispatches: number; submits: number } {
    return { dispatches: this.dispatchTotal, submits: this.submitTotal };
  }

  readCounters(): { maps: number; mostInFlight: number } {
    return { maps: this.maps, mostInFlight: this.mostMapsInFlight };
  }

  async kernelTimes(): Promise<KernelTime[]> {
    if (!this.profiler) throw new Error("kernelTimes: the backend was created without profileKernels");
    this.flush();
    return this.profiler.take();
  }

  /** submits what is recorded (uploading its parameters and data first) */
  private flush(): void {
    this.releaseHeld();
    if (!this.encoder) return;
    if (this.slotsUsed > 0) this.queue.writeBuffer(this.uniformBuffer, 0, this.uniformMirror, 0, this.slotsUsed * SLOT);
    if (this.dataUsed > 0) this.queue.writeBuffer(this.dataBuffer, 0, this.dataMirror, 0, this.dataUsed);
    this.pass?.end();
    this.pass = null;
    const profiled = this.profiler?.endBatch(this.encoder);
    this.queue.submit([this.encoder.finish()]);
    profiled?.();
    this.submitTotal++;
    this.encoder = null;
    this.dispatches = 0;
    this.slotsUsed = 0;
    this.dataUsed = 0;
    this.lastData = null;
    this.errors.push(this.device.popErrorScope().then((e) => (e ? e.message : null)));
    for (const b of this.deferredDestroy) this.destroyBuffer(b);
    this.deferredDestroy = [];
  }

  private async checkErrors(op: string): Promise<void> {
    const pending = this.errors;
    this.errors = [];
    const messages = (await Promise.all(pending).catch(async (e: unknown) => { throw await this.lostOr(op, e); })).filter((m): m is string => m !== null);
    if (messages.length > 0) throw new Error(`webgpu backend: ${op}: the GPU reported ${messages.length} error(s): ${messages[0]!.split("\n")[0]}`);
  }

  /**
   * records one dispatch: `arrays` in the order of def.arrays (views of one buffer share a binding),
   * `extras` in the order of def.extras ("D" gets the data buffer), `params` in def.params order,
   * `data` (u32 words) copied into the data buffer, its word offset given as the param "o_d".
   */
  private dispatch(def: KernelDef, arrays: readonly GpuArray[], extras: readonly (GPUBufferLike | "D")[], params: readonly number[], groups: number, data?: Uint32Array): void {
    this.releaseHeld();
    if (groups <= 0) return;
    const words = data ? Math.ceil(data.length / 4) * 4 : 0;
    // room for this dispatch's uniform slice and data, else submit what is recorded first
    if (this.slotsUsed >= SLOTS || this.dataUsed + words > this.dataMirror.length || this.dispatches >= this.dispatchesPerSubmit || this.profiler?.full) this.flush();
    if (words > this.dataMirror.length) {
      this.allBuffers.delete(this.dataBuffer);
      this.destroyBuffer(this.dataBuffer);
      this.dataMirror = new Uint32Array(Math.max(words, 2 * this.dataMirror.length));
      this.dataBuffer = this.createBuffer(this.dataMirror.byteLength, BufferUsage.STORAGE | BufferUsage.COPY_DST);
    }
    let dataOffset = this.dataUsed;
    if (data && this.lastData?.data === data) dataOffset = this.lastData.offset;
    else if (data) {
      this.dataMirror.set(data, dataOffset);
      this.dataUsed += words;
      this.lastData = { data, offset: dataOffset };
    }
    // bindings: the uniforms, one per distinct buffer of the arrays, then the extras; the arrays'
    // slots (their binding less one) also packed four bits each into a number, the kernel's key
    const buffers: GPUBufferLike[] = [this.uniformBuffer];
    const slots: number[] = [];
    let slotsCode = 0;
    for (let i = 0; i < arrays.length; i++) {
      let s = buffers.indexOf(arrays[i]!.buffer, 1) - 1;
      if (s < 0) s = buffers.push(arrays[i]!.buffer) - 2;
      slots.push(s);
      slotsCode += s * 16 ** i;
    }
    const k = this.kernel(def, slots, slotsCode);
    // uniforms: nwg, the array offsets, then the params (o_d filled in here)
    const slot = this.slotsUsed++;
    const base = (slot * SLOT) / 4;
    const layout = k.params;
    const nArrays = arrays.length;
    for (let i = 0; i < layout.length; i++) {
      const [name, type] = layout[i]!;
      const v = i === 0 ? groups : i <= nArrays ? arrays[i - 1]!.offset : name === "o_d" ? dataOffset : params[i - 1 - nArrays]!;
      if (type === "f32") this.uniformF32[base + i] = v;
      else if (type === "i32") this.uniformI32[base + i] = v;
      else {
        if (!(Number.isInteger(v) && v >= 0 && v <= 0xffffffff)) throw new Error(`webgpu backend: ${def.name}: parameter ${name} = ${v} is not a u32`);
        this.uniformU32[base + i] = v;
      }
    }
    for (const e of extras) buffers.push(e === "D" ? this.dataBuffer : e);
    const bindGroup = this.bindGroup(k, buffers);
    const pass = this.computePass(def.name);
    pass.setPipeline(k.pipeline);
    this.dynamicOffset[0] = slot * SLOT;
    pass.setBindGroup(0, bindGroup, this.dynamicOffset, 0, 1);
    const x = Math.min(groups, MAX_GROUPS);
    pass.dispatchWorkgroups(x, Math.ceil(groups / x));
    this.dispatches++;
    this.dispatchTotal++;
  }

  /** a GPU copy of a small host array that never changes (norm weights, biases, the i-quants' grids) */
  private constBuffer(a: Float32Array | Uint32Array): GPUBufferLike {
    let b = this.constBuffers.get(a);
    if (!b) {
      b = this.createBuffer(a.byteLength, BufferUsage.STORAGE | BufferUsage.COPY_DST);
      this.upload(b, 0, a);
      this.constBuffers.set(a, b);
      this.finalizer.register(a, b);
    }
    return b;
  }

  /**
   * the tensor's rows on the device, uploaded on first use as they are: one buffer, or blocks of
   * whole rows when the tensor is larger than one storage binding may be (maxWeightBytes)
   */
  private weightBlocks(op: string, w: Tensor, rows: number, rowBytes: number): readonly WeightBlock[] {
    const gone = this.released.get(w.data.buffer);
    if (gone) return gone;
    const key = `${w.data.byteOffset}:${rows * rowBytes}`;
    let m = this.weightBuffers.get(w.data.buffer);
    if (!m) {
      m = new Map();
      this.weightBuffers.set(w.data.buffer, m);
    }
    let blocks = m.get(key);
    if (!blocks) {
      const made: WeightBlock[] = [];
      const perBlock = Math.floor(this.maxWeightBytes / rowBytes);
      if (perBlock === 0) throw new Error(`${op}: tensor ${w.name} (${typeName(w.type)} [${w.dims.join(", ")}]) has rows of ${rowBytes} bytes, more than this adapter's storage binding limit ${this.maxWeightBytes}`);
      for (let r0 = 0; r0 < rows; r0 += perBlock) {
        const n = Math.min(perBlock, rows - r0);
        const buffer = this.createBuffer(n * rowBytes, BufferUsage.STORAGE | BufferUsage.COPY_DST);
        this.upload(buffer, 0, w.data.subarray(r0 * rowBytes, (r0 + n) * rowBytes));
        this.finalizer.register(w.data.buffer, buffer);
        made.push({ buffer, row: r0, rows: n });
      }
      m.set(key, made);
      blocks = made;
      this.uploadedSinceRead.push(w.data.buffer);
    }
    return blocks;
  }

  /**
   * The host bytes of the weights uploaded so far, detached (structuredClone's transfer moves the
   * memory out and the clone is dropped): the device copy is then the only one. Done at a read, so
   * that the first pass has marked the tensors getRows needs on the host (the token embedding,
   * read before the output matmul that a tied embedding shares); a buffer holding several uploaded
   * views is kept (its views could not be told apart once detached).
   */
  private releaseHostWeights(): void {
    const pending = this.uploadedSinceRead;
    this.uploadedSinceRead = [];
    if (this.keepHostWeights) return;
    for (const buffer of pending) {
      const views = this.weightBuffers.get(buffer);
      if (this.rowsOnHost.has(buffer) || this.released.has(buffer) || !views || views.size !== 1 || !(buffer instanceof ArrayBuffer)) continue;
      this.released.set(buffer, [...views.values()][0]!);
      structuredClone(buffer, { transfer: [buffer] });
    }
  }

  /** queue.writeBuffer of whole 4-byte words from any typed array (a shared one is copied first) */
  private upload(buffer: GPUBufferLike, byteOffset: number, src: ArrayBufferView): void {
    let bytes = new Uint8Array(src.buffer, src.byteOffset, src.byteLength);
    if (!(bytes.buffer instanceof ArrayBuffer) || bytes.byteLength % 4 !== 0) {
      const copy = new Uint8Array(Math.ceil(bytes.byteLength / 4) * 4);
      copy.set(bytes);
      bytes = copy;
    }
    this.queue.writeBuffer(buffer, byteOffset, bytes.buffer as ArrayBuffer, bytes.byteOffset, bytes.byteLength);
  }

  private checkLength(op: string, what: string, a: GpuArray, need: number, detail: string): void {
    if (a.length < need) throw new Error(`${op}: ${what} holds ${a.length} floats, expected ${detail}`);
  }

  private checkCount(op: string, what: string, v: number): void {
    if (!Number.isInteger(v) || v < 0) throw new Error(`${op}: ${what} must be a non-negative integer, got ${v}`);
  }

  // ---- memory ----

  allocWeights(byteLength: number): Uint8Array {
    this.alive("allocWeights");
    if (!Number.isSafeInteger(byteLength) || byteLength < 0) throw new Error(`allocWeights: byteLength must be a non-negative integer, got ${byteLength}`);
    return new Uint8Array(new ArrayBuffer(Math.ceil(byteLength / ALIGN) * ALIGN), 0, byteLength);
  }

  get maxBufferBytes(): number {
    return this.maxBinding;
  }

  allocActivations(length: number): DeviceArray {
    this.alive("allocActivations");
    this.checkCount("allocActivations", "length", length);
    if (length * 4 > this.maxBinding) throw new Error(`allocActivations: ${length} floats (${length * 4} bytes) are more than this adapter's maxStorageBufferBindingSize ${this.maxBinding}`);
    const buffer = this.createBuffer(length * 4, BufferUsage.STORAGE | BufferUsage.COPY_SRC | BufferUsage.COPY_DST);
    const a = new GpuArray(buffer, 0, length, this.id, null);
    this.finalizer.register(a, buffer);
    return device(a);
  }

  view(a: DeviceArray, offset: number, length?: number): DeviceArray {
    const g = this.arr("view", "the array", a);
    this.checkCount("view", "offset", offset);
    const n = length ?? g.length - offset;
    this.checkCount("view", "length", n);
    if (offset + n > g.length) throw new Error(`view: floats [${offset}, ${offset + n}) are outside the array's ${g.length}`);
    return device(new GpuArray(g.buffer, g.offset + offset, n, this.id, g.root ?? g));
  }

  write(dst: DeviceArray, src: ArrayLike<number>, offset = 0): void {
    this.alive("write");
    const d = this.arr("write", "dst", dst);
    this.checkCount("write", "offset", offset);
    if (offset + src.length > d.length) throw new Error(`write: ${src.length} floats at offset ${offset} do not fit in dst's ${d.length}`);
    if (src.length === 0) return;
    // ordered after every op recorded so far
    this.flush();
    const f = src instanceof Float32Array ? src : Float32Array.from(src);
    this.upload(d.buffer, (d.offset + offset) * 4, f);
  }

  async read(a: DeviceArray): Promise<Float32Array> {
    this.alive("read");
    return this.readArrays("read", [this.arr("read", "the array", a)]);
  }

  async readParts(parts: readonly DeviceArray[]): Promise<Float32Array> {
    this.alive("readParts");
    return this.readArrays("readParts", parts.map((p, i) => this.arr("readParts", `part ${i}`, p)));
  }

  /** the arrays' floats one after another: a copy of each into one staging buffer, submitted with what is recorded, and one map */
  private async readArrays(op: string, arrays: readonly GpuArray[]): Promise<Float32Array> {
    let floats = 0;
    for (const g of arrays) floats += g.length;
    if (floats === 0) {
      this.flush();
      this.releaseHostWeights();
      await this.checkErrors(op);
      return new Float32Array(0);
    }
    const bytes = Math.ceil(floats / 4) * 16;
    const staging = this.takeStaging(bytes);
    const encoder = this.encoderOutsidePass();
    let at = 0;
    for (const g of arrays) {
      if (g.length > 0) encoder.copyBufferToBuffer(g.buffer, g.offset * 4, staging, at * 4, g.length * 4);
      at += g.length;
    }
    this.flush();
    this.releaseHostWeights();
    let reusable = false;
    this.maps++;
    this.mostMapsInFlight = Math.max(this.mostMapsInFlight, ++this.mapsInFlight);
    try {
      // a device lost meanwhile fails the map with an AbortError (Dawn's bare, chromium's before it tells of the loss): the loss is the error
      await staging.mapAsync(MapMode.READ, 0, floats * 4).catch(async (e: unknown) => { throw await this.lostOr(op, e); });
      const result = new Float32Array(staging.getMappedRange(0, floats * 4).slice(0));
      staging.unmap();
      reusable = true;
      await this.checkErrors(op);
      return result;
    } finally {
      this.mapsInFlight--;
      if (reusable && !this.disposed && this.stagingPool.length < STAGING_KEPT) this.stagingPool.push(staging);
      else staging.destroy();
    }
  }

  /**
   * a mappable buffer of at least `bytes` for a read: a kept one (a decode step reads the same
   * logits size every time) or a new one; reads under way at once each take their own
   */
  private takeStaging(bytes: number): GPUBufferLike {
    const i = this.stagingPool.findIndex((b) => b.size >= bytes);
    if (i >= 0) return this.stagingPool.splice(i, 1)[0]!;
    return this.device.createBuffer({ size: bytes, usage: BufferUsage.MAP_READ | BufferUsage.COPY_DST });
  }

  scatterRows(dst: DeviceArray, dstRows: Int32Array, src: DeviceArray, width: number, n: number, encoding?: KVRowEncoding): void {
    this.alive("scatterRows");
    const type = kvSide("scatterRows", encoding);
    const d = this.arr("scatterRows", "dst", dst), s = this.arr("scatterRows", "src", src);
    this.checkCount("scatterRows", "width", width);
    this.checkCount("scatterRows", "n", n);
    if (dstRows.length < n) throw new Error(`scatterRows: the row index holds ${dstRows.length} rows, ${n} are written`);
    this.checkLength("scatterRows", "src", s, n * width, `${n} x ${width}`);
    const rowFloats = kvRowFloats(type, width);
    const cap = width > 0 ? Math.floor(d.length / rowFloats) : Infinity;
    for (let i = 0; i < n; i++) {
      const r = dstRows[i]!;
      if (!(r >= 0 && r < cap)) throw new Error(`scatterRows: row ${i} goes to row ${r}, outside dst's ${cap} rows of ${width} ${type} values`);
    }
    if (n * width === 0) return;
    const rowIndex = new Uint32Array(dstRows.buffer, dstRows.byteOffset, n);
    if (type === "f16") this.dispatch(SCATTER_ROWS_F16, [d, s], ["D"], [n * rowFloats, width, rowFloats, 0], Math.ceil((n * rowFloats) / 256), rowIndex);
    else if (type === "f32") {
      const h = this.held;
      if (h?.op === "rope2" && h.params[3] === h.params[2] && s.buffer === h.x2.buffer && s.offset === h.x2.offset && n * width === 2 * h.pairs2 && width === h.nHeads2 * h.params[2]
        && !overlaps(d, h.x) && !overlaps(d, h.x2)) {
        // the keys just rotated (whole heads), written to their cache: held for the values' scatter
        this.held = null;
        this.hold({ op: "ropeScatter", rope: h, dst: d, width, rows: rowIndex.slice() });
        return;
      }
      if (h?.op === "ropeScatter" && h.width === width && h.rows.length === n && sameValues(h.rows, rowIndex)
        && !overlaps(d, h.rope.x) && !overlaps(d, h.rope.x2) && !overlaps(d, h.dst) && !overlaps(s, h.rope.x) && !overlaps(s, h.rope.x2) && !overlaps(s, h.dst)) {
        // ... and the values through the same rows: RoPE of q and k and both cache writes, one dispatch
        this.held = null;
        const r = h.rope, total = r.pairs + r.pairs2 + n * width;
        const data = new Uint32Array(r.table.length + n);
        data.set(new Uint32Array(r.table.buffer, r.table.byteOffset, r.table.length));
        data.set(h.rows, r.table.length);
        this.dispatch(ROPE_SCATTER, [r.x, r.x2, h.dst, d, s], ["D"], [total, ...r.params, 0, r.pairs, r.nHeads2, r.pairs2, width, r.table.length], Math.ceil(total / 256), data);
        return;
      }
      if (h?.op === "scatter" && h.width === width && h.rows.length === n && sameValues(h.rows, rowIndex) && !overlaps(h.dst, s) && !overlaps(d, h.src) && !overlaps(h.dst, d)) {
        // the held scatter's rows (a layer's keys; these its values): one dispatch
        this.held = null;
        this.dispatch(SCATTER_ROWS_TWO, [h.dst, h.src, d, s], ["D"], [2 * n * width, width, 0, n * width], Math.ceil((2 * n * width) / 256), h.rows);
        return;
      }
      // the caller may reuse its row index once this returns: the held op keeps a copy
      this.hold({ op: "scatter", dst: d, src: s, width, rows: rowIndex.slice() });
    }
    else {
      if (width % 32 !== 0) throw new Error(`scatterRows: ${type} rows need a width that is a multiple of 32, got ${width}`);
      this.dispatch(type === "q8_0" ? SCATTER_ROWS_Q8_0 : SCATTER_ROWS_Q4_0, [d, s], ["D"], [n, width, 4 * rowFloats, encoding?.rotation ?? 0, 0], Math.ceil(n / 64), rowIndex);
    }
  }

  gatherRows(dst: DeviceArray, src: DeviceArray, srcRows: ArrayLike<number>, width: number): void {
    this.alive("gatherRows");
    const d = this.arr("gatherRows", "dst", dst), s = this.arr("gatherRows", "src", src);
    this.checkCount("gatherRows", "width", width);
    const n = srcRows.length;
    this.checkLength("gatherRows", "dst", d, n * width, `${n} x ${width}`);
    const cap = width > 0 ? Math.floor(s.length / width) : Infinity;
    const rows = new Uint32Array(n);
    for (let i = 0; i < n; i++) {
      const r = srcRows[i]!;
      if (!(Number.isInteger(r) && r >= 0 && r < cap)) throw new Error(`gatherRows: row ${i} comes from row ${r}, outside src's ${cap} rows of ${width}`);
      rows[i] = r;
    }
    if (n * width === 0) return;
    this.dispatch(GATHER_ROWS, [d, s], ["D"], [n * width, width, 0], Math.ceil((n * width) / 256), rows);
  }

  copy2d(dst: DeviceArray, dstOffset: number, dstStride: number, src: DeviceArray, srcOffset: number, srcStride: number, rows: number, width: number): void {
    this.alive("copy2d");
    const d = this.arr("copy2d", "dst", dst), s = this.arr("copy2d", "src", src);
    for (const [k, v] of Object.entries({ dstOffset, dstStride, srcOffset, srcStride, rows, width })) this.checkCount("copy2d", k, v);
    if (rows === 0 || width === 0) return;
    const dEnd = (rows - 1) * dstStride + dstOffset + width, sEnd = (rows - 1) * srcStride + srcOffset + width;
    if (dEnd > d.length) throw new Error(`copy2d: dst holds ${d.length} floats, the copy reaches ${dEnd}`);
    if (sEnd > s.length) throw new Error(`copy2d: src holds ${s.length} floats, the copy reaches ${sEnd}`);
    if (d.buffer === s.buffer && d.offset + dstOffset === s.offset + srcOffset && dstStride === srcStride) return; // the same floats
    const dv = new GpuArray(d.buffer, d.offset + dstOffset, d.length - dstOffset, this.id, d.root ?? d);
    const sv = new GpuArray(s.buffer, s.offset + srcOffset, s.length - srcOffset, this.id, s.root ?? s);
    this.dispatch(COPY_2D, [dv, sv], [], [rows * width, width, dstStride, srcStride], Math.ceil((rows * width) / 256));
  }

  // ---- ops ----

  matmul(out: DeviceArray, w: Tensor, x: DeviceArray, nTokens: number, epilogue?: MatmulEpilogue): void {
    this.alive("matmul");
    const o = this.arr(`matmul ${w.name}`, "out", out), xa = this.arr(`matmul ${w.name}`, "x", x);
    const type = typeName(w.type);
    const kind = MATMUL_TYPES[type];
    if (kind === undefined) throw new Error(`matmul: tensor ${w.name} has type ${type}, which the webgpu backend cannot multiply (it has ${Object.keys(MATMUL_TYPES).join(", ")}); run this model on the wasm backend`);
    // a weight whose host bytes were released was checked when it was uploaded
    const { cols, rows, rowBytes } = this.released.has(w.data.buffer) ? matrixDims("matmul", w) : matrixShape("matmul", w);
    const bias = epilogue?.bias;
    if (bias && bias.length !== rows) throw new Error(`matmul ${w.name}: bias holds ${bias.length} floats, expected ${rows} (one per output row)`);
    const activation = epilogue?.activation;
    if (activation !== undefined && activation !== "gelu-erf") throw new Error(`matmul ${w.name}: unknown activation ${JSON.stringify(activation)} (expected "gelu-erf")`);
    this.checkCount("matmul", "nTokens", nTokens);
    this.checkLength(`matmul ${w.name}`, "x", xa, nTokens * cols, `${nTokens} x ${cols}`);
    this.checkLength(`matmul ${w.name}`, "out", o, nTokens * rows, `${nTokens} x ${rows}`);
    if (nTokens === 0 || rows === 0) return;
    const blocks = this.weightBlocks("matmul", w, rows, rowBytes);
    const n = nTokens * cols;
    let nqw = 0;
    let xq = this.dummy;
    const h = this.held;
    // the held norm (Q8_0 or Q8_K activations) or SwiGLU (Q8_0: one invocation per 256 would serialize
    // it) wrote exactly this x, in whole blocks: it quantizes what it writes, in the same dispatch
    // (attention likewise: it holds itself back only where it can quantize, Q8_0 by heads)
    const superBlocks = kind.quant === QUANT_Q8_K;
    const fuse = (kind.quant === QUANT_Q8_0 || superBlocks) && (h?.op === "norm" || (h?.op === "swiglu" && !superBlocks) || (h?.op === "attention" && !superBlocks))
      && h.out.buffer === xa.buffer && h.out.offset === xa.offset && (h.op === "norm" ? h.width % kind.block === 0 && h.width * h.rows === n : h.n % kind.block === 0 && h.n === n);
    if (fuse) {
      this.held = null;
      const nBlocks = n / kind.block;
      nqw = n / 4;
      xq = this.scratchBuffer("xq", nqw + nBlocks);
      if (h.op === "norm") this.dispatchNorm(h, xq, superBlocks);
      else if (h.op === "attention") h.dispatch({ xq, nqw, base: xa.offset });
      else this.dispatch(SWIGLU_Q8_0, [h.out, h.gate, h.up], [xq], [nBlocks, nqw], Math.ceil(nBlocks / 64));
    } else if (kind.quant) {
      if (kind.block === 1) {
        xq = this.scratchBuffer("xq", n);
        this.dispatch(kind.quant, [xa], [xq], [n], Math.ceil(n / 256));
      } else {
        const nBlocks = n / kind.block;
        nqw = n / 4;
        xq = this.scratchBuffer("xq", nqw + nBlocks * kind.scaleWords);
        this.dispatch(kind.quant, [xa], [xq], [nBlocks, nqw], Math.ceil(nBlocks / 64));
      }
    }
    const tiles = Math.ceil(nTokens / MATMUL_TILE);
    const biasBuffer = bias ? this.constBuffer(bias) : this.dummy;
    const grid = MATMUL_GRIDS[type];
    const gridBuffer = grid ? [this.constBuffer(grid)] : [];
    // (its loads take four columns at a time: rows of at least four)
    const tiled = this.tiledMatmulTypes.has(type) && nTokens >= TILED_MATMUL_MIN_TOKENS && cols >= 4;
    for (const blk of blocks) {
      const params = [blk.rows, rows, blk.row, cols, rowBytes, nqw, Math.ceil(cols / 32), tiles, nTokens, bias ? 1 : 0, activation ? 1 : 0, 0];
      if (tiled) this.dispatch(tiledMatmulDef(type), [this.sub(o, blk.row), xa], [blk.buffer, xq, biasBuffer, ...gridBuffer], params, Math.ceil(blk.rows / TILED_MATMUL.rows) * Math.ceil(nTokens / TILED_MATMUL.tokens));
      // a type that tiles folds its units in order on the one-row kernel too: a row's bits do not depend on its batch's size
      else this.dispatch(matmulDef(type, this.subgroups, this.tiledMatmulTypes.has(type)), [this.sub(o, blk.row), xa], [blk.buffer, xq, biasBuffer, ...gridBuffer], params, blk.rows * tiles);
    }
  }

  getRows(out: DeviceArray, w: Tensor, ids: ArrayLike<number>): void {
    this.alive("getRows");
    const o = this.arr(`getRows ${w.name}`, "out", out);
    if (this.released.has(w.data.buffer)) throw new Error(`getRows ${w.name}: its host bytes were released once it was on the GPU (a matmul used it before any getRows did); create the backend with keepHostWeights: true for such a model`);
    this.rowsOnHost.add(w.data.buffer);
    const { cols, rows, rowBytes } = matrixShape("getRows", w);
    this.checkLength(`getRows ${w.name}`, "out", o, ids.length * cols, `${ids.length} x ${cols}`);
    for (let i = 0; i < ids.length; i++) {
      const id = ids[i]!;
      if (!Number.isInteger(id) || id < 0 || id >= rows) throw new Error(`getRows ${w.name}: row id ${id} at index ${i} is outside 0..${rows - 1}`);
    }
    // dequantized on the host (one small upload per forward), written in order after recorded ops
    const host = new Float32Array(ids.length * cols);
    for (let i = 0; i < ids.length; i++) {
      const id = ids[i]!;
      dequantizeRow(w.type, w.data.subarray(id * rowBytes, (id + 1) * rowBytes), host.subarray(i * cols, (i + 1) * cols), cols);
    }
    this.write(device(o), host);
  }

  rmsNorm(out: DeviceArray, x: DeviceArray, weight: Float32Array | null, width: number, rows: number, eps: number): void {
    this.alive("rmsNorm");
    const o = this.arr("rmsNorm", "out", out), xa = this.arr("rmsNorm", "x", x);
    this.checkCount("rmsNorm", "width", width);
    this.checkCount("rmsNorm", "rows", rows);
    this.checkLength("rmsNorm", "x", xa, width * rows, `${rows} x ${width}`);
    this.checkLength("rmsNorm", "out", o, width * rows, `${rows} x ${width}`);
    if (weight && weight.length < width) throw new Error(`rmsNorm: weight holds ${weight.length} floats, expected ${width}`);
    if (width === 0) return;
    const nw = weight ? this.constBuffer(weight) : this.dummy;
    const h = this.held;
    // the held residual add into exactly this x (y apart from x and out; out x itself or apart): one dispatch
    const fuseAdd = h?.op === "add" && h.x.buffer === xa.buffer && h.x.offset === xa.offset && h.x.length === width * rows && h.y.buffer !== xa.buffer && h.y.buffer !== o.buffer && (o.buffer !== xa.buffer || o.offset === xa.offset);
    if (fuseAdd) this.held = null;
    // held in turn: the matmul that reads it may quantize its rows in the same dispatch
    this.hold({ op: "norm", out: o, x: xa, y: fuseAdd ? h.y : null, weight: nw, width, rows, eps, hasWeight: weight !== null });
  }

  layerNorm(out: DeviceArray, x: DeviceArray, weight: Float32Array, bias: Float32Array, width: number, rows: number, eps: number): void {
    this.alive("layerNorm");
    const o = this.arr("layerNorm", "out", out), xa = this.arr("layerNorm", "x", x);
    this.checkCount("layerNorm", "width", width);
    this.checkCount("layerNorm", "rows", rows);
    this.checkLength("layerNorm", "x", xa, width * rows, `${rows} x ${width}`);
    this.checkLength("layerNorm", "out", o, width * rows, `${rows} x ${width}`);
    if (weight.length < width) throw new Error(`layerNorm: weight holds ${weight.length} floats, expected ${width}`);
    if (bias.length < width) throw new Error(`layerNorm: bias holds ${bias.length} floats, expected ${width}`);
    if (width === 0) return;
    this.dispatch(this.subgroups ? NORMS.layer.subgroups : NORMS.layer.plain, [o, xa], [this.constBuffer(weight), this.constBuffer(bias)], [width, eps], rows);
  }

  rope(x: DeviceArray, nTokens: number, nHeads: number, positions: ArrayLike<number>, p: RopeParams): void {
    this.alive("rope");
    const xa = this.arr("rope", "x", x);
    this.checkCount("rope", "nTokens", nTokens);
    this.checkCount("rope", "nHeads", nHeads);
    const { headDim, ropeDim } = p;
    if (!(Number.isInteger(ropeDim) && ropeDim % 2 === 0 && ropeDim > 0 && ropeDim <= headDim)) throw new Error(`rope: ropeDim ${ropeDim} must be even, positive and at most headDim ${headDim}`);
    if (positions.length < nTokens) throw new Error(`rope: positions holds ${positions.length} entries, expected ${nTokens}`);
    for (let t = 0; t < nTokens; t++) {
      const pos = positions[t]!;
      if (!(Number.isInteger(pos) && pos >= 0)) throw new Error(`rope: position ${pos} of token ${t} is not a non-negative integer`);
    }
    this.checkLength("rope", "x", xa, nTokens * nHeads * headDim, `${nTokens} x ${nHeads} x ${headDim}`);
    const half = ropeDim / 2;
    const n = nTokens * nHeads * half;
    if (n === 0) return;
    // the angles as llama.cpp computes them, on the host: nTokens rows of (cos, sin) pairs
    const table = new Float32Array(nTokens * ropeDim);
    for (let t = 0; t < nTokens; t++) table.set(ropeAngles(positions[t]!, p), t * ropeDim);
    const params = [half, nHeads, headDim, ropeDim, p.style === "neox" ? 1 : 0] as const;
    const h = this.held;
    if (h?.op === "rope" && h.params[0] === half && h.params[2] === headDim && h.params[3] === ropeDim && h.params[4] === params[4] && sameValues(h.table, table) && !overlaps(h.x, xa)) {
      // the same angles as the held RoPE's (the same positions): both arrays in one dispatch,
      // held again for the cache writes of the keys and values that usually follow
      this.held = null;
      this.hold({ op: "rope2", x: h.x, x2: xa, pairs: h.pairs, pairs2: n, nHeads2: nHeads, params: h.params, table });
      return;
    }
    this.hold({ op: "rope", x: xa, pairs: n, params, table });
  }

  addBias(x: DeviceArray, bias: Float32Array, rows: number): void {
    this.alive("addBias");
    const xa = this.arr("addBias", "x", x);
    this.checkCount("addBias", "rows", rows);
    this.checkLength("addBias", "x", xa, rows * bias.length, `${rows} x ${bias.length}`);
    const n = rows * bias.length;
    if (n === 0) return;
    this.dispatch(ADD_BIAS, [xa], [this.constBuffer(bias)], [n, bias.length], Math.ceil(n / 256));
  }

  add(x: DeviceArray, y: DeviceArray): void {
    this.alive("add");
    const xa = this.arr("add", "x", x), ya = this.arr("add", "y", y);
    this.checkLength("add", "y", ya, xa.length, `${xa.length} (x's length)`);
    if (xa.length === 0) return;
    this.hold({ op: "add", x: xa, y: ya });
  }

  swiglu(out: DeviceArray, gate: DeviceArray, up: DeviceArray, n: number): void {
    this.alive("swiglu");
    const o = this.arr("swiglu", "out", out), g = this.arr("swiglu", "gate", gate), u = this.arr("swiglu", "up", up);
    this.checkCount("swiglu", "n", n);
    this.checkLength("swiglu", "out", o, n, `${n}`);
    this.checkLength("swiglu", "gate", g, n, `${n}`);
    this.checkLength("swiglu", "up", u, n, `${n}`);
    if (n === 0) return;
    // held: the matmul that reads it may quantize it in the same dispatch
    this.hold({ op: "swiglu", out: o, gate: g, up: u, n });
  }

  unary(op: UnaryOp, out: DeviceArray, x: DeviceArray, n: number): void {
    this.alive("unary");
    const def = UNARY[op];
    if (!def) throw new Error(`unary: unknown op ${JSON.stringify(op)} (expected one of ${Object.keys(UNARY).join(", ")})`);
    const o = this.arr(`unary ${op}`, "out", out), xa = this.arr(`unary ${op}`, "x", x);
    this.checkCount(`unary ${op}`, "n", n);
    this.checkLength(`unary ${op}`, "out", o, n, `${n}`);
    this.checkLength(`unary ${op}`, "x", xa, n, `${n}`);
    if (n === 0) return;
    this.dispatch(def, [o, xa], op === "gelu" ? [this.geluTableBuffer()] : [], [n], Math.ceil(n / 256));
  }

  private geluTableBuffer(): GPUBufferLike {
    if (!this.geluTable) {
      // the reference's GGML_GELU_FP16 table: gelu at every f16 value, indexed by its bits
      const xs = new Float32Array(65536);
      for (let h = 0; h < 65536; h++) xs[h] = f16BitsToF32(h);
      const table = new Float32Array(65536);
      gelu(table, xs, 65536);
      // not through constBuffer: its copy goes once the host array is collected, and this local
      // table is collected soon after (a GPT-2's next pass then bound a destroyed buffer); this
      // copy lives with the backend (dispose destroys it with allBuffers)
      this.geluTable = this.createBuffer(table.byteLength, BufferUsage.STORAGE | BufferUsage.COPY_DST);
      this.upload(this.geluTable, 0, table);
    }
    return this.geluTable;
  }

  attention(out: DeviceArray, q: DeviceArray, keys: DeviceArray, values: DeviceArray, nTokens: number, startPos: number, nHeads: number, nKvHeads: number, headDim: number, scale: number, rows?: Int32Array, encoding?: KVCacheEncoding): void {
    this.alive("attention");
    const kType = kvSide("attention", encoding?.k), vType = kvSide("attention", encoding?.v);
    const o = this.arr("attention", "out", out), qa = this.arr("attention", "q", q);
    const k = this.arr("attention", "keys", keys), v = this.arr("attention", "values", values);
    for (const [name, val] of Object.entries({ nTokens, startPos, nHeads, nKvHeads, headDim })) this.checkCount("attention", name, val);
    if (nKvHeads === 0 || nHeads % nKvHeads !== 0) throw new Error(`attention: nHeads ${nHeads} is not a multiple of nKvHeads ${nKvHeads}`);
    const d = nHeads * headDim, width = nKvHeads * headDim, nAll = startPos + nTokens;
    const kFloats = kvRowFloats(kType, width), vFloats = kvRowFloats(vType, width);
    this.checkLength("attention", "q", qa, nTokens * d, `${nTokens} x ${nHeads} x ${headDim}`);
    this.checkLength("attention", "out", o, nTokens * d, `${nTokens} x ${nHeads} x ${headDim}`);
    if (nTokens === 0 || d === 0) return;
    const cacheRows = Math.floor(Math.min(k.length / kFloats, v.length / vFloats));
    if (!rows) checkRows(rows, nAll, cacheRows);
    const data = rows ? this.attentionRows(rows, nAll, cacheRows) : undefined;
    let query = qa;
    if (kType === "q8_0" || kType === "q4_0") {
      // block keys: the query rotated with them and quantized to their vec_dot type (q8_0) first
      query = new GpuArray(this.scratchBuffer("query", nTokens * d), 0, nTokens * d, this.id, null);
      this.dispatch(QUERY_Q8_0, [query, qa], [], [nTokens * nHeads, headDim, encoding?.k.rotation ?? 0], Math.ceil((nTokens * nHeads) / 64));
    }
    // values stored rotated: the output turns back
    const vRotation = encoding?.v.rotation ?? 0;
    if (vRotation === 0 && headDim % 32 === 0 && !this.tiledAttention(nTokens, headDim)) {
      // the output projection reads it next: a Q8_0-activation matmul has the kernel quantize it too
      this.hold({ op: "attention", out: o, n: nTokens * d, dispatch: (quant) => this.attendPrepared(o, query, k, v, nTokens, startPos, nHeads, nKvHeads, headDim, scale, kType, vType, data, quant) });
      return;
    }
    this.attendPrepared(o, query, k, v, nTokens, startPos, nHeads, nKvHeads, headDim, scale, kType, vType, data);
    if (vRotation > 0) this.dispatch(ROTATE_CHUNKS, [o], [], [(nTokens * d) / vRotation, vRotation], Math.ceil((nTokens * d) / vRotation / 64));
  }

  /**
   * The row index of an attention call, checked against the cache's rows, as the backend's own
   * copy. Every layer of a pass attends through the same rows: while they are unchanged (compared
   * with the last copy) the copy is reused, unchecked again, and `dispatch` uploads it once a batch.
   */
  private attentionRows(rows: Int32Array, nAll: number, cacheRows: number): Uint32Array {
    const last = this.lastRows;
    if (last && last.cacheRows === cacheRows && rows.length >= nAll && sameValues(last.copy, rows.subarray(0, nAll))) return last.copy;
    checkRows(rows, nAll, cacheRows);
    const copy = new Uint32Array(rows.subarray(0, nAll));
    this.lastRows = { copy, cacheRows };
    return copy;
  }

  /**
   * Chunks of 2 queries and more go through the tiled kernel where the head fits it (partial
   * query tiles too). A query's result is then the same however the engine cuts its prompt into
   * chunks (another request's share of maxBatchTokens decides that): with the tiled kernel from
   * TILE_QUERIES only, a chunk of 2-7 took the scores-buffer kernel, another summation order, and
   * a prompt batched beside others got other logits than alone. (The engine never computes a
   * prompt row alone: one query is a decode step, whose chunk is the same in a batch.)
   */
  private tiledAttention(nTokens: number, headDim: number): boolean {
    return this.tiled && nTokens >= 2 && headDim <= TILE_MAX_HEAD_DIM;
  }

  /** the attention kernels proper, on a query ready for the cache's keys */
  private attendPrepared(o: GpuArray, qa: GpuArray, k: GpuArray, v: GpuArray, nTokens: number, startPos: number, nHeads: number, nKvHeads: number, headDim: number, scale: number, kType: KVSide, vType: KVSide, data: Uint32Array | undefined, quant: QuantizedOutput | null = null): void {
    const d = nHeads * headDim, width = nKvHeads * headDim, nAll = startPos + nTokens;
    const kStride = kvStride(kType, width), vStride = kvStride(vType, width);
    // ATTENTION_PARAMS for the queries from token t0 on
    const paramsFrom = (t0: number) => [nHeads, nHeads / nKvHeads, headDim, d, kStride, vStride, d, 1, startPos + t0, data ? 1 : 0, 0, nAll, scale];
    // the kernels that write the output: their XQ binding and QUANTIZED_OUTPUT_PARAMS
    const xq = quant?.xq ?? this.unusedOutput;
    const quantParams = quant ? [1, quant.nqw, quant.base] : [0, 0, 0];
    if (this.tiledAttention(nTokens, headDim)) {
      this.dispatch(attentionKernel("tiled", kType, vType), [o, qa, k, v], ["D"], [...paramsFrom(0), nTokens, tileKeys(headDim)], Math.ceil(nTokens / TILE_QUERIES) * nHeads, data);
      return;
    }
    const chunk = this.queryChunk(nHeads, nAll);
    for (let t0 = 0; t0 < nTokens; t0 += chunk) {
      const m = Math.min(chunk, nTokens - t0);
      const s = this.scratchBuffer("scores", m * nHeads * nAll);
      const params = paramsFrom(t0);
      const items = m * nHeads, nSplit = this.attentionSplits(items, nAll, headDim);
      if (nSplit === 1) {
        this.dispatch(attentionKernel("single", kType, vType, this.subgroups), [this.sub(o, t0 * d), this.sub(qa, t0 * d), k, v], ["D", s, xq], [...params, ...quantParams], items, data);
        continue;
      }
      const perSplit = Math.ceil(nAll / nSplit);
      const partials = this.scratchBuffer("partials", items * nSplit * (headDim + 2));
      this.dispatch(attentionKernel("split", kType, vType, this.subgroups), [this.sub(qa, t0 * d), k, v], ["D", s, partials], [...params, nSplit, perSplit], items * nSplit, data);
      this.dispatch(ATTENTION_COMBINE, [this.sub(o, t0 * d)], [partials, xq], [nHeads, headDim, d, nSplit, ...quantParams], items);
    }
  }

  /**
   * Key ranges per attention item (query token x head). The single-pass kernel gives each item one
   * workgroup that walks all of its keys, so a decode step (one token) occupies only nHeads
   * workgroups of a GPU that runs thousands at once, however long the context. Cutting the keys
   * into ranges of about keysPerSplit, each its own workgroup, and combining their softmax partials
   * in a second pass spreads a long decode over the GPU. The splits stop at MAX_SPLIT_GROUPS
   * workgroups in all (beyond that the GPU is full anyway, so a prefill of more than
   * MAX_SPLIT_GROUPS / 2 items stays single pass) and where the partials (headDim + 2 floats per
   * split) would exceed the scratch limit; one split (short contexts, large prefills) keeps the
   * single-pass kernel.
   */
  private attentionSplits(items: number, nKeys: number, headDim: number): number {
    const n = Math.min(Math.ceil(nKeys / this.keysPerSplit), Math.floor(MAX_SPLIT_GROUPS / items), Math.floor(this.scoresLimit / (items * (headDim + 2))));
    return Math.max(1, n);
  }

  /** queries per attention dispatch, so that their scores (nHeads x nKeys each) fit the scratch limit */
  private queryChunk(nHeads: number, nKeys: number): number {
    return Math.max(1, Math.floor(this.scoresLimit / (nHeads * nKeys)));
  }

  /** the floats of `a` from `offset` on */
  private sub(a: GpuArray, offset: number): GpuArray {
    return offset === 0 ? a : new GpuArray(a.buffer, a.offset + offset, a.length - offset, this.id, a.root ?? a);
  }

  bidirectionalAttention(out: DeviceArray, q: DeviceArray, k: DeviceArray, v: DeviceArray, n: number, nHeads: number, headDim: number, scale: number, stride?: number): void {
    this.alive("bidirectionalAttention");
    const o = this.arr("bidirectionalAttention", "out", out), qa = this.arr("bidirectionalAttention", "q", q);
    const ka = this.arr("bidirectionalAttention", "k", k), va = this.arr("bidirectionalAttention", "v", v);
    const d = nHeads * headDim;
    const st = stride ?? d;
    for (const [name, val] of Object.entries({ n, nHeads, headDim, stride: st })) this.checkCount("bidirectionalAttention", name, val);
    if (st < d) throw new Error(`bidirectionalAttention: stride ${st} is less than nHeads x headDim = ${d}`);
    if (n === 0 || d === 0) return;
    const need = (n - 1) * st + d;
    this.checkLength("bidirectionalAttention", "q", qa, need, `${n} rows ${st} apart (${need})`);
    this.checkLength("bidirectionalAttention", "k", ka, need, `${n} rows ${st} apart (${need})`);
    this.checkLength("bidirectionalAttention", "v", va, need, `${n} rows ${st} apart (${need})`);
    this.checkLength("bidirectionalAttention", "out", o, n * d, `${n} x ${d}`);
    if (this.tiled && headDim <= TILE_MAX_HEAD_DIM) {
      this.dispatch(attentionKernel("tiled", "f32", "f32"), [o, qa, ka, va], [this.dummy], [nHeads, 1, headDim, st, st, st, d, 0, n, 0, 0, n, scale, n, tileKeys(headDim)], Math.ceil(n / TILE_QUERIES) * nHeads);
      return;
    }
    const chunk = this.queryChunk(nHeads, n);
    for (let i0 = 0; i0 < n; i0 += chunk) {
      const m = Math.min(chunk, n - i0);
      const s = this.scratchBuffer("scores", m * nHeads * n);
      this.dispatch(attentionKernel("single", "f32", "f32", this.subgroups), [this.sub(o, i0 * d), this.sub(qa, i0 * st), ka, va], [this.dummy, s, this.unusedOutput], [nHeads, 1, headDim, st, st, st, d, 0, n, 0, 0, n, scale, 0, 0, 0], m * nHeads);
    }
  }

  dispose(): void {
    if (this.disposed) return;
    try {
      this.flush();
    } catch {
      // a device already lost has nothing to submit to
    }
    this.disposed = true;
    for (const b of this.allBuffers) b.destroy();
    this.allBuffers.clear();
    for (const b of this.stagingPool.splice(0)) b.destroy();
    this.profiler?.destroy();
    this.device.destroy();
  }
}

