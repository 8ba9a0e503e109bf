import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { readGGUFHeader, writeGGUF } from "../src/formats/index.js";
import { OptionError, pipeline, type TextGenerationPipeline } from "../src/index.js";
import { createCandidates, createSampler, loadCandidates, Mt19937, resolveSamplingOptions, samplerStepsFromLlamaCpp, sortCandidates, topK, type SamplingOptions } from "../src/sampling/index.js";
import { rng } from "./helpers/rng.js";
import { sharedFile, skipWithoutShared } from "./helpers/shared.js";

/*
 * Where temperature stands among the filters. llama.cpp's default chain (common/sampling.cpp:
 * penalties, ..., top-k, typical-p, top-p, min-p, ..., temperature) cuts the untempered
 * distribution; transformers' GenerationMixin._get_logits_processor applies its warpers in the
 * order temperature, top-k, top-p, min-p, typical-p, so every cut sees the tempered one. The Model
 * API keeps llama.cpp's; the text-generation pipeline takes transformers'.
 *
 * The logits below are 3 ln2, 2 ln2, ln2, 0 and -10 ln2: exps 8, 4, 2, 1, 2^-10. The expected
 * distributions are worked out by hand (temperature divides the logits; top-k keeps the k largest;
 * top-p keeps the smallest best-first set whose cumulative probability is >= p; min-p keeps what
 * has at least p times the top probability; min_tokens_to_keep 1):
 *
 * transformers, temperature 2: exps 2^1.5, 2, 2^0.5, 1 (and 2^-5). top-k 4 drops the last; over the
 * four, cumulative (2√2) / (3√2 + 3) = 0.39, (2√2 + 2) / (3√2 + 3) = 2/3 < 0.7, then
 * (3√2 + 2) / (3√2 + 3) = 0.86 >= 0.7: top-p 0.7 keeps three. Renormalized over 3√2 + 2:
 *   A = 2√2 / (3√2 + 2) = (6 - 2√2) / 7, B = 2 / (3√2 + 2) = (3√2 - 2) / 7, C = √2 / (3√2 + 2) = (3 - √2) / 7.
 * min-p 0.4 (no top-k, top-p) keeps the same three: relative to the top, 1, 2^-0.5, 2^-1 >= 0.4 > 2^-1.5.
 *
 * llama.cpp, the same values: top-k 4 then top-p 0.7 over 8, 4, 2, 1: 8/15 < 0.7 <= 12/15 keeps two;
 * min-p 0.4 over 1, 1/2, 1/4: two too. Temperature 2 then: 2√2 / (2√2 + 2) = 2 - √2, 2 / (2√2 + 2) = √2 - 1.
 */

const LN2 = Math.log(2);
const LOGITS = Float32Array.from([3 * LN2, 2 * LN2, LN2, 0, -10 * LN2]);
const S2 = Math.SQRT2;
const TRANSFORMERS = [(6 - 2 * S2) / 7, (3 * S2 - 2) / 7, (3 - S2) / 7];
const LLAMA_CPP = [2 - S2, S2 - 1];

/** the distribution sample() would draw from, as probabilities by token id */
function distributionOf(options: SamplingOptions): number[] {
  const d = createSampler({ seed: 1, ...options }).distribution(LOGITS, []);
  const byId: number[] = [];
  d.ids.forEach((id, i) => (byId[id] = d.probs[i]!));
  return byId;
}

function assertClose(actual: number[], expected: number[], what: string): void {
  assert.equal(actual.length, expected.length, `${what}: ${JSON.stringify(actual)}`);
  expected.forEach((p, i) => assert.ok(Math.abs(actual[i]! - p) < 1e-6, `${what}: token ${i} has p = ${actual[i]}, expected ${p}`));
}

test("samplerOrder: transformers tempers before top-k / top-p / min-p, llama.cpp (the default) after: the hand-derived distributions", () => {
  const topKP = { temperature: 2, topK: 4, topP: 0.7, minP: 0 };
  assertClose(distributionOf({ ...topKP, samplerOrder: "transformers" }), TRANSFORMERS, "transformers, top-k 4, top-p 0.7");
  assertClose(distributionOf({ ...topKP, samplerOrder: "llama.cpp" }), LLAMA_CPP, "llama.cpp, top-k 4, top-p 0.7");
  assertClose(distributionOf(topKP), LLAMA_CPP, "the default order");
  const minP = { temperature: 2, topK: 0, topP: 1, minP: 0.4 };
  assertClose(distributionOf({ ...minP, samplerOrder: "transformers" }), TRANSFORMERS, "transformers, min-p 0.4");
  assertClose(distributionOf(minP), LLAMA_CPP, "llama.cpp, min-p 0.4");
  // greedy is the argmax in either order
  assertClose(distributionOf({ temperature: 0, samplerOrder: "transformers" }), [1], "greedy");
});

