// F32, F16 and BF16 weights against f32 activations (already rounded to the weight's vec_dot
// type by the caller). A single token goes over four rows at a time, a quarter of a claim apart;
// batches in tiles of four rows x two tokens, so each activation vector loaded serves four
// weight rows. All add each row's products in the same order (SPAN_CHUNKS).
import { F16_REBIAS } from "./half";
import { hsumF32 } from "./simd";

/**
 * four f16 weights at p as f32x4, each times 2^-112: sign-extend to i32, shift the 15 payload
 * bits to the f32 exponent/mantissa position, keep the sign. Exact for normal and subnormal
 * values (those become f32 subnormals); Inf/NaN weights come out as finite numbers (model
 * weights are finite). The one-token F16 kernels' activations come times 2^112 instead
 * (roundRowsF16 scaled): both scalings are exact, so each product is the same number and rounds
 * the same, and the multiply that rescaled every weight (a quarter of the decode loop's
 * instructions) is gone. Batches read loadF16x4Exact's values from a panel instead: an f32
 * subnormal costs an Intel core a microcode assist per multiply-add.
 */
// @ts-ignore: decorator
@inline function loadF16x4(p: usize): v128 {
  return v128.and(i32x4.shl(v128.load16x4_s(p), 13), i32x4.splat(0x8fffe000));
}

/** the f16 weight at p times 2^-112, as loadF16x4 gives it */
// @ts-ignore: decorator
@inline function scalarF16(p: usize): f32 {
  return reinterpret<f32>((<i32>load<i16>(p) << 13) & 0x8fffe000);
}

/** four bf16 weights at p as f32x4: bf16 is the top half of an f32 */
// @ts-ignore: decorator
@inline function loadBF16x4(p: usize): v128 {
  return i32x4.shl(v128.load16x4_u(p), 16);
}

/** four weights as loadW gives them, from their loaded lanes (f32; f16 / bf16 widened to 32 bits, sign- / zero-extended) */
// @ts-ignore: decorator
@inline function weights4(kind: i32, lanes: v128): v128 {
  if (kind == 0) return lanes;
  if (kind == 1) return v128.and(i32x4.shl(lanes, 13), i32x4.splat(0x8fffe000));
  return i32x4.shl(lanes, 16);
}

/**
 * loadW at p plus k chunks of four weights, k a constant 0-3 (each arm's offset is the load
 * instruction's own: V8 adds nothing to the address, see rowDot)
 */
// @ts-ignore: decorator
@inline function loadWAt(kind: i32, p: usize, k: i32): v128 {
  if (k == 0) return weights4(kind, kind == 0 ? v128.load(p) : kind == 1 ? v128.load16x4_s(p) : v128.load16x4_u(p));
  if (k == 1) return weights4(kind, kind == 0 ? v128.load(p, 16) : kind == 1 ? v128.load16x4_s(p, 8) : v128.load16x4_u(p, 8));
  if (k == 2) return weights4(kind, kind == 0 ? v128.load(p, 32) : kind == 1 ? v128.load16x4_s(p, 16) : v128.load16x4_u(p, 16));
  return weights4(kind, kind == 0 ? v128.load(p, 48) : kind == 1 ? v128.load16x4_s(p, 24) : v128.load16x4_u(p, 24));
}

// @ts-ignore: decorator
@inline function loadW(kind: i32, p: usize): v128 {
  if (kind == 0) return v128.load(p);
  if (kind == 1) return loadF16x4(p);
  return loadBF16x4(p);
}

// @ts-ignore: decorator
@inline function scalarW(kind: i32, p: usize): f32 {
  if (kind == 0) return load<f32>(p);
  if (kind == 1) return scalarF16(p);
  return reinterpret<f32>(<u32>load<u16>(p) << 16);
}

// weight bytes per element: 4 for f32, 2 for f16/bf16
// @ts-ignore: decorator
@inline function shift(kind: i32): i32 {
  return kind == 0 ? 2 : 1;
}

