import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { downloadModel, type DownloadOptions, type HubError } from "../src/hub/index.js";
import { FakeHub, randomBytes, sha256, type FakeFile } from "./helpers/hub-fake.js";

// A branch that moves on the hub, as huggingface_hub's hf_hub_download / snapshot_download see it:
// a branch or tag is asked of the hub each time (a cached snapshot serves when the hub cannot
// answer), a commit id's snapshot is listed (nothing cached is transferred again), a commit id's
// cached file is not asked.
const OLD = "1111111111111111111111111111111111111111";
const NEW = "2222222222222222222222222222222222222222";
const weights = randomBytes(5_000, 11);
const oldFiles: FakeFile[] = [
  { path: "config.json", content: Buffer.from('{"model_type":"llama","v":1}') },
  { path: "model.safetensors", content: weights },
];
// the new commit fixes config.json; the weights are the same blob
const newFiles: FakeFile[] = [{ path: "config.json", content: Buffer.from('{"model_type":"llama","v":2}') }, oldFiles[1]!];

let hub: FakeHub;
const roots: string[] = [];
before(async () => {
  hub = await new FakeHub().add({ repo: "acme/moving", commit: OLD, refs: ["main", "v1"], files: oldFiles }).start();
});
after(async () => {
  await hub.close();
  for (const r of roots) rmSync(r, { recursive: true, force: true });
});

function fresh(): string {
  const d = mkdtempSync(join(tmpdir(), "tsllm-hub-moving-"));
  roots.push(d);
  return d;
}
const opts = (cacheDir: string, more: DownloadOptions = {}): DownloadOptions => ({ cacheDir, endpoint: hub.hubUrl, env: {}, retryDelayMs: 1, ...more });
const config = (r: { snapshotDir: string }) => JSON.parse(readFileSync(join(r.snapshotDir, "config.json"), "utf8")).v;

test("a branch that moved on the hub is followed by default; refresh: false and a commit id stay on the cache (a commit's snapshot listed once)", async () => {
  hub.add({ repo: "acme/moving", commit: OLD, refs: ["main", "v1"], files: oldFiles });
  const cache = fresh();
  const first = await downloadModel("acme/moving", opts(cache));
  assert.equal(first.commit, OLD);
  // a commit id's snapshot: one listing of that commit, as snapshot_download, and nothing transferred
  // (asked while the hub still has it: the fake keeps one commit per repo)
  const listed = hub.requests.length;
  const cdnBefore = hub.count("cdn");
  const pinned = await downloadModel(`acme/moving@${OLD}`, opts(cache));
  assert.deepEqual(hub.requests.slice(listed).map((q) => `${q.method} ${q.url}`), [`GET /api/models/acme/moving/revision/${OLD}`]);
  assert.equal(hub.count("cdn"), cdnBefore);
  assert.equal(pinned.commit, OLD);
  hub.add({ repo: "acme/moving", commit: NEW, refs: ["main"], files: newFiles });

  const n = hub.requests.length;
  const stale = await downloadModel("acme/moving", opts(cache, { refresh: false }));
  assert.equal(hub.requests.length, n, "no request");
  assert.equal(stale.commit, OLD);

  const cdn = hub.count("cdn");
  const moved = await downloadModel("acme/moving", opts(cache));
  assert.equal(moved.commit, NEW);
  assert.equal(moved.fromCache, false);
  assert.equal(config(moved), 2);
  assert.equal(readFileSync(join(cache, "models--acme--moving", "refs", "main"), "utf8"), NEW);
  assert.equal(hub.count("cdn"), cdn, "the unchanged weights' blob is not downloaded again (config.json is a git file, served by the hub)");
  // the tag the hub no longer has is an error, as huggingface_hub raises RevisionNotFoundError, not a stale snapshot
  await assert.rejects(downloadModel("acme/moving@v1", opts(cache)), (e: HubError) => e.code === "revision-not-found");
});

