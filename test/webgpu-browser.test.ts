import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";
import { after, before, describe, test } from "node:test";
import { chromium, type Browser, type Page } from "playwright-core";
import { createReferenceBackend } from "../src/kernels/reference/index.js";
import { applyRope, attention, rmsNorm, type RopeParams } from "../src/kernels/ops/index.js";
import { GGMLType, rowByteLength } from "../src/tensor/dtypes.js";
import { quantizeRow } from "../src/tensor/quant/index.js";
import { device, hostArray } from "./helpers/host-array.js";
import { rng } from "./helpers/rng.js";
import { CHROMIUM, skipWithoutChromium } from "./helpers/chromium.js";

// The WebGPU backend in a browser: src/kernels/webgpu bundled for the browser (esbuild, which
// tsx brings) must not import node: modules at the top level, and must run on navigator.gpu.
// Headless chromium with --enable-unsafe-webgpu gives a SwiftShader adapter. The page is served
// through Playwright's routing at http://localhost (a secure context, as WebGPU needs).

const entry = fileURLToPath(new URL("../src/kernels/webgpu/index.ts", import.meta.url));

let esbuild: typeof import("esbuild") | null = null;
try {
  esbuild = await import("esbuild");
} catch {
  esbuild = null;
}
const skip = skipWithoutChromium() || (!esbuild ? "esbuild (a dependency of tsx) not found" : false);

/** runs in the page: the ops on navigator.gpu, results as plain arrays */
const IN_PAGE = `async (a) => {
  const { createWebGPUBackend } = await import("/backend.js");
  const b = await createWebGPUBackend();
  const dev = (v) => { const d = b.allocActivations(v.length); b.write(d, v); return d; };
  const xd = dev(a.x);
  const mm = [];
  for (const w of a.weights) {
    const out = b.allocActivations(a.nTokens * a.rows);
    b.matmul(out, { ...w, data: new Uint8Array(w.data) }, xd, a.nTokens);
    mm.push(Array.from(await b.read(out)));
  }
  const nd = dev(a.x);
  b.rmsNorm(nd, nd, new Float32Array(a.normW), a.cols, a.nTokens, 1e-5);
  const qd = dev(a.q);
  b.rope(qd, a.nTokens, a.nHeads, a.positions, a.rope);
  const rope = Array.from(await b.read(qd));
  const att = b.allocActivations(a.q.length);
  b.attention(att, dev(a.q), dev(a.keys), dev(a.values), a.nTokens, a.startPos, a.nHeads, a.nKv, a.hd, 0.2, new Int32Array(a.rowIndex));
  const res = { name: b.name, adapter: b.adapter, mm, norm: Array.from(await b.read(nd)), rope, att: Array.from(await b.read(att)) };
  b.dispose();
  return res;
}`;

function normals(n: number, r: () => number, scale = 1): number[] {
  const out: number[] = [];
  for (let i = 0; i < n; i++) out.push(Math.fround(scale * Math.sqrt(-2 * Math.log(r() + 1e-12)) * Math.cos(2 * Math.PI * r())));
  return out;
}

function maxRelError(actual: number[], expected: Float32Array): number {
  let err = 0, ref = 0;
  for (let i = 0; i < expected.length; i++) {
    err = Math.max(err, Math.abs(actual[i]! - expected[i]!));
    ref = Math.max(ref, Math.abs(expected[i]!));
  }
  return err / ref;
}

