// Q8_0 weights x Q8_0 activations in llama.cpp's x86 order (ggml_vec_dot_q8_0_q8_0 with
// AVX2/AVX-512, tinyBLAS_Q0_AVX for batches), bit for bit as the reference dotQ8_0
// (src/kernels/reference/dot-q8_0.ts): per block, eight int32 lanes each holding the products of
// four neighbouring weights, each lane accumulated in f32 with a fused multiply-add by the
// product of the two scales, then the lanes added pairwise. Relaxed SIMD gives both pieces:
// i16x8.relaxed_dot_i8x16_i7x16_s and a pairwise add sum exactly those four products per lane
// (exact for a 7-bit second operand), and f32x4.relaxed_madd fuses on x86 CPUs with FMA — so this
// kernel exists only in the relaxed build, used only where the runtime fuses. The one-step
// i32x4.relaxed_dot_i8x16_i7x16_add_s returned twice the dot with a zero accumulator in Node 20's
// V8 and saturates pairs where it is pmaddubsw + pmaddwd; where V8 lowers it to VNNI's vpdpbusd
// (a CPU with AVX-VNNI: Chromium, Node 22 and later), exact for unsigned second operands, the
// batches' group kernel takes it (halfPass's u8; the host probes the lowering first).
//
// Activations are packed once per matmul (packQ8_0Exact) for decode: for a regular weight (no
// -128, no Inf/NaN scale: q8_0Regular) as |a| and a's sign mask m, the sign moved onto the weight
// byte ((w ^ m) - m) against |a| as the dot's 7-bit operand; else as int8 a and -a, each weight
// half-block entering as |w| (the dot's unsigned operand) and a * sign(w) picked from a and -a by
// one byte blend whose mask is w itself (x86's pblendvb reads only each mask byte's top bit, i.e.
// w's sign; probed by probeBlend, and the host uses this kernel only where it holds). The
// batches' group kernel uses (a ^ m) - m with m = (w < 0). |a| <= 127, so none of these wraps.
// |w| = 128 (a weight of -128, legal in a file though ggml's quantizer never writes it) is exact
// where the dot treats its second operand as unsigned bytes (x86's pmaddubsw); probeDot()
// probes that. In decode the int16 pairs become int32 lanes by a dot with ones kept in a
// register (V8 rebuilds extadd_pairwise's constant inside the loop): same exact sums.
//
// Batches go through rowGroup over a group stream (packQ8_0Groups) in groups of eight tokens,
// then one of four where four or more are left: per weight block, the group's activation scales
// and then their int8 blocks, so that every load in the inner loop is a constant offset from one
// pointer, and one half block (eight or four accumulators, no spills) per pass. The last 0-3
// tokens go one at a time (row1). Each (row, token) gets the same operations in the same order
// in every path, so the same bits.
import { f16At, f16TableAddress, f16x4, f16x4BitsAt, f16x4Finite } from "./half";
import { dotAddU8, dotI8I7, store4, store8 } from "./simd";
import { onesI16 } from "./relaxed";
import { fma } from "./ggml-math";
import { groupBlockBytes, packGroups } from "./groups";

/** relaxed laneselect: a where m's lane is set; bytes with a non-canonical mask follow the host (probed) */
// @ts-ignore: decorator
@inline function blend(a: v128, b: v128, m: v128): v128 {
  if (ASC_FEATURE_RELAXED_SIMD) return i8x16.relaxed_laneselect(a, b, m);
  unreachable();
  return a;
}

/**
 * rewrites nBlocks int16 activation blocks at q (64 bytes each) in place for the one-token kernel
 * (halfBlock): int8 a (32 bytes) then -a (32 bytes); with `signMasks` (a regular weight, see
 * q8_0Regular), |a| then a's sign mask (0xff where a < 0)
 */
