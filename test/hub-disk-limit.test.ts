import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { after, before, test } from "node:test";
import { PROJECT_ROOT } from "./helpers/shared.js";
import { FakeHub, randomBytes, sha256, type FakeFile } from "./helpers/hub-fake.js";

// A disk that fills up, made with a file size limit (`ulimit -f`, RLIMIT_FSIZE) on a child
// process: as on a full disk, the write that crosses the limit stores part of its bytes and the
// next one fails (EFBIG here, ENOSPC there). No small file system can be mounted here.
const COMMIT = "7777777777777777777777777777777777777777";
const weights: FakeFile = { path: "model.safetensors", content: randomBytes(300_000, 31) };
const LIMIT_BLOCKS = 584; // 299,008 bytes: the last chunk of the file crosses it

let hub: FakeHub;
let cache: string;
before(async () => {
  hub = await new FakeHub().add({ repo: "acme/big", commit: COMMIT, files: [{ path: "config.json", content: Buffer.from("{}") }, weights] }).start();
  cache = mkdtempSync(join(tmpdir(), "tsllm-hub-limit-"));
});
after(async () => {
  await hub.close();
  rmSync(cache, { recursive: true, force: true });
});

/** downloads acme/big in a child process under `ulimit` (a shell prefix); resolves with what it printed */
function download(limit: string): Promise<{ ok?: boolean; code?: string; message?: string }> {
  const code = `
    import { downloadModel } from ${JSON.stringify(pathToFileURL(join(PROJECT_ROOT, "src/hub/index.ts")).href)};
    try {
      await downloadModel("acme/big", { cacheDir: ${JSON.stringify(cache)}, endpoint: ${JSON.stringify(hub.hubUrl)}, env: {}, retryDelayMs: 1 });
      console.log(JSON.stringify({ ok: true }));
    } catch (e) {
      console.log(JSON.stringify({ code: e.code, message: e.message }));
    }`;
  return new Promise((done, fail) => {
    const child = spawn("sh", ["-c", `${limit} exec "$0" --import tsx --input-type=module -e "$1"`, process.execPath, code], { cwd: PROJECT_ROOT });
    let out = "", err = "";
    child.stdout.on("data", (d: Buffer) => (out += d.toString()));
    child.stderr.on("data", (d: Buffer) => (err += d.toString()));
    child.on("close", (status) => (status === 0 ? done(JSON.parse(out)) : fail(new Error(`child exited ${status}: ${err}`))));
  });
}

test("a disk that fills up at a file's last chunk fails the download as the disk's, keeps the part written, and a later run resumes it", async () => {
  const blob = join(cache, "models--acme--big", "blobs", sha256(weights.content));
  const cut = await download(`ulimit -f ${LIMIT_BLOCKS};`);
  assert.equal(cut.code, "disk", JSON.stringify(cut));
  assert.match(cut.message!, /file too large \(EFBIG\); 299\.0 kB of 300\.0 kB were written and are kept/);
  assert.equal(statSync(`${blob}.incomplete`).size, LIMIT_BLOCKS * 512);
  const ranges = hub.requests.length;
  assert.deepEqual(await download(""), { ok: true });
  assert.deepEqual(hub.requests.slice(ranges).filter((q) => q.server === "cdn").map((q) => q.headers.range), [`bytes=${LIMIT_BLOCKS * 512}-`], "resumed where the disk filled up");
  assert.ok(readFileSync(blob).equals(weights.content));
});
