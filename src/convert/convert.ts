import { readdirSync } from "node:fs";
import { basename, join } from "node:path";
import { isEncoderModel, readHFEncoderConfig, readSentenceTransformerConfig } from "../formats/index.js";
import { ggufEntry, readGGUFHeader, readHFConfig, SafetensorsModel, writeGGUF, type GGUFEntry, type GGUFTensorSpec, type GGUFWriteEntry, type SourceTensorInfo, type TensorSource } from "../formats/index.js";
import { convertRows, elementCount, GGMLType, rowByteLength, typeInfo, typeName } from "../tensor/index.js";
import { hfEncoderMetadata, hfModelMetadata } from "./hf-metadata.js";
import { encoderLayout } from "./hf-encoder-tensors.js";
import { HFTensorSource } from "./hf-tensors.js";
import { folderChatTemplate } from "../tokenizer/hf/folder.js";
import { chatTemplateEntries, folderTokenizerEntries, isChatTemplateKey, folderVocabularySize, toStderr, wordPieceTokenizerEntries } from "./tokenizer-keys.js";
import { FLOAT32_TABLES, type TypeFallback } from "./quant-mixture.js";

/**
 * Hugging Face folder -> GGUF that llama.cpp loads: the hyperparameters as llama.cpp's keys,
 * the tensors under llama.cpp's names and layouts (the same mapping the loader uses), the
 * tokenizer keys, and the chat template. Tensors are converted and written one at a time.
 */

export type ConvertType = "f32" | "f16" | "bf16" | "q8_0" | "q4_0" | "iq4_nl" | "iq4_xs";

export const CONVERT_TYPES: Readonly<Record<ConvertType, { type: GGMLType; fileType: number }>> = {
  // general.file_type values (llama_ftype): ALL_F32 0, MOSTLY_F16 1, MOSTLY_Q4_0 2, MOSTLY_Q8_0 7,
  // MOSTLY_IQ4_NL 25, MOSTLY_IQ4_XS 30, MOSTLY_BF16 32
  f32: { type: GGMLType.F32, fileType: 0 },
  f16: { type: GGMLType.F16, fileType: 1 },
  bf16: { type: GGMLType.BF16, fileType: 32 },
  q8_0: { type: GGMLType.Q8_0, fileType: 7 },
  q4_0: { type: GGMLType.Q4_0, fileType: 2 },
  iq4_nl: { type: GGMLType.IQ4_NL, fileType: 25 },
  iq4_xs: { type: GGMLType.IQ4_XS, fileType: 30 },
};

/** llama-quant.cpp's replacement for a type whose blocks do not divide a matrix's rows (then F16 if that does not either) */
const ROW_FALLBACK = new Map<GGMLType, GGMLType>([[GGMLType.IQ4_XS, GGMLType.IQ4_NL]]);

export interface ConvertOptions {
  /** weight format of the matrices (default f16); vectors and the position / token-type tables stay F32 */
  readonly type?: ConvertType;
  /**
   * a GGUF whose tokenizer.* keys are copied (e.g. a vocab-only GGUF of the same tokenizer),
   * for folders whose tokenizer files cannot be turned into GGUF keys here; without it the
   * folder's own tokenizer files are converted (byte-level BPE, SentencePiece-style BPE)
   */
  readonly vocab?: string;
  /** where a warning goes, one line each (default: stderr): a list of named chat templates with no "default" */
  readonly onWarning?: (line: string) => void;
  /** general.name of the output (default: the folder's name) */
  readonly name?: string;
  /**
   * per-tensor types instead of `type`'s rule (tsllm quantize), given every tensor and the model's
   * GGUF keys (a mixture reads the layer count and heads); with `fileType` for general.file_type
   */
  readonly tensorTypes?: (infos: readonly SourceTensorInfo[], metadata: ReadonlyMap<string, GGUFEntry>) => (info: SourceTensorInfo) => GGMLType;
  readonly fileType?: number;
}

export interface ConvertResult {
  readonly architecture: string;
  readonly tensors: number;
  readonly type: ConvertType;
  /** matrices whose rows the type's blocks do not divide, and what they became (empty with `tensorTypes`, whose caller keeps its own) */
  readonly fallbacks: readonly TypeFallback[];
  /** the GGUF's size in bytes, as written (OUT may be a device: /dev/null) */
  readonly bytes: number;
}

/**
 * The type a tensor is written in: vectors and the position / token-type tables F32, matrices
 * `want` when their rows are whole blocks (or its fallback's), else F16; a matrix that fell back
 * is pushed to `fallbacks`.
 */
