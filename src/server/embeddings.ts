import type { ServerResponse } from "node:http";
import type { EmbeddingModel } from "../pipelines/index.js";
import { ApiError, invalid } from "./errors.js";
import { sendJson } from "./http.js";
import { optNumber, optString, type Body } from "./params.js";

/** inputs per forward pass of a request */
const EMBED_CHUNK = 16;

/**
 * POST /v1/embeddings in OpenAI's shape on an embedding model (sentence-transformers
 * semantics: inputs longer than max_seq_length are truncated, as encode() does):
 * {input: string | string[], model?, encoding_format?: "float" | "base64", dimensions?, user?}
 * -> {object: "list", data: [{object: "embedding", index, embedding}], model, usage}.
 * base64 is the little-endian float32 bytes, what the openai client asks for by default.
 */
export async function handleEmbeddings(model: EmbeddingModel, modelId: string, modelNames: ReadonlySet<string>, body: Body, res: ServerResponse, writeTimeoutMs: number): Promise<void> {
  const name = optString(body, "model");
  if (name !== undefined && !modelNames.has(name)) throw new ApiError(404, `the model '${name}' does not exist: this server serves '${modelId}'`, "invalid_request_error", "model", "model_not_found");
  const input = body.input;
  let texts: string[];
  if (typeof input === "string") texts = [input];
  else if (Array.isArray(input) && input.length > 0 && input.every((x) => typeof x === "string")) texts = input as string[];
  else if (Array.isArray(input) && input.length > 0 && input.every((x) => typeof x === "number" || Array.isArray(x))) {
    throw invalid("input", "token ids as input are not supported by this server: send the text (a string or an array of strings)", "unsupported_input");
  } else throw invalid("input", "'input' must be a non-empty string or a non-empty array of strings", input === undefined ? "missing_required_parameter" : "invalid_value");
  if (texts.length > 2048) throw invalid("input", `at most 2048 inputs per request, got ${texts.length}`);
  const format = optString(body, "encoding_format") ?? "float";
  if (format !== "float" && format !== "base64") throw invalid("encoding_format", `'encoding_format' must be "float" or "base64", got ${JSON.stringify(format)}`);
  const dimensions = optNumber(body, "dimensions", { integer: true, min: 1 });
  if (dimensions !== undefined && dimensions !== model.dimensions) throw invalid("dimensions", `this model's embeddings have ${model.dimensions} dimensions; 'dimensions' ${dimensions} is not available`);
  optString(body, "user");
  const tokens = model.countTokens(texts).reduce((a, b) => a + b, 0);
  // a chunk of inputs per forward pass, the event loop getting a turn between chunks (health checks, other requests)
  const vectors: Float32Array[] = [];
  for (let i = 0; i < texts.length; i += EMBED_CHUNK) {
    if (i > 0) await new Promise((r) => setImmediate(r));
    if (res.destroyed) return;
    vectors.push(...(await model.embed(texts.slice(i, i + EMBED_CHUNK))));
  }
  const data = vectors.map((v, index) => ({
    object: "embedding",
    index,
    embedding: format === "float" ? Array.from(v) : Buffer.from(v.buffer, v.byteOffset, v.byteLength).toString("base64"),
  }));
  await sendJson(res, 200, { object: "list", data, model: modelId, usage: { prompt_tokens: tokens, total_tokens: tokens } }, {}, writeTimeoutMs);
}
