import { fround as f, nearestInt } from "./round.js";

/**
 * ggml's scale searches for the k-quants, f32 arithmetic emulated op by op (see round.ts) so
 * the bytes match ggml's reference quantizers (compiled without FMA contraction).
 */

/** ggml's GROUP_MAX_EPS: below this magnitude a group counts as all zero */
export const GROUP_MAX_EPS = f(1e-15);

/**
 * make_qkx2_quants: the (scale, min) for x[0..n) with quants L in 0..nmax that minimise the
 * weighted error, trying nstep + 1 scales around nmax / (max - min). Writes L; returns
 * [scale, theMin] where weight ~= scale * L - theMin.
 */
export function makeQkx2Quants(
  n: number,
  nmax: number,
  x: Float32Array,
  weights: Float32Array,
  L: Uint8Array,
  Laux: Uint8Array,
  rmin: number,
  rdelta: number,
  nstep: number,
  useMad: boolean,
): [scale: number, theMin: number] {
  let min = x[0]!;
  let max = x[0]!;
  let sumW = weights[0]!;
  let sumX = f(sumW * x[0]!);
  for (let i = 1; i < n; i++) {
    if (x[i]! < min) min = x[i]!;
    if (x[i]! > max) max = x[i]!;
    const w = weights[i]!;
    sumW = f(sumW + w);
    sumX = f(sumX + f(w * x[i]!));
  }
  if (min > 0) min = 0;
  if (max === min) {
    L.fill(0, 0, n);
    return [0, -min];
  }
  let iscale = f(nmax / f(max - min));
  let scale = f(1 / iscale);
  let bestError = 0;
  for (let i = 0; i < n; i++) {
    const l = nearestInt(f(iscale * f(x[i]! - min)));
    L[i] = Math.max(0, Math.min(nmax, l));
    let diff = f(f(f(scale * L[i]!) + min) - x[i]!);
    diff = useMad ? Math.abs(diff) : f(diff * diff);
    bestError = f(bestError + f(weights[i]! * diff));
  }
  if (nstep < 1) return [scale, -min];
  for (let is = 0; is <= nstep; is++) {
    iscale = f(f(f(rmin + f(rdelta * is)) + nmax) / f(max - min));
    let sumL = 0;
    let sumL2 = 0;
    let sumXL = 0;
    for (let i = 0; i < n; i++) {
      const l = Math.max(0, Math.min(nmax, nearestInt(f(iscale * f(x[i]! - min)))));
      Laux[i] = l;
      const wl = f(weights[i]! * l);
      sumL = f(sumL + wl);
      sumL2 = f(sumL2 + f(wl * l));
      sumXL = f(sumXL + f(wl * x[i]!));
    }
    const D = f(f(sumW * sumL2) - f(sumL * sumL));
    if (D > 0) {
      let thisScale = f(f(f(sumW * sumXL) - f(sumX * sumL)) / D);
      let thisMin = f(f(f(sumL2 * sumX) - f(sumL * sumXL)) / D);
      if (thisMin > 0) {
        thisMin = 0;
        thisScale = f(sumXL / sumL2);
      }
      let curError = 0;
      for (let i = 0; i < n; i++) {
        let diff = f(f(f(thisScale * Laux[i]!) + thisMin) - x[i]!);
        diff = useMad ? Math.abs(diff) : f(diff * diff);
        curError = f(curError + f(weights[i]! * diff));
      }
      if (curError < bestError) {
        L.set(Laux.subarray(0, n));
        bestError = curError;
        scale = thisScale;
        min = thisMin;
      }
    }
  }
  return [scale, -min];
}

/**
 * make_qx_quants with rmse_type 1 and no importance weights (what quantize_row_q6_K_ref uses):
 * a symmetric scale for x[0..n) with quants L in 0..2*nmax-1 (stored + nmax), weighted by x^2,
 * searching 18 scales around -nmax / (the value of largest magnitude). Returns the scale.
 */