function outputType(info: SourceTensorInfo, want: GGMLType, fallbacks: TypeFallback[]): GGMLType {
  if (info.dims.length < 2) return GGMLType.F32;
  // the position and token-type tables (GPT-2, BERT): F32 whatever the type, as llama.cpp's
  // converter writes them (its tensors "always in float32"); quantize-on-load leaves them as stored
  if (FLOAT32_TABLES.has(info.name)) return GGMLType.F32;
  if (typeInfo(want).blockSize === 1) return want;
  const cols = info.dims[0]!;
  let type: GGMLType | undefined = want;
  while (type !== undefined && cols % typeInfo(type).blockSize !== 0) type = ROW_FALLBACK.get(type);
  const written = type ?? GGMLType.F16;
  if (written !== want) fallbacks.push({ tensor: info.name, rowLength: cols, asked: typeName(want), type: typeName(written) });
  return written;
}

/**
 * tokenizer.* keys of a GGUF, padded to the model's embedding rows as llama.cpp's converter pads a
 * short vocabulary. The vocabulary must be the folder's: as many tokens as the embedding has rows,
 * or, fewer (an embedding rounded up), as many as the folder's own tokenizer files hold (llama.cpp
 * pads only a model's own tokenizer). Another model's vocabulary was padded silently, and every id
 * past it, and every id it spells otherwise, was another token than the one the model learned.
 */
function vocabEntries(path: string, folder: string, rows: number): [string, GGUFWriteEntry][] {
  const h = readGGUFHeader(path);
  const entries = [...h.metadata].filter(([k]) => k.startsWith("tokenizer."));
  const tokens = h.metadata.get("tokenizer.ggml.tokens")?.value;
  if (!Array.isArray(tokens)) throw new Error(`${path}: tokenizer.ggml.tokens: expected an array of strings (--vocab must be a GGUF with a vocabulary)`);
  const mismatch = (why: string) => new Error(`--vocab ${path}: ${tokens.length} tokens, but ${why}; the vocabulary is not this model's (give the GGUF of the same tokenizer)`);
  const embedding = `the embedding of ${folder} (token_embd.weight) has ${rows} rows`;
  if (tokens.length > rows) throw mismatch(embedding);
  if (tokens.length < rows) {
    const own = folderVocabularySize(folder);
    if (own === undefined) throw mismatch(`${embedding} (and the folder has no tokenizer files that say a shorter vocabulary is its own)`);
    if (own.tokens !== tokens.length) throw mismatch(`${embedding} and ${own.where} has ${own.tokens} tokens`);
  }
  if (tokens.length === rows) return entries;
  const pad = rows - tokens.length;
  return entries.map(([k, e]): [string, GGUFWriteEntry] => {
    if (k === "tokenizer.ggml.tokens") return [k, ggufEntry.strings([...(tokens as string[]), ...Array.from({ length: pad }, (_, i) => `[PAD${tokens.length + i}]`)])];
    if (k === "tokenizer.ggml.scores" && e.value instanceof Float32Array) return [k, ggufEntry.f32s([...e.value, ...new Array<number>(pad).fill(0)])];
    // token type 5 = unused
    if (k === "tokenizer.ggml.token_type" && e.value instanceof Int32Array) return [k, ggufEntry.i32s([...e.value, ...new Array<number>(pad).fill(5)])];
    return [k, e];
  });
}

function tokenizerEntries(folder: string, rows: number, options: ConvertOptions): [string, GGUFWriteEntry][] {
  const warn = options.onWarning ?? toStderr;
  if (options.vocab === undefined) return folderTokenizerEntries(folder, rows, warn);
  // the folder's own chat templates, read as its tokenizer reads them, over the vocabulary GGUF's
  const templates = chatTemplateEntries(folderChatTemplate(folder), warn);
  const entries = vocabEntries(options.vocab, folder, rows);
  return templates.length === 0 ? entries : [...entries.filter(([k]) => !isChatTemplateKey(k)), ...templates];
}