export function packQ8_0Exact(q: usize, nBlocks: i32, signMasks: bool): void {
  const z = i8x16.splat(0);
  for (let b = 0; b < nBlocks; b++) {
    const p = q + (<usize>b << 6);
    const lo = i8x16.narrow_i16x8_s(v128.load(p), v128.load(p, 16));
    const hi = i8x16.narrow_i16x8_s(v128.load(p, 32), v128.load(p, 48));
    v128.store(p, signMasks ? i8x16.abs(lo) : lo);
    v128.store(p, signMasks ? i8x16.abs(hi) : hi, 16);
    v128.store(p, signMasks ? i8x16.lt_s(lo, z) : i8x16.neg(lo), 32);
    v128.store(p, signMasks ? i8x16.lt_s(hi, z) : i8x16.neg(hi), 48);
  }
}

/**
 * 1 when the Q8_0 weight's nBlocks blocks at p hold no Inf/NaN scale and no -128 quant, else 0.
 * The one-token kernel then moves each activation's sign onto the weight byte, which a -128
 * would overflow; ggml's quantizer never writes -128, a hand-made file may.
 */
export function q8_0Regular(p: usize, nBlocks: i32): i32 {
  const minus128 = i8x16.splat(-128);
  for (let b = 0; b < nBlocks; b++, p += 34) {
    if ((load<u16>(p) & 0x7c00) == 0x7c00) return 0;
    if (v128.any_true(v128.or(i8x16.eq(v128.load(p, 2), minus128), i8x16.eq(v128.load(p, 18), minus128)))) return 0;
  }
  return 1;
}

/** the eight lanes' sum, as ggml's hsum_float_8: (k + k+4), then (0 + 2, 1 + 3), then the two */
// @ts-ignore: decorator
@inline function hsum8(lo: v128, hi: v128): f32 {
  const r = f32x4.add(hi, lo);
  return (f32x4.extract_lane(r, 0) + f32x4.extract_lane(r, 2)) + (f32x4.extract_lane(r, 1) + f32x4.extract_lane(r, 3));
}

/**
 * Writes the group streams of a batch (groups.ts, without sums) from the quantized activations
 * (int16 at xq, scales at xs; before packQ8_0Exact rewrites them) to g; `unsignedActivations`
 * (the kernels on VNNI's dot, see halfPass): each int8 a stored as the unsigned byte a + 128
 */
export function packQ8_0Groups(xq: usize, xs: usize, g: usize, cols: i32, nTok: i32, unsignedActivations: i32): void {
  packGroups(xq, xs, g, cols, nTok, false, unsignedActivations != 0);
}

/**
 * f32 lanes of one half block: 16 weights as |w| and sign mask m (shared by the group's tokens)
 * against 16 int8 activations x; lane i = the exact sum of w[4i..4i+3] * a[4i..4i+3]. The sign
 * moves by (a ^ m) - m (a blend of a and -a would read a second vector per token)
 */
// @ts-ignore: decorator
@inline function lanesOf(absW: v128, m: v128, x: v128, ones: v128): v128 {
  const signed = i8x16.sub(v128.xor(x, m), m);
  return f32x4.convert_i32x4_s(i32x4.dot_i16x8_s(dotI8I7(signed, absW), ones));
}

/**
 * lanesOf on VNNI's dot (vpdpbusd, where the runtime lowers the relaxed int32 dot to it and reads
 * its second operand as unsigned bytes: probed by the host): w signed against u = a + 128 (the
 * group stream's unsigned bytes), added to corr = -128 * (w's sum per lane), which takes the
 * offset's products back off. Every sum is exact in int32, so the lanes are lanesOf's
 */
// @ts-ignore: decorator
@inline function lanesOfU8(w: v128, corr: v128, u: v128): v128 {
  return f32x4.convert_i32x4_s(dotAddU8(w, u, corr));
}

/**
 * One half (half = 0: weights 0..15 of every block, 16: weights 16..31) of a row against the
 * eight (`four`: four) tokens of the group stream at g: their accumulators stored at acc (16
 * bytes each). Holding both halves' sixteen accumulators spilled; two passes over the row (in
 * L1) do not. `u8`: the stream holds a + 128 and the lanes come from VNNI's dot (lanesOfU8): one
 * instruction per token where lanesOf takes four, the weight's correction shared by the tokens
 */
