// Bundles the browser build (src/browser/) with esbuild into dist-browser/:
//   tsllm.js          the page's module (TsllmWorker: talks to the engine worker)
//   engine-worker.js  the dedicated Worker that loads and runs the model
//   kernel-worker.js  one Web Worker per extra wasm kernel thread
//   kernels.wasm, kernels-relaxed.wasm  the compiled kernels (from dist/kernels/wasm/)
//   tsllm-isolate.js  a classic script (page and service worker in one) that isolates a page
//                     whose host sends no COOP/COEP headers (src/browser/isolate.ts)
// Run by `npm run build:browser`; examples/browser/server.ts calls ensureBrowserBuild() on start.
//
// The platform seams: an import of a `host.js` inside src/ resolves to the `host.browser.ts`
// beside it (src/platform/, src/kernels/wasm/). Modules of src/ are marked side-effect free,
// so the barrels (formats/index.ts, ...) drop what the browser path does not use (no module of
// src/ may rely on being imported for its side effects alone: none is, `import "./x.js"`). What
// is left must not import node: — the build fails, naming the modules, if anything reached does.
import { existsSync, mkdirSync, readdirSync, copyFileSync, statSync, rmSync, renameSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { ensureWasm, relaxedWasmPath, wasmPath } from "./build-wasm.mjs";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const src = path.join(root, "src");
export const browserDir = path.join(root, "dist-browser");
const ENTRIES = { tsllm: "src/browser/index.ts", "engine-worker": "src/browser/engine-worker.ts", "kernel-worker": "src/browser/kernel-worker.ts" };
/** the classic scripts: no import/export in the output, which a service worker script must not have */
const CLASSIC = { "tsllm-isolate": "src/browser/isolate.ts" };
/** every file the build writes (the stamp is written last) */
export const browserOutputs = [...Object.keys({ ...ENTRIES, ...CLASSIC }).map((n) => `${n}.js`), "kernels.wasm", "kernels-relaxed.wasm"];
const STAMP = path.join(browserDir, "engine-worker.js");

const seams = {
  name: "tsllm-browser-seams",
  setup(build) {
    build.onResolve({ filter: /^\.\.?\// }, async (args) => {
      if (args.pluginData?.tsllmInner) return undefined;
      const inSrc = args.importer.startsWith(src + path.sep);
      if (inSrc && /(^|\/)host\.js$/.test(args.path)) {
        const swapped = path.resolve(args.resolveDir, args.path.replace(/host\.js$/, "host.browser.ts"));
        if (existsSync(swapped)) return { path: swapped, sideEffects: false };
      }
      const r = await build.resolve(args.path, { kind: args.kind, resolveDir: args.resolveDir, importer: args.importer, pluginData: { tsllmInner: true } });
      if (r.errors.length > 0) return { errors: r.errors };
      return { ...r, sideEffects: r.path.startsWith(src + path.sep) ? false : r.sideEffects };
    });
  },
};

/** the newest modification time (ms) of any file under `dir` */
export function newestMtime(dir) {
  let newest = 0;
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    newest = Math.max(newest, e.isDirectory() ? newestMtime(p) : statSync(p).mtimeMs);
  }
  return newest;
}

/** whether dist-browser/ is missing a file or older than src/, the kernels or this script */
export function browserBuildIsStale() {
  if (browserOutputs.some((f) => !existsSync(path.join(browserDir, f)))) return true;
  const built = statSync(STAMP).mtimeMs;
  const inputs = Math.max(newestMtime(src), statSync(fileURLToPath(import.meta.url)).mtimeMs, ...[wasmPath, relaxedWasmPath].map((p) => statSync(p).mtimeMs), statSync(path.join(root, "package-lock.json")).mtimeMs);
  return inputs > built;
}

/**
 * Builds dist-browser/ (or `outdir`, from `entries`: name -> file, for tests); returns the
 * files' sizes in bytes.
 */
export async function buildBrowser({ minify = false, outdir: target = browserDir, entries = ENTRIES, classic = entries === ENTRIES ? CLASSIC : {} } = {}) {
  await ensureWasm();
  const esbuild = await import("esbuild");
  // built beside the target, then moved in file by file (a rename replaces a file at once): a page
  // served from the target while it rebuilds (another process's test, the example server) read it
  // removed, or a file half written: an empty kernel-worker.js starts a worker that never answers,
  // and the load waited for it forever
  const outdir = `${target}.building-${process.pid}`;
  rmSync(outdir, { recursive: true, force: true });
  mkdirSync(outdir, { recursive: true });
  try {
    return await buildInto(esbuild, { minify, outdir, target, entries, classic });
  } finally {
    rmSync(outdir, { recursive: true, force: true });
  }
}

async function buildInto(esbuild, { minify, outdir, target, entries, classic }) {
  const result = await esbuild.build({
    absWorkingDir: root,
    entryPoints: entries,
    outdir,
    bundle: true,
    format: "esm",
    platform: "browser",
    target: "es2022",
    sourcemap: true,
    minify,
    metafile: true,
    // resolved so that the check below can name them; none may be left in the output
    external: ["node:*"],
    plugins: [seams],
    logLevel: "warning",
  });
  const offenders = [];
  for (const [out, o] of Object.entries(result.metafile.outputs)) {
    if (!out.endsWith(".js")) continue;
    for (const imp of o.imports) {
      if (!imp.external) continue;
      const by = Object.entries(result.metafile.inputs).filter(([file, i]) => (o.inputs[file]?.bytesInOutput ?? 0) > 0 && i.imports.some((x) => x.path === imp.path)).map(([file]) => file);
      offenders.push(`${path.basename(out)} imports ${imp.path} (from ${by.join(", ") || "?"})`);
    }
  }
  if (offenders.length > 0) {
    rmSync(target, { recursive: true, force: true });
    throw new Error(`build:browser: node-only imports reached from the browser entries; put them behind a host.ts seam:\n  ${offenders.join("\n  ")}`);
  }
  if (Object.keys(classic).length > 0) {
    await esbuild.build({ absWorkingDir: root, entryPoints: classic, outdir, bundle: true, format: "iife", platform: "browser", target: "es2022", sourcemap: true, minify, logLevel: "warning" });
  }
  copyFileSync(wasmPath, path.join(outdir, "kernels.wasm"));
  copyFileSync(relaxedWasmPath, path.join(outdir, "kernels-relaxed.wasm"));
  const sizes = {};
  const built = readdirSync(outdir);
  for (const f of built.filter((f) => !f.endsWith(".map"))) sizes[f] = statSync(path.join(outdir, f)).size;
  mkdirSync(target, { recursive: true });
  // the stamp (engine-worker.js, when built) last: until it is in place the build reads as stale
  const stamp = path.basename(STAMP);
  for (const f of [...built.filter((f) => f !== stamp), ...built.filter((f) => f === stamp)]) renameSync(path.join(outdir, f), path.join(target, f));
  for (const f of readdirSync(target)) if (!built.includes(f)) rmSync(path.join(target, f), { recursive: true, force: true });
  return sizes;
}

/** builds dist-browser/ when it is missing or stale; returns whether it built */
export async function ensureBrowserBuild() {
  if (!browserBuildIsStale()) return false;
  await buildBrowser();
  return true;
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const sizes = await buildBrowser({ minify: process.argv.includes("--minify") });
  for (const [f, n] of Object.entries(sizes)) console.log(`dist-browser/${f}  ${(n / 1024).toFixed(1)} KiB`);
}
