import assert from "node:assert/strict";
import { execFileSync, spawn, spawnSync } from "node:child_process";
import { existsSync, lstatSync, mkdirSync, statfsSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { homedir, tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { after, before, describe, test } from "node:test";
import { downloadModel, hfHubCacheDir, hfTokenFromEnv, hubOfflineFromEnv, type HubError, looksLikeHubReference, parseHubReference, type DownloadOptions } from "../src/hub/index.js";
import { PROJECT_ROOT } from "./helpers/shared.js";
import { blobName, FakeHub, gitBlobSha1, randomBytes, sha256, type FakeFile } from "./helpers/hub-fake.js";

const COMMIT = "0123456789abcdef0123456789abcdef01234567";
const GGUF_COMMIT = "fedcba9876543210fedcba9876543210fedcba98";

const ggufFiles: FakeFile[] = [
  { path: "README.md", content: Buffer.from("# tiny\n") },
  { path: "tiny-Q8_0.gguf", content: randomBytes(300_000, 1) },
  { path: "tiny-Q4_K_M-00001-of-00002.gguf", content: randomBytes(70_000, 2) },
  { path: "tiny-Q4_K_M-00002-of-00002.gguf", content: randomBytes(50_000, 3) },
  { path: "tiny-Q4_K_S.gguf", content: randomBytes(1000, 4) },
  { path: "mmproj-tiny-f16.gguf", content: randomBytes(1000, 5) },
];
const hfFiles: FakeFile[] = [
  { path: "README.md", content: Buffer.from("# model card\n") },
  { path: "config.json", content: Buffer.from('{"model_type":"llama"}') },
  { path: "tokenizer.json", content: Buffer.from('{"model":{}}') },
  { path: "tokenizer_config.json", content: Buffer.from("{}") },
  { path: "model.safetensors", content: randomBytes(20_000, 6) },
  { path: "pytorch_model.bin", content: randomBytes(20_000, 7) },
  { path: "onnx/model.onnx", content: randomBytes(500, 8) },
  { path: "nested/deeper/notes.json", content: Buffer.from("[1,2,3]") },
];

const shardedFiles: FakeFile[] = [
  { path: "config.json", content: Buffer.from('{"model_type":"llama"}') },
  { path: "model.safetensors.index.json", content: Buffer.from(JSON.stringify({ weight_map: { "a.weight": "model-00001-of-00002.safetensors", "b.weight": "model-00002-of-00002.safetensors" } })) },
  { path: "model-00001-of-00002.safetensors", content: randomBytes(3000, 9) },
  { path: "model-00002-of-00002.safetensors", content: randomBytes(3000, 10) },
];

let hub: FakeHub;
const roots: string[] = [];
function tmp(): string {
  const d = mkdtempSync(join(tmpdir(), "tsllm-hub-"));
  roots.push(d);
  return d;
}

before(async () => {
  hub = await new FakeHub()
    .add({ repo: "acme/tiny-GGUF", commit: GGUF_COMMIT, files: ggufFiles })
    .add({ repo: "acme/tiny", commit: COMMIT, refs: ["main", "v1"], files: hfFiles })
    .add({ repo: "acme/gated", commit: COMMIT, files: hfFiles, gatedToken: "hf_secret" })
    .add({ repo: "acme/ms-model", commit: COMMIT, refs: ["master"], files: hfFiles })
    .add({ repo: "acme/sharded", commit: COMMIT, files: shardedFiles })
    .start();
});
after(async () => {
  await hub.close();
  for (const r of roots) rmSync(r, { recursive: true, force: true });
});

/** options that point everything at the fake hub and a fresh cache; no environment is read */
function opts(cacheDir: string, more: DownloadOptions = {}): DownloadOptions {
  return { cacheDir, endpoint: hub.hubUrl, env: {}, retryDelayMs: 1, ...more };
}

function file(files: FakeFile[], path: string): FakeFile {
  return files.find((f) => f.path === path)!;
}

/** every path under a folder, '/'-separated, symlinks not followed */
function tree(dir: string, prefix = ""): string[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const rel = prefix ? `${prefix}/${e.name}` : e.name;
    return e.isDirectory() ? tree(join(dir, e.name), rel) : [rel];
  }).sort();
}

describe("cache layout", () => {
  test("is huggingface_hub's: blobs by ETag, relative snapshot symlinks, refs/main holding the commit", async () => {
    const cache = tmp();
    const r = await downloadModel("acme/tiny", opts(cache, { include: ["*.json", "model.safetensors"] }));
    const repoDir = join(cache, "models--acme--tiny");
    assert.equal(r.commit, COMMIT);
    assert.equal(r.snapshotDir, join(repoDir, "snapshots", COMMIT));
    assert.equal(r.path, r.snapshotDir);
    assert.equal(readFileSync(join(repoDir, "refs", "main"), "utf8"), COMMIT); // no trailing newline, as Python writes it
    const expected = ["config.json", "model.safetensors", "nested/deeper/notes.json", "tokenizer.json", "tokenizer_config.json"];
    assert.deepEqual([...r.files].sort(), expected);
    assert.deepEqual(tree(join(repoDir, "snapshots", COMMIT)), expected);
    for (const p of expected) {
      const f = file(hfFiles, p);
      const link = join(repoDir, "snapshots", COMMIT, ...p.split("/"));
      assert.ok(lstatSync(link).isSymbolicLink(), `${p} is a symlink`);
      // os.path.relpath(blob, dirname(link)): one ../ per folder level below the repo folder
      const ups = "../".repeat(2 + p.split("/").length - 1);
      assert.equal(readlinkSync(link), `${ups}blobs/${blobName(f)}`, p);
      assert.deepEqual(readFileSync(link), f.content, p);
    }
    // LFS files are named by sha256, git files by their git blob sha1
    assert.deepEqual(tree(join(repoDir, "blobs")), expected.map((p) => blobName(file(hfFiles, p))).sort());
    assert.equal(blobName(file(hfFiles, "model.safetensors")), sha256(file(hfFiles, "model.safetensors").content));
    assert.deepEqual(tree(repoDir).filter((p) => p.startsWith("refs/")), ["refs/main"]);
  });

  test("a tag writes refs/<tag>; a commit id writes no ref", async () => {
    const cache = tmp();
    await downloadModel("acme/tiny@v1", opts(cache, { include: ["config.json"] }));
    await downloadModel(`acme/tiny@${COMMIT}`, opts(cache, { include: ["config.json"], refresh: true }));
    const repoDir = join(cache, "models--acme--tiny");
    assert.deepEqual(tree(join(repoDir, "refs")), ["v1"]);
    assert.equal(readFileSync(join(repoDir, "refs", "v1"), "utf8"), COMMIT);
  });

  test("a second run is served from the cache: a commit id, offline or refresh: false with no request, a branch with one metadata request", async () => {
    const cache = tmp();
    const first = await downloadModel("acme/tiny-GGUF:Q8_0", opts(cache));
    assert.equal(first.fromCache, false);
    const before = hub.requests.length;
    const pinned = await downloadModel(`acme/tiny-GGUF@${GGUF_COMMIT}:Q8_0`, opts(cache));
    const offline = await downloadModel("acme/tiny-GGUF:Q8_0", opts(cache, { env: { HF_HUB_OFFLINE: "1" } }));
    const cacheFirst = await downloadModel("acme/tiny-GGUF:Q8_0", opts(cache, { refresh: false }));
    assert.equal(hub.requests.length, before, "no request");
    const again = await downloadModel("acme/tiny-GGUF:Q8_0", opts(cache));
    assert.deepEqual(hub.requests.slice(before).map((q) => `${q.method} ${q.url}`), ["GET /api/models/acme/tiny-GGUF/revision/main"], "main asked of the hub, nothing else");
    assert.equal(again.fromCache, false);
    for (const r of [pinned, offline, cacheFirst, again]) {
      assert.equal(r.fromCache, r !== again);
      assert.equal(r.path, first.path);
      assert.equal(r.commit, GGUF_COMMIT);
    }
  });

  test("refresh asks the hub again but transfers nothing already cached", async () => {
    const cache = tmp();
    await downloadModel("acme/tiny-GGUF:Q8_0", opts(cache));
    const cdnBefore = hub.count("cdn");
    const r = await downloadModel("acme/tiny-GGUF:Q8_0", opts(cache, { refresh: true }));
    assert.equal(r.fromCache, false);
    assert.equal(hub.count("cdn"), cdnBefore);
  });
});

