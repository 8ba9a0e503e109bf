// Attention over an encoded KV cache (f16, q8_0 or q4_0 keys and values; an f32 side cast to f16 as
// llama.cpp casts it for flash attention), bit for bit as
// src/kernels/reference/kv-attention.ts — llama.cpp's CPU flash-attention kernel, one query row
// at a time: each key's score as ggml_vec_dot_q8_0_q8_0 / ggml_vec_dot_q4_0_q8_0 on x86 sums it
// (eight int32 lanes of four products, each lane accumulated in f32 with a fused multiply-add by
// the product of the scales, then the lanes added pairwise), scaled, then an online softmax in
// key order with glibc's expf and fused multiply-adds of the dequantized values (f16 values into
// an accumulator rounded to f16 at every step, as ggml_vec_mad_f16). f16 keys are converted to
// f32 in the thread's scratch and dotted in ggml_vec_dot_f16's order (that of ggml_vec_dot_f32
// for head dims of 64k: attention-ggml.ts's vecDot). The host hands in the queries already
// rotated and converted (Q8_0 blocks, or f16-rounded floats for f16 keys: one conversion per
// item, as llama.cpp's q_to_vec_dot) and rotates the output back; this kernel exists only in the
// relaxed build (its fused multiply-adds), used only where the runtime fuses.
import { f16At, f16TableAddress, f16x4, F16_SCALE, F16_UNSCALE, roundF16x4, scaledHalves } from "./half";
import { fma } from "./ggml-math";
import { vecDot } from "./attention-ggml";

const F16: i32 = 1;
const Q8_0: i32 = 2;
const Q4_0: i32 = 3;
/** f32 rows, which llama.cpp casts to f16 for flash attention: each element rounded to f16 as it is read */
const F32: i32 = 4;

/** keys or values that enter as f16 values (f16, or f32 cast to f16) */
// @ts-ignore: decorator
@inline function halfType(type: i32): bool {
  return type == F16 || type == F32;
}

/** a fused multiply-add of doubles (f64x2.relaxed_madd: fused where f32x4's is, as glibc's FMA build) */
// @ts-ignore: decorator
@inline function fma64(a: f64, b: f64, c: f64): f64 {
  if (ASC_FEATURE_RELAXED_SIMD) return f64x2.extract_lane(f64x2.relaxed_madd(f64x2.splat(a), f64x2.splat(b), f64x2.splat(c)), 0);
  unreachable();
  return a;
}

/** glibc's expf (kernels/ops/expf.ts): `table` holds the 32 doubles 2^(j/32); x <= 0 here */
// @ts-ignore: decorator
@inline function expfLibm(x: f32, table: usize): f32 {
  if (x < <f32>-103.97207641601562) return 0;
  const z = <f64>46.16624130844683 * <f64>x;
  const kd = z + 6755399441055744.0 - 6755399441055744.0;
  const r = z - kd;
  const k = <i32>kd;
  const j = k & 31;
  // 2^((k - j) / 32) from its exponent bits: exact, and in the normal range for every x here
  const s = load<f64>(table + (<usize>j << 3)) * reinterpret<f64>(<i64>(((k - j) >> 5) + 1023) << 52);
  const p = fma64(<f64>0.0000016938359250920212, r, <f64>0.00023459809789509004);
  const y = fma64(p, r * r, fma64(<f64>0.021660849396613134, r, 1.0));
  return <f32>(y * s);
}

/**
 * lanes 0-3 (or 4-7) of a block's eight: the exact sums of products 4i..4i+3 of 16 int8 keys
 * `kv` and 16 int8 queries `qv`
 */
// @ts-ignore: decorator
@inline function laneSums(kv: v128, qv: v128): v128 {
  const lo = i32x4.dot_i16x8_s(i16x8.extend_low_i8x16_s(kv), i16x8.extend_low_i8x16_s(qv));
  const hi = i32x4.dot_i16x8_s(i16x8.extend_high_i8x16_s(kv), i16x8.extend_high_i8x16_s(qv));
  return i32x4.add(i32x4.shuffle(lo, hi, 0, 2, 4, 6), i32x4.shuffle(lo, hi, 1, 3, 5, 7));
}

