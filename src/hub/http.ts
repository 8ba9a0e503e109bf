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
}

export interface HubResponse {
  readonly response: Response;
  /** the URL that answered (after the redirects that were followed) */
  readonly url: string;
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
    let response: Response;
    try {
      response = await fetch(current, { method: options.method ?? "GET", headers, redirect: "manual", signal: options.signal });
    } catch (e) {
      throw new HubError("network", `${options.method ?? "GET"} ${redact(current)} failed: ${describeNetworkError(e)}`);
    }
    const location = response.headers.get("location");
    if (response.status < 300 || response.status >= 400 || !location) return { response, url: current };
    const next = new URL(location, current).href;
    if (options.redirects === "relative" && new URL(next).origin !== new URL(current).origin) return { response, url: current };
    await response.body?.cancel();
    if (hop >= MAX_REDIRECTS) throw new HubError("protocol", `${redact(url)}: more than ${MAX_REDIRECTS} redirects`);
    current = next;
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

/** transient failures worth another try */
export function isRetryableStatus(status: number): boolean {
  return status === 408 || status === 429 || status >= 500;
}

export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    const t = setTimeout(resolve, ms);
    signal?.addEventListener("abort", () => { clearTimeout(t); reject(signal.reason); }, { once: true });
  });
}