/**
 * acc + w * x on four lanes: fused in the relaxed build (f32x4.relaxed_madd: one rounding where
 * the CPU has FMA, twice the multiply-adds per cycle), a multiply then an add in the SIMD128
 * build. Every path of a build (one token or a tile of several) adds in the same order with the
 * same instruction, so a row's result does not depend on the batch it is computed in.
 */
// @ts-ignore: decorator
@inline function madd(w: v128, x: v128, acc: v128): v128 {
  if (ASC_FEATURE_RELAXED_SIMD) return f32x4.relaxed_madd(w, x, acc);
  return f32x4.add(f32x4.mul(w, x), acc);
}

/**
 * The order a row's products are added in, the same in every path. The row's 4-float chunks go
 * in spans of SPAN_CHUNKS; within a span, even chunks into one accumulator and odd ones into
 * another; the row's sum is one chain over the spans, s = (s + sum(even)) + sum(odd) (each
 * accumulator's lanes added by hsumF32), then the last cols % 4 products one by one.
 *
 * A single token streams each row as one run of ascending addresses with two independent
 * multiply-add chains (four chains in a row stream no faster than two), four rows far apart at
 * a time (tile4x1): four neighbouring short rows interleave their lines in one region, which the
 * hardware prefetcher follows badly (an AMD EPYC core: 11 against 22 GB/s for one row at a
 * time; an Intel Xeon: four rows a quarter of a claim apart beat both). Batches keep their
 * tiles of four rows x two tokens and reach the same order in two strided passes per span, one
 * per accumulator; a span of four rows and two tokens (12 KB of f32) stays in L1 across its
 * passes. Two passes cost the tile ~5% against one sweep, four passes (four accumulators) ~15%.
 */
const SPAN_CHUNKS: i32 = 128;

/** s plus the last cols % 4 products, one by one */
// @ts-ignore: decorator
@inline function finish(kind: i32, s: f32, wRow: usize, xRow: usize, cols: i32): f32 {
  const sh = shift(kind);
  for (let i = cols & ~3; i < cols; i++) s += scalarW(kind, wRow + (<usize>i << sh)) * load<f32>(xRow + (<usize>i << 2));
  return s;
}

/** chunk j of a row: its four weights (as f32) times the token's four activations, added to acc */
// @ts-ignore: decorator
@inline function chunk(kind: i32, wRow: usize, xRow: usize, j: i32, acc: v128): v128 {
  return madd(loadW(kind, wRow + (<usize>(j << 2) << shift(kind))), v128.load(xRow + (<usize>j << 4)), acc);
}

/** one row against one token, in the order above */
// @ts-ignore: decorator
@inline function rowDot(kind: i32, wRow: usize, xRow: usize, cols: i32): f32 {
  const chunks = cols >> 2;
  const z = f32x4.splat(0);
  let s: f32 = 0;
  for (let b = 0; b < chunks; b += SPAN_CHUNKS) {
    const end = min<i32>(chunks, b + SPAN_CHUNKS);
    const whole = b + ((end - b) & ~3);
    let even = z, odd = z;
    let j = b;
    // pointers stepped once per four chunks, each load at a constant offset from them (the
    // instruction's own): V8 computed every address from j (two or three integer operations a
    // load), and from memory these loops are bound by the instructions between the weight loads
    let wp = wRow + (<usize>(j << 2) << shift(kind)), xp = xRow + (<usize>j << 4);
    for (; j < whole; j += 4) {
      even = madd(loadWAt(kind, wp, 0), v128.load(xp), even);
      odd = madd(loadWAt(kind, wp, 1), v128.load(xp, 16), odd);
      even = madd(loadWAt(kind, wp, 2), v128.load(xp, 32), even);
      odd = madd(loadWAt(kind, wp, 3), v128.load(xp, 48), odd);
      wp += 16 << shift(kind);
      xp += 64;
    }
    // the last span's last (end - b) % 4 chunks
    if (j < end) even = chunk(kind, wRow, xRow, j, even);
    if (j + 1 < end) odd = chunk(kind, wRow, xRow, j + 1, odd);
    if (j + 2 < end) even = chunk(kind, wRow, xRow, j + 2, even);
    s = (s + hsumF32(even)) + hsumF32(odd);
  }
  return finish(kind, s, wRow, xRow, cols);
}

