// Packs tsllm for a Linux x64 machine that has no npm registry and maybe no Node: a GPU host
// where the WebGPU benchmarks are to run. One folder, OUT/tsllm/, holds the compiled package
// (dist/, package.json), its runtime dependencies (@huggingface/tokenizers,
// the webgpu package with Dawn's linux-x64 binary only) and the two benchmark scripts as plain
// JavaScript over dist/:
//   bench-webgpu.mjs  scripts/bench-webgpu.ts (the kernels: matmul per weight type, attention)
//   bench.mjs         scripts/bench.ts (whole models, random weights generated on the spot)
// With --node, OUT/node is a copy of the Node binary running this script. With --archive, OUT.tar.xz
// is written too (the Node binary and Dawn shrink about 4x). Usage:
//   npm run build && node scripts/pack-portable.mjs OUT [--node] [--archive]
// then, on the other machine (Node 20 or later, or OUT/node), both at once with
// OUT/bench-gpu-host.sh LOGS (scripts/bench-gpu-host.sh), or one by one:
//   OUT/node OUT/tsllm/bench-webgpu.mjs --size 4096 --tokens 1,128
//   OUT/node OUT/tsllm/bench.mjs --backend webgpu --no-llama-cpp --only smollm-q8_0,smollm-q4_0
// The llama.cpp side of bench.mjs (node-llama-cpp) is packed only with --llama-cpp vulkan|cuda:
// node-llama-cpp, its dependencies and that one prebuilt GPU build (Vulkan: 81 MB, ~14 MB in the
// archive; CUDA: 181 MB and the host's CUDA 12 runtime), for
//   OUT/node OUT/tsllm/bench.mjs --backend webgpu --llama-cpp-gpu vulkan --only smollm-q8_0
// Without it bench.mjs runs with --no-llama-cpp.
import { execFileSync } from "node:child_process";
import { cpSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const args = process.argv.slice(2);
const llamaCppAt = args.indexOf("--llama-cpp");
const llamaCppGpu = llamaCppAt < 0 ? undefined : args[llamaCppAt + 1];
const rest = llamaCppAt < 0 ? args : args.filter((_, i) => i !== llamaCppAt && i !== llamaCppAt + 1);
const out = rest.find((a) => !a.startsWith("--"));
const unknown = rest.filter((a) => a.startsWith("--") && a !== "--node" && a !== "--archive");
const badGpu = llamaCppAt >= 0 && llamaCppGpu !== "vulkan" && llamaCppGpu !== "cuda";
if (!out || unknown.length > 0 || badGpu) {
  const why = badGpu ? ` (--llama-cpp takes vulkan or cuda, got ${llamaCppGpu ?? "nothing"})` : unknown.length > 0 ? ` (unknown: ${unknown.join(" ")})` : "";
  console.error(`usage: node scripts/pack-portable.mjs OUT [--node] [--archive] [--llama-cpp vulkan|cuda]${why}`);
  process.exit(2);
}
const outDir = path.resolve(out);
const pkgDir = path.join(outDir, "tsllm");
for (const needed of ["dist/cli/main.js", "dist/kernels/wasm/kernels.wasm", "dist/kernels/wasm/kernels-relaxed.wasm"]) {
  if (!existsSync(path.join(root, needed))) {
    console.error(`pack-portable: ${needed} is missing; run "npm run build" first`);
    process.exit(1);
  }
}

rmSync(outDir, { recursive: true, force: true });
mkdirSync(pkgDir, { recursive: true });
const pkg = JSON.parse(readFileSync(path.join(root, "package.json"), "utf8"));
writeFileSync(path.join(pkgDir, "package.json"), JSON.stringify({ name: pkg.name, version: pkg.version, type: "module", bin: pkg.bin, dependencies: pkg.dependencies }, null, 2) + "\n");
// source maps stay behind: they are most of dist/ and the benchmarks do not need them
cpSync(path.join(root, "dist"), path.join(pkgDir, "dist"), { recursive: true, filter: (p) => !p.endsWith(".map") });

const modules = path.join(root, "node_modules");
for (const dep of Object.keys(pkg.dependencies)) cpSync(path.join(modules, dep), path.join(pkgDir, "node_modules", dep), { recursive: true });
const webgpu = path.join(pkgDir, "node_modules", "webgpu");
for (const file of ["package.json", "index.js", "LICENSE.md", "dist/linux-x64/dawn.node"]) cpSync(path.join(modules, "webgpu", file), path.join(webgpu, file), { recursive: true });

if (llamaCppGpu !== undefined) {
  // node-llama-cpp and every package it depends on, found as Node resolves them (nearest
  // node_modules up the tree) and copied to the same place under the kit's node_modules; its
  // bundled llama.cpp source (llama/gitRelease.bundle, for building from source) stays behind
  const packed = new Set();
  const resolveFrom = (dir, name) => {
    for (let d = dir; ; d = path.dirname(d)) {
      const candidate = path.join(d, "node_modules", name);
      if (existsSync(path.join(candidate, "package.json"))) return candidate;
      if (path.dirname(d) === d) throw new Error(`pack-portable: ${name} (needed by ${dir}) is not installed`);
    }
  };
  const pack = (dir) => {
    if (packed.has(dir)) return;
    packed.add(dir);
    cpSync(dir, path.join(pkgDir, "node_modules", path.relative(modules, dir)), { recursive: true, filter: (p) => !p.endsWith("gitRelease.bundle") && path.basename(p) !== "node_modules" || p === dir });
    for (const dep of Object.keys(JSON.parse(readFileSync(path.join(dir, "package.json"), "utf8")).dependencies ?? {})) pack(resolveFrom(dir, dep));
  };
  pack(path.join(modules, "node-llama-cpp"));
  pack(path.join(modules, "@node-llama-cpp", `linux-x64-${llamaCppGpu}`));
  console.log(`packed node-llama-cpp (${packed.size} packages with its ${llamaCppGpu} build)`);
}

// the scripts, TypeScript stripped (esbuild, which tsx brings), their ../src imports pointed at dist/
const { transformSync } = await import("esbuild");
for (const [from, to] of [["scripts/bench-webgpu.ts", "bench-webgpu.mjs"], ["scripts/bench.ts", "bench.mjs"]]) {
  const { code } = transformSync(readFileSync(path.join(root, from), "utf8"), { loader: "ts", format: "esm", target: "node20" });
  const rewritten = code.replace(/(from\s+|import\()(["'])\.\.\/src\//g, "$1$2./dist/");
  if (/["']\.\.\/src\//.test(rewritten)) throw new Error(`pack-portable: ${from} still imports ../src after the rewrite`);
  writeFileSync(path.join(pkgDir, to), `// generated from ${from} by scripts/pack-portable.mjs\n${rewritten}`);
}

// the random models take their tokenizers from the shared test data (dist/testing/presets.js
// looks for it beside the package, as in this checkout): SmolLM's and TinyLlama's vocabularies
const shared = path.resolve(root, "..", "shared");
for (const vocab of ["ggml-vocab-starcoder.gguf", "ggml-vocab-llama-spm.gguf"]) {
  const from = path.join(shared, "tokenizer-tests", vocab);
  if (existsSync(from)) cpSync(from, path.join(outDir, "shared", "tokenizer-tests", vocab));
  else console.warn(`pack-portable: ${from} not found: bench.mjs cannot generate the models that use it`);
}

// the two benchmarks in one go on a GPU host: OUT/bench-gpu-host.sh LOGS [MODELS] [PROMPTS]
cpSync(path.join(root, "scripts", "bench-gpu-host.sh"), path.join(outDir, "bench-gpu-host.sh"));
if (args.includes("--node")) cpSync(process.execPath, path.join(outDir, "node"));
if (args.includes("--archive")) {
  execFileSync("tar", ["-cJf", `${outDir}.tar.xz`, "-C", path.dirname(outDir), path.basename(outDir)], { env: { ...process.env, XZ_OPT: "-T0 -6" }, stdio: "inherit" });
  console.log(`wrote ${outDir}.tar.xz`);
}
console.log(`packed ${path.relative(process.cwd(), pkgDir) || pkgDir}: run ${args.includes("--node") ? path.join(outDir, "node") : "node"} ${path.join(pkgDir, "bench-webgpu.mjs")}`);
