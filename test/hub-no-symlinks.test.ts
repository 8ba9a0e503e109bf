import assert from "node:assert/strict";
import { existsSync, lstatSync, mkdtempSync, readFileSync, readdirSync, rmSync } from "node:fs";
import fsp from "node:fs/promises";
import { syncBuiltinESMExports } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { downloadModel, type DownloadOptions } from "../src/hub/index.js";
import { blobName, FakeHub, randomBytes, type FakeFile } from "./helpers/hub-fake.js";

// A file system without symlinks (Windows without developer mode, FAT, some network mounts)
// cannot be mounted here, so symlink() answers as Windows' does there: EPERM. Everything else
// (the files, the renames, the HTTP server) is real.
const COMMIT = "3333333333333333333333333333333333333333";
const files: FakeFile[] = [
  { path: "config.json", content: Buffer.from('{"model_type":"llama"}') },
  { path: "model.safetensors", content: randomBytes(50_000, 21) },
];

let hub: FakeHub;
const realSymlink = fsp.symlink;
const roots: string[] = [];
before(async () => {
  hub = await new FakeHub().add({ repo: "acme/nolinks", commit: COMMIT, files }).start();
  fsp.symlink = async () => {
    throw Object.assign(new Error("EPERM: operation not permitted, symlink"), { code: "EPERM" });
  };
  syncBuiltinESMExports();
});
after(async () => {
  fsp.symlink = realSymlink;
  syncBuiltinESMExports();
  await hub.close();
  for (const r of roots) rmSync(r, { recursive: true, force: true });
});

const opts = (cacheDir: string, more: DownloadOptions = {}): DownloadOptions => ({ cacheDir, endpoint: hub.hubUrl, env: {}, retryDelayMs: 1, ...more });

test("without symlinks a downloaded blob is moved into the snapshot (held once), and a refresh transfers nothing", async () => {
  const cache = mkdtempSync(join(tmpdir(), "tsllm-hub-nolinks-"));
  roots.push(cache);
  const r = await downloadModel("acme/nolinks", opts(cache));
  const repoDir = join(cache, "models--acme--nolinks");
  for (const f of files) {
    const p = join(r.snapshotDir, f.path);
    assert.ok(lstatSync(p).isFile(), `${f.path} is the file itself`);
    assert.deepEqual(readFileSync(p), f.content);
    assert.ok(!existsSync(join(repoDir, "blobs", blobName(f))), `${f.path}'s blob was moved, not copied`);
  }
  assert.deepEqual(readdirSync(join(repoDir, "blobs")), [], "no blob (nor partial file) left beside the snapshot");
  const n = hub.requests.length;
  const again = await downloadModel("acme/nolinks", opts(cache, { refresh: true }));
  assert.equal(again.snapshotDir, r.snapshotDir);
  assert.deepEqual(hub.requests.slice(n).filter((q) => q.method === "GET" && !q.url.startsWith("/api/")), [], "nothing downloaded again: only metadata asked");
  const offline = await downloadModel("acme/nolinks", opts(cache, { offline: true }));
  assert.deepEqual(offline.files, ["config.json", "model.safetensors"]);
});

test("without symlinks two concurrent downloads of the same file transfer its bytes once: the second waits and finds the file in the snapshot", async () => {
  const cache = mkdtempSync(join(tmpdir(), "tsllm-hub-nolinks-"));
  roots.push(cache);
  const served = hub.bytesServed;
  const [a, b] = await Promise.all([downloadModel("acme/nolinks", opts(cache)), downloadModel("acme/nolinks", opts(cache))]);
  assert.equal(a.snapshotDir, b.snapshotDir);
  for (const f of files) assert.deepEqual(readFileSync(join(a.snapshotDir, f.path)), f.content);
  assert.equal(hub.bytesServed - served, files.reduce((n, f) => n + f.content.length, 0), "each file's bytes served once");
  assert.deepEqual(readdirSync(join(cache, "models--acme--nolinks", "blobs")), [], "no blob nor partial file left");
});

test("without symlinks a blob another download moves away as this one finds it is fetched again (its copy waits for the blob's lock), not a failed download", async () => {
  // two files with the same bytes share one blob: a.safetensors' download moves it into its
  // snapshot while b.safetensors' download, which found it present, is about to copy it
  const twin = randomBytes(30_000, 22);
  hub.add({ repo: "acme/twins", commit: COMMIT, files: [{ path: "a.safetensors", content: twin }, { path: "b.safetensors", content: twin }] });
  const cache = mkdtempSync(join(tmpdir(), "tsllm-hub-nolinks-"));
  roots.push(cache);
  const blob = join(cache, "models--acme--twins", "blobs", blobName({ path: "a.safetensors", content: twin }));
  const realRename = fsp.rename;
  let second: Promise<unknown> | undefined;
  fsp.rename = async (from, to) => {
    await realRename(from, to);
    // a.safetensors is fetched and about to be moved: b.safetensors' download starts now and finds
    // the blob; it copies it holding the blob's lock, so it waits for the move and fetches it again
    if (String(to) === blob && !second) second = downloadModel("acme/twins", opts(cache, { include: ["b.safetensors"] }));
  };
  syncBuiltinESMExports();
  try {
    const a = await downloadModel("acme/twins", opts(cache, { include: ["a.safetensors"] }));
    const b = (await second) as Awaited<ReturnType<typeof downloadModel>>;
    assert.deepEqual(readFileSync(join(a.snapshotDir, "a.safetensors")), twin);
    assert.deepEqual(readFileSync(join(b.snapshotDir, "b.safetensors")), twin);
  } finally {
    fsp.rename = realRename;
    syncBuiltinESMExports();
  }
});
