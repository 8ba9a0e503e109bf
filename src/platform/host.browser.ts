/**
 * The browser's side of the platform seam (see host.ts, the Node side, for the contract). No
 * local file system: files come from a Blob or a URL (src/browser/files.ts), so openFile
 * refuses a path; memory and cores come from `navigator`; there is no environment.
 */
import type { RandomAccessFile } from "./host.js";

export type { RandomAccessFile } from "./host.js";

interface BrowserNavigator {
  readonly hardwareConcurrency?: number;
  /** GiB, rounded down to a power of two and capped at 8 by the browser (Chromium only) */
  readonly deviceMemory?: number;
}

const nav = (globalThis as { navigator?: BrowserNavigator }).navigator;

export function fileFromDescriptor(fd: number): RandomAccessFile {
  throw new Error(`file descriptor ${fd}: there are no file descriptors in the browser (load a model from a URL or a File)`);
}

export function openFile(path: string): RandomAccessFile {
  throw new Error(`${path}: there is no local file system in the browser (load a model from a URL or a File)`);
}

/** navigator.deviceMemory where the browser tells it, else 4 GiB (one wasm32 memory's worth) */
export function totalMemoryBytes(): number {
  return (nav?.deviceMemory ?? 4) * 2 ** 30;
}

/** the browser says nothing of free memory: its total as totalMemoryBytes() guesses it */
export function freeMemoryBytes(): number {
  return totalMemoryBytes();
}

export function cpuCount(): number {
  return Math.max(1, nav?.hardwareConcurrency ?? 1);
}

export function envVar(_name: string): string | undefined {
  return undefined;
}

/** a turn for the event loop: a message to ourselves (setTimeout(0) is clamped to 4 ms once nested) */
export function yieldToEventLoop(): Promise<void> {
  return new Promise<void>((resolve) => {
    const { port1, port2 } = new MessageChannel();
    // a Web MessagePort (Node's types describe Node's, which has no onmessage)
    (port1 as unknown as { onmessage: (() => void) | null }).onmessage = () => {
      port1.close();
      resolve();
    };
    port2.postMessage(undefined);
  });
}
