import type { ServerResponse } from "node:http";

/**
 * Server-sent events on a response, with backpressure: `send` resolves once the socket has taken
 * the event (it waits for "drain" when the kernel buffer is full), so a slow reader holds the
 * writer back instead of having events pile up in memory. Resolves false once the client is gone.
 */
export class SseWriter {
  private closed = false;

  constructor(private readonly res: ServerResponse, headers: Readonly<Record<string, string>> = {}) {
    res.writeHead(200, { ...headers, "Content-Type": "text/event-stream; charset=utf-8", "Cache-Control": "no-cache", Connection: "keep-alive", "X-Accel-Buffering": "no" });
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
    if (this.res.write(`data: ${text}\n\n`)) return Promise.resolve(true);
    return new Promise((resolve) => {
      const done = (ok: boolean) => {
        this.res.off("drain", onDrain);
        this.res.off("close", onClose);
        resolve(ok);
      };
      const onDrain = () => done(true);
      const onClose = () => done(false);
      this.res.on("drain", onDrain);
      this.res.on("close", onClose);
    });
  }

  end(): void {
    if (!this.gone) this.res.end();
  }
}
