import { GGUFMetadata, readGGUFHeader } from "../formats/index.js";
import { typeName, elementCount } from "../tensor/index.js";
import { tokenizerFromGGUF } from "../tokenizer/index.js";
import { printable } from "../units/index.js";
import { flag, parse, requireString, type OptionSpec } from "./args.js";

export const inspectHelp = `Usage: tsllm inspect --model FILE.gguf [--json]

Prints the architecture, parameter count, tensor types, context length, vocabulary and
special tokens of a GGUF file without loading its weights.
`;

export const INSPECT_ARGS: OptionSpec = { model: { type: "string" }, json: { type: "boolean" } };

export async function runInspect(argv: string[]): Promise<void> {
  const values = parse(argv, INSPECT_ARGS);
  if (flag(values, "help")) { process.stdout.write(inspectHelp); return; }
  const path = requireString(values, "model");
  const header = readGGUFHeader(path);
  const meta = new GGUFMetadata(path, header.metadata);
  const arch = meta.string("general.architecture") ?? "(none)";
  const types = new Map<string, { tensors: number; parameters: number }>();
  let parameters = 0;
  for (const t of header.tensors) {
    const n = elementCount(t.dims);
    parameters += n;
    const e = types.get(typeName(t.type)) ?? { tensors: 0, parameters: 0 };
    e.tensors++; e.parameters += n;
    types.set(typeName(t.type), e);
  }
  const tokenizer = meta.has("tokenizer.ggml.model") ? tokenizerFromGGUF(meta) : undefined;
  const special = (id: number | undefined) => (id === undefined ? undefined : { id, piece: tokenizer!.piece(id) });
  const report = {
    file: path,
    ggufVersion: header.version,
    name: meta.string("general.name"),
    architecture: arch,
    parameters,
    tensorCount: header.tensors.length,
    tensorTypes: Object.fromEntries(types),
    contextLength: meta.number(`${arch}.context_length`),
    embeddingLength: meta.number(`${arch}.embedding_length`),
    blockCount: meta.number(`${arch}.block_count`),
    headCount: meta.number(`${arch}.attention.head_count`),
    headCountKv: meta.number(`${arch}.attention.head_count_kv`),
    vocabulary: tokenizer ? { type: tokenizer.type, pre: tokenizer.pre, size: tokenizer.vocabSize, addBos: tokenizer.addBos, addEos: tokenizer.addEos } : undefined,
    specialTokens: tokenizer ? { bos: special(tokenizer.bosId), eos: special(tokenizer.eosId), unk: special(tokenizer.unkId), pad: special(tokenizer.padId), endOfGeneration: [...tokenizer.endOfGenerationIds].map(special) } : undefined,
    chatTemplate: meta.has("tokenizer.chat_template"),
  };
  if (flag(values, "json")) { process.stdout.write(JSON.stringify(report, null, 2) + "\n"); return; }
  const fmt = (n: number) => (n >= 1e9 ? `${(n / 1e9).toFixed(2)}B` : n >= 1e6 ? `${(n / 1e6).toFixed(2)}M` : n >= 1e3 ? `${(n / 1e3).toFixed(1)}K` : String(n));
  const tok = (s: { id: number; piece: string } | undefined) => (s ? `${s.id} ${JSON.stringify(s.piece)}` : "-");
  const lines = [
    `file:            ${path} (GGUF v${header.version})`,
    `name:            ${report.name ?? "-"}`,
    `architecture:    ${arch}`,
    `parameters:      ${fmt(parameters)} (${parameters}) in ${header.tensors.length} tensors`,
    `tensor types:    ${[...types].map(([t, e]) => `${t} x${e.tensors}`).join(", ")}`,
    `context length:  ${report.contextLength ?? "-"}`,
    `layers:          ${report.blockCount ?? "-"}, embedding ${report.embeddingLength ?? "-"}, heads ${report.headCount ?? "-"} / kv ${report.headCountKv ?? report.headCount ?? "-"}`,
    `vocabulary:      ${tokenizer ? `${tokenizer.vocabSize} tokens, ${tokenizer.type}${tokenizer.pre ? ` (pre: ${tokenizer.pre})` : ""}, add BOS ${tokenizer.addBos}` : "none"}`,
    `special tokens:  BOS ${tok(report.specialTokens?.bos)}, EOS ${tok(report.specialTokens?.eos)}, UNK ${tok(report.specialTokens?.unk)}`,
    `end of turn:     ${report.specialTokens?.endOfGeneration.map(tok).join(", ") || "-"}`,
    `chat template:   ${report.chatTemplate ? "yes" : "no"}`,
  ];
  // names and values come from the file: no control character reaches the terminal
  process.stdout.write(printable(lines.join("\n")) + "\n");
}
