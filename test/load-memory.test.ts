import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { pathToFileURL } from "node:url";
// @ts-expect-error: a plain .mjs build script
import { newestMtime } from "../scripts/build-browser.mjs";
import { GGMLType } from "../src/tensor/dtypes.js";
import { tinyLlama, writeRandomModel } from "../src/testing/index.js";
import { PROJECT_ROOT, skipWithoutShared } from "./helpers/shared.js";

const dir = mkdtempSync(join(tmpdir(), "tsllm-mem-"));
after(() => rmSync(dir, { recursive: true, force: true }));

/**
 * The compiled package (dist/, what `npm ci` builds and users run), rebuilt by tsc when src/ is
 * newer: under tsx the child would also hold its TypeScript transforms (~75 MiB of the peak, the
 * test harness's and not the loader's), which left the bound to chance.
 */
function compiledIndex(): string {
  const index = join(PROJECT_ROOT, "dist", "index.js");
  if (!existsSync(index) || statSync(index).mtimeMs < newestMtime(join(PROJECT_ROOT, "src"))) {
    const tsc = spawnSync(process.execPath, [join(PROJECT_ROOT, "node_modules", "typescript", "bin", "tsc"), "-p", "tsconfig.json"], { cwd: PROJECT_ROOT, encoding: "utf8" });
    assert.equal(tsc.status, 0, `tsc -p tsconfig.json: ${tsc.stdout}${tsc.stderr}`);
  }
  return pathToFileURL(index).href;
}

// The loader reads each tensor from the file straight into the backend's weight memory: the
// file is never held twice. Bound from the issue: file size x 1.2 + KV cache + 150 MB.
test("loading a 170 MB model keeps peak RSS within file size x 1.2 + KV cache + 150 MB", { skip: skipWithoutShared("models/stories260K.gguf") }, async () => {
  const path = join(dir, "mem.gguf");
  await writeRandomModel(path, { ...tinyLlama, embeddingLength: 768, blockCount: 6, headCount: 12, headCountKv: 4, feedForwardLength: 2048, weightType: GGMLType.F32, seed: 3 });
  const fileBytes = statSync(path).size;
  assert.ok(fileBytes > 150e6, `test model is only ${fileBytes} bytes`);
  const index = compiledIndex();
  for (const backend of ["reference", "wasm"]) {
    // load, run one token, report the process's peak RSS
    const script = `const { loadModel } = await import(${JSON.stringify(index)});
      const model = await loadModel(${JSON.stringify(path)}, { backend: ${JSON.stringify(backend)}, contextSize: 256 });
      const lm = model.languageModel;
      lm.forward([1, 2, 3], lm.createCache(256));
      const kvBytes = 2 * lm.info.blockCount * 256 * lm.info.headCountKv * lm.info.headDim * 4;
      process.stdout.write(JSON.stringify({ maxRssBytes: process.resourceUsage().maxRSS * 1024, kvBytes }) + "\\n");
      model.dispose();`;
    const r = spawnSync(process.execPath, ["--input-type=module", "-e", script], { cwd: PROJECT_ROOT, encoding: "utf8" });
    assert.equal(r.status, 0, r.stderr);
    const { maxRssBytes, kvBytes } = JSON.parse(r.stdout);
    const bound = fileBytes * 1.2 + kvBytes + 150 * 2 ** 20;
    assert.ok(maxRssBytes <= bound, `${backend}: peak RSS ${(maxRssBytes / 2 ** 20).toFixed(0)} MiB > bound ${(bound / 2 ** 20).toFixed(0)} MiB (file ${(fileBytes / 2 ** 20).toFixed(0)} MiB)`);
  }
});
