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
 *
 * `writeTimeoutMs` is the reply's whole allowance for keeping its writer waiting: the waits for
 * the client to take its bytes add up, and once they reach it the response is destroyed (which
 * cancels its generation). Each wait is time its sequences sit paused by the engine's
 * backpressure, their KV blocks held. A timer restarted at every write, as nginx's send_timeout
 * and the write timeout cpp-httplib applies under llama-server are, never cuts a reader that
 * takes a few kilobytes now and then: one taking 80 kB a second held a stream of two 250-token
 * choices with 20 logprobs each, and its two sequences, for over a minute. A client that keeps
 * up never waits, so it spends none of the allowance however long its reply runs.
 */
export class SseWriter {
  private closed = false;
  /** the caller answers instead (release) */
  private released = false;
  /** how long this reply has kept its writer waiting for the client so far, in all (ms) */
  private waitedMs = 0;
  /** fires once the stream has been silent for the ping interval (re-armed by every write) */
  private readonly ping: NodeJS.Timeout | undefined;

  /**
   * The status line and headers wait for the first event or keep-alive comment: a request refused
   * while it waits for room (a shutdown's 503) is then answered with its own status and
   * Retry-After, which the openai clients retry and a proxy hands to another replica, instead of a
   * 200 whose stream holds the error. `pingMs` 0: no keep-alive comments.
   */
  constructor(private readonly res: ServerResponse, private readonly headers: Readonly<Record<string, string>> = {}, private readonly writeTimeoutMs = DEFAULT_WRITE_TIMEOUT_MS, pingMs = DEFAULT_SSE_PING_MS) {
    res.on("close", () => {
      this.closed = true;
      clearTimeout(this.ping);
    });
    if (pingMs > 0) this.ping = setTimeout(() => this.keepAlive(), pingMs).unref();
  }

  /** whether the status line and headers went out (with the first event or comment) */
  get begun(): boolean {
    return this.res.headersSent;
  }

  private begin(): void {
    if (this.res.headersSent) return;
    // no Connection header of its own: node writes keep-alive, or close once the server drains
    // (an explicit keep-alive would override that and invite a request onto a closing connection)
    this.res.writeHead(200, { ...this.headers, "Content-Type": "text/event-stream; charset=utf-8", "Cache-Control": "no-cache", "X-Accel-Buffering": "no" });
  }

  private keepAlive(): void {
    if (this.gone) return;
    this.begin();
    // a client that has bytes waiting unread is not idle for lack of them: the write timeout, not
    // a comment piled on top, decides about it
    if (!this.res.writableNeedDrain) this.res.write(": keep-alive\n\n");
    this.ping!.refresh();
  }

  get gone(): boolean {
    return this.closed || this.res.destroyed || this.released;
  }

  /** one `data:` event with the JSON value (or the literal text, for [DONE]) */
  send(value: unknown): Promise<boolean> {
    if (this.gone) return Promise.resolve(false);
    this.begin();
    const text = typeof value === "string" ? value : JSON.stringify(value);
    this.res.write(`data: ${text}\n\n`);
    this.ping?.refresh();
    // (at once when nothing waits: no time spent)
    if (this.res.destroyed || !this.res.writableNeedDrain) return drained(this.res, this.writeTimeoutMs);
    const began = performance.now();
    return drained(this.res, Math.max(1, this.writeTimeoutMs - this.waitedMs)).then((taken) => {
      this.waitedMs += performance.now() - began;
      return taken;
    });
  }

  /** stops the writer before it began, leaving the answer to the caller (an error with its own status) */
  release(): void {
    clearTimeout(this.ping);
    this.released = true;
  }

  end(): void {
    clearTimeout(this.ping);
    if (this.gone) return;
    this.begin();
    this.res.end();
  }
}
