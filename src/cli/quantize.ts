import { existsSync, statSync } from "node:fs";
import { dirname, join } from "node:path";
import { quantizeModel, tensorTypesRefusal, QUANTIZE_TYPES, TENSOR_TYPES, type TypeFallback } from "../convert/index.js";
import { closest, formatBytes } from "../units/index.js";
import { flag, optionalString, outputPath, parseWithPositionals, printWarning, strings, UsageError, type OptionSpec } from "./args.js";
import { namedByFlag, vocabOption } from "./input-files.js";

export const quantizeHelp = `Usage: tsllm quantize IN OUT.gguf --type T [--pure] [--leave-output-tensor] [--tensor-type NAME=T]...
                      [--output-tensor-type T] [--token-embedding-type T] [--vocab FILE.gguf] [--verbose] [--json]
       tsllm quantize IN [OUT.gguf] T [N] [options]   (llama-quantize's order)

As llama-quantize: without OUT, the output is ggml-model-T.gguf (T upper-case, as ggml-model-Q8_0.gguf)
in IN's folder; a trailing N is llama-quantize's thread count, taken and ignored (this quantizes
on one thread). Off Windows a backslash in OUT is refused: it would be part of the file's name
(out\\model.gguf one file in the working folder), not a folder separator; write paths with /.

Writes a GGUF of llama-quantize's file type T with the types it picks per tensor: Q4_K_M has
output.weight Q6_K and some layers' attn_v / ffn_down Q6_K, the rest Q4_K; Q4_0 (and every other
type but Q8_0 and Q6_K) has output.weight Q6_K; Q3_K, Q4_K and Q5_K are its aliases of Q3_K_M,
Q4_K_M and Q5_K_M. --pure writes T's one type everywhere. IN is a GGUF file or a Hugging Face
model folder. Vectors (norms, biases), and a folder's position / token-type tables, are F32, as
llama.cpp's converter writes them (a GGUF's F16 norms too: llama-quantize keeps those F16, which
llama.cpp's CPU backend cannot run); a matrix
whose rows are not whole blocks of its type falls back as llama.cpp's does (q2_k/q3_k -> q4_0,
q4_k -> q5_0, q5_k -> q5_1, q6_k -> q8_0, iq4_xs -> iq4_nl, then f16). Quantized inputs are dequantized and requantized. OUT is written to
a temporary file beside it and renamed when complete (an interrupted run leaves no partial file);
OUT may not be IN. An OUT that is a symlink is written where it leads, one that is a device or a
FIFO (/dev/null, /dev/stdout) directly. OUT - is refused (llama-quantize would write a file named
"-"): /dev/stdout writes the GGUF to stdout, ./- a file named "-".

Options:
  --type T              ${QUANTIZE_TYPES.join(", ")}
                        (required, here or as an argument after IN or OUT; any case, as
                        llama.cpp writes them: Q4_K_M; or llama-quantize's number for one: 0 f32,
                        1 f16, 2 q4_0, 3 q4_1, 7 q8_0, 8 q5_0, 9 q5_1, 10 q2_k, 11-13 q3_k_s/m/l,
                        14-15 q4_k_s/m, 16-17 q5_k_s/m, 18 q6_k, 25 iq4_nl, 30 iq4_xs, 32 bf16)
  --pure                no mixture: every quantized tensor T's type (llama-quantize --pure)
  --leave-output-tensor keep output.weight in its stored type
  --tensor-type NAME=T  tensors whose name matches the regular expression NAME get the tensor
                        type T (${TENSOR_TYPES.join(", ")}; repeatable; the first match wins),
                        e.g. --tensor-type attn_v=q8_0; with a quantized type only (llama-quantize
                        leaves it unused with f32, f16 and bf16, so it is refused there)
  --output-tensor-type T
                        output.weight's tensor type (as --tensor-type's T), over the mixture, --pure and
                        --tensor-type, with every file type; a model without output.weight (tied
                        embeddings) writes token_embd.weight in it where the mixture would give it the
                        LM head's type; --leave-output-tensor still keeps output.weight as stored
  --token-embedding-type T
                        token_embd.weight's tensor type, over everything else; neither falls back: a
                        type whose blocks do not divide the tensor's rows is refused (llama-quantize aborts)
  --vocab FILE          for a Hugging Face folder: copy the tokenizer.* keys from this GGUF, as convert --vocab
  --verbose             list each tensor that fell back (by default one line sums them up)
  --json                print {input, output, type, tensors, types, fallbacks, bytes} on stdout
                        instead of the lines on stderr (fallbacks: every tensor that fell back,
                        {tensor, rowLength, asked, type})
  -h, --help            show this help
`;

