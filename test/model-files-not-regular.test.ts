import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, renameSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { ggufEntry, writeGGUF, writeSafetensors, writeSafetensorsSharded } from "../src/formats/index.js";
import { runChild } from "./helpers/child.js";

/*
 * A model folder whose files are symlinks (a git clone or a tar archive keeps them) to a FIFO or a
 * device: each reader must refuse the file with one line naming it. Before, opening a FIFO
 * waited for a writer forever, and config.json -> /dev/zero read until memory ran out (1.4 GB in
 * 8 s). Each case runs in a child process so that a hang fails the test instead of stalling it.
 */
const skip = process.platform === "win32" ? "no FIFOs or /dev/zero on Windows" : false;
const dir = mkdtempSync(join(tmpdir(), "tsllm-not-regular-"));
after(() => rmSync(dir, { recursive: true, force: true }));

const f32 = (values: number[]) => new Uint8Array(new Float32Array(values).buffer);

/** a folder with config.json, model.safetensors, a GPT-2 tokenizer (vocab.json + merges.txt) and a chat template, all regular files */
async function folder(name: string): Promise<string> {
  const d = join(dir, name);
  mkdirSync(d);
  writeFileSync(join(d, "config.json"), JSON.stringify({ architectures: ["GPT2LMHeadModel"], n_embd: 4, n_layer: 1, n_head: 1, vocab_size: 3 }));
  await writeSafetensors(join(d, "model.safetensors"), [{ name: "x", dtype: "F32", shape: [2], data: f32([1, 2]) }]);
  writeFileSync(join(d, "vocab.json"), JSON.stringify({ a: 0, b: 1, ab: 2 }));
  writeFileSync(join(d, "merges.txt"), "#version: 0.2\na b\n");
  writeFileSync(join(d, "chat_template.jinja"), "{{ messages[0].content }}");
  return d;
}

/** replaces `path` with a symlink to a new FIFO, or to /dev/zero */
function replaceWith(path: string, kind: "fifo" | "zero"): void {
  rmSync(path);
  if (kind === "zero") return symlinkSync("/dev/zero", path);
  const fifo = `${path}.fifo`;
  execFileSync("mkfifo", [fifo]);
  symlinkSync(fifo, path);
}

/** runs `call` (an expression over the imports below) in a child; resolves with its one error line */
async function refusal(call: string): Promise<string> {
  const code = `
    import { readHFConfig, readGGUFHeader, SafetensorsModel } from "./src/formats/index.ts";
    import { tokenizerFromFolder } from "./src/tokenizer/hf/folder.ts";
    try { ${call}; process.stderr.write("read without an error"); process.exit(0); }
    catch (e) { process.stderr.write(e.message); process.exit(3); }`;
  const r = await runChild(code, 60_000);
  assert.equal(r.timedOut, false, `${call}: still waiting after 60 s (a FIFO opened or /dev/zero read)`);
  assert.equal(r.code, 3, `${call}: ${r.stderr}`);
  return r.stderr;
}

test("a model folder's files linked to a FIFO or /dev/zero are refused naming the file, not waited on or read forever", { skip }, async () => {
  const cases: [file: string, kind: "fifo" | "zero", call: (d: string) => string][] = [
    ["config.json", "zero", (d) => `readHFConfig(${JSON.stringify(d)})`],
    ["config.json", "fifo", (d) => `readHFConfig(${JSON.stringify(d)})`],
    ["model.safetensors", "fifo", (d) => `SafetensorsModel.open(${JSON.stringify(d)})`],
    ["vocab.json", "zero", (d) => `tokenizerFromFolder(${JSON.stringify(d)})`],
    ["merges.txt", "fifo", (d) => `tokenizerFromFolder(${JSON.stringify(d)})`],
    ["chat_template.jinja", "fifo", (d) => `tokenizerFromFolder(${JSON.stringify(d)})`],
  ];
  for (const [file, kind, call] of cases) {
    const d = await folder(`${file}-${kind}`);
    replaceWith(join(d, file), kind);
    const what = kind === "fifo" ? "a FIFO \\(named pipe\\)" : "a character device";
    assert.match(await refusal(call(d)), new RegExp(`^${join(d, file)}: file: is ${what}, not a regular file$`), `${file} -> ${kind}`);
  }
});

test("a safetensors shard an index names, linked to a FIFO, is refused naming the shard", { skip }, async () => {
  const d = join(dir, "sharded");
  mkdirSync(d);
  const shards = await writeSafetensorsSharded(d, [{ name: "a", dtype: "F32", shape: [4], data: f32([1, 2, 3, 4]) }, { name: "b", dtype: "F32", shape: [4], data: f32([5, 6, 7, 8]) }], 16);
  assert.equal(shards.length, 2);
  const second = join(d, "model-00002-of-00002.safetensors");
  renameSync(second, join(d, "elsewhere.safetensors"));
  replaceWith(join(d, "elsewhere.safetensors"), "fifo");
  symlinkSync(join(d, "elsewhere.safetensors"), second);
  assert.match(await refusal(`SafetensorsModel.open(${JSON.stringify(d)})`), new RegExp(`^${second}: file: is a FIFO \\(named pipe\\), not a regular file$`));
});

test("a GGUF path that is a FIFO is refused naming it", { skip }, async () => {
  const p = join(dir, "model.gguf");
  await writeGGUF(p, { metadata: [["general.architecture", ggufEntry.string("llama")]], tensors: [] });
  replaceWith(p, "fifo");
  assert.match(await refusal(`readGGUFHeader(${JSON.stringify(p)})`), new RegExp(`^${p}: file: is a FIFO \\(named pipe\\), not a regular file$`));
});