export function makeQxQuantsRmse1(n: number, nmax: number, x: Float32Array, L: Uint8Array): number {
  let max = 0;
  let amax = 0;
  for (let i = 0; i < n; i++) {
    const ax = Math.abs(x[i]!);
    if (ax > amax) {
      amax = ax;
      max = x[i]!;
    }
  }
  if (amax < GROUP_MAX_EPS) {
    L.fill(0, 0, n);
    return 0;
  }
  const clamp = (l: number): number => Math.max(-nmax, Math.min(nmax - 1, l));
  let iscale = f(-nmax / max);
  let sumlx = 0;
  let suml2 = 0;
  for (let i = 0; i < n; i++) {
    const l = clamp(nearestInt(f(iscale * x[i]!)));
    L[i] = l + nmax;
    const w = f(x[i]! * x[i]!);
    sumlx = f(sumlx + f(f(w * x[i]!) * l));
    suml2 = f(suml2 + f(f(w * l) * l));
  }
  let scale = suml2 !== 0 ? f(sumlx / suml2) : 0;
  let best = f(scale * sumlx);
  for (let is = -9; is <= 9; is++) {
    if (is === 0) continue;
    iscale = f(-f(nmax + f(f(0.1) * is)) / max);
    sumlx = 0;
    suml2 = 0;
    for (let i = 0; i < n; i++) {
      const l = clamp(nearestInt(f(iscale * x[i]!)));
      const w = f(x[i]! * x[i]!);
      sumlx = f(sumlx + f(f(w * x[i]!) * l));
      suml2 = f(suml2 + f(f(w * l) * l));
    }
    if (suml2 > 0 && f(sumlx * sumlx) > f(best * suml2)) {
      for (let i = 0; i < n; i++) L[i] = nmax + clamp(nearestInt(f(iscale * x[i]!)));
      scale = f(sumlx / suml2);
      best = f(scale * sumlx);
    }
  }
  return scale;
}

/**
 * make_q3_quants with do_rmse (what quantize_row_q3_K_ref uses): a symmetric scale for
 * x[0..n) with quants in -nmax..nmax-1, refined by up to 5 rounds of per-weight coordinate
 * descent weighted by x^2. Writes L (stored + nmax); returns the scale.
 */
export function makeQ3Quants(n: number, nmax: number, x: Float32Array, L: Int8Array): number {
  let max = 0;
  let amax = 0;
  for (let i = 0; i < n; i++) {
    const ax = Math.abs(x[i]!);
    if (ax > amax) {
      amax = ax;
      max = x[i]!;
    }
  }
  if (amax < GROUP_MAX_EPS) {
    L.fill(0, 0, n);
    return 0;
  }
  const clamp = (l: number): number => Math.max(-nmax, Math.min(nmax - 1, l));
  const iscale = f(-nmax / max);
  let sumlx = 0;
  let suml2 = 0;
  for (let i = 0; i < n; i++) {
    const l = clamp(nearestInt(f(iscale * x[i]!)));
    L[i] = l;
    const w = f(x[i]! * x[i]!);
    sumlx = f(sumlx + f(f(w * x[i]!) * l));
    suml2 = f(suml2 + f(f(w * l) * l));
  }
  for (let itry = 0; itry < 5; itry++) {
    let changed = 0;
    for (let i = 0; i < n; i++) {
      const w = f(x[i]! * x[i]!);
      let slx = f(sumlx - f(f(w * x[i]!) * L[i]!));
      if (slx > 0) {
        let sl2 = f(suml2 - f(f(w * L[i]!) * L[i]!));
        const newL = clamp(nearestInt(f(f(x[i]! * sl2) / slx)));
        if (newL !== L[i]) {
          slx = f(slx + f(f(w * x[i]!) * newL));
          sl2 = f(sl2 + f(f(w * newL) * newL));
          if (sl2 > 0 && f(f(slx * slx) * suml2) > f(f(sumlx * sumlx) * sl2)) {
            L[i] = newL;
            sumlx = slx;
            suml2 = sl2;
            changed++;
          }
        }
      }
    }
    if (changed === 0) break;
  }
  for (let i = 0; i < n; i++) L[i] = L[i]! + nmax;
  return suml2 > 0 ? f(sumlx / suml2) : 0;
}
