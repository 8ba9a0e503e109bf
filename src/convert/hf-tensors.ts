import { SafetensorsError, type HFModelConfig, type SafetensorsDType, type SafetensorsModel, type SafetensorsTensorInfo, type SourceTensorInfo, type TensorSource } from "../formats/index.js";
import { GGMLType } from "../tensor/index.js";

/**
 * Hugging Face checkpoint tensors seen as llama.cpp's: renamed to GGUF names, with shapes in
 * ggml order, and re-laid-out where llama.cpp's converter does it:
 *  - Llama/Mistral Q and K rows are permuted per head from the half-split RoPE layout to the
 *    adjacent-pair layout llama.cpp's "llama" architecture rotates (Qwen keeps half-split);
 *  - GPT-2's Conv1D weights are stored [in, out] and are transposed to [out rows, in cols];
 *  - llama3 RoPE scaling becomes a `rope_freqs.weight` vector of per-frequency divisors.
 * Loading and `tsllm convert` both go through this mapping, so a converted GGUF holds exactly
 * the tensors the folder loads as.
 */

export type HFTransform = { kind: "permute"; heads: number } | { kind: "transpose" };
type Transform = HFTransform;

interface Mapped {
  readonly info: SourceTensorInfo & { readonly origin: string };
  readonly hf?: SafetensorsTensorInfo;
  readonly transform?: Transform;
  /** generated tensors (rope_freqs) carry their bytes */
  readonly bytes?: Uint8Array;
}

const DTYPE_TO_GGML: Partial<Record<SafetensorsDType, GGMLType>> = {
  F32: GGMLType.F32,
  F16: GGMLType.F16,
  BF16: GGMLType.BF16,
};

/**
 * GGUF name -> HF name and re-layout, for every tensor an architecture may have (optional
 * ones included). `hfNames` (the checkpoint's names) tells GPT-2's two naming schemes apart.
 */
export function hfNameMap(cfg: HFModelConfig, hfNames: ReadonlySet<string>): Map<string, { hf: string; transform?: Transform }> {
  const m = new Map<string, { hf: string; transform?: Transform }>();
  if (cfg.arch === "gpt2") {
    // GPT2LMHeadModel prefixes "transformer."; a bare GPT2Model checkpoint does not
    const pre = hfNames.has("transformer.wte.weight") ? "transformer." : "";
    const T: Transform = { kind: "transpose" };
    m.set("token_embd.weight", { hf: pre + "wte.weight" });
    m.set("position_embd.weight", { hf: pre + "wpe.weight" });
    m.set("output_norm.weight", { hf: pre + "ln_f.weight" });
    m.set("output_norm.bias", { hf: pre + "ln_f.bias" });
    m.set("output.weight", { hf: "lm_head.weight" });
    for (let l = 0; l < cfg.blockCount; l++) {
      const h = `${pre}h.${l}.`, b = `blk.${l}.`;
      for (const [g, hf, t] of [
        ["attn_norm", "ln_1", undefined], ["attn_qkv", "attn.c_attn", T], ["attn_output", "attn.c_proj", T],
        ["ffn_norm", "ln_2", undefined], ["ffn_up", "mlp.c_fc", T], ["ffn_down", "mlp.c_proj", T],
      ] as const) {
        m.set(`${b}${g}.weight`, { hf: `${h}${hf}.weight`, transform: t });
        m.set(`${b}${g}.bias`, { hf: `${h}${hf}.bias` });
      }
    }
    return m;
  }
  const permute = cfg.arch === "llama";
  const q: Transform | undefined = permute ? { kind: "permute", heads: cfg.headCount } : undefined;
  const k: Transform | undefined = permute ? { kind: "permute", heads: cfg.headCountKv } : undefined;
  m.set("token_embd.weight", { hf: "model.embed_tokens.weight" });
  m.set("output_norm.weight", { hf: "model.norm.weight" });
  m.set("output.weight", { hf: "lm_head.weight" });
  for (let l = 0; l < cfg.blockCount; l++) {
    const h = `model.layers.${l}.`, b = `blk.${l}.`;
    m.set(`${b}attn_norm.weight`, { hf: `${h}input_layernorm.weight` });
    for (const s of ["weight", "bias"]) {
      m.set(`${b}attn_q.${s}`, { hf: `${h}self_attn.q_proj.${s}`, transform: q });
      m.set(`${b}attn_k.${s}`, { hf: `${h}self_attn.k_proj.${s}`, transform: k });
      m.set(`${b}attn_v.${s}`, { hf: `${h}self_attn.v_proj.${s}` });
      m.set(`${b}attn_output.${s}`, { hf: `${h}self_attn.o_proj.${s}` });
    }
    m.set(`${b}attn_q_norm.weight`, { hf: `${h}self_attn.q_norm.weight` });
    m.set(`${b}attn_k_norm.weight`, { hf: `${h}self_attn.k_norm.weight` });
    m.set(`${b}ffn_norm.weight`, { hf: `${h}post_attention_layernorm.weight` });
    m.set(`${b}ffn_gate.weight`, { hf: `${h}mlp.gate_proj.weight` });
    m.set(`${b}ffn_up.weight`, { hf: `${h}mlp.up_proj.weight` });
    m.set(`${b}ffn_down.weight`, { hf: `${h}mlp.down_proj.weight` });
  }
  return m;
}

