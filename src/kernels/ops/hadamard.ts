const f = Math.fround;

/**
 * The orthonormal Walsh-Hadamard transform, in place, of every `n` consecutive elements of
 * x[offset, offset + length) (n a power of two dividing length), in f32 steps as ggml's CPU
 * backend computes it (ggml_compute_forward_fwht): each element scaled by 1 / sqrtf(n), then the
 * butterflies (u, v) -> (u + v, u - v) over strides 1, 2, 4, ... The transform is its own
 * inverse. llama.cpp rotates keys and queries (and values, then the attention output back)
 * this way before a quantized KV cache stores them: spreading outliers over a block makes its
 * int8 / int4 steps finer.
 */
export function hadamardInPlace(x: Float32Array, offset: number, length: number, n: number): void {
  if (!(n >= 1 && (n & (n - 1)) === 0) || length % n !== 0) throw new RangeError(`hadamard: chunk ${n} must be a power of two dividing ${length}`);
  const scale = f(1 / f(Math.sqrt(n)));
  for (let c = offset; c < offset + length; c += n) {
    for (let j = 0; j < n; j++) x[c + j] = f(x[c + j]! * scale);
    for (let len = 1; len < n; len <<= 1) {
      for (let i = 0; i < n; i += 2 * len) {
        for (let j = 0; j < len; j++) {
          const u = x[c + i + j]!, v = x[c + i + len + j]!;
          x[c + i + j] = f(u + v);
          x[c + i + len + j] = f(u - v);
        }
      }
    }
  }
}
