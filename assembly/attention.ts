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

/**
 * e^x for x <= 0 on four lanes: x = k ln2 + r with |r| <= ln2 / 2 and a degree-6 Taylor
 * polynomial: lane for lane the same operations as expNeg, so the same bits; arguments below -87 give 0
 */
// @ts-ignore: decorator
@inline export function expNeg4(x: v128): v128 {
  const k = f32x4.nearest(f32x4.mul(x, f32x4.splat(<f32>1.4426950408889634)));
  const r = f32x4.sub(f32x4.sub(x, f32x4.mul(k, f32x4.splat(<f32>0.693145751953125))), f32x4.mul(k, f32x4.splat(<f32>1.4286068203094173e-6)));
  let p = f32x4.add(f32x4.splat(<f32>0.008333333333333333), f32x4.mul(r, f32x4.splat(<f32>0.001388888888888889)));
  p = f32x4.add(f32x4.splat(<f32>0.041666666666666664), f32x4.mul(r, p));
  p = f32x4.add(f32x4.splat(<f32>0.16666666666666666), f32x4.mul(r, p));
  p = f32x4.add(f32x4.splat(<f32>0.5), f32x4.mul(r, p));
  p = f32x4.add(f32x4.splat(1), f32x4.mul(r, p));
  p = f32x4.add(f32x4.splat(1), f32x4.mul(r, p));
  // 2^k for k >= -126 (the lanes below -87 are zeroed after)
  const scale = i32x4.shl(i32x4.add(i32x4.trunc_sat_f32x4_s(f32x4.max(k, f32x4.splat(-126))), i32x4.splat(127)), 23);
  return v128.and(f32x4.mul(p, scale), f32x4.ge(x, f32x4.splat(-87)));
}

/** q . k over one head */
// @ts-ignore: decorator
@inline function score(qp: usize, kp: usize, rowBytes: usize): f32 {
  let acc = f32x4.splat(0);
  for (let d: usize = 0; d < rowBytes; d += 16) acc = f32x4.add(acc, f32x4.mul(v128.load(qp + d), v128.load(kp + d)));
  return hsum(acc);
}

/** running sum of the current item's softmax (a global: update() returns the new max) */
let runningSum: f32 = 0;

/** folds key score s with values at vp into the output at op (online softmax); returns the new max */
// @ts-ignore: decorator
@inline function update(op: usize, vp: usize, rowBytes: usize, s: f32, m: f32): f32 {
  if (s > m) {
    // a new maximum: rescale what was accumulated against the old one
    const c = expNeg(m - s);
    runningSum *= c;
    const cv = f32x4.splat(c);
    for (let d: usize = 0; d < rowBytes; d += 16) v128.store(op + d, f32x4.mul(v128.load(op + d), cv));
    m = s;
  }
  const p = expNeg(s - m);
  runningSum += p;
  const pv = f32x4.splat(p);
  for (let d: usize = 0; d < rowBytes; d += 16) v128.store(op + d, f32x4.add(v128.load(op + d), f32x4.mul(pv, v128.load(vp + d))));
  return m;
}

/** byte offset of position j's row: rows holds the paged cache's row index (i32 per position) */
// @ts-ignore: decorator
@inline export function rowAt(rows: usize, j: i32, kvStride: usize): usize {
  return (<usize>load<i32>(rows + ((<usize>j) << 2))) * kvStride;
}

/**
 * Items [i0, i1) of the job: item = t * nHeads + h. q and out hold nTok rows of nHeads * headDim
 * floats; k and v hold rows of nKvHeads * headDim floats, position j (j < startPos + nTok) in
 * row rows[j]. Token t sits at position startPos + t and sees positions <= its own. Positions
 * are visited in order wherever their rows lie, so the arithmetic does not depend on the layout.
 */