/** HF tensors that carry no weights of their own: buffers and a tied LM head's duplicate */
function isIgnorable(name: string, cfg: HFModelConfig): boolean {
  if (cfg.tieWordEmbeddings && name === "lm_head.weight") return true;
  if (cfg.arch === "gpt2") return /(^|\.)h\.\d+\.attn\.(bias|masked_bias)$/.test(name);
  return /\.rotary_emb\.inv_freq$/.test(name);
}

/** the GGUF tensors the architecture needs, in llama.cpp's order */
export function requiredTensors(cfg: HFModelConfig): string[] {
  const out = ["token_embd.weight"];
  if (cfg.arch === "gpt2") out.push("position_embd.weight");
  for (let l = 0; l < cfg.blockCount; l++) {
    const b = `blk.${l}.`;
    if (cfg.arch === "gpt2") {
      for (const g of ["attn_norm", "attn_qkv", "attn_output", "ffn_norm", "ffn_up", "ffn_down"]) out.push(`${b}${g}.weight`, `${b}${g}.bias`);
      continue;
    }
    out.push(`${b}attn_norm.weight`, `${b}attn_q.weight`, `${b}attn_k.weight`, `${b}attn_v.weight`);
    if (cfg.attentionBias) out.push(`${b}attn_q.bias`, `${b}attn_k.bias`, `${b}attn_v.bias`);
    if (cfg.arch === "qwen3") out.push(`${b}attn_q_norm.weight`, `${b}attn_k_norm.weight`);
    out.push(`${b}attn_output.weight`);
    if (cfg.attentionBias && cfg.arch === "llama") out.push(`${b}attn_output.bias`);
    out.push(`${b}ffn_norm.weight`, `${b}ffn_gate.weight`, `${b}ffn_up.weight`, `${b}ffn_down.weight`);
  }
  out.push("output_norm.weight");
  if (cfg.arch === "gpt2") out.push("output_norm.bias");
  if (!cfg.tieWordEmbeddings) out.push("output.weight");
  return out;
}

/** llama3 RoPE scaling as per-frequency divisors of the rotation angle (what llama.cpp stores as rope_freqs.weight) */
export function llama3RopeFactors(cfg: HFModelConfig): Float32Array | undefined {
  const s = cfg.ropeScaling;
  if (s?.type !== "llama3") return undefined;
  const dim = cfg.headDim;
  const lowWavelen = s.originalContextLength / s.lowFreqFactor;
  const highWavelen = s.originalContextLength / s.highFreqFactor;
  const out = new Float32Array(dim / 2);
  for (let i = 0; i < dim / 2; i++) {
    const freq = 1 / Math.pow(cfg.ropeTheta, (2 * i) / dim);
    const wavelen = (2 * Math.PI) / freq;
    if (wavelen < highWavelen) out[i] = 1;
    else if (wavelen > lowWavelen) out[i] = s.factor;
    else {
      // between the two: interpolate the inverse frequency between scaled and unscaled
      const smooth = (s.originalContextLength / wavelen - s.lowFreqFactor) / (s.highFreqFactor - s.lowFreqFactor);
      out[i] = 1 / ((1 - smooth) / s.factor + smooth);
    }
  }
  return out;
}

