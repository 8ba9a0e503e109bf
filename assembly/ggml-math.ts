// Exact ggml arithmetic on four f32 lanes for the relaxed build: a fused multiply-add
// (f32x4.relaxed_madd, fused on x86 CPUs with FMA; the host uses these kernels only where it is)
// and ggml_v_expf built on it. Shared by the kernels that reproduce llama.cpp's bits.

// @ts-ignore: decorator
@inline export function fma(a: v128, b: v128, c: v128): v128 {
  if (ASC_FEATURE_RELAXED_SIMD) return f32x4.relaxed_madd(a, b, c);
  unreachable();
  return a;
}

/** ggml_v_expf on four lanes, as expfGgml in src/kernels/ops/activations.ts */
// @ts-ignore: decorator
@inline export function expGgml(x: v128): v128 {
  const z = fma(x, f32x4.splat(<f32>1.4426950216293335), f32x4.splat(<f32>12582912));
  const n = f32x4.sub(z, f32x4.splat(<f32>12582912));
  const negN = f32x4.neg(n);
  const b = fma(negN, f32x4.splat(<f32>1.428606765330187e-6), fma(negN, f32x4.splat(<f32>0.693145751953125), x));
  const u = f32x4.mul(b, b);
  const j = fma(
    fma(fma(f32x4.splat(<f32>0.008247390389442444), b, f32x4.splat(<f32>0.04189976677298546)), u, fma(f32x4.splat(<f32>0.16668395698070526), b, f32x4.splat(<f32>0.4999912679195404))),
    u,
    fma(f32x4.splat(<f32>0.9999994039535522), b, f32x4.splat(<f32>1)),
  );
  const ni = i32x4.trunc_sat_f32x4_s(n);
  if (i32x4.all_true(v128.and(i32x4.ge_s(ni, i32x4.splat(-126)), i32x4.le_s(ni, i32x4.splat(127))))) {
    // 2^n is a normal float: one exact scaling, rounded once like the f64 product
    return f32x4.mul(j, i32x4.shl(i32x4.add(ni, i32x4.splat(127)), 23));
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

