import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, linkSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { after, test } from "node:test";
import { promisify } from "node:util";
import { convertHFToGGUF } from "../src/convert/index.js";
import { ggufEntry, writeGGUF, writeSafetensors } from "../src/formats/index.js";
import { GGMLType } from "../src/tensor/index.js";
import { tinyLlama } from "../src/testing/index.js";
import { writeRandomHFModel } from "../src/testing/random-hf-model.js";
import { runChild } from "./helpers/child.js";
import { PROJECT_ROOT, skipWithoutShared } from "./helpers/shared.js";

/*
 * Writing never destroys an input or a previous output: a command refuses an output path that
 * is one of the files it reads (the same inode, through a hard link or a symlink too), and every
 * file is written beside its target and renamed over it only when complete.
 */
const dir = mkdtempSync(join(tmpdir(), "tsllm-outputs-"));
after(() => rmSync(dir, { recursive: true, force: true }));
const run = promisify(execFile);
const CLI = resolve(PROJECT_ROOT, "src/cli/main.ts");
const skip = skipWithoutShared("tokenizer-tests/ggml-vocab-llama-spm.gguf");
const digest = (path: string) => createHash("sha256").update(readFileSync(path)).digest("hex");
/** the folder's files and their contents' hashes */
const snapshot = (folder: string) => Object.fromEntries(readdirSync(folder).sort().map((f) => [f, digest(join(folder, f))]));

test("convert refuses to write over the weights (or any file) it reads, by path, hard link or symlink; the folder is untouched", { skip }, async () => {
  const folder = join(dir, "model");
  await writeRandomHFModel(folder, tinyLlama, { dtype: "F32" });
  const before = snapshot(folder);
  const weights = join(folder, "model.safetensors");
  assert.ok(existsSync(weights));
  linkSync(weights, join(dir, "hardlink.gguf"));
  symlinkSync(weights, join(dir, "symlink.gguf"));
  for (const out of [weights, join(folder, "config.json"), join(dir, "hardlink.gguf"), join(dir, "symlink.gguf")]) {
    await assert.rejects(convertHFToGGUF(folder, out, { type: "f32", vocab: tinyLlama.tokenizerFrom }), /the output is one of the input files/, out);
  }
  // the CLI says it in one line and exits non-zero
  const cli = await run(process.execPath, ["--import", "tsx", CLI, "convert", "--model", folder, "--out", weights, "--vocab", tinyLlama.tokenizerFrom], { cwd: PROJECT_ROOT }).catch((e: { code: number; stderr: string }) => e);
  assert.notEqual((cli as { code: number }).code, 0);
  const lines = (cli as { stderr: string }).stderr.trim().split("\n");
  assert.equal(lines.length, 1, lines.join("\n"));
  assert.match(lines[0]!, /the output is one of the input files/);
  assert.deepEqual(snapshot(folder), before, "every file of the model folder is byte-identical");
  // a new file in the same folder is fine
  await convertHFToGGUF(folder, join(folder, "model.gguf"), { type: "f32", vocab: tinyLlama.tokenizerFrom });
  assert.ok(existsSync(join(folder, "model.gguf")));
});

test("a write that fails mid-way leaves the previous file as it was and no temporary file behind", async () => {
  const out = join(dir, "keep.gguf");
  writeFileSync(out, "previous content");
  const failing = { name: "w", type: GGMLType.F32, dims: [4], data: () => { throw new Error("producer failed"); } };
  await assert.rejects(writeGGUF(out, { metadata: [["general.architecture", ggufEntry.string("llama")]], tensors: [failing] }), /producer failed/);
  assert.equal(readFileSync(out, "utf8"), "previous content");
  const st = join(dir, "keep.safetensors");
  writeFileSync(st, "previous safetensors");
  await assert.rejects(writeSafetensors(st, [{ name: "w", dtype: "F32", shape: [4], data: () => { throw new Error("producer failed"); } }]), /producer failed/);
  assert.equal(readFileSync(st, "utf8"), "previous safetensors");
  assert.deepEqual(readdirSync(dir).filter((f) => f.endsWith(".tmp")), [], "no temporary files left");
  // and a write that completes replaces the file
  await writeSafetensors(st, [{ name: "w", dtype: "F32", shape: [1], data: new Uint8Array(4) }]);
  assert.notEqual(readFileSync(st, "utf8"), "previous safetensors");
});

test("a Ctrl-C / SIGTERM caught while an output's handlers listen but delivered after they went takes its default course (the process ends by it), not dropped, though no download installed the stand-in", { timeout: 60_000 }, async () => {
  // A path holding a NUL byte fails the temporary file's open before the event loop turns, so the
  // handlers go with the signal still undelivered: the moment a Ctrl-C as a write ends can hit
  // (a convert or quantize of a local model), made deterministic. Before: the signal was dropped, the run went on, exit 0.
  const output = JSON.stringify(join(dir, "pending\0.gguf"));
  for (const signal of ["SIGINT", "SIGTERM"] as const) {
    const r = await runChild(`
import { writeOutputFile } from ${JSON.stringify(pathToFileURL(resolve(PROJECT_ROOT, "src/formats/output-file.ts")).href)};
const writing = writeOutputFile(${output}, async (fh) => { await fh.write("x"); });
process.kill(process.pid, ${JSON.stringify(signal)});
await writing.catch(() => undefined);
await new Promise((r) => setTimeout(r, 2_000));
process.stderr.write("ran on\\n");
`, 30_000);
    assert.equal(r.timedOut, false, r.stderr);
    assert.equal(r.code, null, `${signal}: the process ended by itself (${r.code}), the signal dropped: ${r.stderr}`);
  }
  assert.deepEqual(readdirSync(dir).filter((f) => f.endsWith(".tmp")), [], "no temporary files left");
});

test("an output path that cannot be written is one line naming it and what is wrong, not the temporary file (convert, quantize)", { skip }, async () => {
  const folder = join(dir, "model-for-paths");
  await writeRandomHFModel(folder, tinyLlama, { dtype: "F32" });
  const aFolder = join(dir, "a-folder");
  mkdirSync(aFolder);
  const aFile = join(dir, "a-file");
  writeFileSync(aFile, "not a folder");
  const literal = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
  for (const [out, why] of [
    [join(dir, "no-such-folder", "x.gguf"), `the folder ${join(dir, "no-such-folder")} does not exist`],
    [aFolder, "it is a folder, not a file"],
    [join(aFile, "x.gguf"), `${aFile} is not a folder`],
  ] as const) {
    for (const args of [["convert", "--model", folder, "--out", out, "--vocab", tinyLlama.tokenizerFrom], ["quantize", folder, out, "--type", "q8_0", "--vocab", tinyLlama.tokenizerFrom]]) {
      const cli = await run(process.execPath, ["--import", "tsx", CLI, ...args], { cwd: PROJECT_ROOT }).then(() => ({ code: 0, stderr: "" }), (e: { code: number; stderr: string }) => e);
      assert.equal(cli.code, 1, `${args[0]} ${out}: ${cli.stderr}`);
      assert.match(cli.stderr, new RegExp(`^tsllm: error: ${literal(out)}: cannot write the output: ${literal(why)}\\n$`), args[0]);
    }
  }
  assert.deepEqual(readdirSync(aFolder), [], "nothing written into the folder given as OUT");
  assert.deepEqual(readdirSync(dir).filter((f) => f.endsWith(".tmp")), [], "no temporary files left");
});
