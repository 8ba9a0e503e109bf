import type { ServerResponse } from "node:http";
import { DEFAULT_WRITE_TIMEOUT_MS, drained } from "./http.js";

/**
 * Server-sent events on a response, with backpressure: `send` resolves once the socket has taken
 * the event (it waits for "drain" when the kernel buffer is full), so a slow reader holds the
 * writer back instead of having events pile up in memory. Resolves false once the client is gone.
 * A client that takes nothing for `writeTimeoutMs` while an event waits is cut off (the response
 * destroyed, which cancels its generation): a reader that never reads would otherwise hold its
 * sequences, paused by the engine's backpressure, for as long as it keeps the connection open.
 */
export class SseWriter {
  private closed = false;

  constructor(private readonly res: ServerResponse, headers: Readonly<Record<string, string>> = {}, private readonly writeTimeoutMs = DEFAULT_WRITE_TIMEOUT_MS) {
    // no Connection header of its own: node writes keep-alive, or close once the server drains
    // (an explicit keep-alive would override that and invite a request onto a closing connection)
    res.writeHead(200, { ...headers, "Content-Type": "text/event-stream; charset=utf-8", "Cache-Control": "no-cache", "X-Accel-Buffering": "no" });
    res.flushHeaders();
    res.on("close", () => (this.closed = true));
  }

  get gone(): boolean {
    return this.closed || this.res.destroyed;
  }

  /** one `data:` event with the JSON value (or the literal text, for [DONE]) */
  send(value: unknown): Promise<boolean> {
    if (this.gone) return Promise.resolve(false);
    const text = typeof value === "string" ? value : JSON.stringify(value);
    this.res.write(`data: ${text}\n\n`);
    return drained(this.res, this.writeTimeoutMs);
  }

  end(): void {
    if (!this.gone) this.res.end();
  }
}
