import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, openSync, closeSync, readFileSync, renameSync, rmSync, copyFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { readGGUFHeader, readTensorInto } from "../src/formats/gguf-reader.js";
import { splitPartPath, splitPrefix } from "../src/formats/gguf-split.js";
import { ggufEntry, writeGGUF, type GGUFWriteEntry } from "../src/formats/gguf-writer.js";
import { createReferenceBackend } from "../src/kernels/reference/index.js";
import { loadModel } from "../src/llm.js";
import { openModel } from "../src/models/open.js";
import { GGMLType } from "../src/tensor/dtypes.js";
import { splitGGUF, tinyLlama, writeRandomModel } from "../src/testing/index.js";
import { FakeHub } from "./helpers/hub-fake.js";
import { skipWithoutShared } from "./helpers/shared.js";

// tinyLlama borrows stories260K's vocabulary
const skip = skipWithoutShared("models/stories260K.gguf");
const dir = mkdtempSync(join(tmpdir(), "tsllm-gguf-split-"));
const whole = join(dir, "tiny-Q8_0.gguf");
const prefix = join(dir, "split", "tiny-Q8_0");
const savedEnv = { ...process.env };

let parts: string[] = [];
before(async () => {
  if (skip) return;
  await writeRandomModel(whole, { ...tinyLlama, weightType: GGMLType.Q8_0, seed: 23 });
  (await import("node:fs")).mkdirSync(join(dir, "split"));
  parts = await splitGGUF(whole, prefix, 3);
});
after(() => {
  process.env = savedEnv;
  rmSync(dir, { recursive: true, force: true });
});

test("split part names follow llama.cpp's llama_split_path / llama_split_prefix", () => {
  assert.equal(splitPartPath("/m/x", 0, 3), "/m/x-00001-of-00003.gguf");
  assert.equal(splitPartPath("x", 11, 12), "x-00012-of-00012.gguf");
  assert.equal(splitPrefix("/m/x-00002-of-00003.gguf", 1, 3), "/m/x");
  assert.equal(splitPrefix("/m/x-00002-of-00003.gguf", 0, 3), undefined);
  assert.equal(splitPrefix("-00001-of-00001.gguf", 0, 1), undefined);
});

test("a 3-part split loads from its first part: same tensors, logits and greedy tokens as the whole file", { skip }, async () => {
  const h = readGGUFHeader(whole);
  const counts = parts.map((p) => readGGUFHeader(p).tensors.length);
  assert.equal(counts.reduce((s, n) => s + n, 0), h.tensors.length);
  assert.ok(counts.every((n) => n > 0));
  const tokens = [1, 45, 200, 7, 99, 3];
  const logitsOf = (path: string) => {
    const lm = openModel(path).build(createReferenceBackend());
    return lm.forward(tokens, lm.createCache(tokens.length), { allLogits: true });
  };
  const a = logitsOf(whole), b = logitsOf(parts[0]!);
  assert.equal(b.length, a.length);
  assert.deepEqual(b, a, "bit-identical logits for every position");
  const metaOnly = await splitGGUF(whole, join(dir, "split", "metaonly"), 3, undefined, true);
  assert.equal(readGGUFHeader(metaOnly[0]!).tensors.length, 0);
  assert.deepEqual(logitsOf(metaOnly[0]!), a, "a first part without tensors (--no-tensor-first-split) loads too");

  const one = await loadModel(whole, { backend: "reference" });
  const split = await loadModel(parts[0]!, { backend: "reference" });
  try {
    assert.equal(split.info.parameterCount, one.info.parameterCount);
    const x = await one.generate("Once upon a time", { maxTokens: 10, temperature: 0 });
    const y = await split.generate("Once upon a time", { maxTokens: 10, temperature: 0 });
    assert.equal(y.completionTokens.length, 10);
    assert.deepEqual(y.completionTokens, x.completionTokens);
  } finally {
    one.dispose();
    split.dispose();
  }
});