describe("webgpu backend in headless chromium (navigator.gpu)", { skip }, () => {
  let browser: Browser;
  let page: Page;
  let bundle = "";

  before(async () => {
    const built = await esbuild!.build({ entryPoints: [entry], bundle: true, format: "esm", platform: "browser", write: false, external: ["node:*"], logLevel: "silent" });
    bundle = built.outputFiles[0]!.text;
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ["--no-sandbox", "--enable-unsafe-webgpu"] });
    page = await browser.newPage();
    await page.route("http://localhost/**", (route) => {
      const url = route.request().url();
      if (url.endsWith("/backend.js")) return route.fulfill({ contentType: "text/javascript", body: bundle });
      return route.fulfill({ contentType: "text/html", body: "<!doctype html><title>webgpu</title>" });
    });
    await page.goto("http://localhost/");
  });

  after(async () => {
    await browser?.close();
  });

  test("the bundle imports no node: module at the top level", () => {
    assert.ok(bundle.length > 0);
    assert.doesNotMatch(bundle, /^import\s[^;]*from\s*["']node:/m);
    assert.doesNotMatch(bundle, /^import\s*["']node:/m);
  });

  test("matmul (Q4_K, Q8_0), rmsNorm, rope and paged GQA attention agree with the reference", async () => {
    const r = rng(7);
    const cols = 256, rows = 45, nTokens = 3;
    const ref = createReferenceBackend();
    const weights = [GGMLType.Q4_K, GGMLType.Q8_0].map((type) => {
      const rb = rowByteLength(type, cols);
      const data = new Uint8Array(rows * rb);
      for (let row = 0; row < rows; row++) quantizeRow(type, Float32Array.from(normals(cols, r, 0.5)), data.subarray(row * rb), cols);
      return { name: `w${type}`, type, dims: [cols, rows], data };
    });
    const x = normals(nTokens * cols, r);
    const normW = normals(cols, r);
    const nHeads = 4, nKv = 2, hd = 32, startPos = 2, cacheRows = 8;
    const rowIndex = [6, 1, 4, 0, 7];
    const keys = normals(cacheRows * nKv * hd, r), values = normals(cacheRows * nKv * hd, r), q = normals(nTokens * nHeads * hd, r);
    const rope: RopeParams = { headDim: hd, ropeDim: hd, base: 10000, freqScale: 1, style: "norm" };
    const positions = [2, 3, 4];

    const args = { weights: weights.map((w) => ({ ...w, data: Array.from(w.data) })), x, normW, cols, rows, nTokens, q, keys, values, nHeads, nKv, hd, startPos, rowIndex, rope, positions };
    // a string, not a function: tsx's transform would add helpers (__name) the page lacks
    const result = (await page.evaluate(`(${IN_PAGE})(${JSON.stringify(args)})`)) as { name: string; adapter: string; mm: number[][]; norm: number[]; rope: number[]; att: number[] };

    assert.equal(result.name, "webgpu");
    assert.match(result.adapter, /navigator\.gpu$/);
    const errors: string[] = [result.name];
    const check = (what: string, actual: number[], expected: Float32Array, tol: number): void => {
      const e = maxRelError(actual, expected);
      errors.push(`${what.padEnd(16)} ${e.toExponential(2)} (tol ${tol})`);
      assert.ok(e <= tol, `${what} in the browser: max error ${e} above ${tol}`);
    };
    weights.forEach((w, i) => {
      const expected = hostArray(nTokens * rows);
      ref.matmul(expected, w, device(Float32Array.from(x)), nTokens);
      check(`matmul ${w.type === GGMLType.Q4_K ? "Q4_K" : "Q8_0"}`, result.mm[i]!, expected, 1e-4);
    });
    const en = new Float32Array(x.length);
    rmsNorm(en, Float32Array.from(x), Float32Array.from(normW), cols, nTokens, 1e-5);
    check("rmsNorm", result.norm, en, 1e-5);
    const er = Float32Array.from(q);
    applyRope(er, nTokens, nHeads, positions, rope);
    check("rope", result.rope, er, 1e-5);
    const ea = new Float32Array(q.length);
    attention(ea, Float32Array.from(q), Float32Array.from(keys), Float32Array.from(values), nTokens, startPos, nHeads, nKv, hd, 0.2, Int32Array.from(rowIndex));
    check("attention", result.att, ea, 1e-5);
    console.log(errors.join("\n"));
  });
});
