import type { ServerResponse } from "node:http";
import type { FimTokenIds, Tokenizer } from "../tokenizer/index.js";
import { handleCompletion } from "./completions.js";
import type { ServeContext } from "./context.js";
import { ApiError, invalid } from "./errors.js";
import { maxTokensParam, optString, type Body } from "./params.js";
import { idsAndTexts, kindOf, promptTokens, type PromptInput } from "./requests.js";

/*
 * llama-server's POST /infill (fill-in-the-middle, what llama.vim and llama.vscode call): the text
 * before and after the cursor, and other files' chunks, assembled with the vocabulary's FIM tokens
 * into one token prompt, then completed as POST /completion completes it (every /completion field
 * applies, the reply is its reply). The assembly is llama-server's format_prompt_infill
 * (tools/server/server-common.cpp), the repo-level pattern of Qwen2.5-Coder's report:
 *
 *   [FIM_REP]myproject\n [FIM_SEP]{filename}\n{text} ... [FIM_SEP]filename\n [BOS] [FIM_PRE]{prefix}{prompt} [FIM_SUF]{suffix} [FIM_MID]
 *
 * (without a FIM_SEP token each chunk follows "\n\n--- snippet ---\n\n" instead, and no file line
 * closes them; without FIM_REP no project line opens them).
 */

/** llama-server's default logical batch (-b 2048): the budget the prefix and suffix share, 3:1 */
const LLAMA_SERVER_BATCH = 2048;
/** llama-server's default -n (no limit), which its budget for the other files' chunks reads */
const LLAMA_SERVER_N_PREDICT = -1;
/** the project line and the closing file line llama-server writes (its TODOs: neither is an input yet) */
const PROJECT_LINE = "myproject\n";
const CURRENT_FILE_LINE = "filename\n";
/** a chunk's filename when it gives none */
const DEFAULT_FILENAME = "tmp";
/** what stands before each chunk where the vocabulary has no file separator token */
const SNIPPET_SEPARATOR = "\n\n--- snippet ---\n\n";

/** one of input_extra's chunks: another file's text */
export interface InfillChunk {
  readonly filename: string;
  readonly text: string;
}

/** the token lists the assembly takes, each already tokenized (no BOS/EOS; prefix, suffix and chunks with special-token text as plain text) */
export interface InfillParts {
  readonly prefix: readonly number[];
  readonly suffix: readonly number[];
  /** the request's `prompt`, written after the prefix (special-token text parsed) */
  readonly prompt: readonly number[];
  /** the other files' tokens, with their separators and file lines, in order */
  readonly extra: readonly number[];
}

/** how much of each part is kept (llama-server's n_batch, n_predict and the slot's n_ctx) */
export interface InfillBudget {
  readonly batch: number;
  readonly nPredict: number;
  readonly contextSize: number;
  /**
   * at most this many extra tokens: what the context leaves beside the rest of the prompt and the
   * completion (llama-server has no such bound, and overflows a full context by a few tokens)
   */
  readonly extraRoom?: number;
}

/** the fill-in-the-middle tokens an infill needs: prefix, suffix and middle */
export type RequiredFimIds = FimTokenIds & { readonly prefix: number; readonly suffix: number; readonly middle: number };

/**
 * The prompt llama-server assembles: the prefix keeps its last 3/4 of a batch of tokens, the suffix
 * its first quarter of a batch less the prompt and two; the other files' tokens, their last ones
 * first, fill what the context leaves past a batch and twice n_predict. SPM order (`spm`: llama-server's
 * --spm-infill) puts the suffix before the prefix.
 */
export function assembleInfill(ids: RequiredFimIds, bos: number | undefined, parts: InfillParts, budget: InfillBudget, spm = false): number[] {
  const quarter = Math.floor(budget.batch / 4);
  const prefixTake = Math.min(parts.prefix.length, 3 * quarter);
  const suffixTake = Math.min(parts.suffix.length, Math.max(0, quarter - (2 + parts.prompt.length)));
  const prefix = [ids.prefix, ...parts.prefix.slice(parts.prefix.length - prefixTake), ...parts.prompt];
  const suffix = [ids.suffix, ...parts.suffix.slice(0, suffixTake)];
  const [first, second] = spm ? [suffix, prefix] : [prefix, suffix];
  const head = bos === undefined ? first : [bos, ...first];
  const rest = head.length + second.length + 1;
  let extraTake = Math.min(parts.extra.length, Math.max(0, budget.contextSize - budget.batch - 2 * budget.nPredict));
  if (budget.extraRoom !== undefined) extraTake = Math.min(extraTake, Math.max(0, budget.extraRoom - rest));
  return [...parts.extra.slice(parts.extra.length - extraTake), ...head, ...second, ids.middle];
}

