// Activation conversion to the weight's vec_dot type, as ggml does before every dot product
// (exactly as the reference backend converts them: same f32 operations, same roundings).
import { f16, F16_REBIAS, f16Value, f32ToF16Bits, roundBF16, roundBF16x4, roundF16x4 } from "./half";

/**
 * x rounded through f16 and back (the vec_dot type of F16 weights), in place; times 2^112 where
 * `scaled` (the one-token F16 kernels' activations, float.ts loadF16x4: their weights come times
 * 2^-112; batches read exact weights from a panel and take the values as they are). The scaling
 * is exact: an f16 value is below 2^16 in magnitude. Four lanes at a time through roundF16x4
 * (the same value as f16(f32ToF16Bits(x)) in every lane; a prompt's 128 x 1536 activations took
 * ~2 ms one by one, half the time of the matmul that reads them).
 */
export function roundRowsF16(x: usize, n: i32, scaled: bool): void {
  const factor: f32 = scaled ? F16_REBIAS : 1;
  const splat = f32x4.splat(factor);
  let i = 0;
  for (; i + 4 <= n; i += 4) {
    const p = x + (<usize>i << 2);
    v128.store(p, f32x4.mul(roundF16x4(v128.load(p)), splat));
  }
  for (; i < n; i++) {
    const p = x + (<usize>i << 2);
    store<f32>(p, f16(f32ToF16Bits(load<f32>(p))) * factor);
  }
}

/** x rounded through bf16 and back, in place (the vec_dot type of BF16 weights), four lanes at a time as roundBF16 does each */
export function roundRowsBF16(x: usize, n: i32): void {
  let i = 0;
  for (; i + 4 <= n; i += 4) {
    const p = x + (<usize>i << 2);
    v128.store(p, roundBF16x4(v128.load(p)));
  }
  for (; i < n; i++) {
    const p = x + (<usize>i << 2);
    store<f32>(p, roundBF16(load<f32>(p)));
  }
}

/**
 * Q8_0 activations as llama.cpp's x86 CPU backend quantizes them (ggml-cpu's SIMD
 * quantize_row_q8_0, which differs from the reference quantizer used for weights): per 32
 * values d = max|x| / 127 and q = round-to-nearest-even(x * (127 / max|x|)). Must agree with
 * src/kernels/reference/activation-quant.ts. Stored split for the kernels: n quants at qs as
 * int16 (pre-widened: the kernels load them straight into dot_i16x8_s), n/32 scales at sc as
 * the f32 value of the f16 that ggml stores.
 */
export function quantizeRowQ8_0(x: usize, qs: usize, sc: usize, n: i32): void {
  // SIMD, lane for lane the same f32 operations as the scalar definition above (max is exact
  // in any order; mul, nearest and the integer conversion are per lane), so the same bits
  for (let b = 0; b < n >> 5; b++) {
    const xb = x + (<usize>b << 7);
    let m = f32x4.abs(v128.load(xb));
    for (let j = 16; j < 128; j += 16) m = f32x4.max(m, f32x4.abs(v128.load(xb + <usize>j)));
    const amax: f32 = max<f32>(max<f32>(f32x4.extract_lane(m, 0), f32x4.extract_lane(m, 1)), max<f32>(f32x4.extract_lane(m, 2), f32x4.extract_lane(m, 3)));
    const d: f32 = amax / 127;
    const id = f32x4.splat(amax != 0 ? <f32>127 / amax : 0);
    store<f32>(sc + (<usize>b << 2), f16Value(f32ToF16Bits(d)));
    const qb = qs + (<usize>b << 6);
    for (let j = 0; j < 8; j += 2) {
      const lo = i32x4.trunc_sat_f32x4_s(f32x4.nearest(f32x4.mul(v128.load(xb + (<usize>j << 4)), id)));
      const hi = i32x4.trunc_sat_f32x4_s(f32x4.nearest(f32x4.mul(v128.load(xb + (<usize>j << 4), 16), id)));
      v128.store(qb + (<usize>j << 3), i16x8.narrow_i32x4_s(lo, hi));
    }
  }
}

/**
 * ggml's quantize_row_q8_K_ref for one row of n floats: per 256 values scale -127 / (the value
 * of largest magnitude), q rounded ties to even and capped at 127. Stored split: n quants at qs as int16,
 * n/256 f32 scales d at sc, n/16 int32 group sums ("bsums") at bs.
 */
export function quantizeRowQ8_K(x: usize, qs: usize, sc: usize, bs: usize, n: i32): void {
  for (let b = 0; b < n >> 8; b++) {
    const xb = x + (<usize>b << 10);
    const qb = qs + (<usize>b << 9);
    const bb = bs + (<usize>b << 6);
    let amax: f32 = 0;
    let mx: f32 = 0;
    for (let j = 0; j < 256; j++) {
      const v = load<f32>(xb + (<usize>j << 2));
      if (abs<f32>(v) > amax) {
        amax = abs<f32>(v);
        mx = v;
      }
    }
    if (amax == 0) {
      memory.fill(qb, 0, 512);
      memory.fill(bb, 0, 64);
      store<f32>(sc + (<usize>b << 2), 0);
      continue;
    }
    const iscale: f32 = <f32>-127 / mx;
    for (let g = 0; g < 16; g++) {
      let sum = 0;
      for (let i = 0; i < 16; i++) {
        const j = (g << 4) + i;
        const q = min<i32>(127, <i32>nearest<f32>(iscale * load<f32>(xb + (<usize>j << 2))));
        store<i16>(qb + (<usize>j << 1), <i16>q);
        sum += q;
      }
      store<i32>(bb + (<usize>g << 2), sum);
    }
    store<f32>(sc + (<usize>b << 2), <f32>1 / iscale);
  }
}