// @ts-ignore: decorator
@inline function halfPass(p0: usize, nb: i32, g: usize, acc: usize, ones: v128, table: usize, half: usize, four: bool, u8: bool): void {
  const z = f32x4.splat(0);
  let a0 = z, a1 = z, a2 = z, a3 = z, a4 = z, a5 = z, a6 = z, a7 = z;
  const blockBytes = groupBlockBytes(four ? 4 : 8, false);
  // the first token's half block (after the group's scales)
  const acts: usize = four ? 16 : 32;
  const end = g + <usize>nb * blockBytes;
  for (let p = p0, s = g; s < end; p += 34, s += blockBytes) {
    const w = v128.load(p + half, 2);
    // the int16 path's |w| and sign mask, VNNI's correction -128 * (w's lane sums): one side's
    // values only (u8 is a constant in each copy of this loop, the other side's code is dropped)
    const absW = u8 ? w : i8x16.abs(w), m = u8 ? w : i8x16.lt_s(w, i8x16.splat(0));
    const corr = u8 ? i32x4.neg(dotAddU8(w, i8x16.splat(-128), i32x4.splat(0))) : w;
    // the scale products dw * dx of the group's tokens: on the int16 path each token's from its
    // scale broadcast by the load unit (shuffles bound that path: 48 -> 51 GOPS on one thread);
    // on VNNI's dot four tokens' at once, broadcast lane by lane (there the loads cost more)
    const dw = v128.load32_splat(table + (<usize>load<u16>(p) << 2));
    const d03 = u8 ? f32x4.mul(dw, v128.load(s)) : dw, d47 = u8 && !four ? f32x4.mul(dw, v128.load(s, 16)) : dw;
    const x = s + acts + half;
    a0 = fma(u8 ? lanesOfU8(w, corr, v128.load(x)) : lanesOf(absW, m, v128.load(x), ones), u8 ? i32x4.shuffle(d03, d03, 0, 0, 0, 0) : f32x4.mul(dw, v128.load32_splat(s)), a0);
    a1 = fma(u8 ? lanesOfU8(w, corr, v128.load(x, 32)) : lanesOf(absW, m, v128.load(x, 32), ones), u8 ? i32x4.shuffle(d03, d03, 1, 1, 1, 1) : f32x4.mul(dw, v128.load32_splat(s + 4)), a1);
    a2 = fma(u8 ? lanesOfU8(w, corr, v128.load(x, 64)) : lanesOf(absW, m, v128.load(x, 64), ones), u8 ? i32x4.shuffle(d03, d03, 2, 2, 2, 2) : f32x4.mul(dw, v128.load32_splat(s + 8)), a2);
    a3 = fma(u8 ? lanesOfU8(w, corr, v128.load(x, 96)) : lanesOf(absW, m, v128.load(x, 96), ones), u8 ? i32x4.shuffle(d03, d03, 3, 3, 3, 3) : f32x4.mul(dw, v128.load32_splat(s + 12)), a3);
    if (!four) {
      a4 = fma(u8 ? lanesOfU8(w, corr, v128.load(x, 128)) : lanesOf(absW, m, v128.load(x, 128), ones), u8 ? i32x4.shuffle(d47, d47, 0, 0, 0, 0) : f32x4.mul(dw, v128.load32_splat(s + 16)), a4);
      a5 = fma(u8 ? lanesOfU8(w, corr, v128.load(x, 160)) : lanesOf(absW, m, v128.load(x, 160), ones), u8 ? i32x4.shuffle(d47, d47, 1, 1, 1, 1) : f32x4.mul(dw, v128.load32_splat(s + 20)), a5);
      a6 = fma(u8 ? lanesOfU8(w, corr, v128.load(x, 192)) : lanesOf(absW, m, v128.load(x, 192), ones), u8 ? i32x4.shuffle(d47, d47, 2, 2, 2, 2) : f32x4.mul(dw, v128.load32_splat(s + 24)), a6);
      a7 = fma(u8 ? lanesOfU8(w, corr, v128.load(x, 224)) : lanesOf(absW, m, v128.load(x, 224), ones), u8 ? i32x4.shuffle(d47, d47, 3, 3, 3, 3) : f32x4.mul(dw, v128.load32_splat(s + 28)), a7);
    }
  }
  if (four) store4(acc, a0, a1, a2, a3);
  else store8(acc, a0, a1, a2, a3, a4, a5, a6, a7);
}