/** the refusal of a vocabulary without the three tokens, in llama-server's words (clients match them) */
export function requiredFimIds(tokenizer: Tokenizer): RequiredFimIds {
  const f = tokenizer.fimIds;
  let missing = "";
  if (f.prefix === undefined) missing += "prefix token is missing. ";
  if (f.suffix === undefined) missing += "suffix token is missing. ";
  if (f.middle === undefined) missing += "middle token is missing. ";
  if (missing !== "") {
    throw new ApiError(501, `Infill is not supported by this model: ${missing}(its vocabulary has no tokenizer.ggml.fim_pre/suf/mid_token_id and no token spelled as a fill-in-the-middle one, e.g. <|fim_prefix|>, <fim_prefix>, <PRE>)`,
      "not_supported_error", null, "not_supported");
  }
  return f as RequiredFimIds;
}

/** POST /infill: refuses a model without FIM tokens (501) and malformed fields (400), then completes the assembled prompt as POST /completion */
export async function handleInfill(ctx: ServeContext, body: Body, res: ServerResponse): Promise<void> {
  const tokenizer = ctx.model.tokenizer;
  const ids = requiredFimIds(tokenizer);
  const vocabSize = ctx.model.info.vocabSize;
  const prefixInput = mixedInput(body, "input_prefix", vocabSize);
  const suffixInput = mixedInput(body, "input_suffix", vocabSize);
  const prompt = optString(body, "prompt") ?? "";
  const chunks = chunksOf(body.input_extra);

  // (as llama-server's common_tokenize(..., add_special false, parse_special false): a file's "<|fim_prefix|>" stays text)
  const plain = (input: PromptInput) => promptTokens(tokenizer, input, { addSpecial: false, parseSpecial: false });
  const extra: number[] = [];
  if (ids.repo !== undefined) extra.push(ids.repo, ...(await plain(PROJECT_LINE)));
  for (const chunk of chunks) {
    if (ids.fileSeparator !== undefined) extra.push(ids.fileSeparator, ...(await plain(`${chunk.filename}\n`)));
    else extra.push(...(await plain(SNIPPET_SEPARATOR)));
    extra.push(...(await plain(chunk.text)));
  }
  if (ids.fileSeparator !== undefined) extra.push(ids.fileSeparator, ...(await plain(CURRENT_FILE_LINE)));
  const parts: InfillParts = {
    prefix: await plain(prefixInput), suffix: await plain(suffixInput), extra,
    prompt: await promptTokens(tokenizer, prompt, { addSpecial: false, parseSpecial: true }),
  };
  const contextSize = ctx.model.contextSize;
  const tokens = assembleInfill(ids, tokenizer.addBos ? tokenizer.bosId : undefined, parts, {
    // a context under two batches gets half of it: the prefix and suffix leave room for the chunks and the completion
    batch: Math.min(LLAMA_SERVER_BATCH, Math.floor(contextSize / 2)), nPredict: LLAMA_SERVER_N_PREDICT, contextSize,
    extraRoom: contextSize - requestedTokens(body),
  });
  await handleCompletion(ctx, "text", { ...body, prompt: tokens }, res, "llama");
}

/** the completion's own token limit, where the request sets a positive one (else 1: room for a token at least) */
function requestedTokens(body: Body): number {
  const v = body[maxTokensParam(body)];
  return typeof v === "number" && Number.isInteger(v) && v > 0 ? v : 1;
}

/** input_prefix / input_suffix: a text, or (llama-server's tokenize_mixed) a list of token ids and texts */
function mixedInput(body: Body, name: string, vocabSize: number): PromptInput {
  const v = body[name];
  if (v === undefined || v === null) throw invalid(name, `'${name}' is required: the text ${name === "input_prefix" ? "before" : "after"} the cursor (a string, "" for none)`, "missing_required_parameter");
  if (typeof v === "string") return v;
  if (Array.isArray(v)) return idsAndTexts(v, name, vocabSize);
  throw invalid(name, `'${name}' must be a string (or a list of token ids and strings), got ${kindOf(v)}`, "invalid_type");
}

/** input_extra: [{filename?, text}], the other files' chunks (absent or null: none) */
function chunksOf(v: unknown): InfillChunk[] {
  const name = "input_extra";
  if (v === undefined || v === null) return [];
  if (!Array.isArray(v)) throw invalid(name, `'${name}' must be an array of {"filename": string, "text": string}, got ${kindOf(v)}`, "invalid_type");
  return v.map((chunk: unknown, i) => {
    const where = `${name}[${i}]`;
    if (typeof chunk !== "object" || chunk === null || Array.isArray(chunk)) throw invalid(where, `'${where}' must be an object {"filename": string, "text": string}, got ${kindOf(chunk)}`, "invalid_type");
    const { text, filename } = chunk as Record<string, unknown>;
    if (typeof text !== "string") throw invalid(`${where}.text`, `'${where}.text' must be a string (the chunk's text), got ${kindOf(text)}`, "invalid_type");
    if (filename !== undefined && filename !== null && typeof filename !== "string") throw invalid(`${where}.filename`, `'${where}.filename' must be a string, got ${kindOf(filename)}`, "invalid_type");
    return { text, filename: typeof filename === "string" ? filename : DEFAULT_FILENAME };
  });
}
