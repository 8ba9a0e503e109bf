// scripts/pack-portable.mjs: the packed folder runs on its own (no checkout, no npm), which is
// what a GPU host without the registry gets; the WebGPU kernel benchmark from it needs an adapter
// (a software one here: SwiftShader or lavapipe, see docs/webgpu.md) and is skipped without one.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, test } from "node:test";
import { MATMUL_TYPES } from "../src/kernels/webgpu/shaders.js";

const root = path.resolve(import.meta.dirname, "..");
const work = mkdtempSync(path.join(tmpdir(), "tsllm-portable-"));
const out = path.join(work, "kit");
after(() => rmSync(work, { recursive: true, force: true }));

/** runs node on a file of the kit from a folder outside the checkout, with no NODE_PATH */
function runKit(file: string, args: string[]) {
  const env = { ...process.env };
  delete env.NODE_PATH;
  delete env.NODE_OPTIONS;
  return spawnSync(process.execPath, [path.join(out, "tsllm", file), ...args], { cwd: work, env, encoding: "utf8", timeout: 300_000 });
}

test("pack-portable: the kit holds the compiled package, its dependencies, and the benchmarks over dist/", () => {
  const packed = spawnSync(process.execPath, [path.join(root, "scripts", "pack-portable.mjs"), out], { cwd: root, encoding: "utf8" });
  assert.equal(packed.status, 0, packed.stderr);
  const kit = path.join(out, "tsllm");
  for (const file of ["package.json", "dist/cli/main.js", "dist/kernels/wasm/kernels-relaxed.wasm", "node_modules/@huggingface/tokenizers/package.json", "node_modules/webgpu/index.js", "bench.mjs", "bench-webgpu.mjs"]) {
    assert.ok(existsSync(path.join(kit, file)), `${file} is packed`);
  }
  // Dawn for linux-x64 only, and no source maps
  assert.deepEqual(readdirSync(path.join(kit, "node_modules", "webgpu", "dist")), ["linux-x64"]);
  assert.ok(!readdirSync(path.join(kit, "dist", "cli")).some((f) => f.endsWith(".map")));
  for (const script of ["bench.mjs", "bench-webgpu.mjs"]) {
    const text = readFileSync(path.join(kit, script), "utf8");
    assert.doesNotMatch(text, /["']\.\.\/src\//, `${script} imports nothing from src/`);
    assert.match(text, /from ["']\.\/dist\//, `${script} imports dist/`);
  }
  // the one-go script for a GPU host, executable, and its usage line without arguments
  const oneGo = path.join(out, "bench-gpu-host.sh");
  assert.ok(existsSync(oneGo), "bench-gpu-host.sh is packed");
  const usage = spawnSync(oneGo, [], { encoding: "utf8" });
  assert.equal(usage.status, 2, usage.stderr);
  assert.match(usage.stderr, /usage: .*bench-gpu-host\.sh LOGS \[MODELS\] \[PROMPTS\]/);
  const help = runKit("dist/cli/main.js", ["--help"]);
  assert.equal(help.status, 0, help.stderr);
  assert.match(help.stdout, /Usage: tsllm <command>/);
});

test("pack-portable: the kit's WebGPU kernel benchmark runs outside the checkout", (t) => {
  if (!existsSync(path.join(out, "tsllm", "bench-webgpu.mjs"))) return assert.fail("the kit was not packed (see the test above)");
  const run = runKit("bench-webgpu.mjs", ["--size", "256", "--tokens", "1", "--keys", "16", "--repetitions", "1"]);
  if (run.status !== 0 && /no WebGPU adapter found/.test(run.stderr)) return t.skip(`no WebGPU adapter: ${run.stderr.trim().split("\n")[0]}`);
  assert.equal(run.status, 0, run.stderr);
  // a line per weight type the backend has a matmul kernel for (its own table), and one per KV cache type
  const timed = [...run.stdout.matchAll(/^matmul (\S+) +256x256 x +1 tokens: [\d.]+ ms \(host [\d.]+, then GPU [\d.]+\), weights [\d.]+ GB\/s, [\d.]+ TFLOP\/s$/gm)].map((m) => m[1]);
  assert.deepEqual(timed.sort(), Object.keys(MATMUL_TYPES).sort(), run.stdout);
  assert.equal(run.stdout.match(/^attention (f32|f16|q8_0|q4_0) +cache, .*16 keys x +1 tokens: [\d.]+ ms \(host [\d.]+, then GPU [\d.]+\)$/gm)?.length, 4, run.stdout);
});

test("pack-portable --llama-cpp vulkan: node-llama-cpp, its dependencies and its Vulkan build load from the kit", () => {
  const kitDir = path.join(work, "kit-llama");
  const packed = spawnSync(process.execPath, [path.join(root, "scripts", "pack-portable.mjs"), kitDir, "--llama-cpp", "vulkan"], { cwd: root, encoding: "utf8" });
  assert.equal(packed.status, 0, packed.stderr);
  const modules = path.join(kitDir, "tsllm", "node_modules");
  assert.ok(existsSync(path.join(modules, "@node-llama-cpp", "linux-x64-vulkan", "bins")), "the Vulkan build is packed");
  assert.ok(!existsSync(path.join(modules, "@node-llama-cpp", "linux-x64")), "only the build asked for");
  assert.ok(!existsSync(path.join(modules, "node-llama-cpp", "llama", "gitRelease.bundle")), "llama.cpp's source bundle stays behind");
  // the kit's own resolution, from outside the checkout: the package and the binary it picks for vulkan
  // (a file, not -e: node-llama-cpp tests its binary in a child process started like this one)
  const probeFile = path.join(kitDir, "tsllm", "probe.mjs");
  writeFileSync(probeFile, `import { getLlama, LlamaLogLevel } from "node-llama-cpp";\nconst l = await getLlama({ gpu: "vulkan", build: "never", logLevel: LlamaLogLevel.error });\nconsole.log(l.gpu);\nawait l.dispose();\n`);
  const probe = spawnSync(process.execPath, [probeFile], { cwd: work, encoding: "utf8", env: { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: work } });
  assert.equal(probe.status, 0, probe.stderr);
  assert.equal(probe.stdout.trim(), "vulkan");
  const bad = spawnSync(process.execPath, [path.join(root, "scripts", "pack-portable.mjs"), kitDir, "--llama-cpp", "metal"], { cwd: root, encoding: "utf8" });
  assert.equal(bad.status, 2);
  assert.match(bad.stderr, /--llama-cpp takes vulkan or cuda, got metal/);
});