/** one row against the eight (`four`: four) tokens of a group stream, acc: 256 bytes of the thread's own */
// @ts-ignore: decorator
@inline function rowGroup(p: usize, nb: i32, g: usize, acc: usize, ones: v128, table: usize, out: usize, outStride: usize, four: bool, u8: bool): void {
  halfPass(p, nb, g, acc, ones, table, 0, four, u8);
  halfPass(p, nb, g, acc + 128, ones, table, 16, four, u8);
  const n: usize = four ? 4 : 8;
  for (let k: usize = 0; k < n; k++) store<f32>(out + k * outStride, hsum8(v128.load(acc + (k << 4)), v128.load(acc + (k << 4), 128)));
}

/**
 * one half block (weights 0..15 or 16..31 at p) against packed activations at xb, into acc with
 * the scale product d. `signs` (a regular weight: no -128): the activations come as |a| and a's
 * sign mask m, and (w ^ m) - m = w * sign(a) against |a| (the dot's 7-bit operand) gives each
 * pair's w * a: two integer operations where the blend and |w| take three or four (decode 3-6%
 * faster on an Intel Xeon). Else a and -a, and a * sign(w) against |w|: -a where the weight
 * byte's top bit is set (the blend reads only that bit), |-128| the dot's unsigned 128.
 */
// @ts-ignore: decorator
@inline function halfBlock(p: usize, xb: usize, d: v128, ones: v128, acc: v128, high: bool, signs: bool): v128 {
  const w = high ? v128.load(p, 18) : v128.load(p, 2);
  // the group kernel's lanesOf with the roles swapped: |a| the unsigned operand, a's mask on w
  if (signs) return fma(lanesOf(high ? v128.load(xb, 16) : v128.load(xb), high ? v128.load(xb, 48) : v128.load(xb, 32), w, ones), d, acc);
  const signed = high ? blend(v128.load(xb, 48), v128.load(xb, 16), w) : blend(v128.load(xb, 32), v128.load(xb), w);
  return fma(f32x4.convert_i32x4_s(i32x4.dot_i16x8_s(dotI8I7(signed, i8x16.abs(w)), ones)), d, acc);
}

/**
 * one row against one token (decode; regular weights go four rows at a time, row4); the loads use
 * constant offsets from three pointers. Four blocks' scales are converted together (f16x4) and
 * multiplied by their activation scales in one vector, which each block of the inner loop
 * takes lane by lane: the same products as f16At times the scale per block, in fewer
 * instructions (~5% faster hot); `regular` (every scale of the weight is finite and no weight is
 * -128, the host checked: q8_0Regular) drops the Inf/NaN select from that conversion (~7% faster
 * hot) and takes the activations' signs onto the weights (halfBlock). The inner loop is a loop, not
 * four written-out blocks: V8 hoists all loads of an unrolled body and spills (that ran 25% slower).
 */