/**
 * Per-head row permutation between HF's half-split Q/K layout and llama.cpp's interleaved
 * one: GGUF row h*hd + 2i + j holds HF row h*hd + j*hd/2 + i. `toHF` applies the inverse.
 */
export function permuteHeadRows(src: Uint8Array, rows: number, rowBytes: number, heads: number, toHF = false): Uint8Array {
  const hd = rows / heads, half = hd / 2;
  if (!Number.isInteger(half)) throw new Error(`cannot permute ${rows} rows over ${heads} heads: the head size must be even`);
  const out = new Uint8Array(src.length);
  for (let h = 0; h < heads; h++) {
    for (let i = 0; i < half; i++) {
      for (let j = 0; j < 2; j++) {
        const gguf = h * hd + 2 * i + j, hf = h * hd + j * half + i;
        const [from, to] = toHF ? [gguf, hf] : [hf, gguf];
        out.set(src.subarray(from * rowBytes, (from + 1) * rowBytes), to * rowBytes);
      }
    }
  }
  return out;
}

/** transposes a row-major [rows, cols] matrix of `elemBytes`-byte elements */
export function transposeBytes(src: Uint8Array, rows: number, cols: number, elemBytes: number): Uint8Array {
  const out = new Uint8Array(src.length);
  const view = <T extends Uint8Array | Uint16Array | Uint32Array>(C: new (b: ArrayBuffer, o: number, l: number) => T, b: Uint8Array) => new C(b.buffer as ArrayBuffer, b.byteOffset, b.length / elemBytes);
  const run = <T extends Uint8Array | Uint16Array | Uint32Array>(C: new (b: ArrayBuffer, o: number, l: number) => T) => {
    const s = view(C, src), d = view(C, out);
    for (let r = 0; r < rows; r++) for (let c = 0; c < cols; c++) d[c * rows + r] = s[r * cols + c]!;
  };
  if (elemBytes === 4 && src.byteOffset % 4 === 0) run(Uint32Array);
  else if (elemBytes === 2 && src.byteOffset % 2 === 0) run(Uint16Array);
  else {
    for (let r = 0; r < rows; r++) for (let c = 0; c < cols; c++) out.set(src.subarray((r * cols + c) * elemBytes, (r * cols + c + 1) * elemBytes), (c * rows + r) * elemBytes);
  }
  return out;
}

/**
 * How a checkpoint's tensors become GGUF-named ones: the name map (GGUF -> HF name and
 * re-layout), the GGUF tensors that must be there, and the HF tensors that carry no weights.
 * Decoders get theirs from `decoderLayout`; encoders (src/convert/hf-encoder-tensors.ts) have their own.
 */
export interface HFTensorLayout {
  /** config.json's architecture, for errors */
  readonly hfArchitecture: string;
  readonly map: ReadonlyMap<string, { hf: string; transform?: Transform }>;
  readonly required: readonly string[];
  isIgnorable(hfName: string): boolean;
  /** tensors computed from the config (llama3's rope_freqs), with their bytes */
  readonly generated?: readonly { readonly name: string; readonly origin: string; readonly data: Float32Array }[];
}

/** the layout of a decoder checkpoint (Llama family, GPT-2) */
export function decoderLayout(cfg: HFModelConfig, hfNames: ReadonlySet<string>): HFTensorLayout {
  const map = hfNameMap(cfg, hfNames);
  // a tied LM head is the embedding; a saved lm_head.weight is then only its duplicate
  if (cfg.tieWordEmbeddings) map.delete("output.weight");
  const factors = llama3RopeFactors(cfg);
  return {
    hfArchitecture: cfg.hfArchitecture,
    map,
    required: requiredTensors(cfg),
    isIgnorable: (n) => isIgnorable(n, cfg),
    generated: factors ? [{ name: "rope_freqs.weight", origin: "config.json rope_scaling", data: factors }] : [],
  };
}

/**
 * Checks that the checkpoint has exactly the tensors the architecture uses (listing every
 * unknown and every missing one) and presents them under GGUF names. `spec` is a decoder's
 * config.json or any layout (encoders).
 */
export class HFTensorSource implements TensorSource {
  readonly path: string;
  readonly tensors: ReadonlyMap<string, SourceTensorInfo & { readonly origin: string }>;
  readonly ignorable: ReadonlySet<string>;
  private readonly mapped = new Map<string, Mapped>();
  /** the last transformed tensor, kept while its row chunks are read */
  private cached: { name: string; bytes: Uint8Array } | undefined;

