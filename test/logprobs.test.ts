import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { after, test } from "node:test";
import { promisify } from "node:util";
import { tokenLogprobs } from "../src/generation/logprobs.js";
import { loadModel } from "../src/index.js";
import { disposeSharedLlama, llamaCppRun } from "./helpers/llama-cpp-oracle.js";
import { PROJECT_ROOT, sharedFile, skipWithoutShared } from "./helpers/shared.js";

test("tokenLogprobs: hand-computed log-softmax, top k best first with the lower id on ties", () => {
  // softmax([0, ln 3, 0, 0]) = [1/6, 1/2, 1/6, 1/6]
  const row = new Float32Array([0, Math.log(3), 0, 0]);
  const r = tokenLogprobs(row, 2, 3);
  assert.equal(r.token, 2);
  assert.ok(Math.abs(r.logprob - Math.log(1 / 6)) < 1e-6);
  assert.deepEqual(r.top.map((t) => t.token), [1, 0, 2]);
  assert.ok(Math.abs(r.top[0]!.logprob - Math.log(1 / 2)) < 1e-6);
  assert.deepEqual(tokenLogprobs(row, 1, 0).top, []);
  assert.deepEqual(tokenLogprobs(row, 1, 10).top.map((t) => t.token), [1, 0, 2, 3]);
  assert.deepEqual(tokenLogprobs(new Float32Array([5, -1, 7, 7, 6]), 0, 4).top.map((t) => t.token), [2, 3, 4, 0]);
});

const MODEL = "models/stories260K.gguf";
const EXPECTED = "models/stories260K.expected.json";
const skip = skipWithoutShared(MODEL) || skipWithoutShared(EXPECTED);
after(disposeSharedLlama);

/** ids sorted by llama.cpp's log-prob, best first (lower id on ties) */
const ranking = (lp: Float64Array) => [...lp.keys()].sort((a, b) => lp[b]! - lp[a]! || a - b);

test("stories260K: greedy logprobs (top 5) equal llama.cpp's next-token distributions", { skip }, async () => {
  const c = JSON.parse(readFileSync(sharedFile(EXPECTED)!, "utf8")).cases[0];
  const steps = 16;
  const ref = await llamaCppRun(sharedFile(MODEL)!, c.promptTokens, { decodeSteps: steps - 1 });
  const dists = [ref.promptLogprobs, ...ref.stepLogprobs];
  const model = await loadModel(sharedFile(MODEL)!, { backend: "reference" });
  try {
    const r = await model.generate(c.prompt, { temperature: 0, maxTokens: steps, logprobs: 5 });
    assert.equal(r.logprobs!.length, steps);
    const streamed: number[] = [];
    for await (const s of model.stream(c.prompt, { temperature: 0, maxTokens: 3, logprobs: 1 })) if (s.logprob) streamed.push(s.logprob.token);
    assert.deepEqual(streamed, r.completionTokens.slice(0, 3));
    r.logprobs!.forEach((lp, i) => {
      const dist = dists[i]!;
      assert.equal(lp.token, r.completionTokens[i]);
      assert.ok(Math.abs(lp.logprob - dist[lp.token]!) < 1e-4, `step ${i}: ${lp.logprob} vs llama.cpp ${dist[lp.token]}`);
      assert.deepEqual(lp.top.map((t) => t.token), ranking(dist).slice(0, 5), `step ${i} top 5`);
      for (const t of lp.top) assert.ok(Math.abs(t.logprob - dist[t.token]!) < 1e-4, `step ${i} token ${t.token}`);
    });
  } finally {
    model.dispose();
  }
});

test("tsllm generate --logit-bias ID=-inf bans llama.cpp's top token; --logprobs K in --json", { skip }, async () => {
  const c = JSON.parse(readFileSync(sharedFile(EXPECTED)!, "utf8")).cases[0];
  const ref = await llamaCppRun(sharedFile(MODEL)!, c.promptTokens, { decodeSteps: 0 });
  const [best, second] = ranking(ref.promptLogprobs);
  const { stdout } = await promisify(execFile)(process.execPath, [
    "--import", "tsx", resolve(PROJECT_ROOT, "src/cli/main.ts"), "generate", "--model", sharedFile(MODEL)!,
    "--prompt", c.prompt, "--temperature", "0", "--max-tokens", "1", "--logit-bias", `${best}=-inf`, "--logprobs", "2", "--json",
  ], { cwd: PROJECT_ROOT });
  const out = JSON.parse(stdout);
  assert.deepEqual(out.completionTokens, [second]);
  // logprobs are the model's own distribution, before the bias
  assert.deepEqual(out.logprobs[0].top.map((t: { token: number }) => t.token), [best, second]);
  const run = (bias: string) => promisify(execFile)(process.execPath, ["--import", "tsx", resolve(PROJECT_ROOT, "src/cli/main.ts"), "generate", "--model", sharedFile(MODEL)!, "--prompt", "x", "--logit-bias", bias], { cwd: PROJECT_ROOT });
  await assert.rejects(run("12:3"), (e: { stderr: string; code: number }) => /--logit-bias expects ID=BIAS/.test(e.stderr) && e.code === 2);
});