/** [hsumF32(a), hsumF32(b), hsumF32(c), hsumF32(d)] (the same additions, four rows at once) */
// @ts-ignore: decorator
@inline function sums4(a: v128, b: v128, c: v128, d: v128): v128 {
  const ab = f32x4.add(i32x4.shuffle(a, b, 0, 4, 2, 6), i32x4.shuffle(a, b, 1, 5, 3, 7));
  const cd = f32x4.add(i32x4.shuffle(c, d, 0, 4, 2, 6), i32x4.shuffle(c, d, 1, 5, 3, 7));
  return f32x4.add(i32x4.shuffle(ab, cd, 0, 1, 4, 5), i32x4.shuffle(ab, cd, 2, 3, 6, 7));
}

/**
 * Four rows x two tokens (t, t + 1), prefill: each weight vector loaded (and converted, for
 * F16/BF16) once serves both tokens, each activation vector all four rows; eight independent
 * accumulators keep the multiply-add units busy (a single row's chain waits on its own latency).
 * Pass k of a span takes its chunks k, k + 2, k + 4, ... (rowDot's even or odd accumulator) and
 * adds their lane sums to the outputs, which hold the rows' running sums.
 */
// @ts-ignore: decorator
@inline function tile4x2(kind: i32, w0: usize, rowBytes: usize, x: usize, out: usize, rows: i32, cols: i32, t: i32, r: i32): void {
  const sh = shift(kind);
  const w1 = w0 + rowBytes;
  const w2 = w1 + rowBytes;
  const w3 = w2 + rowBytes;
  const x0 = x + ((<usize>t * <usize>cols) << 2);
  const x1 = x0 + ((<usize>cols) << 2);
  const chunks = cols >> 2;
  const o0 = out + ((<usize>t * <usize>rows + <usize>r) << 2);
  const o1 = o0 + ((<usize>rows) << 2);
  const z = f32x4.splat(0);
  v128.store(o0, z);
  v128.store(o1, z);
  for (let b = 0; b < chunks; b += SPAN_CHUNKS) {
    const end = min<i32>(chunks, b + SPAN_CHUNKS);
    for (let k = 0; k < 2; k++) {
      let a00 = z, a01 = z, a10 = z, a11 = z, a20 = z, a21 = z, a30 = z, a31 = z;
      for (let j = b + k; j < end; j += 2) {
        const xa = v128.load(x0 + (<usize>j << 4));
        const xb = v128.load(x1 + (<usize>j << 4));
        const o = <usize>(j << 2) << sh;
        const v0 = loadW(kind, w0 + o);
        a00 = madd(v0, xa, a00);
        a01 = madd(v0, xb, a01);
        const v1 = loadW(kind, w1 + o);
        a10 = madd(v1, xa, a10);
        a11 = madd(v1, xb, a11);
        const v2 = loadW(kind, w2 + o);
        a20 = madd(v2, xa, a20);
        a21 = madd(v2, xb, a21);
        const v3 = loadW(kind, w3 + o);
        a30 = madd(v3, xa, a30);
        a31 = madd(v3, xb, a31);
      }
      v128.store(o0, f32x4.add(v128.load(o0), sums4(a00, a10, a20, a30)));
      v128.store(o1, f32x4.add(v128.load(o1), sums4(a01, a11, a21, a31)));
    }
  }
  if ((cols & 3) == 0) return;
  for (let i: usize = 0; i < 4; i++) {
    const wi = w0 + i * rowBytes;
    store<f32>(o0 + (i << 2), finish(kind, load<f32>(o0 + (i << 2)), wi, x0, cols));
    store<f32>(o1 + (i << 2), finish(kind, load<f32>(o1 + (i << 2)), wi, x1, cols));
  }
}

/**
 * Four rows x one token side by side, in rowDot's order (two accumulators a row, eight in all):
 * the rows at w0 + k * stride, their results at out + k * outStride (k = 0-3). Decode passes rows
 * a quarter of a claim apart: four sequential streams, which an Intel Xeon's prefetchers follow
 * at 1.2-1.8x the rate of one row at a time or of four neighbouring rows (docs/kernels.md)
 */
