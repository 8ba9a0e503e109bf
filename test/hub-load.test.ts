import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { loadModel, loadTokenizer } from "../src/llm.js";
import { progressReporter } from "../src/hub/index.js";
import { GGMLType } from "../src/tensor/dtypes.js";
import { tinyLlama, writeRandomModel } from "../src/testing/index.js";
import { FakeHub } from "./helpers/hub-fake.js";
import { skipWithoutShared } from "./helpers/shared.js";
import { COMMANDS } from "../src/cli/commands.js";
import { runTsllm } from "./helpers/child.js";
import { spawnServe } from "./helpers/serve.js";
import { documentedKeys } from "./helpers/documented-json.js";

// tinyLlama borrows stories260K's vocabulary
const skip = skipWithoutShared("models/stories260K.gguf");
const dir = mkdtempSync(join(tmpdir(), "tsllm-hub-load-"));
const localModel = join(dir, "tiny-llama-Q8_0.gguf");
const REPO = "acme/tiny-llama-GGUF";
let hub: FakeHub;
const savedEnv = { ...process.env };

before(async () => {
  hub = await new FakeHub().start();
  if (skip) return;
  await writeRandomModel(localModel, { ...tinyLlama, weightType: GGMLType.Q8_0, seed: 11 });
  hub.add({
    repo: REPO,
    commit: "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
    files: [
      { path: "README.md", content: Buffer.from("tiny") },
      { path: "tiny-llama-Q8_0.gguf", content: readFileSync(localModel) },
      { path: "tiny-llama-F16.gguf", content: Buffer.from("not fetched") },
    ],
  });
});
after(async () => {
  process.env = savedEnv;
  await hub.close();
  rmSync(dir, { recursive: true, force: true });
});

function useHub(cache: string, offline = false): void {
  process.env.HF_ENDPOINT = hub.hubUrl;
  process.env.HF_HUB_CACHE = cache;
  delete process.env.HF_TOKEN;
  if (offline) process.env.HF_HUB_OFFLINE = "1";
  else delete process.env.HF_HUB_OFFLINE;
}

test("loadModel('org/name:Q8_0') downloads through HF_ENDPOINT, generates, and later loads offline with no request", { skip }, async () => {
  const cache = join(dir, "cache-load");
  useHub(cache);
  const local = await loadModel(localModel, { backend: "reference" });
  const fromHub = await loadModel(`${REPO}:Q8_0`, { backend: "reference" });
  try {
    assert.equal(fromHub.path, join(cache, "models--acme--tiny-llama-GGUF", "snapshots", "a".repeat(40), "tiny-llama-Q8_0.gguf"));
    const a = await local.generate("Once upon a time", { maxTokens: 8, temperature: 0 });
    const b = await fromHub.generate("Once upon a time", { maxTokens: 8, temperature: 0 });
    assert.equal(b.completionTokens.length, 8);
    assert.deepEqual(b.completionTokens, a.completionTokens);
    assert.equal(b.completion, a.completion);
  } finally {
    local.dispose();
    fromHub.dispose();
  }
  assert.ok(hub.requests.every((r) => !r.url.includes("F16")), "only the chosen GGUF is fetched");
  const n = hub.requests.length;
  useHub(cache, true);
  const offline = await loadModel(`${REPO}:Q8_0`, { backend: "reference" });
  offline.dispose();
  const tok = await loadTokenizer(`${REPO}:Q8_0`);
  assert.ok(tok.vocabSize > 0);
  assert.equal(hub.requests.length, n, "no request once cached");
  await assert.rejects(loadModel(`${REPO}:Q4_K_M`), /not in the cache .*HF_HUB_OFFLINE=1/);
});

const tsllm = runTsllm;

test("tsllm download prints the snapshot (or JSON); errors are one line naming the repo", { skip }, async () => {
  const cache = join(dir, "cache-cli");
  const env: NodeJS.ProcessEnv = { ...savedEnv, HF_ENDPOINT: hub.hubUrl, HF_HUB_CACHE: cache, HF_TOKEN: "hf_cli_secret" };
  delete env.HF_HUB_OFFLINE;
  const r = await tsllm(["download", `${REPO}:Q8_0`, "--json"], env);
  assert.equal(r.code, 0, r.stderr);
  const out = JSON.parse(r.stdout);
  const snapshot = join(cache, "models--acme--tiny-llama-GGUF", "snapshots", "a".repeat(40));
  assert.equal(out.snapshot, snapshot);
  assert.equal(out.path, join(snapshot, "tiny-llama-Q8_0.gguf"));
  assert.deepEqual(out.files, ["tiny-llama-Q8_0.gguf"]);
  assert.deepEqual(Object.keys(out).sort(), documentedKeys(COMMANDS.download!.help, "--json").sort(), "the keys --help documents for --json");
  assert.match(r.stderr, /downloaded acme\/tiny-llama-GGUF\/tiny-llama-Q8_0\.gguf/);
  assert.ok(!r.stderr.includes("hf_cli_secret") && !r.stdout.includes("hf_cli_secret"), "the token is never printed");
  const plain = await tsllm(["download", REPO, "--include", "README.md", "--quiet"], env);
  assert.equal(plain.code, 0, plain.stderr);
  assert.equal(plain.stdout, `${snapshot}\n`);
  assert.equal(plain.stderr, "");
  const missing = await tsllm(["download", "acme/nope", "--offline"], env);
  assert.equal(missing.code, 1);
  assert.match(missing.stderr, /^tsllm: error: acme\/nope@main is not in the cache .*\n$/);
  const usage = await tsllm(["download", "a/b", "--source", "ftp"], env);
  assert.equal(usage.code, 2);
});

