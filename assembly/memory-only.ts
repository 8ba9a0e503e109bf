// NF4 and INT8 weights (tensor/quant/nf4.ts, int8-row.ts: tsllm's in-memory load_in_4bit /
// load_in_8bit formats) against f32 activations. No llama.cpp kernel to match: the reference
// (reference/dot-memory-only.ts) sums in f64, these in f32 lanes, within the matmul tolerance.
// A (row, token) dot at a time; the weights are decoded in registers, never to memory.
import { f16At, f16TableAddress } from "./half";
import { hsumF32 } from "./simd";

/**
 * bitsandbytes' NF4 code book (NF4_CODE of tensor/quant/nf4.ts) as four byte planes: plane k
 * holds byte k (little-endian) of each of the 16 f32 code values, so one swizzle per plane looks
 * up 16 indices at once. Built at the first NF4 job from the f32 values.
 */
const NF4_CODE = memory.data<f32>([
  -1.0, -0.6961928009986877, -0.5250730514526367, -0.39491748809814453, -0.28444138169288635, -0.18477343022823334, -0.09105003625154495, 0.0,
  0.07958029955625534, 0.16093020141124725, 0.24611230194568634, 0.33791524171829224, 0.44070982933044434, 0.5626170039176941, 0.7229568362236023, 1.0,
]);
const PLANES = memory.data(64, 16);
let planesReady = false;

function buildPlanes(): void {
  for (let i: usize = 0; i < 16; i++) {
    for (let b: usize = 0; b < 4; b++) store<u8>(PLANES + b * 16 + i, load<u8>(NF4_CODE + i * 4 + b));
  }
  planesReady = true;
}

// @ts-ignore: decorator
@inline function madd(w: v128, x: v128, acc: v128): v128 {
  if (ASC_FEATURE_RELAXED_SIMD) return f32x4.relaxed_madd(w, x, acc);
  return f32x4.add(f32x4.mul(w, x), acc);
}

/** acc + the 16 code values of indices idx (0..15 in each byte) times the 16 floats at x */
// @ts-ignore: decorator
@inline function codeDot16(idx: v128, x: usize, acc: v128): v128 {
  const b0 = i8x16.swizzle(v128.load(PLANES), idx), b1 = i8x16.swizzle(v128.load(PLANES, 16), idx);
  const b2 = i8x16.swizzle(v128.load(PLANES, 32), idx), b3 = i8x16.swizzle(v128.load(PLANES, 48), idx);
  const p01lo = i8x16.shuffle(b0, b1, 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
  const p01hi = i8x16.shuffle(b0, b1, 8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
  const p23lo = i8x16.shuffle(b2, b3, 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
  const p23hi = i8x16.shuffle(b2, b3, 8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
  acc = madd(i8x16.shuffle(p01lo, p23lo, 0, 1, 16, 17, 2, 3, 18, 19, 4, 5, 20, 21, 6, 7, 22, 23), v128.load(x), acc);
  acc = madd(i8x16.shuffle(p01lo, p23lo, 8, 9, 24, 25, 10, 11, 26, 27, 12, 13, 28, 29, 14, 15, 30, 31), v128.load(x, 16), acc);
  acc = madd(i8x16.shuffle(p01hi, p23hi, 0, 1, 16, 17, 2, 3, 18, 19, 4, 5, 20, 21, 6, 7, 22, 23), v128.load(x, 32), acc);
  return madd(i8x16.shuffle(p01hi, p23hi, 8, 9, 24, 25, 10, 11, 26, 27, 12, 13, 28, 29, 14, 15, 30, 31), v128.load(x, 48), acc);
}

/**
 * NF4 rows [r0, r1) (blocks of 64 in 34 bytes: f16 absmax, byte j = weight j low nibble and
 * weight j + 32 high nibble) against nTok rows of cols f32 at x; out[t * rows + r]
 */
export function matNF4(w: usize, rowBytes: usize, x: usize, out: usize, rows: i32, cols: i32, nTok: i32, r0: i32, r1: i32): void {
  if (!planesReady) buildPlanes();
  const table = f16TableAddress();
  const mask = i8x16.splat(0x0f);
  const nBlocks = cols >> 6;
  for (let r = r0; r < r1; r++) {
    const wr = w + <usize>r * rowBytes;
    for (let t = 0; t < nTok; t++) {
      const xr = x + ((<usize>t * <usize>cols) << 2);
      let acc = f32x4.splat(0);
      for (let b = 0; b < nBlocks; b++) {
        const blk = wr + <usize>b * 34, xb = xr + (<usize>b << 8);
        const q0 = v128.load(blk, 2), q1 = v128.load(blk, 18);
        let s = codeDot16(v128.and(q0, mask), xb, f32x4.splat(0));
        s = codeDot16(v128.and(q1, mask), xb + 64, s);
        s = codeDot16(i8x16.shr_u(q0, 4), xb + 128, s);
        s = codeDot16(i8x16.shr_u(q1, 4), xb + 192, s);
        acc = madd(f32x4.splat(f16At(blk, table)), s, acc);
      }
      store<f32>(out + ((<usize>t * <usize>rows + <usize>r) << 2), hsumF32(acc));
    }
  }
}

/** INT8 rows [r0, r1) (an f32 scale, then cols int8) against nTok rows of cols f32 at x; out[t * rows + r] */
export function matINT8(w: usize, rowBytes: usize, x: usize, out: usize, rows: i32, cols: i32, nTok: i32, r0: i32, r1: i32): void {
  const vec = cols & ~15;
  for (let r = r0; r < r1; r++) {
    const wr = w + <usize>r * rowBytes;
    const q = wr + 4;
    const scale = load<f32>(wr);
    for (let t = 0; t < nTok; t++) {
      const xr = x + ((<usize>t * <usize>cols) << 2);
      let a0 = f32x4.splat(0), a1 = f32x4.splat(0), a2 = f32x4.splat(0), a3 = f32x4.splat(0);
      for (let c = 0; c < vec; c += 16) {
        const v = v128.load(q + <usize>c);
        const lo = i16x8.extend_low_i8x16_s(v), hi = i16x8.extend_high_i8x16_s(v);
        const xc = xr + (<usize>c << 2);
        a0 = madd(f32x4.convert_i32x4_s(i32x4.extend_low_i16x8_s(lo)), v128.load(xc), a0);
        a1 = madd(f32x4.convert_i32x4_s(i32x4.extend_high_i16x8_s(lo)), v128.load(xc, 16), a1);
        a2 = madd(f32x4.convert_i32x4_s(i32x4.extend_low_i16x8_s(hi)), v128.load(xc, 32), a2);
        a3 = madd(f32x4.convert_i32x4_s(i32x4.extend_high_i16x8_s(hi)), v128.load(xc, 48), a3);
      }
      let s = hsumF32(f32x4.add(f32x4.add(a0, a1), f32x4.add(a2, a3)));
      for (let c = vec; c < cols; c++) s += <f32>load<i8>(q + <usize>c) * load<f32>(xr + (<usize>c << 2));
      store<f32>(out + ((<usize>t * <usize>rows + <usize>r) << 2), scale * s);
    }
  }
}
