/**
 * The platform seam: what the engine needs from its host that Node and a browser give in
 * different ways (positioned file reads, memory and core counts, environment variables).
 * This file is the Node implementation; the browser build (scripts/build-browser.mjs) resolves
 * every import of a `host.js` to the `host.browser.ts` beside it, which has the same exports.
 * Keep the two in step: test/browser-build.test.ts compares their export lists.
 */
import { closeSync, constants, fstatSync, openSync, readSync } from "node:fs";
import { availableParallelism, freemem, totalmem } from "node:os";

/** A file read by position, synchronously (a descriptor in Node; a Blob or an HTTP resource in a browser worker). */
export interface RandomAccessFile {
  /** bytes in the file */
  readonly size: number;
  /** reads up to `length` bytes at file position `position` into `into[offset..]`; returns how many were read (0 at the end) */
  read(into: Uint8Array, offset: number, length: number, position: number): number;
  close(): void;
}

/** an open file descriptor as a RandomAccessFile (close() closes it) */
export function fileFromDescriptor(fd: number): RandomAccessFile {
  return {
    size: fstatSync(fd).size,
    read: (into, offset, length, position) => readSync(fd, into, offset, length, position),
    close: () => closeSync(fd),
  };
}

/**
 * opens a local file for positioned reads. Only a regular file (or a folder, whose read fails
 * naming it) is read: a FIFO, socket or device a model folder's symlink leads to would block the
 * open or the reads forever, or (/dev/zero) never end. O_NONBLOCK lets a FIFO open without a writer.
 */
export function openFile(path: string): RandomAccessFile {
  const fd = openSync(path, constants.O_RDONLY | (constants.O_NONBLOCK ?? 0));
  const stat = fstatSync(fd);
  if (!stat.isFile() && !stat.isDirectory()) {
    closeSync(fd);
    const kind = stat.isFIFO() ? "a FIFO (named pipe)" : stat.isSocket() ? "a socket" : stat.isCharacterDevice() ? "a character device" : "a block device";
    throw Object.assign(new Error(`is ${kind}, not a regular file`), { code: "ENOTREG", path });
  }
  return { size: stat.size, read: (into, offset, length, position) => readSync(fd, into, offset, length, position), close: () => closeSync(fd) };
}

/** bytes of RAM on this machine */
export function totalMemoryBytes(): number {
  return totalmem();
}

/** bytes of RAM free for a new allocation now (the kernel's MemAvailable on Linux), within this process's cgroup limit where it has one */
export function freeMemoryBytes(): number {
  const limit = process.constrainedMemory?.() ?? 0;
  const free = freemem();
  return limit > 0 ? Math.min(free, Math.max(0, limit - process.memoryUsage.rss())) : free;
}

/** logical cores this process may use */
export function cpuCount(): number {
  return availableParallelism();
}

/** an environment variable (undefined where the host has none) */
export function envVar(name: string): string | undefined {
  return process.env[name];
}

/** a turn for the event loop: timers and I/O run before the promise resolves */
export function yieldToEventLoop(): Promise<void> {
  return new Promise<void>((resolve) => setImmediate(resolve));
}