export const QUANTIZE_ARGS: OptionSpec = {
  type: { type: "string" },
  pure: { type: "boolean" },
  "leave-output-tensor": { type: "boolean" },
  "tensor-type": { type: "string", multiple: true },
  "output-tensor-type": { type: "string" },
  "token-embedding-type": { type: "string" },
  vocab: { type: "string" },
  verbose: { type: "boolean" },
  json: { type: "boolean" },
};

/** how many tensor names the summary of fallbacks shows */
const FALLBACK_EXAMPLES = 3;

/**
 * One line for all the matrices that fell back (a small or odd-shaped model has dozens): how many,
 * each asked -> written pair with its count, the row lengths that caused them, and a few names.
 */
export function fallbackSummary(fallbacks: readonly TypeFallback[]): string {
  const pairs = new Map<string, number>();
  for (const f of fallbacks) pairs.set(`${f.asked} -> ${f.type}`, (pairs.get(`${f.asked} -> ${f.type}`) ?? 0) + 1);
  const rows = [...new Set(fallbacks.map((f) => f.rowLength))].sort((a, b) => a - b);
  const names = fallbacks.slice(0, FALLBACK_EXAMPLES).map((f) => f.tensor).join(", ");
  const more = fallbacks.length > FALLBACK_EXAMPLES ? `, ... (--verbose lists all ${fallbacks.length})` : "";
  const counted = [...pairs].map(([pair, n]) => `${pair} x${n}`).join(", ");
  const one = fallbacks.length === 1;
  return `${fallbacks.length} tensor${one ? "" : "s"} fell back to another type, ${one ? "its" : "their"} rows (of ${rows.join(" or ")}) not whole blocks of the asked type, as llama.cpp's do: ${counted}; e.g. ${names}${more}`;
}

/** the tensors that fell back, on stderr: each one (`verbose`), or one line summing them up (quantize and convert alike) */
export function reportFallbacks(fallbacks: readonly TypeFallback[], verbose: boolean): void {
  if (verbose) for (const f of fallbacks) process.stderr.write(`tsllm: fallback: ${f.tensor} (rows of ${f.rowLength}): ${f.asked} -> ${f.type}\n`);
  else if (fallbacks.length > 0) process.stderr.write(`tsllm: ${fallbackSummary(fallbacks)}\n`);
}

/**
 * llama-quantize's file types that need what tsllm does not have: an importance matrix (those that
 * llama_model_quantize refuses without one, "this quantization requires an importance matrix!",
 * IQ2_S, IQ2_M, IQ3_XXS and IQ3_XS among them), or tensor types it cannot write
 */
const IMATRIX_TYPES = new Set(["q2_k_s", "iq2_xxs", "iq2_xs", "iq2_s", "iq2_m", "iq3_xxs", "iq3_xs", "iq1_s", "iq1_m"]);
const UNWRITABLE_TYPES = new Set(["iq3_s", "iq3_m", "tq1_0", "tq2_0", "mxfp4_moe", "q1_0", "q2_0"]);

/**
 * llama-quantize's numeric file types (llama.h's llama_ftype, listed by its usage as "7 or Q8_0"):
 * each number read as the name llama-quantize prints for it (its first entry with that number:
 * 12, 15 and 17 are Q3_K, Q4_K and Q5_K, its aliases of the _M mixtures).
 */
const FTYPE_IDS: Readonly<Record<string, string>> = {
  0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 7: "Q8_0", 8: "Q5_0", 9: "Q5_1", 10: "Q2_K", 11: "Q3_K_S", 12: "Q3_K", 13: "Q3_K_L",
  14: "Q4_K_S", 15: "Q4_K", 16: "Q5_K_S", 17: "Q5_K", 18: "Q6_K", 19: "IQ2_XXS", 20: "IQ2_XS", 21: "Q2_K_S", 22: "IQ3_XS",
  23: "IQ3_XXS", 24: "IQ1_S", 25: "IQ4_NL", 26: "IQ3_S", 27: "IQ3_M", 28: "IQ2_S", 29: "IQ2_M", 30: "IQ4_XS", 31: "IQ1_M", 32: "BF16",
  36: "TQ1_0", 37: "TQ2_0", 38: "MXFP4_MOE",
};

