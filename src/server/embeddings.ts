import type { ServerResponse } from "node:http";
import { embdNormalize, tokenIdsProblem, type DecoderEmbeddingModel, type EmbeddingInput, type EmbeddingModel } from "../pipelines/index.js";
import type { Tokenizer } from "../tokenizer/index.js";
import { OptionError } from "../units/index.js";
import { ApiError, invalid } from "./errors.js";
import { promptsIn, promptTokens } from "./requests.js";
import { sendJson } from "./http.js";
import { optBoolean, optNumber, optString, type Body } from "./params.js";

/** inputs per forward pass of a request */
const EMBED_CHUNK = 16;
/** OpenAI's limit on the inputs of one request */
const MAX_INPUTS = 2048;

/** which API the request came through: OpenAI's /v1/embeddings, or llama-server's /embedding (`content`, a bare list of {index, embedding: [vector]}) */
export type EmbeddingsApi = "openai" | "llama";

export interface EmbeddingsRoute {
  readonly api: EmbeddingsApi;
  /** cut inputs past the model's tokens when a request does not say (`truncate`); else they are a 400 */
  readonly autoTruncate: boolean;
  readonly writeTimeoutMs: number;
  /** aborted when a shutdown cancels the request: it stops before its next pass (or its wait for one), answering the abort's reason */
  readonly signal?: AbortSignal;
  /** told once the request's first vectors are computed (until then a shutdown may refuse it as not begun) */
  readonly began?: () => void;
}

/**
 * POST /v1/embeddings in OpenAI's shape on an embedding model (an encoder, or a generative
 * model's embeddings as llama.cpp computes them: embeddingsOf):
 * {input, model?, encoding_format?: "float" | "base64", dimensions?, user?, truncate?, embd_normalize?, prompt_name?}
 * -> {object: "list", data: [{object: "embedding", index, embedding}], model, usage}.
 * `input` is any of OpenAI's four forms (a string, strings, token ids, lists of token ids); an
 * input longer than the model takes is refused as OpenAI refuses it, unless `truncate: true`
 * (text-embeddings-inference's name; the server's autoTruncate makes it the default) asks for
 * sentence-transformers' truncation. base64 is the
 * little-endian float32 bytes, what the openai client asks for by default. With api "llama", the
 * same for llama-server's POST /embedding ({content} -> [{index, embedding: [vector]}]; on a decoder
 * whose pooling is none, llama-server's [{index, embedding: [one vector per token]}]).
 */
