import type { AdapterOptions, FoundAdapter } from "./gpu-types.js";

/** the browser build's host.ts: a page has navigator.gpu or no WebGPU at all (no Dawn to load) */
export async function findDawnAdapter(_options: AdapterOptions, fail: (why: string) => Error): Promise<FoundAdapter> {
  throw fail("this browser has no navigator.gpu (WebGPU is off or unsupported; chromium: --enable-unsafe-webgpu)");
}
