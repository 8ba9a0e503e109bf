import { existsSync, statSync } from "node:fs";
import { convertHFToGGUF, CONVERT_TYPES, type ConvertType } from "../convert/index.js";
import { parseHubReference } from "../hub/index.js";
import { optionalString, outputPath, parse, requireString, flag, UsageError, type OptionSpec, type ParsedValues } from "./args.js";
import { namedByFlag, vocabOption } from "./input-files.js";
import { reportFallbacks } from "./quantize.js";
import { resolveInterruptibly } from "./interrupt.js";

export const convertHelp = `Usage: tsllm convert --model MODEL --out FILE.gguf [--type f32|f16|bf16|q8_0|q4_0|iq4_nl|iq4_xs] [--vocab FILE.gguf]
                     [--verbose] [--json]

Converts a Hugging Face model folder (config.json + safetensors) to a GGUF file llama.cpp loads.
A BERT folder (BertModel, a sentence-transformers folder, or a BERT with a head) becomes
llama.cpp's "bert" architecture: the encoder without its head, pooling_type from the folder's
Pooling module (default mean), the WordPiece vocabulary as llama.cpp's bert keys.

Options:
  --model MODEL         Hugging Face model folder, or a Hub reference org/name[@rev] of a repo holding
                        one (config.json + tokenizer files + safetensors are downloaded into the cache,
                        as generate does; general.name is then the repo's name) (required)
  --out FILE            GGUF file to write (required): written to a temporary file beside it and renamed
                        when complete (a symlink: where it leads; a device or FIFO such as /dev/null:
                        directly); never one of the files read; off Windows a backslash in it is
                        refused (it is no folder separator there: write the path with /)
  --type T              weight format of the matrices: f32, f16 (default), bf16, q8_0, q4_0, iq4_nl or iq4_xs;
                        norms, biases and the position / token-type tables stay f32, as llama.cpp's
                        converter writes them; a matrix whose rows are not whole blocks of the
                        type falls back as llama.cpp's does (iq4_xs -> iq4_nl, then f16), summed up
                        in one line on stderr, as quantize sums them up
  --outfile FILE        --out as llama.cpp's convert_hf_to_gguf.py spells it: there {ftype} / {outtype}
                        ({FTYPE} / {OUTTYPE} upper-case, {}) in the name become the type's name
  --outtype T           --type as llama.cpp's convert_hf_to_gguf.py spells it: f32, f16, bf16 or q8_0
                        (its auto, tq1_0 and tq2_0 are refused)
  --vocab FILE          copy the tokenizer.* keys from this GGUF (a vocab-only GGUF of the same tokenizer:
                        as many tokens as the embedding has rows, or as the folder's own tokenizer files
                        hold, padded to the rows as llama.cpp's converter pads; another count is refused);
                        without it the folder's tokenizer files are converted (byte-level BPE such as
                        GPT-2 / Llama 3 / Qwen, SentencePiece-style BPE tokenizer.json such as Llama 2,
                        or BERT's WordPiece)
  --verbose             list each tensor that fell back (by default one line sums them up)
  --json                print {model, output, architecture, tensors, type, fallbacks, bytes} on stdout
                        instead of the lines on stderr (as quantize --json)
  -h, --help            show this help
`;

export const CONVERT_ARGS: OptionSpec = {
  model: { type: "string" },
  out: { type: "string" },
  type: { type: "string" },
  outfile: { type: "string" },
  outtype: { type: "string" },
  vocab: { type: "string" },
  verbose: { type: "boolean" },
  json: { type: "boolean" },
};

export async function runConvert(argv: string[]): Promise<void> {
  const values = parse(argv, CONVERT_ARGS);
  if (flag(values, "help")) { process.stdout.write(convertHelp); return; }
  const model = requireString(values, "model", "a Hugging Face model folder or a Hub reference org/name");
  const type = typeOption(values);
  const out = outFileOption(values, type);
  const vocab = vocabOption(values);
  const fromHub = !existsSync(model);
  const folder = await resolveInterruptibly("convert", model);
  if (!statSync(folder).isDirectory()) {
    throw new Error(fromHub
      ? `${model}: the Hub reference resolves to the GGUF file ${folder}; convert takes a repo holding a Hugging Face model folder (config.json + safetensors), not a GGUF`
      : `${model}: is a file; convert takes a Hugging Face model folder (config.json + safetensors)`);
  }
  const name = fromHub ? parseHubReference(model).repo.split("/")[1] : undefined;
  const r = await convertHFToGGUF(folder, out, { type: type as ConvertType, vocab, ...(name !== undefined ? { name } : {}) })
    .catch((e: unknown) => { throw vocab === undefined || vocab === out ? e : namedByFlag(e, "--vocab", vocab); });
  if (flag(values, "json")) {
    process.stdout.write(JSON.stringify({ model, output: out, architecture: r.architecture, tensors: r.tensors, type: r.type, fallbacks: r.fallbacks, bytes: r.bytes }, null, 2) + "\n");
    return;
  }
  reportFallbacks(r.fallbacks, flag(values, "verbose"));
  process.stderr.write(`wrote ${out}: ${r.architecture}, ${r.tensors} tensors, ${r.type}\n`);
}

/** llama.cpp's convert_hf_to_gguf.py --outtype values that mean one of ours (its auto, tq1_0, tq2_0 do not) */
const OUTTYPES = ["f32", "f16", "bf16", "q8_0"];

/** --type, or --outtype as llama.cpp's converter spells it (default f16) */
function typeOption(values: ParsedValues): string {
  if (values.type !== undefined && values.outtype !== undefined) throw new UsageError("--type and --outtype are the same option: give one");
  const outtype = optionalString(values, "outtype");
  if (outtype !== undefined) {
    if (!OUTTYPES.includes(outtype)) throw new UsageError(`--outtype must be one of ${OUTTYPES.join(", ")} (llama.cpp's converter's types this convert writes; --type also takes ${Object.keys(CONVERT_TYPES).filter((t) => !OUTTYPES.includes(t)).join(", ")}), got "${outtype}"`);
    return outtype;
  }
  const type = optionalString(values, "type") ?? "f16";
  if (!Object.hasOwn(CONVERT_TYPES, type)) throw new UsageError(`--type must be one of ${Object.keys(CONVERT_TYPES).join(", ")}, got "${type}"`);
  return type;
}

/**
 * --out, or --outfile as llama.cpp's converter spells it: there a name's {ftype} / {outtype} (and
 * {FTYPE} / {OUTTYPE} upper-case, and a bare {}) is the output type (gguf-py's fill_templated_filename)
 */
function outFileOption(values: ParsedValues, type: string): string {
  if (values.out !== undefined && values.outfile !== undefined) throw new UsageError("--out and --outfile are the same option: give one");
  if (values.outfile === undefined) return outputPath(requireString(values, "out", "the GGUF file to write"), "--out");
  const templated = requireString(values, "outfile", "the GGUF file to write").replace(/\{(ftype|outtype|FTYPE|OUTTYPE|)\}/g, (_, k: string) => (k === k.toUpperCase() && k !== "" ? type.toUpperCase() : type));
  return outputPath(templated, "--outfile");
}