describe("environment, read as huggingface_hub's constants.py reads it", () => {
  test("HF_HOME / HF_HUB_CACHE / HF_TOKEN_PATH expand ~ and $VARS (expanduser + expandvars)", async () => {
    const home = tmp();
    assert.equal(hfHubCacheDir({ HF_HOME: "~/hf-home" }), join(homedir(), "hf-home", "hub"));
    assert.equal(hfHubCacheDir({ HF_HUB_CACHE: "~" }), homedir());
    // biome-ignore lint/suspicious/noTemplateCurlyInString: a shell-style ${VAR}, on purpose
    assert.equal(hfHubCacheDir({ HF_HUB_CACHE: "${BASE}/c", BASE: home }), join(home, "c"));
    assert.equal(hfHubCacheDir({ HF_HUB_CACHE: "$NOPE/c" }), "$NOPE/c", "an unset variable is left as is");
    assert.equal(hfHubCacheDir({ HUGGINGFACE_HUB_CACHE: "$BASE/legacy", BASE: home }), join(home, "legacy"));
    assert.equal(hfHubCacheDir({ XDG_CACHE_HOME: "$BASE/xdg", BASE: home }), join(home, "xdg", "huggingface", "hub"));
    writeFileSync(join(home, "tok"), "hf_from_file\n");
    assert.equal(hfTokenFromEnv({ HF_TOKEN_PATH: "$BASE/tok", BASE: home }), "hf_from_file");
    // a real download lands where Python would put it, not in a folder literally named '$BASE'
    const r = await downloadModel("acme/tiny", { env: { HF_HOME: "$BASE/hf", BASE: home, HF_ENDPOINT: hub.hubUrl }, include: ["config.json"], retryDelayMs: 1 });
    assert.equal(r.snapshotDir, join(home, "hf", "hub", "models--acme--tiny", "snapshots", COMMIT));
    assert.deepEqual(readFileSync(join(r.snapshotDir, "config.json")), file(hfFiles, "config.json").content);
  });

  test("TRANSFORMERS_OFFLINE=1 means offline too, unless HF_HUB_OFFLINE is set", () => {
    assert.equal(hubOfflineFromEnv({ TRANSFORMERS_OFFLINE: "1" }), true);
    assert.equal(hubOfflineFromEnv({ HF_HUB_OFFLINE: "yes" }), true);
    assert.equal(hubOfflineFromEnv({ HF_HUB_OFFLINE: "0", TRANSFORMERS_OFFLINE: "1" }), false);
    assert.equal(hubOfflineFromEnv({}), false);
  });
});

describe("offline mode", () => {
  test("HF_HUB_OFFLINE=1 with nothing cached is a clear error and makes no request", async () => {
    const cache = tmp();
    const before = hub.requests.length;
    await assert.rejects(downloadModel("acme/tiny-GGUF:Q8_0", opts(cache, { env: { HF_HUB_OFFLINE: "1" } })), (e: HubError) => {
      assert.equal(e.code, "offline-miss");
      assert.match(e.message, /acme\/tiny-GGUF@main:Q8_0 is not in the cache/);
      assert.match(e.message, /HF_HUB_OFFLINE=1/);
      return true;
    });
    assert.equal(hub.requests.length, before);
  });

  test("offline, refresh (tsllm download --offline) serves what the cache holds with no request, not 'not in the cache'", async () => {
    const cache = tmp();
    const online = await downloadModel("acme/tiny-GGUF:Q8_0", opts(cache));
    const start = hub.requests.length;
    const r = await downloadModel("acme/tiny-GGUF:Q8_0", opts(cache, { offline: true, refresh: true }));
    assert.deepEqual([r.path, r.fromCache], [online.path, true]);
    assert.equal(hub.requests.length, start);
    await assert.rejects(downloadModel("acme/tiny-GGUF:Q4_K_M", opts(cache, { offline: true, refresh: true })), (e: HubError) => e.code === "offline-miss");
  });

  test("a cached Q8_0 does not satisfy an offline request for Q4_K_M", async () => {
    const cache = tmp();
    await downloadModel("acme/tiny-GGUF:Q8_0", opts(cache));
    await assert.rejects(downloadModel("acme/tiny-GGUF:Q4_K_M", opts(cache, { offline: true })), { code: "offline-miss" });
  });

  test("offline, a cached snapshot whose GGUF lost its blob is named as damaged, not as never downloaded", async () => {
    const cache = tmp();
    await downloadModel("acme/tiny-GGUF:Q8_0", opts(cache));
    const gguf = file(ggufFiles, "tiny-Q8_0.gguf");
    rmSync(join(cache, "models--acme--tiny-GGUF", "blobs", blobName(gguf))); // a cleaner took the blob, the snapshot's link stays
    const snapshot = join(cache, "models--acme--tiny-GGUF", "snapshots", GGUF_COMMIT);
    await assert.rejects(downloadModel("acme/tiny-GGUF:Q8_0", opts(cache, { offline: true })), (e: HubError) => e.code === "offline-miss"
      && e.message === `acme/tiny-GGUF@main:Q8_0 cannot be served from the cache: its snapshot ${snapshot} is damaged (tiny-Q8_0.gguf: its blob is missing (a broken link)) and offline mode is on (HF_HUB_OFFLINE=1): download it again while online, e.g. tsllm download acme/tiny-GGUF@main:Q8_0`);
    // online it is fetched again
    const again = await downloadModel("acme/tiny-GGUF:Q8_0", opts(cache));
    assert.deepEqual(readFileSync(again.path), gguf.content);
  });
});

