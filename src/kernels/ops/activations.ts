import { f16BitsToF32, f32ToF16Bits, roundToF16 } from "../../tensor/quant/half.js";

const f = Math.fround;
/** f32 fused multiply-add: the f64 product of two f32 values is exact, so one rounding remains */
const fma = (a: number, b: number, c: number): number => f(a * b + c);

/**
 * e^x as ggml's vectorised ggml_v_expf computes it on x86 (ARM's optimized-routines algorithm:
 * x = n ln2 + b, a degree-5 polynomial in b, scaled by 2^n), in f32 steps. llama.cpp's SiLU and
 * softmax use it, and its last-ulp results decide how the next layer's activations round.
 */
export function expfGgml(x: number): number {
  const z = fma(x, 1.4426950216293335, 12582912); // x / ln2 + 1.5 * 2^23: rounds n to an integer
  const n = f(z - 12582912);
  if (Math.abs(n) > 192) return n > 0 ? Infinity : 0;
  const b = fma(-n, 1.428606765330187e-6, fma(-n, 0.693145751953125, x));
  const u = f(b * b);
  const j = fma(fma(fma(0.008247390389442444, b, 0.04189976677298546), u, fma(0.16668395698070526, b, 0.4999912679195404)), u, fma(0.9999994039535522, b, 1));
  return f(j * 2 ** n);
}

/** SwiGLU: out = silu(gate) * up, silu(x) = x / (1 + e^-x), in ggml's f32 steps */
export function swiglu(out: Float32Array, gate: Float32Array, up: Float32Array, n: number): void {
  for (let i = 0; i < n; i++) {
    const g = gate[i]!;
    out[i] = f(g / f(1 + expfGgml(-g))) * up[i]!;
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
  for (let h = 0; h < 65536; h++) t[h] = roundToF16(Math.fround(geluExact(f16BitsToF32(h))));
  return t;
}

/**
 * erf(x) in float64 (Numerical Recipes' Chebyshev fit of erfc, relative error < 1.2e-7
 * everywhere): below float32's precision, so GELU from it rounds like torch's erf form.
 */
export function erf(x: number): number {
  const z = Math.abs(x);
  const t = 1 / (1 + 0.5 * z);
  const erfc = t * Math.exp(-z * z - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 + t * (-0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277)))))))));
  return x >= 0 ? 1 - erfc : erfc - 1;
}

/** erf and its derivative at z = k / ERF_STEPS for k <= ERF_MAX * ERF_STEPS: cubic Hermite pieces between them */
const ERF_STEPS = 256, ERF_MAX = 4;
let erfTable: Float64Array | null = null;

function buildErfTable(): Float64Array {
  const n = ERF_MAX * ERF_STEPS + 1, t = new Float64Array(2 * n);
  for (let k = 0; k < n; k++) {
    const z = k / ERF_STEPS;
    t[2 * k] = erf(z);
    t[2 * k + 1] = (2 / Math.sqrt(Math.PI)) * Math.exp(-z * z) / ERF_STEPS; // derivative per step
  }
  return t;
}

/**
 * erf through the table (no exp per call; interpolation error ~1e-11, far below erf()'s own
 * 1.2e-7), beyond 4 through erf() itself.
 */
function erfFast(x: number, table: Float64Array): number {
  const z = x < 0 ? -x : x;
  if (z >= ERF_MAX) return erf(x);
  const u = z * ERF_STEPS, k = u | 0, s = u - k;
  const y0 = table[2 * k]!, d0 = table[2 * k + 1]!, y1 = table[2 * k + 2]!, d1 = table[2 * k + 3]!;
  // cubic Hermite on [0, 1]
  const s2 = s * s, s3 = s2 * s;
  const y = (2 * s3 - 3 * s2 + 1) * y0 + (s3 - 2 * s2 + s) * d0 + (-2 * s3 + 3 * s2) * y1 + (s3 - s2) * d1;
  return x < 0 ? -y : y;
}

/** GELU in its exact form, x * Phi(x) = 0.5 x (1 + erf(x / sqrt 2)): torch's nn.GELU() and HF's "gelu" */
export function geluErf(out: Float32Array, x: Float32Array, n: number): void {
  const table = (erfTable ??= buildErfTable());
  for (let i = 0; i < n; i++) {
    const v = x[i]!;
    out[i] = 0.5 * v * (1 + erfFast(v * Math.SQRT1_2, table));
  }
}

/** ReLU: out = max(x, 0) */
export function relu(out: Float32Array, x: Float32Array, n: number): void {
  for (let i = 0; i < n; i++) out[i] = x[i]! > 0 ? x[i]! : 0;
}

/** tanh, rounded to f32 (BERT's pooler) */
export function tanh(out: Float32Array, x: Float32Array, n: number): void {
  for (let i = 0; i < n; i++) out[i] = Math.tanh(x[i]!);
}
