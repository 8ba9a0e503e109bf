import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { KVBlockPool, KVCache, kvBytesPerToken } from "../src/cache/index.js";
import { loadModel } from "../src/index.js";
import { hadamardInPlace } from "../src/kernels/ops/hadamard.js";
import { EXP2_TABLE, expfLibm } from "../src/kernels/ops/expf.js";
import { kvCacheEncoding, type KVCacheType } from "../src/kernels/index.js";
import { Rng, tinyLlama, writeRandomModel } from "../src/testing/index.js";
import { disposeSharedLlama, llamaCppRun } from "./helpers/llama-cpp-oracle.js";
import { stepAlongLlamaCpp } from "./helpers/logprobs.js";
import { skipWithoutShared } from "./helpers/shared.js";

/*
 * Quantized and half-precision KV caches (--cache-type-k / --cache-type-v), judged by
 * llama.cpp run with the same cache types and the same flash-attention setting (node-llama-cpp;
 * flash attention is the only way llama.cpp takes a quantized V cache, and tsllm's default for
 * one). Block-format rows are Hadamard-rotated first, as llama.cpp does; tsllm reproduces its
 * flash-attention kernel, so block-format caches agree to ~1e-6. f16 caches in the matrix-product
 * order (no flash attention, the default): f16 keys ~1e-6, f16 values ~3e-6 on wasm and ~1e-5 on
 * the reference backend, whose f64 F32 matmuls sit ~1e-7 off llama.cpp's and the weights' f16
 * rounding turns that into an f16 step now and then (without that rounding: 1e-4). f16 with flash attention: llama.cpp's
 * prompt pass runs its tiled kernel, whose order tsllm does not reproduce: ~3e-4.
 */
const dir = mkdtempSync(join(tmpdir(), "tsllm-kvtypes-"));
after(async () => {
  await disposeSharedLlama();
  rmSync(dir, { recursive: true, force: true });
});

const skipStories = skipWithoutShared("models/stories260K.gguf");
const PROMPT = 40, STEPS = 8;

/** K type, V type, flash attention (undefined: the default), tolerance */
const CASES: readonly (readonly [KVCacheType, KVCacheType, boolean | undefined, number])[] = [
  ["q8_0", "q8_0", undefined, 2e-5], ["q4_0", "q4_0", undefined, 2e-5], ["q8_0", "f32", undefined, 1e-3], ["q4_0", "f16", undefined, 1e-3],
  ["f16", "f16", undefined, 6e-5], ["f16", "f32", undefined, 5e-6], ["f32", "f16", undefined, 3e-5], ["f16", "f16", true, 1e-3], ["f32", "f32", true, 1e-3],
];

for (const backend of ["reference", "wasm"] as const) {
  test(`KV cache types match llama.cpp's on a random Llama (${backend})`, { skip: skipStories }, async () => {
    const path = join(dir, `tiny-${backend}.gguf`);
    await writeRandomModel(path, { ...tinyLlama, std: 0.02, seed: 11 });
    for (const [k, v, flashAttention, tolerance] of CASES) {
      const model = await loadModel(path, { backend, contextSize: PROMPT + STEPS + 1, cacheTypeK: k, cacheTypeV: v, flashAttention });
      try {
        const rng = new Rng(7);
        const prompt = [model.tokenizer.bosId ?? 0, ...Array.from({ length: PROMPT - 1 }, () => rng.u32() % model.info.vocabSize)];
        const upper = (t: KVCacheType) => t.toUpperCase() as "F32" | "F16" | "Q8_0" | "Q4_0";
        const ref = await llamaCppRun(path, prompt, { decodeSteps: STEPS, cacheTypes: { k: upper(k), v: upper(v) }, flashAttention });
        const lm = model.languageModel;
        const cache = lm.createCache(PROMPT + STEPS + 1);
        assert.deepEqual(cache.types, flashAttention === undefined ? { k, v } : { k, v, flashAttention });
        const { diffs } = stepAlongLlamaCpp(lm, cache, prompt, ref, STEPS);
        const label = `${k}/${v}${flashAttention === undefined ? "" : ` flash ${flashAttention}`} (${backend}): per-step max |Δ logprob| ${diffs.map((d) => d.toExponential(1)).join(", ")}`;
        console.log(label);
        assert.ok(Math.max(...diffs) < tolerance, label);
      } finally {
        model.dispose();
      }
    }
  });
}

