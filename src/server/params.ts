import type { GenerateOptions } from "../generation/index.js";
import { strictSchemaProblem } from "../sampling/constraints/index.js";
import { samplerStepsFromLlamaCpp, type SamplerStep } from "../sampling/index.js";
import { OptionError } from "../units/index.js";
import { invalid, SCHEMA_PARAM, schemaFaultParam } from "./errors.js";

/** A parsed JSON request body. */
export type Body = Readonly<Record<string, unknown>>;

const describe = (v: unknown) => (v === null ? "null" : Array.isArray(v) ? "an array" : typeof v === "string" ? JSON.stringify(v.length > 40 ? `${v.slice(0, 40)}...` : v) : String(v));
/** a request's value as a 400 shows it */
export { describe as describeValue };

export function optNumber(body: Body, name: string, check: { min?: number; max?: number; integer?: boolean } = {}): number | undefined {
  const v = body[name];
  if (v === undefined || v === null) return undefined;
  const range = `${check.min ?? "-inf"}..${check.max ?? "inf"}`;
  const kind = check.integer ? "an integer" : "a number";
  if (typeof v !== "number" || !Number.isFinite(v) || (check.integer && !Number.isInteger(v))) throw invalid(name, `'${name}' must be ${kind} in ${range}, got ${describe(v)}`, "invalid_type");
  if ((check.min !== undefined && v < check.min) || (check.max !== undefined && v > check.max)) throw invalid(name, `'${name}' must be ${kind} in ${range}, got ${v}`);
  return v;
}

/** `param`: the name the 400 gives, the full path of a field of a nested object (`stream_options.include_usage`, as OpenAI names it) */
export function optBoolean(body: Body, name: string, param = name): boolean | undefined {
  const v = body[name];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== "boolean") throw invalid(param, `'${param}' must be a boolean, got ${describe(v)}`, "invalid_type");
  return v;
}

export function optString(body: Body, name: string): string | undefined {
  const v = body[name];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== "string") throw invalid(name, `'${name}' must be a string, got ${describe(v)}`, "invalid_type");
  return v;
}

function optObject(body: Body, name: string, param = name): Body | undefined {
  const v = body[name];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== "object" || Array.isArray(v)) throw invalid(param, `'${param}' must be an object, got ${describe(v)}`, "invalid_type");
  return v as Body;
}

/** `stop`: a string or up to 16 strings */
function stopOf(body: Body): string[] | undefined {
  const v = body.stop;
  if (v === undefined || v === null) return undefined;
  const list = typeof v === "string" ? [v] : v;
  if (!Array.isArray(list) || list.some((s) => typeof s !== "string")) throw invalid("stop", `'stop' must be a string or an array of strings, got ${describe(v)}`, "invalid_type");
  if (list.length > 16) throw invalid("stop", `'stop' may hold at most 16 strings, got ${list.length}`);
  // OpenAI's schema admits "" (a string, no minimum length): a stop string of no characters marks
  // no place to stop at, so it stops nothing (vLLM refuses it; a client sending one means none)
  const stops = (list as string[]).filter((s) => s !== "");
  return stops.length > 0 ? stops : undefined;
}

/** a text's tokens as llama-server tokenizes a logit_bias key: no BOS/EOS, special-token text as plain text */
export type BiasTextEncoder = (text: string) => readonly number[];

/**
 * `logit_bias`: OpenAI's {"token id": bias in -100..100}, or llama-server's list of [token, bias]
 * pairs; as llama-server, a bias of `false` bans the token (-Infinity) in either form, and a token
 * given as text (a list entry's string, an object key that is not all digits) biases each of the
 * text's tokens (its README: `[["Hello, World!", -0.5]]`)
 */
