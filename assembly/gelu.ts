// GELU in its exact form, x * Phi(x) = 0.5 x (1 + erf(x / sqrt 2)) (torch's nn.GELU(), HF's
// "gelu": BERT's feed-forward), on four lanes in f32. erf comes from the same erfc fit as
// src/kernels/ops/activations.ts's erf (Numerical Recipes' Chebyshev fit, relative error
// < 1.2e-7 of erfc), written so that the negative tail never cancels:
//   gelu(x) = x - 0.5 x erfc(z) for x >= 0, 0.5 x erfc(z) below, z = |x| / sqrt 2.
// The TS op sums the fit in float64; here it is f32 with a Cody-Waite exp: within 4e-7 relative
// of the TS op for x >= 0 and 3.5e-6 in the negative tail (values below 1e-2), never 5e-7 apart.
import { expNeg4 } from "./attention";

// @ts-ignore: decorator
@inline function gelu4(x: v128): v128 {
  const z = f32x4.mul(f32x4.abs(x), f32x4.splat(<f32>0.7071067811865476));
  const t = f32x4.div(f32x4.splat(1), f32x4.add(f32x4.splat(1), f32x4.mul(f32x4.splat(0.5), z)));
  let p = f32x4.add(f32x4.splat(<f32>-0.82215223), f32x4.mul(t, f32x4.splat(<f32>0.17087277)));
  p = f32x4.add(f32x4.splat(<f32>1.48851587), f32x4.mul(t, p));
  p = f32x4.add(f32x4.splat(<f32>-1.13520398), f32x4.mul(t, p));
  p = f32x4.add(f32x4.splat(<f32>0.27886807), f32x4.mul(t, p));
  p = f32x4.add(f32x4.splat(<f32>-0.18628806), f32x4.mul(t, p));
  p = f32x4.add(f32x4.splat(<f32>0.09678418), f32x4.mul(t, p));
  p = f32x4.add(f32x4.splat(<f32>0.37409196), f32x4.mul(t, p));
  p = f32x4.add(f32x4.splat(<f32>1.00002368), f32x4.mul(t, p));
  const arg = f32x4.add(f32x4.sub(f32x4.splat(<f32>-1.26551223), f32x4.mul(z, z)), f32x4.mul(t, p));
  const halfTail = f32x4.mul(f32x4.mul(f32x4.splat(0.5), x), f32x4.mul(t, expNeg4(arg)));
  // x >= 0: x - 0.5 x erfc (x itself from 10 on, where erfc < 1e-22: also for x = Inf); x < 0: 0.5 x erfc
  const positive = v128.bitselect(x, f32x4.sub(x, halfTail), f32x4.gt(x, f32x4.splat(10)));
  return v128.bitselect(positive, halfTail, f32x4.ge(x, f32x4.splat(0)));
}

/** elements [i0, i1) of out = gelu(x) (f32 arrays in this memory; out may be x) */
export function geluErfRange(out: usize, x: usize, i0: i32, i1: i32): void {
  let i = i0;
  for (; i + 4 <= i1; i += 4) v128.store(out + (<usize>i << 2), gelu4(v128.load(x + (<usize>i << 2))));
  for (; i < i1; i++) store<f32>(out + (<usize>i << 2), f32x4.extract_lane(gelu4(v128.load32_splat(x + (<usize>i << 2))), 0));
}