/** one key's dot with the Q8_0 query at qp over nBlocks blocks (keys of type kType at kp) */
// @ts-ignore: decorator
@inline function keyDot(kType: i32, kp: usize, qp: usize, nBlocks: i32, table: usize): f32 {
  let lo = f32x4.splat(0);
  let hi = f32x4.splat(0);
  const kBlock = blockBytes(kType);
  for (let b = 0; b < nBlocks; b++) {
    const kb = kp + <usize>b * kBlock, qb = qp + <usize>b * 34;
    const d = f32x4.splat(f16At(kb, table) * f16At(qb, table));
    let k0: v128, k1: v128;
    if (kType == Q8_0) {
      k0 = v128.load(kb, 2);
      k1 = v128.load(kb, 18);
    } else {
      const nib = v128.load(kb, 2);
      k0 = i8x16.sub(v128.and(nib, i8x16.splat(0x0f)), i8x16.splat(8));
      k1 = i8x16.sub(i8x16.shr_u(nib, 4), i8x16.splat(8));
    }
    lo = fma(d, f32x4.convert_i32x4_s(laneSums(k0, v128.load(qb, 2))), lo);
    hi = fma(d, f32x4.convert_i32x4_s(laneSums(k1, v128.load(qb, 18))), hi);
  }
  const r = f32x4.add(hi, lo);
  return (f32x4.extract_lane(r, 0) + f32x4.extract_lane(r, 2)) + (f32x4.extract_lane(r, 1) + f32x4.extract_lane(r, 3));
}


/** four f16 at p as f32 lanes */
// @ts-ignore: decorator
@inline function halves4(p: usize): v128 {
  return f16x4(i32x4.shl(i32x4.extend_low_i16x8_u(v128.load64_zero(p)), 16));
}


/** eight f16 bits: none is Inf or NaN */
// @ts-ignore: decorator
@inline function finite8(h: v128): bool {
  return !v128.any_true(i16x8.eq(v128.and(h, i16x8.splat(0x7c00)), i16x8.splat(0x7c00)));
}


/** four f16 at p, any value, as f32 times 2^-112 */
// @ts-ignore: decorator
@inline function scaledHalves4(p: usize): v128 {
  return f32x4.mul(halves4(p), f32x4.splat(F16_SCALE));
}

/** f16 0-3 (`high`: 4-7) of the eight at p, whose bits are h, as f32 times 2^-112: the integer move where all eight are finite (finite8(h)), else the rebias */
// @ts-ignore: decorator
@inline function scaledHalvesAt(p: usize, h: v128, finite: bool, high: bool): v128 {
  return finite ? scaledHalves(h, high) : scaledHalves4(high ? p + 8 : p);
}

/** headDim f32 at src times 2^112 to dst (a query against keys taken times 2^-112) */
// @ts-ignore: decorator
@inline function unscaleQuery(src: usize, dst: usize, headDim: i32): void {
  const u = f32x4.splat(F16_UNSCALE);
  for (let d: usize = 0; d < (<usize>headDim << 2); d += 16) v128.store(dst + d, f32x4.mul(v128.load(src + d), u));
}

/**
 * acc[0..headDim) = f16(acc + value * ws) element by element (ggml_vec_mad_f16) for the f16 value
 * row at vp, ws = the value weight times 2^112
 */
// @ts-ignore: decorator
@inline function madF16Row(acc: usize, vp: usize, rowBytes: usize, ws: v128): void {
  let d: usize = 0;
  for (; d + 32 <= rowBytes; d += 32) {
    const p = vp + (d >> 1);
    const h = v128.load(p);
    const finite = finite8(h);
    v128.store(acc + d, roundF16x4(fma(scaledHalvesAt(p, h, finite, false), ws, v128.load(acc + d))));
    v128.store(acc + d, roundF16x4(fma(scaledHalvesAt(p, h, finite, true), ws, v128.load(acc + d, 16))), 16);
  }
  if (d < rowBytes) v128.store(acc + d, roundF16x4(fma(scaledHalves4(vp + (d >> 1)), ws, v128.load(acc + d))));
}

