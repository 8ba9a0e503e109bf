import assert from "node:assert/strict";
import { spawn, spawnSync, type ChildProcess, type ChildProcessWithoutNullStreams } from "node:child_process";
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, realpathSync, renameSync, rmSync, statSync, symlinkSync, utimesSync, writeFileSync } from "node:fs";
import { hostname, tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { pathToFileURL } from "node:url";
import { after, before, test } from "node:test";
import { listCachedRepos, removeCachedRepo, unreferenced } from "../src/hub/cache-admin.js";
import { downloadModel, HubError, progressReporter, type DownloadOptions, type DownloadResult } from "../src/hub/index.js";
import { withFileLock } from "../src/hub/lock.js";
import { blobName, FakeHub, randomBytes, sha256, type FakeFile } from "./helpers/hub-fake.js";
import { COMMANDS } from "../src/cli/commands.js";
import { DEFAULT_MODELS } from "../src/pipelines/index.js";
import { runTsllm } from "./helpers/child.js";
import { PROJECT_ROOT } from "./helpers/shared.js";
import { documentedKeys } from "./helpers/documented-json.js";

const C1 = "1111111111111111111111111111111111111111";
const C2 = "2222222222222222222222222222222222222222";
const C3 = "3333333333333333333333333333333333333333";
const shared: FakeFile = { path: "model-Q8_0.gguf", content: randomBytes(40_000, 1) };
const readme1: FakeFile = { path: "README.md", content: Buffer.from("v1\n") };
const readme2: FakeFile = { path: "README.md", content: Buffer.from("version two\n") };
const other: FakeFile = { path: "model-Q8_0.gguf", content: randomBytes(7_000, 2) };

let hub: FakeHub;
const dir = mkdtempSync(join(tmpdir(), "tsllm-hub-admin-"));
after(async () => {
  await hub.close();
  rmSync(dir, { recursive: true, force: true });
});
before(async () => {
  hub = await new FakeHub().start();
});

const opts = (cacheDir: string): DownloadOptions => ({ cacheDir, endpoint: hub.hubUrl, env: {}, retryDelayMs: 1, refresh: true, include: ["*"] });

/**
 * Polls `check` until it holds. Fails naming `what` as soon as `work` (the download process or
 * call awaited) has ended without it, or after two minutes: never a wait that cannot end.
 */
async function until(check: () => boolean, what: string | (() => string), work: ChildProcess | Promise<unknown>): Promise<void> {
  let ended: string | undefined;
  if (work instanceof Promise) work.then(() => (ended = "it finished"), (e: Error) => (ended = `it failed: ${e.message}`));
  const over = () => ended ?? (work instanceof Promise || (work.exitCode === null && work.signalCode === null) ? undefined : `it exited (${work.exitCode ?? work.signalCode})`);
  const deadline = Date.now() + 120_000;
  while (!check()) {
    const why = over();
    const said = typeof what === "string" ? what : what();
    if (why !== undefined) assert.fail(`${said}: ${why} first`);
    if (Date.now() > deadline) assert.fail(`${said}: not within two minutes`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/**
 * A cache as downloads leave it: acme/a at C1 (README v1 + the GGUF), then main moved to C2
 * (README v2 + the same GGUF, so one shared blob) and a tag v1 on C1; acme/b at C3.
 */
async function fillCache(cache: string): Promise<void> {
  hub.add({ repo: "acme/a", commit: C1, refs: ["main", "v1"], files: [readme1, shared] });
  await downloadModel("acme/a", opts(cache));
  await downloadModel("acme/a@v1", opts(cache));
  hub.add({ repo: "acme/a", commit: C2, refs: ["main"], files: [readme2, shared] });
  await downloadModel("acme/a", opts(cache));
  hub.add({ repo: "acme/b", commit: C3, files: [other] });
  await downloadModel("acme/b", opts(cache));
}

test("listCachedRepos: revisions, refs and size on disk with shared blobs counted once", async () => {
  assert.deepEqual(listCachedRepos(join(dir, "missing")), []);
  const cache = join(dir, "list");
  await fillCache(cache);
  mkdirSync(join(cache, "datasets--acme--data"), { recursive: true }); // not a model: not listed
  const repos = listCachedRepos(cache);
  assert.deepEqual(repos.map((r) => r.repo), ["acme/a", "acme/b"]);
  const [a, b] = repos as [typeof repos[0], typeof repos[0]];
  assert.equal(a.dir, join(cache, "models--acme--a"));
  assert.deepEqual(a.refs, { main: C2, v1: C1 });
  assert.deepEqual(a.revisions.map((r) => [r.commit, r.refs, r.files]), [
    [C1, ["v1"], ["README.md", "model-Q8_0.gguf"]],
    [C2, ["main"], ["README.md", "model-Q8_0.gguf"]],
  ]);
  assert.equal(a.revisions[0]!.sizeOnDisk, 40_000 + 3);
  assert.equal(a.revisions[1]!.sizeOnDisk, 40_000 + 12);
  assert.equal(a.sizeOnDisk, 40_000 + 3 + 12, "the GGUF blob both snapshots share counts once");
  assert.equal(b.sizeOnDisk, 7_000);
  assert.equal(b.unreferencedBlobs, 0);
  writeFileSync(join(b.dir, "blobs", "deadbeef.incomplete"), Buffer.alloc(10));
  const b2 = listCachedRepos(cache)[1]!;
  assert.equal(b2.sizeOnDisk, 7_000);
  assert.deepEqual([b2.unreferencedBlobs, b2.unreferencedBytes], [1, 10]);
});

test("removeCachedRepo: one revision keeps shared blobs; the last one or the whole repo removes the folder", async () => {
  const cache = join(dir, "rm");
  await fillCache(cache);
  const blobs = join(cache, "models--acme--a", "blobs");
  // huggingface_hub's markers of files a commit lacks (empty files under .no_exist/<commit>/)
  const noExist = join(cache, "models--acme--a", ".no_exist");
  for (const c of [C1, C2]) {
    mkdirSync(join(noExist, c, "nested"), { recursive: true });
    writeFileSync(join(noExist, c, "nested", "tokenizer.json"), "");
  }
  const r1 = await removeCachedRepo(cache, "acme/a", "v1");
  assert.equal(r1.commit, C1);
  assert.deepEqual(readdirSync(noExist), [C2], "the removed commit's .no_exist markers go with it; another commit's stay");
  assert.ok(r1.removed.includes(join(noExist, C1)));
  assert.equal(r1.freedBytes, 3, "only README v1's blob was C1's alone");
  assert.deepEqual(readdirSync(blobs).sort(), [blobName(readme2), blobName(shared)].sort());
  assert.ok(!existsSync(join(cache, "models--acme--a", "snapshots", C1)));
  assert.ok(!existsSync(join(cache, "models--acme--a", "refs", "v1")));
  const a = listCachedRepos(cache)[0]!;
  assert.deepEqual([a.revisions.length, a.refs], [1, { main: C2 }]);
  assert.equal(a.sizeOnDisk, 40_012);

  await assert.rejects(removeCachedRepo(cache, "acme/a@v9"), (e: unknown) => e instanceof HubError && e.code === "revision-not-found" && /acme\/a@v9 is not in the cache/.test(e.message));
  const last = await removeCachedRepo(cache, "acme/a@main");
  assert.equal(last.freedBytes, 40_012);
  assert.ok(!existsSync(join(cache, "models--acme--a")), "removing the last snapshot removes the repo");

  const whole = await removeCachedRepo(cache, "acme/b");
  assert.equal(whole.freedBytes, 7_000);
  assert.ok(!existsSync(join(cache, "models--acme--b")));
  assert.ok(!existsSync(join(cache, ".locks", "models--acme--b")));
  await assert.rejects(removeCachedRepo(cache, "acme/b"), (e: unknown) => e instanceof HubError && e.code === "repo-not-found" && /acme\/b is not in the cache .* \(cached: none\)/.test(e.message));
});

test("removeCachedRepo refuses names and folders that would escape the cache", async () => {
  const cache = join(dir, "escape");
  mkdirSync(cache, { recursive: true });
  const outside = join(dir, "precious");
  mkdirSync(join(outside, "snapshots", C1), { recursive: true });
  writeFileSync(join(outside, "keep.txt"), "x");
  symlinkSync(outside, join(cache, "models--acme--linked"));
  for (const bad of ["../x", "/etc/passwd", "acme/../../x", "a\\..\\b", "acme/a:Q8_0"]) {
    await assert.rejects(removeCachedRepo(cache, bad), (e: unknown) => e instanceof HubError && e.code === "bad-reference", bad);
  }
  await assert.rejects(removeCachedRepo(cache, "acme/a", "../../"), (e: unknown) => e instanceof HubError && e.code === "bad-reference");
  await assert.rejects(removeCachedRepo(cache, "acme/linked"), /is a symlink .*refusing to remove it/);
  assert.ok(existsSync(join(outside, "keep.txt")));
  assert.deepEqual(listCachedRepos(cache), [], "a symlinked repo folder is not listed");
});

test("a legacy single-name repo Python cached (models--gpt2) is listed and can be removed", async () => {
  // the layout huggingface_hub writes for hf_hub_download("gpt2", "config.json")
  const cache = join(dir, "legacy");
  const repoDir = join(cache, "models--gpt2");
  mkdirSync(join(repoDir, "blobs"), { recursive: true });
  mkdirSync(join(repoDir, "snapshots", C1), { recursive: true });
  mkdirSync(join(repoDir, "refs"), { recursive: true });
  writeFileSync(join(repoDir, "blobs", "10c66461e4c109db5a2196bff4bb59be30396ed8"), Buffer.alloc(665));
  symlinkSync("../../blobs/10c66461e4c109db5a2196bff4bb59be30396ed8", join(repoDir, "snapshots", C1, "config.json"));
  writeFileSync(join(repoDir, "refs", "main"), C1);
  await fillCache(cache);
  const repos = listCachedRepos(cache);
  assert.deepEqual(repos.map((r) => r.repo), ["acme/a", "acme/b", "gpt2"]);
  const gpt2 = repos[2]!;
  assert.deepEqual([gpt2.dir, gpt2.sizeOnDisk, gpt2.refs], [repoDir, 665, { main: C1 }]);
  assert.deepEqual(gpt2.revisions.map((r) => r.files), [["config.json"]]);
  await assert.rejects(removeCachedRepo(cache, "gpt2@v9"), (e: unknown) => e instanceof HubError && e.code === "revision-not-found");
  for (const bad of ["..", "gpt2:Q8_0", "gpt2@../x"]) await assert.rejects(removeCachedRepo(cache, bad), (e: unknown) => e instanceof HubError && e.code === "bad-reference", bad);
  const r = await removeCachedRepo(cache, "gpt2");
  assert.deepEqual([r.repo, r.freedBytes], ["gpt2", 665]);
  assert.ok(!existsSync(repoDir));
  assert.deepEqual(listCachedRepos(cache).map((x) => x.repo), ["acme/a", "acme/b"]);
});

const tsllm = runTsllm;

test("tsllm ls / rm on HF_HUB_CACHE", async () => {
  const cache = join(dir, "cli");
  await fillCache(cache);
  const env: NodeJS.ProcessEnv = { ...process.env, HF_HUB_CACHE: cache };
  const json = await tsllm(["ls", "--json"], env);
  assert.equal(json.code, 0, json.stderr);
  const listed = JSON.parse(json.stdout) as { repo: string; snapshots: number; sizeOnDisk: number; refs: Record<string, string> }[];
  assert.deepEqual(listed.map((r) => [r.repo, r.snapshots, r.sizeOnDisk, r.refs]), [["acme/a", 2, 40_015, { main: C2, v1: C1 }], ["acme/b", 1, 7_000, { main: C3 }]]);
  for (const r of listed) assert.deepEqual(Object.keys(r).sort(), documentedKeys(COMMANDS.ls!.help, "--json").sort(), "the keys --help documents for --json");
  const table = await tsllm(["ls"], env);
  assert.equal(table.code, 0, table.stderr);
  assert.match(table.stdout, /^REPO +REVISIONS +SNAPSHOTS +SIZE\n/);
  assert.match(table.stdout, /\nacme\/a +v1 \(11111111\) main \(22222222\) +2 +40\.0 kB\n/);
  assert.match(table.stdout, /\n2 model\(s\), 47\.0 kB in /);
  const rm = await tsllm(["rm", "acme/b"], env);
  assert.equal(rm.code, 0, rm.stderr);
  assert.equal(rm.stdout, "removed acme/b (7.0 kB freed)\n");
  const again = await tsllm(["rm", "acme/b"], env);
  assert.equal(again.code, 1);
  assert.match(again.stderr, /^tsllm: error: acme\/b is not in the cache .*\(cached: acme\/a\)\n$/);
  const usage = await tsllm(["rm"], env);
  assert.equal(usage.code, 2);
  // a --cache that is not there is said (huggingface_hub's scan_cache_dir raises CacheNotFound), not listed as empty
  const typo = join(dir, "no-such-cache");
  for (const args of [["ls", "--cache", typo], ["rm", "acme/a", "--cache", typo]]) {
    const r = await tsllm(args, env);
    assert.equal(r.code, 1, r.stdout);
    assert.equal(r.stderr, `tsllm: error: --cache ${typo}: no such folder (the cache root: HF_HUB_CACHE's folder, e.g. ~/.cache/huggingface/hub)\n`);
  }
});

test("tsllm download --cache DIR writes into DIR (a new folder), not HF_HUB_CACHE, and ls / rm --cache DIR find it there", async () => {
  hub.add({ repo: "acme/elsewhere", commit: C1, files: [shared] });
  const cache = join(dir, "download-cache", "new"), envCache = join(dir, "download-env-cache");
  const env: NodeJS.ProcessEnv = { ...process.env, HF_HUB_CACHE: envCache, HF_ENDPOINT: hub.hubUrl };
  const r = await tsllm(["download", "acme/elsewhere:Q8_0", "--cache", cache, "--quiet"], env);
  assert.equal(r.code, 0, r.stderr);
  assert.equal(r.stdout, `${join(cache, "models--acme--elsewhere", "snapshots", C1)}\n`);
  assert.equal(readFileSync(join(cache, "models--acme--elsewhere", "snapshots", C1, "model-Q8_0.gguf")).length, 40_000);
  assert.ok(!existsSync(envCache), "HF_HUB_CACHE is left alone");
  const ls = await tsllm(["ls", "--cache", cache, "--json"], env);
  assert.deepEqual((JSON.parse(ls.stdout) as { repo: string }[]).map((x) => x.repo), ["acme/elsewhere"]);
  const rm = await tsllm(["rm", "acme/elsewhere", "--cache", cache], env);
  assert.equal(rm.stdout, "removed acme/elsewhere (40.0 kB freed)\n");
  assert.deepEqual(await tsllm(["download", "acme/elsewhere", "--cache", ""], env), { code: 2, stdout: "", stderr: "tsllm: error: --cache is empty; give the cache folder or leave the option out\n" });
});

test("tsllm download with the hub unreachable serves the cached snapshot saying so in one line, and fails naming the files asked for that the snapshot lacks", async () => {
  hub.add({ repo: "acme/away", commit: C1, files: [readme1, shared] });
  const cache = join(dir, "away");
  await downloadModel("acme/away", { ...opts(cache), include: [readme1.path] });
  const dead = new FakeHub();
  await dead.start();
  const url = dead.hubUrl;
  await dead.close();
  // asked once, no retries: a cached snapshot is there to serve (as snapshot_download asks repo_info once)
  const env: NodeJS.ProcessEnv = { ...process.env, HF_HUB_CACHE: cache, HF_ENDPOINT: url };
  const snapshot = join(cache, "models--acme--away", "snapshots", C1);
  const literal = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
  const served = await tsllm(["download", "acme/away", "--include", readme1.path, "--quiet"], env);
  assert.equal(served.code, 0, served.stderr);
  assert.equal(served.stdout, `${snapshot}\n`);
  assert.match(served.stderr, new RegExp(`^tsllm download: the hub could not answer \\(GET ${literal(url)}/api/models/acme/away/revision/main failed: [^\\n]*ECONNREFUSED[^\\n]*\\); the cached snapshot ${literal(snapshot)} is used as it is\\n$`));
  const lacking = await tsllm(["download", "acme/away", "--include", readme1.path, "--include", shared.path, "--include", "*.json", "--quiet"], env);
  assert.equal(lacking.code, 1, lacking.stdout);
  assert.equal(lacking.stdout, "");
  assert.match(lacking.stderr, new RegExp(`^tsllm: error: acme/away@main: the hub could not answer \\([^\\n]*ECONNREFUSED[^\\n]*\\) and the cached snapshot ${literal(snapshot)} lacks ${literal(shared.path)}, a file matching --include '\\*\\.json'; run again once the hub can be reached\\n$`));
});

// root may delete anything, so as root the CLI runs as nobody (uid 65534) against a cache root owns
const asRoot = process.getuid?.() === 0;
test("tsllm rm on a cache it may not write is one line naming the cache and the path, not a bare EACCES", { skip: process.getuid === undefined ? "no POSIX users here" : false }, async (t) => {
  // nobody must be able to run the CLI from this checkout: a clone inside a private folder (mkdtemp's 0700) it cannot read
  if (asRoot && spawnSync(process.execPath, ["--import", "tsx", "-e", ""], { cwd: PROJECT_ROOT, uid: 65534, gid: 65534 }).status !== 0) {
    t.skip(`user nobody cannot run the CLI from ${PROJECT_ROOT} (a folder above it is private to root), so this root session cannot show a permission error`);
    return;
  }
  const cache = join(dir, "not-mine");
  hub.add({ repo: "acme/kept", commit: C1, files: [readme1] });
  await downloadModel("acme/kept", opts(cache));
  const repoDir = join(cache, "models--acme--kept");
  // other users may read the cache, not change it (mkdtemp made its parent 0700)
  for (const p of [dir, cache]) chmodSync(p, 0o755);
  // every folder of the repo read-only, so no entry can be removed (nobody, who runs it as root, owns none of them)
  const folders = (d: string): string[] => [d, ...readdirSync(d, { withFileTypes: true }).filter((e) => e.isDirectory()).flatMap((e) => folders(join(d, e.name)))];
  const repoFolders = folders(repoDir);
  if (!asRoot) for (const f of repoFolders) chmodSync(f, 0o555);
  const literal = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
  try {
    const asNobody = (args: readonly string[]) => new Promise<{ code: number | null; stderr: string }>((done) => {
      const child = spawn(process.execPath, ["--import", "tsx", ...args], {
        cwd: PROJECT_ROOT, env: { ...process.env, HF_HUB_CACHE: cache, HOME: tmpdir() }, ...(asRoot ? { uid: 65534, gid: 65534 } : {}),
      });
      let stderr = "";
      child.stderr.on("data", (d) => (stderr += d));
      child.on("close", (code) => done({ code, stderr }));
    });
    // the revision given after @ and by --revision too is named once (it read acme/kept@main@main)
    const said = (what: string) => new RegExp(`cannot remove ${literal(what)} from the cache ${literal(cache)}: permission denied \\(EACCES\\) at ${literal(repoDir)}.*; run as the cache's owner or make it writable \\(tsllm ls shows what is left\\)\\n$`);
    for (const [args, what] of [[["acme/kept"], "acme/kept"], [["acme/kept@main", "--revision", "main"], "acme/kept@main"], [["acme/kept", "--revision", "main"], "acme/kept@main"]] as const) {
      const r = await asNobody([join(PROJECT_ROOT, "src/cli/main.ts"), "rm", ...args]);
      assert.equal(r.code, 1, r.stderr);
      assert.match(r.stderr, new RegExp(`^tsllm: error: ${said(what).source}`));
    }
    // the library given the revision after @ and as its argument too names it once (it read acme/kept@main@main)
    const call = `import { removeCachedRepo } from ${JSON.stringify(pathToFileURL(join(PROJECT_ROOT, "src/hub/index.ts")).href)};
await removeCachedRepo(${JSON.stringify(cache)}, "acme/kept@main", "main").catch((e) => { process.stderr.write(e.message + "\\n"); process.exit(1); });`;
    const lib = await asNobody(["--input-type=module", "-e", call]);
    assert.equal(lib.code, 1, lib.stderr);
    assert.match(lib.stderr, new RegExp(`^${said("acme/kept@main").source}`));
  } finally {
    for (const f of repoFolders) chmodSync(f, 0o755);
    chmodSync(dir, 0o700);
  }
  assert.deepEqual(listCachedRepos(cache).map((r) => r.repo), ["acme/kept"], "nothing was removed");
});

test("tsllm ls on a damaged cache lists what it can and names each damage on stderr, as huggingface_hub's scan_cache_dir warns", async () => {
  const cache = join(dir, "damaged");
  await fillCache(cache);
  const a = join(cache, "models--acme--a"), b = join(cache, "models--acme--b");
  rmSync(join(a, "blobs", blobName(readme1))); // C1's README now a broken link
  writeFileSync(join(a, "refs", "v2"), "9".repeat(40)); // a ref to a commit never cached
  rmSync(join(b, "refs"), { recursive: true });
  writeFileSync(join(b, "refs"), "main"); // refs/ a file: its scan used to throw ENOTDIR for the whole listing
  const repos = listCachedRepos(cache);
  assert.deepEqual(repos.map((r) => [r.repo, r.revisions.map((v) => v.files)]), [["acme/a", [["model-Q8_0.gguf"], ["README.md", "model-Q8_0.gguf"]]], ["acme/b", [["model-Q8_0.gguf"]]]]);
  assert.deepEqual(repos.map((r) => r.problems), [
    [`refs/v2: names commit ${"9".repeat(40)}, which has no snapshot`, `snapshots/${C1}/README.md: its blob is missing (a broken link)`],
    ["refs: is a file, not a folder"],
  ]);
  const env: NodeJS.ProcessEnv = { ...process.env, HF_HUB_CACHE: cache };
  const table = await tsllm(["ls"], env);
  assert.equal(table.code, 0, table.stderr);
  assert.match(table.stdout, /\nacme\/a +v1 \(11111111\) main \(22222222\) +2 +40\.0 kB\nacme\/b +33333333 +1 +7\.0 kB\n/);
  assert.equal(table.stderr, [
    `warning: acme/a: ${join(a, "refs", "v2")}: names commit ${"9".repeat(40)}, which has no snapshot`,
    `warning: acme/a: ${join(a, "snapshots", C1, "README.md")}: its blob is missing (a broken link)`,
    `warning: acme/b: ${join(b, "refs")}: is a file, not a folder`,
  ].map((l) => `${l}\n`).join(""));
  const json = await tsllm(["ls", "--json"], env);
  assert.equal(json.code, 0, json.stderr);
  const listed = JSON.parse(json.stdout) as { repo: string; problems: string[] }[];
  assert.deepEqual(listed.map((r) => r.problems), repos.map((r) => r.problems));
  for (const r of listed) assert.deepEqual(Object.keys(r).sort(), documentedKeys(COMMANDS.ls!.help, "--json").sort(), "the keys --help documents for --json");
});

test("rm of one revision beside a snapshot folder it cannot read is refused, so no blob that folder uses is deleted", async () => {
  const cache = join(dir, "rm-unknown");
  await fillCache(cache);
  const a = join(cache, "models--acme--a");
  // a user's copy of C1's snapshot (relative links into blobs/, under a name that is not a commit)
  const copy = join(a, "snapshots", `${C1} (copy)`);
  mkdirSync(copy);
  symlinkSync(join("..", "..", "blobs", blobName(readme1)), join(copy, "README.md"));
  await assert.rejects(removeCachedRepo(cache, "acme/a@v1"), (e: unknown) => e instanceof HubError && e.code === "disk"
    && e.message === `cannot remove acme/a@v1 alone: the snapshot ${copy} could not be read, so which blobs it uses is unknown; repair or remove it first (tsllm ls names what is damaged), or remove the whole repo (tsllm rm acme/a)`);
  assert.ok(existsSync(join(a, "blobs", blobName(readme1))), "README v1's blob, which the copy links to, is kept");
  assert.ok(existsSync(join(a, "snapshots", C1)), "nothing was removed");
  assert.deepEqual(listCachedRepos(cache)[0]!.problems, [`snapshots/${C1} (copy): is not named by a commit`]);
});

test("rm takes a commit by the short id ls prints (a unique prefix, as git does); a prefix two commits share is refused naming both", async () => {
  const cache = join(dir, "rm-short");
  await fillCache(cache);
  const C1b = `11111111${"a".repeat(32)}`;
  hub.add({ repo: "acme/a", commit: C1b, refs: ["v1b"], files: [readme2] });
  await downloadModel("acme/a@v1b", opts(cache));
  const env: NodeJS.ProcessEnv = { ...process.env, HF_HUB_CACHE: cache };
  const table = await tsllm(["ls"], env);
  assert.match(table.stdout, /\nacme\/a +v1 \(11111111\) v1b \(11111111\) main \(22222222\) +3 /);
  const ambiguous = await tsllm(["rm", "acme/a@11111111"], env);
  assert.equal(ambiguous.code, 1);
  assert.equal(ambiguous.stderr, `tsllm: error: acme/a@11111111 names 2 cached commits (${C1}, ${C1b}); give more of the commit id\n`);
  const removed = await tsllm(["rm", "acme/a", "--revision", "111111111111"], env);
  assert.equal(removed.code, 0, removed.stderr);
  assert.equal(removed.stdout, `removed acme/a@${C1} (3 B freed)\n`);
  assert.deepEqual(listCachedRepos(cache)[0]!.revisions.map((r) => r.commit), [C1b, C2]);
});

test("rm of a repo a download is writing into is refused naming the process; once that process is gone, rm removes it", async () => {
  const cache = join(dir, "rm-busy");
  const big: FakeFile = { path: "big-Q8_0.gguf", content: randomBytes(2_000_000, 3) };
  hub.add({ repo: "acme/busy", commit: C1, files: [big] });
  hub.stallMidway.set(sha256(big.content), 1); // the download stops mid-file and waits, holding its lock
  const env: NodeJS.ProcessEnv = { ...process.env, HF_HUB_CACHE: cache, HF_ENDPOINT: hub.hubUrl, HF_HUB_DOWNLOAD_TIMEOUT: "300" };
  const download = spawn(process.execPath, ["--import", "tsx", join(PROJECT_ROOT, "src/cli/main.ts"), "download", "acme/busy:Q8_0", "--quiet"], { cwd: PROJECT_ROOT, env, stdio: "ignore" });
  const exited = new Promise((done) => download.on("close", done));
  try {
    const partial = join(cache, "models--acme--busy", "blobs", `${blobName(big)}.incomplete`);
    await until(() => (statSync(partial, { throwIfNoEntry: false })?.size ?? 0) >= 1_000_000, "the download reaching the middle of its file", download);
    const lock = join(cache, ".locks", "models--acme--busy", `${blobName(big)}.tsllm.lock`);
    const busy = await tsllm(["rm", "acme/busy"], env);
    assert.equal(busy.code, 1);
    assert.equal(busy.stderr, `tsllm: error: acme/busy is being downloaded by process ${download.pid} (it holds ${lock}); wait for it to finish or stop it, then run rm again\n`);
    assert.ok(existsSync(partial), "the download's partial file is kept");
  } finally {
    download.kill("SIGKILL");
    await exited;
  }
  const gone = await tsllm(["rm", "acme/busy"], env);
  assert.equal(gone.code, 0, gone.stderr);
  assert.ok(!existsSync(join(cache, "models--acme--busy")));
});

test("rm of a revision beside a live download proceeds unless it takes what the download writes: its snapshot (named, with the process) or the whole repo", async () => {
  const cache = join(dir, "rm-beside");
  const keep: FakeFile = { path: "keep-Q8_0.gguf", content: randomBytes(3_000, 6) };
  const big: FakeFile = { path: "beside-Q8_0.gguf", content: randomBytes(2_000_000, 7) };
  hub.add({ repo: "acme/beside", commit: C1, refs: ["old"], files: [readme1] });
  await downloadModel("acme/beside@old", opts(cache));
  hub.add({ repo: "acme/beside", commit: C3, refs: ["keep"], files: [keep] });
  await downloadModel("acme/beside@keep", opts(cache));
  const env: NodeJS.ProcessEnv = { ...process.env, HF_HUB_CACHE: cache, HF_ENDPOINT: hub.hubUrl, HF_HUB_DOWNLOAD_TIMEOUT: "300" };
  hub.add({ repo: "acme/beside", commit: C2, refs: ["main"], files: [readme2, big] });
  hub.stallMidway.set(sha256(big.content), 1); // main's download links its README, then stops mid-GGUF holding its locks
  const download = spawn(process.execPath, ["--import", "tsx", join(PROJECT_ROOT, "src/cli/main.ts"), "download", "acme/beside", "--include", "*", "--quiet"], { cwd: PROJECT_ROOT, env, stdio: "ignore" });
  const exited = new Promise((done) => download.on("close", done));
  const a = join(cache, "models--acme--beside");
  try {
    const partial = join(a, "blobs", `${blobName(big)}.incomplete`);
    await until(() => (statSync(partial, { throwIfNoEntry: false })?.size ?? 0) >= 1_000_000 && existsSync(join(a, "snapshots", C2, readme2.path)), "the download linking its README and reaching the middle of its GGUF", download);
    const locks = join(cache, ".locks", "models--acme--beside");
    const writing = await tsllm(["rm", `acme/beside@${C2}`], env);
    assert.equal(writing.code, 1);
    const snapshotLock = readdirSync(locks).filter((n) => n.startsWith(`snapshot-${C2}-`));
    assert.equal(snapshotLock.length, 1, "the download holds one lock for the snapshot it writes");
    assert.equal(writing.stderr, `tsllm: error: acme/beside@${C2} is being downloaded by process ${download.pid} (it holds ${join(locks, snapshotLock[0]!)}); wait for it to finish or stop it, then run rm again\n`);
    assert.ok(existsSync(join(a, "snapshots", C2, readme2.path)), "the snapshot it writes is kept");
    const whole = await tsllm(["rm", "acme/beside"], env);
    assert.equal(whole.code, 1);
    assert.match(whole.stderr, new RegExp(`^tsllm: error: acme/beside is being downloaded by process ${download.pid} `));
    // old's README blob is old's alone; the download holds no lock of it
    const old = await tsllm(["rm", "acme/beside@old"], env);
    assert.equal(old.code, 0, old.stderr);
    assert.ok(!existsSync(join(a, "snapshots", C1)) && !existsSync(join(a, "refs", "old")) && !existsSync(join(a, "blobs", blobName(readme1))));
    assert.ok(existsSync(partial) && existsSync(join(a, "snapshots", C2, readme2.path)), "the download's partial file and snapshot are kept");
    assert.deepEqual(readFileSync(join(a, "snapshots", C3, keep.path)), keep.content);
  } finally {
    download.kill("SIGKILL");
    await exited;
  }
  // its holder gone, the snapshot lock is no obstacle
  const gone = await tsllm(["rm", `acme/beside@${C2}`], env);
  assert.equal(gone.code, 0, gone.stderr);
  assert.ok(!existsSync(join(a, "snapshots", C2)));
});

test("ls skips a blob renamed or removed between the listing of blobs/ and its stat (a download finishing beside it), not crash with ENOENT", async () => {
  const cache = join(dir, "ls-race");
  await fillCache(cache);
  const blobs = join(cache, "models--acme--a", "blobs");
  writeFileSync(join(blobs, "f".repeat(64) + ".incomplete"), "partial");
  writeFileSync(join(blobs, "e".repeat(64)), "orphan!!");
  const listed = readdirSync(blobs, { withFileTypes: true });
  // what a download does between the two: its .incomplete file is renamed to the blob's name
  renameSync(join(blobs, "f".repeat(64) + ".incomplete"), join(blobs, "f".repeat(64)));
  const referenced = new Map(listCachedRepos(cache)[0]!.revisions.flatMap((r) => r.files.map((f) => [realpathSync(join(cache, "models--acme--a", "snapshots", r.commit, f)), 0] as const)));
  assert.deepEqual(unreferenced(blobs, listed, referenced), { count: 1, bytes: 8 }, "the orphan is counted; the renamed name is skipped");
});

test("rm of a revision whose blob a download links into a new snapshot meanwhile keeps that blob (decided again holding the blob's lock)", async () => {
  const cache = join(dir, "rm-race");
  const gguf: FakeFile = { path: "race-Q8_0.gguf", content: randomBytes(5_000, 4) };
  hub.add({ repo: "acme/race", commit: C1, refs: ["old"], files: [gguf] });
  await downloadModel("acme/race@old", opts(cache));
  hub.add({ repo: "acme/race", commit: C2, refs: ["main"], files: [readme2] });
  await downloadModel("acme/race", opts(cache));
  const a = join(cache, "models--acme--race");
  // runs up to its first await: it has scanned, and the GGUF's blob is C1's alone
  const removal = removeCachedRepo(cache, "acme/race@old");
  // then a download of C3 links the cached blob into its snapshot, as it does
  mkdirSync(join(a, "snapshots", C3));
  symlinkSync(join("..", "..", "blobs", blobName(gguf)), join(a, "snapshots", C3, gguf.path));
  const removed = await removal;
  assert.deepEqual(readFileSync(join(a, "snapshots", C3, gguf.path)), gguf.content, "C3's link is not left broken");
  assert.equal(removed.freedBytes, 0);
  assert.ok(!existsSync(join(a, "snapshots", C1)) && !existsSync(join(a, "refs", "old")), "the revision itself is removed");
});

test("a download linking an already cached blob while an rm deletes it fetches the blob again: never success with a broken link", async () => {
  const cache = join(dir, "download-race");
  const gguf: FakeFile = { path: "race2-Q8_0.gguf", content: randomBytes(6_000, 5) };
  hub.add({ repo: "acme/race2", commit: C1, refs: ["old"], files: [gguf] });
  await downloadModel("acme/race2@old", opts(cache));
  hub.add({ repo: "acme/race2", commit: C3, refs: ["main"], files: [gguf] });
  const blob = join(cache, "models--acme--race2", "blobs", blobName(gguf));
  let download: Promise<DownloadResult> | undefined;
  // the blob's lock held as an rm of @old holds it while it deletes the blob
  await withFileLock(join(cache, ".locks", "models--acme--race2", `${blobName(gguf)}.tsllm.lock`), async () => {
    const before = hub.requests.length;
    download = downloadModel("acme/race2", opts(cache));
    // the download has asked where the file is and found its blob cached: it goes on to link it
    await until(() => hub.requests.slice(before).some((r) => r.method === "HEAD"), "the download asking where its file is", download);
    await Promise.race([download, new Promise((r) => setTimeout(r, 500))]);
    rmSync(blob);
  });
  const result = await download!;
  assert.deepEqual(readFileSync(result.path), gguf.content, "the snapshot's file reads, its blob fetched again");
});

/**
 * A process that takes `paths` one after another with the real lock code (as an rm or a download
 * does), prints "held", and on a line from its stdin removes `removeOnGo` (what an rm holding them
 * deletes), lets go of them and exits.
 */
function holdLocks(paths: readonly string[], removeOnGo: readonly string[] = []): { child: ChildProcessWithoutNullStreams; held: Promise<void>; exited: Promise<unknown>; go(): void } {
  const script = `
import { rmSync } from "node:fs";
import { withFileLock } from ${JSON.stringify(pathToFileURL(join(PROJECT_ROOT, "src/hub/lock.ts")).href)};
const hold = (rest) => rest.length === 0
  ? new Promise((done) => {
    process.stdin.once("data", () => { for (const p of ${JSON.stringify(removeOnGo)}) rmSync(p, { recursive: true, force: true }); done(); });
    process.stdout.write("held\\n");
  })
  : withFileLock(rest[0], () => hold(rest.slice(1)));
await hold(${JSON.stringify(paths)});
process.exit(0);
`;
  const child = spawn(process.execPath, ["--import", "tsx", "--input-type=module", "-e", script], { cwd: PROJECT_ROOT });
  let stderr = "";
  child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
  const exited = new Promise((done) => child.on("close", done));
  const held = new Promise<void>((done, fail) => {
    child.stdout.on("data", (d: Buffer) => d.toString().includes("held") && done());
    void exited.then(() => fail(new Error(`the lock holder exited before it held its locks: ${stderr}`)));
  });
  return { child, held, exited, go: () => child.stdin.write("go\n") };
}

/** the CLI as a child process whose stderr can be read while it runs */
function spawnTsllm(args: readonly string[], env: NodeJS.ProcessEnv): { child: ChildProcess; stderr(): string; closed: Promise<{ code: number | null; stderr: string }> } {
  const child = spawn(process.execPath, ["--import", "tsx", join(PROJECT_ROOT, "src/cli/main.ts"), ...args], { cwd: PROJECT_ROOT, env, stdio: ["ignore", "ignore", "pipe"] });
  let stderr = "";
  child.stderr!.on("data", (d: Buffer) => (stderr += d.toString()));
  return { child, stderr: () => stderr, closed: new Promise((done) => child.on("close", (code) => done({ code, stderr }))) };
}


test("rm of a revision whose freed blob a live process holds the lock of is refused naming it; once that process is killed, rm removes it", async () => {
  const cache = join(dir, "rm-freed-busy");
  const gguf: FakeFile = { path: "freed-Q8_0.gguf", content: randomBytes(4_000, 8) };
  hub.add({ repo: "acme/freed", commit: C1, refs: ["old"], files: [gguf] });
  await downloadModel("acme/freed@old", opts(cache));
  hub.add({ repo: "acme/freed", commit: C2, refs: ["main"], files: [readme2] });
  await downloadModel("acme/freed", opts(cache));
  const env: NodeJS.ProcessEnv = { ...process.env, HF_HUB_CACHE: cache };
  const a = join(cache, "models--acme--freed");
  // a download holding the lock of old's GGUF blob (fetching it again, linking it into a snapshot)
  const lock = join(cache, ".locks", "models--acme--freed", `${blobName(gguf)}.tsllm.lock`);
  const holder = holdLocks([lock]);
  try {
    await holder.held;
    const busy = await tsllm(["rm", "acme/freed@old"], env);
    assert.equal(busy.code, 1);
    assert.equal(busy.stderr, `tsllm: error: acme/freed@${C1} is being downloaded by process ${holder.child.pid} (it holds ${lock}); wait for it to finish or stop it, then run rm again\n`);
    assert.deepEqual(readFileSync(join(a, "snapshots", C1, gguf.path)), gguf.content, "old and its blob are kept");
  } finally {
    holder.child.kill("SIGKILL");
    await holder.exited;
  }
  assert.ok(existsSync(lock), "a killed holder leaves its lock file");
  const gone = await tsllm(["rm", "acme/freed@old"], env);
  assert.equal(gone.code, 0, gone.stderr);
  assert.ok(!existsSync(join(a, "snapshots", C1)) && !existsSync(join(a, "blobs", blobName(gguf))));
});

test("a download killed with SIGKILL leaves its snapshot lock behind; rm of that revision and the next download of that commit clear it", async () => {
  const cache = join(dir, "dead-snapshot-lock");
  const big: FakeFile = { path: "dead-Q8_0.gguf", content: randomBytes(2_000_000, 9) };
  hub.add({ repo: "acme/dead", commit: C1, refs: ["old"], files: [readme1] });
  await downloadModel("acme/dead@old", opts(cache));
  hub.add({ repo: "acme/dead", commit: C2, refs: ["main"], files: [readme2, big] });
  const env: NodeJS.ProcessEnv = { ...process.env, HF_HUB_CACHE: cache, HF_ENDPOINT: hub.hubUrl, HF_HUB_DOWNLOAD_TIMEOUT: "300" };
  const a = join(cache, "models--acme--dead");
  const locks = join(cache, ".locks", "models--acme--dead");
  const snapshotLocks = () => readdirSync(locks).filter((n) => n.startsWith(`snapshot-${C2}-`));
  /** a CLI download of main stopped mid-GGUF (its README linked), then killed */
  const killedDownload = async () => {
    hub.stallMidway.set(sha256(big.content), 1);
    const download = spawnTsllm(["download", "acme/dead", "--include", "*", "--quiet"], env);
    try {
      const partial = join(a, "blobs", `${blobName(big)}.incomplete`);
      await until(() => (statSync(partial, { throwIfNoEntry: false })?.size ?? 0) >= 1_000_000 && existsSync(join(a, "snapshots", C2, readme2.path)), () => `the download linking its README and reaching the middle of its GGUF (${download.stderr()})`, download.child);
    } finally {
      download.child.kill("SIGKILL");
      await download.closed;
    }
    assert.equal(snapshotLocks().length, 1, "the killed download's snapshot lock is left");
  };
  await killedDownload();
  const removed = await tsllm(["rm", `acme/dead@${C2}`], env);
  assert.equal(removed.code, 0, removed.stderr);
  assert.ok(!existsSync(join(a, "snapshots", C2)) && existsSync(join(a, "snapshots", C1)));
  assert.deepEqual(snapshotLocks(), [], "rm of the revision clears its dead download's lock");

  await killedDownload();
  const again = await tsllm(["download", "acme/dead", "--include", "*", "--quiet"], env);
  assert.equal(again.code, 0, again.stderr);
  assert.deepEqual(readFileSync(join(a, "snapshots", C2, big.path)), big.content);
  assert.deepEqual(snapshotLocks(), [], "the next download of the commit clears the dead one's lock, and lets go of its own");
});

test("an rm waits for another rm of the repo (holding its blob locks) to finish, saying whom it waits for, rather than calling it a download", async () => {
  const cache = join(dir, "rm-beside-rm");
  const gguf: FakeFile = { path: "twice-Q8_0.gguf", content: randomBytes(4_000, 10) };
  hub.add({ repo: "acme/twice", commit: C1, refs: ["old"], files: [gguf] });
  await downloadModel("acme/twice@old", opts(cache));
  hub.add({ repo: "acme/twice", commit: C2, refs: ["main"], files: [readme2] });
  await downloadModel("acme/twice", opts(cache));
  const env: NodeJS.ProcessEnv = { ...process.env, HF_HUB_CACHE: cache };
  const locks = join(cache, ".locks", "models--acme--twice");
  // another `tsllm rm acme/twice@old` midway: it holds the repo's gate and the locks of the blobs it frees
  const other = holdLocks([join(locks, "snapshots.tsllm.gate"), join(locks, `${blobName(gguf)}.tsllm.lock`)]);
  let second: ReturnType<typeof spawnTsllm> | undefined;
  const line = () => `waiting for process ${other.child.pid}, which holds ${join(locks, "snapshots.tsllm.gate")}, to let go of acme/twice\n`;
  try {
    await other.held;
    second = spawnTsllm(["rm", "acme/twice@old"], env);
    // the second must not refuse (or remove) while the first holds its locks: it says it waits
    await until(() => second!.stderr().includes(line()), "the second rm saying it waits", second.child);
    assert.ok(existsSync(join(cache, "models--acme--twice", "snapshots", C1)));
    other.go();
    await other.exited;
  } finally {
    other.child.kill("SIGKILL");
  }
  const r = await second.closed;
  // said once on stderr as the wait began, as huggingface_hub logs "Still waiting to acquire lock on ..."
  assert.equal(r.stderr, line());
  assert.equal(r.code, 0);
  assert.ok(!existsSync(join(cache, "models--acme--twice", "snapshots", C1)));
});

test("a download that starts while an rm of the repo holds its gate says once whom it waits for, waits, then writes the snapshot whole", async () => {
  const cache = join(dir, "download-behind-rm");
  const gguf: FakeFile = { path: "behind-Q8_0.gguf", content: randomBytes(5_000, 11) };
  hub.add({ repo: "acme/behind", commit: C1, refs: ["main"], files: [readme1, gguf] });
  await downloadModel("acme/behind", opts(cache));
  const a = join(cache, "models--acme--behind");
  const locks = join(cache, ".locks", "models--acme--behind");
  // `tsllm rm acme/behind` midway: it has looked at the locks (none live) and deletes the repo
  // folder and its lock folder (its gate with them) before it lets go
  const rmMidway = holdLocks([join(locks, "snapshots.tsllm.gate")], [a, locks]);
  let download: Promise<DownloadResult> | undefined;
  const printed: string[] = [];
  const stderr = { isTTY: false, write: (s: string) => printed.push(s) > 0 } as unknown as NodeJS.WriteStream;
  try {
    await rmMidway.held;
    hub.add({ repo: "acme/behind", commit: C2, refs: ["main"], files: [readme2, gguf] });
    const before = hub.requests.length;
    download = downloadModel("acme/behind", { ...opts(cache), onProgress: progressReporter(stderr) });
    // it has the new commit's listing: all it does next is write C2, which must wait for the rm
    await until(() => hub.requests.slice(before).some((r) => r.method === "GET" && r.url.startsWith("/api/models/")), "the download listing the new commit", download);
    // not a silent hang: said once, as the wait began, with the rm's pid
    const line = `waiting for process ${rmMidway.child.pid}, which holds ${join(locks, "snapshots.tsllm.gate")}, to let go of acme/behind\n`;
    await until(() => printed.includes(line), "the download saying it waits for the rm", download);
    rmMidway.go();
    await rmMidway.exited;
  } finally {
    rmMidway.child.kill("SIGKILL");
  }
  const result = await download!;
  assert.equal(result.commit, C2);
  assert.equal(printed.filter((l) => l.startsWith("waiting")).length, 1, printed.join(""));
  assert.deepEqual(readFileSync(join(a, "snapshots", C2, gguf.path)), gguf.content, "written after the rm, not deleted by it");
  assert.deepEqual(readFileSync(join(a, "snapshots", C2, readme2.path)), readme2.content);
  assert.equal(readFileSync(join(a, "refs", "main"), "utf8"), C2);
});

test("a download waiting on a file's lock that another live process holds says once whom it waits for, then finishes", async () => {
  const cache = join(dir, "download-waits");
  const gguf: FakeFile = { path: "waits-Q8_0.gguf", content: randomBytes(5_000, 12) };
  hub.add({ repo: "acme/waits", commit: C1, files: [gguf] });
  const lock = join(cache, ".locks", "models--acme--waits", `${blobName(gguf)}.tsllm.lock`);
  // another download of the same file, holding its lock while it fetches it
  const other = holdLocks([lock]);
  const env: NodeJS.ProcessEnv = { ...process.env, HF_HUB_CACHE: cache, HF_ENDPOINT: hub.hubUrl };
  let download: ReturnType<typeof spawnTsllm> | undefined;
  const line = `waiting for process ${(other.child.pid ?? 0).toString()}, which holds ${lock}, to let go of acme/waits/${gguf.path}\n`;
  try {
    await other.held;
    download = spawnTsllm(["download", "acme/waits:Q8_0"], env);
    await until(() => download!.stderr().includes(line), "the download saying whom it waits for", download.child);
    other.go();
    await other.exited;
  } finally {
    other.child.kill("SIGKILL");
  }
  const { code, stderr } = await download.closed;
  assert.equal(code, 0, stderr);
  assert.equal(stderr.split(line).length, 2, `said once, as the wait began: ${stderr}`);
  assert.deepEqual(readFileSync(join(cache, "models--acme--waits", "snapshots", C1, gguf.path)), gguf.content);
});

test("locks that dead downloads left (a file's, a snapshot's, a takeover claim, one on the gate) are cleared by the next download into the repo and by rm of a revision; a live holder's lock stays", async () => {
  const cache = join(dir, "dead-locks");
  hub.add({ repo: "acme/stale", commit: C1, refs: ["old"], files: [readme1] });
  await downloadModel("acme/stale@old", opts(cache));
  const locks = join(cache, ".locks", "models--acme--stale");
  // written as a download killed with SIGKILL leaves them: its pid is gone on this host
  const dead = `${spawnSync(process.execPath, ["-e", ""]).pid} ${hostname()} 0123456789abcdef\n`;
  const deadNames = [`${"e".repeat(64)}.tsllm.lock`, `snapshot-${C3}-0123456789ab.tsllm.lock`, `${"d".repeat(64)}.tsllm.lock.takeover-0123456789abcdef`, "snapshots.tsllm.gate.takeover-0123456789abcdef"];
  const liveName = `${"f".repeat(64)}.tsllm.lock`;
  // Python's own lock (its holder unknown to us) is not ours to judge
  const python = `${"c".repeat(64)}.lock`;
  const live = holdLocks([join(locks, liveName)]);
  try {
    await live.held;
    for (const n of [...deadNames, python]) writeFileSync(join(locks, n), dead);
    hub.add({ repo: "acme/stale", commit: C2, refs: ["main"], files: [readme2] });
    await downloadModel("acme/stale", opts(cache));
    assert.deepEqual(readdirSync(locks).sort(), [python, liveName].sort(), "the next download clears the dead ones");
    for (const n of deadNames) writeFileSync(join(locks, n), dead);
    const removed = await tsllm(["rm", "acme/stale@old"], { ...process.env, HF_HUB_CACHE: cache });
    assert.equal(removed.code, 0, removed.stderr);
    assert.deepEqual(readdirSync(locks).sort(), [python, liveName].sort(), "rm of a revision clears the dead ones");
    assert.equal(readFileSync(join(locks, liveName), "utf8").split(" ")[0], String(live.child.pid), "the live holder keeps its lock");
  } finally {
    live.child.kill("SIGKILL");
    await live.exited;
  }
  assert.deepEqual(readFileSync(join(cache, "models--acme--stale", "snapshots", C2, readme2.path)), readme2.content);
});

test("Ctrl-C stops tsllm download: it lets go of its locks, keeps the part fetched, says so, exits 130, and the next run resumes with a Range request", async () => {
  const cache = join(dir, "interrupted");
  const big: FakeFile = { path: "int-Q8_0.gguf", content: randomBytes(2_000_000, 13) };
  hub.add({ repo: "acme/int", commit: C1, files: [big] });
  hub.stallMidway.set(sha256(big.content), 1); // it stops mid-file, holding its locks, until interrupted
  const env: NodeJS.ProcessEnv = { ...process.env, HF_HUB_CACHE: cache, HF_ENDPOINT: hub.hubUrl, HF_HUB_DOWNLOAD_TIMEOUT: "300" };
  const partial = join(cache, "models--acme--int", "blobs", `${blobName(big)}.incomplete`);
  const download = spawnTsllm(["download", "acme/int:Q8_0"], env);
  try {
    await until(() => (statSync(partial, { throwIfNoEntry: false })?.size ?? 0) >= 1_000_000, "the download reaching the middle of its file", download.child);
  } finally {
    download.child.kill("SIGINT");
  }
  const { code, stderr } = await download.closed;
  assert.equal(code, 130, stderr);
  assert.match(stderr, /\ntsllm download: interrupted; what was downloaded is kept in the cache, and the next run resumes from there\n$/);
  const locks = join(cache, ".locks", "models--acme--int");
  assert.deepEqual(existsSync(locks) ? readdirSync(locks) : [], [], "no lock is left behind");
  assert.equal(statSync(partial).size, 1_000_000, "the part fetched is kept");
  const before = hub.requests.length;
  const again = await tsllm(["download", "acme/int:Q8_0", "--quiet"], env);
  assert.equal(again.code, 0, again.stderr);
  assert.deepEqual(hub.requests.slice(before).filter((r) => r.server === "cdn").map((r) => r.headers.range), ["bytes=1000000-"]);
  assert.deepEqual(readFileSync(join(cache, "models--acme--int", "snapshots", C1, big.path)), big.content);
});

test("Ctrl-C or SIGTERM while tsllm generate, serve, inspect, perplexity, convert, chat, embed, pipeline or bench downloads its --model (embed and pipeline: their default model too), or generate / serve its --draft-model or perplexity its --base, stops it as tsllm download: its locks let go, the part kept and said, exit 130 / 143 (serve: 0, a requested stop)", async () => {
  const text = join(dir, "perplexity.txt");
  writeFileSync(text, "one two three four five six seven eight nine ten\n");
  // the first model of a run whose second one downloads: a file that is there (the second is fetched before either loads)
  const local = join(dir, "first.gguf");
  writeFileSync(local, "");
  // [run, its arguments after the model downloaded (MODEL), its signal, its status, a seed]
  const runs = [
    ["generate", ["generate", "--model", "MODEL", "--prompt", "hi"], "SIGINT", 130, 15], ["serve", ["serve", "--model", "MODEL", "--port", "0"], "SIGTERM", 0, 16],
    ["inspect", ["inspect", "--model", "MODEL"], "SIGINT", 130, 17], ["perplexity", ["perplexity", "--model", "MODEL", "--file", text], "SIGTERM", 143, 18],
    ["convert", ["convert", "--model", "MODEL", "--out", join(dir, "never.gguf")], "SIGINT", 130, 19], ["chat", ["chat", "--model", "MODEL"], "SIGINT", 130, 20],
    ["embed", ["embed", "--model", "MODEL", "--input", "hi"], "SIGTERM", 143, 21], ["bench", ["bench", "--model", "MODEL"], "SIGINT", 130, 22],
    ["generate-draft", ["generate", "--model", local, "--draft-model", "MODEL", "--prompt", "hi"], "SIGTERM", 143, 23],
    ["serve-draft", ["serve", "--model", local, "--draft-model", "MODEL", "--port", "0"], "SIGINT", 0, 24],
    ["perplexity-base", ["perplexity", "--model", local, "--base", "MODEL", "--kl-divergence", "--file", text], "SIGINT", 130, 25],
    ["pipeline", ["pipeline", "fill-mask", "--model", "MODEL", "--input", "a [MASK]"], "SIGTERM", 143, 26],
    // no --model: the default model (transformers' for the task) downloads as a --model does
    ["embed-default", ["embed", "--input", "hi"], "SIGINT", 130, 27],
    ["pipeline-default", ["pipeline", "sentiment-analysis", "--input", "good"], "SIGINT", 130, 28],
  ] as const;
  const defaultRepo: Record<string, string> = { "embed-default": DEFAULT_MODELS.embeddings, "pipeline-default": DEFAULT_MODELS["sentiment-analysis"] };
  for (const [name, args, signal, status, seed] of runs) {
    const command = args[0];
    const cache = join(dir, `interrupted-${name}`);
    const big: FakeFile = { path: "int-Q8_0.gguf", content: randomBytes(2_000_000, seed) };
    const repo = defaultRepo[name] ?? `acme/int-${name}`;
    hub.add({ repo, commit: C1, files: [big] });
    hub.stallMidway.set(sha256(big.content), 1); // it stops mid-file, holding its locks, until stopped
    const env: NodeJS.ProcessEnv = { ...process.env, HF_HUB_CACHE: cache, HF_ENDPOINT: hub.hubUrl, HF_HUB_DOWNLOAD_TIMEOUT: "300" };
    const partial = join(cache, `models--${repo.replace("/", "--")}`, "blobs", `${blobName(big)}.incomplete`);
    const run = spawnTsllm(args.map((a) => (a === "MODEL" ? `${repo}:Q8_0` : a)), env);
    try {
      await until(() => (statSync(partial, { throwIfNoEntry: false })?.size ?? 0) >= 1_000_000, () => `${args.join(" ")}: the download reaching the middle of its file (${run.stderr()})`, run.child);
    } finally {
      run.child.kill(signal);
    }
    const { code, stderr } = await run.closed;
    assert.equal(code, status, `${name}: ${stderr}`);
    // serve's stop while loading is a requested one (exit 0), said last, as without a download
    const stopped = command === "serve" ? `tsllm serve: ${signal} while loading the model: stopped before serving\\n` : "";
    assert.match(stderr, new RegExp(`\\ntsllm ${command}: interrupted; what was downloaded is kept in the cache, and the next run resumes from there\\n${stopped}$`));
    const locks = join(cache, ".locks", `models--${repo.replace("/", "--")}`);
    assert.deepEqual(existsSync(locks) ? readdirSync(locks) : [], [], `${name} leaves no lock behind`);
    assert.equal(statSync(partial).size, 1_000_000, `${name}: the part fetched is kept`);
    hub.stallMidway.delete(sha256(big.content));
  }
});

test("a download that waited for another and took over from it once it was killed leaves none of the dead one's locks behind", async () => {
  const cache = join(dir, "took-over");
  const gguf: FakeFile = { path: "over-Q8_0.gguf", content: randomBytes(5_000, 14) };
  hub.add({ repo: "acme/over", commit: C1, files: [gguf] });
  const locks = join(cache, ".locks", "models--acme--over");
  const lock = join(locks, `${blobName(gguf)}.tsllm.lock`);
  // another download of the commit, fetching the same file: it holds its snapshot lock and the file's
  const other = holdLocks([join(locks, `snapshot-${C1}-0123456789ab.tsllm.lock`), lock]);
  let download: ReturnType<typeof spawnTsllm> | undefined;
  try {
    await other.held;
    download = spawnTsllm(["download", "acme/over:Q8_0"], { ...process.env, HF_HUB_CACHE: cache, HF_ENDPOINT: hub.hubUrl });
    await until(() => download!.stderr().includes(`which holds ${lock}`), "the download saying it waits for the other", download.child);
  } finally {
    other.child.kill("SIGKILL");
    await other.exited;
  }
  const { code, stderr } = await download.closed;
  assert.equal(code, 0, stderr);
  assert.deepEqual(readFileSync(join(cache, "models--acme--over", "snapshots", C1, gguf.path)), gguf.content);
  assert.deepEqual(readdirSync(locks), [], "the killed one's snapshot lock goes too");
});

test("a download on another host whose lock was taken over while it was stopped (asleep past the heartbeat) and that then writes on cannot spoil the file the taker verified", async () => {
  const cache = join(dir, "two-writers");
  const big: FakeFile = { path: "two-Q8_0.gguf", content: randomBytes(2_000_000, 15) };
  hub.add({ repo: "acme/two", commit: C1, files: [big] });
  hub.holdMidway.set(sha256(big.content), 1); // the first download gets half the file, the rest when released
  const env: NodeJS.ProcessEnv = { ...process.env, HF_HUB_CACHE: cache, HF_ENDPOINT: hub.hubUrl, HF_HUB_DOWNLOAD_TIMEOUT: "300" };
  const blob = join(cache, "models--acme--two", "blobs", blobName(big));
  // the first one resumes an earlier run's part, as a resumed download writes on from its end
  mkdirSync(dirname(blob), { recursive: true });
  writeFileSync(`${blob}.incomplete`, big.content.subarray(0, 100_000));
  const first = spawnTsllm(["download", "acme/two:Q8_0", "--quiet"], env);
  try {
    await until(() => (statSync(`${blob}.incomplete`, { throwIfNoEntry: false })?.size ?? 0) >= 1_000_000, "the first download reaching the middle of its file", first.child);
    first.child.kill("SIGSTOP");
    // stopped, its heartbeat has been silent for two minutes: as a holder on another host (a cache
    // on a shared volume; on this host a live holder keeps its lock), its lock is taken over
    const lock = join(cache, ".locks", "models--acme--two", `${blobName(big)}.tsllm.lock`);
    writeFileSync(lock, readFileSync(lock, "utf8").replace(` ${hostname()} `, " another-host "));
    const old = new Date(Date.now() - 120_000);
    utimesSync(lock, old, old);
    const second = await tsllm(["download", "acme/two:Q8_0", "--quiet"], env);
    assert.equal(second.code, 0, second.stderr);
    assert.deepEqual(readFileSync(blob), big.content);
  } finally {
    first.child.kill("SIGCONT");
    hub.releaseHeld(); // the first one, awake, receives and writes the rest of its file
  }
  const late = await first.closed;
  assert.deepEqual(readFileSync(blob), big.content, "the verified blob is not spoilt by the first one's late bytes");
  assert.equal(late.code, 0, `the first one finds its file under the blob name: ${late.stderr}`);
});