// @ts-ignore: decorator
@inline function row1(p0: usize, nb: i32, x: usize, s: usize, ones: v128, table: usize, regular: bool): f32 {
  let lo = f32x4.splat(0), hi = lo;
  let p = p0, xb = x, sb = s;
  const end4 = p0 + <usize>(nb & ~3) * 34;
  const end = p0 + <usize>nb * 34;
  while (p < end4) {
    const h = f16x4BitsAt(p, 34);
    let d4 = f32x4.mul(regular ? f16x4Finite(h) : f16x4(h), v128.load(sb));
    sb += 16;
    for (let k = 0; k < 4; k++, p += 34, xb += 64) {
      const d = i32x4.shuffle(d4, d4, 0, 0, 0, 0);
      d4 = i32x4.shuffle(d4, d4, 1, 2, 3, 0);
      lo = halfBlock(p, xb, d, ones, lo, false, regular);
      hi = halfBlock(p, xb, d, ones, hi, true, regular);
    }
  }
  for (; p < end; p += 34, xb += 64, sb += 4) {
    const d = f32x4.splat(f16At(p, table) * load<f32>(sb));
    lo = halfBlock(p, xb, d, ones, lo, false, regular);
    hi = halfBlock(p, xb, d, ones, hi, true, regular);
  }
  return hsum8(lo, hi);
}

/**
 * row1 for the rows at p0 + k * stride, k = 0-3 (regular weights), their results at out + k *
 * outStride: each activation load and sign mask serves the four rows. Decode hands it rows a
 * quarter of a claim apart: four separate sequential streams, which the hardware prefetcher
 * follows, where neighbouring rows interleave their lines. TinyLlama Q8_0 decode on an Intel
 * Xeon: 10.5-11.1 tok/s a row at a time, 11.9-12.0 two neighbouring rows at a time, 15.7-15.8
 * two rows half a claim apart, 17.5 four a quarter apart (docs/kernels.md). Each row gets row1's
 * operations in row1's order, so row1's bits
 */
// @ts-ignore: decorator
@inline function row4(p0: usize, stride: usize, nb: i32, x: usize, s: usize, ones: v128, out: usize, outStride: usize): void {
  let a0 = f32x4.splat(0), b0 = a0, a1 = a0, b1 = a0, a2 = a0, b2 = a0, a3 = a0, b3 = a0;
  let p = p0, xb = x, sb = s;
  const end4 = p0 + <usize>(nb & ~3) * 34;
  while (p < end4) {
    const sx = v128.load(sb);
    let d0 = f32x4.mul(f16x4Finite(f16x4BitsAt(p, 34)), sx);
    let d1 = f32x4.mul(f16x4Finite(f16x4BitsAt(p + stride, 34)), sx);
    let d2 = f32x4.mul(f16x4Finite(f16x4BitsAt(p + 2 * stride, 34)), sx);
    let d3 = f32x4.mul(f16x4Finite(f16x4BitsAt(p + 3 * stride, 34)), sx);
    sb += 16;
    for (let k = 0; k < 4; k++, p += 34, xb += 64) {
      const aLo = v128.load(xb), mLo = v128.load(xb, 32);
      const aHi = v128.load(xb, 16), mHi = v128.load(xb, 48);
      const q1 = p + stride, q2 = q1 + stride, q3 = q2 + stride;
      let d = i32x4.shuffle(d0, d0, 0, 0, 0, 0);
      d0 = i32x4.shuffle(d0, d0, 1, 2, 3, 0);
      a0 = fma(lanesOf(aLo, mLo, v128.load(p, 2), ones), d, a0);
      b0 = fma(lanesOf(aHi, mHi, v128.load(p, 18), ones), d, b0);
      d = i32x4.shuffle(d1, d1, 0, 0, 0, 0);
      d1 = i32x4.shuffle(d1, d1, 1, 2, 3, 0);
      a1 = fma(lanesOf(aLo, mLo, v128.load(q1, 2), ones), d, a1);
      b1 = fma(lanesOf(aHi, mHi, v128.load(q1, 18), ones), d, b1);
      d = i32x4.shuffle(d2, d2, 0, 0, 0, 0);
      d2 = i32x4.shuffle(d2, d2, 1, 2, 3, 0);
      a2 = fma(lanesOf(aLo, mLo, v128.load(q2, 2), ones), d, a2);
      b2 = fma(lanesOf(aHi, mHi, v128.load(q2, 18), ones), d, b2);
      d = i32x4.shuffle(d3, d3, 0, 0, 0, 0);
      d3 = i32x4.shuffle(d3, d3, 1, 2, 3, 0);
      a3 = fma(lanesOf(aLo, mLo, v128.load(q3, 2), ones), d, a3);
      b3 = fma(lanesOf(aHi, mHi, v128.load(q3, 18), ones), d, b3);
    }
  }
  const table = f16TableAddress();
  const end = p0 + <usize>nb * 34;
  for (; p < end; p += 34, xb += 64, sb += 4) {
    const sx = load<f32>(sb);
    const q1 = p + stride, q2 = q1 + stride, q3 = q2 + stride;
    let d = f32x4.splat(f16At(p, table) * sx);
    a0 = halfBlock(p, xb, d, ones, a0, false, true);
    b0 = halfBlock(p, xb, d, ones, b0, true, true);
    d = f32x4.splat(f16At(q1, table) * sx);
    a1 = halfBlock(q1, xb, d, ones, a1, false, true);
    b1 = halfBlock(q1, xb, d, ones, b1, true, true);
    d = f32x4.splat(f16At(q2, table) * sx);
    a2 = halfBlock(q2, xb, d, ones, a2, false, true);
    b2 = halfBlock(q2, xb, d, ones, b2, true, true);
    d = f32x4.splat(f16At(q3, table) * sx);
    a3 = halfBlock(q3, xb, d, ones, a3, false, true);
    b3 = halfBlock(q3, xb, d, ones, b3, true, true);
  }
  store<f32>(out, hsum8(a0, b0));
  store<f32>(out + outStride, hsum8(a1, b1));
  store<f32>(out + 2 * outStride, hsum8(a2, b2));
  store<f32>(out + 3 * outStride, hsum8(a3, b3));
}