/** four f32 at p cast to f16 (as llama.cpp casts an f32 side for flash attention), times 2^-112: exact, Inf kept */
// @ts-ignore: decorator
@inline function castHalves4(p: usize): v128 {
  return f32x4.mul(roundF16x4(v128.load(p)), f32x4.splat(F16_SCALE));
}

/** madF16Row for an f32 value row at vp, each element cast to f16 first */
// @ts-ignore: decorator
@inline function madF32Row(acc: usize, vp: usize, rowBytes: usize, ws: v128): void {
  for (let d: usize = 0; d < rowBytes; d += 16) v128.store(acc + d, roundF16x4(fma(castHalves4(vp + d), ws, v128.load(acc + d))));
}

/** madF16Row or madF32Row by the value type */
// @ts-ignore: decorator
@inline function madHalfRow(vType: i32, acc: usize, vp: usize, rowBytes: usize, ws: v128): void {
  if (vType == F32) madF32Row(acc, vp, rowBytes, ws);
  else madF16Row(acc, vp, rowBytes, ws);
}

/**
 * For each of `count` heads r: acc_r[0..32) += the dequantized value block at vb * vs_r, one fused
 * multiply-add per element; acc_r = acc + r * accStride, vs_r = f32 at vsAt + 4r. The block is
 * dequantized once for all of them (the heads of a KV group share their value rows).
 */
// @ts-ignore: decorator
@inline function addValueBlocks(vType: i32, vb: usize, acc: usize, accStride: usize, vsAt: usize, count: i32, table: usize): void {
  const d = f32x4.splat(f16At(vb, table));
  let b0: v128, b1: v128;
  if (vType == Q8_0) {
    b0 = v128.load(vb, 2);
    b1 = v128.load(vb, 18);
  } else {
    const nib = v128.load(vb, 2);
    b0 = i8x16.sub(v128.and(nib, i8x16.splat(0x0f)), i8x16.splat(8));
    b1 = i8x16.sub(i8x16.shr_u(nib, 4), i8x16.splat(8));
  }
  const w0 = i16x8.extend_low_i8x16_s(b0), w1 = i16x8.extend_high_i8x16_s(b0);
  const w2 = i16x8.extend_low_i8x16_s(b1), w3 = i16x8.extend_high_i8x16_s(b1);
  const v0 = f32x4.mul(f32x4.convert_i32x4_s(i32x4.extend_low_i16x8_s(w0)), d);
  const v1 = f32x4.mul(f32x4.convert_i32x4_s(i32x4.extend_high_i16x8_s(w0)), d);
  const v2 = f32x4.mul(f32x4.convert_i32x4_s(i32x4.extend_low_i16x8_s(w1)), d);
  const v3 = f32x4.mul(f32x4.convert_i32x4_s(i32x4.extend_high_i16x8_s(w1)), d);
  const v4 = f32x4.mul(f32x4.convert_i32x4_s(i32x4.extend_low_i16x8_s(w2)), d);
  const v5 = f32x4.mul(f32x4.convert_i32x4_s(i32x4.extend_high_i16x8_s(w2)), d);
  const v6 = f32x4.mul(f32x4.convert_i32x4_s(i32x4.extend_low_i16x8_s(w3)), d);
  const v7 = f32x4.mul(f32x4.convert_i32x4_s(i32x4.extend_high_i16x8_s(w3)), d);
  for (let r = 0; r < count; r++) {
    const a = acc + <usize>r * accStride;
    const vs = v128.load32_splat(vsAt + (<usize>r << 2));
    v128.store(a, fma(v0, vs, v128.load(a)));
    v128.store(a, fma(v1, vs, v128.load(a, 16)), 16);
    v128.store(a, fma(v2, vs, v128.load(a, 32)), 32);
    v128.store(a, fma(v3, vs, v128.load(a, 48)), 48);
    v128.store(a, fma(v4, vs, v128.load(a, 64)), 64);
    v128.store(a, fma(v5, vs, v128.load(a, 80)), 80);
    v128.store(a, fma(v6, vs, v128.load(a, 96)), 96);
    v128.store(a, fma(v7, vs, v128.load(a, 112)), 112);
  }
}

/** bytes of one q8_0 / q4_0 block */
// @ts-ignore: decorator
@inline function blockBytes(type: i32): usize {
  return type == Q8_0 ? 34 : 18;
}