describe("integrity", () => {
  test("a connection cut halfway is resumed with a Range request and the sha256 verified", async () => {
    const cache = tmp();
    const f = file(ggufFiles, "tiny-Q8_0.gguf");
    hub.dropMidway.set(sha256(f.content), 1);
    const start = hub.requests.length;
    const r = await downloadModel("acme/tiny-GGUF:Q8_0", opts(cache));
    assert.deepEqual(readFileSync(r.path), f.content);
    const gets = hub.requests.slice(start).filter((q) => q.server === "cdn" && q.method === "GET");
    assert.equal(gets.length, 2);
    assert.equal(gets[0]!.headers.range, undefined);
    const resumedAt = Number(/^bytes=(\d+)-$/.exec(String(gets[1]!.headers.range))?.[1]);
    assert.ok(resumedAt > 0 && resumedAt < f.content.length, `resumed at ${gets[1]!.headers.range}`);
    assert.ok(!existsSync(join(cache, "models--acme--tiny-GGUF", "blobs", `${sha256(f.content)}.incomplete`)));
  });

  test("an .incomplete left by a killed process is resumed from where it stopped", async () => {
    const cache = tmp();
    const f = file(ggufFiles, "tiny-Q8_0.gguf");
    const blobs = join(cache, "models--acme--tiny-GGUF", "blobs");
    mkdirSync(blobs, { recursive: true });
    writeFileSync(join(blobs, `${sha256(f.content)}.incomplete`), f.content.subarray(0, 123_457));
    const start = hub.requests.length;
    const r = await downloadModel("acme/tiny-GGUF:Q8_0", opts(cache));
    assert.deepEqual(readFileSync(r.path), f.content);
    const gets = hub.requests.slice(start).filter((q) => q.server === "cdn" && q.method === "GET");
    assert.deepEqual(gets.map((g) => g.headers.range), ["bytes=123457-"]);
  });

  test("a damaged .incomplete (zeros where a power cut lost the bytes) fails its sha256 once resumed, so the file is fetched again whole", async () => {
    const cache = tmp();
    const f = file(ggufFiles, "tiny-Q8_0.gguf");
    const blobs = join(cache, "models--acme--tiny-GGUF", "blobs");
    mkdirSync(blobs, { recursive: true });
    writeFileSync(join(blobs, `${sha256(f.content)}.incomplete`), Buffer.alloc(100_000));
    const start = hub.requests.length;
    const r = await downloadModel("acme/tiny-GGUF:Q8_0", opts(cache));
    assert.equal(sha256(readFileSync(r.path)), sha256(f.content));
    const gets = hub.requests.slice(start).filter((q) => q.server === "cdn" && q.method === "GET");
    assert.deepEqual(gets.map((g) => g.headers.range), ["bytes=100000-", undefined]);
    assert.deepEqual(tree(blobs), [sha256(f.content)]);
  });

  test("corrupted bytes of the right size are rejected and nothing is left in the cache", async () => {
    const cache = tmp();
    const f = file(ggufFiles, "tiny-Q8_0.gguf");
    hub.corrupt.add(sha256(f.content));
    try {
      await assert.rejects(downloadModel("acme/tiny-GGUF:Q8_0", opts(cache)), (e: HubError) => {
        assert.equal(e.code, "checksum");
        assert.match(e.message, /tiny-Q8_0\.gguf of acme\/tiny-GGUF@main: sha256 mismatch/);
        return true;
      });
    } finally {
      hub.corrupt.delete(sha256(f.content));
    }
    const repoDir = join(cache, "models--acme--tiny-GGUF");
    assert.deepEqual(tree(join(repoDir, "blobs")), []);
    assert.deepEqual(tree(join(repoDir, "snapshots")), []);
    assert.ok(!existsSync(join(repoDir, "refs")));
    // and a later download is clean
    const r = await downloadModel("acme/tiny-GGUF:Q8_0", opts(cache));
    assert.deepEqual(readFileSync(r.path), f.content);
  });

  test("a small file stored in git is checked against its ETag (git blob sha1): corrupted or cut short, it never lands in the cache", async () => {
    for (const [fault, path] of [["corrupt", "config.json"], ["truncate", "tokenizer.json"]] as const) {
      const cache = tmp();
      const f = file(hfFiles, path);
      const etag = gitBlobSha1(f.content);
      // the etag is git's own blob id of the file, computed apart from the code under test
      assert.equal(etag, execFileSync("git", ["hash-object", "--stdin"], { input: f.content }).toString().trim());
      hub[fault].add(etag);
      try {
        await assert.rejects(downloadModel("acme/tiny", opts(cache, { include: [path] })), (e: HubError) => {
          assert.equal(e.code, "checksum", e.message);
          assert.match(e.message, new RegExp(`${path.replace(".", "\\.")} of acme/tiny@main: git blob sha1 \\(the ETag of a file stored in git\\) mismatch \\(expected ${etag}, got [0-9a-f]{40}\\)`));
          return true;
        });
      } finally {
        hub[fault].delete(etag);
      }
      const repoDir = join(cache, "models--acme--tiny");
      assert.deepEqual(tree(join(repoDir, "blobs")), [], fault);
      assert.deepEqual(tree(join(repoDir, "snapshots")), [], fault);
      const r = await downloadModel("acme/tiny", opts(cache, { include: [path] }));
      assert.deepEqual(readFileSync(join(r.snapshotDir, path)), f.content);
    }
  });

  test("two concurrent downloads of the same file end with one correct file, transferred once", async () => {
    const cache = tmp();
    const f = file(ggufFiles, "tiny-Q8_0.gguf");
    const start = hub.requests.length;
    const [a, b] = await Promise.all([
      downloadModel("acme/tiny-GGUF:Q8_0", opts(cache, { refresh: true })),
      downloadModel("acme/tiny-GGUF:Q8_0", opts(cache, { refresh: true })),
    ]);
    assert.equal(a.path, b.path);
    assert.deepEqual(readFileSync(a.path), f.content);
    assert.deepEqual(tree(join(cache, "models--acme--tiny-GGUF", "blobs")), [sha256(f.content)]);
    assert.equal(hub.requests.slice(start).filter((q) => q.server === "cdn" && q.method === "GET").length, 1);
    assert.deepEqual(tree(join(cache, ".locks")), []);
  });

  test("a refresh that finds the hub announcing another size for a cached file (a broken proxy) keeps the snapshot whole: its blob hashes to its name, so it is kept, not deleted", async () => {
    const cache = tmp();
    const f: FakeFile = { path: "sized-Q8_0.gguf", content: randomBytes(50_000, 21) };
    const commit = "5".repeat(40);
    hub.add({ repo: "acme/sized", commit, files: [f] });
    const first = await downloadModel("acme/sized:Q8_0", opts(cache));
    const snapshotFile = () => readFileSync(first.path);
    for (const fault of ["a wrong X-Linked-Size", "HEAD and GET cut 10 bytes short"]) {
      if (fault === "a wrong X-Linked-Size") hub.add({ repo: "acme/sized", commit, files: [{ ...f, announcedSize: 60_000 }] });
      else { hub.add({ repo: "acme/sized", commit, files: [f] }); hub.truncate.add(sha256(f.content)); }
      const start = hub.requests.length;
      const again = await downloadModel("acme/sized:Q8_0", opts(cache, { refresh: true }));
      assert.equal(again.path, first.path, fault);
      assert.deepEqual(snapshotFile(), f.content, `${fault}: the cached file is intact`);
      assert.equal(hub.requests.slice(start).filter((q) => q.server === "cdn").length, 0, `${fault}: nothing transferred`);
    }
    hub.truncate.delete(sha256(f.content));
    // a blob that does not hash to its name (cut short on disk) is fetched again, replacing it
    const blob = join(cache, "models--acme--sized", "blobs", sha256(f.content));
    writeFileSync(blob, f.content.subarray(0, 20_000));
    await downloadModel("acme/sized:Q8_0", opts(cache, { refresh: true }));
    assert.deepEqual(snapshotFile(), f.content);
  });
});

