import { createHash, type Hash } from "node:crypto";
import { constants, createReadStream, existsSync, statSync } from "node:fs";
import { mkdir, open, rename, rm, statfs } from "node:fs/promises";
import { dirname } from "node:path";
import { formatBytes } from "../units/index.js";
import { describeIoError, HubError } from "./errors.js";
import { formatSeconds, hubRequest, isRetryableStatus, redact, retryAfterMs, sleep, type HubAuth, type HubResponse } from "./http.js";
import type { FileLocation } from "./source.js";

export interface FetchBlobOptions {
  readonly location: FileLocation;
  readonly auth: HubAuth;
  /** final path (blobs/<etag>); bytes go to `<blob>.incomplete` first */
  readonly blobPath: string;
  /** "file F of repo@rev", for messages */
  readonly what: string;
  /** attempts after the first on network failures and 5xx/429 */
  readonly retries: number;
  /** first backoff; doubles each time */
  readonly retryDelayMs: number;
  /** an attempt the server stops sending to is abandoned after this long without a byte (then resumed) */
  readonly timeoutMs: number;
  readonly onBytes?: (downloaded: number) => void;
  readonly signal?: AbortSignal;
}

async function hashPrefix(hash: Hash, path: string): Promise<void> {
  for await (const chunk of createReadStream(path)) hash.update(chunk as Buffer);
}

/** the hash the file's checksum is computed with, fed what precedes the bytes (a git blob's header) */
function startHash(location: FileLocation): Hash | undefined {
  if (!location.checksum) return undefined;
  if (location.checksum.algorithm === "sha256") return createHash("sha256");
  return createHash("sha1").update(`blob ${location.size}\0`);
}

/**
 * Whether the file at `path` is the one `location` names, by its checksum (an LFS file's sha256, a
 * git file's blob sha1) over its bytes as they are, whatever size the hub announces; false when
 * the hub gives no checksum or the file is gone
 */
export async function matchesChecksum(location: FileLocation, path: string): Promise<boolean> {
  const size = statSync(path, { throwIfNoEntry: false })?.size;
  const hash = size === undefined ? undefined : startHash({ ...location, size });
  if (!hash || !location.checksum) return false;
  await hashPrefix(hash, path);
  return hash.digest("hex") === location.checksum.hex;
}

/** thrown inside an attempt when another attempt may fix it */
class Transient extends Error {
  constructor(message: string, /** the server's Retry-After */ readonly retryAfterMs?: number) {
    super(message);
  }
}

/**
 * thrown when a resumed file fails its checksum: the bytes kept from before may be what is wrong
 * (zeros where a power cut lost data the file system had not written yet), so it is fetched again
 * whole, once, before the mismatch is the server's
 */
class ResumedMismatch extends Error {}

/**
 * A failure writing the cache is the disk's, not the network's: retrying cannot help, so it is
 * reported at once (the partial file is kept, so the download resumes once there is room).
 */
function diskError(e: unknown, o: FetchBlobOptions, partial: string, written: number): HubError {
  return new HubError("disk", `writing ${o.what} to ${partial} failed: ${describeIoError(e)}; ${formatBytes(written)} of ${formatBytes(o.location.size)} were written and are kept, so a later run resumes`);
}

/** bytes the file system can still give us, or undefined when it cannot say */
async function freeBytes(dir: string): Promise<number | undefined> {
  try {
    const s = await statfs(dir);
    return s.bavail * s.bsize;
  } catch {
    return undefined;
  }
}

/**
 * Downloads one file into the cache: writes `<blob>.incomplete` on from its end (resuming with `Range` what
 * an earlier attempt or process left), checks the size and the checksum (an LFS file's sha256, a
 * git file's blob sha1), then renames it to the blob name. Only a verified file ever carries the blob name, so a killed
 * process or a full disk leaves at most an `.incomplete`. A checksum mismatch deletes the
 * partial file (it cannot be resumed from) and fails; one after a resume is fetched again whole first.
 */
export async function fetchBlob(o: FetchBlobOptions): Promise<void> {
  const { blobPath } = o;
  const partial = `${blobPath}.incomplete`;
  await mkdir(dirname(blobPath), { recursive: true });
  let lastError = "";
  let wait = 0;
  let restarted = false;
  for (let attempt = 0; attempt <= o.retries; attempt++) {
    if (attempt > 0) await sleep(Math.max(o.retryDelayMs * 2 ** (attempt - 1), wait), o.signal);
    try {
      await attemptFetch(o, partial, !restarted);
      await rename(partial, blobPath).catch((e: NodeJS.ErrnoException) => {
        // a download that took this one's lock over (it was on another host or one without /proc, stopped past the heartbeat) has renamed
        // the same file to the blob name already: only a verified file carries that name
        if (e.code !== "ENOENT" || statSync(blobPath, { throwIfNoEntry: false })?.size !== o.location.size) throw e;
      });
      return;
    } catch (e) {
      if (e instanceof ResumedMismatch) { restarted = true; attempt--; wait = 0; continue; } // not the network's failure: no retry spent
      if (!(e instanceof Transient)) throw e;
      lastError = e.message;
      wait = e.retryAfterMs ?? 0;
    }
  }
  throw new HubError("network", `downloading ${o.what} failed after ${o.retries + 1} attempts: ${lastError} (the partial file ${partial} is kept; run again to resume)`);
}