function logitBiasOf(body: Body, vocabSize: number, encodeText: BiasTextEncoder | undefined): Record<number, number> | undefined {
  const v = body.logit_bias;
  if (v === undefined || v === null) return undefined;
  // (a list names an id by a number, text by a string; an object's keys are strings, ids where a number: "-1" is a bad id, not text)
  const pairs = Array.isArray(v) ? v.map((pair: unknown, i) => {
    if (!Array.isArray(pair) || pair.length !== 2) throw invalid("logit_bias", `'logit_bias' as a list holds [token id or text, bias] pairs, got ${describe(pair)} at ${i}`);
    return [typeof pair[0] === "number" ? String(pair[0]) : typeof pair[0] === "string" ? { text: pair[0] } : pair[0], pair[1]] as [unknown, unknown];
  }) : Object.entries(optObject(body, "logit_bias")!).map(([k, bias]) => [/^-?\d+$/.test(k) ? k : { text: k }, bias] as [unknown, unknown]);
  const out: Record<number, number> = {};
  for (const [k, bias] of pairs) {
    const named = typeof k === "object" && k !== null ? JSON.stringify((k as { text: string }).text) : String(k);
    if (bias !== false && (typeof bias !== "number" || !Number.isFinite(bias) || bias < -100 || bias > 100)) throw invalid("logit_bias", `'logit_bias' values must be numbers in -100..100 (or false: banned), got ${describe(bias)} for token ${named}`);
    const value = bias === false ? -Infinity : bias;
    if (typeof k === "object" && k !== null && encodeText !== undefined) {
      const ids = encodeText((k as { text: string }).text);
      if (ids.length === 0) throw invalid("logit_bias", `'logit_bias' text ${named} has no tokens`);
      for (const id of ids) out[id] = value;
      continue;
    }
    const id = Number(k);
    if (typeof k !== "string" || !/^\d+$/.test(k) || id >= vocabSize) throw invalid("logit_bias", `'logit_bias' keys must be token ids in [0, ${vocabSize}) or token text, got ${named}`);
    out[id] = value;
  }
  return out;
}

const UNSUPPORTED = ["functions", "audio", "prediction", "web_search_options"] as const;

/**
 * llama-server's samplers this server does not implement, and the value that turns each off (its
 * defaults, which clients such as llama.cpp's web UI send with every request): a request turning
 * one on is refused, where it was answered as if the sampler had not been asked for (llama-server
 * reads them in params_from_json_cmpl: 0 = disabled for dry_multiplier, xtc_probability and
 * dynatemp_range, mirostat 0 off, top_n_sigma at or below 0 off)
 */
const UNIMPLEMENTED_SAMPLERS: readonly { readonly name: string; readonly off: (v: number) => boolean; readonly offIs: string; readonly what?: string }[] = [
  { name: "mirostat", off: (v) => v === 0, offIs: "0" },
  { name: "dry_multiplier", off: (v) => v === 0, offIs: "0" },
  { name: "xtc_probability", off: (v) => v === 0, offIs: "0" },
  { name: "dynatemp_range", off: (v) => v === 0, offIs: "0" },
  { name: "top_n_sigma", off: (v) => v <= 0, offIs: "-1 (or any value at or below 0)" },
];

/**
 * llama-server's limits on a reply's lines (params_from_json_cmpl reads both on every completion
 * route; llama.vim sends them with each /infill): `n_indent`, a new line indented less ends the
 * reply, cut before that line's text; `t_max_predict_ms`, past that time a token with a new line
 * ends it. At or below 0 (their defaults) each is off, as there.
 */
function lineLimitsOf(body: Body): Pick<GenerateOptions, "minLineIndent" | "newLineAfterMs"> {
  const indent = optNumber(body, "n_indent", { integer: true });
  const ms = optNumber(body, "t_max_predict_ms", { integer: true });
  return { ...(indent !== undefined && indent > 0 ? { minLineIndent: indent } : {}), ...(ms !== undefined && ms > 0 ? { newLineAfterMs: ms } : {}) };
}

/** a request asking for a sampler or an output this server does not have: a 400 naming the field, not an answer made without it */
function refuseUnsupported(body: Body): void {
  for (const name of UNSUPPORTED) {
    const v = body[name];
    if (v !== undefined && v !== null && !(Array.isArray(v) && v.length === 0)) {
      throw invalid(name, `'${name}' is not supported by this server`, "unsupported_parameter");
    }
  }
  for (const { name, off, offIs, what = "a sampler" } of UNIMPLEMENTED_SAMPLERS) {
    const v = optNumber(body, name);
    if (v !== undefined && !off(v)) throw invalid(name, `'${name}' ${v} asks for ${what} this server does not implement: leave it out, or send ${offIs} (off)`, "unsupported_parameter");
  }
  // llama-server's per-request LoRA scales ([{id, scale}]): this server loads no adapters, so any id
  // is one llama-server's parse_lora_request refuses ("invalid adapter id"); an empty list asks nothing
  const lora = body["lora"];
  if (lora !== undefined && lora !== null) {
    if (!Array.isArray(lora)) throw invalid("lora", `'lora' must be an array of {id, scale}, got ${describe(lora)}`, "invalid_type");
    if (lora.length > 0) throw invalid("lora[0].id", `'lora[0].id' ${describe((lora[0] as Body | null)?.["id"])} names no adapter: this server loads no LoRA adapters (send an empty list, or none)`);
  }
  // OpenAI's output modalities: text is what every reply is made of; "audio" asks for a spoken one
  const modalities = body["modalities"];
  if (modalities === undefined || modalities === null) return;
  if (!Array.isArray(modalities) || modalities.some((m) => typeof m !== "string")) throw invalid("modalities", `'modalities' must be an array of strings, got ${describe(modalities)}`, "invalid_type");
  const other = modalities.find((m) => m !== "text");
  if (other !== undefined) throw invalid("modalities", `'modalities' may hold only "text": this server answers text, not ${describe(other)}`, "unsupported_parameter");
}

