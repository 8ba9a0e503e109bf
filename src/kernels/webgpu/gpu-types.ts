/**
 * The few WebGPU API types this backend uses, declared here so the project type-checks without
 * `@webgpu/types` (it comes only with the optional `webgpu` package) and without the DOM lib.
 * Structurally compatible with both the browser's `navigator.gpu` and Dawn's `create([])`.
 */

export interface GPUBufferLike {
  readonly size: number;
  mapAsync(mode: number, offset?: number, size?: number): Promise<void>;
  getMappedRange(offset?: number, size?: number): ArrayBuffer;
  unmap(): void;
  destroy(): void;
}

export interface GPUBindGroupLayoutLike {
  readonly __brand?: "GPUBindGroupLayout";
}

export interface GPUBindGroupLike {
  readonly __brand?: "GPUBindGroup";
}

export interface GPUPipelineLayoutLike {
  readonly __brand?: "GPUPipelineLayout";
}

/** a bind group layout entry: a uniform buffer (maybe bound at a dynamic offset) or a storage buffer */
export interface GPUBindGroupLayoutEntryLike {
  binding: number;
  visibility: number;
  buffer: { type: "uniform" | "storage" | "read-only-storage"; hasDynamicOffset?: boolean };
}

export interface GPUComputePipelineLike {
  getBindGroupLayout(index: number): GPUBindGroupLayoutLike;
}

export interface GPUShaderModuleLike {
  getCompilationInfo?(): Promise<{ messages: readonly { type: string; message: string; lineNum: number; linePos: number }[] }>;
}

export interface GPUComputePassLike {
  setPipeline(p: GPUComputePipelineLike): void;
  setBindGroup(index: number, g: GPUBindGroupLike, dynamicOffsets?: number[]): void;
  setBindGroup(index: number, g: GPUBindGroupLike, dynamicOffsetsData: Uint32Array, dynamicOffsetsDataStart: number, dynamicOffsetsDataLength: number): void;
  dispatchWorkgroups(x: number, y?: number, z?: number): void;
  end(): void;
}

export interface GPUCommandBufferLike {
  readonly __brand?: "GPUCommandBuffer";
}

export interface GPUQuerySetLike {
  destroy(): void;
}

export interface GPUCommandEncoderLike {
  beginComputePass(descriptor?: object): GPUComputePassLike;
  copyBufferToBuffer(src: GPUBufferLike, srcOffset: number, dst: GPUBufferLike, dstOffset: number, size: number): void;
  resolveQuerySet(querySet: GPUQuerySetLike, firstQuery: number, queryCount: number, destination: GPUBufferLike, destinationOffset: number): void;
  finish(): GPUCommandBufferLike;
}

export interface GPUQueueLike {
  submit(buffers: GPUCommandBufferLike[]): void;
  writeBuffer(buffer: GPUBufferLike, offset: number, data: ArrayBufferView | ArrayBuffer, dataOffset?: number, size?: number): void;
  onSubmittedWorkDone(): Promise<void>;
}

export interface GPUBindGroupEntryLike {
  binding: number;
  resource: { buffer: GPUBufferLike; offset?: number; size?: number };
}

export interface GPUErrorLike {
  readonly message: string;
}

export interface GPUDeviceLike {
  readonly queue: GPUQueueLike;
  readonly limits: Record<string, number>;
  readonly features: ReadonlySet<string>;
  readonly lost: Promise<{ reason?: string; message: string }>;
  createBuffer(descriptor: { size: number; usage: number; mappedAtCreation?: boolean; label?: string }): GPUBufferLike;
  createShaderModule(descriptor: { code: string; label?: string }): GPUShaderModuleLike;
  createBindGroupLayout(descriptor: { entries: GPUBindGroupLayoutEntryLike[]; label?: string }): GPUBindGroupLayoutLike;
  createPipelineLayout(descriptor: { bindGroupLayouts: GPUBindGroupLayoutLike[]; label?: string }): GPUPipelineLayoutLike;
  createComputePipeline(descriptor: { layout: "auto" | GPUPipelineLayoutLike; compute: { module: GPUShaderModuleLike; entryPoint: string }; label?: string }): GPUComputePipelineLike;
  createBindGroup(descriptor: { layout: GPUBindGroupLayoutLike; entries: GPUBindGroupEntryLike[] }): GPUBindGroupLike;
  createCommandEncoder(): GPUCommandEncoderLike;
  createQuerySet(descriptor: { type: "timestamp"; count: number }): GPUQuerySetLike;
  pushErrorScope(filter: "validation" | "out-of-memory" | "internal"): void;
  popErrorScope(): Promise<GPUErrorLike | null>;
  destroy(): void;
}

export interface GPUAdapterLike {
  readonly features: ReadonlySet<string>;
  readonly limits: Record<string, number>;
  readonly info?: { vendor?: string; architecture?: string; device?: string; description?: string };
  requestDevice(descriptor?: { requiredLimits?: Record<string, number>; requiredFeatures?: string[] }): Promise<GPUDeviceLike>;
}

export interface GPULike {
  requestAdapter(options?: { powerPreference?: "low-power" | "high-performance" }): Promise<GPUAdapterLike | null>;
}

/** GPUBufferUsage and GPUMapMode flags (fixed by the spec; the globals are absent in Node) */
export const BufferUsage = { MAP_READ: 0x0001, COPY_SRC: 0x0004, COPY_DST: 0x0008, UNIFORM: 0x0040, STORAGE: 0x0080, QUERY_RESOLVE: 0x0200 } as const;
export const MapMode = { READ: 0x0001 } as const;
export const ShaderStage = { COMPUTE: 0x4 } as const;

export interface AdapterOptions {
  powerPreference?: "low-power" | "high-performance";
  /**
   * Node only: a Vulkan ICD manifest (e.g. SwiftShader's vk_swiftshader_icd.json) to fall back to
   * when Dawn finds no adapter; its directory's libvulkan.so.1 is preloaded if present. `false`:
   * no fallback. Default: env TSLLM_WEBGPU_VULKAN_ICD, else chromium's SwiftShader when installed.
   */
  vulkanICD?: string | false;
}

export interface FoundAdapter {
  adapter: GPUAdapterLike;
  /** how it was found, for messages and the backend's name */
  source: string;
}