describe("what the file server says", () => {
  test("a server that ignores Range (200, the whole file) is downloaded from the start, not appended to the partial file", async () => {
    const cache = tmp();
    const f = file(ggufFiles, "tiny-Q8_0.gguf");
    const blobs = join(cache, "models--acme--tiny-GGUF", "blobs");
    mkdirSync(blobs, { recursive: true });
    writeFileSync(join(blobs, `${sha256(f.content)}.incomplete`), f.content.subarray(0, 100_000));
    const start = hub.requests.length;
    hub.ignoreRange = true;
    try {
      const r = await downloadModel("acme/tiny-GGUF:Q8_0", opts(cache));
      assert.deepEqual(readFileSync(r.path), f.content);
    } finally {
      hub.ignoreRange = false;
    }
    const gets = hub.requests.slice(start).filter((q) => q.server === "cdn" && q.method === "GET");
    assert.deepEqual(gets.map((g) => g.headers.range), ["bytes=100000-"]);
  });

  test("a Content-Length that cannot make the size the hub announced is refused before the file is downloaded, not fetched again and again", async () => {
    const content = randomBytes(5_000, 10);
    hub.add({ repo: "acme/liar-GGUF", commit: COMMIT, files: [{ path: "liar-Q8_0.gguf", content, announcedSize: 5_100 }] });
    const cache = tmp();
    const start = hub.requests.length;
    await assert.rejects(downloadModel("acme/liar-GGUF", opts(cache)), (e: HubError) => {
      assert.equal(e.code, "protocol");
      assert.match(e.message, /liar-Q8_0\.gguf of acme\/liar-GGUF@main: .* announces 5000 bytes from byte 0, but the hub gave the file 5100 bytes/);
      return true;
    });
    assert.equal(hub.requests.slice(start).filter((q) => q.server === "cdn" && q.method === "GET").length, 1);
    assert.deepEqual(tree(join(cache, "models--acme--liar-GGUF", "snapshots")), []);
  });
});

describe("disk space", () => {
  test("a file larger than the free space is refused before a byte is transferred", async () => {
    const cache = tmp();
    const huge: FakeFile = { path: "huge-Q8_0.gguf", content: randomBytes(1000, 9), announcedSize: 2 ** 50 };
    hub.add({ repo: "acme/huge-GGUF", commit: COMMIT, files: [huge] });
    const start = hub.requests.length;
    await assert.rejects(downloadModel("acme/huge-GGUF", opts(cache)), (e: HubError) => {
      assert.equal(e.code, "disk");
      assert.match(e.message, /huge-Q8_0\.gguf of acme\/huge-GGUF@main needs [\d.]+ GB more but only [\d.]+ [kMG]?B are free in .*models--acme--huge-GGUF\/blobs/);
      return true;
    });
    assert.equal(hub.requests.slice(start).filter((q) => q.server === "cdn").length, 0, "nothing was fetched");
    assert.deepEqual(tree(join(cache, "models--acme--huge-GGUF", "blobs")), []);
  });

  test("a full disk (ENOSPC) fails at once with what happened, not as a broken connection retried 6 times", { skip: !existsSync("/dev/full") }, async () => {
    const cache = tmp();
    const f = file(ggufFiles, "tiny-Q8_0.gguf");
    const blobs = join(cache, "models--acme--tiny-GGUF", "blobs");
    mkdirSync(blobs, { recursive: true });
    // every write to the partial file fails with ENOSPC, as on a full disk
    symlinkSync("/dev/full", join(blobs, `${sha256(f.content)}.incomplete`));
    assert.ok(statfsSync(blobs).bavail > 0);
    const start = hub.requests.length;
    await assert.rejects(downloadModel("acme/tiny-GGUF:Q8_0", opts(cache)), (e: HubError) => {
      assert.equal(e.code, "disk");
      assert.match(e.message, /writing tiny-Q8_0\.gguf of acme\/tiny-GGUF@main to .*\.incomplete failed: no space left on device \(ENOSPC\)/);
      return true;
    });
    assert.equal(hub.requests.slice(start).filter((q) => q.server === "cdn").length, 1, "not retried");
    assert.ok(!existsSync(join(blobs, sha256(f.content))));
  });
});

/** true when this machine lets an unprivileged user namespace bind-mount a folder read-only */
const canMountReadOnly = (() => {
  const probe = mkdtempSync(join(tmpdir(), "tsllm-ro-probe-"));
  const r = spawnSync("unshare", ["-rm", "sh", "-c", `mount -o bind,ro "$0" "$0" && ! touch "$0/x" 2>/dev/null`, probe]);
  rmSync(probe, { recursive: true, force: true });
  return r.status === 0;
})();

