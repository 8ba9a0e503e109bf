import type { AdapterOptions, FoundAdapter, GPUAdapterLike, GPULike } from "./gpu-types.js";

/** Node's side of finding an adapter (adapter.ts explains the software-adapter fallback); host.browser.ts replaces it in the browser build */

const CHROMIUM_SWIFTSHADER_ICD = "/usr/lib/chromium/vk_swiftshader_icd.json";

/**
 * Every object `create([])` returned, for the process lifetime: dawn.node segfaults when that
 * object is garbage-collected while one of its devices is still in use.
 */
const dawnInstances: unknown[] = [];
/** the Dawn instance that found an adapter, and how: later backends ask it first */
let workingDawn: { gpu: GPULike; source: string } | null = null;

interface NodeProcess {
  env: Record<string, string | undefined>;
  dlopen?: (module: { exports: unknown }, filename: string, flags?: number) => void;
  versions?: { node?: string };
}

export async function findDawnAdapter(options: AdapterOptions, fail: (why: string) => Error): Promise<FoundAdapter> {
  const g = globalThis as { process?: NodeProcess };
  const proc = g.process as (NodeProcess & { platform?: string }) | undefined;
  if (!proc?.versions?.node) throw fail("this runtime has no navigator.gpu");

  // a variable specifier: bundlers and tsc leave the optional package alone
  const pkg = "webgpu";
  let create: (opts: string[]) => GPULike;
  try {
    ({ create } = (await import(pkg)) as { create: (opts: string[]) => GPULike });
  } catch (e) {
    throw fail(`the optional package "webgpu" could not be loaded: ${(e as Error).message.split("\n")[0]}; install it with npm i -E webgpu@0.6.2`);
  }
  const request = async (source: string): Promise<GPUAdapterLike | null> => {
    const gpu = create([]);
    dawnInstances.push(gpu);
    const adapter = await gpu.requestAdapter({ powerPreference: options.powerPreference });
    if (adapter) workingDawn = { gpu, source };
    return adapter;
  };
  if (workingDawn) {
    const again = await workingDawn.gpu.requestAdapter({ powerPreference: options.powerPreference });
    if (again) return { adapter: again, source: workingDawn.source };
  }
  // on Linux without a Vulkan loader Dawn's own probe can only fail (and says so on stderr):
  // where a software ICD is at hand, go to it first
  const icd = await fallbackICD(options, proc, fail);
  const noLoader = icd !== null && (await lacksVulkanLoader(proc));
  if (!noLoader) {
    const first = await request("dawn");
    if (first) return { adapter: first, source: "dawn" };
  }
  if (!icd) {
    throw fail("Dawn found no Vulkan/Metal/D3D12 adapter; for a software adapter on Linux install chromium (SwiftShader) or set TSLLM_WEBGPU_VULKAN_ICD to a Vulkan ICD json");
  }
  const { dirname, join } = await import("node:path");
  const { existsSync } = await import("node:fs");
  const loader = join(dirname(icd), "libvulkan.so.1");
  if (existsSync(loader) && proc.dlopen) {
    // RTLD_NOW | RTLD_GLOBAL | RTLD_NODELETE (glibc): Node throws "did not self-register" and
    // dlcloses it, but NODELETE keeps the library resident, so Dawn's dlopen("libvulkan.so.1") finds it
    try {
      proc.dlopen({ exports: {} }, loader, 0x2 | 0x100 | 0x1000);
    } catch {
      // expected: the loader is not a Node addon
    }
  }
  proc.env["VK_ICD_FILENAMES"] = icd;
  const source = `dawn, Vulkan ICD ${icd}`;
  const second = await request(source);
  if (second) return { adapter: second, source };
  throw fail(`Dawn found none, also not with the Vulkan ICD ${icd}`);
}

/** Linux with no libvulkan.so.1 where the dynamic linker looks (LD_LIBRARY_PATH and the usual library folders) */
async function lacksVulkanLoader(proc: NodeProcess & { platform?: string }): Promise<boolean> {
  if (proc.platform !== "linux") return false;
  const { existsSync } = await import("node:fs");
  const { join } = await import("node:path");
  const dirs = [...(proc.env["LD_LIBRARY_PATH"] ?? "").split(":").filter((d) => d !== ""), "/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib", "/usr/local/lib", "/lib/x86_64-linux-gnu", "/lib64"];
  return !dirs.some((d) => existsSync(join(d, "libvulkan.so.1")));
}

async function fallbackICD(options: AdapterOptions, proc: NodeProcess, fail: (why: string) => Error): Promise<string | null> {
  if (options.vulkanICD === false) return null;
  const { existsSync } = await import("node:fs");
  const explicit = options.vulkanICD ?? proc.env["TSLLM_WEBGPU_VULKAN_ICD"];
  if (explicit) {
    if (!existsSync(explicit)) throw fail(`the Vulkan ICD ${explicit} does not exist`);
    return explicit;
  }
  return existsSync(CHROMIUM_SWIFTSHADER_ICD) ? CHROMIUM_SWIFTSHADER_ICD : null;
}