/** bytes of one head's part of a row of this type */
// @ts-ignore: decorator
@inline function headBytes(type: i32, headDim: i32): usize {
  return type == F32 ? <usize>headDim << 2 : type == F16 ? <usize>headDim << 1 : <usize>(headDim >> 5) * blockBytes(type);
}

/** head dims of f16 keys at kp converted to floats times 2^-112 at dst */
// @ts-ignore: decorator
@inline function convertKeyF16(kp: usize, dst: usize, headDim: i32): void {
  const bytes = <usize>headDim << 1;
  let d: usize = 0;
  for (; d + 16 <= bytes; d += 16) {
    const h = v128.load(kp + d);
    const finite = finite8(h);
    v128.store(dst + (d << 1), scaledHalvesAt(kp + d, h, finite, false));
    v128.store(dst + (d << 1), scaledHalvesAt(kp + d, h, finite, true), 16);
  }
  if (d < bytes) v128.store(dst + (d << 1), scaledHalves4(kp + d));
}

/** head dims of f16 keys, or of f32 keys cast to f16, at kp as floats times 2^-112 at dst */
// @ts-ignore: decorator
@inline function convertHalfKey(kType: i32, kp: usize, dst: usize, headDim: i32): void {
  if (kType == F32) for (let d: usize = 0; d < (<usize>headDim << 2); d += 16) v128.store(dst + d, castHalves4(kp + d));
  else convertKeyF16(kp, dst, headDim);
}

/** an accumulator row times ms (a new running max), rounded to f16 again for f16 values */
// @ts-ignore: decorator
@inline function rescaleRow(op: usize, rowBytes: usize, ms: f32, vType: i32): void {
  const msv = f32x4.splat(ms);
  if (halfType(vType)) for (let d: usize = 0; d < rowBytes; d += 16) v128.store(op + d, roundF16x4(f32x4.mul(v128.load(op + d), msv)));
  else for (let d: usize = 0; d < rowBytes; d += 16) v128.store(op + d, f32x4.mul(v128.load(op + d), msv));
}

/** an accumulator row divided by its sum (0 for none) */
// @ts-ignore: decorator
@inline function normalizeRow(op: usize, rowBytes: usize, sum: f32): void {
  const inv = f32x4.splat(sum == 0 ? <f32>0 : <f32>1 / sum);
  for (let d: usize = 0; d < rowBytes; d += 16) v128.store(op + d, f32x4.mul(v128.load(op + d), inv));
}

/**
 * per-thread scratch bytes: headDim floats (f16 keys converted), three floats per head of a KV
 * group (max, sum, value weight), two vectors for vecDot, then headDim floats per head of a group
 * (the queries times 2^112, for f16 keys)
 */
export function attendEncodedScratchBytes(headDim: i32, group: i32): usize {
  return ((<usize>headDim) << 2) + (<usize>(12 * group)) + 32 + <usize>group * ((<usize>headDim) << 2);
}

/**
 * Items [i0, i1) (item = t * nHeads + h): qq holds each item's converted query, item after item
 * (Q8_0 blocks: headDim / 32 of 34 bytes; for f16 keys headDim f16-rounded floats); k and v hold
 * rows of kRowBytes / vRowBytes bytes, position j in row rows[j], head h's part starting at its
 * KV head's share of the row; types packs the key type (low byte) and value type (next byte): 1 =
 * f16, 2 = q8_0, 3 = q4_0, 4 = f32 (cast to f16 as it is read); table is expf's 32 doubles; scratch holds
 * attendEncodedScratchBytes(headDim, nHeads / nKvHeads) bytes of this thread's own. Results into
 * out (nTok x nHeads x headDim f32), not yet rotated back.
 *
 * Consecutive items of a claim whose heads share a KV head (whole groups where the host claims in
 * groups; a thread's run of items where there are too few groups to go round) go through the keys
 * together: each key row is read and decoded (f16 keys and values converted, value blocks
 * dequantized) once for all of them. Every head's own arithmetic is that of one item alone, in the
 * same order, so the bits do not depend on the grouping.
 */