/**
 * llama-server's `samplers`: the chain's order, a list of sampler names or a string of letters
 * (params_from_json_cmpl: common_sampler_types_from_names / _from_chars); left unread, a client's
 * order went unheeded
 */
function samplersOf(body: Body): readonly SamplerStep[] | undefined {
  const v = body["samplers"];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== "string" && !(Array.isArray(v) && v.every((n) => typeof n === "string"))) throw invalid("samplers", `'samplers' must be a list of sampler names or a string of sampler letters, got ${describe(v)}`, "invalid_type");
  try {
    return samplerStepsFromLlamaCpp(v as string | string[], "'samplers'");
  } catch (e) {
    if (e instanceof OptionError) throw invalid("samplers", e.message);
    throw e;
  }
}

/** `metadata`, as OpenAI's reference defines it: up to 16 pairs, keys of up to 64 characters, string values of up to 512 */
function metadataOf(body: Body): void {
  const v = optObject(body, "metadata");
  if (v === undefined) return;
  const entries = Object.entries(v);
  if (entries.length > 16) throw invalid("metadata", `'metadata' may hold at most 16 pairs, got ${entries.length}`);
  for (const [k, value] of entries) {
    if ([...k].length > 64) throw invalid("metadata", `'metadata' keys may be at most 64 characters, got ${describe(k)} (${[...k].length})`);
    const param = `metadata.${k}`;
    if (typeof value !== "string") throw invalid(param, `'${param}' must be a string, got ${describe(value)}`, "invalid_type");
    if ([...value].length > 512) throw invalid(param, `'${param}' may be at most 512 characters, got ${[...value].length}`);
  }
}

/**
 * `response_format` ({type: "text"}, {type: "json_object"}, {type: "json_schema", json_schema:
 * {name, schema, strict}}; llama-server's {type: "json_object", schema}), llama-server's `grammar`
 * (GBNF text) and its top-level `json_schema` (a schema object) as the library's constraint
 * options; the output is then enforced token by token.
 */
function constraintOf(body: Body): Pick<GenerateOptions, "json" | "jsonSchema" | "grammar"> {
  const grammar = optString(body, "grammar");
  const format = optObject(body, "response_format");
  const type = format === undefined ? "text" : format["type"];
  // llama-server's own `json_schema` (a schema object at the top level): left unread, a client's
  // schema went unheeded and the reply was free text
  const topSchema = optObject(body, "json_schema");
  if (topSchema !== undefined && grammar !== undefined) throw invalid("json_schema", "give 'json_schema' or 'grammar', not both");
  if (topSchema !== undefined && type !== "text") throw invalid("json_schema", "give 'json_schema' or a JSON 'response_format', not both");
  if (grammar !== undefined && type !== "text") throw invalid("grammar", "give 'grammar' or a JSON 'response_format', not both");
  if (grammar !== undefined) return { grammar };
  if (topSchema !== undefined) return schemaFrom(topSchema, "json_schema");
  if (type === "text") return {};
  if (type === "json_object") {
    // llama-server's {type: "json_object", schema}: the object held to the schema (left unread, any object passed)
    const schema = optObject(format!, "schema", "response_format.schema");
    return schema === undefined ? { json: "object" } : schemaFrom(schema, "response_format.schema");
  }
  if (type === "json_schema") {
    const js = optObject(format!, "json_schema", "response_format.json_schema");
    if (js === undefined) throw invalid("response_format.json_schema", "'response_format' of type json_schema needs 'json_schema': {name, schema}", "missing_required_parameter");
    // a name is optional here (llama-server needs none); one given is held to OpenAI's rule, as tools' function names are
    const name = js["name"];
    if (name !== undefined && name !== null && (typeof name !== "string" || !/^[A-Za-z0-9_-]{1,64}$/.test(name))) {
      throw invalid("response_format.json_schema.name", `'response_format.json_schema.name' must be 1-64 letters, digits, _ or -, got ${describe(name)}`, typeof name === "string" ? "invalid_value" : "invalid_type");
    }
    const schema = js["schema"] ?? {};
    if (typeof schema !== "object" || schema === null || Array.isArray(schema)) throw invalid(SCHEMA_PARAM, `'${SCHEMA_PARAM}' must be a JSON Schema object, got ${describe(schema)}`);
    const strict = js["strict"];
    if (strict !== undefined && strict !== null && typeof strict !== "boolean") throw invalid("response_format.json_schema.strict", `'response_format.json_schema.strict' must be a boolean, got ${describe(strict)}`, "invalid_type");
    // strict: OpenAI's strict mode's rules (closed objects, every property required, no oneOf), refused as its are
    const problem = strict === true ? strictSchemaProblem(schema) : undefined;
    if (problem !== undefined) throw invalid(schemaFaultParam(SCHEMA_PARAM, problem), `Invalid schema for response_format${typeof js["name"] === "string" ? ` '${js["name"]}'` : ""} ('${SCHEMA_PARAM}', strict: true): ${problem}`);
    return { jsonSchema: schema as Record<string, unknown> };
  }
  throw invalid("response_format.type", `'response_format.type' must be "text", "json_object" or "json_schema", got ${describe(type)}`);
}

