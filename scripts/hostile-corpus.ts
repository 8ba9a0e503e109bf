// Hostile-corpus generator (issue 17, "Acceptance"): writes a few hundred kilobytes to a few
// megabytes of damaged model files into a folder, one per case, and returns the list of cases with
// how each is to be loaded and what its error must name. test/hostile-corpus.test.ts loads every
// case in a child process (scripts/hostile-load.ts); scripts/fuzz.ts uses the valid bases as seeds.
//
//   node --import tsx scripts/hostile-corpus.ts [--out DIR]     (default: a new temp folder)
//
// Every file is made by the project's own writers (writeGGUF, writeSafetensors, the random-model
// writers) from a tiny valid model, then changed in one way: a metadata value, a tensor, a byte
// range of the written file, a JSON field. Nothing here is committed as data.
import { copyFileSync, cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { ggufEntry, GGUFValueType, writeGGUF, type GGUFTensorSpec, type GGUFWriteEntry } from "../src/formats/index.js";
import { GGMLType, rowByteLength } from "../src/tensor/index.js";
import { planRandomModel, randomModelMetadata, readTokenizerEntries, tensorBytes, type RandomModelSpec, type RandomTensorPlan } from "../src/testing/random-model.js";
import { writeRandomHFModel } from "../src/testing/random-hf-model.js";
import { gpt2TokenizerJson } from "../src/tokenizer/hf/legacy.js";
import type { LoadKind } from "./hostile-load.js";


export interface HostileCase {
  /** short, unique, file-name safe */
  readonly name: string;
  /** issue 17's family */
  readonly family: string;
  /** the file or folder to load */
  readonly path: string;
  readonly kind: LoadKind;
  /** text the one-line error must contain besides the path (the key, field or section at fault) */
  readonly field?: string;
}

export interface HostileCorpus {
  readonly dir: string;
  readonly cases: HostileCase[];
  /** the valid files the cases were made from: they load (the test checks that first) */
  readonly bases: { gguf: string; vocab: string; hfFolder: string; tokenizerFolder: string };
}

// ---------------------------------------------------------------------------------------------
// the valid bases

/** A SentencePiece-style vocabulary: <unk>, <s>, </s>, 256 byte tokens, a few pieces (`size` tokens in all). */
function vocabEntries(size = 300): [string, GGUFWriteEntry][] {
  const tokens = ["<unk>", "<s>", "</s>"];
  const types = [2, 3, 3];
  for (let b = 0; b < 256; b++) { tokens.push(`<0x${b.toString(16).toUpperCase().padStart(2, "0")}>`); types.push(6); }
  const pieces = ["▁", "▁a", "▁t", "he", "▁the", "▁O", "nce", "▁u", "pon", "▁time", ..."abcdefghijklmnopqrstuvwxyzOT".split("")];
  for (const p of pieces) { tokens.push(p); types.push(1); }
  while (tokens.length < size) { tokens.push(`▁w${tokens.length}`); types.push(1); }
  const scores = tokens.map((_, i) => (i < 259 ? 0 : -i));
  return [
    ["tokenizer.ggml.model", ggufEntry.string("llama")],
    ["tokenizer.ggml.tokens", { type: GGUFValueType.ARRAY, itemType: GGUFValueType.STRING, value: tokens }],
    ["tokenizer.ggml.scores", { type: GGUFValueType.ARRAY, itemType: GGUFValueType.FLOAT32, value: scores }],
    ["tokenizer.ggml.token_type", { type: GGUFValueType.ARRAY, itemType: GGUFValueType.INT32, value: types }],
    ["tokenizer.ggml.bos_token_id", ggufEntry.u32(1)],
    ["tokenizer.ggml.eos_token_id", ggufEntry.u32(2)],
    ["tokenizer.ggml.unknown_token_id", ggufEntry.u32(0)],
  ];
}

function tinySpec(vocab: string): RandomModelSpec {
  return { arch: "llama", embeddingLength: 64, blockCount: 1, headCount: 4, headCountKv: 2, feedForwardLength: 128, contextLength: 128, weightType: GGMLType.F32, seed: 1, tokenizerFrom: vocab };
}

interface GGUFEdit {
  /** change the metadata in place (set, delete) */
  meta?: (m: Map<string, GGUFWriteEntry>) => void;
  /** replace the tensor list */
  tensors?: (t: GGUFTensorSpec[], plan: RandomTensorPlan[]) => GGUFTensorSpec[];
}

/** the tiny model with `edit` applied, written by writeGGUF */
async function writeModelGGUF(path: string, spec: RandomModelSpec, edit: GGUFEdit = {}): Promise<void> {
  const { entries, vocabSize } = readTokenizerEntries(spec.tokenizerFrom);
  const plan = planRandomModel(spec, vocabSize);
  const meta = new Map<string, GGUFWriteEntry>([...randomModelMetadata(spec, vocabSize), ...entries]);
  edit.meta?.(meta);
  let tensors: GGUFTensorSpec[] = plan.map((t) => ({ name: t.name, type: t.type, dims: t.dims, data: () => tensorBytes(t, spec) }));
  if (edit.tensors) tensors = edit.tensors(tensors, plan);
  await writeGGUF(path, { metadata: meta, tensors });
}

const GPT2_BYTES: string[] = (() => {
  // GPT-2's bytes_to_unicode: printable latin-1 bytes stand for themselves, the rest map to U+0100...
  const keep = new Set<number>();
  for (let b = 33; b <= 126; b++) keep.add(b);
  for (let b = 161; b <= 172; b++) keep.add(b);
  for (let b = 174; b <= 255; b++) keep.add(b);
  let n = 0;
  return Array.from({ length: 256 }, (_, b) => (keep.has(b) ? String.fromCharCode(b) : String.fromCharCode(256 + n++)));
})();

/** a byte-level BPE tokenizer.json (GPT-2's layout): 256 byte symbols, a few merges, <|endoftext|> (266 tokens) */
function baseTokenizerJson(where: string): Record<string, unknown> {
  const vocab: Record<string, number> = {};
  GPT2_BYTES.forEach((c, i) => { vocab[c] = i; });
  const merges = ["Ġ t", "h e", "Ġt he", "Ġ a", "o n", "i n", "e r", "a n", "Ġ w", "Ġ s"];
  for (const m of merges) vocab[m.replace(" ", "")] = Object.keys(vocab).length;
  vocab["<|endoftext|>"] = Object.keys(vocab).length;
  return gpt2TokenizerJson(vocab, merges.join("\n"), where);
}

// ---------------------------------------------------------------------------------------------
// byte surgery on a written GGUF

/** offset of the `occurrence`-th (0-based) GGUF string (u64 length + bytes) equal to `s`; points past it */
function afterString(buf: Buffer, s: string, occurrence = 0): number {
  const needle = Buffer.concat([u64(BigInt(Buffer.byteLength(s))), Buffer.from(s)]);
  let at = -1;
  for (let i = 0; i <= occurrence; i++) {
    at = buf.indexOf(needle, at + 1);
    if (at < 0) throw new Error(`hostile corpus: "${s}" #${occurrence} not found`);
  }
  return at + needle.length;
}
function u64(v: bigint): Buffer { const b = Buffer.alloc(8); b.writeBigUInt64LE(v); return b; }
function patched(buf: Buffer, at: number, bytes: Buffer): Buffer { const out = Buffer.from(buf); bytes.copy(out, at); return out; }
const u32b = (v: number) => { const b = Buffer.alloc(4); b.writeUInt32LE(v >>> 0); return b; };

// ---------------------------------------------------------------------------------------------

export async function buildHostileCorpus(outDir?: string): Promise<HostileCorpus> {
  const dir = outDir ?? mkdtempSync(join(tmpdir(), "tsllm-hostile-"));
  mkdirSync(dir, { recursive: true });
  const cases: HostileCase[] = [];
  const add = (c: HostileCase) => {
    if (cases.some((x) => x.name === c.name)) throw new Error(`hostile corpus: duplicate case ${c.name}`);
    cases.push(c);
  };

  // bases
  const vocab = join(dir, "base-vocab.gguf");
  await writeGGUF(vocab, { metadata: [["general.architecture", ggufEntry.string("llama")], ...vocabEntries()], tensors: [] });
  const spec = tinySpec(vocab);
  const gguf = join(dir, "base-model.gguf");
  await writeModelGGUF(gguf, spec);
  const baseBytes = readFileSync(gguf);
  // the HF folder's embedding has as many rows as its tokenizer.json has tokens
  const hfVocab = join(dir, "base-hf-vocab.gguf");
  const hfTokens = Object.keys((baseTokenizerJson("") as { model: { vocab: object } }).model.vocab).length;
  await writeGGUF(hfVocab, { metadata: [["general.architecture", ggufEntry.string("llama")], ...vocabEntries(hfTokens)], tensors: [] });
  const hfSpec = tinySpec(hfVocab);
  const hfFolder = join(dir, "base-hf");
  await writeRandomHFModel(hfFolder, hfSpec);
  writeFileSync(join(hfFolder, "tokenizer.json"), JSON.stringify(baseTokenizerJson(join(hfFolder, "tokenizer.json"))));
  const tokenizerFolder = join(dir, "base-tokenizer");
  mkdirSync(tokenizerFolder);
  writeFileSync(join(tokenizerFolder, "tokenizer.json"), JSON.stringify(baseTokenizerJson(join(tokenizerFolder, "tokenizer.json"))));
  writeFileSync(join(tokenizerFolder, "tokenizer_config.json"), JSON.stringify({ eos_token: "<|endoftext|>", chat_template: "{% for m in messages %}{{ m.content }}{% endfor %}" }));

  const arch = "llama";
  const ggufCase = async (name: string, family: string, edit: GGUFEdit, field?: string, extra: Partial<HostileCase> = {}) => {
    const path = join(dir, `${name}.gguf`);
    await writeModelGGUF(path, spec, edit);
    add({ name, family, path, kind: "model", field, ...extra });
  };
  const setMeta = (key: string, e: GGUFWriteEntry) => ({ meta: (m: Map<string, GGUFWriteEntry>) => { m.set(key, e); } });
  const bytesCase = (name: string, family: string, bytes: Buffer, field?: string) => {
    const path = join(dir, `${name}.gguf`);
    writeFileSync(path, bytes);
    add({ name, family, path, kind: "model", field });
  };

  // ---- GGUF structure damage, huge counts and lengths (byte surgery on the written file)
  const S = "gguf structure";
  const H = "huge counts and lengths";
  bytesCase("gguf-empty", S, Buffer.alloc(0));
  bytesCase("gguf-truncated-header", S, baseBytes.subarray(0, 40));
  bytesCase("gguf-truncated-data", S, baseBytes.subarray(0, baseBytes.length - 100));
  bytesCase("gguf-bad-magic", S, patched(baseBytes, 0, Buffer.from("GGUX")), "magic");
  bytesCase("gguf-version-99", S, patched(baseBytes, 4, u32b(99)), "version");
  bytesCase("gguf-tensor-count-huge", H, patched(baseBytes, 8, u64(1n << 62n)), "tensor");
  bytesCase("gguf-kv-count-huge", H, patched(baseBytes, 16, u64(1n << 62n)));
  bytesCase("gguf-key-length-huge", H, patched(baseBytes, 24, u64(1n << 62n)));
  {
    const at = afterString(baseBytes, "general.architecture");
    bytesCase("gguf-value-type-99", S, patched(baseBytes, at, u32b(99)), "general.architecture");
    bytesCase("gguf-string-length-huge", H, patched(baseBytes, at + 4, u64(1n << 62n)), "general.architecture");
  }
  {
    const at = afterString(baseBytes, "tokenizer.ggml.tokens");
    bytesCase("gguf-array-count-huge", H, patched(baseBytes, at + 8, u64(1n << 62n)), "tokenizer.ggml.tokens");
    bytesCase("gguf-array-item-type-99", S, patched(baseBytes, at + 4, u32b(99)), "tokenizer.ggml.tokens");
  }
  {
    const at = afterString(baseBytes, "token_embd.weight"); // the tensor info: n_dims, dims, type, offset
    bytesCase("gguf-tensor-ndims-1000", H, patched(baseBytes, at, u32b(1000)), "token_embd.weight");
    bytesCase("gguf-tensor-dim-huge", H, patched(baseBytes, at + 4, u64(1n << 62n)), "token_embd.weight");
    bytesCase("gguf-tensor-type-99", S, patched(baseBytes, at + 4 + 16, u32b(99)), "token_embd.weight");
    bytesCase("gguf-tensor-offset-huge", S, patched(baseBytes, at + 4 + 16 + 4, u64(1n << 50n)), "token_embd.weight");
    bytesCase("gguf-tensor-offset-misaligned", S, patched(baseBytes, at + 4 + 16 + 4, u64(1n)), "token_embd.weight");
  }

  // ---- names that are Object.prototype members, control characters in names
  const P = "Object.prototype names";
  await ggufCase("gguf-arch-proto", P, setMeta("general.architecture", ggufEntry.string("__proto__")), "__proto__");
  await ggufCase("gguf-arch-constructor", P, setMeta("general.architecture", ggufEntry.string("constructor")), "constructor");
  await ggufCase("gguf-arch-tostring", P, setMeta("general.architecture", ggufEntry.string("toString")), "toString");
  await ggufCase("gguf-tokenizer-model-proto", P, setMeta("tokenizer.ggml.model", ggufEntry.string("__proto__")), "tokenizer.ggml.model");
  await ggufCase("gguf-tokenizer-model-constructor", P, setMeta("tokenizer.ggml.model", ggufEntry.string("constructor")), "tokenizer.ggml.model");
  await ggufCase("gguf-tokenizer-pre-constructor", P, {
    meta: (m) => {
      m.set("tokenizer.ggml.model", ggufEntry.string("gpt2"));
      m.set("tokenizer.ggml.pre", ggufEntry.string("constructor"));
      m.set("tokenizer.ggml.merges", { type: GGUFValueType.ARRAY, itemType: GGUFValueType.STRING, value: ["▁ a"] });
    },
  }, "tokenizer.ggml.pre");
  await ggufCase("gguf-arch-control-chars", "control characters", setMeta("general.architecture", ggufEntry.string("\x1b]0;owned\x07\x1b[2Jllama")), "general.architecture");

  // ---- bad hyper-parameters
  const B = "bad hyper-parameters";
  const hp = (name: string, key: string, e: GGUFWriteEntry, field = key) => ggufCase(name, B, setMeta(`${arch}.${key}`, e), field);
  await hp("hp-head-count-0", "attention.head_count", ggufEntry.u32(0));
  await hp("hp-head-count-negative", "attention.head_count", ggufEntry.i32(-8));
  await hp("hp-head-count-5", "attention.head_count", ggufEntry.u32(5));
  await hp("hp-head-count-kv-0", "attention.head_count_kv", ggufEntry.u32(0));
  await hp("hp-head-count-kv-3", "attention.head_count_kv", ggufEntry.u32(3));
  await hp("hp-embedding-length-0", "embedding_length", ggufEntry.u32(0));
  await hp("hp-block-count-huge", "block_count", ggufEntry.u32(2 ** 31));
  await hp("hp-rope-dims-2-30", "rope.dimension_count", ggufEntry.u32(2 ** 30));
  await hp("hp-rope-dims-1174087", "rope.dimension_count", ggufEntry.u32(1174087));
  await hp("hp-rope-dims-odd", "rope.dimension_count", ggufEntry.u32(15));
  await hp("hp-rope-base-0", "rope.freq_base", ggufEntry.f32(0));
  await hp("hp-rope-base-nan", "rope.freq_base", ggufEntry.f32(Number.NaN));
  await hp("hp-rope-base-negative", "rope.freq_base", ggufEntry.f32(-1));
  await hp("hp-epsilon-negative", "attention.layer_norm_rms_epsilon", ggufEntry.f32(-1));
  await hp("hp-epsilon-nan", "attention.layer_norm_rms_epsilon", ggufEntry.f32(Number.NaN));
  await hp("hp-context-length-0", "context_length", ggufEntry.u32(0));
  await hp("hp-context-length-string", "context_length", ggufEntry.string("4096"));
  // the tensor whose shape the key contradicts; the rotary dimensions the head size 7 cannot hold
  await hp("hp-feed-forward-mismatch", "feed_forward_length", ggufEntry.u32(129), "blk.0.ffn_gate.weight");
  await hp("hp-key-length-7", "attention.key_length", ggufEntry.u32(7), "head size 7");
  await ggufCase("vocab-tokens-scores-mismatch", B, setMeta("tokenizer.ggml.scores", { type: GGUFValueType.ARRAY, itemType: GGUFValueType.FLOAT32, value: [0, 1, 2] }), "tokenizer.ggml.scores");
  await ggufCase("vocab-token-type-strings", B, setMeta("tokenizer.ggml.token_type", { type: GGUFValueType.ARRAY, itemType: GGUFValueType.STRING, value: Array.from({ length: 300 }, () => "x") }), "tokenizer.ggml.token_type");
  await ggufCase("vocab-larger-than-embedding", B, {
    tensors: (t, plan) => t.map((x, i) => (x.name !== "token_embd.weight" && x.name !== "output.weight" ? x : { ...x, dims: [64, 200], data: () => tensorBytes({ ...plan[i]!, dims: [64, 200] }, spec) })),
    meta: (m) => m.set(`${arch}.vocab_size`, ggufEntry.u32(200)),
  }, "token");

  // ---- NaN / Inf weights
  const N = "NaN norms";
  const poison = (name: string, tensor: string, value: number, whole: boolean) => ggufCase(name, N, {
    tensors: (t, plan) => t.map((x, i) => {
      if (x.name !== tensor) return x;
      return { ...x, data: () => {
        const bytes = tensorBytes(plan[i]!, spec);
        const f = new Float32Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 4);
        if (whole) f.fill(value); else f[3] = value;
        return bytes;
      } };
    }),
  }, tensor);
  await poison("nan-output-norm", "output_norm.weight", Number.NaN, false);
  await poison("inf-attn-norm", "blk.0.attn_norm.weight", Number.POSITIVE_INFINITY, false);
  await poison("nan-ffn-norm", "blk.0.ffn_norm.weight", Number.NaN, true);
  await poison("nan-token-embd", "token_embd.weight", Number.NaN, false);

  // ---- weights the backend cannot multiply
  await ggufCase("q8_1-weights", "unsupported weight types", {
    tensors: (t) => t.map((x) => (x.dims.length !== 2 ? x : { ...x, type: GGMLType.Q8_1, data: new Uint8Array(rowByteLength(GGMLType.Q8_1, x.dims[0]!) * x.dims[1]!) })),
  }, "Q8_1");

  // ---- huge special tokens
  await ggufCase("special-token-8mb", "huge special tokens", {
    meta: (m) => {
      const tokens = [...(m.get("tokenizer.ggml.tokens")!.value as string[])];
      const types = [...(m.get("tokenizer.ggml.token_type")!.value as number[])];
      tokens[299] = "<|" + "x".repeat(8 << 20) + "|>";
      types[299] = 3;
      m.set("tokenizer.ggml.tokens", { type: GGUFValueType.ARRAY, itemType: GGUFValueType.STRING, value: tokens });
      m.set("tokenizer.ggml.token_type", { type: GGUFValueType.ARRAY, itemType: GGUFValueType.INT32, value: types });
    },
  }, "tokenizer.ggml.tokens");

  // ---- chat templates (in a vocab-only GGUF; rendered once with one user message)
  const T = "chat template bombs";
  const templateCase = async (name: string, source: string) => {
    const path = join(dir, `${name}.gguf`);
    await writeGGUF(path, { metadata: [["general.architecture", ggufEntry.string("llama")], ...vocabEntries(), ["tokenizer.chat_template", ggufEntry.string(source)]], tensors: [] });
    add({ name, family: T, path, kind: "chat", field: "chat_template" });
  };
  // a value built up across loop iterations lives in a namespace: a plain `set` inside a loop is
  // local to the iteration (Jinja's scoping), so `{% set s = s + s %}` would never grow
  await templateCase("template-list-doubling", "{% set ns = namespace(a=[1]) %}{% for i in range(40) %}{% set ns.a = ns.a + ns.a %}{% endfor %}{{ ns.a|length }}");
  await templateCase("template-string-doubling", "{% set ns = namespace(s='ab') %}{% for i in range(40) %}{% set ns.s = ns.s + ns.s %}{% endfor %}{{ ns.s|length }}");
  await templateCase("template-loop-1m-by-1m", "{% for i in range(1000000) %}{% for j in range(1000000) %}{% endfor %}{% endfor %}");
  const twoMillion = "{% set ns = namespace(s='a ') %}{% for i in range(20) %}{% set ns.s = ns.s + ns.s %}{% endfor %}"; // 2^21 characters
  await templateCase("template-split-2m", twoMillion + "{% for i in range(100) %}{% set p = ns.s.split(' ') %}{% endfor %}{{ ns.s|length }}");
  await templateCase("template-replace-2m", twoMillion + "{% for i in range(100) %}{% set p = ns.s.replace('a', 'bbbb') %}{% endfor %}{{ ns.s|length }}");
  await templateCase("template-reverse-list", "{% for i in range(100) %}{% set r = range(1000000)|reverse|list %}{% endfor %}");
  await templateCase("template-range-1e12", "{% for i in range(1000000000000) %}x{% endfor %}");
  await templateCase("template-join-range", "{% for i in range(1000) %}{% set s = range(100000)|join(',') %}{% endfor %}");
  await templateCase("template-recursive-macro", "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}");
  await templateCase("template-unterminated-for", "{% for m in messages %}{{ m.content }}");
  await templateCase("template-paren-bomb", "{{ " + "(".repeat(100000) + "1" + ")".repeat(100000) + " }}");
  await templateCase("template-nested-if-bomb", "{% if true %}".repeat(20000) + "x" + "{% endif %}".repeat(20000));
  await templateCase("template-10mb", "x".repeat(10 << 20));

  // ---- tokenizer.json (a folder with tokenizer.json, loaded and asked to encode a text)
  const tokCase = (name: string, family: string, edit: (j: Record<string, any>) => unknown, field?: string) => {
    const folder = join(dir, name);
    mkdirSync(folder);
    const j = baseTokenizerJson(join(folder, "tokenizer.json")) as Record<string, any>;
    const replaced = edit(j);
    writeFileSync(join(folder, "tokenizer.json"), typeof replaced === "string" ? replaced : JSON.stringify(replaced ?? j));
    add({ name, family, path: folder, kind: "tokenizer", field });
  };
  const R = "catastrophic regex";
  tokCase("tokjson-split-backtracking", R, (j) => { j.pre_tokenizer = { type: "Split", pattern: { Regex: "(a+)+$" }, behavior: "Isolated", invert: false }; }, "pre_tokenizer");
  tokCase("tokjson-replace-backtracking", R, (j) => { j.normalizer = { type: "Replace", pattern: { Regex: "(a+)+$" }, content: "b" }; }, "normalizer");
  tokCase("tokjson-sequence-backtracking", R, (j) => { j.pre_tokenizer = { type: "Sequence", pretokenizers: [{ type: "Split", pattern: { Regex: "(x+x+)+y" }, behavior: "Removed", invert: false }, j.pre_tokenizer] }; }, "pre_tokenizer");
  tokCase("tokjson-invalid-regex", R, (j) => { j.pre_tokenizer = { type: "Split", pattern: { Regex: "(unclosed" }, behavior: "Isolated", invert: false }; }, "pre_tokenizer");
  const M = "bad merges";
  tokCase("tokjson-merges-numbers", M, (j) => { j.model.merges = [1, 2, 3]; }, "merges");
  tokCase("tokjson-merges-three-parts", M, (j) => { j.model.merges = ["Ġ t h"]; }, "merges");
  tokCase("tokjson-merges-not-array", M, (j) => { j.model.merges = "Ġ t"; }, "merges");
  tokCase("tokjson-merge-result-missing", M, (j) => { j.model.merges = [...j.model.merges, "a b"]; }, "merges");
  tokCase("tokjson-merge-part-missing", M, (j) => { j.model.merges = ["€ ‡"]; }, "merges");
  const J = "tokenizer.json shape";
  tokCase("tokjson-not-json", J, () => "{\"model\": {", "tokenizer.json");
  tokCase("tokjson-array", J, () => [1, 2, 3], "tokenizer.json");
  tokCase("tokjson-no-model", J, (j) => { delete j.model; }, "model");
  tokCase("tokjson-unigram-vocab-string", J, (j) => { j.model = { type: "Unigram", vocab: "abc", unk_id: 0 }; }, "vocab");
  tokCase("tokjson-unigram-vocab-pairs", J, (j) => { j.model = { type: "Unigram", vocab: [[1, 2], [3, 4]], unk_id: 0 }; }, "vocab");
  tokCase("tokjson-vocab-id-huge", J, (j) => { j.model.vocab["Ġzz"] = 2 ** 31; }, "vocab");
  tokCase("tokjson-vocab-id-negative", J, (j) => { j.model.vocab["Ġzz"] = -5; }, "vocab");
  tokCase("tokjson-model-type-constructor", P, (j) => { j.model.type = "constructor"; }, "model");
  tokCase("tokjson-pre-type-proto", P, (j) => { j.pre_tokenizer = { type: "__proto__" }; }, "pre_tokenizer");
  tokCase("tokjson-normalizer-type-hasownproperty", P, (j) => { j.normalizer = { type: "hasOwnProperty" }; }, "normalizer");
  tokCase("tokjson-decoder-type-constructor", P, (j) => { j.decoder = { type: "constructor" }; }, "decoder");
  tokCase("tokjson-added-token-1mb", "huge special tokens", (j) => {
    j.added_tokens = [...j.added_tokens, { id: 266, content: "<|" + "y".repeat(1 << 20) + "|>", single_word: false, lstrip: false, rstrip: false, normalized: false, special: true }];
  }, "added_tokens");

  // ---- HF folders: safetensors header damage, config.json
  const hfCase = (name: string, family: string, edit: (folder: string) => void, field?: string, extra: Partial<HostileCase> = {}) => {
    const folder = join(dir, name);
    cpSync(hfFolder, folder, { recursive: true });
    edit(folder);
    add({ name, family, path: folder, kind: "model", field, ...extra });
  };
  const st = (folder: string) => join(folder, "model.safetensors");
  const rewriteHeader = (folder: string, edit: (h: Record<string, any>) => unknown, raw?: (json: string) => string) => {
    const bytes = readFileSync(st(folder));
    const n = Number(bytes.readBigUInt64LE(0));
    const header = JSON.parse(bytes.subarray(8, 8 + n).toString("utf8")) as Record<string, any>;
    const replaced = edit(header) ?? header;
    let json = JSON.stringify(replaced);
    if (raw) json = raw(json);
    const hb = Buffer.from(json);
    writeFileSync(st(folder), Buffer.concat([u64(BigInt(hb.length)), hb, bytes.subarray(8 + n)]));
  };
  const firstTensor = (h: Record<string, any>) => Object.keys(h).find((k) => k !== "__metadata__")!;
  const X = "safetensors header";
  hfCase("st-header-length-past-eof", X, (f) => { const b = readFileSync(st(f)); writeFileSync(st(f), patched(b, 0, u64(BigInt(b.length)))); }, "header");
  hfCase("st-header-length-huge", X, (f) => { const b = readFileSync(st(f)); writeFileSync(st(f), patched(b, 0, u64(1n << 60n))); }, "header");
  hfCase("st-header-length-0", X, (f) => { const b = readFileSync(st(f)); writeFileSync(st(f), patched(b, 0, u64(0n))); }, "header");
  hfCase("st-truncated", X, (f) => { const b = readFileSync(st(f)); writeFileSync(st(f), b.subarray(0, b.length - 64)); });
  hfCase("st-header-not-json", X, (f) => rewriteHeader(f, () => undefined, (j) => j.slice(0, -3) + "}}"), "header");
  hfCase("st-header-array", X, (f) => rewriteHeader(f, () => [1, 2]), "header");
  hfCase("st-offsets-past-eof", X, (f) => rewriteHeader(f, (h) => { const k = firstTensor(h); h[k].data_offsets = [0, 1 << 30]; }), "data_offsets");
  hfCase("st-offsets-reversed", X, (f) => rewriteHeader(f, (h) => { const k = firstTensor(h); h[k].data_offsets = [h[k].data_offsets[1], h[k].data_offsets[0]]; }), "data_offsets");
  hfCase("st-dtype-unknown", X, (f) => rewriteHeader(f, (h) => { h[firstTensor(h)].dtype = "F99"; }), "dtype");
  hfCase("st-shape-negative", X, (f) => rewriteHeader(f, (h) => { h[firstTensor(h)].shape = [-1, 64]; }), "shape");
  hfCase("st-shape-huge", X, (f) => rewriteHeader(f, (h) => { h[firstTensor(h)].shape = [2 ** 53, 2 ** 53]; }), "shape");
  hfCase("st-shape-mismatch", X, (f) => rewriteHeader(f, (h) => { const t = h[firstTensor(h)]; t.shape = [t.shape[0], t.shape[1] + 1]; }), "shape");
  hfCase("st-tensor-named-proto", P, (f) => rewriteHeader(f, (h) => { const k = firstTensor(h); return JSON.parse(JSON.stringify(h).replace(`"${k}"`, "\"__proto__\"")); }));
  // a name from the file quoted in the error: the line is cut, not 100K characters long
  hfCase("st-tensor-name-100k", X, (f) => rewriteHeader(f, (h) => { const k = firstTensor(h); return JSON.parse(JSON.stringify(h).replace(`"${k}"`, JSON.stringify("x".repeat(100_000)))); }), "more characters");
  hfCase("st-tensor-name-control-chars", "control characters", (f) => rewriteHeader(f, (h) => { const k = firstTensor(h); return JSON.parse(JSON.stringify(h).replace(`"${k}"`, JSON.stringify(`${k}\x1b[2J`))); }));
  hfCase("st-index-path-traversal", X, (f) => {
    const h = JSON.parse(readFileSync(st(f)).subarray(8, 8 + Number(readFileSync(st(f)).readBigUInt64LE(0))).toString()) as Record<string, unknown>;
    const weightMap = Object.fromEntries(Object.keys(h).filter((k) => k !== "__metadata__").map((k) => [k, "../../../../../../../../etc/passwd"]));
    writeFileSync(join(f, "model.safetensors.index.json"), JSON.stringify({ metadata: {}, weight_map: weightMap }));
    copyFileSync(st(f), join(f, "unused.bin"));
    writeFileSync(st(f), "");
  }, "weight_map");
  // a folder where a file should be opens without error, and only its read() fails, naming no file
  hfCase("st-file-is-folder", X, (f) => { rmSync(st(f)); mkdirSync(st(f)); }, "is a folder");
  hfCase("st-index-shard-is-folder", X, (f) => {
    const h = JSON.parse(readFileSync(st(f)).subarray(8, 8 + Number(readFileSync(st(f)).readBigUInt64LE(0))).toString()) as Record<string, unknown>;
    writeFileSync(join(f, "model.safetensors.index.json"), JSON.stringify({ metadata: {}, weight_map: Object.fromEntries(Object.keys(h).filter((k) => k !== "__metadata__").map((k) => [k, "shard.safetensors"])) }));
    rmSync(st(f));
    mkdirSync(join(f, "shard.safetensors"));
  }, "shard.safetensors: file: is a folder");
  const C = "config.json";
  const config = (edit: (c: Record<string, any>) => unknown) => (f: string) => {
    const c = JSON.parse(readFileSync(join(f, "config.json"), "utf8")) as Record<string, any>;
    const r = edit(c);
    writeFileSync(join(f, "config.json"), typeof r === "string" ? r : JSON.stringify(r ?? c));
  };
  hfCase("cfg-not-json", C, config(() => "{\"architectures\": ["), "config.json");
  hfCase("cfg-array", C, config(() => [1]), "config.json");
  hfCase("cfg-arch-constructor", P, config((c) => { c.architectures = ["constructor"]; }), "constructor");
  hfCase("cfg-arch-proto", P, config((c) => { c.architectures = ["__proto__"]; c.model_type = "__proto__"; }), "__proto__");
  hfCase("cfg-architectures-number", C, config((c) => { c.architectures = 7; }), "architectures");
  hfCase("cfg-is-folder", C, (f) => { rmSync(join(f, "config.json")); mkdirSync(join(f, "config.json")); }, "config.json: file: is a folder");
  const cfg = (name: string, key: string, v: unknown) => hfCase(name, B, config((c) => { c[key] = v; }), key);
  cfg("cfg-heads-0", "num_attention_heads", 0);
  cfg("cfg-heads-negative", "num_attention_heads", -8);
  cfg("cfg-kv-heads-3", "num_key_value_heads", 3);
  cfg("cfg-hidden-size-string", "hidden_size", "64");
  cfg("cfg-head-dim-odd", "head_dim", 15);
  cfg("cfg-rope-theta-0", "rope_theta", 0);
  cfg("cfg-rms-eps-negative", "rms_norm_eps", -1);
  cfg("cfg-max-positions-0", "max_position_embeddings", 0);
  cfg("cfg-layers-huge", "num_hidden_layers", 1e9);
  cfg("cfg-vocab-size-huge", "vocab_size", 2 ** 40);
  cfg("cfg-intermediate-nan", "intermediate_size", "NaN");
  // (a tokenizer smaller than the embedding is accepted: padded embeddings are common, and the
  // padding ids are never sampled; test/model-limits.test.ts. A larger one is refused: below.)

  return { dir, cases, bases: { gguf, vocab, hfFolder, tokenizerFolder } };
}

// `node --import tsx scripts/hostile-corpus.ts [--out DIR]`: build and list
if (process.argv[1] && import.meta.url === pathToFileURL(resolve(process.argv[1])).href) {
  const i = process.argv.indexOf("--out");
  const corpus = await buildHostileCorpus(i > 0 ? process.argv[i + 1] : undefined);
  for (const c of corpus.cases) process.stdout.write(`${c.kind.padEnd(9)} ${c.family.padEnd(26)} ${c.path}\n`);
  process.stdout.write(`${corpus.cases.length} cases in ${corpus.dir}\n`);
}
