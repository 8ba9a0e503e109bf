import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { extname, join } from "node:path";
import { after, before, test } from "node:test";
import { chromium, type Browser, type Page } from "playwright-core";
import { createReferenceBackend } from "../src/kernels/reference/index.js";
import { createWasmBackend } from "../src/kernels/wasm/index.js";
import { GGMLType, rowByteLength, typeName } from "../src/tensor/dtypes.js";
import { quantizeRow } from "../src/tensor/quant/index.js";
import { device, hostArray } from "./helpers/host-array.js";
import type { MatmulReply, MatmulRequest } from "./helpers/wasm-backend-page.js";
import { rng } from "./helpers/rng.js";
// @ts-expect-error: plain JS build script
import { buildBrowser } from "../scripts/build-browser.mjs";
import { CHROMIUM, skipWithoutChromium } from "./helpers/chromium.js";

// The wasm backend in headless Chromium (the browser build's seams, Web Worker threads): its Q8_0
// matmuls must give the reference kernel's bits, as in Node (wasm-exact.test.ts), and its Q4_0,
// Q5_0, Q4_K, Q5_K and Q6_K ones the bits of Node's wasm backend (whose relaxed kernels wasm-relaxed.test.ts holds to
// the SIMD128 build's). Chromium's V8 lowers Relaxed SIMD's int32 dot to VNNI's vpdpbusd on a CPU
// with AVX-VNNI, where the batches' group kernels then take it (C.VNNI_DOT): Node 20's V8 never
// does, so this page is where those paths are checked. Which dot ran is printed, and asserted
// from /proc/cpuinfo.

const skip = skipWithoutChromium();
const cpuHasAvxVnni = (() => {
  try {
    return /\bavx_vnni\b/.test(readFileSync("/proc/cpuinfo", "utf8"));
  } catch {
    return undefined;
  }
})();

const TYPES: Record<string, string> = { ".js": "text/javascript", ".wasm": "application/wasm", ".map": "application/json" };
let dir = "";
let browser: Browser | undefined;
let page: Page;
let server: Server | undefined;

before(async () => {
  if (skip) return;
  dir = mkdtempSync(join(tmpdir(), "tsllm-wasm-page-"));
  await buildBrowser({ outdir: dir, entries: { "wasm-page": "test/helpers/wasm-backend-page.ts", "kernel-worker": "src/browser/kernel-worker.ts" } });
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ["--no-sandbox"] });
  // a loopback server (the test worker's kernel workers load from it too), cross-origin isolated
  // as the browser example serves: shared WebAssembly memories need it
  const isolated = { "Cross-Origin-Opener-Policy": "same-origin", "Cross-Origin-Embedder-Policy": "require-corp", "Cross-Origin-Resource-Policy": "same-origin" };
  server = createServer((req, res) => {
    const name = new URL(req.url ?? "/", "http://localhost").pathname.slice(1);
    const file = join(dir, name);
    const found = name !== "" && !name.includes("..") && existsSync(file);
    res.writeHead(200, { ...isolated, "Content-Type": found ? (TYPES[extname(name)] ?? "application/octet-stream") : "text/html" });
    res.end(found ? readFileSync(file) : "<!doctype html><title>wasm</title>");
  });
  await new Promise<void>((resolve) => server!.listen(0, "127.0.0.1", resolve));
  page = await browser.newPage();
  await page.goto(`http://127.0.0.1:${(server.address() as AddressInfo).port}/`);
});

