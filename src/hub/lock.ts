import { createHash, randomBytes } from "node:crypto";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { mkdir, open, rm, utimes } from "node:fs/promises";
import { hostname, uptime } from "node:os";
import { dirname, join } from "node:path";
import { sleep } from "./http.js";

/**
 * a holder refreshes its lock this often; a lock untouched for STALE_MS is abandoned when it is
 * from another host, or its holder's start cannot be told (isStale); a live holder on this host
 * whose start is known keeps its lock however long its heartbeat paused
 */
const HEARTBEAT_MS = 5_000;
const STALE_MS = 60_000;
/** how many takers may die one after another while taking over the same lock before waiters just wait */
const MAX_TAKEOVER_DEPTH = 3;

const HOST = hostname();
/** the tokens of the locks this process holds now (a pid alone may be an earlier process's: containers restart with the same pids) */
const heldHere = new Set<string>();

/** What a lock file says: `<pid> <host> <nonce> <start>`, unique to one taking of the lock. */
interface Holder {
  readonly token: string;
  readonly mtimeMs: number;
  /** names this very file: the token, and the inode and mtime for a file whose token was not written yet */
  readonly id: string;
}

/**
 * When process `pid` started, as Linux counts it (clock ticks since boot, /proc/<pid>/stat's 22nd
 * field): a pid alive now that started otherwise is another process than the one that wrote a
 * lock (pids are reused: a restarted container's processes get the same ones). Undefined where
 * there is no /proc (macOS, Windows) or it hides the process (mounted with hidepid, the process
 * another user's).
 */
function processStart(pid: number | "self"): string | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    // the fields after the command name in parentheses (which may hold spaces and parentheses): state is the 3rd
    return stat.slice(stat.lastIndexOf(")") + 2).split(" ")[22 - 3];
  } catch {
    return undefined;
  }
}
const START = processStart("self") ?? "-";

/** `<pid> <host> <nonce> <start>`: what a lock file holds (`-` for a start this host cannot tell) */
const newToken = () => `${process.pid} ${HOST} ${randomBytes(8).toString("hex")} ${START}`;

function readHolder(path: string): Holder | undefined {
  try {
    const token = readFileSync(path, "utf8").trim();
    const s = statSync(path);
    return { token, mtimeMs: s.mtimeMs, id: createHash("sha1").update(`${token}\0${s.ino}\0${token ? "" : s.mtimeMs}`).digest("hex").slice(0, 16) };
  } catch {
    return undefined; // vanished: look again
  }
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === "EPERM";
  }
}

/**
 * A lock whose holder is gone. On this host that is a holder whose pid is dead, or is now another
 * process's (it started otherwise than the token says, or the lock was last touched before this
 * host booted); a live holder whose start matches keeps its lock however long its heartbeat has
 * been silent: a process stopped (SIGSTOP, a laptop asleep) or busy (a long synchronous hash) is
 * not a dead one, as the OS lock of Python's filelock stays with a stopped process. Where the
 * start cannot be told on either side (the token's `-` from a host without /proc, a token from a
 * tsllm before the start field, a /proc that hides the pid) a live pid may be a stranger's that
 * got a crashed holder's pid, and would block waiters until that stranger ended: the heartbeat
 * judges then, as it does a holder on another host (a cache on a shared volume, another
 * container), whose pid means nothing here.
 */
function isStale(h: Holder): boolean {
  const [pidText, host, , start] = h.token.split(" ");
  const pid = Number(pidText);
  if (Number.isSafeInteger(pid) && pid > 0 && (host === undefined || host === HOST)) {
    if (pid === process.pid) return !heldHere.has(h.token);
    if (!isAlive(pid) || h.mtimeMs < Date.now() - uptime() * 1000) return true;
    const startNow = start !== undefined && start !== "-" ? processStart(pid) : undefined;
    if (startNow !== undefined) return startNow !== start;
  }
  return Date.now() - h.mtimeMs > STALE_MS;
}

/**
 * creates `path` holding `token` unless it exists (O_EXCL: one winner between processes). Its
 * folder is made again when gone: an rm of the whole repo removes the repo's lock folder while
 * others wait on a lock in it.
 */
async function tryCreate(path: string, token: string): Promise<boolean> {
  let fh;
  for (let tries = 0; ; tries++) {
    try {
      fh = await open(path, "wx");
      break;
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code;
      if (code === "EEXIST") return false;
      if (code !== "ENOENT" || tries >= 3) throw e;
      await mkdir(dirname(path), { recursive: true });
    }
  }
  try {
    await fh.writeFile(`${token}\n`);
  } finally {
    await fh.close();
  }
  return true;
}