test("an encoded cache's memory: q8_0 rows are 34/128 of f32 ones, q4_0 18/128, f16 half", () => {
  const shape = { blockCount: 30, headCountKv: 3, headDim: 64 };
  const f32 = kvBytesPerToken(shape);
  assert.equal(f32, 30 * 2 * 192 * 4);
  assert.equal(kvBytesPerToken(shape, { k: "q8_0", v: "q8_0" }), 30 * 2 * 6 * 34);
  assert.equal(kvBytesPerToken(shape, { k: "q4_0", v: "q4_0" }), 30 * 2 * 6 * 18);
  assert.equal(kvBytesPerToken(shape, { k: "f16", v: "q8_0" }), 30 * (192 * 2 + 6 * 34));
  const pool = new KVBlockPool(2, 3, 64, 4, undefined, 16, undefined, { k: "q8_0", v: "q4_0" });
  assert.equal(pool.byteLength, 2 * 4 * 16 * (6 * 34 + 6 * 18));
  assert.equal(pool.keys[0]!.length, 4 * 16 * (6 * 34) / 4);
});

test("forkCopy copies encoded rows whole, so a copied sequence reads what its parent stored", () => {
  const types = { k: "q8_0", v: "f16" } as const;
  const c = new KVCache(1, 1, 64, 64, undefined, types);
  const rng = new Rng(3);
  const rows = (n: number) => Float32Array.from({ length: n * 64 }, () => rng.normal());
  c.ensureRoom(5);
  c.store(0, 0, rows(5) as never, rows(5) as never, 5);
  c.length = 5;
  const copy = c.forkCopy();
  const rk = c.pool.keyRowFloats, rv = c.pool.valueRowFloats;
  for (let p = 0; p < 5; p++) {
    const a = c.rows[p]!, b = copy.rows[p]!;
    assert.deepEqual((copy.keys[0] as unknown as Float32Array).subarray(b * rk, (b + 1) * rk), (c.keys[0] as unknown as Float32Array).subarray(a * rk, (a + 1) * rk));
    assert.deepEqual((copy.values[0] as unknown as Float32Array).subarray(b * rv, (b + 1) * rv), (c.values[0] as unknown as Float32Array).subarray(a * rv, (a + 1) * rv));
  }
});

test("the Walsh-Hadamard rotation is the Sylvester matrix / sqrt(n), and its own inverse", () => {
  for (const n of [64, 128]) {
    // H_1 = [1], H_2k = [[H, H], [H, -H]]
    let h = [[1]];
    while (h.length < n) h = [...h.map((r) => [...r, ...r]), ...h.map((r) => [...r, ...r.map((x) => -x)])];
    const rng = new Rng(n);
    const x = Float32Array.from({ length: 2 * n }, () => rng.normal());
    const y = x.slice();
    hadamardInPlace(y, 0, 2 * n, n);
    for (let c = 0; c < 2; c++) {
      for (let i = 0; i < n; i++) {
        let s = 0;
        for (let j = 0; j < n; j++) s += h[i]![j]! * x[c * n + j]!;
        assert.ok(Math.abs(y[c * n + i]! - s / Math.sqrt(n)) < 1e-5, `n ${n}, element ${i}`);
      }
    }
    hadamardInPlace(y, 0, 2 * n, n);
    for (let i = 0; i < 2 * n; i++) assert.ok(Math.abs(y[i]! - x[i]!) < 1e-5);
  }
  assert.throws(() => hadamardInPlace(new Float32Array(96), 0, 96, 48), /chunk 48 must be a power of two dividing 96/);
});