/** a type typed as llama-quantize's number: its name, or undefined for anything else */
function ftypeName(typed: string): string | undefined {
  return /^\d+$/.test(typed) ? FTYPE_IDS[String(Number(typed))] : undefined;
}

/**
 * A file type as typed: llama.cpp writes them upper-case (Q4_K_M), or as llama-quantize's number
 * (15). The ones tsllm cannot write are refused by what they need; COPY (llama-quantize's copy of
 * every tensor as stored) too: nothing here to quantize.
 */
function quantizeType(typed: string, what: string): string {
  const named = ftypeName(typed);
  const shown = named === undefined ? typed : `${typed} (llama-quantize's ${named})`;
  const type = (named ?? typed).toLowerCase();
  if (QUANTIZE_TYPES.includes(type)) return type;
  if (IMATRIX_TYPES.has(type)) throw new UsageError(`${what} ${shown} needs an importance matrix (llama-quantize --imatrix), which tsllm does not compute or read; give another type`);
  if (UNWRITABLE_TYPES.has(type)) throw new UsageError(`${what} ${shown} is a llama.cpp file type whose tensor types tsllm does not write; give one of ${QUANTIZE_TYPES.join(", ")}`);
  if (type === "copy") throw new UsageError(`${what} COPY (llama-quantize's copy of every tensor as stored) is not done here: copy the file itself, or give a type`);
  // the type is matched in any case, as llama-quantize does, so the suggestion is too (q8 for q8_0)
  const suggestion = closest(type, QUANTIZE_TYPES);
  throw new UsageError(`${what} must be one of ${QUANTIZE_TYPES.join(", ")} (or llama-quantize's number for one), got "${shown}"${suggestion ? ` (did you mean ${suggestion}?)` : ""}`);
}

/** a --tensor-type's type: a tensor type (ggml's name, any case), not a file type */
function tensorType(typed: string, what: string): string {
  const type = typed.toLowerCase();
  if (TENSOR_TYPES.includes(type)) return type;
  const mixture = QUANTIZE_TYPES.includes(type) ? ` (${typed} is a file type, a mixture of tensor types)` : "";
  throw new UsageError(`${what} must be a tensor type, one of ${TENSOR_TYPES.join(", ")}, got "${typed}"${mixture}`);
}

/** whether llama-quantize would read this argument as a type (its mixtures, numbers and COPY too, refused later by name) rather than a file name */
function looksLikeType(arg: string): boolean {
  const t = arg.toLowerCase();
  return QUANTIZE_TYPES.includes(t) || IMATRIX_TYPES.has(t) || UNWRITABLE_TYPES.has(t) || t === "copy" || ftypeName(arg) !== undefined;
}

/**
 * llama-quantize's positional forms: IN OUT TYPE [N], IN TYPE [N] (the second argument read as a
 * type when it names one, as llama-quantize tries it first; OUT is then derived), and tsllm's
 * IN OUT with --type. N, llama-quantize's thread count, is checked as an integer and ignored.
 */
function positionalForms(positionals: string[]): { input: string; out: string | undefined; typeArgument: string | undefined } {
  const usage = `expected IN and OUT.gguf (then the type, or --type T), or IN and the type, each optionally followed by a thread count, as llama-quantize; got ${positionals.length} argument(s) (--help shows the usage)`;
  if (positionals.length < 2) throw new UsageError(usage);
  const [input, second, ...rest] = positionals as [string, string, ...string[]];
  const derived = looksLikeType(second);
  const out = derived ? undefined : second;
  const typeArgument = derived ? second : rest.shift();
  const threads = rest.shift();
  if (rest.length > 0) throw new UsageError(usage);
  if (threads !== undefined) {
    if (!/^\d+$/.test(threads)) throw new UsageError(`the thread count after the type must be an integer, as llama-quantize's nthreads; got "${threads}"`);
    printWarning(`the thread count ${threads} is llama-quantize's and is ignored here; this quantizes on one thread`);
  }
  return { input, out, typeArgument };
}

