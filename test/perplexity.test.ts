import assert from "node:assert/strict";
import { execFile, spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { after, test } from "node:test";
import { promisify } from "node:util";
import { KVCache } from "../src/cache/kv-cache.js";
import type { ForwardOptions, LanguageModel, ModelInfo } from "../src/models/model.js";
import { computeKlDivergence, computePerplexity, planWindows } from "../src/perplexity/index.js";
import { OptionError } from "../src/units/index.js";
import { disposeSharedLlama, llamaToken, sharedLlama } from "./helpers/llama-cpp-oracle.js";
import { PROJECT_ROOT, sharedFile, skipWithoutShared } from "./helpers/shared.js";

/**
 * A stand-in LanguageModel: every position gets the same logits row, and each forward call is
 * recorded (tokens, the cache position it started at, whether all logits were asked for).
 */
// logits are float32, so ln 3 is off by ~1e-8 relative: hand-computed values are checked to 1e-6
const close = (a: number, b: number) => Math.abs(a - b) <= 1e-6 * Math.max(1, Math.abs(b));

function fixedModel(row: number[]) {
  const calls: { tokens: number[]; pos: number; allLogits: boolean }[] = [];
  const info: ModelInfo = {
    architecture: "fixed", vocabSize: row.length, embeddingLength: 1, blockCount: 1, headCount: 1,
    headCountKv: 1, headDim: 1, feedForwardLength: 1, contextLength: 1 << 20, parameterCount: 0,
  };
  const model = {
    info,
    createCache: (n: number) => new KVCache(1, 1, 1, n),
    forward(tokens: readonly number[], cache: KVCache, options: ForwardOptions = {}): Float32Array {
      cache.ensureRoom(tokens.length);
      calls.push({ tokens: [...tokens], pos: cache.length, allLogits: options.allLogits === true });
      cache.length += tokens.length;
      const rows = options.allLogits ? tokens.length : 1;
      const out = new Float32Array(rows * row.length);
      for (let r = 0; r < rows; r++) out.set(row, r * row.length);
      return out;
    },
    forwardAsync(tokens: readonly number[], cache: KVCache, options: ForwardOptions = {}): Promise<Float32Array> {
      return Promise.resolve(model.forward(tokens, cache, options));
    },
  } as LanguageModel;
  return { model, calls };
}

test("windows: floor(n / ctx) windows, the second half scored, at least 2 x ctx tokens needed", () => {
  assert.deepEqual(planWindows(20, 8), { ctx: 8, chunks: 2, first: 4, scoredPerChunk: 3 });
  assert.deepEqual(planWindows(1000, 256), { ctx: 256, chunks: 3, first: 128, scoredPerChunk: 127 });
  assert.deepEqual(planWindows(1000, 7, 2), { ctx: 7, chunks: 2, first: 3, scoredPerChunk: 3 });
  assert.throws(() => planWindows(15, 8), /needs at least 16 tokens; the text tokenizes to only 15/);
  assert.throws(() => planWindows(100, 2), /ctx must be an integer >= 4/);
  assert.throws(() => planWindows(100, 8, 0), /chunks must be a positive integer/);
  // a number given as a string (from JavaScript, a form field) is shown as the string it is: "got 16" read as a valid value
  assert.throws(() => planWindows(100, "16" as never), (e: unknown) => e instanceof OptionError && e.option === "ctx" && e.message === 'ctx must be an integer >= 4, got "16"');
  assert.throws(() => planWindows(100, 8, "4" as never), (e: unknown) => e instanceof OptionError && e.option === "chunks" && e.message === 'chunks must be a positive integer, got "4"');
});

test("perplexity: hand-computed value, standard error, windows with BOS and batches", async () => {
  // logits [0, ln 3, 0, 0]: p(1) = 3/6 = 1/2, p(0) = p(2) = p(3) = 1/6
  const { model, calls } = fixedModel([0, Math.log(3), 0, 0]);
  // 20 tokens, ctx 8: windows [0,8) and [8,16); scored targets are positions 5,6,7 of each
  const tokens = [9, 0, 0, 0, 0, 1, 1, 0, 9, 0, 0, 0, 0, 1, 0, 0, 2, 2, 2, 2].map((t) => t % 4);
  await assert.rejects(computePerplexity(model, tokens, { ctx: 8, batch: "3" as never }), (e: unknown) => e instanceof OptionError && e.option === "batch" && e.message === 'batch must be a positive integer, got "3"');
  const r = await computePerplexity(model, tokens, { ctx: 8, bosId: 3, batch: 3 });
  // targets 1,1,0,1,0,0: three at -ln(1/2), three at -ln(1/6) -> ppl = exp((ln 2 + ln 6) / 2) = sqrt(12)
  assert.equal(r.tokens, 6);
  assert.equal(r.chunks, 2);
  assert.ok(close(r.perplexity, Math.sqrt(12)), `${r.perplexity}`);
  // per-token NLLs are ln 2 or ln 6 in equal numbers: variance (ln 3 / 2)^2, SE of the mean (ln 3 / 2) / sqrt(5)
  const se = Math.sqrt(12) * (Math.log(3) / 2) / Math.sqrt(5);
  assert.ok(close(r.standardError, se), `${r.standardError} vs ${se}`);
  assert.ok(close(r.runningPerplexity[0]!, Math.exp((2 * Math.log(2) + Math.log(6)) / 3)));
  // each window starts from an empty cache with BOS (3) over its first token; batches of 3;
  // only passes reaching the scored half (positions >= 4) ask for all logits
  assert.deepEqual(calls, [
    { tokens: [3, 0, 0], pos: 0, allLogits: false },
    { tokens: [0, 0, 1], pos: 3, allLogits: true },
    { tokens: [1, 0], pos: 6, allLogits: true },
    { tokens: [3, 0, 0], pos: 0, allLogits: false },
    { tokens: [0, 0, 1], pos: 3, allLogits: true },
    { tokens: [0, 0], pos: 6, allLogits: true },
  ]);
});

test("perplexity of uniform logits is the vocabulary size; no BOS leaves the window as is", async () => {
  const { model, calls } = fixedModel(new Array(10).fill(0.5));
  const r = await computePerplexity(model, Array.from({ length: 50 }, (_, i) => i % 10), { ctx: 16 });
  assert.ok(close(r.perplexity, 10));
  assert.ok(close(r.standardError, 0), "every token has the same NLL");
  assert.equal(r.tokens, 3 * 7);
  assert.equal(calls[1]!.tokens[0], 6, "the second window starts with the text's token 16 % 10, not BOS");
});

test("KL divergence: hand-computed against a base, zero against itself", async () => {
  const base = fixedModel([0, Math.log(3), 0, 0]).model; // p_base = [1/6, 1/2, 1/6, 1/6]
  const uniform = fixedModel([0, 0, 0, 0]).model; // p = 1/4 each; argmax 0 (lowest id on ties)
  const tokens = Array.from({ length: 40 }, (_, i) => i % 4);
  const r = await computeKlDivergence(uniform, base, tokens, { ctx: 8, bosId: 1 });
  // KL = 3 (1/6) ln((1/6)/(1/4)) + (1/2) ln((1/2)/(1/4)) = (1/2) ln(2/3) + (1/2) ln 2 = (1/2) ln(4/3)
  assert.ok(close(r.meanKl.value, 0.5 * Math.log(4 / 3)), `${r.meanKl.value}`);
  assert.equal(r.sameTop.value, 0);
  assert.ok(close(r.perplexity.value, 4));
  assert.equal(r.tokens, 5 * 3);
  const self = await computeKlDivergence(base, base, tokens, { ctx: 8 });
  assert.ok(Math.abs(self.meanKl.value) < 1e-15);
  assert.equal(self.sameTop.value, 1);
  assert.equal(self.perplexity.value, self.basePerplexity.value);
  await assert.rejects(computeKlDivergence(fixedModel([0, 0]).model, base, tokens, { ctx: 8 }), /vocabulary has 2 tokens but the base model's has 4/);
});

const MODEL = "models/stories260K.gguf";
const TEXT = "text/tinystories-valid-30k.txt";
const skip = skipWithoutShared(MODEL) || skipWithoutShared(TEXT);
after(disposeSharedLlama);

/**
 * llama.cpp's perplexity from its own next-token probabilities: the same windows (BOS over
 * the first token, each from an empty cache), the probability of the true next token at every
 * scored position, exp of the mean negative log.
 */
async function llamaCppPerplexity(modelPath: string, tokens: number[], ctx: number, bosId: number): Promise<{ perplexity: number; count: number }> {
  const llama = await sharedLlama();
  const model = await llama.loadModel({ modelPath, gpuLayers: 0 });
  try {
    const context = await model.createContext({
      contextSize: ctx, batchSize: ctx, sequences: 1, threads: 2,
      flashAttention: false, experimentalKvCacheKeyType: "F32", experimentalKvCacheValueType: "F32",
    });
    try {
      const sequence = context.getSequence();
      const next = { probabilities: true, options: { temperature: 1, topK: 0, topP: 1, minP: 0 } } as const;
      const first = Math.floor(ctx / 2);
      let sum = 0;
      let count = 0;
      for (let i = 0; i < Math.floor(tokens.length / ctx); i++) {
        await sequence.clearHistory();
        const w = tokens.slice(i * ctx, (i + 1) * ctx);
        w[0] = bosId;
        const input = w.map((t, j) => (j >= first && j <= ctx - 2 ? ([t, { generateNext: next }] as const) : t));
        const res = await sequence.controlledEvaluate(input as Parameters<typeof sequence.controlledEvaluate>[0]);
        for (let j = first; j <= ctx - 2; j++) {
          const target = tokens[i * ctx + j + 1]!;
          const p = res[j]?.next?.probabilities?.get(llamaToken(target));
          assert.ok(p !== undefined && p > 0, `llama.cpp gave no probability for token ${target} at window ${i} position ${j}`);
          sum -= Math.log(p);
          count++;
        }
      }
      return { perplexity: Math.exp(sum / count), count };
    } finally {
      await context.dispose();
    }
  } finally {
    await model.dispose();
  }
}

test("stories260K perplexity (tsllm perplexity --ctx 256 --json) equals llama.cpp's within 0.5%", { skip, timeout: 300_000 }, async (t) => {
  const modelPath = sharedFile(MODEL)!;
  const textPath = sharedFile(TEXT)!;
  const { stdout } = await promisify(execFile)(process.execPath, [
    "--import", "tsx", resolve(PROJECT_ROOT, "src/cli/main.ts"), "perplexity",
    "--model", modelPath, "--file", textPath, "--ctx", "256", "--json",
  ], { cwd: PROJECT_ROOT, maxBuffer: 1 << 24 });
  const ours = JSON.parse(stdout);
  assert.equal(ours.ctx, 256);
  assert.equal(ours.chunks, Math.floor(ours.textTokens / 256));
  assert.equal(ours.tokens, ours.chunks * 127);

  // llama.cpp tokenizes the same text to the same ids (its tokenize() leaves BOS out)
  const llama = await sharedLlama();
  const lm = await llama.loadModel({ modelPath, gpuLayers: 0 });
  const theirTokens = [1, ...lm.tokenize(readFileSync(textPath, "utf8"), false)] as number[];
  await lm.dispose();
  assert.equal(theirTokens.length, ours.textTokens);

  const ref = await llamaCppPerplexity(modelPath, theirTokens, 256, 1);
  assert.equal(ref.count, ours.tokens);
  t.diagnostic(`perplexity: tsllm ${ours.perplexity} +/- ${ours.standardError}, llama.cpp ${ref.perplexity} (${ours.tokens} tokens, ${ours.chunks} windows)`);
  const rel = Math.abs(ours.perplexity - ref.perplexity) / ref.perplexity;
  assert.ok(rel < 0.005, `tsllm ${ours.perplexity} vs llama.cpp ${ref.perplexity}: ${(100 * rel).toFixed(4)}% apart`);
});

test("quality of a quantization: tsllm quantize's q4_k file has llama.cpp's perplexity; perplexity --quantize q4_k --kl-divergence (no --base) gives the same PPL(Q) and the KL vs the F32 model", { skip, timeout: 300_000 }, async (t) => {
  const { mkdtempSync, rmSync } = await import("node:fs");
  const { tmpdir } = await import("node:os");
  const { join } = await import("node:path");
  const dir = mkdtempSync(join(tmpdir(), "tsllm-ppl-q-"));
  try {
    const cli = (args: string[]) => promisify(execFile)(process.execPath, ["--import", "tsx", resolve(PROJECT_ROOT, "src/cli/main.ts"), ...args], { cwd: PROJECT_ROOT, maxBuffer: 1 << 24 });
    const modelPath = sharedFile(MODEL)!, textPath = sharedFile(TEXT)!;
    const q4 = join(dir, "q4_k.gguf");
    // --pure: every matrix Q4_K, as --quantize q4_k on load (q4_k alone is llama-quantize's Q4_K_M mixture)
    await cli(["quantize", modelPath, q4, "--type", "q4_k", "--pure"]);
    const common = ["--file", textPath, "--ctx", "256", "--chunks", "8", "--backend", "reference", "--json"];
    const file = JSON.parse((await cli(["perplexity", "--model", q4, ...common])).stdout);
    const kl = JSON.parse((await cli(["perplexity", "--model", modelPath, "--quantize", "q4_k", "--kl-divergence", ...common])).stdout);
    const f32 = JSON.parse((await cli(["perplexity", "--model", modelPath, ...common])).stdout);
    const llama = await sharedLlama();
    const lm = await llama.loadModel({ modelPath: q4, gpuLayers: 0 });
    const tokens = [1, ...lm.tokenize(readFileSync(textPath, "utf8"), false)] as number[];
    await lm.dispose();
    const ref = await llamaCppPerplexity(q4, tokens.slice(0, 256 * 8), 256, 1);
    t.diagnostic(`stories260K q4_k (rows of 64 -> Q5_0, of 172 -> F16): PPL tsllm ${file.perplexity.toFixed(4)}, llama.cpp ${ref.perplexity.toFixed(4)}; --quantize q4_k: PPL(Q) ${kl.perplexity.value.toFixed(4)}, PPL(F32) ${kl.basePerplexity.value.toFixed(4)}, mean KL ${kl.meanKl.value.toExponential(3)}, same top ${(100 * kl.sameTop.value).toFixed(2)}%`);
    assert.equal(kl.base, modelPath);
    assert.ok(Math.abs(file.perplexity - ref.perplexity) / ref.perplexity < 0.005, `${file.perplexity} vs llama.cpp ${ref.perplexity}`);
    // the same quantizer on load, except the matrices whose rows (172) are no multiple of 32: F16 in
    // the file (llama.cpp's rule), their stored F32 on load
    assert.ok(Math.abs(kl.perplexity.value - file.perplexity) / file.perplexity < 1e-3, `${kl.perplexity.value} vs ${file.perplexity}`);
    assert.ok(close(kl.basePerplexity.value, f32.perplexity), `${kl.basePerplexity.value} vs ${f32.perplexity}`);
    assert.ok(kl.meanKl.value > 0 && kl.meanKl.value < 0.5, String(kl.meanKl.value));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("tsllm perplexity: usage errors name the flag", { skip }, async () => {
  const run = (args: string[]) => promisify(execFile)(process.execPath, ["--import", "tsx", resolve(PROJECT_ROOT, "src/cli/main.ts"), "perplexity", ...args], { cwd: PROJECT_ROOT });
  await assert.rejects(run(["--model", sharedFile(MODEL)!]), (e: { stderr: string; code: number }) => /--file is required/.test(e.stderr) && e.code === 2);
  await assert.rejects(run(["--model", sharedFile(MODEL)!, "--file", sharedFile(TEXT)!, "--kl-divergence"]), (e: { stderr: string }) => /--kl-divergence needs --base/.test(e.stderr));
  await assert.rejects(run(["--model", sharedFile(MODEL)!, "--file", sharedFile(TEXT)!, "--ctx", "100000"]), (e: { stderr: string; code: number }) => /needs at least 200000 tokens/.test(e.stderr) && e.code === 1);
  await assert.rejects(run(["--model", sharedFile(MODEL)!, "--file", PROJECT_ROOT]), (e: { stderr: string; code: number }) => e.stderr === `tsllm: error: --file ${PROJECT_ROOT}: it is a folder, not a text file\n` && e.code === 1);
  await assert.rejects(run(["--model", sharedFile(MODEL)!, "--file", `${PROJECT_ROOT}/no-such.txt`]), (e: { stderr: string; code: number }) => e.stderr === `tsllm: error: --file ${PROJECT_ROOT}/no-such.txt: no such file\n` && e.code === 1);
  // a --base not found is named by its flag, before anything loads (it came after --model's load and the progress line, as "model not found: ...")
  const noBase = `${PROJECT_ROOT}/no-such-base.gguf`;
  await assert.rejects(run(["--model", sharedFile(MODEL)!, "--file", sharedFile(TEXT)!, "--ctx", "64", "--kl-divergence", "--base", noBase]), (e: { stderr: string; code: number }) => e.stderr.startsWith(`tsllm: error: --base: model not found: ${noBase} (`) && e.stderr.split("\n").length === 2 && e.code === 1);
  // a window too large for memory (the text holds two): the advice names this command's flag (it said generate's --ctx-size);
  // one thread, so that the plan has no wasm worker's 34 MiB whatever the machine's cores
  const withMemory = (ctx: string, bytes: number) => promisify(execFile)(process.execPath, ["--import", "tsx", resolve(PROJECT_ROOT, "src/cli/main.ts"), "perplexity", "--model", sharedFile(MODEL)!, "--file", sharedFile(TEXT)!, "--ctx", ctx, "--threads", "1"], {
    cwd: PROJECT_ROOT, env: { ...process.env, TSLLM_AVAILABLE_MEMORY: String(bytes) },
  }).then(() => ({ code: 0, stderr: "" }), (e: { code: number; stderr: string }) => e);
  const tooLarge = await withMemory("1000", 36e6);
  assert.equal(tooLarge.code, 1);
  assert.match(tooLarge.stderr, /^tsllm: error: .*stories260K\.gguf: needs .*: try --ctx \d+\n$/);
  // a text too short for one window is said before the model is loaded at that context: the
  // memory plan's refusal of a 16M-token KV cache the text never needed came first, with advice
  // that did not help (and with memory to spare, the KV cache was allocated before the error)
  const tooShort = await withMemory("16000000", 2 ** 30);
  assert.equal(tooShort.code, 1);
  const m = /^tsllm: error: --file \S+: perplexity with a context of 16000000 needs at least 32000000 tokens; the text tokenizes to only (\d+); use --ctx (\d+) or less, or a longer text\n$/.exec(tooShort.stderr);
  assert.ok(m, tooShort.stderr);
  assert.equal(Number(m[2]), Math.floor(Number(m[1]) / 2));
});

// a load-time warning reaches the command line's user as one line in tsllm's form, before the
// first window (it came as Node's "(node:PID) Warning: ..." with a --trace-warnings hint,
// after the first window's output)
test("tsllm perplexity --ctx above the trained context warns in one tsllm line before any window", { skip }, async () => {
  const { stdout, stderr } = await promisify(execFile)(process.execPath, [
    "--import", "tsx", resolve(PROJECT_ROOT, "src/cli/main.ts"), "perplexity",
    "--model", sharedFile(MODEL)!, "--file", sharedFile(TEXT)!, "--ctx", "4096", "--chunks", "1",
  ], { cwd: PROJECT_ROOT, maxBuffer: 1 << 24 });
  const lines = stderr.trim().split("\n");
  assert.match(lines[0]!, /^tsllm: warning: .*stories260K\.gguf: context size 4096 is more than the 2048 tokens the model was trained with/);
  assert.doesNotMatch(stderr, /\(node:\d+\)|--trace-warnings/);
  assert.match(stdout, /Final estimate: PPL = /);
});

// the progress line counted every window of the text while --chunks scored fewer (243 said, 2
// scored); llama.cpp's "calculating perplexity over N chunks" counts those it scores. --file -
// is stdin: the same text piped in gives the same value (it was ENOENT for a file named "-").
test("tsllm perplexity: the progress line says how many windows --chunks scores; --file - reads the text from stdin", { skip }, () => {
  const cli = (args: string[], input?: string) => spawnSync(process.execPath, ["--import", "tsx", resolve(PROJECT_ROOT, "src/cli/main.ts"), "perplexity", "--model", sharedFile(MODEL)!, "--ctx", "64", "--chunks", "2", "--backend", "reference", ...args], { cwd: PROJECT_ROOT, encoding: "utf8", input: input ?? "" });
  const text = sharedFile(TEXT)!;
  const fromFile = cli(["--file", text]);
  assert.equal(fromFile.status, 0, fromFile.stderr);
  const final = /\((\d+) tokens in (\d+) windows of 64\)\n$/.exec(fromFile.stdout);
  assert.ok(final, fromFile.stdout);
  assert.equal(final[2], "2");
  const progress = /^(\S+): (\d+) tokens, (\d+) windows of 64, the first (\d+) scored \(--chunks\)\n$/.exec(fromFile.stderr);
  assert.ok(progress, fromFile.stderr);
  assert.equal(progress[1], text);
  assert.equal(progress[4], final[2]);
  assert.equal(Number(progress[3]), Math.floor(Number(progress[2]) / 64));
  const piped = cli(["--file", "-"], readFileSync(text, "utf8"));
  assert.equal(piped.status, 0, piped.stderr);
  assert.equal(piped.stdout, fromFile.stdout);
  assert.equal(piped.stderr, fromFile.stderr.replace(text, "stdin"));
});