  constructor(readonly st: SafetensorsModel, spec: HFModelConfig | ((hfNames: ReadonlySet<string>) => HFTensorLayout)) {
    this.path = st.path;
    const hfNames = new Set(st.tensors.keys());
    const layout = typeof spec === "function" ? spec(hfNames) : decoderLayout(spec, hfNames);
    const map = layout.map;
    const claimed = new Set<string>();
    for (const [gguf, { hf, transform }] of map) {
      const t = st.info(hf);
      if (!t) continue;
      claimed.add(hf);
      this.mapped.set(gguf, { info: this.describe(gguf, t, transform), hf: t, transform });
    }
    const unknown = [...hfNames].filter((n) => !claimed.has(n) && !layout.isIgnorable(n));
    if (unknown.length > 0) {
      throw new SafetensorsError(st.path, "tensors", `${unknown.length} tensor(s) not used by ${layout.hfArchitecture}: ${unknown.slice(0, 10).join(", ")}${unknown.length > 10 ? ", ..." : ""}`);
    }
    const reverse = new Map([...map].map(([g, { hf }]) => [g, hf]));
    const missing = layout.required.filter((g) => !this.mapped.has(g)).map((g) => reverse.get(g) ?? g);
    if (missing.length > 0) {
      throw new SafetensorsError(st.path, "tensors", `${missing.length} tensor(s) that ${layout.hfArchitecture} needs are missing: ${missing.slice(0, 10).join(", ")}${missing.length > 10 ? ", ..." : ""}`);
    }
    for (const g of layout.generated ?? []) {
      const bytes = new Uint8Array(g.data.buffer, g.data.byteOffset, g.data.byteLength);
      this.mapped.set(g.name, { info: { name: g.name, origin: g.origin, type: GGMLType.F32, dims: [g.data.length], byteLength: bytes.length }, bytes });
    }
    this.tensors = new Map([...this.mapped].map(([k, v]) => [k, v.info]));
    this.ignorable = new Set([...hfNames].filter((n) => !claimed.has(n)));
  }

  private describe(gguf: string, t: SafetensorsTensorInfo, transform: Transform | undefined): SourceTensorInfo & { readonly origin: string } {
    const type = DTYPE_TO_GGML[t.dtype];
    if (type === undefined) throw new SafetensorsError(t.path, `tensor "${t.name}"`, `dtype ${t.dtype} cannot hold model weights (expected F32, F16 or BF16)`);
    if (t.shape.length < 1 || t.shape.length > 2) throw new SafetensorsError(t.path, `tensor "${t.name}"`, `expected a vector or a matrix, found shape [${t.shape.join(", ")}]`);
    // row-major [rows, cols] is ggml [cols, rows]; a Conv1D weight [in, out] becomes [in cols, out rows]
    const dims = transform?.kind === "transpose" ? [...t.shape] : [...t.shape].reverse();
    return { name: gguf, origin: t.name, type, dims, byteLength: t.byteLength };
  }

  read(name: string, into: Uint8Array, byteOffset: number): void {
    const m = this.mapped.get(name);
    if (!m) throw new SafetensorsError(this.path, `tensor "${name}"`, "not in this model");
    if (m.bytes) {
      into.set(m.bytes.subarray(byteOffset, byteOffset + into.length));
      return;
    }
    const hf = m.hf!;
    if (!m.transform) {
      this.st.read(hf.name, into, byteOffset);
      return;
    }
    if (this.cached?.name !== name) {
      this.cached = undefined; // free the previous one before reading the next
      const raw = new Uint8Array(hf.byteLength);
      this.st.read(hf.name, raw, 0);
      const elem = hf.byteLength / hf.shape.reduce((a, b) => a * b, 1);
      const rows = hf.shape[0]!, cols = hf.shape.length > 1 ? hf.shape[1]! : 1;
      const bytes = m.transform.kind === "transpose" ? transposeBytes(raw, rows, cols, elem) : permuteHeadRows(raw, rows, cols * elem, m.transform.heads);
      this.cached = { name, bytes };
    }
    into.set(this.cached.bytes.subarray(byteOffset, byteOffset + into.length));
  }

  close(): void {
    this.cached = undefined;
    this.st.close();
  }
}
