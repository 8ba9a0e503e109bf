// SwiGLU as llama.cpp computes it on x86 (ggml_vec_swiglu_f32: silu(g) * u, silu(x) =
// x / (1 + ggml_v_expf(-x))), bit for bit as swiglu in src/kernels/ops/activations.ts.
// Relaxed build only (its exp needs the fused multiply-add, see ggml-math.ts).
import { expGgml } from "./ggml-math";

// @ts-ignore: decorator
@inline function swiglu4(g: v128, u: v128): v128 {
  return f32x4.mul(f32x4.div(g, f32x4.add(f32x4.splat(1), expGgml(f32x4.neg(g)))), u);
}

/** out[i] = silu(gate[i]) * up[i] for i < n (f32 arrays in this memory) */
export function swigluGgml(out: usize, gate: usize, up: usize, n: i32): void {
  let o: usize = 0;
  const end = (<usize>n) << 2;
  for (; o + 16 <= end; o += 16) v128.store(out + o, swiglu4(v128.load(gate + o), v128.load(up + o)));
  for (; o < end; o += 4) store<f32>(out + o, f32x4.extract_lane(swiglu4(v128.load32_splat(gate + o), v128.load32_splat(up + o)), 0));
}
