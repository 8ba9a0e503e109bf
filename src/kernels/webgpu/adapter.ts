import type { AdapterOptions, FoundAdapter, GPULike } from "./gpu-types.js";

export type { AdapterOptions, FoundAdapter } from "./gpu-types.js";
import { findDawnAdapter } from "./host.js";

/**
 * Finding a WebGPU adapter. In a browser (or any runtime with `navigator.gpu`) that is used and
 * nothing else is loaded. Elsewhere (Node) host.ts imports the optional `webgpu` package (Dawn)
 * dynamically, so the rest of tsllm never needs it; the browser build swaps in host.browser.ts.
 *
 * Software adapter: Dawn finds Vulkan through the loader `libvulkan.so.1`. A machine without a
 * GPU driver has none, but Debian's chromium package ships both a loader and SwiftShader's ICD in
 * /usr/lib/chromium. `LD_LIBRARY_PATH` is read by the dynamic linker at process start, so setting
 * it in-process does nothing; instead, when the first attempt finds no adapter and an ICD is known
 * (option `vulkanICD`, env TSLLM_WEBGPU_VULKAN_ICD, or chromium's SwiftShader if installed), the
 * loader next to the ICD file is preloaded (dlopen with RTLD_NODELETE, so it stays once Node finds
 * it is no addon), VK_ICD_FILENAMES is pointed at the ICD, and a fresh Dawn instance is asked again.
 * Measured here: Dawn's first instance keeps its failed Vulkan probe, a second one finds SwiftShader.
 */



export const fail = (why: string): Error => new Error(`webgpu backend: no WebGPU adapter found (${why})`);


export async function findAdapter(options: AdapterOptions = {}): Promise<FoundAdapter> {
  const navGpu = (globalThis as { navigator?: { gpu?: GPULike } }).navigator?.gpu;
  if (navGpu) {
    const adapter = await navGpu.requestAdapter({ powerPreference: options.powerPreference });
    if (!adapter) throw fail("navigator.gpu.requestAdapter() returned null");
    return { adapter, source: "navigator.gpu" };
  }
  return findDawnAdapter(options, fail);
}
