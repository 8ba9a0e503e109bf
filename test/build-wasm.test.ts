import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { statSync, utimesSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { before, test } from "node:test";
// @ts-expect-error: a plain .mjs build script without type declarations
import { ensureWasm, wasmIsStale } from "../scripts/build-wasm.mjs";

// `npm run build` (npm ci's prepare, and again the first `npx tsllm`, which links the project)
// skips the minutes-long kernel build when the binaries are newer than every input. An input
// that changes without a rebuild would ship stale kernels: each kind of input must count.

const script = fileURLToPath(new URL("../scripts/build-wasm.mjs", import.meta.url));
const inputs = {
  "a kernel source": fileURLToPath(new URL("../assembly/index.ts", import.meta.url)),
  "the build script (its compiler flags)": script,
  "the installed compiler": fileURLToPath(new URL("../node_modules/assemblyscript/package.json", import.meta.url)),
};

before(async () => {
  await ensureWasm();
});

for (const [what, file] of Object.entries(inputs)) {
  test(`the kernels count as stale when ${what} is newer than them`, () => {
    assert.equal(wasmIsStale(), false, "fresh after ensureWasm()");
    const { atime, mtime } = statSync(file);
    try {
      const later = new Date(Date.now() + 60_000);
      utimesSync(file, later, later);
      assert.equal(wasmIsStale(), true);
    } finally {
      utimesSync(file, atime, mtime);
    }
    assert.equal(wasmIsStale(), false, "fresh again with the old time");
  });
}

test("the build script skips fresh kernels and says so", async () => {
  const { stdout } = await promisify(execFile)(process.execPath, [script]);
  assert.match(stdout, /kernels\.wasm and .*kernels-relaxed\.wasm are up to date \(--force rebuilds\)/);
});