export function attend(q: usize, k: usize, v: usize, rows: usize, out: usize, nHeads: i32, nKvHeads: i32, headDim: i32, startPos: i32, scale: f32, i0: i32, i1: i32): void {
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
    const r0 = rowAt(rows, 0, kvStride) + kvOff;
    const v0 = v + r0;
    let m: f32 = score(qp, k + r0, rowBytes) * scale;
    runningSum = 1;
    for (let d: usize = 0; d < rowBytes; d += 16) v128.store(op + d, v128.load(v0 + d));
    let j = 1;
    // four keys' scores at a time: each score is summed exactly as score() sums it, but the
    // four dependency chains overlap (one chain alone waits on every add's latency); the
    // softmax update then takes them one by one, in order, as before
    for (; j + 4 <= nKeys; j += 4) {
      const o0 = rowAt(rows, j, kvStride) + kvOff, o1 = rowAt(rows, j + 1, kvStride) + kvOff;
      const o2 = rowAt(rows, j + 2, kvStride) + kvOff, o3 = rowAt(rows, j + 3, kvStride) + kvOff;
      let c0 = f32x4.splat(0);
      let c1 = f32x4.splat(0);
      let c2 = f32x4.splat(0);
      let c3 = f32x4.splat(0);
      for (let d: usize = 0; d < rowBytes; d += 16) {
        const qv = v128.load(qp + d);
        c0 = f32x4.add(c0, f32x4.mul(qv, v128.load(k + o0 + d)));
        c1 = f32x4.add(c1, f32x4.mul(qv, v128.load(k + o1 + d)));
        c2 = f32x4.add(c2, f32x4.mul(qv, v128.load(k + o2 + d)));
        c3 = f32x4.add(c3, f32x4.mul(qv, v128.load(k + o3 + d)));
      }
      const s0 = hsum(c0) * scale;
      const s1 = hsum(c1) * scale;
      const s2 = hsum(c2) * scale;
      const s3 = hsum(c3) * scale;
      const va = v + o0, vb = v + o1, vc = v + o2, vd = v + o3;
      if (max<f32>(max<f32>(s0, s1), max<f32>(s2, s3)) > m) {
        m = update(op, va, rowBytes, s0, m);
        m = update(op, vb, rowBytes, s1, m);
        m = update(op, vc, rowBytes, s2, m);
        m = update(op, vd, rowBytes, s3, m);
      } else {
        // no new maximum (the usual case): the four updates in one pass over the output, each
        // element still summed in key order, so the same bits as four update() calls
        // the four exps at once (expNeg4: the bits of four expNeg calls)
        const ps = expNeg4(f32x4.sub(f32x4.replace_lane(f32x4.replace_lane(f32x4.replace_lane(f32x4.splat(s0), 1, s1), 2, s2), 3, s3), f32x4.splat(m)));
        const p0 = f32x4.extract_lane(ps, 0);
        const p1 = f32x4.extract_lane(ps, 1);
        const p2 = f32x4.extract_lane(ps, 2);
        const p3 = f32x4.extract_lane(ps, 3);
        runningSum = (((runningSum + p0) + p1) + p2) + p3;
        const pv0 = f32x4.splat(p0);
        const pv1 = f32x4.splat(p1);
        const pv2 = f32x4.splat(p2);
        const pv3 = f32x4.splat(p3);
        for (let d: usize = 0; d < rowBytes; d += 16) {
          let o = f32x4.add(v128.load(op + d), f32x4.mul(pv0, v128.load(va + d)));
          o = f32x4.add(o, f32x4.mul(pv1, v128.load(vb + d)));
          o = f32x4.add(o, f32x4.mul(pv2, v128.load(vc + d)));
          v128.store(op + d, f32x4.add(o, f32x4.mul(pv3, v128.load(vd + d))));
        }
      }
    }
    for (; j < nKeys; j++) {
      const oj = rowAt(rows, j, kvStride) + kvOff;
      m = update(op, v + oj, rowBytes, score(qp, k + oj, rowBytes) * scale, m);
    }
    const inv = f32x4.splat(<f32>1 / runningSum);
    for (let d: usize = 0; d < rowBytes; d += 16) v128.store(op + d, f32x4.mul(v128.load(op + d), inv));
  }
}