export function attendEncoded(qq: usize, k: usize, v: usize, rows: usize, out: usize, nHeads: i32, nKvHeads: i32, headDim: i32, startPos: i32, scale: f32, i0: i32, i1: i32, kRowBytes: usize, vRowBytes: usize, types: i32, table: usize, scratch: usize): void {
  const group = nHeads / nKvHeads;
  for (let item = i0; item < i1;) {
    const h = item % nHeads;
    const count = min<i32>(i1 - item, (h / group + 1) * group - h);
    if (count >= 2) {
      attendHeads(qq, k, v, rows, out, nHeads, group, headDim, startPos, scale, item, count, kRowBytes, vRowBytes, types, table, scratch);
      item += count;
    } else {
      // one head alone (decode). Its own loop keeps the running max and sum in registers: the
      // group loop with one head ran decode's attention ~1.15x slower
      attendOne(qq, k, v, rows, out, nHeads, group, headDim, startPos, scale, item, kRowBytes, vRowBytes, types, table, scratch);
      item++;
    }
  }
}

/** items [item0, item0 + count): heads of one token that share one KV head */
function attendHeads(qq: usize, k: usize, v: usize, rows: usize, out: usize, nHeads: i32, group: i32, headDim: i32, startPos: i32, scale: f32, item0: i32, count: i32, kRowBytes: usize, vRowBytes: usize, types: i32, table: usize, scratch: usize): void {
  const f16s = f16TableAddress();
  const kType = types & 0xff, vType = (types >> 8) & 0xff;
  const nBlocks = headDim >> 5, rowBytes = (<usize>headDim) << 2;
  const kHead = headBytes(kType, headDim), vHead = headBytes(vType, headDim), vBlock = blockBytes(vType);
  // the converted queries: f16-rounded floats for f16 keys, Q8_0 blocks otherwise
  const qStride: usize = halfType(kType) ? rowBytes : <usize>nBlocks * 34;
  const t = item0 / nHeads;
  const kvh = <usize>((item0 % nHeads) / group);
  const q0 = qq + <usize>item0 * qStride;
  const o0 = out + <usize>item0 * rowBytes;
  // per head: the running max, the running sum and this key's value weight
  const mAt = scratch + rowBytes, sumAt = mAt + (<usize>count << 2), vsAt = sumAt + (<usize>count << 2);
  const dotTmp = mAt + <usize>(12 * group);
  // f16 keys: the queries times 2^112 (the keys are converted times 2^-112)
  const qs = halfType(kType) ? dotTmp + 32 : q0;
  for (let r = 0; r < count; r++) {
    if (halfType(kType)) unscaleQuery(q0 + <usize>r * qStride, qs + <usize>r * rowBytes, headDim);
    store<f32>(mAt + (<usize>r << 2), -Infinity);
    store<f32>(sumAt + (<usize>r << 2), 0);
    const op = o0 + <usize>r * rowBytes;
    for (let d: usize = 0; d < rowBytes; d += 16) v128.store(op + d, f32x4.splat(0));
  }
  const nKeys = startPos + t + 1;
  for (let j = 0; j < nKeys; j++) {
    const row = <usize>load<i32>(rows + (<usize>j << 2));
    const kp = k + row * kRowBytes + kvh * kHead;
    if (halfType(kType)) convertHalfKey(kType, kp, scratch, headDim);
    for (let r = 0; r < count; r++) {
      const op = o0 + <usize>r * rowBytes;
      const s: f32 = (halfType(kType) ? vecDot(scratch, qs + <usize>r * rowBytes, headDim, dotTmp) : keyDot(kType, kp, q0 + <usize>r * qStride, nBlocks, f16s)) * scale;
      const m = load<f32>(mAt + (<usize>r << 2));
      let ms: f32 = 1, vs: f32 = 1;
      if (s > m) {
        ms = expfLibm(m - s, table);
        store<f32>(mAt + (<usize>r << 2), s);
        rescaleRow(op, rowBytes, ms, vType);
      } else {
        vs = expfLibm(s - m, table);
      }
      // f16 values enter times 2^-112: their weight times 2^112
      store<f32>(vsAt + (<usize>r << 2), halfType(vType) ? vs * F16_UNSCALE : vs);
      const sum = load<f32>(sumAt + (<usize>r << 2));
      store<f32>(sumAt + (<usize>r << 2), f32x4.extract_lane(fma(f32x4.splat(sum), f32x4.splat(ms), f32x4.splat(vs)), 0));
    }
    const vp = v + row * vRowBytes + kvh * vHead;
    if (halfType(vType)) {
      // ggml_vec_mad_f16: each element's fused multiply-add rounded back to f16 (the value row is
      // read from L1 for the run's later heads)
      for (let r = 0; r < count; r++) madHalfRow(vType, o0 + <usize>r * rowBytes, vp, rowBytes, v128.load32_splat(vsAt + (<usize>r << 2)));
    } else {
      for (let b = 0; b < nBlocks; b++) addValueBlocks(vType, vp + <usize>b * vBlock, o0 + (<usize>b << 7), rowBytes, vsAt, count, f16s);
    }
  }
  for (let r = 0; r < count; r++) {
    normalizeRow(o0 + <usize>r * rowBytes, rowBytes, load<f32>(sumAt + (<usize>r << 2)));
  }
}

