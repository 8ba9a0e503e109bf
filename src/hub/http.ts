import { HubError } from "./errors.js";

/** Who may see the token: requests to exactly this origin carry it, nothing else does. */
export interface HubAuth {
  readonly token?: string;
  /** origin (scheme://host:port) of the configured endpoint */
  readonly origin: string;
}

export interface HubRequestOptions {
  method?: "GET" | "HEAD";
  headers?: Record<string, string>;
  auth: HubAuth;
  /** "all": follow every redirect; "relative": only same-origin ones (a renamed repo), stop at a CDN hop */
  redirects: "all" | "relative";
  signal?: AbortSignal;
  /**
   * a stalled server is abandoned after this long without progress (huggingface_hub's 10 s read
   * timeout): no response headers, or, once the caller reads the body, no chunk (see `touch`)
   */
  timeoutMs?: number;
}

export interface HubResponse {
  readonly response: Response;
  /** the URL that answered (after the redirects that were followed) */
  readonly url: string;
  /** restarts the stall timer: call it for each body chunk read */
  touch(): void;
  /** stops the stall timer once the body has been read (or given up) */
  done(): void;
  /** true when the request was aborted because the server stalled (not by the caller's signal) */
  stalled(): boolean;
}

/**
 * default stall timeout in ms: huggingface_hub's HF_HUB_ETAG_TIMEOUT / HF_HUB_DOWNLOAD_TIMEOUT
 * (seconds; unset, empty or 0 means 10). A value that is not a number of seconds is an error, as
 * Python's int() of it is: a typo silently meant 10 s on the slow link it was set for.
 */
export function timeoutFromEnv(env: NodeJS.ProcessEnv, name: "HF_HUB_ETAG_TIMEOUT" | "HF_HUB_DOWNLOAD_TIMEOUT"): number {
  const text = env[name]?.trim();
  if (!text) return 10_000;
  const v = Number(text);
  if (!Number.isFinite(v) || v < 0) throw new Error(`${name}: "${env[name]}" is not a number of seconds (expected e.g. 30; unset means 10)`);
  return v > 0 ? v * 1000 : 10_000;
}

/** `1.5 s` */
export function formatSeconds(ms: number): string {
  return `${Number((ms / 1000).toFixed(3))} s`;
}

const MAX_REDIRECTS = 10;

/**
 * One request with manual redirects, so the Authorization header is decided per hop: it goes
 * to the endpoint's origin only and is dropped when a redirect leaves it (a CDN, another host).
 */
export async function hubRequest(url: string, options: HubRequestOptions): Promise<HubResponse> {
  let current = url;
  for (let hop = 0; ; hop++) {
    const headers: Record<string, string> = { "user-agent": "tsllm", ...options.headers };
    if (options.auth.token && new URL(current).origin === options.auth.origin) headers.authorization = `Bearer ${options.auth.token}`;
    // without a timer, fetch waits for a silent server for minutes (undici's 300 s) on every try
    const timeoutMs = options.timeoutMs ?? 10_000;
    const stall = new AbortController();
    let timer: NodeJS.Timeout | undefined;
    const touch = () => {
      clearTimeout(timer);
      timer = setTimeout(() => stall.abort(new Error(`no data in ${formatSeconds(timeoutMs)}`)), timeoutMs);
      timer.unref();
    };
    const done = () => clearTimeout(timer);
    const stalled = () => stall.signal.aborted && !options.signal?.aborted;
    const signal = options.signal ? AbortSignal.any([options.signal, stall.signal]) : stall.signal;
    let response: Response;
    touch();
    try {
      response = await fetch(current, { method: options.method ?? "GET", headers, redirect: "manual", signal });
    } catch (e) {
      done();
      if (stalled()) throw new HubError("network", `${options.method ?? "GET"} ${redact(current)}: no response in ${formatSeconds(timeoutMs)}`);
      throw new HubError("network", `${options.method ?? "GET"} ${redact(current)} failed: ${describeNetworkError(e)}`);
    }
    const location = response.headers.get("location");
    if (response.status < 300 || response.status >= 400 || !location) return { response, url: current, touch, done, stalled };
    const next = new URL(location, current).href;
    if (options.redirects === "relative" && new URL(next).origin !== new URL(current).origin) return { response, url: current, touch, done, stalled };
    done();
    await response.body?.cancel();
    if (hop >= MAX_REDIRECTS) throw new HubError("protocol", `${redact(url)}: more than ${MAX_REDIRECTS} redirects`);
    current = next;
  }
}

/**
 * The body of a metadata response as text, within the stall timeout; a connection that breaks or
 * stalls while it is read is a network failure (retried), as one before the headers is.
 */
export async function readText(r: HubResponse, method = "GET"): Promise<string> {
  r.touch();
  try {
    return await r.response.text();
  } catch (e) {
    throw new HubError("network", `${method} ${redact(r.url)}: ${r.stalled() ? "the server stopped sending" : "the connection broke"} while the answer was read (${describeNetworkError(e)})`);
  } finally {
    r.done();
  }
}

/** the message of a fetch failure, with its cause (ECONNREFUSED, ...) */
export function describeNetworkError(e: unknown): string {
  const err = e as Error & { cause?: { code?: string; message?: string } };
  const cause = err.cause?.code ?? err.cause?.message;
  return cause ? `${err.message} (${cause})` : String(err.message ?? e);
}

/** URLs are printed without their query string (signed CDN URLs carry credentials there) */
export function redact(url: string): string {
  const u = new URL(url);
  return `${u.origin}${u.pathname}${u.search ? "?…" : ""}`;
}

/** strips W/ and quotes: `W/"abc"` -> `abc` (how huggingface_hub normalizes ETags) */
export function normalizeEtag(etag: string | null): string | undefined {
  if (!etag) return undefined;
  return etag.replace(/^W\//, "").replace(/^"|"$/g, "");
}

/** the longest Retry-After honoured per wait; a rate limit asking more is waited out this long per try */
export const MAX_RETRY_AFTER_MS = 60_000;

/** Retry-After (delta-seconds or an HTTP date) in ms, capped; undefined when absent or unreadable */
export function retryAfterMs(res: Response): number | undefined {
  const v = res.headers.get("retry-after")?.trim();
  if (!v) return undefined;
  const ms = /^\d+$/.test(v) ? Number(v) * 1000 : Date.parse(v) - Date.now();
  return Number.isFinite(ms) ? Math.min(Math.max(ms, 0), MAX_RETRY_AFTER_MS) : undefined;
}

/** transient failures worth another try */
export function isRetryableStatus(status: number): boolean {
  return status === 408 || status === 429 || status >= 500;
}

export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    // an abort that came while the caller was not sleeping (between a lock's attempts, a retry's
    // requests) has fired its event already: listening for it would wait on as if never aborted
    if (signal?.aborted) { reject(signal.reason); return; }
    const onAbort = () => { clearTimeout(t); reject(signal!.reason); };
    // a sleep that ends removes its listener: one long-lived signal over many waits must not pile them up
    const t = setTimeout(() => { signal?.removeEventListener("abort", onAbort); resolve(); }, ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}
