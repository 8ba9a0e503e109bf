// Causal attention of query tokens against the KV cache, one (token, head) item at a time.
// The softmax streams over the keys with a running max and sum (online softmax), so no score
// buffer is needed and memory does not grow with context x context; grouped-query heads read
// their shared KV head in place. headDim must be a multiple of 4 (the host checks).

// @ts-ignore: decorator
@inline function hsum(v: v128): f32 {
  return f32x4.extract_lane(v, 0) + f32x4.extract_lane(v, 1) + f32x4.extract_lane(v, 2) + f32x4.extract_lane(v, 3);
}

/**
 * e^x for x <= 0 (softmax arguments): Cody-Waite reduction x = k ln2 + r, |r| <= ln2 / 2, and a
 * degree-6 Taylor polynomial (error ~2 ulp). Pure arithmetic, no tables in memory.
 */
// @ts-ignore: decorator
@inline function expNeg(x: f32): f32 {
  if (x < -87) return 0;
  const k = nearest<f32>(x * <f32>1.4426950408889634);
  const r = x - k * <f32>0.693145751953125 - k * <f32>1.4286068203094173e-6;
  const p: f32 = <f32>1 + r * (<f32>1 + r * (<f32>0.5 + r * (<f32>0.16666666666666666 + r * (<f32>0.041666666666666664 + r * (<f32>0.008333333333333333 + r * <f32>0.001388888888888889)))));
  return p * reinterpret<f32>((<i32>k + 127) << 23);
}

/** q . k over one head */
// @ts-ignore: decorator
@inline function score(qp: usize, kp: usize, rowBytes: usize): f32 {
  let acc = f32x4.splat(0);
  for (let d: usize = 0; d < rowBytes; d += 16) acc = f32x4.add(acc, f32x4.mul(v128.load(qp + d), v128.load(kp + d)));
  return hsum(acc);
}

/**
 * Items [i0, i1) of the job: item = t * nHeads + h. q and out hold nTok rows of nHeads * headDim
 * floats; k and v hold rows of nKvHeads * headDim floats for positions 0 .. startPos + nTok - 1.
 * Token t sits at position startPos + t and sees positions <= its own.
 */
export function attend(q: usize, k: usize, v: usize, out: usize, nHeads: i32, nKvHeads: i32, headDim: i32, startPos: i32, scale: f32, i0: i32, i1: i32): void {
  const group = nHeads / nKvHeads;
  const kvStride = (<usize>(nKvHeads * headDim)) << 2;
  const rowBytes = (<usize>headDim) << 2;
  for (let item = i0; item < i1; item++) {
    const t = item / nHeads;
    const h = item % nHeads;
    const qp = q + (<usize>item) * rowBytes;
    const op = out + (<usize>item) * rowBytes;
    const kvOff = (<usize>(h / group)) * rowBytes;
    const nKeys = startPos + t + 1;
    // the first key starts the running max, sum and output
    const v0 = v + kvOff;
    let m: f32 = score(qp, k + kvOff, rowBytes) * scale;
    let sum: f32 = 1;
    for (let d: usize = 0; d < rowBytes; d += 16) v128.store(op + d, v128.load(v0 + d));
    for (let j = 1; j < nKeys; j++) {
      const s = score(qp, k + (<usize>j) * kvStride + kvOff, rowBytes) * scale;
      if (s > m) {
        // a new maximum: rescale what was accumulated against the old one
        const c = expNeg(m - s);
        sum *= c;
        const cv = f32x4.splat(c);
        for (let d: usize = 0; d < rowBytes; d += 16) v128.store(op + d, f32x4.mul(v128.load(op + d), cv));
        m = s;
      }
      const p = expNeg(s - m);
      sum += p;
      const vp = v + (<usize>j) * kvStride + kvOff;
      const pv = f32x4.splat(p);
      for (let d: usize = 0; d < rowBytes; d += 16) v128.store(op + d, f32x4.add(v128.load(op + d), f32x4.mul(pv, v128.load(vp + d))));
    }
    const inv = f32x4.splat(<f32>1 / sum);
    for (let d: usize = 0; d < rowBytes; d += 16) v128.store(op + d, f32x4.mul(v128.load(op + d), inv));
  }
}