after(async () => {
  await browser?.close();
  server?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** runs in the page (a string: tsx's transform would add helpers the page lacks): the matmuls in a module worker (wasm-backend-page.ts), as the browser's engine runs its backend */
const IN_PAGE = `(args) => new Promise((resolve, reject) => {
  const worker = new Worker("/wasm-page.js", { type: "module" });
  worker.onerror = (e) => reject(new Error("the test worker failed: " + e.message));
  worker.onmessage = (e) => {
    worker.terminate();
    if (e.data.error) reject(new Error(e.data.error));
    else resolve(e.data.reply);
  };
  worker.postMessage(args);
})`;

test("Q8_0, Q4_0, Q5_0, Q4_K, Q5_K and Q6_K matmuls in Chromium's wasm backend give the bits of the reference (Q8_0) and of Node's wasm backend (VNNI's dot where V8 lowers to it)", { skip }, async () => {
  const r = rng(29);
  const filled = (n: number, scale: number): Float32Array => Float32Array.from({ length: n }, () => (r() * 2 - 1) * scale);
  const tokens = [1, 4, 8, 13, 29];
  // the k-quants' rows a multiple of 256 wide (an odd row count: the last row pairs with itself)
  const shapes = [[67, 160], [130, 576], [5, 2048]] as const, superBlockShapes = [[67, 512], [9, 2816]] as const;
  const kQuants = new Set([GGMLType.Q4_K, GGMLType.Q5_K, GGMLType.Q6_K]);
  const weights = [GGMLType.Q8_0, GGMLType.Q4_0, GGMLType.Q5_0, ...kQuants].flatMap((type) => (kQuants.has(type) ? superBlockShapes : shapes).map(([rows, cols]) => {
    const rowBytes = rowByteLength(type, cols);
    const data = new Uint8Array(rows * rowBytes);
    for (let row = 0; row < rows; row++) quantizeRow(type, filled(cols, 1 + (row % 5)), data.subarray(row * rowBytes, (row + 1) * rowBytes), cols);
    // a Q8_0 weight of -128 (legal in a file, never written by ggml's quantizer) must be exact too
    if (type === GGMLType.Q8_0) data[2] = 0x80;
    return { rows, cols, type, data };
  }));
  const x = filled(29 * 2816, 3);
  const nodeWasm = await createWasmBackend({ threads: 1, simd: "relaxed" });
  after(() => nodeWasm.dispose());
  // Q8_0 in llama.cpp's order (x86 with FMA): the reference's bits; Q4_0 / Q5_0 (and Q8_0 where
  // the exact kernels do not run): Node's wasm kernels' bits. Each output as its f32 bits
  const exact = nodeWasm.llamaCppOrder !== "none";
  const reference = createReferenceBackend();
  const expected = weights.flatMap((w) => {
    const judge = w.type === GGMLType.Q8_0 && exact ? reference : nodeWasm;
    const data = judge === reference ? w.data : nodeWasm.allocWeights(w.data.length);
    data.set(w.data);
    const tensor = { name: "w", type: w.type, dims: [w.cols, w.rows], data };
    return tokens.map((n) => {
      const out = hostArray(n * w.rows);
      judge.matmul(out, tensor, device(x.slice(0, n * w.cols)), n);
      return { what: `${typeName(w.type)} ${w.rows}x${w.cols}, ${n} tokens`, bits: Array.from(new Uint32Array(out.buffer, out.byteOffset, out.length)) };
    });
  });
  for (const threads of [1, 2]) {
    const args: MatmulRequest = { threads, tokens, x: Array.from(x), weights: weights.map((w) => ({ ...w, data: Array.from(w.data) })) };
    const result = (await page.evaluate(`(${IN_PAGE})(${JSON.stringify(args)})`)) as MatmulReply;
    assert.equal(result.threads, threads);
    // the exact kernels where Node's run them (x86 with FMA)
    assert.equal(result.llamaCppOrder, nodeWasm.llamaCppOrder, "Chromium's wasm backend and Node's disagree on running llama.cpp's order");
    if (cpuHasAvxVnni !== undefined) assert.equal(result.vnniDot, cpuHasAvxVnni, `this CPU ${cpuHasAvxVnni ? "has" : "lacks"} AVX-VNNI, so Chromium's V8 should ${cpuHasAvxVnni ? "" : "not "}lower the relaxed dot to vpdpbusd`);
    console.log(`${threads} thread(s): batches on ${result.vnniDot ? "VNNI's dot (vpdpbusd)" : "the int16-pair dot (pmaddubsw)"}`);
    assert.equal(result.out.length, expected.length);
    expected.forEach(({ what, bits }, i) => {
      const got = result.out[i]!;
      const at = bits.findIndex((b, j) => b !== got[j]);
      assert.equal(at, -1, `${what}, ${threads} threads: element ${at} differs (browser bits ${got[at]?.toString(16)}, expected ${bits[at]?.toString(16)})`);
    });
  }
});

test("a page's main thread gets a clear error for a threaded wasm backend (its pool must block in Atomics.wait), and runs one thread", { skip }, async () => {
  const outcome = (threads: number): Promise<string> =>
    page.evaluate(`import("/wasm-page.js").then((m) => m.createBrowserBackend("wasm", { threads: ${threads} })).then((b) => { const t = b.threads; b.dispose(); return "created, threads " + t; }, (e) => e.message)`) as Promise<string>;
  assert.match(await outcome(2), /^wasm backend: 2 threads need a thread that may block in Atomics\.wait .* not a page's main thread/);
  assert.equal(await outcome(1), "created, threads 1");
});
