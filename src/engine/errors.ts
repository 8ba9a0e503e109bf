/**
 * A request the engine refuses at submit, naming the option at fault (the library's name:
 * "prompt", "maxTokens", "n", "numBeams", ...) so that callers such as the server can answer
 * with the parameter without reading the message. `code` marks a request too long for the
 * context or the KV cache.
 */
export class RequestError extends RangeError {
  constructor(
    message: string,
    readonly option: string,
    readonly code?: "context_length_exceeded",
  ) {
    super(message);
    this.name = "RequestError";
  }
}
