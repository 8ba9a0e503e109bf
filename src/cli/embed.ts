import { DEFAULT_MODELS, embdNormalize, openEmbeddingModel, type EmbedOptions } from "../pipelines/index.js";
import type { Pooling } from "../formats/index.js";
import { OptionError } from "../units/index.js";
import { MODEL_MEANING, backendOption, escapesOption, ESCAPE_ARGS, flag, inputLabel, optionalNonEmpty, optionalNumber, optionalString, parse, printWarning, processEscapes, requireString, strings, threadsOption, UsageError, type OptionSpec } from "./args.js";
import { fileText, readTextInput } from "./input-files.js";
import { resolveInterruptibly } from "./interrupt.js";

export const embedHelp = `Usage: tsllm embed --model MODEL (--input TEXT [--input TEXT]... | --file FILE) [--embd-separator SEP] [--no-escape]
                   [--normalize | --no-normalize | --embd-normalize N] [--pooling P] [--dimensions N] [--prompt TEXT | --prompt-name NAME]
                   [--threads N] [--backend wasm|reference|webgpu] [--json]

Sentence embeddings with sentence-transformers' semantics (modules.json, 1_Pooling, Normalize,
max_seq_length truncation, with a warning naming the input); any BERT/RoBERTa/DistilBERT folder
works (mean pooling). A decoder (Llama, Qwen, GPT-2 GGUF or folder, e.g. Qwen3-Embedding) gives
llama.cpp's embeddings (llama-embedding): the hidden states after the final norm, pooled by the
GGUF's pooling_type (else the last token). A GGUF's vectors, encoder or decoder, are L2-normalized
as llama-embedding's (its --embd-normalize 2); a folder's as sentence-transformers' (its Normalize module).

Options:
  --model MODEL     sentence-transformers folder or Hub id (default: sentence-transformers/all-MiniLM-L6-v2)
  --input TEXT      a text (repeatable; this or --file is required). One text each, line breaks
                    and all (llama-embedding splits its -p at line breaks: --embd-separator does so here)
  --file FILE       one text a line, as llama-embedding -f (its separator's default, a line break): a
                    BOM and the final line break dropped, an empty line an empty text (- reads stdin)
  --embd-separator SEP  split each --input, or the file's text, at SEP instead (every part a text,
                    empty ones too), as llama-embedding --embd-separator (e.g. "<#sep#>")
  --no-escape       take --input and --file's text as written; by default, as llama-embedding's -p and
                    -f, \\n \\r \\t \\' \\" \\\\ and \\xHH in them are that character or byte, before
                    the split into texts (--escape, the default, is taken; --prompt and SEP as typed)
  --normalize       L2-normalize the vectors (a GGUF's default; always on when the model has a Normalize module)
  --no-normalize    a GGUF's or decoder's raw pooled vectors (node-llama-cpp's getEmbeddingFor; --embd-normalize -1)
  --embd-normalize N  as llama-embedding's: -1 the raw vector, 0 scaled so its largest magnitude is 32760
                    (int16's range), 1 taxicab, 2 Euclidean (a GGUF's default), N > 2 the N-norm (a
                    model's Normalize module stays part of the model)
  --pooling P       mean, cls, max, mean_sqrt_len, weightedmean, lasttoken (default: the model's)
  --dimensions N    keep the first N components (truncate_dim; normalized after the cut)
  --prompt TEXT     text put before each input (sentence-transformers' encode(prompt=...), e.g. "query: ")
  --prompt-name NAME  one of the model's prompts (config_sentence_transformers.json; default: its default_prompt_name)
  --threads N       worker threads
  --backend NAME    wasm (default), reference or webgpu
  --json            print one JSON array of vectors
  -h, --help        show this help
`;

const POOLINGS = ["mean", "cls", "max", "mean_sqrt_len", "weightedmean", "lasttoken"];

export const EMBED_ARGS: OptionSpec = { model: { type: "string" }, input: { type: "string", multiple: true }, file: { type: "string" }, "embd-separator": { type: "string" }, normalize: { type: "boolean" }, "no-normalize": { type: "boolean" }, "embd-normalize": { type: "string" }, pooling: { type: "string" }, dimensions: { type: "string" }, prompt: { type: "string" }, "prompt-name": { type: "string" }, threads: { type: "string" }, backend: { type: "string" }, json: { type: "boolean" }, ...ESCAPE_ARGS };

/**
 * The library's refusal of a prompt name the model does not have, in the flag's words: it said
 * "promptName: expected one of this model's prompts ...", the library's option, exit 1
 */
function promptNamed<T>(run: () => T): T {
  try {
    return run();
  } catch (e) {
    if (e instanceof OptionError && e.option === "promptName") throw new UsageError(e.message.replace(/^promptName:/, "--prompt-name:"));
    throw e;
  }
}

