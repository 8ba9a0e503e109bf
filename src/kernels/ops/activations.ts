import { f16BitsToF32, f32ToF16Bits } from "../../tensor/quant/half.js";

/** SwiGLU: out = silu(gate) * up, with silu(x) = x / (1 + e^-x) */
export function swiglu(out: Float32Array, gate: Float32Array, up: Float32Array, n: number): void {
  for (let i = 0; i < n; i++) {
    const g = gate[i]!;
    out[i] = (g / (1 + Math.exp(-g))) * up[i]!;
  }
}

const SQRT_2_OVER_PI = 0.7978845608028654;
const GELU_COEF_A = 0.044715;

function geluExact(x: number): number {
  return 0.5 * x * (1 + Math.tanh(SQRT_2_OVER_PI * x * (1 + GELU_COEF_A * x * x)));
}

let geluTable: Float32Array | null = null;

/**
 * GELU (tanh approximation). ggml's CPU backend evaluates it through a table indexed by the
 * input rounded to f16 and stores the result as f16 (GGML_GELU_FP16); we do the same so
 * GPT-2 activations match llama.cpp bit for bit rather than to ~1e-3.
 */
export function gelu(out: Float32Array, x: Float32Array, n: number): void {
  const table = (geluTable ??= buildGeluTable());
  for (let i = 0; i < n; i++) {
    const v = x[i]!;
    if (v <= -10) out[i] = 0;
    else if (v >= 10) out[i] = v;
    else out[i] = table[f32ToF16Bits(v)]!;
  }
}

function buildGeluTable(): Float32Array {
  const t = new Float32Array(65536);
  for (let h = 0; h < 65536; h++) t[h] = f16BitsToF32(f32ToF16Bits(Math.fround(geluExact(f16BitsToF32(h)))));
  return t;
}