// @ts-ignore: decorator
@inline function tile4x1(kind: i32, w0: usize, stride: usize, xt: usize, out: usize, outStride: usize, cols: i32): void {
  const sh = shift(kind);
  const w1 = w0 + stride;
  const w2 = w1 + stride;
  const w3 = w2 + stride;
  const chunks = cols >> 2;
  const z = f32x4.splat(0);
  let s = z;
  for (let b = 0; b < chunks; b += SPAN_CHUNKS) {
    const end = min<i32>(chunks, b + SPAN_CHUNKS);
    let e0 = z, e1 = z, e2 = z, e3 = z, d0 = z, d1 = z, d2 = z, d3 = z;
    let j = b;
    // one pointer a row and one for x, stepped once per two chunks, loads at constant offsets (see rowDot)
    const o0 = <usize>(j << 2) << sh;
    let p0 = w0 + o0, p1 = w1 + o0, p2 = w2 + o0, p3 = w3 + o0, xp = xt + (<usize>j << 4);
    for (; j + 2 <= end; j += 2) {
      const xe = v128.load(xp);
      const xd = v128.load(xp, 16);
      e0 = madd(loadWAt(kind, p0, 0), xe, e0);
      e1 = madd(loadWAt(kind, p1, 0), xe, e1);
      e2 = madd(loadWAt(kind, p2, 0), xe, e2);
      e3 = madd(loadWAt(kind, p3, 0), xe, e3);
      d0 = madd(loadWAt(kind, p0, 1), xd, d0);
      d1 = madd(loadWAt(kind, p1, 1), xd, d1);
      d2 = madd(loadWAt(kind, p2, 1), xd, d2);
      d3 = madd(loadWAt(kind, p3, 1), xd, d3);
      p0 += 8 << sh;
      p1 += 8 << sh;
      p2 += 8 << sh;
      p3 += 8 << sh;
      xp += 32;
    }
    if (j < end) {
      const o = <usize>(j << 2) << sh;
      const xe = v128.load(xt + (<usize>j << 4));
      e0 = madd(loadW(kind, w0 + o), xe, e0);
      e1 = madd(loadW(kind, w1 + o), xe, e1);
      e2 = madd(loadW(kind, w2 + o), xe, e2);
      e3 = madd(loadW(kind, w3 + o), xe, e3);
    }
    s = f32x4.add(f32x4.add(s, sums4(e0, e1, e2, e3)), sums4(d0, d1, d2, d3));
  }
  store<f32>(out, finish(kind, f32x4.extract_lane(s, 0), w0, xt, cols));
  store<f32>(out + outStride, finish(kind, f32x4.extract_lane(s, 1), w1, xt, cols));
  store<f32>(out + 2 * outStride, finish(kind, f32x4.extract_lane(s, 2), w2, xt, cols));
  store<f32>(out + 3 * outStride, finish(kind, f32x4.extract_lane(s, 3), w3, xt, cols));
}

/** rows [r, r + 4) for token t of a batch (its odd last token) */
// @ts-ignore: decorator
@inline function oneToken4(kind: i32, w0: usize, rowBytes: usize, x: usize, out: usize, rows: i32, cols: i32, t: i32, r: i32): void {
  tile4x1(kind, w0, rowBytes, x + ((<usize>t * <usize>cols) << 2), out + ((<usize>t * <usize>rows + <usize>r) << 2), 4, cols);
}

/**
 * rows [r0, r1) x tokens [t0, t1), one row and token at a time (decode, a batch's odd token, a
 * claim's last rows % 4 rows); wr0: row r0's weights
 */
// @ts-ignore: decorator
@inline function rowsEach(kind: i32, wr0: usize, rowBytes: usize, x: usize, out: usize, rows: i32, cols: i32, t0: i32, t1: i32, r0: i32, r1: i32): void {
  for (let t = t0; t < t1; t++) {
    const xt = x + ((<usize>t * <usize>cols) << 2);
    const ot = out + ((<usize>t * <usize>rows) << 2);
    let wr = wr0;
    for (let r = r0; r < r1; r++, wr += rowBytes) store<f32>(ot + (<usize>r << 2), rowDot(kind, wr, xt, cols));
  }
}

