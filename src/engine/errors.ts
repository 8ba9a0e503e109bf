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

/**
 * What a caller of the library (the server, the command line) calls the library's remedies that
 * the engine's refusals name: the token limit as that caller names it (`max_tokens`,
 * `--max-tokens`), and what it offers where the library says "raise kvCacheBytes" or "use a
 * larger contextSize", which its users cannot set by those names.
 */
export interface RefusalTerms {
  /** the token limit (the library's maxTokens) */
  readonly maxTokens: string;
  /** in place of "lower maxTokens or raise kvCacheBytes": a KV cache too small for the request */
  readonly kvCacheTooSmall: string;
  /** in place of "use a larger contextSize or a shorter prompt": a prompt past the context */
  readonly contextTooSmall: string;
}

/** the remedies as the engine's refusals word them (engine.ts, scheduler.ts) */
const KV_CACHE_REMEDY = "lower maxTokens or raise kvCacheBytes";
const CONTEXT_REMEDY = "use a larger contextSize or a shorter prompt";

/** an engine refusal's message in a caller's terms: the library's option names replaced by what that caller's users set */
export function refusalInTerms(message: string, terms: RefusalTerms): string {
  return message
    .replace(/\+ maxTokens (\d+)/, (_, n: string) => `+ ${terms.maxTokens} ${n}`)
    .replace(KV_CACHE_REMEDY, () => terms.kvCacheTooSmall)
    .replace(CONTEXT_REMEDY, () => terms.contextTooSmall);
}
