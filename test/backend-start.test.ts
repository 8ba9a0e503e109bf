import assert from "node:assert/strict";
import { test } from "node:test";
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