/**
 * Activation bytes of one block of tokens: a claim's rows go over one block at a time, so the
 * block stays in L2 while every row group reads it (32 sentences of 128 tokens are 6 MB of
 * MiniLM activations: streamed from memory once per four rows they held the tiles to ~60% of
 * their in-cache rate), and the claim's rows stay in L2 across the blocks.
 */
const TOKEN_BLOCK_BYTES: i32 = 256 << 10;

/**
 * The same for F16/BF16 batches, which convert each group of four rows into the panel once per
 * block: the conversion (ten operations per four F16 weights) is shared by the block's tokens,
 * so bigger blocks pay it less often (TinyLlama-1.1B's 5632-wide down projection: 11 tokens a
 * block in 256 KB, 46 in 1 MB). TinyLlama F16 128-token prefill on an Intel Xeon (2 MB of L2 a
 * core): 32 -> 38-40 tok/s; 4 MB gained nothing more.
 */
const PANEL_TOKEN_BLOCK_BYTES: i32 = 1 << 20;

/**
 * Four f16 weights at p as their exact f32 values (not scaled): normal halves rebiased into the
 * f32 exponent, subnormal ones (exponent 0) as mantissa x 2^-24 through an integer conversion;
 * the sign put back last. No lane is an f32 subnormal: loadF16x4's weights times 2^-112 are,
 * for every f16 subnormal (~0.2% of a trained model's weights, |w| < 6.1e-5), and an Intel
 * core takes a microcode assist on each multiply-add that reads one (a Xeon with AMX, random
 * weights of |w| <= 0.04: F16 batches at half the rate of F32). Inf/NaN come out as loadF16x4's
 * finite numbers times 2^112 (model weights are finite), so the products stay the same reals.
 */
// @ts-ignore: decorator
@inline function loadF16x4Exact(p: usize): v128 {
  const shifted = i32x4.shl(v128.load16x4_s(p), 13);
  const abs = v128.and(shifted, i32x4.splat(0x0fffe000));
  const normal = i32x4.add(abs, i32x4.splat(0x38000000));
  // abs = mantissa << 13 where the exponent is 0: times 2^-37 is mantissa x 2^-24, exactly
  const subnormal = f32x4.mul(f32x4.convert_i32x4_s(abs), f32x4.splat(7.275957614183426e-12));
  const value = v128.bitselect(subnormal, normal, i32x4.lt_u(abs, i32x4.splat(0x00800000)));
  return v128.or(value, v128.and(shifted, i32x4.splat(<i32>0x80000000)));
}

/**
 * rows [r0, r0 + count) of an F16/BF16 weight converted to f32 at panel (cols floats a row):
 * F16 as its exact values (loadF16x4Exact; the batch's activations come unscaled), BF16 as
 * loadW gives them. Each product is the same real number as in the one-token kernels, so the
 * same bits.
 */
// @ts-ignore: decorator
@inline function convertRows(kind: i32, w0: usize, rowBytes: usize, cols: i32, panel: usize, count: i32): void {
  const sh = shift(kind);
  const vec = cols & ~3;
  const stride = (<usize>cols) << 2;
  for (let k = 0; k < count; k++) {
    const src = w0 + <usize>k * rowBytes, dst = panel + <usize>k * stride;
    let i = 0;
    for (; i < vec; i += 4) v128.store(dst + (<usize>i << 2), kind == 1 ? loadF16x4Exact(src + (<usize>i << sh)) : loadW(kind, src + (<usize>i << sh)));
    for (; i < cols; i++) store<f32>(dst + (<usize>i << 2), kind == 1 ? scalarF16(src + (<usize>i << sh)) * F16_REBIAS : scalarW(kind, src + (<usize>i << sh)));
  }
}

/**
 * rows [r0, r1) for every token: tiles of four rows x two tokens, the leftovers by the same
 * per-row arithmetic. panel (F16/BF16 batches; 0 for none): this thread's 16 * cols bytes, where
 * each group of four rows (and the last rows % 4) is converted to f32 once per token block and
 * the F32 tiles run on it (the tiles converted each weight vector again for every pair of
 * tokens: F16 ran at a third of F32). With a panel every product of an F16 batch reads the
 * panel, whose values are unscaled: the caller rounds the activations without the 2^112.
 */