export async function runQuantize(argv: string[]): Promise<void> {
  const { values, positionals } = parseWithPositionals(argv, QUANTIZE_ARGS);
  if (flag(values, "help")) { process.stdout.write(quantizeHelp); return; }
  const { input, out, typeArgument } = positionalForms(positionals);
  if (typeArgument !== undefined && values.type !== undefined) throw new UsageError(`the type is given twice: "${typeArgument}" and --type ${String(values.type)}; give one`);
  const typed = typeArgument ?? optionalString(values, "type");
  if (typed === undefined) {
    // `quantize IN q8`: a second argument that is no type is OUT; one with no path's look (no folder,
    // no extension) and close to a type was the type mistyped, said so rather than "--type is required" alone
    const meant = out !== undefined && !/[\\/.]/.test(out) ? closest(out.toLowerCase(), QUANTIZE_TYPES) : undefined;
    throw new UsageError(`--type is required (or the type after OUT, or after IN alone, as llama-quantize takes it)${meant ? `; "${out}" was read as OUT, no type: did you mean ${meant}?` : ""}`);
  }
  const type = quantizeType(typed, typeArgument !== undefined ? "the type" : "--type");
  const tensorTypes = (strings(values, "tensor-type") ?? []).map((s) => {
    const eq = s.lastIndexOf("=");
    if (eq <= 0) throw new UsageError(`--tensor-type expects NAME=TYPE, got "${s}"`);
    const t = tensorType(s.slice(eq + 1), `--tensor-type ${s}: the type`);
    // a bad pattern is the command line's mistake (exit 2), found before the input is read
    try {
      new RegExp(s.slice(0, eq));
    } catch (e) {
      throw new UsageError(`--tensor-type ${s}: NAME is not a regular expression: ${(e as Error).message}`);
    }
    return [s.slice(0, eq), t] as const;
  });
  const refused = tensorTypesRefusal(type, tensorTypes.length);
  if (refused !== undefined) throw new UsageError(refused);
  const given: { outputTensorType?: string; tokenEmbeddingType?: string } = {};
  const outputType = optionalString(values, "output-tensor-type");
  if (outputType !== undefined) given.outputTensorType = tensorType(outputType, "--output-tensor-type");
  const embeddingType = optionalString(values, "token-embedding-type");
  if (embeddingType !== undefined) given.tokenEmbeddingType = tensorType(embeddingType, "--token-embedding-type");
  // as llama-quantize's fname_inp, "-" would be a file's name; a model is not read from a pipe
  if (input === "-") throw new UsageError(`IN -: a model is not read from stdin; give a GGUF file or a Hugging Face model folder`);
  if (!existsSync(input)) throw new Error(`${input}: no such file or folder`);
  // with a GGUF IN, quantizeModel refuses any --vocab as one for a folder only, there or not
  const vocab = statSync(input).isDirectory() ? vocabOption(values) : optionalString(values, "vocab");
  // derived from the type only now that it is known to be one
  // IN's folder as this system reads the path (llama-quantize cuts at its last / or \\ on every system)
  const output = out === undefined ? join(dirname(input), `ggml-model-${(ftypeName(typed) ?? typed).toUpperCase()}.gguf`) : outputPath(out, "OUT");
  const r = await quantizeModel(input, output, { type, pure: flag(values, "pure"), leaveOutputTensor: flag(values, "leave-output-tensor"), tensorTypes, ...given, ...(vocab !== undefined ? { vocab } : {}) })
    .catch((e: unknown) => { throw vocab === undefined || vocab === output ? e : namedByFlag(e, "--vocab", vocab); });
  if (flag(values, "json")) {
    process.stdout.write(JSON.stringify({ input, output, type, tensors: r.tensors, types: r.types, fallbacks: r.fallbacks, bytes: r.bytes }, null, 2) + "\n");
    return;
  }
  reportFallbacks(r.fallbacks, flag(values, "verbose"));
  const types = Object.entries(r.types).map(([t, n]) => `${t} x${n}`).join(", ");
  process.stderr.write(`wrote ${output}: ${r.tensors} tensors (${types}), ${formatBytes(r.bytes)}\n`);
}
