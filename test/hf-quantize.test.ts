import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { loadModel } from "../src/index.js";
import type { Backend } from "../src/kernels/backend.js";
import { createReferenceBackend } from "../src/kernels/reference/index.js";
import { openModel } from "../src/models/open.js";
import type { LoadQuantization } from "../src/models/index.js";
import { GGMLType, rowByteLength } from "../src/tensor/dtypes.js";
import { Rng, tinyLlama, writeRandomModel } from "../src/testing/index.js";
import { writeRandomHFModel } from "../src/testing/random-hf-model.js";
import { sharedFile, skipWithoutShared } from "./helpers/shared.js";

/*
 * Quantize on load: F32/F16/BF16 matrices become Q8_0/Q4_0/IQ4_NL/IQ4_XS, the k-quants, NF4 or INT8 while they are read. Judged by
 * the KL divergence of the next-token distribution from the unquantized model's, and by how
 * many of llama.cpp's greedy tokens for the trained stories260K survive.
 */
const dir = mkdtempSync(join(tmpdir(), "tsllm-quant-"));
after(() => rmSync(dir, { recursive: true, force: true }));

function softmax(l: Float32Array): Float64Array {
  let max = -Infinity;
  for (const v of l) max = Math.max(max, v);
  const p = Float64Array.from(l, (v) => Math.exp(v - max));
  const s = p.reduce((a, b) => a + b, 0);
  return p.map((v) => v / s);
}

/** a backend that counts the weight bytes it hands out */
function counting(be: Backend): Backend & { allocated: number } {
  const c = Object.create(be) as Backend & { allocated: number };
  c.allocated = 0;
  c.allocWeights = (n: number) => {
    c.allocated += n;
    return be.allocWeights(n);
  };
  return c;
}

test("quantize on load: Q8_0 mean KL < 1e-3 vs F32 (GGUF and HF BF16 folder); Q4_0, IQ4_NL, IQ4_XS reported (the IQ4s below Q4_0); only quantized bytes allocated", { skip: skipWithoutShared("models/stories260K.gguf") }, async (t) => {
  /*
   * std 0.05: the top token gets ~9x the uniform probability. Larger weights make a random
   * network chaotic, amplifying any rounding (measured Q8_0 KL: std 0.07 -> 8.5e-4,
   * std 0.085 -> 1.5e-3), which says more about random networks than about the quantizer.
   */
  const spec = { ...tinyLlama, std: 0.05, seed: 41 };
  const gguf = join(dir, "m.gguf");
  await writeRandomModel(gguf, spec);
  const folder = join(dir, "hf");
  await writeRandomHFModel(folder, spec, { dtype: "BF16" });
  const ref = openModel(gguf);
  const rng = new Rng(2);
  const tokens = Array.from({ length: 24 }, () => rng.u32() % 512);
  const run = (opened: ReturnType<typeof openModel>, quantize?: LoadQuantization) => {
    const be = counting(createReferenceBackend());
    try {
      const lm = opened.build(be, { quantize });
      const logits = lm.forward(tokens, lm.createCache(tokens.length), { allLogits: true });
      return { logits, allocated: be.allocated, vocab: lm.info.vocabSize };
    } finally {
      be.dispose();
    }
  };
  const base = run(ref);
  const V = base.vocab;
  const kl = (other: Float32Array) => {
    let sum = 0;
    for (let i = 0; i < tokens.length; i++) {
      const p = softmax(base.logits.subarray(i * V, (i + 1) * V)), q = softmax(other.subarray(i * V, (i + 1) * V));
      for (let j = 0; j < V; j++) if (p[j]! > 0) sum += p[j]! * Math.log(p[j]! / q[j]!);
    }
    return sum / tokens.length;
  };
  let maxP = 0;
  for (let i = 0; i < tokens.length; i++) maxP += Math.max(...softmax(base.logits.subarray(i * V, (i + 1) * V))) / tokens.length;
  assert.ok(maxP > 5 / V, `distribution too flat to judge (mean top probability ${maxP})`);

  const q8 = run(ref, "q8_0"), q4 = run(ref, "q4_0"), nl = run(ref, "iq4_nl"), xs = run(ref, "iq4_xs");
  const hfq8 = run(openModel(folder, { tokenizer: ref.tokenizer }), "q8_0");
  const klQ8 = kl(q8.logits), klQ4 = kl(q4.logits), klHF = kl(hfq8.logits), klNL = kl(nl.logits), klXS = kl(xs.logits);
  t.diagnostic(`mean top-1 probability ${maxP.toFixed(3)}; mean KL vs F32: Q8_0 ${klQ8.toExponential(2)}, Q4_0 ${klQ4.toExponential(2)}, IQ4_NL ${klNL.toExponential(2)}, IQ4_XS ${klXS.toExponential(2)}, HF BF16 folder -> Q8_0 ${klHF.toExponential(2)}`);
  assert.ok(klQ8 < 1e-3, `Q8_0 KL ${klQ8}`);
  assert.ok(klHF < 1e-3, `HF BF16 -> Q8_0 KL ${klHF}`);
  assert.ok(klQ4 > klQ8, "Q4_0 loses more than Q8_0");
  // the 4-bit non-linear grids with searched scales lose less than Q4_0's linear one
  assert.ok(klNL < klQ4 && klXS < klQ4, `IQ4_NL KL ${klNL}, IQ4_XS KL ${klXS}, Q4_0 KL ${klQ4}`);

  // weight memory: every matrix in its quantized size, nothing else (vectors live outside the arena)
  const header = (await import("../src/formats/gguf-reader.js")).readGGUFHeader(gguf);
  const expected = (type: GGMLType) => header.tensors.filter((x) => x.dims.length === 2).reduce((s, x) => s + rowByteLength(type, x.dims[0]!) * x.dims[1]!, 0);
  assert.equal(q8.allocated, expected(GGMLType.Q8_0));
  assert.equal(q4.allocated, expected(GGMLType.Q4_0));
  assert.equal(nl.allocated, expected(GGMLType.IQ4_NL));
  assert.equal(xs.allocated, expected(GGMLType.IQ4_XS));
  assert.equal(base.allocated, expected(GGMLType.F32));
});