async function attemptFetch(o: FetchBlobOptions, partial: string, mayRestart: boolean): Promise<void> {
  const { location } = o;
  let start = existsSync(partial) ? statSync(partial).size : 0;
  if (start > location.size) { await rm(partial, { force: true }); start = 0; }
  // as huggingface_hub checks (it only warns): a file that cannot fit is refused before a byte moves
  const free = await freeBytes(dirname(partial));
  if (free !== undefined && location.size - start > free) {
    throw new HubError("disk", `${o.what} needs ${formatBytes(location.size - start)} more but only ${formatBytes(free)} are free in ${dirname(partial)}: free some space (tsllm ls / tsllm rm) or point HF_HUB_CACHE elsewhere`);
  }
  let response: Response | undefined;
  let r: HubResponse | undefined;
  if (start < location.size) {
    const headers: Record<string, string> = { "accept-encoding": "identity" };
    if (start > 0) headers.range = `bytes=${start}-`;
    try {
      r = await hubRequest(location.url, { auth: o.auth, redirects: "all", headers, signal: o.signal, timeoutMs: o.timeoutMs });
    } catch (e) {
      if (e instanceof HubError && e.code === "network") throw new Transient(e.message);
      throw e;
    }
    response = r.response;
    if (!response.ok) r.done();
    if (response.status === 416) { await response.body?.cancel(); await rm(partial, { force: true }); throw new Transient(`${redact(r.url)} refused the range bytes=${start}-`); }
    if (!response.ok) {
      await response.body?.cancel();
      const msg = `${redact(r.url)} answered ${response.status}`;
      if (isRetryableStatus(response.status)) throw new Transient(msg, retryAfterMs(response));
      const code = response.status === 401 || response.status === 403 ? "unauthorized" : response.status === 404 ? "file-not-found" : "protocol";
      throw new HubError(code, `downloading ${o.what}: ${msg}`);
    }
    // a server that ignores Range (200) or answers another range starts the file over
    const range = response.headers.get("content-range");
    if (start > 0 && (response.status !== 206 || !range?.startsWith(`bytes ${start}-`))) start = 0;
    // a body whose length cannot make the size the hub announced is refused before a byte is read:
    // downloading it, failing the size check and retrying would fetch the whole file several times
    const length = response.headers.get("content-length");
    const encoded = (response.headers.get("content-encoding") ?? "identity").toLowerCase() !== "identity";
    if (length !== null && !encoded && Number(length) !== location.size - start) {
      r.done();
      await response.body?.cancel();
      throw new HubError("protocol", `downloading ${o.what}: ${redact(r.url)} announces ${length} bytes from byte ${start}, but the hub gave the file ${location.size} bytes (X-Linked-Size / Content-Length); one of them is wrong, so nothing was downloaded`);
    }
  }
  const hash = startHash(location);
  if (hash && start > 0) await hashPrefix(hash, partial);
  let fh;
  try {
    // written at each byte's own offset, never appended nor truncated: a download whose lock was
    // taken over while it was stopped (on another host or one without /proc, asleep past the heartbeat) and that then goes on
    // writes the same bytes where the taker wrote them, not after them (appended, they spoiled the
    // file the taker had verified and renamed)
    fh = await open(partial, constants.O_WRONLY | constants.O_CREAT);
  } catch (e) {
    r?.done();
    await response?.body?.cancel();
    throw diskError(e, o, partial, start);
  }
  let written = start;
  o.onBytes?.(written);
  try {
    if (response?.body) {
      r?.touch();
      try {
        for await (const chunk of response.body) {
          r?.touch();
          const bytes = chunk as Uint8Array;
          if (written + bytes.length > location.size) {
            throw new HubError("checksum", `${o.what}: the server sent more than the ${location.size} bytes it announced`);
          }
          // a write may store only part of the chunk (a disk filling up, a file size limit): the
          // rest is written again, and the error that follows is the disk's. Counting the whole
          // chunk let a file cut short at its last chunk pass as complete and verified.
          for (let at = 0; at < bytes.length; ) {
            let stored: number;
            try {
              stored = (await fh.write(bytes, at, bytes.length - at, written)).bytesWritten;
            } catch (e) {
              throw diskError(e, o, partial, written);
            }
            if (stored === 0) throw diskError(Object.assign(new Error("no space left on device"), { code: "ENOSPC" }), o, partial, written);
            at += stored;
            written += stored;
          }
          hash?.update(bytes);
          o.onBytes?.(written);
        }
      } catch (e) {
        if (e instanceof HubError) throw e;
        if (o.signal?.aborted) throw e;
        if (r?.stalled()) throw new Transient(`the server sent nothing for ${formatSeconds(o.timeoutMs)} after ${written} of ${location.size} bytes`);
        throw new Transient(`the connection broke after ${written} of ${location.size} bytes (${(e as Error).message})`);
      } finally {
        r?.done();
      }
    }
    try {
      await fh.sync();
    } catch (e) {
      throw diskError(e, o, partial, written);
    }
  } catch (e) {
    await fh.close().catch(() => undefined);
    if (e instanceof HubError && e.code !== "disk") await rm(partial, { force: true });
    throw e;
  }
  await fh.close();
  if (written !== location.size) throw new Transient(`the transfer ended after ${written} of ${location.size} bytes`);
  if (hash && location.checksum) {
    const got = hash.digest("hex");
    if (got !== location.checksum.hex) {
      await rm(partial, { force: true });
      if (start > 0 && mayRestart) throw new ResumedMismatch();
      const { algorithm, hex } = location.checksum;
      const name = algorithm === "sha256" ? "sha256" : "git blob sha1 (the ETag of a file stored in git)";
      throw new HubError("checksum", `${o.what}: ${name} mismatch (expected ${hex}, got ${got}); the corrupt download was deleted`);
    }
  }
}