test("llama.cpp's rotation choice: block formats at head dims that are multiples of 64; keys in the largest power-of-two chunk", () => {
  assert.deepEqual(kvCacheEncoding({ k: "q8_0", v: "q4_0" }, 128), { k: { type: "q8_0", rotation: 128 }, v: { type: "q4_0", rotation: 64 }, flash: true });
  assert.deepEqual(kvCacheEncoding({ k: "q8_0", v: "f16" }, 192), { k: { type: "q8_0", rotation: 64 }, v: { type: "f16", rotation: 0 }, flash: true });
  assert.deepEqual(kvCacheEncoding({ k: "q8_0", v: "q8_0" }, 32), { k: { type: "q8_0", rotation: 0 }, v: { type: "q8_0", rotation: 0 }, flash: true });
  // the order: flash attention where a side is a block format, else the matrix products, unless asked
  assert.equal(kvCacheEncoding({ k: "f16", v: "f16" }, 64).flash, false);
  assert.equal(kvCacheEncoding({ k: "f16", v: "f16", flashAttention: true }, 64).flash, true);
  assert.equal(kvCacheEncoding({ k: "f32", v: "f32", flashAttention: true }, 64).flash, true);
});

test("expf as glibc: its table of 2^(i/32) and results within half an ulp and a bit of e^x", () => {
  // glibc's __exp2f_data.tab[i] = bits(2^(i/32)) - (i << 47): entries 1, 2 and 31 as glibc lists them
  const bits = (x: number) => new BigUint64Array(new Float64Array([x]).buffer)[0]!;
  assert.equal(bits(EXP2_TABLE[1]!) - (1n << 47n), 0x3fefd9b0d3158574n);
  assert.equal(bits(EXP2_TABLE[2]!) - (2n << 47n), 0x3fefb5586cf9890fn);
  assert.equal(bits(EXP2_TABLE[31]!) - (31n << 47n), 0x3fefd0765b6e4540n);
  const rng = new Rng(5);
  for (let i = 0; i < 20000; i++) {
    const x = Math.fround(-rng.uniform() * 80);
    const e = expfLibm(x), exact = Math.exp(x);
    const ulp = 2 ** (Math.floor(Math.log2(exact)) - 23);
    assert.ok(Math.abs(e - exact) <= 0.51 * ulp, `expf(${x}) = ${e}, e^x = ${exact}`);
  }
  assert.equal(expfLibm(-Infinity), 0);
  assert.equal(expfLibm(0), 1);
  assert.equal(expfLibm(-104), 0);
});

