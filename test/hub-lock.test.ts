import assert from "node:assert/strict";
import { spawn, spawnSync, type ChildProcessWithoutNullStreams } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, utimesSync, writeFileSync } from "node:fs";
import { hostname, tmpdir, uptime } from "node:os";
import { join, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { after, test } from "node:test";
import { getEventListeners } from "node:events";
import { sleep } from "../src/hub/http.js";
import { liveHolder, removeAbandonedLocksIn, withFileLock } from "../src/hub/lock.js";
import { PROJECT_ROOT } from "./helpers/shared.js";

const dir = mkdtempSync(join(tmpdir(), "tsllm-hub-lock-"));
after(() => rmSync(dir, { recursive: true, force: true }));

/**
 * A process that takes the lock once per "go" line, logs `in <pid>` / `out <pid>` around 30 ms
 * inside it, and answers "done" when it has let go.
 */
const WAITER = (lock: string, log: string) => `
import { appendFileSync } from "node:fs";
import { createInterface } from "node:readline";
import { withFileLock } from ${JSON.stringify(pathToFileURL(resolve(PROJECT_ROOT, "src/hub/lock.ts")).href)};
const lines = createInterface({ input: process.stdin });
process.stdout.write("ready\\n");
for await (const line of lines) {
  if (line !== "go") break;
  await withFileLock(${JSON.stringify(lock)}, async () => {
    appendFileSync(${JSON.stringify(log)}, "in " + process.pid + "\\n");
    await new Promise((r) => setTimeout(r, 30));
    appendFileSync(${JSON.stringify(log)}, "out " + process.pid + "\\n");
  });
  process.stdout.write("done\\n");
}
`;

/** resolves once `child` has printed `count` lines equal to `word` */
function lines(child: ChildProcessWithoutNullStreams, word: string, count: number): Promise<void> {
  return new Promise((done, fail) => {
    let seen = 0, buffer = "";
    const onData = (d: Buffer) => {
      buffer += d.toString();
      const parts = buffer.split("\n");
      buffer = parts.pop()!;
      seen += parts.filter((p) => p === word).length;
      if (seen >= count) { child.stdout.off("data", onData); done(); }
    };
    child.stdout.on("data", onData);
    child.once("exit", (code) => seen < count && fail(new Error(`a waiter exited (${code}) before "${word}"`)));
  });
}

test("processes waiting on a lock whose owner died take it over one at a time", { timeout: 120_000 }, async () => {
  const race = join(dir, "race");
  mkdirSync(race);
  const lock = join(race, "blob.tsllm.lock");
  const log = join(race, "log");
  const WAITERS = 6, ROUNDS = 6;
  const children = Array.from({ length: WAITERS }, () => spawn(process.execPath, ["--import", "tsx", "--input-type=module", "-e", WAITER(lock, log)], { cwd: PROJECT_ROOT }));
  let stderr = "";
  for (const c of children) c.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
  try {
    await Promise.all(children.map((c) => lines(c, "ready", 1)));
    for (let round = 1; round <= ROUNDS; round++) {
      // the owner died holding the lock: its pid is gone, its file is still there
      const dead = spawnSync(process.execPath, ["-e", ""]).pid;
      writeFileSync(lock, `${dead}\n`);
      const done = Promise.all(children.map((c) => lines(c, "done", 1)));
      for (const c of children) c.stdin.write("go\n");
      await done;
    }
  } finally {
    for (const c of children) c.stdin.end();
  }
  assert.equal(stderr, "");
  const entries = readFileSync(log, "utf8").trim().split("\n");
  assert.equal(entries.length, 2 * WAITERS * ROUNDS);
  for (let i = 0; i < entries.length; i += 2) {
    const pid = entries[i]!.split(" ")[1];
    assert.deepEqual([entries[i], entries[i + 1]], [`in ${pid}`, `out ${pid}`], `two holders at once at line ${i + 1}: ${entries.slice(i, i + 4).join(", ")}`);
  }
  assert.ok(!existsSync(lock));
  assert.deepEqual(readdirSync(race), ["log"], "no takeover files left behind");
});

// a bounded test: a waiter that misses its signal's abort waits on the held lock for ever
test("a lock held from another host (a shared cache volume, another container) is judged by its heartbeat, not by its pid", { timeout: 60_000 }, async () => {
  const lock = join(dir, "other-host.tsllm.lock");
  // a pid that does not exist here says nothing about a process on another machine
  const deadHere = spawnSync(process.execPath, ["-e", ""]).pid;
  writeFileSync(lock, `${deadHere} some-other-host 0123456789abcdef\n`);
  let ran = false;
  // the waiter tries the lock before its first sleep, so it is judged however late the 300 ms
  // timeout fires under load; it must reject then, whether the timeout fired in a sleep or between tries
  await assert.rejects(withFileLock(lock, async () => { ran = true; }, AbortSignal.timeout(300)), { name: "TimeoutError" });
  assert.equal(ran, false, "a live holder elsewhere keeps its lock");
  assert.match(readFileSync(lock, "utf8"), /some-other-host/);
  // once it stops refreshing the lock (a minute without a heartbeat), it is abandoned
  const old = new Date(Date.now() - 120_000);
  utimesSync(lock, old, old);
  await withFileLock(lock, async () => { ran = true; }, AbortSignal.timeout(5_000));
  assert.equal(ran, true);
  assert.ok(!existsSync(lock));
});

test("a wait on a held lock ends when its signal was aborted before or between its tries, and leaves no listeners behind", { timeout: 30_000 }, async () => {
  const lock = join(dir, "aborted.tsllm.lock");
  writeFileSync(lock, `1 some-other-host 0123456789abcdef\n`);
  let ran = false;
  // aborted before the call: its abort event has fired already, as one that fires while the waiter is between sleeps
  await assert.rejects(withFileLock(lock, async () => { ran = true; }, AbortSignal.abort()), { name: "AbortError" });
  assert.equal(ran, false);
  // one signal over many sleeps (a long wait, a download's retries) holds no listener per ended sleep
  const controller = new AbortController();
  for (let i = 0; i < 20; i++) await sleep(1, controller.signal);
  assert.equal(getEventListeners(controller.signal, "abort").length, 0);
  rmSync(lock);
});

test("a lock left by an earlier process with this process's pid (a restarted container) is taken over at once", async () => {
  const lock = join(dir, "same-pid.tsllm.lock");
  writeFileSync(lock, `${process.pid} ${hostname()} 0123456789abcdef\n`);
  let ran = false;
  await withFileLock(lock, async () => { ran = true; }, AbortSignal.timeout(5_000));
  assert.equal(ran, true);
  assert.ok(!existsSync(lock));
});

test("concurrent holders in one process take turns", async () => {
  const lock = join(dir, "in-process.tsllm.lock");
  const events: string[] = [];
  await Promise.all([1, 2, 3].map((n) => withFileLock(lock, async () => {
    events.push(`in ${n}`);
    await new Promise((r) => setTimeout(r, 20));
    events.push(`out ${n}`);
  })));
  for (let i = 0; i < events.length; i += 2) assert.equal(events[i + 1], events[i]!.replace("in", "out"), events.join(", "));
  assert.ok(!existsSync(lock));
});

test("a wait on a lock whose holder has not written its pid yet names another process, not a blank pid", { timeout: 30_000 }, async () => {
  const lock = join(dir, "unwritten.tsllm.lock");
  writeFileSync(lock, ""); // created with O_EXCL, its token not written yet (or its writer died right then)
  const heard: string[] = [];
  await assert.rejects(withFileLock(lock, async () => undefined, AbortSignal.timeout(300), (holder) => heard.push(holder)), { name: "TimeoutError" });
  assert.deepEqual(heard, ["another process"]);
  rmSync(lock);
});

/** a process holding the lock file `lock` (acquireFileLock) until killed; `held` resolves once it has it */
function holder(lock: string): { child: ChildProcessWithoutNullStreams; held: Promise<void>; exited: Promise<unknown> } {
  const code = `
import { acquireFileLock } from ${JSON.stringify(pathToFileURL(resolve(PROJECT_ROOT, "src/hub/lock.ts")).href)};
await acquireFileLock(${JSON.stringify(lock)});
process.stdout.write("held\\n");
setInterval(() => undefined, 60_000);
`;
  const child = spawn(process.execPath, ["--import", "tsx", "--input-type=module", "-e", code], { cwd: PROJECT_ROOT });
  return { child, held: lines(child, "held", 1), exited: new Promise((r) => child.once("exit", r)) };
}

// where a pid's start cannot be read (no /proc) a holder's live pid cannot vouch for it: the heartbeat judges (the test below)
test("a live holder on this host keeps its lock however long its heartbeat was silent (stopped, as a laptop asleep or a long synchronous hash); dead, its lock is taken at once", { timeout: 60_000, skip: !existsSync("/proc/self/stat") && "no /proc: a holder's start cannot be told" }, async () => {
  const locks = join(dir, "paused");
  mkdirSync(locks);
  const lock = join(locks, "blob.tsllm.lock");
  const h = holder(lock);
  try {
    await h.held;
    h.child.kill("SIGSTOP");
    // stopped, its heartbeat has been silent for two minutes
    const old = new Date(Date.now() - 120_000);
    utimesSync(lock, old, old);
    assert.equal(liveHolder(lock), `process ${h.child.pid}`, "a cache removal still finds the download in progress");
    await removeAbandonedLocksIn(locks, (name) => name.endsWith(".tsllm.lock"));
    assert.ok(existsSync(lock), "the clearing of abandoned locks leaves it");
    let ran = false;
    // tried once before its first sleep, judged then: a stale judgement would have taken the lock and run
    await assert.rejects(withFileLock(lock, async () => { ran = true; }, AbortSignal.abort()), { name: "AbortError" });
    assert.equal(ran, false, "a waiter does not take it from the live holder");
    assert.match(readFileSync(lock, "utf8"), new RegExp(`^${h.child.pid} `));
  } finally {
    h.child.kill("SIGKILL");
    await h.exited;
  }
  // the holder dead (its pid gone): its lock is abandoned, whatever its heartbeat says
  const now = new Date();
  utimesSync(lock, now, now);
  assert.equal(liveHolder(lock), undefined);
  let ran = false;
  await withFileLock(lock, async () => { ran = true; }, AbortSignal.timeout(5_000));
  assert.equal(ran, true);
});

test("a lock naming a live pid that is another process's now (a reused pid: started otherwise than the lock says, or the lock older than this boot) is taken at once", { timeout: 60_000 }, async () => {
  const lock = join(dir, "reused-pid.tsllm.lock");
  // a live process that never took the lock: the pid of a holder that died, given again
  const other = spawn(process.execPath, ["-e", "setInterval(() => undefined, 60_000)"]);
  const exited = new Promise((r) => other.once("exit", r));
  try {
    const alive = `${other.pid} ${hostname()} 0123456789abcdef`;
    const take = async () => {
      let ran = false;
      await withFileLock(lock, async () => { ran = true; }, AbortSignal.timeout(5_000));
      return ran;
    };
    if (existsSync("/proc/self/stat")) {
      // Linux: the start the lock names is not that of the process with the pid now
      writeFileSync(lock, `${alive} 1\n`);
      assert.equal(await take(), true, "a start that differs: another process");
    }
    // touched last before this host booted: whoever has the pid now cannot be its writer
    writeFileSync(lock, `${alive} -\n`);
    const beforeBoot = new Date(Date.now() - uptime() * 1000 - 86_400_000);
    utimesSync(lock, beforeBoot, beforeBoot);
    assert.equal(await take(), true, "a lock from before the boot");
  } finally {
    other.kill("SIGKILL");
    await exited;
  }
});

test("a lock naming a live pid whose start cannot be told (written where there is no /proc, or by a tsllm before the start field) is judged by its heartbeat: kept while it beats, taken once silent past a minute", { timeout: 60_000 }, async () => {
  const locks = join(dir, "unknown-start");
  mkdirSync(locks);
  const lock = join(locks, "blob.tsllm.lock");
  // a live process that never took the lock: a crashed holder's pid given to a stranger, or the holder itself
  const other = spawn(process.execPath, ["-e", "setInterval(() => undefined, 60_000)"]);
  const exited = new Promise((r) => other.once("exit", r));
  try {
    const alive = `${other.pid} ${hostname()} 0123456789abcdef`;
    // `-`: the start a host without /proc (macOS, Windows) writes; none at all: the token of an older tsllm
    for (const token of [`${alive} -`, alive]) {
      writeFileSync(lock, `${token}\n`);
      assert.equal(liveHolder(lock), `process ${other.pid}`, `${token}: beating, a live holder`);
      let ran = false;
      // tried once before its first sleep: a fresh heartbeat is not taken over
      await assert.rejects(withFileLock(lock, async () => { ran = true; }, AbortSignal.abort()), { name: "AbortError" });
      assert.equal(ran, false, `${token}: a waiter does not take a beating lock`);
      // silent for two minutes (in this boot): abandoned though its pid lives (before: kept until that process ended)
      const old = new Date(Date.now() - 120_000);
      utimesSync(lock, old, old);
      assert.equal(liveHolder(lock), undefined, `${token}: silent, no holder`);
      await removeAbandonedLocksIn(locks, (name) => name.endsWith(".tsllm.lock"));
      assert.ok(!existsSync(lock), `${token}: the clearing of abandoned locks removes it`);
      writeFileSync(lock, `${token}\n`);
      utimesSync(lock, old, old);
      await withFileLock(lock, async () => { ran = true; }, AbortSignal.timeout(5_000));
      assert.equal(ran, true, `${token}: a waiter takes it over`);
      assert.ok(!existsSync(lock));
    }
  } finally {
    other.kill("SIGKILL");
    await exited;
  }
});
