import { readFileSync, statSync } from "node:fs";
import { mkdir, open, rm, utimes } from "node:fs/promises";
import { dirname } from "node:path";
import { sleep } from "./http.js";

/** a holder refreshes its lock this often; a lock untouched for STALE_MS is abandoned */
const HEARTBEAT_MS = 5_000;
const STALE_MS = 60_000;

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === "EPERM";
  }
}

/** a lock whose holder died (pid gone) or stopped refreshing it can be taken over */
function isStale(path: string): boolean {
  try {
    const pid = Number.parseInt(readFileSync(path, "utf8"), 10);
    if (Number.isInteger(pid) && pid > 0 && pid !== process.pid && !isAlive(pid)) return true;
    return Date.now() - statSync(path).mtimeMs > STALE_MS;
  } catch {
    return false; // vanished or being written: look again
  }
}

/**
 * Runs `fn` holding an exclusive lock file (created with O_EXCL, so it works between processes
 * and between concurrent calls in one process). Node has no flock, so this is not Python's
 * filelock: it uses its own file name next to Python's.
 */
export async function withFileLock<T>(path: string, fn: () => Promise<T>, signal?: AbortSignal): Promise<T> {
  await mkdir(dirname(path), { recursive: true });
  for (let wait = 20; ; wait = Math.min(wait * 2, 500)) {
    try {
      const fh = await open(path, "wx");
      await fh.writeFile(`${process.pid}\n`);
      await fh.close();
      break;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== "EEXIST") throw e;
      if (isStale(path)) { await rm(path, { force: true }); continue; }
      await sleep(wait, signal);
    }
  }
  const heartbeat = setInterval(() => { const now = new Date(); utimes(path, now, now).catch(() => undefined); }, HEARTBEAT_MS);
  heartbeat.unref();
  try {
    return await fn();
  } finally {
    clearInterval(heartbeat);
    await rm(path, { force: true });
  }
}
