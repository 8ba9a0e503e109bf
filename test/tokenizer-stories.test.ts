import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { loadGGUFTokenizer } from "../src/tokenizer/index.js";
import { sharedFile, skipWithoutShared } from "./helpers/shared.js";

const skip = skipWithoutShared("models/stories260K.gguf") || skipWithoutShared("models/stories260K.expected.json");

interface Case { prompt: string; promptTokens: number[]; completionTokens: number[]; completion: string }

test("stories260K: prompt tokens (BOS first) and completion text agree with llama.cpp", { skip }, () => {
  const tok = loadGGUFTokenizer(sharedFile("models/stories260K.gguf")!);
  assert.equal(tok.type, "llama");
  assert.equal(tok.vocabSize, 512);
  assert.equal(tok.bosId, 1);
  assert.equal(tok.eosId, 2);
  assert.equal(tok.addBos, true);
  assert.equal(tok.addEos, false);
  assert.deepEqual([...tok.endOfGenerationIds], [2]);
  // the file stores 0xFFFFFFFF for "no separator / padding token"
  assert.equal(tok.sepId, undefined);
  assert.equal(tok.padId, undefined);
  const { cases } = JSON.parse(readFileSync(sharedFile("models/stories260K.expected.json")!, "utf8")) as { cases: Case[] };
  assert.ok(cases.length > 0);
  for (const c of cases) {
    assert.deepEqual(tok.encode(c.prompt), c.promptTokens, `prompt ${JSON.stringify(c.prompt)}`);
    assert.equal(tok.decode(c.completionTokens), c.completion, `completion after ${JSON.stringify(c.prompt)}`);
  }
});