test("quantize on load to iq4_xs: matrices whose rows are not a multiple of 256 become IQ4_NL, as llama.cpp's quantize does", { skip: skipWithoutShared("models/stories260K.gguf") }, async () => {
  // rows of 160 (token_embd, attention, gate/up, output) and 512 (ffn_down)
  const gguf = join(dir, "m160.gguf");
  await writeRandomModel(gguf, { ...tinyLlama, embeddingLength: 160, seed: 42 });
  const be = counting(createReferenceBackend());
  try {
    openModel(gguf).build(be, { quantize: "iq4_xs" });
    const header = (await import("../src/formats/gguf-reader.js")).readGGUFHeader(gguf);
    const matrices = header.tensors.filter((x) => x.dims.length === 2);
    assert.ok(matrices.some((x) => x.dims[0] === 512) && matrices.some((x) => x.dims[0] === 160));
    const expected = matrices.reduce((s, x) => s + rowByteLength(x.dims[0]! % 256 === 0 ? GGMLType.IQ4_XS : GGMLType.IQ4_NL, x.dims[0]!) * x.dims[1]!, 0);
    assert.equal(be.allocated, expected);
  } finally {
    be.dispose();
  }
  assert.throws(() => openModel(gguf).build(createReferenceBackend(), { quantize: "q7_0" as LoadQuantization }), /quantize: expected one of q8_0, q6_k, .*nf4, int8, found "q7_0"/);
  // a GGUF type without a quantizer: one line naming it
  assert.throws(() => openModel(gguf).build(createReferenceBackend(), { quantize: "iq2_xs" as LoadQuantization }), /quantize: .*iq2_xs/);
});

const MODEL = "models/stories260K.gguf", EXPECTED = "models/stories260K.expected.json";
test("stories260K quantized on load: how many of llama.cpp's 64 greedy tokens survive (reported)", { skip: skipWithoutShared(MODEL) || skipWithoutShared(EXPECTED) }, async (t) => {
  const cases = (JSON.parse(readFileSync(sharedFile(EXPECTED)!, "utf8")) as { cases: { prompt: string; completionTokens: number[] }[] }).cases;
  for (const quantize of ["q8_0", "q4_0", "iq4_nl", "iq4_xs"] as const) {
    const model = await loadModel(sharedFile(MODEL)!, { backend: "reference", quantize });
    try {
      const report: string[] = [];
      for (const c of cases) {
        const r = await model.generate(c.prompt, { temperature: 0, maxTokens: c.completionTokens.length, ignoreEos: true });
        let prefix = 0;
        while (prefix < c.completionTokens.length && r.completionTokens[prefix] === c.completionTokens[prefix]) prefix++;
        report.push(`${JSON.stringify(c.prompt)}: ${prefix}/${c.completionTokens.length} before the first difference`);
      }
      t.diagnostic(`${quantize}: ${report.join("; ")}`);
    } finally {
      model.dispose();
    }
  }
});

