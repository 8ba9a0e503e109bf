import assert from "node:assert/strict";
import { closeSync, mkdtempSync, openSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { readTensorInto } from "../src/formats/gguf-reader.js";
import { ggufEntry, readGGUFHeader, writeGGUF, type GGUFWriteEntry } from "../src/formats/index.js";
import { loadModel, OptionError } from "../src/index.js";
import { runTsllm } from "./helpers/child.js";
import { post, serveStories, skipStories as skip, STORIES } from "./helpers/serve.js";
import { sharedFile } from "./helpers/shared.js";

/** the id whose text the foreign draft changes, and its new text (no token of stories260K's vocabulary) */
const CHANGED_ID = 300, CHANGED_TEXT = "▁notastoriestoken";

/**
 * A copy of stories260K (same weights, same tensors) at `path` whose metadata is `edit`'s: the
 * foreign drafts below, written with the project's GGUF writer.
 */
async function writeStoriesCopy(path: string, edit: (metadata: [string, GGUFWriteEntry][]) => [string, GGUFWriteEntry][]): Promise<void> {
  const source = sharedFile(STORIES)!;
  const h = readGGUFHeader(source);
  const fd = openSync(source, "r");
  try {
    await writeGGUF(path, {
      metadata: edit([...h.metadata]),
      tensors: h.tensors.map((t) => ({ name: t.name, type: t.type, dims: t.dims, data: () => { const b = new Uint8Array(t.byteLength); readTensorInto(fd, t, b); return b; } })),
    });
  } finally {
    closeSync(fd);
  }
}

/**
 * A draft of stories260K's size whose ids mean other tokens, as llama.cpp's
 * common_speculative_are_compatible would refuse (token texts differ from id 5 on): a copy of
 * stories260K (same weights, same size, same BOS/EOS) with one token's text changed. It drafts
 * without error, but the target would reject every proposal of that token.
 */
describe("a draft model whose token texts are not the model's is refused at load, naming the first differing id, both texts and both files", { skip }, () => {
  const dir = mkdtempSync(join(tmpdir(), "tsllm-draft-vocab-"));
  const foreign = join(dir, "stories260K-one-token-renamed.gguf");
  const target = sharedFile(STORIES)!;
  let original = "";
  before(async () => {
    const h = readGGUFHeader(target);
    const tokens = [...(h.metadata.get("tokenizer.ggml.tokens")!.value as string[])];
    original = tokens[CHANGED_ID]!;
    assert.ok(!tokens.includes(CHANGED_TEXT));
    tokens[CHANGED_ID] = CHANGED_TEXT;
    await writeStoriesCopy(foreign, (m) => m.map(([k, v]) => [k, k === "tokenizer.ggml.tokens" ? ggufEntry.strings(tokens) : v]));
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  const line = (model: string) => `its token ${CHANGED_ID} is ${JSON.stringify(CHANGED_TEXT)}, ${model}'s ${JSON.stringify(original)}: a draft model must share the model's vocabulary`;

  for (const command of [["serve", "--port", "0"], ["generate", "--prompt", "Once upon a time", "--max-tokens", "4"]]) {
    // (a timeout: without the check, serve would start and wait for requests)
    test(`tsllm ${command[0]} --draft-model: exit 2 before any request, one error line`, { timeout: 120_000 }, async () => {
      const r = await runTsllm([...command, "--model", target, "--draft-model", foreign]);
      assert.equal(r.code, 2, r.stderr);
      assert.equal(r.stdout, "");
      const lines = r.stderr.trim().split("\n").filter((l) => l.startsWith("tsllm: error"));
      assert.deepEqual(lines, [`tsllm: error: --draft-model ${foreign}: ${line(`--model ${target}`)}`], r.stderr);
    });
  }

  test("the library: generate with draftModel is refused (OptionError naming draftModel, nothing queued); the model's own q4_0 copy drafts", async () => {
    const model = await loadModel(target, { threads: 1, contextSize: 128 });
    const draft = await loadModel(foreign, { threads: 1, contextSize: 128 });
    const q4 = await loadModel(target, { threads: 1, contextSize: 128, quantize: "q4_0" });
    try {
      await assert.rejects(model.generate("Once upon a time", { temperature: 0, maxTokens: 4, draftModel: draft }), (e: unknown) => {
        assert.ok(e instanceof OptionError);
        assert.equal(e.option, "draftModel");
        assert.equal(e.message, `draftModel ${foreign}: ${line(`the model ${target}`)}`);
        return true;
      });
      assert.equal(model.engine.stats.draftRounds, 0);
      const r = await model.generate("Once upon a time", { temperature: 0, maxTokens: 8, draftModel: q4 });
      assert.equal(r.completion, (await model.generate("Once upon a time", { temperature: 0, maxTokens: 8 })).completion);
      assert.ok((r.speculative?.accepted ?? 0) > 0);
    } finally {
      model.dispose();
      draft.dispose();
      q4.dispose();
    }
  });

  test("the library's server: startServer with draftModel starts, and /health and every request answer 500 naming the draft, the first differing id and both texts", async () => {
    const draft = await loadModel(foreign, { threads: 1, contextSize: 128 });
    const { url, close } = await serveStories({ contextSize: 128 }, { draftModel: draft });
    const why = `draftModel ${foreign}: ${line(`the model ${target}`)}`;
    try {
      const health = await fetch(`${url}/health`);
      assert.equal(health.status, 500);
      assert.deepEqual(await health.json(), { status: "error", error: why });
      const r = await post(`${url}/v1/completions`, { prompt: "Once upon a time", max_tokens: 4, temperature: 0 });
      assert.equal(r.status, 500);
      assert.equal(r.json.error.message, `the request failed inside the server: ${why}`);
    } finally {
      await close();
      draft.dispose();
    }
  });
});

/**
 * A draft that adds EOS to a prompt where the model does not (llama.cpp's
 * common_speculative_are_compatible compares the add-EOS rule as it does add-BOS): the same copy of
 * stories260K with tokenizer.ggml.add_eos_token true (stories260K's GGUF has no such key: false).
 */
describe("a draft model whose add-EOS rule is not the model's is refused", { skip }, () => {
  const dir = mkdtempSync(join(tmpdir(), "tsllm-draft-eos-"));
  const foreign = join(dir, "stories260K-adds-eos.gguf");
  const target = sharedFile(STORIES)!;
  before(() => writeStoriesCopy(foreign, (m) => [...m.filter(([k]) => k !== "tokenizer.ggml.add_eos_token"), ["tokenizer.ggml.add_eos_token", ggufEntry.bool(true)]]));
  after(() => rmSync(dir, { recursive: true, force: true }));

  test("the library: generate with draftModel is refused (OptionError naming draftModel and the rule)", async () => {
    const model = await loadModel(target, { threads: 1, contextSize: 128 });
    const draft = await loadModel(foreign, { threads: 1, contextSize: 128 });
    try {
      assert.equal(model.tokenizer.addEos, false);
      assert.equal(draft.tokenizer.addEos, true);
      await assert.rejects(model.generate("Once upon a time", { temperature: 0, maxTokens: 4, draftModel: draft }), (e: unknown) => {
        assert.ok(e instanceof OptionError);
        assert.equal(e.option, "draftModel");
        assert.equal(e.message, `draftModel ${foreign}: it adds EOS to a prompt, the model ${target} does not: a draft model must share the model's vocabulary`);
        return true;
      });
      assert.equal(model.engine.stats.draftRounds, 0);
    } finally {
      model.dispose();
      draft.dispose();
    }
  });
});