test("split errors: a later part, a missing part, a part of another set, a wrong tensor count, a duplicate", { skip }, async () => {
  assert.throws(() => openModel(parts[1]!), /split\.no: this is part 2 of 3 of a split GGUF; load the first part \(tiny-Q8_0-00001-of-00003\.gguf\)/);

  const renamed = join(dir, "renamed.gguf");
  copyFileSync(parts[0]!, renamed);
  assert.throws(() => openModel(renamed), /renamed\.gguf: file name: a split GGUF of 3 parts must be named <name>-00001-of-00003\.gguf/);

  renameSync(parts[2]!, `${parts[2]}.away`);
  try {
    assert.throws(() => openModel(parts[0]!), (e: Error) => e.message.includes("split part 3 of 3") && e.message.includes(`${parts[2]} is missing`));
  } finally {
    renameSync(`${parts[2]}.away`, parts[2]!);
  }

  const bad = (name: string, edit: (i: number, meta: [string, GGUFWriteEntry][]) => void) => splitGGUF(whole, join(dir, "split", name), 3, edit);
  const wrongNo = await bad("wrongno", (i, m) => { if (i === 2) m.find(([k]) => k === "split.no")![1] = ggufEntry.u16(1); });
  assert.throws(() => openModel(wrongNo[0]!), /wrongno-00003-of-00003\.gguf: split\.no: expected 2 \(part 3 of 3 of wrongno-00001-of-00003\.gguf\), found 1/);
  const wrongCount = await bad("wrongcount", (i, m) => { if (i === 0) m.find(([k]) => k === "split.tensors.count")![1] = ggufEntry.i32(5); });
  assert.throws(() => openModel(wrongCount[0]!), /split\.tensors\.count: expected 5 tensors in the 3 parts, found \d+/);
  const otherSet = await bad("otherset", (i, m) => { if (i === 1) m.find(([k]) => k === "split.count")![1] = ggufEntry.u16(4); });
  assert.throws(() => openModel(otherSet[0]!), /otherset-00002-of-00003\.gguf: split\.count: expected 3/);

  // part 2 swapped for a copy of part 3 renumbered as part 2: its tensors are duplicates of part 3's
  const dup = await bad("dup", () => {});
  const h3 = readGGUFHeader(dup[2]!);
  const fd = openSync(dup[2]!, "r");
  try {
    await writeGGUF(dup[1]!, {
      metadata: [["split.no", ggufEntry.u16(1)], ["split.count", ggufEntry.u16(3)], ["split.tensors.count", ggufEntry.i32(readGGUFHeader(whole).tensors.length)]],
      tensors: h3.tensors.map((t) => ({ name: t.name, type: t.type, dims: t.dims, data: () => { const b = new Uint8Array(t.byteLength); readTensorInto(fd, t, b); return b; } })),
    });
  } finally {
    closeSync(fd);
  }
  assert.throws(() => openModel(dup[0]!), /dup-00003-of-00003\.gguf: tensor "[^"]+": duplicated: also in dup-00002-of-00003\.gguf/);
});

test("a part that is a folder, or whose last tensor runs past its end, is named with the field at fault", { skip }, async () => {
  // a folder opens without error; only its read() fails, with Node's "EISDIR: ..., read" that names no file
  const folder = await splitGGUF(whole, join(dir, "split", "folder"), 3);
  rmSync(folder[1]!);
  mkdirSync(folder[1]!);
  assert.throws(() => openModel(folder[0]!), (e: Error) => e.message === `${folder[1]}: file: is a folder, not a file`);
  // the last part cut short: its last tensor's data lies past the end
  const cut = await splitGGUF(whole, join(dir, "split", "cut"), 3);
  const bytes = readFileSync(cut[2]!);
  writeFileSync(cut[2]!, bytes.subarray(0, bytes.length - 1));
  assert.throws(() => openModel(cut[0]!), (e: Error) => e.message.startsWith(`${cut[2]}: tensor "`) && /offset: data \[\d+, \d+\) lies past the end of the file/.test(e.message));
});

test("loadModel('org/name:Q8_0') fetches every part of a split set from the hub and loads it", { skip }, async () => {
  const hub = await new FakeHub().start();
  try {
    const names = parts.map((p) => p.split("/").pop()!);
    assert.deepEqual(names, ["tiny-Q8_0-00001-of-00003.gguf", "tiny-Q8_0-00002-of-00003.gguf", "tiny-Q8_0-00003-of-00003.gguf"]);
    hub.add({
      repo: "acme/tiny-split-GGUF",
      commit: "c".repeat(40),
      files: [
        { path: "README.md", content: Buffer.from("split") },
        ...parts.map((p, i) => ({ path: names[i]!, content: readFileSync(p) })),
        { path: "tiny-F16.gguf", content: Buffer.from("not fetched") },
      ],
    });
    const cache = join(dir, "hub-cache");
    process.env.HF_ENDPOINT = hub.hubUrl;
    process.env.HF_HUB_CACHE = cache;
    delete process.env.HF_HUB_OFFLINE;
    delete process.env.HF_TOKEN;
    const local = await loadModel(whole, { backend: "reference" });
    const fromHub = await loadModel("acme/tiny-split-GGUF:Q8_0", { backend: "reference" });
    try {
      assert.equal(fromHub.path, join(cache, "models--acme--tiny-split-GGUF", "snapshots", "c".repeat(40), names[0]!));
      const a = await local.generate("Once upon a time", { maxTokens: 8, temperature: 0 });
      const b = await fromHub.generate("Once upon a time", { maxTokens: 8, temperature: 0 });
      assert.deepEqual(b.completionTokens, a.completionTokens);
    } finally {
      local.dispose();
      fromHub.dispose();
    }
    assert.ok(hub.requests.every((r) => !r.url.includes("F16")), "only the chosen set is fetched");
  } finally {
    await hub.close();
  }
});