export async function runEmbed(argv: string[]): Promise<void> {
  const values = parse(argv, EMBED_ARGS);
  if (flag(values, "help")) { process.stdout.write(embedHelp); return; }
  // llama-embedding's -p and -f: escapes (\n) processed unless --no-escape (before --embd-separator
  // splits, as there: common/arg.cpp processes params.prompt, whichever of -p and -f filled it)
  const escapes = escapesOption(values);
  const given = strings(values, "input")?.map((t) => (escapes ? processEscapes(t, "--input") : t)), file = optionalString(values, "file");
  // the final line break dropped first, as -f pops it before the escapes are processed
  const escapedFile = (text: string) => (escapes ? processEscapes(text, `--file ${file === "-" ? "- (stdin)" : file}`) : text);
  const separator = optionalNonEmpty(values, "embd-separator", "the text between the texts");
  if (given && given.length > 0 && file !== undefined) throw new UsageError("--input and --file both give the texts; give one");
  if ((!given || given.length === 0) && file === undefined) throw new UsageError("--input is required (or --file FILE, one text a line; --file - reads stdin)");
  const pooling = optionalString(values, "pooling");
  if (pooling !== undefined && !POOLINGS.includes(pooling)) throw new UsageError(`--pooling must be one of ${POOLINGS.join(", ")}, got "${pooling}"`);
  const dimensions = optionalNumber(values, "dimensions", { integer: true, min: 1 });
  const threads = threadsOption(values);
  const prompt = optionalString(values, "prompt"), promptName = optionalString(values, "prompt-name");
  if (prompt !== undefined && promptName !== undefined) throw new UsageError("--prompt and --prompt-name: give one (sentence-transformers takes the prompt and ignores the name)");
  const prompts = { ...(prompt === undefined ? {} : { prompt }), ...(promptName === undefined ? {} : { promptName }) };
  if (flag(values, "normalize") && flag(values, "no-normalize")) throw new UsageError("--normalize and --no-normalize contradict each other: give one");
  const embdNorm = optionalNumber(values, "embd-normalize", { integer: true, min: -1 });
  if (embdNorm !== undefined && (flag(values, "normalize") || flag(values, "no-normalize"))) throw new UsageError(`--embd-normalize and --${flag(values, "normalize") ? "" : "no-"}normalize both say how to normalize: give one`);
  // read last among the checks: a usage error must not wait for a pipe's end. llama-embedding
  // splits its prompt at each "\n" (--embd-separator's default); a CRLF file's "\r" goes too.
  // A separator given splits as its split_lines does: at each occurrence, every part kept
  const inputs = file === undefined
    ? (separator === undefined ? given! : given!.flatMap((t) => t.split(separator)))
    : escapedFile(fileText(await readTextInput(file, "--file"))).split(separator ?? /\r?\n/);
  // a hub --model, or the default model, is downloaded here, where Ctrl-C stops it as it stops tsllm download and its progress shows
  const modelRef = values.model === undefined ? DEFAULT_MODELS.embeddings : requireString(values, "model", MODEL_MEANING);
  const m = await openEmbeddingModel(await resolveInterruptibly("embed", modelRef), { threads, backend: backendOption(values), onWarning: printWarning });
  try {
    if (dimensions !== undefined && dimensions > m.dimensions) throw new UsageError(`--dimensions must be <= ${m.dimensions} (this model's embeddings have ${m.dimensions}), got ${dimensions}`);
    // sentence-transformers cuts a long input without a word; the command line says so
    promptNamed(() => m.tokenize(inputs, prompts)).forEach((ids, i) => {
      if (ids.length > m.maxTokens) printWarning(`${inputLabel(inputs, i)} has ${ids.length} tokens; only its first ${m.maxTokens} (this model's limit) are embedded`);
    });
    // unset: each kind's default (a folder decides, a GGUF normalizes as llama.cpp); --embd-normalize
    // takes the raw vector (cut to --dimensions) and normalizes it as llama-embedding does
    const normalize = embdNorm !== undefined ? false : flag(values, "normalize") ? true : flag(values, "no-normalize") ? false : undefined;
    const options: EmbedOptions = { ...prompts, ...(normalize === undefined ? {} : { normalize }), ...(pooling ? { pooling: pooling as Pooling } : {}), ...(dimensions ? { dimensions } : {}) };
    const vectors = (await m.embed(inputs, options)).map((v) => {
      if (embdNorm !== undefined) embdNormalize(v, embdNorm);
      return Array.from(v);
    });
    if (flag(values, "json")) process.stdout.write(JSON.stringify(vectors) + "\n");
    else process.stdout.write(vectors.map((v) => v.join(" ")).join("\n") + "\n");
  } finally {
    m.dispose();
  }
}