/**
 * Removes the abandoned lock `held` at `path`, unless it has changed since it was read. Waiters
 * that all find the same dead holder must not each remove "the lock": the second would remove the
 * one the first has just taken. So only the process that creates the claim file named after this
 * holder may remove it, and only once it has read that `path` still is that holder. A claimer that
 * dies holding its claim leaves a claim that is itself taken over the same way.
 */
async function removeAbandoned(path: string, held: Holder, token: string, depth = 0): Promise<void> {
  const claim = `${path}.takeover-${held.id}`;
  if (!(await tryCreate(claim, token))) {
    const claimer = readHolder(claim);
    if (claimer && depth < MAX_TAKEOVER_DEPTH && isStale(claimer)) await removeAbandoned(claim, claimer, token, depth + 1);
    return;
  }
  try {
    if (readHolder(path)?.id === held.id) await rm(path, { force: true });
  } finally {
    await rm(claim, { force: true });
  }
}

/**
 * Takes an exclusive lock file (created with O_EXCL, so it works between processes and between
 * concurrent calls in one process), waiting while a live holder has it and taking over one whose
 * holder died; resolves to the function that lets it go. Node has no flock, so this is not
 * Python's filelock (whose OS lock dies with its process): the file names its holder instead, and
 * it uses its own file name next to Python's.
 */
export async function acquireFileLock(path: string, signal?: AbortSignal, onWait?: (holder: string) => void): Promise<() => Promise<void>> {
  await mkdir(dirname(path), { recursive: true });
  const token = newToken();
  heldHere.add(token); // before the file exists, so this process never finds its own token stale
  try {
    for (let wait = 20, told = false; ; wait = Math.min(wait * 2, 500)) {
      if (await tryCreate(path, token)) break;
      const held = readHolder(path);
      if (held && isStale(held)) { await removeAbandoned(path, held, token); continue; }
      // said once: a wait on a live holder otherwise looks like a hang (huggingface_hub logs "still waiting to acquire lock")
      if (held && !told) { told = true; onWait?.(describeHolder(held)); }
      await sleep(wait, signal);
    }
  } catch (e) {
    heldHere.delete(token);
    throw e;
  }
  const heartbeat = setInterval(() => { const now = new Date(); utimes(path, now, now).catch(() => undefined); }, HEARTBEAT_MS);
  heartbeat.unref();
  return async () => {
    clearInterval(heartbeat);
    // only our own lock: one taken over while this process was frozen is its new holder's
    if (readHolder(path)?.token === token) await rm(path, { force: true });
    heldHere.delete(token);
  };
}

/** Runs `fn` holding the lock file `path` (acquireFileLock). */
export async function withFileLock<T>(path: string, fn: () => Promise<T>, signal?: AbortSignal, onWait?: (holder: string) => void): Promise<T> {
  const release = await acquireFileLock(path, signal, onWait);
  try {
    return await fn();
  } finally {
    await release();
  }
}

/** `<lock>.takeover-<id>[.takeover-<id>...]`: a waiter's claim to remove the abandoned `<lock>` (removeAbandoned) */
const CLAIM_SUFFIX = /(\.takeover-[0-9a-f]{16})+$/;

/**
 * Deletes each lock file of `dir` named as `isLock` accepts, and each takeover claim on one, whose
 * holder is gone (isStale: dead, or silent past the heartbeat where its pid cannot vouch for it), as a waiter on it would take it over: a
 * lock no one waits on again (a killed download's snapshot lock, named for that download alone; the
 * lock of a file no download fetches again; the claim of a waiter killed mid-takeover) is otherwise
 * left behind for good. A live holder's lock is never touched (where its start cannot be told: while it beats).
 */
export async function removeAbandonedLocksIn(dir: string, isLock: (name: string) => boolean): Promise<void> {
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return; // no lock folder (or none readable): no lock to find
  }
  const token = newToken();
  heldHere.add(token); // its takeover claims are live while it runs
  try {
    for (const name of names.filter((n) => isLock(n.replace(CLAIM_SUFFIX, ""))).sort()) {
      const path = join(dir, name);
      const held = readHolder(path);
      if (held && isStale(held)) await removeAbandoned(path, held, token);
    }
  } finally {
    heldHere.delete(token);
  }
}

/**
 * The process holding the lock file at `path` now, as `<pid> <host>`, or undefined when there is
 * no lock or its holder is gone (isStale): how a cache removal tells a
 * download in progress from one that died.
 */
export function liveHolder(path: string): string | undefined {
  const held = readHolder(path);
  return held && !isStale(held) ? describeHolder(held) : undefined;
}

/**
 * `process <pid>[ on <host>]`; "another process" for a lock file whose holder has not written its
 * token yet (it is created, then written)
 */
function describeHolder(held: Holder): string {
  const [pid, host] = held.token.split(" ");
  if (!pid || !/^\d+$/.test(pid)) return "another process";
  return host && host !== HOST ? `process ${pid} on ${host}` : `process ${pid}`;
}
