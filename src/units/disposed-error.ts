/**
 * A call on a model (or pipeline) after its dispose(), or a request still running when it was
 * disposed: a class of its own, so that a caller shutting down tells these from real failures
 * without reading the message.
 */
export class DisposedError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "DisposedError";
  }
}