/**
 * Rows [r0, r1) of out[t * rows + r] for every token t. With a group stream (groups != 0: the
 * batch packed by packQ8_0Groups; acc: the thread's 256 bytes) tokens go eight at a time over
 * all the chunk's rows, then four (those rows stay in cache while the tokens' activations sit in
 * L1), then one at a time; decode (one token) streams the rows one after another.
 */
export function matQ8_0Exact(w: usize, rowBytes: usize, xq: usize, xs: usize, groups: usize, acc: usize, out: usize, rows: i32, cols: i32, nTok: i32, r0: i32, r1: i32, vnni: bool): void {
  if (vnni) matExactU8(w, rowBytes, xq, xs, groups, acc, out, rows, cols, nTok, r0, r1);
  else matExactI16(w, rowBytes, xq, xs, groups, acc, out, rows, cols, nTok, r0, r1);
}

/** matQ8_0Exact for a regular weight: no Inf/NaN block scale, no -128 (the host checked: q8_0Regular) */
export function matQ8_0ExactFinite(w: usize, rowBytes: usize, xq: usize, xs: usize, groups: usize, acc: usize, out: usize, rows: i32, cols: i32, nTok: i32, r0: i32, r1: i32, vnni: bool): void {
  if (vnni) matExactFiniteU8(w, rowBytes, xq, xs, groups, acc, out, rows, cols, nTok, r0, r1);
  else matExactFiniteI16(w, rowBytes, xq, xs, groups, acc, out, rows, cols, nTok, r0, r1);
}

