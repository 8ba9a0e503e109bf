import { realpathSync, rmSync, statSync } from "node:fs";
import { open, rename, rm, type FileHandle } from "node:fs/promises";
import { basename, dirname, join } from "node:path";
import { keepDefaultSignalAction, signalHandledElsewhere } from "../platform/signals.js";

/**
 * Throws when `output` is the same file as one of `inputs` (the same inode: a hard link or a
 * symlink to it counts), before anything is written: writing it would destroy what is being read.
 */
export function assertNotAnInput(output: string, inputs: readonly string[]): void {
  const out = statOrUndefined(output);
  if (!out) return;
  for (const input of inputs) {
    const s = statOrUndefined(input);
    if (s && s.dev === out.dev && s.ino === out.ino) {
      throw new Error(`${output}: the output is one of the input files (${input}); write it to another path`);
    }
  }
}

/**
 * Writes a file so that nothing at `path` is touched until the new content is complete: the
 * bytes go to a temporary file in the same folder, which is renamed over `path` only after
 * `write` has finished (a failure removes it and leaves `path` as it was). A symlink is followed
 * (the file it leads to is replaced, the link kept); a device or FIFO is written directly.
 * Refuses a `path` that is one of `inputs`.
 */
export async function writeOutputFile(path: string, write: (fh: FileHandle) => Promise<void>, inputs: readonly string[] = []): Promise<void> {
  assertNotAnInput(path, inputs);
  // a folder there would fail only the rename at the end, after all the writing
  if (isFolder(path)) throw outputError(path, "EISDIR");
  // An existing `path` is written where it leads, as llama-quantize's fopen and a shell's `>` write
  // it: renaming over it replaced a symlink by a file (the file it named left as it was) and, as
  // root, /dev/null or /dev/stdout by a regular file in /dev. A device or a FIFO is no file that a
  // temporary one could stand in for: its bytes go to it directly, in the writer's order.
  const target = existingTarget(path);
  if (target && !target.isFile) return writeInPlace(path, target.path, write);
  const finalPath = target?.path ?? path;
  const tmp = join(dirname(finalPath), `.${basename(finalPath)}.${process.pid}-${Math.random().toString(36).slice(2, 10)}.tmp`);
  // The signal handlers go in before the file can exist: open() creates it on a libuv thread as
  // soon as it is called, and a Ctrl-C between that and the handlers took the default course and
  // left it behind (with open() first, a main thread descheduled between the two statements on a
  // busy machine: the likely cause of a temporary file that outlived a SIGINT in CI). So the
  // handlers wait on `creation`, which the open settles; it never rejects (a failed open is the
  // caller's error below, not an unhandled rejection here)
  let settleCreation!: (opening: Promise<FileHandle>) => void;
  const creation = new Promise<FileHandle>((resolve) => (settleCreation = resolve)).catch(() => undefined);
  const stopCleanup = removeOnSignal(tmp, creation);
  const opening = open(tmp, "wx");
  settleCreation(opening);
  let fh: FileHandle;
  try {
    fh = await opening;
  } catch (e) {
    stopCleanup();
    throw outputError(path, (e as NodeJS.ErrnoException).code, e, dirname(finalPath));
  }
  let closed = false;
  try {
    await write(fh);
    await fh.close();
    closed = true;
    await rename(tmp, finalPath).catch((e: NodeJS.ErrnoException) => { throw outputError(path, e.code, e, dirname(finalPath)); });
  } catch (e) {
    if (!closed) await fh.close().catch(() => undefined);
    await rm(tmp, { force: true });
    throw writeFailure(path, e, dirname(finalPath));
  } finally {
    stopCleanup();
  }
}

/**
 * `path` resolved through its symlinks when it exists, and whether that is a regular file. Asked
 * of stat first, and only a file resolved: /dev/stdout on a pipe leads through /proc/self/fd/1 to
 * "pipe:[N]", which realpath names as a path that is not there (Node's throws, the system's gives
 * /proc/PID/fd/pipe:[N]); taken for "nothing there", it had a temporary file renamed over
 * /dev/stdout itself (as root), and the GGUF never reached the pipe. Anything but a file is
 * opened through `path`, which the system follows to the pipe.
 */
function existingTarget(path: string): { path: string; isFile: boolean } | undefined {
  let isFile: boolean;
  try {
    isFile = statSync(path).isFile();
  } catch {
    return undefined; // nothing there yet (or a dangling link, which the rename replaces as before)
  }
  return { path: isFile ? realpathSync(path) : path, isFile };
}