/** runs `code` (an ES module) in a child process that sees `dir` as a read-only volume; resolves with its stdout */
function withReadOnly(dir: string, code: string): Promise<string> {
  return new Promise((done, fail) => {
    const child = spawn("unshare", ["-rm", "sh", "-c", `mount -o bind,ro "$0" "$0" && exec "$1" --import tsx --input-type=module -e "$2"`, dir, process.execPath, code], { cwd: PROJECT_ROOT });
    let out = "", err = "";
    child.stdout.on("data", (d: Buffer) => (out += d.toString()));
    child.stderr.on("data", (d: Buffer) => (err += d.toString()));
    child.on("close", (status) => (status === 0 ? done(out) : fail(new Error(`exit ${status}: ${err}`))));
  });
}

describe("a cache that cannot be written", () => {
  test("HF_HUB_CACHE under a file is one error naming the cache and the variable, not a bare ENOTDIR", async () => {
    const parent = tmp();
    writeFileSync(join(parent, "not-a-folder"), "x");
    const cache = join(parent, "not-a-folder", "hub");
    await assert.rejects(downloadModel("acme/tiny", opts(cache, { include: ["config.json"] })), (e: HubError) => {
      assert.equal(e.code, "disk");
      assert.equal(e.message, `cannot write the cache ${cache}: a path component is a file, not a folder (ENOTDIR) at ${join(cache, "models--acme--tiny")}; point HF_HUB_CACHE (the cacheDir option) at a writable folder`);
      return true;
    });
  });

  test("a complete cache on a read-only volume still serves a refresh; a missing file is one clear error", { skip: canMountReadOnly ? false : "unprivileged read-only bind mounts are not available here" }, async () => {
    const cache = tmp();
    await downloadModel("acme/tiny", opts(cache, { include: ["config.json", "model.safetensors"] }));
    const run = (include: string[]) => `
      import { downloadModel } from ${JSON.stringify(pathToFileURL(join(PROJECT_ROOT, "src/hub/index.ts")).href)};
      try {
        const r = await downloadModel("acme/tiny", { cacheDir: ${JSON.stringify(cache)}, endpoint: ${JSON.stringify(hub.hubUrl)}, env: {}, retryDelayMs: 1, refresh: true, include: ${JSON.stringify(include)} });
        console.log(JSON.stringify({ files: r.files, fromCache: r.fromCache }));
      } catch (e) {
        console.log(JSON.stringify({ code: e.code, message: e.message }));
      }`;
    // the hub is asked again (refresh), everything is there: nothing needs writing
    assert.deepEqual(JSON.parse(await withReadOnly(cache, run(["config.json", "model.safetensors"]))), { files: ["config.json", "model.safetensors"], fromCache: false });
    const missing = JSON.parse(await withReadOnly(cache, run(["tokenizer.json"])));
    assert.equal(missing.code, "disk");
    assert.match(missing.message, /^cannot write the cache .*: read-only file system \(EROFS\) at .*; point HF_HUB_CACHE \(the cacheDir option\) at a writable folder$/);
    // a cache folder yet to be made on the read-only volume: EROFS too (Node's recursive mkdir said ENOENT, "no such file or directory")
    const fresh = join(cache, "new", "hub");
    const made = JSON.parse(await withReadOnly(cache, run(["config.json"]).replace(JSON.stringify(cache), JSON.stringify(fresh))));
    assert.equal(made.code, "disk");
    assert.equal(made.message, `cannot write the cache ${fresh}: read-only file system (EROFS) at ${join(cache, "new")}; point HF_HUB_CACHE (the cacheDir option) at a writable folder`);
  });
});

describe("endpoint and token", () => {
  test("HF_ENDPOINT is honoured and the token reaches the hub but never the CDN", async () => {
    const cache = tmp();
    const start = hub.requests.length;
    const r = await downloadModel("acme/gated", { cacheDir: cache, env: { HF_ENDPOINT: hub.hubUrl, HF_TOKEN: "hf_secret" }, include: ["*.safetensors", "config.json"] });
    assert.deepEqual(readFileSync(join(r.snapshotDir, "model.safetensors")), file(hfFiles, "model.safetensors").content);
    const seen = hub.requests.slice(start);
    const hubReqs = seen.filter((q) => q.server === "hub");
    const cdnReqs = seen.filter((q) => q.server === "cdn");
    assert.ok(hubReqs.length >= 3 && cdnReqs.length === 1, `${hubReqs.length} hub, ${cdnReqs.length} cdn requests`);
    for (const q of hubReqs) assert.equal(q.headers.authorization, "Bearer hf_secret", q.url);
    for (const q of cdnReqs) assert.equal(q.headers.authorization, undefined, q.url);
  });

  test("a renamed repo's relative redirects are followed, keeping the token on the same host", async () => {
    hub.renamed.set("acme/old-gated", "acme/gated");
    try {
      const start = hub.requests.length;
      const r = await downloadModel("acme/old-gated", opts(tmp(), { token: "hf_secret", include: ["config.json"] }));
      assert.ok(r.snapshotDir.includes("models--acme--old-gated"), "cached under the name asked for, as huggingface_hub does");
      assert.deepEqual(readFileSync(join(r.snapshotDir, "config.json")), file(hfFiles, "config.json").content);
      const seen = hub.requests.slice(start);
      assert.ok(seen.some((q) => q.url.startsWith("/acme/old-gated/resolve/")) && seen.some((q) => q.url.startsWith("/acme/gated/resolve/")));
      for (const q of seen) assert.equal(q.headers.authorization, "Bearer hf_secret", q.url);
    } finally {
      hub.renamed.delete("acme/old-gated");
    }
  });

  test("a gated repo without a token says to set HF_TOKEN, and leaves no empty repo folder for ls to list", async () => {
    const cache = tmp();
    await assert.rejects(downloadModel("acme/gated", opts(cache)), (e: HubError) => {
      assert.equal(e.code, "unauthorized");
      assert.match(e.message, /acme\/gated.*gated or private.*HF_TOKEN/);
      return true;
    });
    // as huggingface_hub, which makes its folders once a file's metadata came
    assert.deepEqual(tree(cache), []);
    assert.deepEqual(readdirSync(cache), []);
  });

  test("a token without access to a gated repo: the 403 says so, with the Hub's own words", async () => {
    await assert.rejects(downloadModel("acme/gated", opts(tmp(), { token: "hf_other" })), (e: HubError) => {
      assert.equal(e.code, "unauthorized");
      assert.match(e.message, /^access to acme\/gated was refused \(403 GatedRepo\): it is gated or private — accept its terms on the Hub and check that the token sent has access to it\. The Hub says: Access to model acme\/gated is restricted and you are not in the authorized list\. Visit .*\/acme\/gated to ask for access\.$/);
      return true;
    });
  });

  test("an expired or revoked token is named as the problem, even on a public repo", async () => {
    hub.invalidTokens.add("hf_revoked");
    try {
      await assert.rejects(downloadModel("acme/tiny", opts(tmp(), { token: "hf_revoked", include: ["config.json"] })), (e: HubError) => {
        assert.equal(e.code, "unauthorized");
        assert.match(e.message, /^the Hub refused the token sent for acme\/tiny \(401 Invalid credentials in Authorization header\): it is invalid, expired or revoked; set a valid one in HF_TOKEN/);
        assert.doesNotMatch(e.message, /gated|hf_revoked/);
        return true;
      });
    } finally {
      hub.invalidTokens.delete("hf_revoked");
    }
  });

  test("404s name the repo, the revision or the file", async () => {
    await assert.rejects(downloadModel("acme/nope", opts(tmp())), (e: HubError) => e.code === "repo-not-found" && /repository acme\/nope not found/.test(e.message));
    await assert.rejects(downloadModel("acme/tiny@v9", opts(tmp())), (e: HubError) => e.code === "revision-not-found" && /revision "v9" not found in acme\/tiny/.test(e.message));
    await assert.rejects(downloadModel("acme/tiny-GGUF:Q2_K", opts(tmp())), (e: HubError) => e.code === "no-match" && /no GGUF file matches "Q2_K".*tiny-Q8_0\.gguf/.test(e.message));
  });
});

