import { KV_POOL_FULL_REMEDY } from "../cache/index.js";
import { refusalInTerms, RequestError } from "../engine/index.js";
import { OptionError } from "../units/index.js";
import type { SettingNames } from "./setting-names.js";

/** An error answered in OpenAI's shape: `{error: {message, type, param, code}}` with an HTTP status. */
export class ApiError extends Error {
  override name = "ApiError";

  constructor(
    readonly status: number,
    message: string,
    readonly type: string = status >= 500 ? "server_error" : "invalid_request_error",
    readonly param: string | null = null,
    readonly code: string | null = null,
    readonly headers: Readonly<Record<string, string>> = {},
  ) {
    super(message);
  }

  get body(): { error: { message: string; type: string; param: string | null; code: string | null } } {
    return { error: { message: this.message, type: this.type, param: this.param, code: this.code } };
  }
}

/** a 400 naming the request parameter at fault */
export function invalid(param: string, message: string, code: string | null = "invalid_value"): ApiError {
  return new ApiError(400, message, "invalid_request_error", param, code);
}

/** the library's sampling option names -> the request parameters that set them */
const PARAM_OF: Record<string, string> = {
  temperature: "temperature", topK: "top_k", topP: "top_p", minP: "min_p", typicalP: "typical_p", repeatPenalty: "repetition_penalty",
  repeatLastN: "repeat_last_n", frequencyPenalty: "frequency_penalty", presencePenalty: "presence_penalty", logitBias: "logit_bias", seed: "seed",
  minKeep: "min_keep", samplerOrder: "samplers",
};

/** the request field that holds a JSON response_format's schema: what a fault of the schema names, as OpenAI names a nested parameter by its full path */
export const SCHEMA_PARAM = "response_format.json_schema.schema";

/**
 * A request field's path as OpenAI names nested parameters (`messages[0].content`,
 * `response_format.json_schema.schema.properties.a`): keys after a dot, list indexes in brackets
 */
export function paramPath(base: string, path: readonly (string | number)[]): string {
  return path.reduce<string>((out, p) => (typeof p === "number" ? `${out}[${p}]` : out === "" ? p : `${out}.${p}`), base);
}

/** JSON Schema keywords whose value is a list: a number after one is an index */
const SCHEMA_LISTS = new Set(["anyOf", "oneOf", "allOf", "prefixItems", "items", "enum", "type", "required"]);

/**
 * The field a schema fault lies in: `base` (the request field holding the schema) and the schema
 * path the fault's message begins with, as the constraint checkers write it (`#/properties/a/type:
 * ...`), so that `param` names the exact spot as OpenAI names a nested parameter; `base` alone when
 * the message names no path
 */
export function schemaFaultParam(base: string, message: string): string {
  const m = /^(?:\w+: )?#((?:\/[^/]*?)*): /.exec(message);
  if (!m) return base;
  const segments = m[1]!.split("/").slice(1);
  return paramPath(base, segments.map((s, i) => (/^\d+$/.test(s) && i > 0 && SCHEMA_LISTS.has(segments[i - 1]!) ? Number(s) : s)));
}

/** the engine's option names (RequestError.option) -> the request parameters that set them */
const OPTION_PARAM: Record<string, string> = { logprobs: "logprobs", n: "n", jsonSchema: SCHEMA_PARAM, json: "response_format", grammar: "grammar", logitBias: "logit_bias" };

/**
 * What Model.submit's synchronous validation errors mean for the client: the library's
 * OptionErrors (RequestError among them) become 400s naming the parameter their `option` stands
 * for (the prompt's, the token limit's and the schema's as the request named them: `named.prompt`,
 * `named.maxTokens`, `named.schema`); other RangeErrors and TypeErrors 400s without one; anything else is the
 * server's fault.
 */
export function fromSubmitError(e: unknown, named: { prompt: string; maxTokens: string; settings: SettingNames; schema?: string; limitGiven?: boolean }): ApiError {
  if (e instanceof ApiError) return e;
  const message = e instanceof Error ? e.message : String(e);
  if (e instanceof OptionError && e.option === "maxTokens" && named.limitGiven === false) return promptPastKvCache(e, message, named.prompt, named.settings);
  if (e instanceof OptionError) {
    let param = e.option === "prompt" ? named.prompt : e.option === "maxTokens" ? named.maxTokens : (OPTION_PARAM[e.option] ?? PARAM_OF[e.option] ?? e.option);
    // (a schema the grammar cannot hold: the spot in it its message names)
    if (e.option === "jsonSchema") param = schemaFaultParam(named.schema ?? param, message);
    return new ApiError(400, inServerTerms(message, named.maxTokens, named.settings), "invalid_request_error", param, (e instanceof RequestError ? e.code : undefined) ?? "invalid_value");
  }
  if (e instanceof RangeError || e instanceof TypeError) return new ApiError(400, message);
  return internal(e, named.settings);
}

/**
 * The engine's refusal of a token limit the KV cache cannot hold, for a request that gave none (the
 * server left its completion what the context and the KV cache hold, at least a token): the prompt
 * is what the client can change, so the 400 names it, and the completion is not called max_tokens,
 * which the request did not send
 */
function promptPastKvCache(e: OptionError, message: string, prompt: string, settings: SettingNames): ApiError {
  const fewer = /, \d+ (choices|beams)\)/.exec(message)?.[1];
  const words = refusalInTerms(message, {
    maxTokens: "a completion of",
    kvCacheTooSmall: `shorten the ${prompt}${fewer ? ` or ask for fewer ${fewer}` : ""}, or start the server with a larger ${settings.kvCacheBytes}`,
  });
  return new ApiError(400, words, "invalid_request_error", prompt, (e instanceof RequestError ? e.code : undefined) ?? "context_length_exceeded");
}

/**
 * An engine refusal in the server's words: what the client sets by its request's fields (the
 * token limit as it named it) in place of the library's maxTokens, and what the server's operator
 * set as the operator set it (`tsllm serve`'s --kv-memory and --ctx-size, or, from the library,
 * kvCacheBytes and contextSize)
 */
function inServerTerms(message: string, maxTokens: string, settings: SettingNames): string {
  return refusalInTerms(message, {
    maxTokens,
    kvCacheTooSmall: `lower ${maxTokens}, or start the server with a larger ${settings.kvCacheBytes}`,
    contextTooSmall: `send a shorter prompt, or start the server with a larger ${settings.contextSize}`,
  });
}

/**
 * a 500 for an error inside the server or the engine; with `settings`, a remedy it proposes in the
 * operator's words (the KV pool's allocation refusal: `tsllm serve`'s --ctx-size, --kv-memory, ...;
 * its refusal of a block past its limit: --parallel, --ctx-size)
 */
export function internal(e: unknown, settings?: SettingNames): ApiError {
  if (e instanceof ApiError) return e;
  let message = e instanceof Error ? e.message : String(e);
  if (settings) {
    message = refusalInTerms(message, {
      kvAllocation: `lower ${settings.contextSize}, ${settings.kvCacheBytes} or ${settings.maxSequences}, or store the cache smaller (${settings.cacheTypes} f16 or q8_0)`,
    }).replace(KV_POOL_FULL_REMEDY, () => `use fewer sequences (${settings.maxSequences}) or beams, or a smaller ${settings.contextSize}`);
  }
  const err = new ApiError(500, `the request failed inside the server: ${message}`, "server_error", null, "internal_error");
  // what the operator's log shows (ServeOptions.log): where it failed, which the client is not told
  err.cause = e;
  return err;
}
