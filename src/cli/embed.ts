import { loadEmbeddingModel, type EmbedOptions } from "../pipelines/index.js";
import type { Pooling } from "../formats/index.js";
import { backendOption, flag, optionalNumber, optionalString, parse, printWarning, requireString, strings, threadsOption, UsageError, type OptionSpec } from "./args.js";

export const embedHelp = `Usage: tsllm embed --model MODEL --input TEXT [--input TEXT]... [--normalize] [--pooling P]
                   [--dimensions N] [--threads N] [--backend wasm|reference|webgpu] [--json]

Sentence embeddings with sentence-transformers' semantics (modules.json, 1_Pooling, Normalize,
max_seq_length truncation, with a warning naming the input); any BERT/RoBERTa/DistilBERT folder
works (mean pooling).

Options:
  --model MODEL     sentence-transformers folder or Hub id (default: sentence-transformers/all-MiniLM-L6-v2)
  --input TEXT      a text (repeatable; required)
  --normalize       L2-normalize the vectors (always on when the model has a Normalize module)
  --pooling P       mean, cls, max, mean_sqrt_len, lasttoken (default: the model's)
  --dimensions N    keep the first N components (truncate_dim; normalized after the cut)
  --threads N       worker threads
  --backend NAME    wasm (default), reference or webgpu
  --json            print one JSON array of vectors
  -h, --help        show this help
`;

const POOLINGS = ["mean", "cls", "max", "mean_sqrt_len", "lasttoken"];

export const EMBED_ARGS: OptionSpec = { model: { type: "string" }, input: { type: "string", multiple: true }, normalize: { type: "boolean" }, pooling: { type: "string" }, dimensions: { type: "string" }, threads: { type: "string" }, backend: { type: "string" }, json: { type: "boolean" } };

export async function runEmbed(argv: string[]): Promise<void> {
  const values = parse(argv, EMBED_ARGS);
  if (flag(values, "help")) { process.stdout.write(embedHelp); return; }
  const inputs = strings(values, "input");
  if (!inputs || inputs.length === 0) throw new UsageError("--input is required");
  const pooling = optionalString(values, "pooling");
  if (pooling !== undefined && !POOLINGS.includes(pooling)) throw new UsageError(`--pooling must be one of ${POOLINGS.join(", ")}, got "${pooling}"`);
  const dimensions = optionalNumber(values, "dimensions", { integer: true, min: 1 });
  const threads = threadsOption(values);
  const m = await loadEmbeddingModel(values.model === undefined ? undefined : requireString(values, "model"), { threads, backend: backendOption(values) });
  try {
    if (dimensions !== undefined && dimensions > m.dimensions) throw new UsageError(`--dimensions must be <= ${m.dimensions} (this model's embeddings have ${m.dimensions}), got ${dimensions}`);
    // sentence-transformers cuts a long input without a word; the command line says so
    m.tokenize(inputs).forEach((ids, i) => {
      if (ids.length > m.maxTokens) printWarning(`${inputs.length === 1 ? "the input" : `input ${i}`} has ${ids.length} tokens; only its first ${m.maxTokens} (this model's limit) are embedded`);
    });
    const options: EmbedOptions = { normalize: flag(values, "normalize"), ...(pooling ? { pooling: pooling as Pooling } : {}), ...(dimensions ? { dimensions } : {}) };
    const vectors = (await m.embed(inputs, options)).map((v) => Array.from(v));
    if (flag(values, "json")) process.stdout.write(JSON.stringify(vectors) + "\n");
    else process.stdout.write(vectors.map((v) => v.join(" ")).join("\n") + "\n");
  } finally {
    m.dispose();
  }
}