describe("network failures", () => {
  test("a 503 from the hub is retried with backoff", async () => {
    hub.unavailable = 2;
    const r = await downloadModel("acme/tiny-GGUF:Q4_K_S", opts(tmp()));
    assert.deepEqual(r.files, ["tiny-Q4_K_S.gguf"]);
    assert.equal(hub.unavailable, 0);
  });

  test("a 429 waits the Retry-After the hub asks for before trying again", { timeout: 20_000 }, async () => {
    hub.rateLimited.count = 1;
    hub.rateLimited.retryAfterS = 1;
    const start = hub.requests.length;
    const t0 = Date.now();
    try {
      const r = await downloadModel("acme/tiny-GGUF:Q4_K_S", opts(tmp(), { retries: 2 }));
      assert.deepEqual(r.files, ["tiny-Q4_K_S.gguf"]);
    } finally {
      hub.rateLimited.count = 0;
      hub.rateLimited.until = 0;
    }
    assert.ok(Date.now() - t0 >= 900, "waited");
    const statuses = hub.requests.slice(start, start + 2).map((q) => q.url);
    assert.equal(statuses[0], statuses[1], "the same request, once refused and once answered");
  });

  test("an unreachable hub is reported with what failed, after the retries", async () => {
    const dead = new FakeHub();
    await dead.start();
    const url = dead.hubUrl;
    await dead.close();
    await assert.rejects(downloadModel("acme/tiny", { cacheDir: tmp(), endpoint: url, env: {}, retries: 2, retryDelayMs: 1 }), (e: HubError) => {
      assert.equal(e.code, "network");
      assert.match(e.message, new RegExp(`GET ${url}/api/models/acme/tiny/revision/main failed: .*ECONNREFUSED.*after 3 attempts`));
      return true;
    });
  });
});

describe("stalled connections", () => {
  test("a download that stops sending mid-file is abandoned after HF_HUB_DOWNLOAD_TIMEOUT and resumed", { timeout: 20_000 }, async () => {
    const cache = tmp();
    const f = file(ggufFiles, "tiny-Q8_0.gguf");
    hub.stallMidway.set(sha256(f.content), 1);
    const start = hub.requests.length;
    const t0 = Date.now();
    try {
      const r = await downloadModel("acme/tiny-GGUF:Q8_0", opts(cache, { env: { HF_HUB_DOWNLOAD_TIMEOUT: "1" } }));
      assert.deepEqual(readFileSync(r.path), f.content);
    } finally {
      hub.stallMidway.delete(sha256(f.content));
    }
    const gets = hub.requests.slice(start).filter((q) => q.server === "cdn" && q.method === "GET");
    assert.deepEqual(gets.map((g) => g.headers.range), [undefined, `bytes=${f.content.length >> 1}-`]);
    const took = Date.now() - t0;
    assert.ok(took >= 900 && took < 8_000, `took ${took} ms`);
  });

  test("a timeout variable that is not a number of seconds is one error naming it, before any request", async () => {
    const start = hub.requests.length;
    for (const [name, value] of [["HF_HUB_DOWNLOAD_TIMEOUT", "30s"], ["HF_HUB_ETAG_TIMEOUT", "-1"]] as const) {
      await assert.rejects(downloadModel("acme/tiny-GGUF:Q4_K_S", opts(tmp(), { env: { [name]: value } })), (e: Error) => {
        assert.equal(e.message, `${name}: "${value}" is not a number of seconds (expected e.g. 30; unset means 10)`);
        return true;
      });
    }
    assert.equal(hub.requests.length, start, "nothing asked");
    // as huggingface_hub reads them, empty and 0 mean the default
    const r = await downloadModel("acme/tiny-GGUF:Q4_K_S", opts(tmp(), { env: { HF_HUB_DOWNLOAD_TIMEOUT: "0", HF_HUB_ETAG_TIMEOUT: "" } }));
    assert.deepEqual(r.files, ["tiny-Q4_K_S.gguf"]);
  });

  test("a hub that never answers a metadata request is retried after HF_HUB_ETAG_TIMEOUT", { timeout: 20_000 }, async () => {
    hub.hang = 1;
    try {
      const r = await downloadModel("acme/tiny-GGUF:Q4_K_S", opts(tmp(), { env: { HF_HUB_ETAG_TIMEOUT: "1" } }));
      assert.deepEqual(r.files, ["tiny-Q4_K_S.gguf"]);
    } finally {
      hub.hang = 0;
    }
  });

  test("a hub that never answers fails with a message naming the timeout", { timeout: 20_000 }, async () => {
    hub.hang = 3;
    try {
      await assert.rejects(downloadModel("acme/tiny-GGUF:Q4_K_S", opts(tmp(), { retries: 1, timeoutMs: 200 })), (e: HubError) => {
        assert.equal(e.code, "network");
        assert.match(e.message, /GET .*\/api\/models\/acme\/tiny-GGUF\/revision\/main: no response in 0\.2 s.*after 2 attempts/);
        return true;
      });
    } finally {
      hub.hang = 0;
    }
  });
});

