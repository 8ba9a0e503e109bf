/**
 * The WebGPU adapter's largest buffer (its largest storage binding), read from a backend of its
 * own and disposed at once; undefined where this machine has no adapter (or it states no limit).
 * Imported lazily, so that a test file loads where the webgpu package is absent.
 */
export async function largestGpuBuffer(): Promise<number | undefined> {
  const { createWebGPUBackend } = await import("../../src/kernels/webgpu/index.js");
  try {
    const gpu = await createWebGPUBackend();
    const limit = gpu.maxBufferBytes;
    gpu.dispose();
    return limit;
  } catch (e) {
    if (!(e as Error).message.includes("no WebGPU adapter found")) throw e;
    return undefined;
  }
}