/** writes straight into a device or FIFO (`path` as the user gave it, `target` where it leads) */
async function writeInPlace(path: string, target: string, write: (fh: FileHandle) => Promise<void>): Promise<void> {
  const fh = await open(target, "w").catch((e: NodeJS.ErrnoException) => { throw outputError(path, e.code, e); });
  try {
    await write(fh);
  } catch (e) {
    throw writeFailure(path, e, dirname(target));
  } finally {
    await fh.close().catch(() => undefined);
  }
}

/**
 * A write's failure said of `path`: a disk that fills up mid-write, not as a bare "ENOSPC: ...,
 * write"; a writer that seeks (positioned writes) into a pipe. Other errors as they are.
 */
function writeFailure(path: string, e: unknown, folder: string): unknown {
  const io = e as NodeJS.ErrnoException;
  if (!(e instanceof Error) || typeof io.syscall !== "string" || io.code === undefined) return e;
  if (io.code === "ESPIPE") return new Error(`${path}: cannot write the output: it is a pipe this writer cannot seek in; give a file`, { cause: e });
  return WRITE_FAILURES.has(io.code) ? outputError(path, io.code, e, folder) : e;
}

/** errors of the file system while the bytes are written (a full disk, a quota, a size limit, a failing device) */
const WRITE_FAILURES = new Set(["ENOSPC", "EDQUOT", "EFBIG", "EIO"]);

/**
 * Why `path` cannot be written, named by `path` and its folder (`folder`: where a symlink's target
 * is): the system's own message names the temporary file beside it, which the user never asked
 * for. Unknown codes keep that message.
 */
function outputError(path: string, code: string | undefined, cause?: unknown, folder = dirname(path)): Error {
  const why =
    code === "ENOENT" ? `the folder ${folder} does not exist`
    : code === "ENOTDIR" ? `${folder} is not a folder`
    : code === "EISDIR" ? "it is a folder, not a file"
    : code === "EACCES" || code === "EPERM" ? `no permission to create files in ${folder}`
    : code === "EROFS" ? `${folder} is on a read-only file system`
    : code === "ENOSPC" ? `no space left on the device of ${folder} (ENOSPC); nothing was left there`
    : code === "EDQUOT" ? `the disk quota for ${folder} is used up (EDQUOT); nothing was left there`
    : code === "EFBIG" ? "the file grew larger than this process or file system allows (EFBIG); nothing was left there"
    : code === "EIO" ? `an I/O error on the device of ${folder} (EIO); nothing was left there`
    // /dev/stdout when stdout is a socket (a process another program started): no name opens one
    : code === "ENXIO" ? "it leads to a socket or a device with nothing behind it (ENXIO), which cannot be opened by name; give a file"
    : undefined;
  return new Error(`${path}: cannot write the output: ${why ?? (cause as Error).message}`, { cause });
}

/**
 * While a temporary file is being written, SIGINT / SIGTERM (Ctrl-C, a killed job) remove it
 * first — once its creation (`created`) has settled, so that a file still being created is not
 * missed — then take their usual course (the process exits) unless someone else listens for them.
 */
function removeOnSignal(tmp: string, created: Promise<unknown>): () => void {
  // first: removing these handlers, the last listeners when no download ran (src/cli/interrupt.ts
  // installs it too), closed the signal handle and dropped a signal caught but not yet delivered
  keepDefaultSignalAction();
  const signals = ["SIGINT", "SIGTERM"] as const;
  const handlers = signals.map((sig) => {
    const h = (): void => {
      stop();
      void created.catch(() => undefined).then(() => {
        rmSync(tmp, { force: true });
        if (!signalHandledElsewhere(sig)) process.kill(process.pid, sig);
      });
    };
    process.once(sig, h);
    return [sig, h] as const;
  });
  const stop = (): void => {
    for (const [sig, h] of handlers) process.removeListener(sig, h);
  };
  return stop;
}

function isFolder(path: string): boolean {
  try {
    return statSync(path).isDirectory();
  } catch {
    return false;
  }
}

function statOrUndefined(path: string): { dev: number; ino: number } | undefined {
  try {
    const s = statSync(path);
    return s.isFile() ? { dev: s.dev, ino: s.ino } : undefined;
  } catch {
    return undefined;
  }
}