describe("file selection", () => {
  test(":QUANT picks the matching GGUF, a split set whole, never a neighbour quant or mmproj", async () => {
    const cache = tmp();
    const start = hub.requests.length;
    const r = await downloadModel("acme/tiny-GGUF:Q4_K_M", opts(cache));
    assert.deepEqual(r.files, ["tiny-Q4_K_M-00001-of-00002.gguf", "tiny-Q4_K_M-00002-of-00002.gguf"]);
    assert.equal(r.path, join(r.snapshotDir, "tiny-Q4_K_M-00001-of-00002.gguf"));
    for (const p of r.files) assert.deepEqual(readFileSync(join(r.snapshotDir, p)), file(ggufFiles, p).content);
    const heads = hub.requests.slice(start).filter((q) => q.method === "HEAD").map((q) => q.url.split("/").pop());
    assert.deepEqual(heads.sort(), r.files);
    // the default for a repo with several GGUFs is Q4_K_M (llama.cpp's -hf default)
    assert.deepEqual((await downloadModel("acme/tiny-GGUF", opts(tmp()))).files, r.files);
    assert.deepEqual((await downloadModel("acme/tiny-GGUF:Q4_K_S", opts(tmp()))).files, ["tiny-Q4_K_S.gguf"]);
    assert.deepEqual((await downloadModel("acme/tiny-GGUF:tiny-Q8_0.gguf", opts(tmp()))).files, ["tiny-Q8_0.gguf"]);
  });

  test("a repo without GGUF gets config, tokenizer and one weight format; --include/--exclude override", async () => {
    const r = await downloadModel("acme/tiny", opts(tmp()));
    assert.deepEqual([...r.files].sort(), ["config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"]);
    const inc = await downloadModel("acme/tiny", opts(tmp(), { include: ["*.json"], exclude: ["tokenizer*", "nested/"] }));
    assert.deepEqual([...inc.files].sort(), ["config.json"]);
    const onnx = await downloadModel("acme/tiny", opts(tmp(), { include: ["onnx/*"] }));
    assert.deepEqual(onnx.files, ["onnx/model.onnx"]);
    await assert.rejects(downloadModel("acme/tiny", opts(tmp(), { include: ["*.xyz"] })), { code: "no-match" });
  });

  // huggingface_hub's filter_repo_objects turns every backslash of a pattern (and of a path) into '/'
  // before fnmatch, on every system: a pattern written as Windows writes paths selects the repo's files
  test("a Windows-style --include / --exclude (backslashes) selects as huggingface_hub's filter_repo_objects: as with /", async () => {
    const cache = tmp();
    const inc = await downloadModel("acme/tiny", opts(cache, { include: ["onnx\\*", "nested\\deeper\\"] }));
    assert.deepEqual([...inc.files].sort(), ["nested/deeper/notes.json", "onnx/model.onnx"]);
    // offline, a file named with a backslash is the cached onnx/model.onnx, not a file the cache lacks
    const offline = await downloadModel("acme/tiny", opts(cache, { include: ["onnx\\model.onnx"], offline: true }));
    assert.deepEqual(offline.files, ["onnx/model.onnx"]);
    const exc = await downloadModel("acme/tiny", opts(tmp(), { include: ["*.json"], exclude: ["nested\\", "tokenizer*"] }));
    assert.deepEqual([...exc.files].sort(), ["config.json"]);
  });

  test("a wider --include after a narrower one fetches the files it adds, on a branch and on a commit id", async () => {
    // the hub's listing is the judge: every file of the repo matching the globs
    const matching = (glob: RegExp) => hfFiles.map((f) => f.path).filter((p) => glob.test(p)).sort();
    for (const revision of ["main", COMMIT]) {
      const cache = tmp();
      await downloadModel("acme/tiny", opts(cache, { revision, include: ["config.json"] }));
      const r = await downloadModel("acme/tiny", opts(cache, { revision, include: ["*.json"] }));
      assert.deepEqual([...r.files].sort(), matching(/\.json$/), revision);
      for (const f of r.files) assert.deepEqual(readFileSync(join(r.snapshotDir, f)), file(hfFiles, f).content, `${f} at ${revision}`);
      // and once all of them are cached, the same include transfers nothing
      const before = hub.requests.length;
      const again = await downloadModel("acme/tiny", opts(cache, { revision, include: ["*.json"] }));
      assert.deepEqual([...again.files].sort(), matching(/\.json$/));
      assert.deepEqual(hub.requests.slice(before).filter((q) => !q.url.startsWith("/api/")), [], `only the listing asked at ${revision}`);
    }
  });
});

