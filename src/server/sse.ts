import type { ServerResponse } from "node:http";
import { DEFAULT_WRITE_TIMEOUT_MS, drained } from "./http.js";

/**
 * How long a stream may go without a byte before it gets an SSE comment (`: keep-alive`, which
 * SSE clients skip): a request waiting in the queue, in a long prefill or paused by preemption
 * sends nothing until its next token, and proxies and clients cut a response silent for longer
 * than their idle read timeout (GCP's load balancer 30 s, nginx's proxy_read_timeout and AWS ALB
 * 60 s). 15 s is the spec's suggestion; llama-server's --sse-ping-interval sends ":" lines the same way.
 */
export const DEFAULT_SSE_PING_MS = 15_000;

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
  /** fires once the stream has been silent for the ping interval (re-armed by every write) */
  private readonly ping: NodeJS.Timeout | undefined;

  /** `pingMs` 0: no keep-alive comments */
  constructor(private readonly res: ServerResponse, headers: Readonly<Record<string, string>> = {}, private readonly writeTimeoutMs = DEFAULT_WRITE_TIMEOUT_MS, pingMs = DEFAULT_SSE_PING_MS) {
    // no Connection header of its own: node writes keep-alive, or close once the server drains
    // (an explicit keep-alive would override that and invite a request onto a closing connection)
    res.writeHead(200, { ...headers, "Content-Type": "text/event-stream; charset=utf-8", "Cache-Control": "no-cache", "X-Accel-Buffering": "no" });
    res.flushHeaders();
    res.on("close", () => {
      this.closed = true;
      clearTimeout(this.ping);
    });
    if (pingMs > 0) this.ping = setTimeout(() => this.keepAlive(), pingMs).unref();
  }

  private keepAlive(): void {
    if (this.gone) return;
    // a client that has bytes waiting unread is not idle for lack of them: the write timeout, not
    // a comment piled on top, decides about it
    if (!this.res.writableNeedDrain) this.res.write(": keep-alive\n\n");
    this.ping!.refresh();
  }

  get gone(): boolean {
    return this.closed || this.res.destroyed;
  }

  /** one `data:` event with the JSON value (or the literal text, for [DONE]) */
  send(value: unknown): Promise<boolean> {
    if (this.gone) return Promise.resolve(false);
    const text = typeof value === "string" ? value : JSON.stringify(value);
    this.res.write(`data: ${text}\n\n`);
    this.ping?.refresh();
    return drained(this.res, this.writeTimeoutMs);
  }

  end(): void {
    clearTimeout(this.ping);
    if (!this.gone) this.res.end();
  }
}