test("tsllm generate and serve with the hub unreachable load the cached snapshot, saying so in one line on stderr as tsllm download does", { skip, timeout: 240_000 }, async () => {
  const cache = join(dir, "cache-away");
  const env: NodeJS.ProcessEnv = { ...savedEnv, HF_ENDPOINT: hub.hubUrl, HF_HUB_CACHE: cache };
  delete env.HF_HUB_OFFLINE;
  delete env.HF_TOKEN;
  const fetched = await tsllm(["download", `${REPO}:Q8_0`, "--quiet"], env);
  assert.equal(fetched.code, 0, fetched.stderr);
  // a hub that no longer listens
  const dead = new FakeHub();
  await dead.start();
  const url = dead.hubUrl;
  await dead.close();
  const away: NodeJS.ProcessEnv = { ...env, HF_ENDPOINT: url };
  const snapshot = join(cache, "models--acme--tiny-llama-GGUF", "snapshots", "a".repeat(40));
  const literal = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
  const said = (command: string) => new RegExp(`^tsllm ${command}: the hub could not answer \\(GET ${literal(url)}/api/models/${literal(REPO)}/revision/main failed: [^\\n]*ECONNREFUSED[^\\n]*\\); the cached snapshot ${literal(snapshot)} is used as it is$`, "gm");
  const generated = await tsllm(["generate", "--model", `${REPO}:Q8_0`, "--prompt", "Once upon a time", "--max-tokens", "4", "--temp", "0", "--threads", "1"], away);
  assert.equal(generated.code, 0, generated.stderr);
  assert.equal(generated.stderr.match(said("generate"))?.length, 1, `said once: ${generated.stderr}`);
  const served = await spawnServe(["--model", `${REPO}:Q8_0`], { env: away });
  try {
    assert.equal(served.stderr().match(said("serve"))?.length, 1, `said once: ${served.stderr()}`);
  } finally {
    served.child.kill("SIGTERM");
    await served.exited;
  }
});

test("progress: plain lines off a TTY, redrawn bars with speed and ETA on one", () => {
  const lines: string[] = [];
  let t = 0;
  const sink = (tty: boolean) => ({ isTTY: tty, write: (s: string) => { lines.push(s); return true; } }) as unknown as NodeJS.WriteStream;
  const plain = progressReporter(sink(false), { now: () => t });
  plain({ repo: "a/b", file: "m.gguf", phase: "start", downloaded: 0, total: 2_000_000 });
  plain({ repo: "a/b", file: "m.gguf", phase: "bytes", downloaded: 1_000_000, total: 2_000_000 });
  t = 2000;
  plain({ repo: "a/b", file: "m.gguf", phase: "done", downloaded: 2_000_000, total: 2_000_000 });
  assert.deepEqual(lines, ["downloading a/b/m.gguf (2.0 MB)\n", "downloaded a/b/m.gguf (2.0 MB in 2.0s at 1.0 MB/s)\n"]);
  // a small file's rate is a fraction of a byte: said whole (it printed "25.111979940212567 B/s")
  lines.length = 0;
  t = 0;
  plain({ repo: "a/b", file: "config.json", phase: "start", downloaded: 0, total: 22 });
  t = 876;
  plain({ repo: "a/b", file: "config.json", phase: "done", downloaded: 22, total: 22 });
  assert.equal(lines[1], "downloaded a/b/config.json (22 B in 0.9s at 25 B/s)\n");
  lines.length = 0;
  t = 0;
  const bar = progressReporter(sink(true), { now: () => t });
  bar({ repo: "a/b", file: "m.gguf", phase: "start", downloaded: 0, total: 4_000_000 });
  t = 1000;
  bar({ repo: "a/b", file: "m.gguf", phase: "bytes", downloaded: 1_000_000, total: 4_000_000 });
  assert.match(lines.at(-1)!, /^\x1b\[1A\x1b\[2Km\.gguf +\[######-+\] {2}25% 1\.0 MB\/4\.0 MB 1\.0 MB\/s ETA 3s\n$/);
});
