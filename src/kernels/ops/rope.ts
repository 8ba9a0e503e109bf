/**
 * Rotary position embeddings, in place on `x` = nTokens rows of nHeads * headDim floats.
 *
 * Two layouts: "norm" rotates adjacent pairs (2i, 2i+1) — llama.cpp's GGUF Llama weights are
 * permuted for it; "neox" rotates (i, i + ropeDim/2) — the Hugging Face layout, used by
 * Qwen2/Qwen3 GGUFs too. The angle for pair i at position p is
 * p * freqScale * base^(-2i/ropeDim) / freqFactor[i]; like ggml we step theta by a float32
 * factor, so angles match llama.cpp to the last bit.
 */
import { cosfGlibc, sinfGlibc } from "./sincosf.js";

export interface RopeParams {
  readonly headDim: number;
  /** number of leading dims of each head that are rotated (<= headDim) */
  readonly ropeDim: number;
  readonly base: number;
  /** 1 / linear scaling factor */
  readonly freqScale: number;
  readonly style: "norm" | "neox";
  /** per-pair divisors (llama3 scaling, `rope_freqs.weight`) */
  readonly freqFactors?: Float32Array;
}

/** cos/sin of every position computed so far, per parameter set: cache[pos * ropeDim + 2i] = cos */
const angleTables = new WeakMap<RopeParams, { cache: Float32Array; positions: number }>();

/**
 * cos/sin for one position, a view into the table: [2i] = cos, [2i+1] = sin. Computed as
 * llama.cpp does — theta stepped by a float32 factor, glibc's sinf/cosf — and kept per parameter
 * set, since every layer and every later call rotates by the same angles.
 */
export function ropeAngles(pos: number, p: RopeParams): Float32Array {
  if (!Number.isInteger(pos) || pos < 0) throw new Error(`RoPE position must be a non-negative integer, got ${pos}`);
  let table = angleTables.get(p);
  if (!table || pos >= table.positions) {
    const positions = Math.max(pos + 1, 2 * (table?.positions ?? 32));
    const grown = new Float32Array(positions * p.ropeDim);
    const known = table?.positions ?? 0;
    if (table) grown.set(table.cache);
    const thetaScale = Math.fround(Math.pow(p.base, Math.fround(-2 / p.ropeDim))); // ggml: powf(base, -2.0f / n_dims)
    for (let q = known; q < positions; q++) computeAngles(grown.subarray(q * p.ropeDim, (q + 1) * p.ropeDim), q, thetaScale, p);
    table = { cache: grown, positions };
    angleTables.set(p, table);
  }
  return table.cache.subarray(pos * p.ropeDim, (pos + 1) * p.ropeDim);
}

function computeAngles(cache: Float32Array, pos: number, thetaScale: number, p: RopeParams): void {
  let theta = Math.fround(pos);
  for (let i = 0; i < p.ropeDim / 2; i++) {
    const ff = p.freqFactors ? p.freqFactors[i]! : 1;
    const t = Math.fround(p.freqScale * Math.fround(theta / ff));
    cache[2 * i] = cosfGlibc(t);
    cache[2 * i + 1] = sinfGlibc(t);
    theta = Math.fround(theta * thetaScale);
  }
}

export function applyRope(x: Float32Array, nTokens: number, nHeads: number, positions: ArrayLike<number>, p: RopeParams): void {
  const { headDim, ropeDim } = p;
  const half = ropeDim / 2;
  for (let t = 0; t < nTokens; t++) {
    const angles = ropeAngles(positions[t]!, p);
    for (let h = 0; h < nHeads; h++) {
      const o = (t * nHeads + h) * headDim;
      for (let i = 0; i < half; i++) {
        const c = angles[2 * i]!, s = angles[2 * i + 1]!;
        const a = p.style === "norm" ? o + 2 * i : o + i;
        const b = p.style === "norm" ? a + 1 : a + half;
        const x0 = x[a]!, x1 = x[b]!;
        x[a] = Math.fround(x0 * c - Math.fround(x1 * s));
        x[b] = Math.fround(x0 * s + Math.fround(x1 * c));
      }
    }
  }
}