test("quantize on load to every k-quant, nf4 and int8: KL vs F32 grows as the bits shrink; only quantized bytes allocated", { skip: skipWithoutShared("models/stories260K.gguf") }, async (t) => {
  const spec = { ...tinyLlama, std: 0.05, seed: 43 };
  const gguf = join(dir, "k.gguf");
  await writeRandomModel(gguf, spec);
  const opened = openModel(gguf);
  const rng = new Rng(3);
  const tokens = Array.from({ length: 16 }, () => rng.u32() % 512);
  const run = (quantize?: LoadQuantization) => {
    const be = counting(createReferenceBackend());
    try {
      const lm = opened.build(be, { quantize });
      return { logits: lm.forward(tokens, lm.createCache(tokens.length), { allLogits: true }), allocated: be.allocated, vocab: lm.info.vocabSize };
    } finally {
      be.dispose();
    }
  };
  const base = run();
  const V = base.vocab;
  const kl = (other: Float32Array) => {
    let sum = 0;
    for (let i = 0; i < tokens.length; i++) {
      const p = softmax(base.logits.subarray(i * V, (i + 1) * V)), q = softmax(other.subarray(i * V, (i + 1) * V));
      for (let j = 0; j < V; j++) if (p[j]! > 0) sum += p[j]! * Math.log(p[j]! / q[j]!);
    }
    return sum / tokens.length;
  };
  const header = (await import("../src/formats/gguf-reader.js")).readGGUFHeader(gguf);
  const expected = (type: GGMLType) => header.tensors.filter((x) => x.dims.length === 2).reduce((s, x) => s + rowByteLength(type, x.dims[0]!) * x.dims[1]!, 0);
  const types = { q6_k: GGMLType.Q6_K, q5_k: GGMLType.Q5_K, q4_k: GGMLType.Q4_K, q3_k: GGMLType.Q3_K, q2_k: GGMLType.Q2_K, int8: GGMLType.INT8, nf4: GGMLType.NF4 } as const;
  const kls: Record<string, number> = {};
  for (const [q, type] of Object.entries(types) as [keyof typeof types, GGMLType][]) {
    const r = run(q);
    kls[q] = kl(r.logits);
    assert.equal(r.allocated, expected(type), q);
  }
  t.diagnostic(`mean KL vs F32: ${Object.entries(kls).map(([q, v]) => `${q} ${v.toExponential(2)}`).join(", ")}`);
  assert.ok(kls.q6_k! < kls.q5_k! && kls.q5_k! < kls.q4_k! && kls.q4_k! < kls.q3_k! && kls.q3_k! < kls.q2_k!, JSON.stringify(kls));
  assert.ok(kls.int8! < 1e-3, `int8 KL ${kls.int8}`);
  assert.ok(kls.nf4! < kls.q3_k! && kls.nf4! > kls.q6_k!, `nf4 KL ${kls.nf4}`);
});

test("quantize on load: rows that are not whole blocks fall back as llama-quant.cpp does (q2_k/q3_k -> Q4_0, q4_k -> Q5_0, q5_k -> Q5_1, q6_k -> Q8_0; nf4 -> INT8)", { skip: skipWithoutShared("models/stories260K.gguf") }, async () => {
  // rows of 160 (token_embd, attention, gate/up, output: not a multiple of 256 or 64) and 512 (ffn_down)
  const gguf = join(dir, "k160.gguf");
  await writeRandomModel(gguf, { ...tinyLlama, embeddingLength: 160, seed: 44 });
  const header = (await import("../src/formats/gguf-reader.js")).readGGUFHeader(gguf);
  const matrices = header.tensors.filter((x) => x.dims.length === 2);
  const cases: [LoadQuantization, GGMLType, GGMLType][] = [
    ["q2_k", GGMLType.Q2_K, GGMLType.Q4_0], ["q3_k", GGMLType.Q3_K, GGMLType.Q4_0], ["q4_k", GGMLType.Q4_K, GGMLType.Q5_0],
    ["q5_k", GGMLType.Q5_K, GGMLType.Q5_1], ["q6_k", GGMLType.Q6_K, GGMLType.Q8_0], ["nf4", GGMLType.NF4, GGMLType.INT8],
  ];
  for (const [q, type, fallback] of cases) {
    const be = counting(createReferenceBackend());
    try {
      const lm = openModel(gguf).build(be, { quantize: q });
      const logits = lm.forward([1, 2, 3], lm.createCache(3));
      assert.ok(logits.every(Number.isFinite), q);
      const want = matrices.reduce((s, x) => s + rowByteLength(x.dims[0]! % 256 === 0 ? type : fallback, x.dims[0]!) * x.dims[1]!, 0);
      assert.equal(be.allocated, want, q);
    } finally {
      be.dispose();
    }
  }
});

test("quantize on load to a type the backend has no matmul kernel for (webgpu's few) is refused at load, naming the type and the backend", { skip: skipWithoutShared("models/stories260K.gguf") }, async () => {
  const gguf = join(dir, "limited.gguf");
  await writeRandomModel(gguf, { ...tinyLlama, seed: 45 });
  const be = createReferenceBackend();
  const limited = Object.create(be) as Backend & { canMultiply: (t: GGMLType) => boolean };
  Object.defineProperty(limited, "name", { value: "limited" });
  Object.defineProperty(limited, "canMultiply", { value: (t: GGMLType) => t === GGMLType.F32 || t === GGMLType.Q8_0 });
  try {
    assert.throws(() => openModel(gguf).build(limited, { quantize: "nf4" }), /type NF4 \(from quantize "nf4"\) has no limited matmul kernel; use the wasm backend/);
    const lm = openModel(gguf).build(limited, { quantize: "q8_0" });
    assert.ok(lm.forward([1, 2], lm.createCache(2)).every(Number.isFinite));
    // stored types are left to the backend
    openModel(gguf).build(limited);
  } finally {
    be.dispose();
  }
});