export async function handleEmbeddings(model: EmbeddingModel | DecoderEmbeddingModel, modelId: string, modelNames: ReadonlySet<string>, body: Body, res: ServerResponse, route: EmbeddingsRoute): Promise<void> {
  const { api, writeTimeoutMs } = route;
  const name = optString(body, "model");
  if (name !== undefined && !modelNames.has(name)) throw new ApiError(404, `the model '${name}' does not exist: this server serves '${modelId}'`, "invalid_request_error", "model", "model_not_found");
  const param = api === "llama" && body.input === undefined ? "content" : "input";
  const { inputs, where } = await inputsOf(body[param], param, model.tokenizer, model.info.vocabSize);
  const format = optString(body, "encoding_format") ?? "float";
  if (format !== "float" && format !== "base64") throw invalid("encoding_format", `'encoding_format' must be "float" or "base64", got ${JSON.stringify(format)}`);
  const dimensions = optNumber(body, "dimensions", { integer: true, min: 1, max: model.dimensions });
  const normalization = optNumber(body, "embd_normalize", { integer: true, min: -1 });
  const truncate = optBoolean(body, "truncate") ?? route.autoTruncate;
  optString(body, "user");
  // text-embeddings-inference's prompt_name: one of the folder's prompts (config_sentence_transformers.json) before each text; unset, its default prompt if it names one
  const promptName = optString(body, "prompt_name");
  const prompts = promptName === undefined ? {} : { promptName };
  let tokens: number[][];
  try {
    // a slice at a time: a multi-megabyte input must not stop /health and the other requests
    tokens = await model.tokenizeAsync(inputs, prompts);
  } catch (e) {
    if (e instanceof OptionError && (e.option === "promptName" || e.option === "prompt")) throw invalid("prompt_name", e.message.replace(/^promptName: /, "'prompt_name': "));
    throw e;
  }
  tokens.forEach((ids, i) => {
    if (ids.length > model.maxTokens && !truncate) {
      throw invalid(where[i]!, `${where[i] === param ? `'${param}'` : where[i]} has ${ids.length} tokens (special tokens included), more than the ${model.maxTokens} this model takes per input (${limitField(model)} in GET /v1/models): ` +
        `shorten it, or send "truncate": true to embed its first ${model.maxTokens} tokens as sentence-transformers does`, "context_length_exceeded");
    }
  });
  const used = tokens.reduce((sum, ids) => sum + Math.min(ids.length, model.maxTokens), 0);
  if (api === "llama" && "poolingNone" in model && model.poolingNone) {
    // llama-server's /embedding on a model whose pooling is none: every token's vector, as the model gives them (embd_normalize is for pooled vectors)
    const perToken: number[][][] = [];
    for (let i = 0; i < tokens.length; i += EMBED_CHUNK) {
      if (i > 0) await new Promise((r) => setImmediate(r));
      if (res.destroyed) return;
      route.signal?.throwIfAborted();
      for (const rows of await model.tokenEmbeddings(tokens.slice(i, i + EMBED_CHUNK), { signal: route.signal })) perToken.push(rows.map((v) => Array.from(v.subarray(0, dimensions ?? v.length))));
      route.began?.();
    }
    await sendJson(res, 200, perToken.map((embedding, index) => ({ index, embedding })), {}, writeTimeoutMs);
    return;
  }
  // a chunk of inputs per forward pass, the event loop getting a turn between chunks (health checks, other requests)
  const vectors: Float32Array[] = [];
  for (let i = 0; i < tokens.length; i += EMBED_CHUNK) {
    if (i > 0) await new Promise((r) => setImmediate(r));
    if (res.destroyed) return;
    route.signal?.throwIfAborted();
    // the inputs as given, with their prompt (not the tokens above, which carry it): a Pooling with
    // include_prompt: false leaves a text's prompt out, which token ids would not tell it.
    // embd_normalize applies to the raw vector, as llama-server's (a GGUF's embeddings are otherwise L2-normalized, its default 2)
    vectors.push(...(await model.embed(inputs.slice(i, i + EMBED_CHUNK), { ...prompts, dimensions, signal: route.signal, ...(normalization === undefined ? {} : { normalize: false }) })));
    route.began?.();
  }
  if (normalization !== undefined) vectors.forEach((v) => embdNormalize(v, normalization));
  if (api === "llama") {
    await sendJson(res, 200, vectors.map((v, index) => ({ index, embedding: [Array.from(v)] })), {}, writeTimeoutMs);
    return;
  }
  const data = vectors.map((v, index) => ({
    object: "embedding",
    index,
    embedding: format === "float" ? Array.from(v) : Buffer.from(v.buffer, v.byteOffset, v.byteLength).toString("base64"),
  }));
  await sendJson(res, 200, { object: "list", data, model: modelId, usage: { prompt_tokens: used, total_tokens: used } }, {}, writeTimeoutMs);
}

/**
 * The field of GET /v1/models that shows an input's token limit: an encoder's n_ctx_train (its
 * max_seq_length or positions), a generative model's n_ctx where the context it was loaded with is
 * the limit (its embeddings share it; its n_ctx_train, the training context, is larger)
 */
function limitField(model: EmbeddingModel | DecoderEmbeddingModel): string {
  return "poolingNone" in model && model.maxTokens === model.model.contextSize ? "n_ctx" : "n_ctx_train";
}

/**
 * The request's inputs, each checked as a completion's prompts are (promptsIn: OpenAI's four
 * forms, and llama-server's mixed lists of ids and strings and its {prompt_string} objects, which
 * its /v1/embeddings reads as its completions do), then as an embedding needs: no empty string (as
 * OpenAI documents: "cannot be an empty string"), no padding id, at most MAX_INPUTS. A mixed list
 * is tokenized here as llama-server tokenizes it; each input named by the field it lies in.
 */
async function inputsOf(value: unknown, param: string, tokenizer: Tokenizer, vocabSize: number): Promise<{ inputs: EmbeddingInput[]; where: string[] }> {
  const given = promptsIn(value, param, vocabSize);
  if (given.length > MAX_INPUTS) throw invalid(param, `at most ${MAX_INPUTS} inputs per request, got ${given.length}`);
  const inputs: EmbeddingInput[] = [];
  for (const { prompt, where } of given) {
    if (prompt === "") throw invalid(where, `${where === param ? `'${param}'` : where} is an empty string: every input must hold at least one character`);
    if (typeof prompt !== "string") {
      prompt.forEach((t, i) => {
        const bad = typeof t === "number" ? tokenIdsProblem([t], tokenizer, vocabSize) : undefined;
        if (bad) throw invalid(where, `${where}[${i}] ${bad.problem}`);
      });
    }
    inputs.push(typeof prompt === "string" || prompt.every((t) => typeof t === "number") ? (prompt as EmbeddingInput) : await promptTokens(tokenizer, prompt));
  }
  return { inputs, where: given.map((g) => g.where) };
}