test("samplerOrder transformers: top-k keeps every token tied with the k-th logit (TopKLogitsWarper removes only scores below it); llama.cpp keeps k", () => {
  // logits 1, 0, 1, 1, -1 with top-k 2: the k-th logit is 1, held by ids 0, 2 and 3
  const logits = Float32Array.from([1, 0, 1, 1, -1]);
  const pairs = (options: SamplingOptions): [number, number][] => {
    const d = createSampler({ seed: 1, temperature: 1, topK: 2, topP: 1, minP: 0, ...options }).distribution(logits, []);
    return [...d.ids].map((id, i): [number, number] => [id, Math.round(d.probs[i]! * 1e6) / 1e6]);
  };
  const third = Math.round(1e6 / 3) / 1e6;
  assert.deepEqual(pairs({ samplerOrder: "transformers" }), [[0, third], [2, third], [3, third]]);
  assert.deepEqual(pairs({ samplerOrder: "llama.cpp" }), [[0, 0.5], [2, 0.5]]);
  // a set already sorted best first (the tail holds the ties in order) keeps them the same way
  const c = loadCandidates(createCandidates(0), logits);
  sortCandidates(c);
  topK(c, 2, true);
  assert.deepEqual([...c.ids.subarray(0, c.size)], [0, 2, 3]);
  // random rows full of ties, small and past the heap's limit: the kept ids are those at or above the k-th logit, best first
  const next = rng(7);
  for (const n of [9, 40, 3000]) {
    for (let trial = 0; trial < 20; trial++) {
      const row = Float32Array.from({ length: n }, () => Math.floor(next() * 6));
      const k = 1 + Math.floor(next() * n);
      const kth = [...row].sort((x, y) => y - x)[k - 1]!;
      const expected = [...row.keys()].filter((i) => row[i]! >= kth).sort((x, y) => row[y]! - row[x]! || x - y);
      const set = loadCandidates(createCandidates(0), row);
      topK(set, k, true);
      assert.deepEqual([...set.ids.subarray(0, set.size)], expected, `n ${n}, k ${k}`);
    }
  }
  // ties at -Infinity carry no probability and are not kept
  const banned = loadCandidates(createCandidates(0), Float32Array.from([1, -Infinity, -Infinity]));
  topK(banned, 2, true);
  assert.deepEqual([...banned.ids.subarray(0, banned.size)], [0, 1]);
});

/*
 * A chain given step by step, as llama.cpp's --samplers / --sampling-seq / the server's `samplers`
 * set it (common/sampling.cpp builds the chain from exactly that list, then draws). With the
 * values above: top-k 4 then temperature 2 then top-p 0.7 is transformers' cut (TRANSFORMERS),
 * top-p before temperature llama.cpp's (LLAMA_CPP). Without temperature the logits stay unscaled:
 * top-k 4, top-p 0.7 over 8, 4, 2, 1 keeps 8 and 4: 2/3 and 1/3. min_keep 3 with top-p 0.1 keeps
 * 8, 4, 2 (top-p alone keeps 8), and temperature 2 over them gives TRANSFORMERS' three values.
 */
test("samplerOrder as a list of steps: the chain runs in the order given, a step left out does not run (hand-derived distributions)", () => {
  const knobs = { temperature: 2, topK: 4, topP: 0.7, minP: 0 };
  assertClose(distributionOf({ ...knobs, samplerOrder: ["topK", "temperature", "topP"] }), TRANSFORMERS, "temperature before top-p");
  assertClose(distributionOf({ ...knobs, samplerOrder: ["topK", "topP", "temperature"] }), LLAMA_CPP, "temperature after top-p");
  assertClose(distributionOf({ ...knobs, samplerOrder: samplerStepsFromLlamaCpp("ktp", "--sampling-seq") }), TRANSFORMERS, "--sampling-seq ktp");
  assertClose(distributionOf({ ...knobs, samplerOrder: samplerStepsFromLlamaCpp(["Top-K", "nucleus", "temp"], "samplers") }), LLAMA_CPP, "names and aliases");
  assertClose(distributionOf({ ...knobs, samplerOrder: ["topK", "topP"] }), [2 / 3, 1 / 3], "no temperature step");
  // temperature 0 is greedy where the chain tempers; a chain without temperature draws from the unscaled logits, as llama.cpp's
  assertClose(distributionOf({ ...knobs, temperature: 0, samplerOrder: ["topK", "temperature", "topP"] }), [1], "greedy");
  assertClose(distributionOf({ ...knobs, temperature: 0, samplerOrder: ["topK", "topP"] }), [2 / 3, 1 / 3], "temperature 0 but no temperature step");
});

