import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { after, test } from "node:test";
import { promisify } from "node:util";
import { loadModel } from "../src/index.js";
import { disposeSharedLlama, sharedLlama } from "./helpers/llama-cpp-oracle.js";
import { PROJECT_ROOT, sharedFile, skipWithoutShared } from "./helpers/shared.js";

// llama.cpp's greedy output for a real trained model is the judge here
const MODEL = "models/stories260K.gguf";
const EXPECTED = "models/stories260K.expected.json";
const skip = skipWithoutShared(MODEL) || skipWithoutShared(EXPECTED);

interface GoldenCase { prompt: string; promptTokens: number[]; completionTokens: number[]; completion: string }
const cases = (): GoldenCase[] => JSON.parse(readFileSync(sharedFile(EXPECTED)!, "utf8")).cases;
after(disposeSharedLlama);

/**
 * The completion text as llama.cpp's server streams it: what llama.cpp's detokenization of
 * prompt + completion adds to that of the prompt (the golden file's `completion` is the
 * completion's tokens detokenized alone, which drops a SentencePiece word's leading space).
 */
async function streamedText(c: GoldenCase): Promise<string> {
  const llama = await sharedLlama();
  const model = await llama.loadModel({ modelPath: sharedFile(MODEL)!, gpuLayers: 0 });
  try {
    const prompt = model.detokenize(c.promptTokens as never);
    const whole = model.detokenize([...c.promptTokens, ...c.completionTokens] as never);
    assert.ok(whole.startsWith(prompt), `llama.cpp's text of the prompt ${JSON.stringify(prompt)} starts that of prompt + completion`);
    assert.equal(whole.slice(prompt.length).trimStart(), c.completion.trimStart(), "the same words as the golden completion");
    return whole.slice(prompt.length);
  } finally {
    await model.dispose();
  }
}

for (const backend of ["reference", "wasm"] as const) {
  test(`stories260K greedy tokens equal llama.cpp's through the library (${backend} backend)`, { skip }, async () => {
    const model = await loadModel(sharedFile(MODEL)!, { backend });
    try {
      for (const c of cases()) {
        const r = await model.generate(c.prompt, { temperature: 0, maxTokens: c.completionTokens.length });
        assert.deepEqual(r.promptTokens, c.promptTokens, `prompt tokens for ${JSON.stringify(c.prompt)}`);
        assert.deepEqual(r.completionTokens, c.completionTokens, `completion tokens for ${JSON.stringify(c.prompt)}`);
        assert.equal(r.completion, await streamedText(c));
        assert.equal(r.finishReason, "length");
        assert.equal(r.timings.promptTokens, c.promptTokens.length);
        assert.equal(r.timings.completionTokens, c.completionTokens.length);
        assert.ok(r.timings.ttftMs > 0 && r.timings.tpotMs > 0 && r.timings.decodeTokensPerSecond > 0);
      }
    } finally {
      model.dispose();
    }
  });
}

test("stories260K streaming yields the same tokens and text as generate", { skip }, async () => {
  const model = await loadModel(sharedFile(MODEL)!, { backend: "reference" });
  try {
    const c = cases()[0]!;
    const it = model.stream(c.prompt, { temperature: 0, maxTokens: 20 });
    const tokens: number[] = [];
    let text = "";
    let r;
    while (!(r = await it.next()).done) {
      if (r.value.token !== undefined) tokens.push(r.value.token);
      text += r.value.text;
    }
    assert.deepEqual(tokens, c.completionTokens.slice(0, 20));
    assert.equal(text, r.value.completion);
    assert.ok((await streamedText(c)).startsWith(text));
  } finally {
    model.dispose();
  }
});

test("stories260K through `tsllm generate --json` equals llama.cpp's tokens", { skip }, async () => {
  const run = promisify(execFile);
  for (const c of cases()) {
    const { stdout } = await run(process.execPath, [
      "--import", "tsx", resolve(PROJECT_ROOT, "src/cli/main.ts"), "generate",
      "--model", sharedFile(MODEL)!, "--prompt", c.prompt, "--temperature", "0",
      "--max-tokens", String(c.completionTokens.length), "--json",
    ], { cwd: PROJECT_ROOT });
    const out = JSON.parse(stdout);
    const cut = out.finishReason === "length";
    assert.deepEqual(Object.keys(out).sort(), ["completion", "completionTokens", ...(cut ? ["finishDetail"] : []), "finishReason", "prompt", "promptTokens", "seed", "timings"]);
    if (cut) assert.equal(out.finishDetail, `maxTokens (${c.completionTokens.length}) reached`);
    assert.deepEqual(out.promptTokens, c.promptTokens);
    assert.deepEqual(out.completionTokens, c.completionTokens);
    assert.equal(out.completion, await streamedText(c));
  }
});