// Each specialisation a function of its own: with both copies inlined into one function behind
// `if (vnni)`, the optimizer folded the two arms into one body that reads the flags from locals
// (selects and branches per token in the inner loop, both sides' values computed)
function matExactU8(w: usize, rowBytes: usize, xq: usize, xs: usize, groups: usize, acc: usize, out: usize, rows: i32, cols: i32, nTok: i32, r0: i32, r1: i32): void {
  matExact(w, rowBytes, xq, xs, groups, acc, out, rows, cols, nTok, r0, r1, false, true);
}
function matExactI16(w: usize, rowBytes: usize, xq: usize, xs: usize, groups: usize, acc: usize, out: usize, rows: i32, cols: i32, nTok: i32, r0: i32, r1: i32): void {
  matExact(w, rowBytes, xq, xs, groups, acc, out, rows, cols, nTok, r0, r1, false, false);
}
function matExactFiniteU8(w: usize, rowBytes: usize, xq: usize, xs: usize, groups: usize, acc: usize, out: usize, rows: i32, cols: i32, nTok: i32, r0: i32, r1: i32): void {
  matExact(w, rowBytes, xq, xs, groups, acc, out, rows, cols, nTok, r0, r1, true, true);
}
function matExactFiniteI16(w: usize, rowBytes: usize, xq: usize, xs: usize, groups: usize, acc: usize, out: usize, rows: i32, cols: i32, nTok: i32, r0: i32, r1: i32): void {
  matExact(w, rowBytes, xq, xs, groups, acc, out, rows, cols, nTok, r0, r1, true, false);
}

// @ts-ignore: decorator
@inline function matExact(w: usize, rowBytes: usize, xq: usize, xs: usize, groups: usize, acc: usize, out: usize, rows: i32, cols: i32, nTok: i32, r0: i32, r1: i32, regular: bool, u8: bool): void {
  const nb = cols >> 5;
  const xStride = (<usize>cols) << 1;
  const sStride = (<usize>nb) << 2;
  const outStride = (<usize>rows) << 2;
  const ones = onesI16();
  const table = f16TableAddress();
  let t = 0;
  if (groups != 0) {
    let g = groups;
    for (; t + 8 <= nTok; t += 8, g += <usize>nb * groupBlockBytes(8, false)) {
      for (let r = r0; r < r1; r++) rowGroup(w + <usize>r * rowBytes, nb, g, acc, ones, table, out + <usize>t * outStride + ((<usize>r) << 2), outStride, false, u8);
    }
    if (t + 4 <= nTok) {
      for (let r = r0; r < r1; r++) rowGroup(w + <usize>r * rowBytes, nb, g, acc, ones, table, out + <usize>t * outStride + ((<usize>r) << 2), outStride, true, u8);
      t += 4;
    }
  }
  for (; t < nTok; t++) {
    let r = r0;
    if (regular) {
      const q = (r1 - r0) >> 2, o = out + <usize>t * outStride;
      for (let i = 0; i < q; i++) {
        const a = r0 + i;
        row4(w + <usize>a * rowBytes, <usize>q * rowBytes, nb, xq + <usize>t * xStride, xs + <usize>t * sStride, ones, o + ((<usize>a) << 2), (<usize>q) << 2);
      }
      r = r0 + 4 * q;
    }
    for (; r < r1; r++) {
      store<f32>(out + <usize>t * outStride + ((<usize>r) << 2), row1(w + <usize>r * rowBytes, nb, xq + <usize>t * xStride, xs + <usize>t * sStride, ones, table, regular));
    }
  }
}

/**
 * Lane 0 of the relaxed int8 dot of splat(a) with splat(b), a probe for the host: -256 for
 * (-1, -128) where the second operand is read as unsigned bytes. (Arguments, not constants, so
 * the optimizer cannot fold the probe with its own idea of the instruction.)
 */
export function probeDot(a: i32, b: i32): i32 {
  if (!ASC_FEATURE_RELAXED_SIMD) return 0;
  return i16x8.extract_lane_s(dotI8I7(i8x16.splat(<i8>a), i8x16.splat(<i8>b)), 0);
}

/**
 * Lane 0 of the relaxed byte blend of splat(a) and splat(b) under the mask splat(m), a probe
 * for the host: a for m = -128 and b for m = 127 where the blend reads each mask byte's top bit.
 */
export function probeBlend(a: i32, b: i32, m: i32): i32 {
  if (!ASC_FEATURE_RELAXED_SIMD) return 0;
  return i8x16.extract_lane_s(blend(i8x16.splat(<i8>a), i8x16.splat(<i8>b), i8x16.splat(<i8>m)), 0);
}
