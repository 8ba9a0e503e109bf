// Exact ggml arithmetic on four f32 lanes for the relaxed build: a fused multiply-add
// (f32x4.relaxed_madd, fused on x86 CPUs with FMA; the host uses these kernels only where it is)
// and ggml_v_expf built on it. Shared by the kernels that reproduce llama.cpp's bits.

// @ts-ignore: decorator
@inline export function fma(a: v128, b: v128, c: v128): v128 {
  if (ASC_FEATURE_RELAXED_SIMD) return f32x4.relaxed_madd(a, b, c);
  unreachable();
  return a;
}

/**
 * ggml_v_expf's constants, each read with v128.load32_splat: V8 builds a v128.const at every use
 * (two 64-bit immediates moved in, four instructions), one broadcast load is one
 */
const EXP_CONSTS = memory.data<f32>([
  1.4426950216293335, 12582912, 1.428606765330187e-6, 0.693145751953125,
  0.008247390389442444, 0.04189976677298546, 0.16668395698070526, 0.4999912679195404,
  0.9999994039535522, 1,
]);
/** the fast path's range of n (2^n a normal float), and 1.0's bits: the exponent bias in place */
const EXP_LIMITS = memory.data<f32>([-126, 127]);
const ONE_BITS = memory.data<i32>([0x3f800000]);

/** ggml_v_expf on four lanes, as expfGgml in src/kernels/ops/activations.ts */
// @ts-ignore: decorator
@inline export function expGgml(x: v128): v128 {
  const shifter = v128.load32_splat(EXP_CONSTS, 4);
  const z = fma(x, v128.load32_splat(EXP_CONSTS), shifter);
  const n = f32x4.sub(z, shifter);
  const negN = f32x4.neg(n);
  const b = fma(negN, v128.load32_splat(EXP_CONSTS, 8), fma(negN, v128.load32_splat(EXP_CONSTS, 12), x));
  const u = f32x4.mul(b, b);
  const j = fma(
    fma(fma(v128.load32_splat(EXP_CONSTS, 16), b, v128.load32_splat(EXP_CONSTS, 20)), u, fma(v128.load32_splat(EXP_CONSTS, 24), b, v128.load32_splat(EXP_CONSTS, 28))),
    u,
    fma(v128.load32_splat(EXP_CONSTS, 32), b, v128.load32_splat(EXP_CONSTS, 36)),
  );
  // NaN lanes compare false and stay here, as they did when n went through an integer (0)
  if (!v128.any_true(v128.or(f32x4.lt(n, v128.load32_splat(EXP_LIMITS)), f32x4.gt(n, v128.load32_splat(EXP_LIMITS, 4))))) {
    // 2^n is a normal float: one exact scaling, rounded once like the f64 product. z is
    // 1.5 * 2^23 + n exactly (a ulp of 1 there), so its bits shifted left by 23 are n's exponent
    // field, and 1.0's bits add the bias (a float-to-int conversion took six instructions)
    return f32x4.mul(j, i32x4.add(i32x4.shl(z, 23), v128.load32_splat(ONE_BITS)));
  }
  let r = f32x4.splat(0);
  r = f32x4.replace_lane(r, 0, scale2(f32x4.extract_lane(j, 0), f32x4.extract_lane(n, 0)));
  r = f32x4.replace_lane(r, 1, scale2(f32x4.extract_lane(j, 1), f32x4.extract_lane(n, 1)));
  r = f32x4.replace_lane(r, 2, scale2(f32x4.extract_lane(j, 2), f32x4.extract_lane(n, 2)));
  return f32x4.replace_lane(r, 3, scale2(f32x4.extract_lane(j, 3), f32x4.extract_lane(n, 3)));
}

/** j * 2^n rounded once to f32, for any n (results that underflow or overflow f32) */
function scale2(j: f32, n: f32): f32 {
  if (Mathf.abs(n) > 192) return n > 0 ? Infinity : 0;
  const n64 = <i64>n;
  return <f32>(<f64>j * reinterpret<f64>((n64 + 1023) << 52));
}