test("a cache type the model's heads cannot hold is refused in one line; f16 takes any head dim", { skip: skipStories }, async () => {
  const path = join(dir, "odd-heads.gguf");
  await writeRandomModel(path, { ...tinyLlama, embeddingLength: 96, seed: 2 });
  await assert.rejects(loadModel(path, { backend: "reference", cacheTypeK: "q8_0" }), /cacheTypeK q8_0 needs a head dim that is a multiple of 32 \(each head is stored in whole blocks\); this model's is 24: use f16 or f32/);
  await assert.rejects(loadModel(path, { backend: "reference", cacheTypeV: "q5_0" as KVCacheType }), /cacheTypeV must be one of f32, f16, q8_0, q4_0, got "q5_0"/);
  await assert.rejects(loadModel(path, { backend: "reference", cacheTypeV: "q8_0", flashAttention: false }), /cacheTypeV q8_0 needs flash attention \(llama.cpp's order for a block-format cache\): leave flashAttention unset or true, or use f16 \/ f32/);
  const m = await loadModel(path, { backend: "reference", cacheTypeK: "f16", cacheTypeV: "f16" });
  try {
    const r = await m.generate("", { maxTokens: 4, temperature: 0 });
    assert.equal(r.completionTokens.length, 4);
  } finally {
    m.dispose();
  }
});

test("the wasm kernels for f16 and block-format caches give the reference kernels' bits, in both orders (paged rows, GQA heads alone and by group, prompt and decode, Inf in a row)", async () => {
  const { createBackend } = await import("../src/kernels/index.js");
  const wasm = await createBackend("wasm", { threads: 2 });
  const ref = await createBackend("reference");
  try {
    const rng = new Rng(21);
    // [K, V, flash attention]: block formats in the flash order (their default), f16 in both
    const types = [["q8_0", "q8_0", true], ["q4_0", "q4_0", true], ["q8_0", "q4_0", true], ["q4_0", "q8_0", true], ["f16", "f16", true], ["q8_0", "f16", true], ["f16", "q4_0", true],
      ["f32", "f32", true], ["f32", "f16", true], ["q8_0", "f32", true], ["f16", "f16", false], ["f16", "f32", false], ["f32", "f16", false]] as const;
    for (const [kt, vt, flashAttention] of types) {
      for (const { nHeads, nKvHeads, headDim, startPos, nTokens, inf } of [
        { nHeads: 9, nKvHeads: 3, headDim: 64, startPos: 0, nTokens: 37, inf: false },
        { nHeads: 4, nKvHeads: 4, headDim: 128, startPos: 300, nTokens: 1, inf: false },
        { nHeads: 6, nKvHeads: 2, headDim: 32, startPos: 70, nTokens: 5, inf: false },
        // decode with GQA: claims of single heads, or of a group where one claim holds it whole
        { nHeads: 9, nKvHeads: 3, headDim: 64, startPos: 150, nTokens: 1, inf: false },
        // the matrix-product order at a head size past the last 64 (f16: ggml_vec_dot_f16's f64 tail) and not a multiple of 16 (no tinyBLAS)
        ...(flashAttention ? [] : [{ nHeads: 4, nKvHeads: 2, headDim: 40, startPos: 90, nTokens: 1, inf: false }, { nHeads: 4, nKvHeads: 2, headDim: 72, startPos: 20, nTokens: 6, inf: false },
          // an f16 side that overflows to Inf: the kernel hands the pass to the reference
          { nHeads: 4, nKvHeads: 2, headDim: 64, startPos: 20, nTokens: 3, inf: true },
          // decode over fewer keys than the 64 accumulator lanes (two groups of 16 live)
          { nHeads: 9, nKvHeads: 3, headDim: 64, startPos: 24, nTokens: 1, inf: false }]),
      ]) {
        // f16 keys at head dims of 64k only (the kernel's condition; others take the reference kernel, compared all the same)
        const nAll = startPos + nTokens, width = nKvHeads * headDim;
        // rows scattered over a pool of twice the positions, as a paged cache lays them out
        const order = Int32Array.from({ length: 2 * nAll }, (_, i) => i).sort(() => rng.uniform() - 0.5).subarray(0, nAll);
        const kRaw = Float32Array.from({ length: nAll * width }, () => rng.normal() * 2);
        const vRaw = Float32Array.from({ length: nAll * width }, () => rng.normal());
        // f16's edges: subnormal values, and large ones whose sums pass 2^15 (the f16 rounding's lane-by-lane path)
        for (let i = 0; i < kRaw.length; i += 7) kRaw[i] = rng.normal() * 3e-6;
        for (let i = 3; i < vRaw.length; i += 11) vRaw[i] = rng.normal() * 4e-6;
        for (let i = 5; i < vRaw.length; i += 97) vRaw[i] = 3e4 * Math.sign(rng.normal());
        if (inf) kRaw[width + 3] = vRaw[2 * width + 5] = 1e5;
        const q = Float32Array.from({ length: nTokens * nHeads * headDim }, () => rng.normal());
        const outs: Float32Array[] = [];
        for (const be of [ref, wasm]) {
          const pool = new KVBlockPool(1, nKvHeads, headDim, Math.ceil(2 * nAll / 16), be, 16, undefined, { k: kt, v: vt, flashAttention });
          const kIn = be.allocActivations(kRaw.length), vIn = be.allocActivations(vRaw.length);
          be.write(kIn, kRaw);
          be.write(vIn, vRaw);
          // through the pool: the wasm backend's pool of an f16 / f32 cache in the matrix-product order holds a plane per KV head
          pool.writeRows(0, order, kIn, vIn, nAll);
          assert.equal(pool.planar, be === wasm && !flashAttention && nKvHeads > 1, `${kt}/${vt} on ${be.name}: planes per KV head`);
          const qIn = be.allocActivations(q.length), out = be.allocActivations(q.length);
          be.write(qIn, q);
          be.attention(out, qIn, pool.keys[0]!, pool.values[0]!, nTokens, startPos, nHeads, nKvHeads, headDim, 1 / Math.sqrt(headDim), order, pool.encoding);
          outs.push(await be.read(out));
        }
        const label = `${kt}/${vt}${flashAttention ? " flash" : ""} heads ${nHeads}/${nKvHeads} x ${headDim}, ${nTokens} tokens after ${startPos}${inf ? ", an Inf" : ""}`;
        if (inf) assert.ok(outs[0]!.some((x) => !Number.isFinite(x)), `${label}: the Inf reaches the output`);
        if (wasm.llamaCppOrder === "none") assert.ok(outs[0]!.every((x, i) => Math.abs(x - outs[1]![i]!) < 1e-5), label);
        else assert.deepStrictEqual(outs[1], outs[0], label);
      }
    }
  } finally {
    wasm.dispose();
    ref.dispose();
  }
});

for (const type of ["q8_0", "f16"] as const) test(`the engine on a ${type} cache: concurrent requests, n choices and a cached prefix give what each request alone gives`, { skip: skipStories }, async () => {
  const path = join(dir, `engine-${type}.gguf`);
  await writeRandomModel(path, { ...tinyLlama, std: 0.08, seed: 5 });
  const load = () => loadModel(path, { contextSize: 256, cacheTypeK: type, cacheTypeV: type });
  const prefix = [1, ...Array.from({ length: 47 }, (_, i) => 3 + ((i * 37) % 500))];
  const prompts = [[...prefix, 7, 8, 9], [...prefix, 11, 12], [2, 3, 4, 5, 6]];
  const options = { temperature: 0, maxTokens: 10, ignoreEos: true };
  const solo: number[][] = [];
  for (const p of prompts) {
    const m = await load();
    try {
      solo.push((await m.generate(p, options)).completionTokens);
    } finally {
      m.dispose();
    }
  }
  const model = await load();
  try {
    const together = await Promise.all(prompts.map((p) => model.generate(p, options)));
    assert.deepEqual(together.map((r) => r.completionTokens), solo, "batched = solo");
    // the first prompt again: its whole 48-token blocks come from the prefix cache, same tokens
    const again = await model.generate(prompts[0]!, options);
    assert.ok(again.timings.cachedPromptTokens >= 48, `${again.timings.cachedPromptTokens} cached prompt tokens`);
    assert.deepEqual(again.completionTokens, solo[0]);
    // two choices share one prefill (the second forks the cache's encoded rows); choice 1 samples with seed + 1
    const sampled = await model.generate(prompts[1]!, { ...options, temperature: 0.8, seed: 3, n: 2 });
    assert.equal(sampled.choices?.length, 2);
    const alone = await model.generate(prompts[1]!, { ...options, temperature: 0.8, seed: 4 });
    assert.deepEqual(sampled.choices![1]!.completionTokens, alone.completionTokens);
  } finally {
    model.dispose();
  }
});
