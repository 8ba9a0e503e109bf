/**
 * Normalizations over rows of `n` floats, in place on `x` (rows laid out back to back).
 * Sums are accumulated in float64 as ggml does (ggml_float), so results match llama.cpp.
 */

/** RMSNorm: x = x / sqrt(mean(x^2) + eps) * weight */
export function rmsNorm(out: Float32Array, x: Float32Array, weight: Float32Array | null, n: number, rows: number, eps: number): void {
  for (let r = 0; r < rows; r++) {
    const o = r * n;
    // as ggml: each square rounded to f32, the sum kept in f64
    let sum = 0;
    for (let i = 0; i < n; i++) sum += Math.fround(x[o + i]! * x[o + i]!);
    const scale = Math.fround(1 / Math.fround(Math.sqrt(Math.fround(Math.fround(sum / n) + eps))));
    if (weight) for (let i = 0; i < n; i++) out[o + i] = Math.fround(x[o + i]! * scale) * weight[i]!;
    else for (let i = 0; i < n; i++) out[o + i] = x[o + i]! * scale;
  }
}

/** LayerNorm: x = (x - mean) / sqrt(var + eps) * weight + bias */
export function layerNorm(out: Float32Array, x: Float32Array, weight: Float32Array, bias: Float32Array, n: number, rows: number, eps: number): void {
  for (let r = 0; r < rows; r++) {
    const o = r * n;
    // as ggml: the f64 sum is stored as f32 before dividing
    let sum = 0;
    for (let i = 0; i < n; i++) sum += x[o + i]!;
    const mean = Math.fround(Math.fround(sum) / n);
    let sum2 = 0;
    for (let i = 0; i < n; i++) {
      const d = Math.fround(x[o + i]! - mean);
      out[o + i] = d;
      sum2 += Math.fround(d * d);
    }
    const scale = Math.fround(1 / Math.fround(Math.sqrt(Math.fround(Math.fround(sum2 / n) + eps))));
    for (let i = 0; i < n; i++) out[o + i] = Math.fround(out[o + i]! * scale) * weight[i]! + bias[i]!;
  }
}