test("minKeep: top-p, min-p and typical-p keep at least that many candidates (llama.cpp's min_keep)", () => {
  const knobs = { temperature: 2, topK: 0, topP: 0.1, minP: 0 };
  assertClose(distributionOf(knobs), [1], "top-p 0.1 alone");
  assertClose(distributionOf({ ...knobs, minKeep: 3 }), TRANSFORMERS, "top-p 0.1, min_keep 3");
  assertClose(distributionOf({ temperature: 2, topK: 0, topP: 1, minP: 0.9, minKeep: 3 }), TRANSFORMERS, "min-p 0.9, min_keep 3");
  assert.throws(() => resolveSamplingOptions({ minKeep: -1 }), /sampling option minKeep = -1: expected an integer >= 0/);
});

test("samplerOrder lists: penalties run where listed first, not at all where left out, and are refused later in the chain while on", () => {
  // token 0 (logit 3 ln2) in the history, repeat penalty 8: its logit becomes 3 ln2 / 8, below token 1's 2 ln2
  const penalized = { temperature: 0, repeatPenalty: 8, repeatLastN: 4 };
  const top = (options: SamplingOptions) => createSampler({ seed: 1, ...penalized, ...options }).sample(LOGITS, [0]);
  assert.equal(top({}), 1, "the default chain applies them");
  assert.equal(top({ samplerOrder: ["penalties", "temperature"] }), 1, "listed first");
  assert.equal(top({ samplerOrder: ["temperature"] }), 0, "left out");
  assert.throws(() => resolveSamplingOptions({ ...penalized, samplerOrder: ["temperature", "penalties"] }), (e: unknown) => e instanceof OptionError && e.option === "samplerOrder" && /"penalties" first or left out/.test(e.message));
  // off, they may stand anywhere (llama.cpp's web UI sends its whole default list)
  assert.deepEqual(resolveSamplingOptions({ samplerOrder: ["temperature", "penalties"] }).samplerOrder, ["temperature"]);
  assert.throws(() => resolveSamplingOptions({ samplerOrder: ["topK", "top_k" as never] }), /samplerOrder = "top_k": expected steps among/);
});

test("samplerStepsFromLlamaCpp: llama.cpp's names and letters; samplers this library lacks skipped where off, refused where they would act", () => {
  assert.deepEqual(samplerStepsFromLlamaCpp("edskypmxt", "samplers"), ["penalties", "topK", "typicalP", "topP", "minP", "temperature"]);
  assert.deepEqual(samplerStepsFromLlamaCpp(["penalties", "dry", "top_n_sigma", "top_k", "typ_p", "top_p", "min_p", "xtc", "temperature"], "samplers"), ["penalties", "topK", "typicalP", "topP", "minP", "temperature"]);
  assert.deepEqual(samplerStepsFromLlamaCpp(["TOPK", "typ-p", "typ", "minp", "top-n-sigma"], "x"), ["topK", "typicalP", "typicalP", "minP"]);
  assert.throws(() => samplerStepsFromLlamaCpp("kq", "--sampling-seq"), (e: unknown) => e instanceof OptionError && e.message === `--sampling-seq: "q" names no sampler; expected letters of edskypmxtia`);
  assert.throws(() => samplerStepsFromLlamaCpp(["top_k", "typical"], "--samplers"), /--samplers: "typical" names no sampler; expected llama.cpp sampler names/);
  assert.throws(() => samplerStepsFromLlamaCpp(["adaptive_p"], "--samplers"), /--samplers: "adaptive_p" \(adaptive_p\) is a sampler this library does not implement/);
  // llama.cpp's infill sampler is a step of the chain (infill.ts)
  assert.deepEqual(samplerStepsFromLlamaCpp(["top_k", "top_p", "infill"], "samplers"), ["topK", "topP", "infill"]);
  assert.deepEqual(samplerStepsFromLlamaCpp("kpi", "samplers"), ["topK", "topP", "infill"]);
  assert.throws(() => samplerStepsFromLlamaCpp("ka", "samplers"), /"a" \(adaptive_p\) is a sampler this library does not implement/);
});