test("a hub that cannot answer is asked once and the cached snapshot serves", async () => {
  hub.add({ repo: "acme/moving", commit: OLD, refs: ["main"], files: oldFiles });
  const cache = fresh();
  await downloadModel("acme/moving", opts(cache));
  for (const fail of [() => (hub.unavailable = 100), () => hub.invalidTokens.add("hf_revoked")]) {
    fail();
    const n = hub.requests.length;
    const r = await downloadModel("acme/moving", opts(cache, { token: "hf_revoked" }));
    assert.equal(hub.requests.length, n + 1, "one try: no retries, no backoff");
    assert.equal(r.commit, OLD);
    assert.equal(r.fromCache, true);
    hub.unavailable = 0;
    hub.invalidTokens.clear();
  }
  // asked to refresh (tsllm download), a token the hub refuses is the answer, not the cache
  hub.invalidTokens.add("hf_revoked");
  await assert.rejects(downloadModel("acme/moving", opts(cache, { token: "hf_revoked", refresh: true })), (e: HubError) => e.code === "unauthorized");
  hub.invalidTokens.clear();
  // nothing cached: the retries and the error as before
  hub.unavailable = 100;
  await assert.rejects(downloadModel("acme/moving", opts(fresh(), { retries: 2 })), (e: HubError) => e.code === "network" && /after 3 attempts/.test(e.message));
  hub.unavailable = 0;
});

test("a damaged refs file (empty after a crash, or not a commit) is asked of the hub and rewritten; offline the error names it", async () => {
  hub.add({ repo: "acme/moving", commit: OLD, refs: ["main"], files: oldFiles });
  const cache = fresh();
  await downloadModel("acme/moving", opts(cache));
  const ref = join(cache, "models--acme--moving", "refs", "main");
  for (const damaged of ["", "garbage!\n", "../../../etc"]) {
    writeFileSync(ref, damaged);
    await assert.rejects(downloadModel("acme/moving", opts(cache, { offline: true })), (e: HubError) => e.code === "offline-miss" && e.message.includes(`its ref file ${ref} is damaged`));
    const r = await downloadModel("acme/moving", opts(cache));
    assert.equal(r.commit, OLD);
    assert.equal(readFileSync(ref, "utf8"), OLD);
    assert.equal((await downloadModel("acme/moving", opts(cache, { offline: true }))).commit, OLD);
  }
});

test("a branch that moved to a commit that cannot be fetched now (the connection breaks) still serves the commit cached before", async () => {
  hub.add({ repo: "acme/moving", commit: OLD, refs: ["main"], files: oldFiles });
  const cache = fresh();
  await downloadModel("acme/moving", opts(cache));
  const heavier: FakeFile = { path: "model.safetensors", content: randomBytes(40_000, 12) };
  hub.add({ repo: "acme/moving", commit: NEW, refs: ["main"], files: [newFiles[0]!, heavier] });
  // every try a whole GET (no Range) cut half-way
  hub.ignoreRange = true;
  hub.dropMidway.set(sha256(heavier.content), 100);
  const r = await downloadModel("acme/moving", opts(cache, { retries: 1 }));
  assert.equal(r.commit, OLD);
  assert.equal(r.fromCache, true);
  assert.equal(config(r), 1);
  assert.equal(readFileSync(join(cache, "models--acme--moving", "refs", "main"), "utf8"), OLD, "the ref stays until the new commit is complete");
  hub.dropMidway.clear();
  hub.ignoreRange = false;
  const next = await downloadModel("acme/moving", opts(cache));
  assert.equal(next.commit, NEW);
  assert.ok(readFileSync(join(next.snapshotDir, "model.safetensors")).equals(heavier.content));
  // asked to refresh, the failure is the answer
  hub.add({ repo: "acme/moving", commit: OLD, refs: ["main"], files: oldFiles });
  const other: FakeFile = { path: "model.safetensors", content: randomBytes(40_000, 13) };
  hub.add({ repo: "acme/moving", commit: "3".repeat(40), refs: ["main"], files: [newFiles[0]!, other] });
  hub.ignoreRange = true;
  hub.dropMidway.set(sha256(other.content), 100);
  await assert.rejects(downloadModel("acme/moving", opts(cache, { retries: 0, refresh: true })), (e: HubError) => e.code === "network");
  hub.dropMidway.clear();
  hub.ignoreRange = false;
});