// @ts-ignore: decorator
@inline function matFloat(kind: i32, w: usize, rowBytes: usize, x: usize, out: usize, rows: i32, cols: i32, nTok: i32, r0: i32, r1: i32, panel: usize): void {
  const converted = kind != 0 && panel != 0;
  const blockTokens = max<i32>(2, ((converted ? PANEL_TOKEN_BLOCK_BYTES : TOKEN_BLOCK_BYTES) / (cols << 2)) & ~1);
  if (nTok == 1) {
    // decode: rows i, q + i, 2q + i and 3q + i of the range together (tile4x1), the last
    // (r1 - r0) % 4 rows alone. TinyLlama-1.1B's matrices from memory on an Intel Xeon, 2
    // threads: F16 11-19 -> 20-22 GB/s, BF16 12-22 -> 24-27, F32 ~+5% (one row at a time for
    // rows up to 4 KB, four neighbouring ones for longer rows, two half a claim apart for F32 /
    // BF16 rows up to 4 KB)
    const q = (r1 - r0) >> 2;
    const stride = <usize>q * rowBytes;
    for (let i = 0; i < q; i++) {
      const a = r0 + i;
      tile4x1(kind, w + <usize>a * rowBytes, stride, x, out + (<usize>a << 2), <usize>q << 2, cols);
    }
    const rest = r0 + 4 * q;
    if (rest < r1) rowsEach(kind, w + <usize>rest * rowBytes, rowBytes, x, out, rows, cols, 0, 1, rest, r1);
    return;
  }
  const panelRow = (<usize>cols) << 2;
  for (let t0 = 0; t0 < nTok; t0 += blockTokens) {
    const t1 = min<i32>(nTok, t0 + blockTokens);
    let r = r0;
    for (; r + 4 <= r1; r += 4) {
      const w0 = w + <usize>r * rowBytes;
      let t = t0;
      if (converted) {
        convertRows(kind, w0, rowBytes, cols, panel, 4);
        for (; t + 2 <= t1; t += 2) tile4x2(0, panel, panelRow, x, out, rows, cols, t, r);
        if (t < t1) oneToken4(0, panel, panelRow, x, out, rows, cols, t, r);
        continue;
      }
      for (; t + 2 <= t1; t += 2) tile4x2(kind, w0, rowBytes, x, out, rows, cols, t, r);
      if (t < t1) oneToken4(kind, w0, rowBytes, x, out, rows, cols, t, r);
    }
    if (r == r1) continue;
    if (converted) {
      convertRows(kind, w + <usize>r * rowBytes, rowBytes, cols, panel, r1 - r);
      // the panel's first row is row r
      rowsEach(0, panel, panelRow, x, out, rows, cols, t0, t1, r, r1);
    } else rowsEach(kind, w + <usize>r * rowBytes, rowBytes, x, out, rows, cols, t0, t1, r, r1);
  }
}

// One exported function per weight type so `kind` is a constant inside each (the branches in
// loadW fold away).

export function matF32(w: usize, rowBytes: usize, x: usize, out: usize, rows: i32, cols: i32, nTok: i32, r0: i32, r1: i32): void {
  matFloat(0, w, rowBytes, x, out, rows, cols, nTok, r0, r1, 0);
}

/** panel: this thread's 16 * cols bytes of scratch for batches (0: none) */
export function matF16(w: usize, rowBytes: usize, x: usize, out: usize, rows: i32, cols: i32, nTok: i32, r0: i32, r1: i32, panel: usize): void {
  matFloat(1, w, rowBytes, x, out, rows, cols, nTok, r0, r1, panel);
}

export function matBF16(w: usize, rowBytes: usize, x: usize, out: usize, rows: i32, cols: i32, nTok: i32, r0: i32, r1: i32, panel: usize): void {
  matFloat(2, w, rowBytes, x, out, rows, cols, nTok, r0, r1, panel);
}
