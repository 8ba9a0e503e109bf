import { KV_ALLOCATION_REMEDY } from "../cache/index.js";
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
 * larger contextSize", which its users cannot set by those names. A command that sizes its load
 * by other flags than generate's (tsllm bench: its context is --prompt-tokens + --gen-tokens)
 * words the load plan's proposals (checkMemoryPlan's "--ctx-size N", "--quantize Q") too. A
 * term left out keeps the library's words.
 */
export interface RefusalTerms {
  /** the token limit (the library's maxTokens) */
  readonly maxTokens?: string;
  /** in place of "lower maxTokens or raise kvCacheBytes": a KV cache too small for the request */
  readonly kvCacheTooSmall?: string;
  /** in place of "use a larger contextSize or a shorter prompt": a prompt past the context */
  readonly contextTooSmall?: string;
  /**
   * in place of the load plan's "--ctx-size N" (and the pool's "contextSize N (--ctx-size)"): what
   * loads a context of at most `tokens`; undefined where nothing the caller sets does (that
   * proposal is left out)
   */
  readonly contextSize?: (tokens: number) => string | undefined;
  /** in place of the load plan's "--quantize Q": what loads the weights as `type` */
  readonly quantize?: (type: string) => string;
  /** in place of the KV pool's "maxSequences N (--parallel)": what runs `n` requests at once */
  readonly maxSequences?: (n: number) => string;
  /** in place of the KV pool's "kvCacheBytes N (--kv-memory; ...)": what gives the KV pool `bytes` (`note`: what the parentheses say past the flag, e.g. "655.4 kB, which fits in the free memory"; "" for none) */
  readonly kvCacheBytes?: (bytes: number, note: string) => string;
  /** in place of the K/V-array refusal's "cacheTypeK / cacheTypeV": the cache types' names */
  readonly cacheTypes?: string;
  /**
   * in place of the K/V-array refusal's pool "(contextSize N)" and the plan's "(kvCacheBytes N,
   * --kv-memory)": how the caller's user set the context of `tokens` (tsllm bench: its --prompt-tokens
   * + --gen-tokens) and the KV budget of `bytes`, described, not proposed
   */
  readonly context?: (tokens: number) => string;
  readonly kvBudget?: (bytes: number) => string;
  /** in place of the margin-given-up warning's "(memoryMargin, --memory-margin)": what sets the margin */
  readonly memoryMargin?: string;
  /** in place of the KV pool's allocation refusal's remedy (KV_ALLOCATION_REMEDY: "lower contextSize (--ctx-size), kvCacheBytes or ...") */
  readonly kvAllocation?: string;
}

/** the remedies as the engine's refusals word them (engine.ts, scheduler.ts) */
const KV_CACHE_REMEDY = "lower maxTokens or raise kvCacheBytes";
const CONTEXT_REMEDY = "use a larger contextSize or a shorter prompt";
/** marks a proposal the caller has no words for, taken out of its "try A or B" list at the end */
const DROPPED = "\u0000";

/** an engine refusal's (or the load plan's) message in a caller's terms: the library's option names replaced by what that caller's users set */
export function refusalInTerms(message: string, terms: RefusalTerms): string {
  const { maxTokens, kvCacheTooSmall, contextTooSmall, quantize, maxSequences, kvCacheBytes, cacheTypes, context, kvBudget, memoryMargin } = terms;
  const contextSize = terms.contextSize && ((tokens: number) => terms.contextSize!(tokens) ?? DROPPED);
  let out = message;
  if (maxTokens !== undefined) out = out.replace(/\+ maxTokens (\d+)/, (_, n: string) => `+ ${maxTokens} ${n}`);
  if (kvCacheTooSmall !== undefined) out = out.replace(KV_CACHE_REMEDY, () => kvCacheTooSmall);
  if (contextTooSmall !== undefined) out = out.replace(CONTEXT_REMEDY, () => contextTooSmall);
  // checkMemoryPlan's proposals: "--quantize Q --ctx-size N" (both), "--quantize Q (size)", "--ctx-size N"
  if (quantize !== undefined && contextSize !== undefined) out = out.replace(/--quantize (\S+) --ctx-size (\d+)/g, (_, q: string, n: string) => (contextSize(Number(n)) === DROPPED ? DROPPED : `${quantize(q)} with ${contextSize(Number(n))}`));
  if (quantize !== undefined) out = out.replace(/--quantize (\S+)/g, (_, q: string) => quantize(q));
  if (contextSize !== undefined) out = out.replace(/--ctx-size (\d+)/g, (_, n: string) => contextSize(Number(n)));
  // the KV pool's words (checkParallelPool's warning, the K/V-array refusal): "contextSize N (--ctx-size)",
  // "maxSequences N (--parallel)", "kvCacheBytes N (--kv-memory; ...)", "cacheTypeK / cacheTypeV"
  if (contextSize !== undefined) out = out.replace(/contextSize (\d+) \(--ctx-size\)/g, (_, n: string) => contextSize(Number(n)));
  if (maxSequences !== undefined) out = out.replace(/maxSequences (\d+) \(--parallel\)/g, (_, n: string) => maxSequences(Number(n)));
  if (kvCacheBytes !== undefined) out = out.replace(/kvCacheBytes (\d+) \(--kv-memory(?:; )?([^)]*)\)/g, (_, n: string, note: string) => kvCacheBytes(Number(n), note));
  if (cacheTypes !== undefined) out = out.replace(/cacheTypeK \/ cacheTypeV/g, () => cacheTypes);
  // what the load was asked for, as the caller set it: "positions (contextSize N)", "(kvCacheBytes N, --kv-memory)", the margin's "(memoryMargin, --memory-margin)"
  if (context !== undefined) out = out.replace(/positions \(contextSize (\d+)\)/g, (_, n: string) => `positions (${context(Number(n))})`);
  if (kvBudget !== undefined) out = out.replace(/\(kvCacheBytes (\d+), --kv-memory\)/g, (_, n: string) => `(${kvBudget(Number(n))})`);
  if (memoryMargin !== undefined) out = out.replace(/\(memoryMargin, --memory-margin\)/g, () => `(${memoryMargin})`);
  if (terms.kvAllocation !== undefined) out = out.replace(KV_ALLOCATION_REMEDY, () => terms.kvAllocation!);
  return out.replace(/ or \u0000|\u0000 or /g, "").replace(/: try \u0000/g, "").replaceAll(DROPPED, "");
}