describe("safety", () => {
  // snapshot_download lists the repo even for a commit id and fetches what the snapshot lacks
  // (hf_hub_download with a commit serves a cached file with no request): a snapshot an earlier
  // --include left without its tokenizer looks complete (config + weights) but is not
  test("a commit id's snapshot cached without the tokenizer (an earlier --include) is listed and completed; offline it serves what is cached", async () => {
    const cache = tmp();
    const narrow = await downloadModel(`acme/tiny@${COMMIT}`, opts(cache, { include: ["config.json", "*.safetensors"] }));
    assert.deepEqual([...narrow.files].sort(), ["config.json", "model.safetensors"]);
    const offline = await downloadModel(`acme/tiny@${COMMIT}`, opts(cache, { offline: true }));
    assert.deepEqual([...offline.files].sort(), ["config.json", "model.safetensors"], "offline, as snapshot_download, the cached snapshot serves");
    // offline, an include naming a file the snapshot lacks is one error naming it (hf_hub_download raises), a glob serves what matches
    const named = { offline: true, include: ["config.json", "tokenizer.json"] };
    await assert.rejects(downloadModel(`acme/tiny@${COMMIT}`, opts(cache, named)), (e: HubError) => e.code === "offline-miss" && e.message.startsWith(`acme/tiny@${COMMIT}: tokenizer.json is not in the cache (`));
    assert.deepEqual((await downloadModel(`acme/tiny@${COMMIT}`, opts(cache, { offline: true, include: ["*.json"] }))).files, ["config.json"]);
    const before = hub.requests.length;
    const r = await downloadModel(`acme/tiny@${COMMIT}`, opts(cache));
    assert.deepEqual([...r.files].sort(), ["config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"]);
    for (const f of r.files) assert.deepEqual(readFileSync(join(r.snapshotDir, f)), file(hfFiles, f).content, f);
    const fetched = hub.requests.slice(before).map((q) => q.url).filter((u) => !u.startsWith("/api/"));
    assert.ok(fetched.every((u) => /tokenizer/.test(u)), `only the tokenizer files are fetched: ${fetched.join(", ")}`);
  });

  // snapshot_download offline returns the cached snapshot "but we can't check if all the files
  // are actually there"; what the snapshot itself tells is checked: a glob it holds nothing for,
  // the other parts of a split set, the shards a weight index names
  test("offline --include globs over a partial snapshot: a missing shard or split part, or a glob matching nothing cached, is an error naming it", async () => {
    const cache = tmp();
    await downloadModel("acme/sharded", opts(cache, { include: ["config.json", "*.index.json", "model-00001-of-00002.safetensors"] }));
    const offline = (include: string[], exclude: string[] = []) => downloadModel("acme/sharded", opts(cache, { offline: true, include, exclude }));
    const missing = (what: RegExp) => (e: HubError) => e.code === "offline-miss" && what.test(e.message);
    await assert.rejects(offline(["*.safetensors", "*.json"]), missing(/^acme\/sharded@main: model-00002-of-00002\.safetensors is not in the cache \(.*--include 'model-00002-of-00002\.safetensors'$/));
    await assert.rejects(offline(["model-0000*"]), missing(/: model-00002-of-00002\.safetensors is not in the cache/), "the split name alone tells the set has 2 parts");
    await assert.rejects(offline(["config.json", "*.onnx"]), missing(/^acme\/sharded@main: --include '\*\.onnx' matches no file of the cached snapshot \(/));
    // what the globs do not ask for is not required: one shard by name, or the others excluded
    assert.deepEqual((await offline(["model-00001-of-00002.safetensors"])).files, ["model-00001-of-00002.safetensors"]);
    assert.deepEqual([...(await offline(["*"], ["model-00002-*"])).files].sort(), ["config.json", "model-00001-of-00002.safetensors", "model.safetensors.index.json"]);
    // a split GGUF's other part, from its name alone
    const gguf = tmp();
    await downloadModel("acme/tiny-GGUF", opts(gguf, { include: ["tiny-Q4_K_M-00001-of-00002.gguf"] }));
    await assert.rejects(downloadModel("acme/tiny-GGUF", opts(gguf, { offline: true, include: ["*Q4_K_M*"] })), missing(/: tiny-Q4_K_M-00002-of-00002\.gguf is not in the cache/));
  });

  test("references that would escape the cache are refused", () => {
    for (const ref of ["../x", "/etc/passwd", "a\\..\\b", "acme/..", "acme/x@../../", "acme/x@..", "acme/x@/abs", "acme/x:../../evil.gguf", "acme/x@a\\b"]) {
      assert.throws(() => parseHubReference(ref), (e: HubError) => e.code === "bad-reference", ref);
    }
    for (const local of ["models/x.gguf", "./a/b", "a/b/c", "x.gguf"]) assert.equal(looksLikeHubReference(local), false, local);
    for (const hubRef of ["a/b", "a/b@v1", "a/b:Q8_0", "modelscope:a/b", "a/b:x.gguf"]) assert.equal(looksLikeHubReference(hubRef), true, hubRef);
    assert.deepEqual(parseHubReference("acme/x@refs/pr/1:Q4_K_M"), { source: "hf", repo: "acme/x", revision: "refs/pr/1", selector: "Q4_K_M" });
    assert.deepEqual(parseHubReference("modelscope:qwen/Qwen2-0.5B"), { source: "modelscope", repo: "qwen/Qwen2-0.5B", revision: undefined, selector: undefined });
  });

  test("a revision of ../../ is refused before any request or write", async () => {
    const cache = tmp();
    const before = hub.requests.length;
    await assert.rejects(downloadModel("acme/tiny", opts(cache, { revision: "../../" })), { code: "bad-reference" });
    assert.equal(hub.requests.length, before);
    assert.deepEqual(tree(cache), []);
  });

  test("traversal names in the hub's file list are refused before any file is written", async () => {
    for (const evil of ["../x.json", "/etc/passwd", "a\\..\\b.json", "ok/../../x.json"]) {
      hub.extraSiblings.set("acme/tiny", [evil]);
      const cache = tmp();
      try {
        await assert.rejects(downloadModel("acme/tiny", opts(cache, { include: ["*"] })), (e: HubError) => e.code === "bad-reference" && e.message.includes(evil), evil);
      } finally {
        hub.extraSiblings.delete("acme/tiny");
      }
      assert.deepEqual(tree(cache), [], evil);
    }
  });
});

test("a cached snapshot file linking outside the repo folder is not served", async () => {
  const cache = tmp();
  const outside = join(cache, "outside.gguf");
  writeFileSync(outside, "not a blob");
  const repoDir = join(cache, "models--acme--evil-GGUF");
  mkdirSync(join(repoDir, "snapshots", COMMIT), { recursive: true });
  mkdirSync(join(repoDir, "refs"));
  writeFileSync(join(repoDir, "refs", "main"), COMMIT);
  symlinkSync("../../../outside.gguf", join(repoDir, "snapshots", COMMIT, "evil-Q8_0.gguf"));
  await assert.rejects(downloadModel("acme/evil-GGUF:Q8_0", opts(cache, { offline: true })), { code: "offline-miss" });
});

describe("ModelScope", () => {
  test("modelscope:org/name lists with the v1 API, verifies sha256 and caches in the same layout", async () => {
    const cache = tmp();
    const start = hub.requests.length;
    const r = await downloadModel("modelscope:acme/ms-model", { cacheDir: cache, env: { MODELSCOPE_ENDPOINT: hub.hubUrl }, retryDelayMs: 1 });
    assert.equal(r.source, "modelscope");
    assert.equal(r.revision, "master");
    assert.deepEqual([...r.files].sort(), ["config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"]);
    for (const p of r.files) {
      const f = file(hfFiles, p);
      const link = join(r.snapshotDir, p);
      assert.equal(readlinkSync(link), `../../blobs/${sha256(f.content)}`);
      assert.deepEqual(readFileSync(link), f.content);
    }
    const urls = hub.requests.slice(start).map((q) => q.url);
    assert.ok(urls[0]!.startsWith("/api/v1/models/acme/ms-model/repo/files?Revision=master&Recursive=true"), urls[0]);
    assert.ok(urls.slice(1).every((u) => u.startsWith("/api/v1/models/acme/ms-model/repo?Revision=master&FilePath=")), urls.join("\n"));
    // the source option does the same as the prefix; and the second time nothing is requested
    const n = hub.requests.length;
    const again = await downloadModel("acme/ms-model", { source: "modelscope", cacheDir: cache, env: { MODELSCOPE_ENDPOINT: hub.hubUrl } });
    assert.equal(again.fromCache, true);
    assert.equal(hub.requests.length, n);
    await assert.rejects(downloadModel("modelscope:acme/missing", { cacheDir: tmp(), env: { MODELSCOPE_ENDPOINT: hub.hubUrl } }), (e: HubError) => e.code === "repo-not-found" && /modelscope:acme\/missing@master not found/.test(e.message));
  });
});
