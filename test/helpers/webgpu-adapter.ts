import { probeWebGPU } from "../../src/kernels/webgpu/index.js";

/**
 * false where Node finds a WebGPU adapter (the webgpu package's Dawn: a GPU, or software Vulkan
 * such as lavapipe), else the message a file's WebGPU tests skip with (docs/webgpu.md says how to
 * get one). Any other error of the probe is thrown: a broken install fails instead of skipping.
 */
export async function skipWithoutWebGPUAdapter(): Promise<string | false> {
  try {
    await probeWebGPU();
    return false;
  } catch (e) {
    const message = (e as Error).message;
    if (!message.includes("no WebGPU adapter found")) throw e;
    return `no WebGPU adapter: ${message}`;
  }
}