/** the field each schema of llama-server's own forms came in (else OpenAI's response_format.json_schema.schema): what a fault of it names */
const schemaFields = new WeakMap<object, string>();

function schemaFrom(schema: Body, field: string): Pick<GenerateOptions, "jsonSchema"> {
  schemaFields.set(schema, field);
  return { jsonSchema: schema as Record<string, unknown> };
}

/**
 * The field a fault of the request's JSON response_format lies in, as OpenAI names a nested
 * parameter by its full path: its schema (one the grammar cannot hold, or cannot follow) by the
 * field it came in, else the response_format itself (json_object)
 */
export function responseFormatParam(constraint: Pick<GenerateOptions, "jsonSchema">): string {
  const schema = constraint.jsonSchema;
  if (schema === undefined) return "response_format";
  return (typeof schema === "object" && schema !== null ? schemaFields.get(schema) : undefined) ?? SCHEMA_PARAM;
}

/**
 * `max_completion_tokens` or its older name `max_tokens` (OpenAI deprecates max_tokens for it), or
 * llama-server's `n_predict` (which its OpenAI routes take too), or -1: no limit; max_tokens and
 * max_completion_tokens both in one request is a 400 naming max_tokens, as OpenAI's API answers it
 * (invalid_parameter_combination), even where they agree: which one counts would otherwise be
 * this server's guess (llama-server and vLLM take max_completion_tokens silently). n_predict beside
 * either is taken where it agrees, a 400 naming n_predict where it does not (llama-server takes
 * n_predict over both silently: a client's max_tokens went unheeded)
 */
function maxTokensOf(body: Body, fewest: number): number | undefined {
  const given = (name: string) => body[name] !== undefined && body[name] !== null;
  if (given("max_tokens") && given("max_completion_tokens")) {
    throw invalid("max_tokens", "'max_tokens' and 'max_completion_tokens' cannot both be set: they are two names of one limit, so give one (max_completion_tokens, the name OpenAI keeps)", "invalid_parameter_combination");
  }
  const name = maxTokensParam(body);
  if (name !== "n_predict" && given("n_predict") && body["n_predict"] !== body[name]) {
    throw invalid("n_predict", `'n_predict' (${JSON.stringify(body["n_predict"])}) and '${name}' (${JSON.stringify(body[name])}) are two names of one limit and disagree: give one`, "invalid_parameter_combination");
  }
  // -1 is llama-server's "no limit" (its n_predict's default; has_budget: limitless): as a limit not
  // given, the reply may run to the end of the context
  const v = body[name];
  if (v === -1) return undefined;
  if (typeof v === "number" && Number.isInteger(v) && v < fewest) throw invalid(name, `'${name}' must be -1 (no limit: up to the end of the context) or an integer in ${fewest}..inf, got ${v}`);
  return optNumber(body, name, { integer: true, min: fewest });
}

/** the names a request may give its token limit by: OpenAI's two, and llama-server's n_predict */
export const MAX_TOKENS_PARAMS = ["max_tokens", "max_completion_tokens", "n_predict"] as const;

/** the name the request gave its token limit by (what a refusal of the limit names): OpenAI's where given, else n_predict where given */
export function maxTokensParam(body: Body): (typeof MAX_TOKENS_PARAMS)[number] {
  const given = (name: string) => body[name] !== undefined && body[name] !== null;
  return given("max_completion_tokens") ? "max_completion_tokens" : given("max_tokens") || !given("n_predict") ? "max_tokens" : "n_predict";
}

