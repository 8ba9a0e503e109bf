/**
 * The few Web APIs the browser build uses that the project's compile (lib ES2022 + Node's
 * types, no DOM) does not declare, looked up on globalThis so that nothing here is a global
 * declaration that the Node code could see.
 */

export interface WebWorker {
  postMessage(message: unknown, transfer?: unknown[]): void;
  terminate(): void;
  onmessage: ((e: { data: unknown }) => void) | null;
  onerror: ((e: { message?: string; preventDefault?(): void }) => void) | null;
  /** a message from the worker that could not be read here (deserialized): it is lost */
  onmessageerror: (() => void) | null;
}

export type WorkerConstructor = new (url: string | URL, options?: { type?: "module" | "classic"; name?: string }) => WebWorker;

/** the scope a (dedicated) worker's code runs in */
export interface WorkerScope {
  postMessage(message: unknown, transfer?: unknown[]): void;
  onmessage: ((e: { data: unknown }) => void) | null;
  /** a message from the page that could not be read in the worker: it is lost */
  onmessageerror: (() => void) | null;
  close(): void;
}

export interface SyncXHR {
  open(method: string, url: string, async: false): void;
  setRequestHeader(name: string, value: string): void;
  responseType: string;
  send(): void;
  readonly status: number;
  readonly statusText: string;
  readonly response: ArrayBuffer | null;
  getResponseHeader(name: string): string | null;
}

/** one cache of the Cache API (the part of it the model cache uses) */
export interface WebCache {
  match(url: string): Promise<Response | undefined>;
  put(url: string, response: Response): Promise<void>;
  delete(url: string): Promise<boolean>;
  keys(): Promise<readonly { readonly url: string }[]>;
}

/** the Web Locks API (secure contexts): a lock held by a context is released when the context ends, however it ends */
export interface WebLocks {
  /** calls `hold` once the lock `name` is granted, and holds it until the promise `hold` returns settles */
  request(name: string, hold: () => Promise<unknown>): Promise<unknown>;
}

interface WebGlobals {
  Worker?: WorkerConstructor;
  navigator?: { locks?: WebLocks };
  /** the Cache API (secure contexts only: https, localhost) */
  caches?: { open(name: string): Promise<WebCache> };
  XMLHttpRequest?: new () => SyncXHR;
  FileReaderSync?: new () => { readAsArrayBuffer(blob: Blob): ArrayBuffer };
  crossOriginIsolated?: boolean;
  /** false on http:// from a host other than localhost: no Cache API, and COOP/COEP give no isolation */
  isSecureContext?: boolean;
  location?: { readonly href: string };
}

export const web = globalThis as unknown as WebGlobals;

/** the Web API `name`, or an error saying that this context lacks it */
export function need<K extends keyof WebGlobals>(name: K, why: string): NonNullable<WebGlobals[K]> {
  const v = web[name];
  if (v === undefined) throw new Error(`${why}: this context has no ${name} (run it in a dedicated Web Worker)`);
  return v as NonNullable<WebGlobals[K]>;
}

/** WebAssembly.compileStreaming and compile, which the project's WebAssembly declarations leave out */
export const wasmCompile = WebAssembly as unknown as {
  compileStreaming?(response: Response | Promise<Response>): Promise<WebAssembly.Module>;
  compile(bytes: ArrayBuffer): Promise<WebAssembly.Module>;
};

/** the URL relative URLs resolve against here (the page's or the worker script's) */
export const baseHref = (): string => web.location?.href ?? "http://localhost/";
