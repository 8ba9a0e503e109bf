import { existsSync } from "node:fs";
import { quantizeModel, QUANTIZE_TYPES } from "../convert/index.js";
import { formatBytes } from "../units/index.js";
import { flag, optionalString, parseWithPositionals, printWarning, strings, UsageError, type OptionSpec } from "./args.js";

export const quantizeHelp = `Usage: tsllm quantize IN OUT.gguf --type T [--leave-output-tensor] [--tensor-type NAME=T]...
                      [--vocab FILE.gguf]
       tsllm quantize IN [OUT.gguf] T [N] [options]   (llama-quantize's order)

As llama-quantize: without OUT, the output is ggml-model-T.gguf (T upper-case, as ggml-model-Q8_0.gguf)
in IN's folder (the text of IN up to its last /); a trailing N is llama-quantize's thread count,
taken and ignored (this quantizes on one thread).

Writes a GGUF whose weight matrices are quantized to T, as llama-quantize does for one type
(every matrix T; no Q4_K_M-style mixture). IN is a GGUF file or a Hugging Face model folder.
Vectors (norms, biases) stay F32; a matrix whose rows are not whole blocks of T falls back as
llama.cpp's does (q2_k/q3_k -> q4_0, q4_k -> q5_0, q5_k -> q5_1, q6_k -> q8_0, iq4_xs -> iq4_nl,
then f16). Quantized inputs are dequantized and requantized. OUT is written to a temporary file
beside it and renamed when complete (an interrupted run leaves no partial file); OUT may not be IN.

Options:
  --type T              ${QUANTIZE_TYPES.join(", ")} (required, here or as an
                        argument after IN or OUT; any case, as llama.cpp writes them: Q8_0)
  --leave-output-tensor keep output.weight in its stored type
  --tensor-type NAME=T  tensors whose name matches the regular expression NAME get type T
                        (repeatable; the first match wins), e.g. --tensor-type attn_v=q8_0
  --vocab FILE          for a Hugging Face folder: copy the tokenizer.* keys from this GGUF, as convert --vocab
  -h, --help            show this help
`;

export const QUANTIZE_ARGS: OptionSpec = {
  type: { type: "string" },
  "leave-output-tensor": { type: "boolean" },
  "tensor-type": { type: "string", multiple: true },
  vocab: { type: "string" },
};

/** llama.cpp's file types that mix types per tensor (Q4_K_M): the one type they are built on, and the size suffix */
const MIXTURE = /^(q[2-6]_k)_(xs|s|m|l)$/;

/**
 * A type as typed: llama.cpp writes them upper-case (Q8_0, Q4_K). Its Q4_K_M / Q5_K_S / IQ4_XS-style
 * file types with a size suffix mix types per tensor: here the one type they are named after, with
 * --tensor-type for a mixture, is said rather than guessed.
 */
function quantizeType(typed: string, what: string): string {
  const type = typed.toLowerCase();
  if (QUANTIZE_TYPES.includes(type)) return type;
  const mix = MIXTURE.exec(type);
  if (mix) throw new UsageError(`${what} ${typed} is llama.cpp's mixture of types; this writes one type: ${mix[1]} (and --tensor-type NAME=T for others)`);
  throw new UsageError(`${what} must be one of ${QUANTIZE_TYPES.join(", ")}, got "${typed}"`);
}

/** whether llama-quantize would read this argument as a type (its mixtures too, refused later by name) rather than a file name */
function looksLikeType(arg: string): boolean {
  const t = arg.toLowerCase();
  return QUANTIZE_TYPES.includes(t) || MIXTURE.test(t);
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
  if (typed === undefined) throw new UsageError("--type is required (or the type after OUT, or after IN alone, as llama-quantize takes it)");
  const type = quantizeType(typed, typeArgument !== undefined ? "the type" : "--type");
  const tensorTypes = (strings(values, "tensor-type") ?? []).map((s) => {
    const eq = s.lastIndexOf("=");
    if (eq <= 0) throw new UsageError(`--tensor-type expects NAME=TYPE, got "${s}"`);
    const t = quantizeType(s.slice(eq + 1), `--tensor-type ${s}: the type`);
    // a bad pattern is the command line's mistake (exit 2), found before the input is read
    try {
      new RegExp(s.slice(0, eq));
    } catch (e) {
      throw new UsageError(`--tensor-type ${s}: NAME is not a regular expression: ${(e as Error).message}`);
    }
    return [s.slice(0, eq), t] as const;
  });
  if (!existsSync(input)) throw new Error(`${input}: no such file or folder`);
  // derived from the type only now that it is known to be one
  const output = out ?? `${input.slice(0, input.lastIndexOf("/") + 1)}ggml-model-${type.toUpperCase()}.gguf`;
  const r = await quantizeModel(input, output, { type, leaveOutputTensor: flag(values, "leave-output-tensor"), tensorTypes, ...(optionalString(values, "vocab") !== undefined ? { vocab: optionalString(values, "vocab")! } : {}) });
  for (const f of r.fallbacks) process.stderr.write(`tsllm: fallback: ${f}\n`);
  const types = Object.entries(r.types).map(([t, n]) => `${t} x${n}`).join(", ");
  process.stderr.write(`wrote ${output}: ${r.tensors} tensors (${types}), ${formatBytes(r.bytes)}\n`);
}