/** item `item` alone: its query, through every key in order */
function attendOne(qq: usize, k: usize, v: usize, rows: usize, out: usize, nHeads: i32, group: i32, headDim: i32, startPos: i32, scale: f32, item: i32, kRowBytes: usize, vRowBytes: usize, types: i32, table: usize, scratch: usize): void {
  const f16s = f16TableAddress();
  const kType = types & 0xff, vType = (types >> 8) & 0xff;
  const nBlocks = headDim >> 5, rowBytes = (<usize>headDim) << 2;
  const kHead = headBytes(kType, headDim), vHead = headBytes(vType, headDim), vBlock = blockBytes(vType);
  // the converted queries: f16-rounded floats for f16 keys, Q8_0 blocks otherwise
  const qStride: usize = halfType(kType) ? rowBytes : <usize>nBlocks * 34;
  const t = item / nHeads;
  const h = item % nHeads;
  const kvh = <usize>(h / group);
  const qp = qq + <usize>item * qStride;
  const op = out + <usize>item * rowBytes;
  for (let d: usize = 0; d < rowBytes; d += 16) v128.store(op + d, f32x4.splat(0));
  const dotTmp = scratch + rowBytes + <usize>(12 * group);
  // f16 keys: the query times 2^112 (the keys are converted times 2^-112)
  const qs = halfType(kType) ? dotTmp + 32 : qp;
  if (halfType(kType)) unscaleQuery(qp, qs, headDim);
  const nKeys = startPos + t + 1;
  let m: f32 = -Infinity;
  let sum: f32 = 0;
  for (let j = 0; j < nKeys; j++) {
    const row = <usize>load<i32>(rows + (<usize>j << 2));
    const kp = k + row * kRowBytes + kvh * kHead;
    let s: f32;
    if (halfType(kType)) {
      convertHalfKey(kType, kp, scratch, headDim);
      s = vecDot(scratch, qs, headDim, dotTmp) * scale;
    } else {
      s = keyDot(kType, kp, qp, nBlocks, f16s) * scale;
    }
    let ms: f32 = 1, vs: f32 = 1;
    if (s > m) {
      ms = expfLibm(m - s, table);
      m = s;
      rescaleRow(op, rowBytes, ms, vType);
    } else {
      vs = expfLibm(s - m, table);
    }
    const vp = v + row * vRowBytes + kvh * vHead;
    if (halfType(vType)) {
      // ggml_vec_mad_f16: each element's fused multiply-add rounded back to f16; the values enter times 2^-112, their weight times 2^112
      madHalfRow(vType, op, vp, rowBytes, f32x4.splat(vs * F16_UNSCALE));
    } else {
      store<f32>(scratch + rowBytes, vs);
      for (let b = 0; b < nBlocks; b++) addValueBlocks(vType, vp + <usize>b * vBlock, op + (<usize>b << 7), 0, scratch + rowBytes, 1, f16s);
    }
    sum = f32x4.extract_lane(fma(f32x4.splat(sum), f32x4.splat(ms), f32x4.splat(vs)), 0);
  }
  normalizeRow(op, rowBytes, sum);
}