/** Converts the Hugging Face model in `folder` to the GGUF file `out`. */
export async function convertHFToGGUF(folder: string, out: string, options: ConvertOptions = {}): Promise<ConvertResult> {
  const typeKey = options.type ?? "f16";
  const target = CONVERT_TYPES[typeKey];
  if (!target) throw new Error(`convert: --type must be one of ${Object.keys(CONVERT_TYPES).join(", ")}, got "${String(options.type)}"`);
  if (isEncoderModel(folder)) return convertEncoder(folder, out, typeKey, options);
  const cfg = readHFConfig(folder);
  const source = new HFTensorSource(SafetensorsModel.open(folder), cfg);
  try {
    const embd = source.tensors.get("token_embd.weight")!;
    const model = hfModelMetadata(cfg, options.name ?? basename(folder));
    const metadata: [string, GGUFWriteEntry][] = [
      ...(model as [string, GGUFEntry][]),
      ...fileTypeEntries(options.fileType ?? target.fileType),
      ...tokenizerEntries(folder, embd.dims[1]!, options),
    ];
    const infos = [...source.tensors.values()];
    const fallbacks: TypeFallback[] = [];
    const typeOf = options.tensorTypes?.(infos, new Map(model)) ?? ((info) => outputType(info, target.type, fallbacks));
    const bytes = await writeGGUF(out, { metadata, tensors: tensorSpecs(source, infos, typeOf) }, inputsOf(folder, options));
    return { architecture: cfg.arch, tensors: source.tensors.size, type: typeKey, fallbacks, bytes };
  } finally {
    source.close();
  }
}

/** the files a conversion reads while it writes (the folder's weights, config and tokenizer, and --vocab): the output must be none of them */
function inputsOf(folder: string, options: ConvertOptions): string[] {
  return [...readdirSync(folder).map((f) => join(folder, f)), ...(options.vocab ? [options.vocab] : [])];
}

function fileTypeEntries(fileType: number): [string, GGUFWriteEntry][] {
  return [["general.file_type", ggufEntry.u32(fileType)], ["general.quantization_version", ggufEntry.u32(2)]];
}

/**
 * A BERT encoder folder -> llama.cpp's `bert` architecture: the encoder's tensors (heads, whose
 * weights llama.cpp's embedding graph does not use, are left out, as its converter does), the
 * pooling of the folder's sentence-transformers config (default mean) as bert.pooling_type, and
 * the WordPiece vocabulary (or --vocab's keys).
 */
async function convertEncoder(folder: string, out: string, typeKey: ConvertType, options: ConvertOptions): Promise<ConvertResult> {
  const cfg = readHFEncoderConfig(folder);
  if (cfg.family !== "bert") throw new Error(`${folder}: ${cfg.hfArchitecture}: only BERT encoders convert to GGUF (llama.cpp's "bert" architecture)`);
  const pooling = readSentenceTransformerConfig(folder)?.pooling ?? "mean";
  if (pooling !== "mean" && pooling !== "cls" && pooling !== "lasttoken") throw new Error(`${folder}: pooling "${pooling}" has no llama.cpp pooling_type (mean, cls, lasttoken)`);
  const source = new HFTensorSource(SafetensorsModel.open(folder), (names) => encoderLayout(cfg, names));
  try {
    const infos = [...source.tensors.values()].filter((t) => /^(token_embd|token_types|position_embd|token_embd_norm)\.|^blk\./.test(t.name));
    const rows = source.tensors.get("token_embd.weight")!.dims[1]!;
    const model = hfEncoderMetadata(cfg, pooling, options.name ?? basename(folder));
    const metadata: [string, GGUFWriteEntry][] = [
      ...model,
      ...fileTypeEntries(options.fileType ?? CONVERT_TYPES[typeKey].fileType),
      ...(options.vocab === undefined ? wordPieceTokenizerEntries(folder, rows) : vocabEntries(options.vocab, folder, rows)),
    ];
    const fallbacks: TypeFallback[] = [];
    const typeOf = options.tensorTypes?.(infos, new Map(model)) ?? ((info) => outputType(info, CONVERT_TYPES[typeKey].type, fallbacks));
    const bytes = await writeGGUF(out, { metadata, tensors: tensorSpecs(source, infos, typeOf) }, inputsOf(folder, options));
    return { architecture: "bert", tensors: infos.length, type: typeKey, fallbacks, bytes };
  } finally {
    source.close();
  }
}

/** the tensors to write, each read and converted when the writer gets to it */
export function tensorSpecs(source: TensorSource, infos: readonly SourceTensorInfo[], typeOf: (info: SourceTensorInfo) => GGMLType): GGUFTensorSpec[] {
  return infos.map((info) => {
    const type = typeOf(info);
    return {
      name: info.name,
      type,
      dims: info.dims,
      data: () => {
        const raw = new Uint8Array(info.byteLength);
        source.read(info.name, raw, 0);
        if (type === info.type) return raw;
        const cols = info.dims[0]!;
        const dst = new Uint8Array(rowByteLength(type, cols) * (elementCount(info.dims) / cols));
        convertRows(info.type, raw, type, dst, cols);
        return dst;
      },
    };
  });
}