test("samplerOrder: anything but \"llama.cpp\", \"transformers\" or a list of steps is refused naming the option", () => {
  for (const bad of ["hf", "", 1, null]) {
    assert.throws(() => resolveSamplingOptions({ samplerOrder: bad as never }), (e: unknown) => {
      assert.ok(e instanceof OptionError);
      assert.equal(e.option, "samplerOrder");
      assert.equal(e.message, `sampling option samplerOrder = ${typeof bad === "string" ? JSON.stringify(bad) : String(bad)}: expected "llama.cpp" or "transformers", or a list of steps (penalties, temperature, topK, topP, minP, typicalP, infill)`);
      return true;
    });
  }
  assert.equal(resolveSamplingOptions({}).samplerOrder, "llama.cpp");
});

const STORIES = "models/stories260K.gguf";
/** the byte tokens <0x41> ... <0x44> of stories260K's vocabulary: "A" ... "D" */
const TOKEN_A = 3 + 0x41;

/**
 * stories260K's vocabulary and shape with weights that make every position's logits LOGITS on
 * the tokens A, B, C, D and -10 ln2 on every other: the blocks' weights are all 0 (attention and
 * feed-forward add nothing, so the last hidden state is the token's embedding), every embedding
 * row is [1024, 0, ...] (RMS-normalized: [8, 0, ...], exactly, the 1e-5 epsilon being below the
 * float32 step at 1024² / 64), the output norm 1/8, and output row i is [logit_i, 0, ...].
 */
async function writeFixedLogitsModel(path: string): Promise<void> {
  const h = readGGUFHeader(sharedFile(STORIES)!);
  await writeGGUF(path, {
    metadata: [...h.metadata],
    tensors: h.tensors.map((t) => {
      const values = new Float32Array(t.byteLength / 4);
      const width = t.dims[0]!;
      if (t.name === "token_embd.weight") for (let r = 0; r < values.length / width; r++) values[r * width] = 1024;
      if (t.name === "output_norm.weight") values.fill(1 / 8);
      if (t.name === "output.weight") {
        for (let r = 0; r < values.length / width; r++) values[r * width] = r >= TOKEN_A && r < TOKEN_A + 4 ? LOGITS[r - TOKEN_A]! : LOGITS[4]!;
      }
      return { name: t.name, type: t.type, dims: t.dims, data: new Uint8Array(values.buffer) };
    }),
  });
}

describe("the text-generation pipeline samples in transformers' warper order", { skip: skipWithoutShared(STORIES) }, () => {
  const dir = mkdtempSync(join(tmpdir(), "tsllm-sampler-order-"));
  const path = join(dir, "fixed-logits.gguf");
  let gen: TextGenerationPipeline | undefined;
  before(() => writeFixedLogitsModel(path));
  after(() => {
    gen?.dispose();
    rmSync(dir, { recursive: true, force: true });
  });

  test("doSample with temperature 2, topK 4, topP 0.7 and a seed: each token is the hand-derived distribution's draw for the seed's number", async () => {
    gen = await pipeline("text-generation", path, { threads: 1 });
    const seed = 1234, n = 60;
    const [out] = (await gen("A", { doSample: true, temperature: 2, topK: 4, topP: 0.7, seed, maxNewTokens: n, returnFullText: false })) as { generated_text: string }[];
    // each step draws one number u from the seed's mt19937 stream and takes the first candidate,
    // best first, whose cumulative probability reaches u
    const rng = new Mt19937(seed);
    const bounds = [TRANSFORMERS[0]!, TRANSFORMERS[0]! + TRANSFORMERS[1]!];
    let expected = "";
    for (let i = 0; i < n; i++) {
      const u = rng.nextDouble();
      assert.ok(bounds.every((b) => Math.abs(u - b) > 1e-4), `draw ${i}: u = ${u} is too close to a boundary for this seed`);
      expected += u <= bounds[0]! ? "A" : u <= bounds[1]! ? "B" : "C";
    }
    assert.ok(expected.includes("C") && /A.*B|B.*A/.test(expected), "the seed draws each of the three tokens");
    assert.equal(out!.generated_text, expected);
  });
});
