import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { test } from "node:test";
import { fileURLToPath, pathToFileURL } from "node:url";
import { whileBackendStarts } from "../src/kernels/backend.js";
import { createReferenceBackend } from "../src/kernels/reference/index.js";

// loadModel and the browser loader parse the model while the backend starts (whileBackendStarts):
// a model error must stay the error reported, and a backend that did start must not be left running

test("the prepared value and the started backend both come back", async () => {
  const backend = createReferenceBackend();
  const [parsed, started] = await whileBackendStarts(Promise.resolve(backend), () => "header");
  assert.equal(parsed, "header");
  assert.equal(started, backend);
  assert.equal(started.allocActivations(4).length, 4);
  started.dispose();
});

test("an error while preparing is the one raised, and the backend that started is disposed", async () => {
  const backend = createReferenceBackend();
  await assert.rejects(
    whileBackendStarts(Promise.resolve(backend), () => {
      throw new Error("model.gguf: not a GGUF file");
    }),
    /model\.gguf: not a GGUF file/,
  );
  assert.throws(() => backend.allocActivations(4), /after dispose/);
});

test("when both fail, the model's error is raised, not the backend's", async () => {
  const failing = Promise.reject(new Error("WebGPU: no adapter"));
  await assert.rejects(
    whileBackendStarts(failing, () => {
      throw new Error("model.gguf: truncated");
    }),
    /model\.gguf: truncated/,
  );
});

test("a backend that fails to start fails a load whose model parsed", async () => {
  await assert.rejects(whileBackendStarts(Promise.reject(new Error("WebGPU: no adapter")), () => 1), /no adapter/);
});

// the built package's workers are started from a file (under tsx, as `npm test` runs src, they are
// not), so the end-to-end case runs the compiled backend in a fresh `node --input-type=module -e`
const built = fileURLToPath(new URL("../dist/kernels/wasm/index.js", import.meta.url));
test("a script run as `node --input-type=module -e`, or with V8 and per-process flags, gets the wasm backend's worker threads", { skip: existsSync(built) ? false : `${built} is missing: run npm run build (npm ci does)` }, () => {
  const script = `const { createWasmBackend } = await import(${JSON.stringify(pathToFileURL(built).href)}); const b = await createWasmBackend({ threads: 2 }); process.stdout.write(JSON.stringify({ name: b.name, threads: b.threads })); b.dispose();`;
  // Node refuses --input-type for a worker file, and each of the others in a worker's execArgv list
  for (const flags of [["--input-type=module"], ["--input-type", "module", "--max-old-space-size=4096", "--expose-gc"], ["--input-type=module", "--stack-size=2000", "--title=tsllm-test"]]) {
    const run = spawnSync(process.execPath, [...flags, "-e", script], { encoding: "utf8", timeout: 60_000 });
    assert.equal(run.status, 0, `${flags.join(" ")}: ${run.stderr}`);
    assert.deepEqual(JSON.parse(run.stdout), { name: "wasm", threads: 2 }, flags.join(" "));
  }
});
