import { OptionError } from "../units/index.js";

/**
 * A request the engine refuses at submit, naming the option at fault (the library's name:
 * "prompt", "maxTokens", "n", "numBeams", ...) so that callers such as the server can answer
 * with the parameter without reading the message. `code` marks a request too long for the
 * context or the KV cache. An OptionError, as every refused option is.
 */
export class RequestError extends OptionError {
  constructor(
    message: string,
    override readonly option: string,
    readonly code?: "context_length_exceeded",
  ) {
    super(message, option);
    this.name = "RequestError";
  }
}