/**
 * The generation options every completion request shares (sampling, stopping, n, seed), in the
 * library's terms. Only parameters the request sets appear, so the model's defaults and then the
 * library's fill the rest, exactly as Model.generate does. `zeroAllowed`: a request whose token
 * limit may be 0, as a text completion with echo (the prompt alone, scored) or llama-server's
 * n_predict 0 (the prompt evaluated into the cache). `encodeText`: what reads logit_bias tokens
 * given as text (without it, only ids are taken).
 */
export function generationOptionsOf(body: Body, vocabSize: number, zeroAllowed = false, encodeText?: BiasTextEncoder): GenerateOptions {
  refuseUnsupported(body);
  optString(body, "user");
  // (OpenAI's processing tier: one server, one tier here, but a malformed one is the request's 400, as OpenAI's)
  optString(body, "service_tier");
  // (fields OpenAI stores the completion with: nothing is stored here, but a malformed one is the request's 400, as OpenAI's)
  optBoolean(body, "store");
  metadataOf(body);
  // an empty suffix is no suffix (what comes after the completion: nothing)
  if (optString(body, "suffix")) throw invalid("suffix", "'suffix' is not supported by this server (only an empty one)", "unsupported_parameter");
  const fewest = zeroAllowed ? 0 : 1;
  const maxTokens = maxTokensOf(body, fewest);
  const topK = optNumber(body, "top_k", { integer: true, min: -1 });
  const seed = optNumber(body, "seed", { integer: true, min: Number.MIN_SAFE_INTEGER, max: Number.MAX_SAFE_INTEGER });
  const options: GenerateOptions = {
    maxTokens,
    temperature: optNumber(body, "temperature", { min: 0, max: 2 }),
    topP: optNumber(body, "top_p", { min: 0, max: 1 }),
    topK: topK === -1 ? 0 : topK,
    minP: optNumber(body, "min_p", { min: 0, max: 1 }),
    typicalP: optNumber(body, "typical_p", { min: 0, max: 1 }),
    presencePenalty: optNumber(body, "presence_penalty", { min: -2, max: 2 }),
    frequencyPenalty: optNumber(body, "frequency_penalty", { min: -2, max: 2 }),
    repeatPenalty: optNumber(body, "repetition_penalty", { min: Number.MIN_VALUE, max: 10 }) ?? optNumber(body, "repeat_penalty", { min: Number.MIN_VALUE, max: 10 }),
    repeatLastN: optNumber(body, "repeat_last_n", { integer: true, min: -1 }),
    logitBias: logitBiasOf(body, vocabSize, encodeText),
    seed,
    minKeep: optNumber(body, "min_keep", { integer: true, min: 0 }),
    samplerOrder: samplersOf(body),
    stop: stopOf(body),
    n: optNumber(body, "n", { integer: true, min: 1, max: 128 }),
    ignoreEos: optBoolean(body, "ignore_eos"),
    ...constraintOf(body),
    ...lineLimitsOf(body),
  };
  return defined(options);
}

/**
 * `stream` and its `stream_options`: `include_usage` (OpenAI's: a last chunk with the usage) and
 * vLLM's and SGLang's `continuous_usage_stats` (with include_usage, every chunk carries the usage
 * so far: a client that stops reading mid-reply still knows how many tokens it got), and
 * llama-server's `timings_per_token` (its params_from_json_cmpl: every streamed chunk carries the
 * request's timings so far; unstreamed, the reply's timings are all there is)
 */
export function streamOf(body: Body): { stream: boolean; includeUsage: boolean; continuousUsage: boolean; timingsPerToken: boolean } {
  const stream = optBoolean(body, "stream") ?? false;
  const so = optObject(body, "stream_options");
  if (so && !stream) throw invalid("stream_options", "'stream_options' is only allowed with 'stream': true");
  const includeUsage = (so && optBoolean(so, "include_usage", "stream_options.include_usage")) ?? false;
  // (as vLLM: without include_usage it asks for nothing)
  const continuousUsage = ((so && optBoolean(so, "continuous_usage_stats", "stream_options.continuous_usage_stats")) ?? false) && includeUsage;
  const timingsPerToken = optBoolean(body, "timings_per_token") ?? false;
  return { stream, includeUsage, continuousUsage, timingsPerToken };
}

/** the object without its undefined entries (so they cannot erase a default) */
export function defined<T extends object>(o: T): T {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as T;
}
