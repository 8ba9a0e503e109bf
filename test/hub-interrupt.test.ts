import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { after, before, test } from "node:test";
import { FakeHub, randomBytes, type FakeFile } from "./helpers/hub-fake.js";
import { runChild } from "./helpers/child.js";
import { PROJECT_ROOT } from "./helpers/shared.js";

const C1 = "1111111111111111111111111111111111111111";
let hub: FakeHub;
const dir = mkdtempSync(join(tmpdir(), "tsllm-hub-interrupt-"));
before(async () => {
  hub = await new FakeHub().start();
});
after(async () => {
  await hub.close();
  rmSync(dir, { recursive: true, force: true });
});

const source = (file: string) => JSON.stringify(pathToFileURL(resolve(PROJECT_ROOT, file)).href);

/**
 * A command as generate runs one (src/cli/interrupt.ts around a real download of `ref` from the
 * loopback hub), whose download sends the process `signal` as it ends, once it can no longer be
 * aborted: `raise` is "delivered" (the signal reaches the listeners before the download returns)
 * or "pending" (it is caught and not yet delivered when the download returns). Had the run gone on,
 * it would say "went on" and end 0 a moment later.
 */
const lateSignalRun = (ref: string, signal: string, raise: "delivered" | "pending") => `
import { interruptibleDownload } from ${source("src/cli/interrupt.ts")};
import { resolveModelReference } from ${source("src/hub/index.ts")};
const path = await interruptibleDownload("generate", async (abort) => {
  const path = await resolveModelReference(${JSON.stringify(ref)}, { signal: abort, quiet: true });
  ${raise === "delivered"
    // (a signal handle does not keep the event loop alive: the timer does, until the signal is delivered)
    ? `const alive = setTimeout(() => undefined, 30_000);
  await new Promise((delivered) => { process.once(${JSON.stringify(signal)}, delivered); process.kill(process.pid, ${JSON.stringify(signal)}); });
  clearTimeout(alive);`
    : `process.kill(process.pid, ${JSON.stringify(signal)});`}
  return path;
});
process.stderr.write("went on with " + path + "\\n");
await new Promise((r) => setTimeout(r, 2_000));
`;

test("Ctrl-C or SIGTERM that comes as a hub download ends (too late to abort it) still stops the command, once the download is whole, saying so: exit 130 / 143, not a run that goes on", { timeout: 120_000 }, async () => {
  for (const [signal, status, seed] of [["SIGINT", 130, 31], ["SIGTERM", 143, 32]] as const) {
    const repo = `acme/late-${signal.toLowerCase()}`;
    const gguf: FakeFile = { path: "late-Q8_0.gguf", content: randomBytes(50_000, seed) };
    hub.add({ repo, commit: C1, files: [gguf] });
    const cache = join(dir, `late-${signal}`);
    const env: NodeJS.ProcessEnv = { ...process.env, HF_HUB_CACHE: cache, HF_ENDPOINT: hub.hubUrl };
    const r = await runChild(lateSignalRun(`${repo}:Q8_0`, signal, "delivered"), 60_000, { env });
    assert.equal(r.timedOut, false, r.stderr);
    assert.equal(r.code, status, r.stderr);
    assert.equal(r.stderr, "tsllm generate: interrupted; the download had finished and is in the cache\n");
    assert.deepEqual(readFileSync(join(cache, `models--${repo.replace("/", "--")}`, "snapshots", C1, gguf.path)), gguf.content, "the file is whole in the cache");
    const locks = join(cache, ".locks", `models--${repo.replace("/", "--")}`);
    assert.deepEqual(existsSync(locks) ? readdirSync(locks) : [], [], "no lock is left behind");
  }
});

test("a signal caught as a hub download ends but delivered only after its handler is gone takes its default course (the process ends by it), not dropped", { timeout: 120_000 }, async () => {
  const repo = "acme/pending";
  hub.add({ repo, commit: C1, files: [{ path: "pending-Q8_0.gguf", content: randomBytes(20_000, 33) }] });
  const env: NodeJS.ProcessEnv = { ...process.env, HF_HUB_CACHE: join(dir, "pending"), HF_ENDPOINT: hub.hubUrl };
  for (const signal of ["SIGINT", "SIGTERM"] as const) {
    const r = await runChild(lateSignalRun(`${repo}:Q8_0`, signal, "pending"), 60_000, { env });
    assert.equal(r.timedOut, false, r.stderr);
    // ended by the signal (no status): the run may have begun ("went on"), but it does not run on
    assert.equal(r.code, null, `${signal}: the process ended by itself (${r.code}), the signal dropped: ${r.stderr}`);
  }
});
