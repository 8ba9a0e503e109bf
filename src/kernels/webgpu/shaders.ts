import { iqGrid, KVALUES_IQ4NL } from "../../tensor/quant/index.js";

/**
 * WGSL kernels of the WebGPU backend, as templates: `$name` is a float array (an activation,
 * the KV cache) that the backend binds to one storage binding per distinct GPU buffer, so two
 * views of one buffer (out = x, q/k/v column blocks of one projection) share a binding — WebGPU
 * refuses one buffer bound twice in a dispatch when either binding is writable. `P.o_name` is the
 * float offset of the view; `P.*` are the dispatch's parameters (one 256-byte uniform slice each).
 * Every kernel runs over a flat workgroup index `wgi` (< P.nwg), laid out 2-D by the host since a
 * dispatch dimension holds at most 65535 workgroups; `lid` is the local invocation index.
 *
 * Numerics are f32 and follow kernels/ops/ (the reference): the same activation quantization
 * before a quantized dot product (Q8_0 / Q8_K, ties to even), integer sums inside blocks,
 * ggml's expf for softmax and SiLU, the GELU f16 table, f16 rounding done on the bits.
 */

export type ParamType = "u32" | "i32" | "f32";

export interface KernelDef {
  readonly name: string;
  readonly workgroupSize: number;
  /**
   * arrays the host binds per view, in order; `write` when the kernel stores into it; `words`: read
   * as u32 (an f16 KV cache's packed halves, and copies, which must move bits, not floats)
   */
  readonly arrays: readonly { readonly name: string; readonly write: boolean; readonly words?: boolean }[];
  /** the backend's own buffers: W (weights, u32 words), D (per-dispatch data, u32), f32 constants and scratch */
  readonly extras: readonly { readonly name: string; readonly type: "u32" | "f32"; readonly write?: boolean }[];
  /** uniform parameters besides nwg and the array offsets, each 4 bytes */
  readonly params: readonly (readonly [string, ParamType])[];
  /** the body of main(), which sees wgi, lid, P and the arrays */
  readonly body: string;
  /** module-scope declarations (workgroup memory, helper functions) */
  readonly helpers?: string;
  /** uses subgroup operations: `enable subgroups;`, and main() also sees `sid` (subgroup_invocation_id) and `ssize` (subgroup_size) */
  readonly subgroups?: boolean;
}

/** the uniform fields of a kernel, in the order the host writes them */
export function paramLayout(def: KernelDef): (readonly [string, ParamType])[] {
  return [["nwg", "u32"], ...def.arrays.map((a) => [`o_${a.name}`, "u32"] as const), ...def.params];
}

const COMMON = /* wgsl */ `
// Vulkan lets a / b be 2.5 ulp off and sqrt inherit 1 / inverseSqrt's error (Mesa's lavapipe is
// off by that much), and WGSL's fma need not be fused (lavapipe's is not: an fma-corrected quotient
// came out 1 ulp off in a near-tie, and flipped a Q8_K activation's rounding), while the reference
// rounds both correctly. So both are computed on the integer significands: long division and a
// digit-by-digit square root, 25 bits and a sticky bit, rounded to nearest even.
/** x's significand (implicit bit at 23, subnormals normalized) and unbiased exponent: |x| = m 2^(e - 23) */
fn f32_parts(x: f32) -> vec2<i32> {
  let u = bitcast<u32>(x);
  let be = i32((u >> 23u) & 0xffu);
  var m = u & 0x7fffffu;
  if (be == 0) {
    let z = i32(countLeadingZeros(m)) - 8;
    return vec2<i32>(i32(m << u32(z)), -126 - z);
  }
  return vec2<i32>(i32(m | 0x800000u), be - 127);
}
/** a (25-bit) significand q of value q 2^(e - 24) plus a sticky bit, rounded to an f32 of sign s (normal or subnormal) */
fn f32_round(q: u32, sticky: bool, e: i32, s: u32) -> f32 {
  if (e > 127) { return bitcast<f32>(s | 0x7f800000u); }
  var sh = 1u;
  if (e < -126) { sh = u32(min(-125 - e, 26)); }
  let m = q >> sh;
  let rest = q & ((1u << sh) - 1u);
  let half = 1u << (sh - 1u);
  var r = m;
  if (rest > half || (rest == half && (sticky || (m & 1u) == 1u))) { r = m + 1u; }
  if (sh > 1u) { return bitcast<f32>(s | r); }
  // normal: r holds the implicit bit; a round up to 2^24 carries into the exponent (to inf past 2^127)
  return bitcast<f32>(s | ((u32(e + 127) << 23u) + (r - 0x800000u)));
}
/** zero, infinity or NaN (by the bits: a compiler may assume no NaN in x != x) */
fn not_finite_nonzero(x: f32) -> bool {
  let u = bitcast<u32>(x) & 0x7fffffffu;
  return u == 0u || u >= 0x7f800000u;
}
fn div_rn(a: f32, b: f32) -> f32 {
  // zeros, infinities, NaN and a divisor of inf (swiglu's 1 + exp(-g) for g < -88): exact already
  if (not_finite_nonzero(a) || not_finite_nonzero(b)) { return a / b; }
  let pa = f32_parts(a);
  let pb = f32_parts(b);
  var r = u32(pa.x);
  let d = u32(pb.x);
  var e = pa.y - pb.y;
  if (r < d) { r = r << 1u; e = e - 1; }
  var qq = 0u;
  for (var i = 0u; i < 25u; i++) {
    qq = qq << 1u;
    if (r >= d) { r = r - d; qq = qq | 1u; }
    r = r << 1u;
  }
  return f32_round(qq, r != 0u, e, (bitcast<u32>(a) ^ bitcast<u32>(b)) & 0x80000000u);
}
fn sqrt_rn(x: f32) -> f32 {
  if (not_finite_nonzero(x) || (bitcast<u32>(x) & 0x80000000u) != 0u) { return sqrt(x); }
  let p = f32_parts(x);
  var m = u32(p.x);
  var e = p.y - 23;
  // x = m 2^e with e even; the radicand m 2^k lies in [2^48, 2^50), so its root has 25 bits
  if ((e & 1) != 0) { m = m << 1u; e = e - 1; }
  var k = 26u;
  if (m >= 0x1000000u) { k = 24u; }
  var root = 0u;
  var rem = 0u;
  for (var i = 0u; i < 25u; i++) {
    let pos = 48u - 2u * i;
    var two = 0u;
    if (pos >= k) { two = (m >> (pos - k)) & 3u; }
    rem = (rem << 2u) | two;
    let trial = (root << 2u) | 1u;
    if (rem >= trial) { rem = rem - trial; root = (root << 1u) | 1u; } else { root = root << 1u; }
  }
  return f32_round(root, rem != 0u, 24 + (e - i32(k)) / 2, 0u);
}
fn f16_bits(x: f32) -> u32 {
  let w = bitcast<u32>(x);
  let sign = (w >> 16u) & 0x8000u;
  let a = w & 0x7fffffffu;
  if (a > 0x7f800000u) { return sign | 0x7e00u; }
  if (a >= 0x477ff000u) { return sign | 0x7c00u; }
  if (a >= 0x38800000u) {
    var h = (a - 0x38000000u) >> 13u;
    let rest = a & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1u) == 1u)) { h = h + 1u; }
    return sign | h;
  }
  return sign | u32(round(bitcast<f32>(a) * 16777216.0));
}
fn f16_val(h: u32) -> f32 {
  let e = (h >> 10u) & 0x1fu;
  let m = h & 0x3ffu;
  var v: f32;
  if (e == 0u) {
    v = f32(m) * 5.9604644775390625e-8;
  } else if (e == 31u) {
    v = bitcast<f32>(0x7f800000u | (m << 13u));
  } else {
    v = bitcast<f32>(((e + 112u) << 23u) | (m << 13u));
  }
  if ((h & 0x8000u) != 0u) { v = -v; }
  return v;
}
fn f16_round(x: f32) -> f32 { return f16_val(f16_bits(x)); }
fn expf_ggml(x: f32) -> f32 {
  // |x| > 133 means |n| > 192: inf or 0 (no result in between is finite and nonzero either way)
  if (abs(x) > 133.0) {
    // x * 3e38 overflows to +inf at run time (an inf constant is not valid WGSL)
    if (x > 0.0) { return x * 3.0e38; }
    return 0.0;
  }
  // n = x * log2(e) rounded to the nearest integer, ties to even, as ggml's fma with 1.5 * 2^23
  // does; read from z's low mantissa bits, not as z - 1.5 * 2^23: Mesa's compiler (lavapipe)
  // folds (a + c) - c to a, which dropped the rounding (exp(x) came out as 2^(x log2 e) scaled wrong)
  let z = fma(x, 1.4426950216293335, 12582912.0);
  let ni = bitcast<i32>(z) - 0x4b400000;
  let n = f32(ni);
  let b = fma(-n, 1.428606765330187e-6, fma(-n, 0.693145751953125, x));
  let u = b * b;
  let j = fma(fma(fma(0.008247390389442444, b, 0.04189976677298546), u, fma(0.16668395698070526, b, 0.4999912679195404)), u, fma(0.9999994039535522, b, 1.0));
  if (ni > 127) { return ldexp(j, 127) * ldexp(1.0, ni - 127); }
  if (ni < -126) { return ldexp(j, -126) * ldexp(1.0, ni + 126); }
  return ldexp(j, ni);
}
fn erf_f(x: f32) -> f32 {
  let z = abs(x);
  let t = 1.0 / (1.0 + 0.5 * z);
  let erfc = t * exp(-z * z - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 + t * (-0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277)))))))));
  return select(erfc - 1.0, 1.0 - erfc, x >= 0.0);
}
fn gelu_erf(v: f32) -> f32 { return 0.5 * v * (1.0 + erf_f(v * 0.7071067811865476)); }
`;

/** builds the module: the uniform struct, one binding per distinct buffer (`slots[i]` = binding of arrays[i]) */
export function buildShader(def: KernelDef, slots: readonly number[]): string {
  const fields = paramLayout(def).map(([n, t]) => `  ${n}: ${t},`);
  while (fields.length % 4 !== 0) fields.push(`  _pad${fields.length}: u32,`);
  const lines: string[] = [`struct Params {\n${fields.join("\n")}\n}`, `@group(0) @binding(0) var<uniform> P: Params;`];
  const nSlots = slots.length === 0 ? 0 : Math.max(...slots) + 1;
  for (let s = 0; s < nSlots; s++) {
    const inSlot = def.arrays.filter((_, i) => slots[i] === s);
    const written = inSlot.some((a) => a.write);
    const words = inSlot.some((a) => a.words);
    if (words && inSlot.some((a) => !a.words)) throw new Error(`${def.name}: ${inSlot.map((a) => a.name).join(" and ")} are views of one buffer, but not all of them hold f32 values (an encoded KV cache must have its own buffer)`);
    lines.push(`@group(0) @binding(${1 + s}) var<storage, ${written ? "read_write" : "read"}> buf${s}: array<${words ? "u32" : "f32"}>;`);
  }
  def.extras.forEach((e, i) => {
    lines.push(`@group(0) @binding(${1 + nSlots + i}) var<storage, ${e.write ? "read_write" : "read"}> ${e.name}: array<${e.type}>;`);
  });
  // the host's explicit layout (index.ts) lists every binding, used or not (F32's matmul leaves XQ unused)
  let body = def.body;
  let helpers = def.helpers ?? "";
  def.arrays.forEach((a, i) => {
    const re = new RegExp(`\\$${a.name}\\b`, "g");
    body = body.replace(re, `buf${slots[i]}`);
    helpers = helpers.replace(re, `buf${slots[i]}`);
  });
  const sub = def.subgroups ? ", @builtin(subgroup_invocation_id) sid: u32, @builtin(subgroup_size) ssize: u32" : "";
  // helpers see the subgroup builtins through these (workgroupReduction's subgroup form)
  const subgroupVars = def.subgroups ? "var<private> sg_id: u32;\nvar<private> sg_size: u32;\n" : "";
  if (def.subgroups) body = `  sg_id = sid;\n  sg_size = ssize;\n${body}`;
  return `${def.subgroups ? "enable subgroups;\n" : ""}${lines.join("\n")}
${COMMON}
${subgroupVars}${helpers}
@compute @workgroup_size(${def.workgroupSize})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32${sub}) {
  let wgi = wid.y * nwg.x + wid.x;
  if (wgi >= P.nwg) { return; }
${body}
}
`;
}

// ---- element-wise ----

/**
 * quantizes the 32 floats of `src` from `base` as block `b` of XQ (Q8_0, or Q8_1 `withSum`), as the
 * reference's activation quantizer; shared by the quantization kernel and the kernels that fuse it
 */
const q8Block = (src: string, base: string, b: string, withSum: boolean): string => `{
  let qb = ${b};
  let qbase = ${base};
  var amax = 0.0;
  for (var j = 0u; j < 32u; j++) { amax = max(amax, abs(${src}[qbase + j])); }
  let d = div_rn(amax, 127.0);
  var id = 0.0;
  if (amax != 0.0) { id = div_rn(127.0, amax); }
  var sum = 0;
  for (var k = 0u; k < 8u; k++) {
    var word = 0u;
    for (var c = 0u; c < 4u; c++) {
      let q = i32(round(${src}[qbase + 4u * k + c] * id));
      sum += q;
      word |= (u32(q) & 0xffu) << (8u * c);
    }
    XQ[qb * 8u + k] = word;
  }
${withSum
    ? `  XQ[P.nqw + 2u * qb] = bitcast<u32>(f16_round(d));
  XQ[P.nqw + 2u * qb + 1u] = bitcast<u32>(f16_round(d * f32(sum)));`
    : `  XQ[P.nqw + qb] = bitcast<u32>(f16_round(d));`}
}`;

/** quantizes the 256 floats of `src` from `base` as super-block `b` of XQ (Q8_K: quantize_row_q8_K_ref), as q8Block */
const q8KBlock = (src: string, base: string, b: string): string => `{
  let qb = ${b};
  let qbase = ${base};
  var amax = 0.0;
  var mx = 0.0;
  for (var j = 0u; j < 256u; j++) {
    let v = ${src}[qbase + j];
    if (abs(v) > amax) { amax = abs(v); mx = v; }
  }
  var iscale = 0.0;
  if (amax != 0.0) { iscale = div_rn(-127.0, mx); }
  for (var k = 0u; k < 64u; k++) {
    var word = 0u;
    for (var c = 0u; c < 4u; c++) { word |= (u32(i32(min(127.0, round(iscale * ${src}[qbase + 4u * k + c])))) & 0xffu) << (8u * c); }
    XQ[qb * 64u + k] = word;
  }
  var d = 0.0;
  if (amax != 0.0) { d = div_rn(1.0, iscale); }
  XQ[P.nqw + qb] = bitcast<u32>(d);
}`;

const elementwise = (name: string, arrays: KernelDef["arrays"], params: KernelDef["params"], stmt: string, extras: KernelDef["extras"] = []): KernelDef => ({
  name,
  workgroupSize: 256,
  arrays,
  extras,
  params: [["n", "u32"], ...params],
  body: `  let i = wgi * 256u + lid;\n  if (i >= P.n) { return; }\n${stmt}`,
});

export const ADD = elementwise("add", [{ name: "x", write: true }, { name: "y", write: false }], [],
  `  $x[P.o_x + i] = $x[P.o_x + i] + $y[P.o_y + i];`);

export const ADD_BIAS = elementwise("addBias", [{ name: "x", write: true }], [["width", "u32"]],
  `  $x[P.o_x + i] = $x[P.o_x + i] + BIAS[i % P.width];`, [{ name: "BIAS", type: "f32" }]);

/** SwiGLU of element i (ggml's expf), shared by the plain and the quantizing kernel */
const SWIGLU_ELEMENT = `let g = $g[P.o_g + i];\n  $out[P.o_out + i] = div_rn(g, 1.0 + expf_ggml(-g)) * $u[P.o_u + i];`;

export const SWIGLU = elementwise("swiglu", [{ name: "out", write: true }, { name: "g", write: false }, { name: "u", write: false }], [],
  `  ${SWIGLU_ELEMENT}`);

/** SwiGLU by blocks of 32, each block then quantized to Q8_0 for the matmul that reads it (the backend's fusion) */
export const SWIGLU_Q8_0: KernelDef = {
  name: "swigluQ8_0",
  workgroupSize: 64,
  arrays: [{ name: "out", write: true }, { name: "g", write: false }, { name: "u", write: false }],
  extras: [{ name: "XQ", type: "u32", write: true }],
  params: [["nBlocks", "u32"], ["nqw", "u32"]],
  body: `  let b = wgi * 64u + lid;
  if (b >= P.nBlocks) { return; }
  for (var j = 0u; j < 32u; j++) {
    let i = b * 32u + j;
  ${SWIGLU_ELEMENT}
  }
  ${q8Block("$out", "P.o_out + b * 32u", "b", false)}`,
};

const unaryDef = (name: string, expr: string, extras: KernelDef["extras"] = []): KernelDef =>
  elementwise(`unary-${name}`, [{ name: "out", write: true }, { name: "x", write: false }], [], `  let v = $x[P.o_x + i];\n${expr}`, extras);

export const UNARY: Readonly<Record<string, KernelDef>> = {
  // GGML_GELU_FP16: the table of gelu at every f16 input, indexed by the input's f16 bits
  gelu: unaryDef("gelu", `  var r: f32;\n  if (v <= -10.0) { r = 0.0; } else if (v >= 10.0) { r = v; } else { r = TBL[f16_bits(v)]; }\n  $out[P.o_out + i] = r;`, [{ name: "TBL", type: "f32" }]),
  "gelu-erf": unaryDef("gelu-erf", `  $out[P.o_out + i] = gelu_erf(v);`),
  relu: unaryDef("relu", `  $out[P.o_out + i] = select(0.0, v, v > 0.0);`),
  tanh: unaryDef("tanh", `  $out[P.o_out + i] = tanh(clamp(v, -10.0, 10.0));`),
};

export const SCATTER_ROWS = elementwise("scatterRows", [{ name: "dst", write: true, words: true }, { name: "src", write: false, words: true }], [["width", "u32"], ["o_d", "u32"]],
  `  let r = i / P.width;\n  let j = i - r * P.width;\n  $dst[P.o_dst + D[P.o_d + r] * P.width + j] = $src[P.o_src + i];`, [{ name: "D", type: "u32" }]);

/** two scatters through one row index in one dispatch (a layer's keys, then its values: the backend's fusion); the first `half` words are dst's */
export const SCATTER_ROWS_TWO = elementwise("scatterRows2", [{ name: "dst", write: true, words: true }, { name: "src", write: false, words: true }, { name: "dst2", write: true, words: true }, { name: "src2", write: false, words: true }], [["width", "u32"], ["o_d", "u32"], ["half", "u32"]],
  `  if (i < P.half) {
    let r = i / P.width;
    $dst[P.o_dst + D[P.o_d + r] * P.width + i - r * P.width] = $src[P.o_src + i];
  } else {
    let k = i - P.half;
    let r = k / P.width;
    $dst2[P.o_dst2 + D[P.o_d + r] * P.width + k - r * P.width] = $src2[P.o_src2 + k];
  }`, [{ name: "D", type: "u32" }]);

/** rows of `width` floats stored as f16 (rounded to nearest even, as the reference's encodeKVRow), two halves a word, rows `words` words apart */
export const SCATTER_ROWS_F16 = elementwise("scatterRowsF16", [{ name: "dst", write: true, words: true }, { name: "src", write: false }], [["width", "u32"], ["words", "u32"], ["o_d", "u32"]],
  `  let r = i / P.words;
  let w = i - r * P.words;
  let c = P.o_src + r * P.width + 2u * w;
  var hi = 0u;
  if (2u * w + 1u < P.width) { hi = f16_bits($src[c + 1u]); }
  $dst[P.o_dst + D[P.o_d + r] * P.words + w] = f16_bits($src[c]) | (hi << 16u);`, [{ name: "D", type: "u32" }]);

export const GATHER_ROWS = elementwise("gatherRows", [{ name: "dst", write: true, words: true }, { name: "src", write: false, words: true }], [["width", "u32"], ["o_d", "u32"]],
  `  let r = i / P.width;\n  let j = i - r * P.width;\n  $dst[P.o_dst + i] = $src[P.o_src + D[P.o_d + r] * P.width + j];`, [{ name: "D", type: "u32" }]);

export const COPY_2D = elementwise("copy2d", [{ name: "dst", write: true, words: true }, { name: "src", write: false, words: true }], [["width", "u32"], ["dstStride", "u32"], ["srcStride", "u32"]],
  `  let r = i / P.width;\n  let j = i - r * P.width;\n  $dst[P.o_dst + r * P.dstStride + j] = $src[P.o_src + r * P.srcStride + j];`);

/**
 * one rotated pair of array `x`: element k of head h of token t, at o (the head's start), with the
 * token's angles in D; y0 and y1 the rotated values at a and b. `words`: x is bound as u32 words
 */
const ropePair = (x: string, words = false): string => {
  const load = (i: string) => (words ? `bitcast<f32>(${x}[${i}])` : `${x}[${i}]`);
  const store = (v: string) => (words ? `bitcast<u32>(${v})` : v);
  return `  var a = o + 2u * k;
  var b = a + 1u;
  if (P.neox != 0u) { a = o + k; b = a + P.half; }
  let c = bitcast<f32>(D[P.o_d + t * P.ropeDim + 2u * k]);
  let s = bitcast<f32>(D[P.o_d + t * P.ropeDim + 2u * k + 1u]);
  let x0 = ${load("a")};
  let x1 = ${load("b")};
  let y0 = x0 * c - x1 * s;
  let y1 = x0 * s + x1 * c;
  ${x}[a] = ${store("y0")};
  ${x}[b] = ${store("y1")};`;
};

/** pair j of an array of `heads` heads a token at `base`: its element k, token t, and o, the head's start */
const ropeHead = (j: string, heads: string, base: string): string => `  let k = ${j} % P.half;
  let th = ${j} / P.half;
  let h = th % ${heads};
  let t = th / ${heads};
  let o = ${base} + (t * ${heads} + h) * P.headDim;`;

export const ROPE = elementwise("rope", [{ name: "x", write: true }], [["half", "u32"], ["nHeads", "u32"], ["headDim", "u32"], ["ropeDim", "u32"], ["neox", "u32"], ["o_d", "u32"]],
  `${ropeHead("i", "P.nHeads", "P.o_x")}
${ropePair("$x")}`, [{ name: "D", type: "u32" }]);

/**
 * RoPE of two arrays at the same positions in one dispatch (a layer's queries, then its keys: the
 * backend's fusion of two rope calls): the first n1 pairs are x's, the rest x2's
 */
export const ROPE_TWO = elementwise("rope2", [{ name: "x", write: true }, { name: "x2", write: true }], [["half", "u32"], ["nHeads", "u32"], ["headDim", "u32"], ["ropeDim", "u32"], ["neox", "u32"], ["o_d", "u32"], ["n1", "u32"], ["nHeads2", "u32"]],
  `  let second = i >= P.n1;
  var j = i;
  var heads = P.nHeads;
  var base = P.o_x;
  if (second) { j = i - P.n1; heads = P.nHeads2; base = P.o_x2; }
${ropeHead("j", "heads", "base")}
  if (second) {
${ropePair("$x2").replace(/^/gm, "  ")}
    return;
  }
${ropePair("$x")}`, [{ name: "D", type: "u32" }]);

/**
 * ROPE_TWO, then the rotated keys and the values written to their cache rows (f32 caches, the
 * whole head rotated): a layer's rope(q), rope(k), scatterRows(keys), scatterRows(values) as one
 * dispatch (the backend's fusion). Invocations [0, n1) rotate x's pairs, [n1, n1 + n2) x2's, each
 * also storing its pair in dst's row D[rowsAt + t] for x2's token t; the rest copy src2's rows of
 * `width` words to dst2 through the same rows. Words throughout: the copies move bits.
 */
export const ROPE_SCATTER = elementwise("rope2Scatter2",
  [{ name: "x", write: true, words: true }, { name: "x2", write: true, words: true }, { name: "dst", write: true, words: true }, { name: "dst2", write: true, words: true }, { name: "src2", write: false, words: true }],
  [["half", "u32"], ["nHeads", "u32"], ["headDim", "u32"], ["ropeDim", "u32"], ["neox", "u32"], ["o_d", "u32"], ["n1", "u32"], ["nHeads2", "u32"], ["n2", "u32"], ["width", "u32"], ["rowsAt", "u32"]],
  `  if (i < P.n1 + P.n2) {
    let second = i >= P.n1;
    var j = i;
    var heads = P.nHeads;
    var base = P.o_x;
    if (second) { j = i - P.n1; heads = P.nHeads2; base = P.o_x2; }
${ropeHead("j", "heads", "base").replace(/^/gm, "  ")}
    if (second) {
${ropePair("$x2", true).replace(/^/gm, "    ")}
      let row = P.o_dst + D[P.o_d + P.rowsAt + t] * P.width;
      $dst[row + a - base - t * P.width] = bitcast<u32>(y0);
      $dst[row + b - base - t * P.width] = bitcast<u32>(y1);
      return;
    }
${ropePair("$x", true).replace(/^/gm, "  ")}
    return;
  }
  let e = i - P.n1 - P.n2;
  let r = e / P.width;
  $dst2[P.o_dst2 + D[P.o_d + P.rowsAt + r] * P.width + e - r * P.width] = $src2[P.o_src2 + e];`, [{ name: "D", type: "u32" }]);

// ---- norms: one workgroup of 256 per row ----

const normHelpers = (subgroups: boolean): string => `
var<workgroup> red: array<f32, 256>;
${workgroupReduction("block_sum", "a + b", 256, subgroups ? "subgroupAdd" : null)}`;

/**
 * `withAdd`: the residual add before the norm in the same dispatch (x += y, then out = norm(x)),
 * the backend's fusion of add and rmsNorm; each invocation adds the very elements it then sums and
 * scales, so the bits are those of the two kernels one after the other
 */
const rmsNormDef = (subgroups: boolean, withAdd = false, quant: "" | "Q8_0" | "Q8_K" = ""): KernelDef => ({
  name: `${withAdd ? "addRmsNorm" : "rmsNorm"}${quant}${subgroups ? "-subgroups" : ""}`,
  subgroups,
  workgroupSize: 256,
  arrays: withAdd ? [{ name: "out", write: true }, { name: "x", write: true }, { name: "y", write: false }] : [{ name: "out", write: true }, { name: "x", write: false }],
  extras: quant ? [{ name: "NW", type: "f32" }, { name: "XQ", type: "u32", write: true }] : [{ name: "NW", type: "f32" }],
  params: quant ? [["width", "u32"], ["eps", "f32"], ["hasWeight", "u32"], ["nqw", "u32"]] : [["width", "u32"], ["eps", "f32"], ["hasWeight", "u32"]],
  helpers: normHelpers(subgroups),
  body: `  let base = P.o_x + wgi * P.width;
  let ob = P.o_out + wgi * P.width;
  var s = 0.0;
  for (var i = lid; i < P.width; i += 256u) {
${withAdd ? "    let v = $x[base + i] + $y[P.o_y + wgi * P.width + i];\n    $x[base + i] = v;" : "    let v = $x[base + i];"}
    s += v * v;
  }
  let scale = div_rn(1.0, sqrt_rn(div_rn(block_sum(s, lid), f32(P.width)) + P.eps));
  for (var i = lid; i < P.width; i += 256u) {
    var v = $x[base + i] * scale;
    if (P.hasWeight != 0u) { v = v * NW[i]; }
    $out[ob + i] = v;
  }${quant === "Q8_0" ? `
  // the row just written, quantized for the matmul that reads it (its width a whole number of blocks)
  storageBarrier();
  for (var b = lid; b < P.width / 32u; b += 256u) ${q8Block("$out", "ob + b * 32u", "wgi * (P.width / 32u) + b", false)}` : ""}${quant === "Q8_K" ? `
  storageBarrier();
  for (var b = lid; b < P.width / 256u; b += 256u) ${q8KBlock("$out", "ob + b * 256u", "wgi * (P.width / 256u) + b")}` : ""}`,
});

const layerNormDef = (subgroups: boolean): KernelDef => ({
  name: `layerNorm${subgroups ? "-subgroups" : ""}`,
  subgroups,
  workgroupSize: 256,
  arrays: [{ name: "out", write: true }, { name: "x", write: false }],
  extras: [{ name: "NW", type: "f32" }, { name: "NB", type: "f32" }],
  params: [["width", "u32"], ["eps", "f32"]],
  helpers: normHelpers(subgroups),
  body: `  let base = P.o_x + wgi * P.width;
  let ob = P.o_out + wgi * P.width;
  var s = 0.0;
  for (var i = lid; i < P.width; i += 256u) { s += $x[base + i]; }
  let mean = div_rn(block_sum(s, lid), f32(P.width));
  var s2 = 0.0;
  for (var i = lid; i < P.width; i += 256u) { let d = $x[base + i] - mean; s2 += d * d; }
  let scale = div_rn(1.0, sqrt_rn(div_rn(block_sum(s2, lid), f32(P.width)) + P.eps));
  for (var i = lid; i < P.width; i += 256u) {
    $out[ob + i] = ($x[base + i] - mean) * scale * NW[i] + NB[i];
  }`,
});

/** the norm kernels, with subgroup sums or without */
export const NORMS = {
  rms: { plain: rmsNormDef(false), subgroups: rmsNormDef(true) },
  addRms: { plain: rmsNormDef(false, true), subgroups: rmsNormDef(true, true) },
  rmsQ8_0: { plain: rmsNormDef(false, false, "Q8_0"), subgroups: rmsNormDef(true, false, "Q8_0") },
  addRmsQ8_0: { plain: rmsNormDef(false, true, "Q8_0"), subgroups: rmsNormDef(true, true, "Q8_0") },
  rmsQ8_K: { plain: rmsNormDef(false, false, "Q8_K"), subgroups: rmsNormDef(true, false, "Q8_K") },
  addRmsQ8_K: { plain: rmsNormDef(false, true, "Q8_K"), subgroups: rmsNormDef(true, true, "Q8_K") },
  layer: { plain: layerNormDef(false), subgroups: layerNormDef(true) },
} as const;

// ---- attention: one workgroup of 64 per (query token, head), or per (query token, head, key range) ----

/** the parameters both attention kernels read, in this order (the split kernel adds its own after them) */
const ATTENTION_PARAMS: readonly (readonly [string, ParamType])[] = [
  ["nHeads", "u32"], ["group", "u32"], ["headDim", "u32"], ["qStride", "u32"], ["kStride", "u32"], ["vStride", "u32"], ["outStride", "u32"],
  ["causal", "u32"], ["n", "u32"], ["useRows", "u32"], ["o_d", "u32"], ["nAll", "u32"], ["scale", "f32"],
];

/**
 * WGSL: `name(x, lid)`, the reduction of one f32 per invocation over a workgroup of `size` with
 * the expression `op` of a and b, through `red`: a tree in workgroup memory, or with subgroups the
 * subgroup operation `subgroupOp` first and then the subgroups' results (64 / subgroup size of
 * them, laid out by local index as the matmul's reduction takes them) — log2(size) barriers
 * become two. Every invocation gets the result.
 */
function workgroupReduction(name: string, op: string, size: number, subgroupOp: string | null): string {
  if (subgroupOp) return `fn ${name}(x: f32, lid: u32) -> f32 {
  let v = ${subgroupOp}(x);
  if (sg_id == 0u) { red[lid / sg_size] = v; }
  workgroupBarrier();
  var r = red[0];
  for (var i = 1u; i < (${size}u + sg_size - 1u) / sg_size; i++) {
    let a = r;
    let b = red[i];
    r = ${op};
  }
  workgroupBarrier();
  return r;
}`;
  return `fn ${name}(x: f32, lid: u32) -> f32 {
  red[lid] = x;
  workgroupBarrier();
  for (var st = ${size / 2}u; st > 0u; st = st >> 1u) {
    if (lid < st) {
      let a = red[lid];
      let b = red[lid + st];
      red[lid] = ${op};
    }
    workgroupBarrier();
  }
  let r = red[0];
  workgroupBarrier();
  return r;
}`;
}

/** WGSL: a key's cache row (paged or not), and the keys query token t sees (causal: those up to its own position) */
const KV_ROWS = /* wgsl */ `
fn kv_row(j: u32) -> u32 {
  if (P.useRows != 0u) { return D[P.o_d + j]; }
  return j;
}
fn key_limit(t: u32) -> u32 {
  if (P.causal != 0u) { return P.n + t + 1u; }
  return P.n;
}`;

/** how the cache holds K and V: f32 rows, or f16 (two halves a word); "f16" when either side is f16 */
/** the storage of a cache side: f32 or f16 elements, or q8_0 / q4_0 blocks of 32 (reference/kv-encoding.ts) */
export type KVSide = "f32" | "f16" | "q8_0" | "q4_0";

/**
 * WGSL: element c of key (value) row j — `k_at(j, c)`, `v_at(j, c)` — and query element i, `q_at(i)`.
 * Rows are P.kStride (P.vStride) apart: elements for f32 and f16, bytes for the block formats.
 * Any cache but f32/f32 is read as llama.cpp's flash attention reads it (reference/kv-attention.ts):
 * an f32 side rounded to f16 (llama.cpp casts it), f16 keys meet a query rounded to f16, and block
 * keys one already rotated and quantized to q8_0 by QUERY_Q8_0 (their vec_dot type); elements are
 * dequantized on the fly; the arithmetic stays f32 (the reference also rounds an f16 value
 * accumulator at every key).
 */
function kvAccess(k: KVSide, v: KVSide): string {
  const plain = k === "f32" && v === "f32";
  const side = (name: string, type: KVSide): string => {
    const at = `kv_row(j) * P.${name}Stride + c`;
    const byte = `fn ${name}_byte(i: u32) -> u32 { return ($${name}[i >> 2u] >> ((i & 3u) << 3u)) & 0xffu; }`;
    const blockAt = (bytes: number, q: string): string => `${byte}
fn ${name}_at(j: u32, c: u32) -> f32 {
  let o = 4u * P.o_${name} + kv_row(j) * P.${name}Stride + (c >> 5u) * ${bytes}u;
  let w = c & 31u;
  return f16_val(${name}_byte(o) | (${name}_byte(o + 1u) << 8u)) * f32(${q});
}`;
    switch (type) {
      case "f16": return `fn ${name}_at(j: u32, c: u32) -> f32 {
  let i = ${at};
  return f16_val(($${name}[P.o_${name} + (i >> 1u)] >> ((i & 1u) << 4u)) & 0xffffu);
}`;
      case "q8_0": return blockAt(34, `(i32(${name}_byte(o + 2u + w)) << 24u) >> 24u`);
      case "q4_0": return blockAt(18, `i32((${name}_byte(o + 2u + (w & 15u)) >> ((w >> 4u) << 2u)) & 15u) - 8`);
      case "f32": return `fn ${name}_at(j: u32, c: u32) -> f32 { return ${plain ? `$${name}[P.o_${name} + ${at}]` : `f16_round($${name}[P.o_${name} + ${at}])`}; }`;
    }
  };
  const halfQuery = k === "f16" || (k === "f32" && !plain);
  return `${side("k", k)}
${side("v", v)}
fn q_at(i: u32) -> f32 { return ${halfQuery ? "f16_round($q[i])" : "$q[i]"}; }`;
}

/** the attention kernels' K/V arrays: `words` for all but an f32 side */
function kvArrays(k: KVSide, v: KVSide): KernelDef["arrays"] {
  return [{ name: "k", write: false, words: k !== "f32" }, { name: "v", write: false, words: v !== "f32" }];
}

/** workgroup reductions, KV_ROWS, K/V access and a key's scaled score, shared by the single-pass and split attention kernels */
const attentionHelpers = (k: KVSide, v: KVSide, subgroups: boolean): string => /* wgsl */ `
var<workgroup> red: array<f32, 64>;
${workgroupReduction("red_max", "max(a, b)", 64, subgroups ? "subgroupMax" : null)}
${workgroupReduction("red_sum", "a + b", 64, subgroups ? "subgroupAdd" : null)}
${KV_ROWS}
${kvAccess(k, v)}
fn score(qo: u32, kvo: u32, j: u32) -> f32 {
  var s = 0.0;
  for (var e = 0u; e < P.headDim; e++) { s += q_at(qo + e) * k_at(j, kvo + e); }
  return s * P.scale;
}
`;

/** WGSL: item `item` = token * nHeads + head: its head, token, key count (causal: the keys up to the token), q and K/V column offsets */
function attentionItem(item: string): string {
  return `  let h = ${item} % P.nHeads;
  let t = ${item} / P.nHeads;
  let nKeys = key_limit(t);
  let qo = P.o_q + t * P.qStride + h * P.headDim;
  let kvo = (h / P.group) * P.headDim;
  let so = ${item} * P.nAll;`;
}

/** WGSL: keys [j0, j1) of the item: scores into S, then their max `m`, S[j] = exp(s_j - m) and the sum `l` (m stays -FLT_MAX and l 0 for no key) */
function attentionSoftmax(j0: string, j1: string): string {
  return `  var mx = -3.4028234663852886e38;
  for (var j = ${j0} + lid; j < ${j1}; j += 64u) {
    let s = score(qo, kvo, j);
    S[so + j] = s;
    mx = max(mx, s);
  }
  let m = red_max(mx, lid);
  var sum = 0.0;
  for (var j = ${j0} + lid; j < ${j1}; j += 64u) {
    let p = expf_ggml(S[so + j] - m);
    S[so + j] = p;
    sum += p;
  }
  // the weighted sum below reads S written by other invocations
  storageBarrier();
  let l = red_sum(sum, lid);`;
}

/**
 * With P.quant set, an attention kernel also quantizes the head it wrote (headDim a multiple of 32)
 * to Q8_0 for the matmul that reads the output next (the backend's fusion): XQ's block b holds
 * out[xqBase + 32 b ..], as QUANT_Q8_0 over that matmul's input would. The same q8Block code, so
 * the same bits.
 */
const QUANTIZED_OUTPUT_PARAMS: readonly (readonly [string, ParamType])[] = [["quant", "u32"], ["nqw", "u32"], ["xqBase", "u32"]];
const QUANTIZED_OUTPUT = `  if (P.quant != 0u) {
    // the head's values, written by the whole workgroup, read back by one invocation per block
    storageBarrier();
    if (lid < P.headDim / 32u) {
      let base = oo + lid * 32u;
      ${q8Block("$out", "base", "(base - P.xqBase) / 32u", false)}
    }
  }`;

const attentionDef = (k: KVSide, v: KVSide, subgroups: boolean): KernelDef => ({
  name: `attention-${k}-${v}${subgroups ? "-subgroups" : ""}`,
  subgroups,
  workgroupSize: 64,
  arrays: [{ name: "out", write: true }, { name: "q", write: false }, ...kvArrays(k, v)],
  extras: [{ name: "D", type: "u32" }, { name: "S", type: "f32", write: true }, { name: "XQ", type: "u32", write: true }],
  params: [...ATTENTION_PARAMS, ...QUANTIZED_OUTPUT_PARAMS],
  helpers: attentionHelpers(k, v, subgroups),
  body: `${attentionItem("wgi")}
${attentionSoftmax("0u", "nKeys")}
  let inv = div_rn(1.0, l);
  let oo = P.o_out + t * P.outStride + h * P.headDim;
  for (var d = lid; d < P.headDim; d += 64u) {
    var acc = 0.0;
    for (var j = 0u; j < nKeys; j++) {
      acc += S[so + j] * v_at(j, kvo + d);
    }
    $out[oo + d] = acc * inv;
  }
${QUANTIZED_OUTPUT}`,
});

/**
 * Split over keys ("flash decoding"): one workgroup per (item, split), wgi = item * nSplit + split;
 * split s takes the keys [s * perSplit, (s + 1) * perSplit) of its item, clipped to its nKeys (a
 * split past a causal query's last key has none). It writes to PT, per (item, split), headDim + 2
 * floats: its max m_s, its sum l_s = sum exp(s_j - m_s) and o_s[d] = sum exp(s_j - m_s) v_j[d]
 * (not normalised); ATTENTION_COMBINE rescales and adds them. The weighted sum runs over 16
 * consecutive dimensions (neighbouring invocations read neighbouring floats of a V row) times 4
 * interleaved subsets of the keys, whose partial sums are added through workgroup memory.
 */
const attentionSplitDef = (k: KVSide, v: KVSide, subgroups: boolean): KernelDef => ({
  name: `attentionSplit-${k}-${v}${subgroups ? "-subgroups" : ""}`,
  subgroups,
  workgroupSize: 64,
  arrays: [{ name: "q", write: false }, ...kvArrays(k, v)],
  extras: [{ name: "D", type: "u32" }, { name: "S", type: "f32", write: true }, { name: "PT", type: "f32", write: true }],
  params: [...ATTENTION_PARAMS, ["nSplit", "u32"], ["perSplit", "u32"]],
  helpers: attentionHelpers(k, v, subgroups),
  body: `  let item = wgi / P.nSplit;
${attentionItem("item")}
  let j0 = min((wgi % P.nSplit) * P.perSplit, nKeys);
  let j1 = min(j0 + P.perSplit, nKeys);
${attentionSoftmax("j0", "j1")}
  let po = wgi * (P.headDim + 2u);
  let dl = lid % 16u;
  let kg = lid / 16u;
  for (var d0 = 0u; d0 < P.headDim; d0 += 16u) {
    let d = d0 + dl;
    var acc = 0.0;
    if (d < P.headDim) {
      for (var j = j0 + kg; j < j1; j += 4u) {
        acc += S[so + j] * v_at(j, kvo + d);
      }
    }
    red[lid] = acc;
    workgroupBarrier();
    if (kg == 0u && d < P.headDim) { PT[po + 2u + d] = red[lid] + red[lid + 16u] + red[lid + 32u] + red[lid + 48u]; }
    workgroupBarrier();
  }
  if (lid == 0u) {
    PT[po] = m;
    PT[po + 1u] = l;
  }`,
});

/**
 * One workgroup of 64 per item: m = max m_s, out[d] = sum o_s[d] exp(m_s - m) / sum l_s exp(m_s - m)
 * over the item's splits. A split without keys (l_s = 0) is skipped, so its m_s = -FLT_MAX never
 * enters an exp; every item has at least one key, so some split has l_s >= 1.
 */
export const ATTENTION_COMBINE: KernelDef = {
  name: "attentionCombine",
  workgroupSize: 64,
  arrays: [{ name: "out", write: true }],
  extras: [{ name: "PT", type: "f32" }, { name: "XQ", type: "u32", write: true }],
  params: [["nHeads", "u32"], ["headDim", "u32"], ["outStride", "u32"], ["nSplit", "u32"], ...QUANTIZED_OUTPUT_PARAMS],
  body: `  let h = wgi % P.nHeads;
  let t = wgi / P.nHeads;
  let w = P.headDim + 2u;
  let pb = wgi * P.nSplit * w;
  var m = -3.4028234663852886e38;
  for (var s = 0u; s < P.nSplit; s++) {
    if (PT[pb + s * w + 1u] > 0.0) { m = max(m, PT[pb + s * w]); }
  }
  var l = 0.0;
  for (var s = 0u; s < P.nSplit; s++) {
    let ls = PT[pb + s * w + 1u];
    if (ls > 0.0) { l += ls * expf_ggml(PT[pb + s * w] - m); }
  }
  let inv = div_rn(1.0, l);
  let oo = P.o_out + t * P.outStride + h * P.headDim;
  for (var d = lid; d < P.headDim; d += 64u) {
    var acc = 0.0;
    for (var s = 0u; s < P.nSplit; s++) {
      if (PT[pb + s * w + 1u] > 0.0) { acc += PT[pb + s * w + 2u + d] * expf_ggml(PT[pb + s * w] - m); }
    }
    $out[oo + d] = acc * inv;
  }
${QUANTIZED_OUTPUT}`,
};

/** query tokens per workgroup of the tiled attention kernel; each gets TILE_LANES invocations */
export const TILE_QUERIES = 8;
const TILE_LANES = 8;
/** the largest head size the tiled kernel takes: a lane holds headDim / TILE_LANES accumulators */
export const TILE_MAX_HEAD_DIM = 128;
/** floats of one K (or V) tile in workgroup memory: TILE_KEYS(headDim) keys of headDim floats */
const TILE_FLOATS = 1024;
/** keys per tile of the tiled attention kernel for a head size (16 up to head size 64, 8 at 128) */
export function tileKeys(headDim: number): number {
  return Math.min(16, Math.floor(TILE_FLOATS / headDim));
}

/**
 * Tiled ("flash") attention for prompts: one workgroup of 64 per (tile of TILE_QUERIES query
 * tokens, head), wgi = tile * nHeads + head. The tile's queries sit in workgroup memory; the keys
 * go by tiles of nTile (tileKeys) rows of K and V loaded into workgroup memory once for all
 * the tile's queries; each tile's scores (8 x nTile) are computed by the whole workgroup, then
 * each query's 8 lanes fold them into an online softmax (running max, sum and weighted values,
 * rescaled when the max grows; ggml's expf) over the lane's dimensions e, e + 8, ... No scores
 * buffer: memory does not grow with context x context, and each K/V row is read once per tile of
 * queries instead of once per query. P.n as in ATTENTION: keys before the first query (causal)
 * or all the keys (bidirectional); nTok = the dispatch's query tokens.
 */
const attentionTiledDef = (k: KVSide, v: KVSide): KernelDef => ({
  name: `attentionTiled-${k}-${v}`,
  workgroupSize: 64,
  arrays: [{ name: "out", write: true }, { name: "q", write: false }, ...kvArrays(k, v)],
  extras: [{ name: "D", type: "u32" }],
  params: [...ATTENTION_PARAMS, ["nTok", "u32"], ["nTile", "u32"]],
  helpers: /* wgsl */ `
var<workgroup> Qs: array<f32, ${TILE_QUERIES * TILE_MAX_HEAD_DIM}>;
var<workgroup> Ks: array<f32, ${TILE_FLOATS}>;
var<workgroup> Vs: array<f32, ${TILE_FLOATS}>;
var<workgroup> Ss: array<f32, ${TILE_QUERIES * 16}>;
${KV_ROWS}
${kvAccess(k, v)}`,
  body: `  let h = wgi % P.nHeads;
  let t0 = (wgi / P.nHeads) * ${TILE_QUERIES}u;
  let hd = P.headDim;
  let kvo = (h / P.group) * hd;
  let qi = lid / ${TILE_LANES}u;
  let e = lid % ${TILE_LANES}u;
  let t = t0 + qi;
  let last = min(t0 + ${TILE_QUERIES}u, P.nTok) - 1u;
  // the keys the tile's last query sees: every tile of them is loaded (the same bound for all
  // invocations, as the barriers need)
  let keysEnd = key_limit(last);
  let mine = select(0u, key_limit(t), t < P.nTok);
  for (var i = lid; i < ${TILE_QUERIES}u * hd; i += 64u) {
    let tq = t0 + i / hd;
    var x = 0.0;
    if (tq < P.nTok) { x = q_at(P.o_q + tq * P.qStride + h * hd + i % hd); }
    Qs[i] = x;
  }
  var acc: array<f32, ${TILE_MAX_HEAD_DIM / TILE_LANES}>;
  var m = -3.4028234663852886e38;
  var l = 0.0;
  let nt = P.nTile;
  for (var j0 = 0u; j0 < keysEnd; j0 += nt) {
    let n = min(nt, keysEnd - j0);
    for (var i = lid; i < n * hd; i += 64u) {
      Ks[i] = k_at(j0 + i / hd, kvo + i % hd);
      Vs[i] = v_at(j0 + i / hd, kvo + i % hd);
    }
    workgroupBarrier();
    // the tile's scores, 8 x n of them, shared out over the workgroup
    for (var pi = lid; pi < ${TILE_QUERIES}u * nt; pi += 64u) {
      let sq = pi / nt;
      let sk = pi % nt;
      var s = -3.4028234663852886e38;
      if (sk < n && t0 + sq < P.nTok && j0 + sk < key_limit(t0 + sq)) {
        var dot = 0.0;
        for (var d = 0u; d < hd; d++) { dot += Qs[sq * hd + d] * Ks[sk * hd + d]; }
        s = dot * P.scale;
      }
      Ss[sq * 16u + sk] = s;
    }
    workgroupBarrier();
    // this query's online softmax over the tile's keys it sees
    let seen = min(n, select(0u, mine - j0, mine > j0));
    if (seen > 0u) {
      var tm = m;
      for (var sk = 0u; sk < seen; sk++) { tm = max(tm, Ss[qi * 16u + sk]); }
      let c = expf_ggml(m - tm);
      l = l * c;
      for (var i = 0u; i < ${TILE_MAX_HEAD_DIM / TILE_LANES}u; i++) { acc[i] = acc[i] * c; }
      for (var sk = 0u; sk < seen; sk++) {
        let p = expf_ggml(Ss[qi * 16u + sk] - tm);
        l += p;
        for (var i = 0u; i < ${TILE_MAX_HEAD_DIM / TILE_LANES}u; i++) {
          let d = e + i * ${TILE_LANES}u;
          if (d < hd) { acc[i] += p * Vs[sk * hd + d]; }
        }
      }
      m = tm;
    }
    workgroupBarrier();
  }
  if (t < P.nTok) {
    let inv = div_rn(1.0, l);
    let oo = P.o_out + t * P.outStride + h * hd;
    for (var i = 0u; i < ${TILE_MAX_HEAD_DIM / TILE_LANES}u; i++) {
      let d = e + i * ${TILE_LANES}u;
      if (d < hd) { $out[oo + d] = acc[i] * inv; }
    }
  }`,
});

const attentionDefs = new Map<string, KernelDef>();
/** an attention kernel for a cache layout, built once: the single-pass, split or tiled kernel (the first two reduce with subgroup operations when `subgroups`) */
export function attentionKernel(kind: "single" | "split" | "tiled", k: KVSide, v: KVSide, subgroups = false): KernelDef {
  const key = `${kind}-${k}-${v}${subgroups && kind !== "tiled" ? "-subgroups" : ""}`;
  let def = attentionDefs.get(key);
  if (!def) {
    def = kind === "single" ? attentionDef(k, v, subgroups) : kind === "split" ? attentionSplitDef(k, v, subgroups) : attentionTiledDef(k, v);
    attentionDefs.set(key, def);
  }
  return def;
}

// ---- the block-format KV cache (q8_0 / q4_0) ----

/** the longest Hadamard chunk the kernels rotate (a private array of floats per invocation) */
export const MAX_ROTATION = 256;

/** WGSL: hx, and ggml's orthonormal Walsh-Hadamard transform of hx[0, n) in f32 steps (kernels/ops/hadamard.ts): scaled by 1 / sqrtf(n), then the butterflies */
const HADAMARD = /* wgsl */ `
var<private> hx: array<f32, ${MAX_ROTATION}>;
fn fwht(n: u32) {
  let s = div_rn(1.0, sqrt_rn(f32(n)));
  for (var i = 0u; i < n; i++) { hx[i] = hx[i] * s; }
  for (var len = 1u; len < n; len = len << 1u) {
    for (var i = 0u; i < n; i += 2u * len) {
      for (var j = 0u; j < len; j++) {
        let u = hx[i + j];
        let v = hx[i + len + j];
        hx[i + j] = u + v;
        hx[i + len + j] = u - v;
      }
    }
  }
}
/** the largest |hx[b + j]| of a block of 32, and the element that has it (the first of equals) */
fn block_max(b: u32) -> vec2<f32> {
  var amax = 0.0;
  var mx = 0.0;
  for (var j = 0u; j < 32u; j++) {
    if (amax < abs(hx[b + j])) { amax = abs(hx[b + j]); mx = hx[b + j]; }
  }
  return vec2<f32>(amax, mx);
}`;

/** WGSL: rows of P.headDim from `$name` at float offset `from`, chunk by chunk into hx (rotated when P.rot > 0), `each` run per block of 32 at hx[b] */
function chunksOf(name: string, from: string, length: string, each: string): string {
  return `  let chunk = select(32u, P.rot, P.rot > 0u);
  for (var c0 = 0u; c0 < ${length}; c0 += chunk) {
    for (var e = 0u; e < chunk; e++) { hx[e] = $${name}[${from} + c0 + e]; }
    if (P.rot > 0u) { fwht(chunk); }
    for (var b = 0u; b < chunk; b += 32u) {
${each}
    }
  }`;
}

/**
 * The queries of a block-format key cache: each head rotated as the keys were (P.rot > 0), then
 * quantized to q8_0 as the reference converts a query to its keys' vec_dot type (the activation
 * quantizer: 127 / amax, ties to even) and written back dequantized, d q, for the attention
 * kernels' f32 dot. One invocation per head of a token.
 */
export const QUERY_Q8_0: KernelDef = {
  name: "queryQ8_0",
  workgroupSize: 64,
  arrays: [{ name: "out", write: true }, { name: "q", write: false }],
  extras: [],
  params: [["n", "u32"], ["headDim", "u32"], ["rot", "u32"]],
  helpers: HADAMARD,
  body: `  let i = wgi * 64u + lid;
  if (i >= P.n) { return; }
  let o = i * P.headDim;
${chunksOf("q", "P.o_q + o", "P.headDim", `      let am = block_max(b).x;
      let d = f16_round(div_rn(am, 127.0));
      var id = 0.0;
      if (am != 0.0) { id = div_rn(127.0, am); }
      for (var j = 0u; j < 32u; j++) { $out[P.o_out + o + c0 + b + j] = d * round(hx[b + j] * id); }`)}`,
};

/** the attention output turned back (values stored rotated): every chunk of P.rot floats of x through the transform, one invocation per chunk */
export const ROTATE_CHUNKS: KernelDef = {
  name: "rotateChunks",
  workgroupSize: 64,
  arrays: [{ name: "x", write: true }],
  extras: [],
  params: [["n", "u32"], ["rot", "u32"]],
  helpers: HADAMARD,
  body: `  let i = wgi * 64u + lid;
  if (i >= P.n) { return; }
  let o = P.o_x + i * P.rot;
  for (var e = 0u; e < P.rot; e++) { hx[e] = $x[o + e]; }
  fwht(P.rot);
  for (var e = 0u; e < P.rot; e++) { $x[o + e] = hx[e]; }`,
};

/**
 * K/V rows stored as q8_0 or q4_0 blocks (reference/kv-encoding.ts's encodeKVRow: each head
 * rotated in chunks of P.rot first where P.rot > 0, then q8_0 by the activation quantizer, q4_0 by
 * quantize_row_q4_0_ref). One invocation per row (blocks of 34 or 18 bytes straddle words, so a
 * row's bytes are assembled and stored by one invocation), into row D[i] of P.rowBytes.
 */
function scatterBlocksDef(type: "q8_0" | "q4_0"): KernelDef {
  const q8 = `      let am = block_max(b).x;
      let d = div_rn(am, 127.0);
      var id = 0.0;
      if (am != 0.0) { id = div_rn(127.0, am); }
      emit_half(d);
      for (var j = 0u; j < 32u; j++) { emit(u32(i32(round(hx[b + j] * id))) & 0xffu); }`;
  const q4 = `      let d = div_rn(block_max(b).y, -8.0);
      var id = 0.0;
      if (d != 0.0) { id = div_rn(1.0, d); }
      emit_half(d);
      for (var j = 0u; j < 16u; j++) {
        // (int8_t)(x * id + 8.5f): truncation toward zero, then at most 15
        let x0 = min(15, i32(hx[b + j] * id + 8.5));
        let x1 = min(15, i32(hx[b + 16u + j] * id + 8.5));
        emit(u32(x0) | (u32(x1) << 4u));
      }`;
  return {
    name: `scatterRows-${type}`,
    workgroupSize: 64,
    arrays: [{ name: "dst", write: true, words: true }, { name: "src", write: false }],
    extras: [{ name: "D", type: "u32" }],
    params: [["n", "u32"], ["width", "u32"], ["rowBytes", "u32"], ["rot", "u32"], ["o_d", "u32"]],
    helpers: `${HADAMARD}
var<private> word: u32;
var<private> emitted: u32;
var<private> wordAt: u32;
/** appends a byte to the row: every fourth completes a word, stored */
fn emit(b: u32) {
  word = word | (b << ((emitted & 3u) << 3u));
  emitted = emitted + 1u;
  if ((emitted & 3u) == 0u) {
    $dst[wordAt] = word;
    wordAt = wordAt + 1u;
    word = 0u;
  }
}
fn emit_half(x: f32) {
  let h = f16_bits(x);
  emit(h & 0xffu);
  emit(h >> 8u);
}`,
    body: `  let i = wgi * 64u + lid;
  if (i >= P.n) { return; }
  wordAt = P.o_dst + D[P.o_d + i] * (P.rowBytes >> 2u);
  word = 0u;
  emitted = 0u;
${chunksOf("src", `P.o_src + i * P.width`, "P.width", type === "q8_0" ? q8 : q4)}
  if ((emitted & 3u) != 0u) { $dst[wordAt] = word; }`,
  };
}

export const SCATTER_ROWS_Q8_0 = scatterBlocksDef("q8_0");
export const SCATTER_ROWS_Q4_0 = scatterBlocksDef("q4_0");

// ---- matmul ----
//
// First the activations are converted to the weight's vec_dot type, as the reference backend does
// (kernels/reference/vec-dot.ts): Q8_0 for Q8_0/Q4_0/Q5_0 weights, Q8_1 for Q4_1/Q5_1, Q8_K for
// the k-quants, f16 values for F16, bf16 for BF16, nothing for F32. XQ (u32 words) holds the int8
// values packed four to a word, then each block's scale (f32 bits; Q8_1: scale and sum). Then one workgroup of 64 per (output row, tile of up to 8 tokens): the row
// is cut into units of 32 weights, invocation `lid` takes units lid, lid + 64, ... (neighbouring
// invocations read neighbouring blocks), decodes each unit once into registers and takes its dot
// product with every token of the tile (integer sums inside a unit, scaled in f32); the 64 partial
// sums of each token are added in a tree, then the epilogue.

/**
 * Q8_0 / Q8_1 activations (the reference's activation quantizers): one invocation per block of 32
 * (d = amax / 127 rounded to f16, q = x * (127 / amax) ties to even); Q8_1 also keeps
 * s = d * sum(q) rounded to f16, its two scales side by side
 */
const quantQ8Blocks = (name: string, withSum: boolean): KernelDef => ({
  name,
  workgroupSize: 64,
  arrays: [{ name: "x", write: false }],
  extras: [{ name: "XQ", type: "u32", write: true }],
  params: [["nBlocks", "u32"], ["nqw", "u32"]],
  body: `  let b = wgi * 64u + lid;
  if (b >= P.nBlocks) { return; }
  ${q8Block("$x", "P.o_x + b * 32u", "b", withSum)}`,
});

export const QUANT_Q8_0 = quantQ8Blocks("quantQ8_0", false);
export const QUANT_Q8_1 = quantQ8Blocks("quantQ8_1", true);

/** Q8_K activations (quantize_row_q8_K_ref): one invocation per super-block of 256, scale 1 / (-127 / the value of largest magnitude) */
export const QUANT_Q8_K: KernelDef = {
  name: "quantQ8_K",
  workgroupSize: 64,
  arrays: [{ name: "x", write: false }],
  extras: [{ name: "XQ", type: "u32", write: true }],
  params: [["nBlocks", "u32"], ["nqw", "u32"]],
  body: `  let b = wgi * 64u + lid;
  if (b >= P.nBlocks) { return; }
  ${q8KBlock("$x", "P.o_x + b * 256u", "b")}`,
};

/** F16 activations: x rounded to f16 (kept as f32 bits) */
export const QUANT_F16: KernelDef = elementwise("quantF16", [{ name: "x", write: false }], [],
  `  XQ[i] = bitcast<u32>(f16_round($x[P.o_x + i]));`, [{ name: "XQ", type: "u32", write: true }]);

/** BF16 activations: x rounded to bf16 as ggml does (ties to even, NaN kept quiet), kept as f32 bits */
export const QUANT_BF16: KernelDef = elementwise("quantBF16", [{ name: "x", write: false }], [],
  `  let u = bitcast<u32>($x[P.o_x + i]);
  if ((u & 0x7fffffffu) > 0x7f800000u) { XQ[i] = ((u >> 16u) | 64u) << 16u; } else { XQ[i] = ((u + 0x7fffu + ((u >> 16u) & 1u)) >> 16u) << 16u; }`,
  [{ name: "XQ", type: "u32", write: true }]);

const MATMUL_HELPERS = /* wgsl */ `
var<workgroup> red: array<f32, 512>;
fn wb(i: u32) -> u32 { return (W[i >> 2u] >> ((i & 3u) << 3u)) & 0xffu; }
fn wi8(i: u32) -> i32 { return (i32(wb(i)) << 24u) >> 24u; }
fn wh(i: u32) -> f32 { return f16_val(wb(i) | (wb(i + 1u) << 8u)); }
/** the 4 bytes at byte offset o, any alignment */
fn w32(o: u32) -> u32 {
  let i = o >> 2u;
  let s = (o & 3u) << 3u;
  if (s == 0u) { return W[i]; }
  return (W[i] >> s) | (W[i + 1u] << (32u - s));
}
fn s8x4(w: u32) -> vec4<i32> {
  let v = bitcast<i32>(w);
  return vec4<i32>(extractBits(v, 0u, 8u), extractBits(v, 8u, 8u), extractBits(v, 16u, 8u), extractBits(v, 24u, 8u));
}
/** the bits (w >> s) & m of each of w's four bytes: nibbles (m = 15), 2-bit fields (3), single bits (1) */
fn field4(w: u32, s: u32, m: u32) -> vec4<i32> {
  return vec4<i32>(i32((w >> s) & m), i32((w >> (8u + s)) & m), i32((w >> (16u + s)) & m), i32((w >> (24u + s)) & m));
}
/** bits s .. s + 3 of h, one per lane (Q5_0 / Q5_1's fifth bits) */
fn bit4(h: u32, s: u32) -> vec4<i32> {
  return vec4<i32>(i32((h >> s) & 1u), i32((h >> (s + 1u)) & 1u), i32((h >> (s + 2u)) & 1u), i32((h >> (s + 3u)) & 1u));
}
fn wbf(i: u32) -> f32 { return bitcast<f32>((wb(i) | (wb(i + 1u) << 8u)) << 16u); }
/** IQ4_NL's grid (ggml's kvalues_iq4nl) at four nibbles */
var<private> IQ4_VALUES: array<i32, 16> = array<i32, 16>(${KVALUES_IQ4NL.join(", ")});
fn iq4(n: vec4<i32>) -> vec4<i32> { return vec4<i32>(IQ4_VALUES[n.x], IQ4_VALUES[n.y], IQ4_VALUES[n.z], IQ4_VALUES[n.w]); }
/** MXFP4's E2M1 values, doubled (ggml's kvalues_mxfp4), at four nibbles */
var<private> MXFP4_VALUES: array<i32, 16> = array<i32, 16>(${iqGrid.KVALUES_MXFP4.join(", ")});
fn mxfp4(n: vec4<i32>) -> vec4<i32> { return vec4<i32>(MXFP4_VALUES[n.x], MXFP4_VALUES[n.y], MXFP4_VALUES[n.z], MXFP4_VALUES[n.w]); }
/** trit n (0..4) of each of w's four TQ1_0 bytes, less 1: ((u8)(byte * 3^n) * 3) >> 8 */
fn trits4(w: u32, n: u32) -> vec4<i32> {
  var p = 1u;
  for (var i = 0u; i < n; i++) { p = p * 3u; }
  let b = vec4<u32>(w & 255u, (w >> 8u) & 255u, (w >> 16u) & 255u, w >> 24u);
  return vec4<i32>((((b * p) & vec4<u32>(255u)) * 3u) >> vec4<u32>(8u)) - vec4<i32>(1);
}
/** ggml's ksigns_iq2xs: 7 sign bits and their parity as the 8th */
fn ksigns(v: u32) -> u32 { return v | ((countOneBits(v) & 1u) << 7u); }
/** four unsigned grid bytes (one u32 of a grid) with sign bits s (bit i: byte i negative) */
fn signed4(g: u32, s: u32) -> vec4<i32> { return field4(g, 0u, 255u) * (vec4<i32>(1) - 2 * bit4(s, 0u)); }
fn xscale(i: u32) -> f32 { return bitcast<f32>(XQ[i]); }
fn scale_min_k4(j: u32, o: u32) -> vec2<i32> {
  if (j < 4u) { return vec2<i32>(i32(wb(o + j) & 63u), i32(wb(o + j + 4u) & 63u)); }
  let sc = (wb(o + j + 4u) & 15u) | ((wb(o + j - 4u) >> 6u) << 4u);
  let m = (wb(o + j + 4u) >> 4u) | ((wb(o + j) >> 6u) << 4u);
  return vec2<i32>(i32(sc), i32(m));
}
/** Q3_K's 6-bit scale j (0..15) of the 12 bytes at o, less 32 */
fn scale_q3k(j: u32, o: u32) -> i32 {
  var low = wb(o + j) & 15u;
  if (j >= 8u) { low = wb(o + j - 8u) >> 4u; }
  let high = (wb(o + 8u + (j & 3u)) >> (2u * (j >> 2u))) & 3u;
  return i32(low | (high << 4u)) - 32;
}
`;

interface MatmulCode {
  /** decodes unit u of row r into registers (wv: 8 x vec4<i32>, or wf: 32 f32) */
  readonly decode: string;
  /**
   * adds token t's dot product with the unit to acc[tt]; a quantized unit reads token t's int8
   * activations of unit u as words x_word(x_words(t, u) + k), k < 8, which each kernel defines
   * (ONE_ROW_X: XQ itself; the tiled kernel: its copy in workgroup memory), so both kernels run
   * the same WGSL for a unit's value
   */
  readonly dot: string;
}

/** the one-row kernel's x_words / x_word: token t's unit u straight from XQ */
const ONE_ROW_X = /* wgsl */ `
fn x_words(t: u32, u: u32) -> u32 { return (t * P.cols) / 4u + 8u * u; }
fn x_word(i: u32) -> u32 { return XQ[i]; }`;

/**
 * rounded(v): v, a product the dots add to another. WGSL lets a compiler fuse a multiply and an
 * add (fma, one rounding), and where it does depends on the code around (lavapipe fused Q4_K's
 * d sc s - dmin m bs one way in the one-row kernel and the other way in the tiled one: 997 of
 * 1400 outputs differed). The kernels that must agree bit for bit (the ordered one-row kernel and
 * the tiled one) pass such products through an xor with P.zero (always 0, which the compiler
 * cannot know), so each is rounded on its own; the strided one-row kernel keeps the compiler's choice.
 */
const ROUNDED = (fixed: boolean): string => fixed
  ? "\nfn rounded(v: f32) -> f32 { return bitcast<f32>(bitcast<u32>(v) ^ P.zero); }"
  : "\nfn rounded(v: f32) -> f32 { return v; }";

const INT_DOT = `var s = 0;
      for (var k = 0u; k < 8u; k++) { s += dot(wv[k], s8x4(x_word(xw + k))); }`;

/** a unit's dot with f16-rounded (F16) or bf16-rounded (BF16) activations, kept as f32 bits in XQ */
const ROUNDED_FLOAT_DOT = `let xo = t * P.cols + c0;
      var s = 0.0;
      for (var i = 0u; i < cnt; i++) { s += wf[i] * bitcast<f32>(XQ[xo + i]); }
      acc[tt] += s;`;

/** a 32-weight block against Q8_0 activations: d_w d_x sum(q_w q_x) */
const Q8_0_DOT = `let xw = x_words(t, u);
      ${INT_DOT}
      acc[tt] += f32(s) * (dw * xscale(P.nqw + t * (P.cols / 32u) + u));`;

/** a 32-weight block with a min against Q8_1 activations: d_w d_x sum(q_w q_x) + m_w s_x */
const Q8_1_DOT = `let xw = x_words(t, u);
      ${INT_DOT}
      let xs = P.nqw + 2u * (t * (P.cols / 32u) + u);
      acc[tt] += rounded(dw * xscale(xs) * f32(s)) + rounded(mw * xscale(xs + 1u));`;

/** a sub-block of 32 with a 6-bit scale and min (Q4_K, Q5_K) against Q8_K: d_x (d_w sc sum(q_w q_x) - dmin_w m sum(q_x)) */
const SCALE_MIN_DOT = `let xw = x_words(t, u);
      var s = 0;
      var bs = 0;
      for (var k = 0u; k < 8u; k++) {
        let xv = s8x4(x_word(xw + k));
        s += dot(wv[k], xv);
        bs += xv.x + xv.y + xv.z + xv.w;
      }
      let dx = xscale(P.nqw + t * (P.cols / 256u) + b);
      acc[tt] += rounded(dw * dx * f32(sm.x * s)) - rounded(dmin * dx * f32(sm.y * bs));`;

/** two groups of 16 with their own scales sc0, sc1 (Q3_K, Q6_K) against Q8_K: d_w d_x (sc0 s0 + sc1 s1) */
const TWO_SCALES_DOT = `let xw = x_words(t, u);
      var s0 = 0;
      var s1 = 0;
      for (var k = 0u; k < 4u; k++) { s0 += dot(wv[k], s8x4(x_word(xw + k))); }
      for (var k = 4u; k < 8u; k++) { s1 += dot(wv[k], s8x4(x_word(xw + k))); }
      acc[tt] += dw * xscale(P.nqw + t * (P.cols / 256u) + b) * f32(sc0 * s0 + sc1 * s1);`;

/**
 * a 32-weight block of `bytes` whose 16 nibble bytes at `qs` hold weights i (low nibble) and
 * i + 16 (high), each with a fifth bit (bit i of the 32-bit word at `qh`) where there is one, less `bias`
 */
function nibbleBlock(bytes: number, scales: string, qs: number, qh: number | null, bias: number, dot: string): MatmulCode {
  const fifth = (bit: string): string => (qh === null ? "" : ` + 16 * bit4(qh, ${bit})`);
  const less = bias === 0 ? "" : ` - vec4<i32>(${bias})`;
  return {
    decode: `let bo = r * P.rowBytes + u * ${bytes}u;
    ${scales}${qh === null ? "" : `\n    let qh = w32(bo + ${qh}u);`}
    ${nibbles(`bo + ${qs}u`, (n, bit) => `${n}${fifth(bit)}${less}`)}`,
    dot,
  };
}

/** WGSL: wv from the 16 nibble bytes at `at` (byte i: weights i and i + 16), each nibble vector n (weights from `bit`) through `weight` */
function nibbles(at: string, weight: (n: string, bit: string) => string): string {
  return `for (var k = 0u; k < 4u; k++) {
      let w = w32(${at} + 4u * k);
      wv[k] = ${weight("field4(w, 0u, 15u)", "4u * k")};
      wv[k + 4u] = ${weight("field4(w, 4u, 15u)", "16u + 4u * k")};
    }`;
}

/** IQ4_NL / IQ4_XS: a nibble indexes the non-linear grid */
const IQ4_GRID = (n: string): string => `iq4(${n})`;

/** a unit's dot with Q8_K activations, the unit's integer sum times dw, d_x and `factor` (an integer scale) */
const superBlockDot = (factor = ""): string => `let xw = x_words(t, u);
      ${INT_DOT}
      acc[tt] += dw * xscale(P.nqw + t * (P.cols / 256u) + b) * f32(${factor ? `${factor} * s` : "s"});`;

/**
 * A grid i-quant's unit: sub-block ib (= j) of a super-block, 4 groups of 8 weights l = 0..3, each
 * from `entry(l)` (WGSL setting wv[2l] and wv[2l + 1]); its two 16-weight scales sc0 and sc1 and
 * the super-block's factor dw as tensor/quant/iq-grid.ts decodes them (weight = dw * sc * value);
 * the grid is the storage buffer G (MATMUL_GRIDS), uploaded once
 */
function gridUnit(bytes: number, setup: string, entry: string, dw: string): MatmulCode {
  return {
    decode: `${superBlockUnit(bytes)}
    let ib = j;
    ${setup}
    for (var l = 0u; l < 4u; l++) {
      ${entry}
    }
    let dw = ${dw};`,
    dot: TWO_SCALES_DOT,
  };
}

/** two 8-byte grid entries' words for index g with sign byte s (IQ2 grids: entry g at words 2g, 2g + 1) */
const GRID8 = (g: string, s: string): string => `let gi = ${g};
      let sg = ${s};
      wv[2u * l] = signed4(G[2u * gi], sg & 15u);
      wv[2u * l + 1u] = signed4(G[2u * gi + 1u], sg >> 4u);`;

/** two 4-byte grid entries a and b with sign byte s (IQ3 grids: entry g at word g) */
const GRID4 = (a: string, b: string, s: string): string => `let sg = ${s};
      wv[2u * l] = signed4(G[${a}], sg & 15u);
      wv[2u * l + 1u] = signed4(G[${b}], sg >> 4u);`;

/** IQ1's 8 weights 8 grid + delta (iq1s_grid: int8 -1, 0, 1; entry g at words 2g, 2g + 1) */
const GRID1 = (g: string, delta: string): string => `let gi = ${g};
      let dl = vec4<i32>(${delta});
      wv[2u * l] = 8 * s8x4(G[2u * gi]) + dl;
      wv[2u * l + 1u] = 8 * s8x4(G[2u * gi + 1u]) + dl;`;

/** the super-block b of a k-quant unit u (the super-block's weights 32 j .. 32 j + 31) and where b starts */
const superBlockUnit = (bytes: number): string => `let b = u / 8u;
    let j = u % 8u;
    let bo = r * P.rowBytes + b * ${bytes}u;`;

/**
 * Q4_K / Q5_K: sub-block j is the low (j even) or high nibbles of the 32 bytes of chunk j / 2 at
 * `qs`, with scale/min pair j; Q5_K's fifth bits are bit j of the 32 bytes at `qh`
 */
function scaleMinSubBlock(bytes: number, qs: number, qh: number | null): MatmulCode {
  const fifth = qh === null ? "" : ` + 16 * field4(w32(bo + ${qh}u + 4u * k), j, 1u)`;
  return {
    decode: `${superBlockUnit(bytes)}
    let q = bo + ${qs}u + 32u * (j >> 1u);
    let sh = (j & 1u) * 4u;
    for (var k = 0u; k < 8u; k++) { wv[k] = field4(w32(q + 4u * k), sh, 15u)${fifth}; }
    let sm = scale_min_k4(j, bo + 4u);
    let dw = wh(bo);
    let dmin = wh(bo + 2u);`,
    dot: SCALE_MIN_DOT,
  };
}

/** the f16 scale d and min m at the front of a Q4_1 / Q5_1 block */
const SCALE_AND_MIN = "let dw = wh(bo);\n    let mw = wh(bo + 2u);";

const MATMUL_CODE: Readonly<Record<string, MatmulCode>> = {
  F32: {
    decode: `let c0 = u * 32u;
    let cnt = min(32u, P.cols - c0);
    for (var i = 0u; i < cnt; i++) { wf[i] = bitcast<f32>(W[r * P.cols + c0 + i]); }`,
    dot: `let xo = P.o_x + t * P.cols + c0;
      var s = 0.0;
      for (var i = 0u; i < cnt; i++) { s += wf[i] * $x[xo + i]; }
      acc[tt] += s;`,
  },
  F16: {
    decode: `let c0 = u * 32u;
    let cnt = min(32u, P.cols - c0);
    for (var i = 0u; i < cnt; i++) { wf[i] = wh(r * P.rowBytes + 2u * (c0 + i)); }`,
    dot: ROUNDED_FLOAT_DOT,
  },
  BF16: {
    decode: `let c0 = u * 32u;
    let cnt = min(32u, P.cols - c0);
    for (var i = 0u; i < cnt; i++) { wf[i] = wbf(r * P.rowBytes + 2u * (c0 + i)); }`,
    dot: ROUNDED_FLOAT_DOT,
  },
  Q8_0: {
    decode: `let bo = r * P.rowBytes + u * 34u;
    let dw = wh(bo);
    for (var k = 0u; k < 8u; k++) { wv[k] = s8x4(w32(bo + 2u + 4u * k)); }`,
    dot: Q8_0_DOT,
  },
  Q4_0: nibbleBlock(18, "let dw = wh(bo);", 2, null, 8, Q8_0_DOT),
  Q4_1: nibbleBlock(20, SCALE_AND_MIN, 4, null, 0, Q8_1_DOT),
  Q5_0: nibbleBlock(22, "let dw = wh(bo);", 6, 2, 16, Q8_0_DOT),
  Q5_1: nibbleBlock(24, SCALE_AND_MIN, 8, 4, 0, Q8_1_DOT),
  IQ4_NL: {
    decode: `let bo = r * P.rowBytes + u * 18u;
    let dw = wh(bo);
    ${nibbles("bo + 2u", IQ4_GRID)}`,
    dot: Q8_0_DOT,
  },
  // IQ4_XS: sub-block j's 16 bytes at 8 + 16 j, its 6-bit scale (less 32) from the low nibbles at 4 and the 2-bit highs at 2
  IQ4_XS: {
    decode: `${superBlockUnit(136)}
    ${nibbles("bo + 8u + 16u * j", IQ4_GRID)}
    let sh = wb(bo + 2u) | (wb(bo + 3u) << 8u);
    let ls = i32(((wb(bo + 4u + (j >> 1u)) >> (4u * (j & 1u))) & 15u) | (((sh >> (2u * j)) & 3u) << 4u)) - 32;
    let dw = wh(bo);`,
    dot: `let xw = x_words(t, u);
      ${INT_DOT}
      acc[tt] += dw * xscale(P.nqw + t * (P.cols / 256u) + b) * f32(ls * s);`,
  },
  // MXFP4: an E8M0 exponent e, then Q4_0's nibble layout of doubled E2M1 values; d_w d_x is
  // d_x 2^(e - 128), one ldexp (exact where d_w alone, 2^-128 or 2^-127, would be subnormal)
  MXFP4: {
    decode: `let bo = r * P.rowBytes + u * 17u;
    let ew = i32(wb(bo)) - 128;
    ${nibbles("bo + 1u", (n) => `mxfp4(${n})`)}`,
    dot: `let xw = x_words(t, u);
      ${INT_DOT}
      acc[tt] += f32(s) * ldexp(xscale(P.nqw + t * (P.cols / 32u) + u), ew);`,
  },
  // TQ2_0: as Q2_K's bits (weight 128 h + 32 l + i is bits 2 l of byte 32 h + i), value less 1, f16 d at 64
  TQ2_0: {
    decode: `${superBlockUnit(66)}
    let q = bo + 32u * (j >> 2u);
    let sh = 2u * (j & 3u);
    for (var k = 0u; k < 8u; k++) { wv[k] = field4(w32(q + 4u * k), sh, 3u) - vec4<i32>(1); }
    let dw = wh(bo + 64u);`,
    dot: superBlockDot(),
  },
  // TQ1_0: weights 0..159 are trit n of bytes 0..31 (unit n), 160..239 trit n of bytes 32..47 (16
  // weights a trit: units 5, 6 and the first half of 7), 240..255 trit n of bytes 48..51 (4 a trit)
  TQ1_0: {
    decode: `${superBlockUnit(54)}
    for (var k = 0u; k < 8u; k++) {
      var at = bo + 4u * k;
      var n = j;
      if (j >= 5u) {
        at = bo + 32u + 4u * (k & 3u);
        n = 2u * (j - 5u) + (k >> 2u);
        if (j == 7u && k >= 4u) {
          at = bo + 48u;
          n = k - 4u;
        }
      }
      wv[k] = trits4(w32(at), n);
    }
    let dw = wh(bo + 52u);`,
    dot: superBlockDot(),
  },
  IQ2_XXS: gridUnit(66, `let aux = w32(bo + 6u + 8u * ib);
    let sc0 = i32(2u * (aux >> 28u) + 1u);
    let sc1 = sc0;`, GRID8("wb(bo + 2u + 8u * ib + l)", "ksigns((aux >> (7u * l)) & 127u)"), "wh(bo) * 0.125"),
  IQ2_XS: gridUnit(74, `let scb = wb(bo + 66u + ib);
    let sc0 = i32(2u * (scb & 15u) + 1u);
    let sc1 = i32(2u * (scb >> 4u) + 1u);`, `let qv = wb(bo + 2u + 8u * ib + 2u * l) | (wb(bo + 3u + 8u * ib + 2u * l) << 8u);
      ${GRID8("qv & 511u", "ksigns(qv >> 9u)")}`, "wh(bo) * 0.125"),
  IQ2_S: gridUnit(82, `let scb = wb(bo + 74u + ib);
    let sc0 = i32(2u * (scb & 15u) + 1u);
    let sc1 = i32(2u * (scb >> 4u) + 1u);
    let qh = wb(bo + 66u + ib);`, GRID8("wb(bo + 2u + 4u * ib + l) | ((qh << (8u - 2u * l)) & 0x300u)", "wb(bo + 34u + 4u * ib + l)"), "wh(bo) * 0.125"),
  IQ3_XXS: gridUnit(98, `let aux = w32(bo + 66u + 4u * ib);
    let sc0 = i32(2u * (aux >> 28u) + 1u);
    let sc1 = sc0;
    let qs = bo + 2u + 8u * ib;`, GRID4("wb(qs + 2u * l)", "wb(qs + 2u * l + 1u)", "ksigns((aux >> (7u * l)) & 127u)"), "wh(bo) * 0.25"),
  IQ3_S: gridUnit(110, `let scb = wb(bo + 106u + (ib >> 1u));
    let sc0 = i32(1u + 2u * ((scb >> (4u * (ib & 1u))) & 15u));
    let sc1 = sc0;
    let qh = wb(bo + 66u + ib);
    let qs = bo + 2u + 8u * ib;`, GRID4("wb(qs + 2u * l) | ((qh << (8u - 2u * l)) & 256u)", "wb(qs + 2u * l + 1u) | ((qh << (7u - 2u * l)) & 256u)", "wb(bo + 74u + 4u * ib + l)"), "wh(bo)"),
  IQ1_S: gridUnit(50, `let qh = wb(bo + 34u + 2u * ib) | (wb(bo + 35u + 2u * ib) << 8u);
    let sc0 = i32(2u * ((qh >> 12u) & 7u) + 1u);
    let sc1 = sc0;
    let delta = select(1, -1, (qh & 0x8000u) != 0u);`, GRID1("wb(bo + 2u + 4u * ib + l) | (((qh >> (3u * l)) & 7u) << 8u)", "delta"), "wh(bo) * 0.125"),
  // IQ1_M: the f16 super-block scale in the top nibbles of the four u16 scale words at 48
  IQ1_M: gridUnit(56, `let scw = wb(bo + 48u + 2u * (ib >> 1u)) | (wb(bo + 49u + 2u * (ib >> 1u)) << 8u);
    let shift = 6u * (ib & 1u);
    let sc0 = i32(2u * ((scw >> shift) & 7u) + 1u);
    let sc1 = i32(2u * ((scw >> (shift + 3u)) & 7u) + 1u);`, `let hq = wb(bo + 32u + 2u * ib + (l >> 1u));
      ${GRID1("wb(bo + 4u * ib + l) | ((hq << (8u - 4u * (l & 1u))) & 0x700u)", "select(1, -1, ((hq >> (3u + 4u * (l & 1u))) & 1u) != 0u)")}`,
  `f16_val((wb(bo + 49u) >> 4u) | (wb(bo + 51u) & 0xf0u) | ((wb(bo + 53u) & 0xf0u) << 4u) | ((wb(bo + 55u) & 0xf0u) << 8u)) * 0.125`),
  // Q2_K: weight 128 h + 32 s + i (i < 32) is bits 2 s of byte 32 h + i; group 2 j + i / 16's scale (low nibble) and min (high)
  Q2_K: {
    decode: `${superBlockUnit(84)}
    let q = bo + 16u + 32u * (j >> 2u);
    let sh = 2u * (j & 3u);
    for (var k = 0u; k < 8u; k++) { wv[k] = field4(w32(q + 4u * k), sh, 3u); }
    let g0 = wb(bo + 2u * j);
    let g1 = wb(bo + 2u * j + 1u);
    let dw = wh(bo + 80u);
    let dmin = wh(bo + 82u);`,
    dot: `let xw = x_words(t, u);
      var s0 = 0;
      var s1 = 0;
      var bs0 = 0;
      var bs1 = 0;
      for (var k = 0u; k < 8u; k++) {
        let xv = s8x4(x_word(xw + k));
        let p = dot(wv[k], xv);
        let xs = xv.x + xv.y + xv.z + xv.w;
        if (k < 4u) { s0 += p; bs0 += xs; } else { s1 += p; bs1 += xs; }
      }
      let dx = xscale(P.nqw + t * (P.cols / 256u) + b);
      acc[tt] += rounded(dw * dx * f32(i32(g0 & 15u) * s0 + i32(g1 & 15u) * s1)) - rounded(dmin * dx * f32(i32(g0 >> 4u) * bs0 + i32(g1 >> 4u) * bs1));`,
  },
  // Q3_K: as Q2_K's low bits (at byte 32 + 32 h + i), less 4 where bit 4 h + s of hmask byte i is clear
  Q3_K: {
    decode: `${superBlockUnit(110)}
    let q = bo + 32u + 32u * (j >> 2u);
    let sh = 2u * (j & 3u);
    let hbit = 4u * (j >> 2u) + (j & 3u);
    for (var k = 0u; k < 8u; k++) { wv[k] = field4(w32(q + 4u * k), sh, 3u) + 4 * field4(w32(bo + 4u * k), hbit, 1u) - vec4<i32>(4); }
    let sc0 = scale_q3k(2u * j, bo + 96u);
    let sc1 = scale_q3k(2u * j + 1u, bo + 96u);
    let dw = wh(bo + 108u);`,
    dot: TWO_SCALES_DOT,
  },
  Q4_K: scaleMinSubBlock(144, 16, null),
  Q5_K: scaleMinSubBlock(176, 48, 16),
  // Q6_K: unit j = 4h + k4 of a super-block: half h, quarter k4 (the weights l + 32 k4 of that half, l < 32), scales 2 k4 and 2 k4 + 1
  Q6_K: {
    decode: `${superBlockUnit(210)}
    let h = j / 4u;
    let k4 = j % 4u;
    let ql = bo + 64u * h + 32u * (k4 & 1u);
    let qh = bo + 128u + 32u * h;
    let nsh = 4u * (k4 >> 1u);
    let hsh = 2u * k4;
    for (var k = 0u; k < 8u; k++) { wv[k] = field4(w32(ql + 4u * k), nsh, 15u) + 16 * field4(w32(qh + 4u * k), hsh, 3u) - vec4<i32>(32); }
    let sc0 = wi8(bo + 192u + 8u * h + 2u * k4);
    let sc1 = wi8(bo + 192u + 8u * h + 2u * k4 + 1u);
    let dw = wh(bo + 208u);`,
    dot: TWO_SCALES_DOT,
  },
};

interface ActivationType {
  /** the quantizer (null: the f32 activations as they are) */
  readonly quant: KernelDef | null;
  /** activations per block */
  readonly block: number;
  /** scale words per block after the packed int8 values (Q8_1: scale and sum) */
  readonly scaleWords: number;
}
const AS_F32: ActivationType = { quant: null, block: 1, scaleWords: 0 };
const AS_F16: ActivationType = { quant: QUANT_F16, block: 1, scaleWords: 0 };
const AS_BF16: ActivationType = { quant: QUANT_BF16, block: 1, scaleWords: 0 };
const AS_Q8_0: ActivationType = { quant: QUANT_Q8_0, block: 32, scaleWords: 1 };
const AS_Q8_1: ActivationType = { quant: QUANT_Q8_1, block: 32, scaleWords: 2 };
const AS_Q8_K: ActivationType = { quant: QUANT_Q8_K, block: 256, scaleWords: 1 };

/** the weight types matmul supports, with the activations' vec_dot type each needs */
export const MATMUL_TYPES: Readonly<Record<string, ActivationType>> = {
  F32: AS_F32, F16: AS_F16, BF16: AS_BF16,
  Q8_0: AS_Q8_0, Q4_0: AS_Q8_0, Q5_0: AS_Q8_0, Q4_1: AS_Q8_1, Q5_1: AS_Q8_1,
  Q2_K: AS_Q8_K, Q3_K: AS_Q8_K, Q4_K: AS_Q8_K, Q5_K: AS_Q8_K, Q6_K: AS_Q8_K,
  IQ4_NL: AS_Q8_0, IQ4_XS: AS_Q8_K,
  MXFP4: AS_Q8_0, TQ1_0: AS_Q8_K, TQ2_0: AS_Q8_K,
  IQ2_XXS: AS_Q8_K, IQ2_XS: AS_Q8_K, IQ2_S: AS_Q8_K, IQ3_XXS: AS_Q8_K, IQ3_S: AS_Q8_K, IQ1_S: AS_Q8_K, IQ1_M: AS_Q8_K,
};

const gridWords = (g: Uint8Array | Int8Array): Uint32Array => new Uint32Array(g.buffer, g.byteOffset, g.byteLength / 4);

/** the grid i-quants' grids as u32 words (little-endian bytes, as tensor/quant/iq-grid.ts holds them): the matmul's storage buffer G */
export const MATMUL_GRIDS: Readonly<Record<string, Uint32Array>> = {
  IQ2_XXS: gridWords(iqGrid.IQ2XXS_GRID), IQ2_XS: gridWords(iqGrid.IQ2XS_GRID), IQ2_S: gridWords(iqGrid.IQ2S_GRID),
  IQ3_XXS: gridWords(iqGrid.IQ3XXS_GRID), IQ3_S: gridWords(iqGrid.IQ3S_GRID), IQ1_S: gridWords(iqGrid.IQ1S_GRID), IQ1_M: gridWords(iqGrid.IQ1S_GRID),
};

/** tokens per workgroup */
export const MATMUL_TILE = 8;

/** the float types' columns summed from zero before the sum of a row is added to (both kernels) */
const FOLD_CHUNK = 32;

const matmulDefs = new Map<string, KernelDef>();

/** the 64 partial sums of each token of the tile added: a tree in workgroup memory */
const TREE_REDUCTION = `  for (var tt = 0u; tt < nt; tt++) { red[tt * 64u + lid] = acc[tt]; }
  workgroupBarrier();
  for (var st = 32u; st > 0u; st = st >> 1u) {
    if (lid < st) {
      for (var tt = 0u; tt < nt; tt++) { red[tt * 64u + lid] += red[tt * 64u + lid + st]; }
    }
    workgroupBarrier();
  }
  let parts = 1u;`;

/** ... or subgroupAdd, then the subgroups' sums (64 / subgroup size of them) from workgroup memory */
const SUBGROUP_REDUCTION = `  for (var tt = 0u; tt < nt; tt++) {
    let v = subgroupAdd(acc[tt]);
    if (sid == 0u) { red[tt * 64u + lid / ssize] = v; }
  }
  workgroupBarrier();
  let parts = (64u + ssize - 1u) / ssize;`;

/** rows and tokens of a tiled matmul's output tile, and the columns of one step through workgroup memory */
export const TILED_MATMUL = { rows: 64, tokens: 64, step: 16 } as const;

/**
 * WGSL body of the float tiled kernel's weight4_at(r, c): the weights at row r, columns c .. c + 3
 * (c a multiple of 4, all four inside the row) as f32 (W holds the rows of this dispatch's block)
 */
const TILED_WEIGHT: Readonly<Record<string, string>> = {
  F32: `let o = r * P.cols + c;
  return vec4<f32>(bitcast<f32>(W[o]), bitcast<f32>(W[o + 1u]), bitcast<f32>(W[o + 2u]), bitcast<f32>(W[o + 3u]));`,
  F16: `let o = r * P.rowBytes + 2u * c;
  let lo = w32(o);
  let hi = w32(o + 4u);
  return vec4<f32>(f16_val(lo & 0xffffu), f16_val(lo >> 16u), f16_val(hi & 0xffffu), f16_val(hi >> 16u));`,
  BF16: `let o = r * P.rowBytes + 2u * c;
  let lo = w32(o);
  let hi = w32(o + 4u);
  return vec4<f32>(bitcast<f32>(lo << 16u), bitcast<f32>(lo & 0xffff0000u), bitcast<f32>(hi << 16u), bitcast<f32>(hi & 0xffff0000u));`,
};

/** the weight types with a tiled matmul kernel: every type (floats through TILED_WEIGHT, the quantized ones through their units) */
export const TILED_MATMUL_TYPES: readonly string[] = Object.keys(MATMUL_TYPES);

/** WGSL body of activation4_at(t, c): token t's activations at columns c .. c + 3 as the weight's vec_dot type holds them */
function tiledActivation(type: string): string {
  if (type === "F32") return `let o = P.o_x + t * P.cols + c;
  return vec4<f32>($x[o], $x[o + 1u], $x[o + 2u], $x[o + 3u]);`;
  // F16 / BF16: rounded, kept as f32 bits
  return `let o = t * P.cols + c;
  return vec4<f32>(bitcast<f32>(XQ[o]), bitcast<f32>(XQ[o + 1u]), bitcast<f32>(XQ[o + 2u]), bitcast<f32>(XQ[o + 3u]));`;
}

/**
 * WGSL: `v`, four columns from c of row (or token) `at` through `load`, zeros past the edges; a
 * row's last 1-3 columns come from the four that end the row, shifted down
 */
const edgeLoad = (v: string, load: string, at: string, inside: string): string => `    var ${v} = vec4<f32>(0.0);
    if (${inside} && c + 3u < P.cols) { ${v} = ${load}(${at}, c); }
    else if (${inside} && c < P.cols) {
      let last = ${load}(${at}, P.cols - 4u);
      for (var q = 0u; q < P.cols - c; q++) { ${v}[q] = last[4u - (P.cols - c) + q]; }
    }`;

const tiledMatmulDefs = new Map<string, KernelDef>();

/**
 * A weight type's matmul against many tokens, tiled: one workgroup of 256 per 64 rows x 64 tokens
 * of the output, a row's result the bits of the one-row kernel in unit order (foldBody), so that a
 * row has the same bits whether its batch has 16 rows or fewer (not the reference's order: within
 * its tolerance). Float weights (F32, F16, BF16): each step loads 16 columns of the tile's weights
 * and activations once into workgroup memory (each weight then serves 64 tokens and each
 * activation 64 rows, where the one-row kernel re-reads a tile's activations for every row), each
 * invocation keeping 4 rows x 4 tokens of sums (rows lr + 16 i, tokens lt + 16 j: neighbours read
 * neighbouring words of workgroup memory); activations as the one-row kernel takes them (F32: x;
 * F16 and BF16: rounded, as f32 bits in XQ); each output's products added from zero in column
 * order per chunk of FOLD_CHUNK columns, the chunks' sums then added in order. Quantized weights:
 * quantizedTiledBody.
 */
export function tiledMatmulDef(type: string): KernelDef {
  const code = MATMUL_CODE[type];
  if (!code || !MATMUL_TYPES[type]) throw new Error(`webgpu backend: no tiled matmul kernel for ${type}`);
  let def = tiledMatmulDefs.get(type);
  if (def) return def;
  const weight = TILED_WEIGHT[type];
  // what both forms share: the output, the activations, the weight's buffers and the matmul's parameters
  const common = {
    name: `matmulTiled-${type}`,
    workgroupSize: 256,
    arrays: [{ name: "out", write: true }, { name: "x", write: false }],
    extras: matmulExtras(type),
    params: MATMUL_PARAMS,
  };
  if (!weight) {
    def = {
      ...common,
      helpers: `${MATMUL_HELPERS}
var<workgroup> TX: array<u32, ${8 * TILED_MATMUL.tokens}>;
fn x_words(t: u32, u: u32) -> u32 { return 8u * (t % ${TILED_MATMUL.tokens}u); }
fn x_word(i: u32) -> u32 { return TX[i]; }${ROUNDED(true)}`,
      body: quantizedTiledBody(code),
    };
    tiledMatmulDefs.set(type, def);
    return def;
  }
  const { rows: R, tokens: T, step: K } = TILED_MATMUL;

  def = {
    ...common,
    helpers: `${MATMUL_HELPERS}
var<workgroup> tileW: array<f32, ${K * R}>;
var<workgroup> tileX: array<f32, ${K * T}>;
fn weight4_at(r: u32, c: u32) -> vec4<f32> {
  ${weight}
}
fn activation4_at(t: u32, c: u32) -> vec4<f32> {
  ${tiledActivation(type)}
}`,
    body: `  let rowTiles = (P.rows + ${R - 1}u) / ${R}u;
  let r0 = (wgi % rowTiles) * ${R}u;
  let t0 = (wgi / rowTiles) * ${T}u;
  let lr = lid % 16u;
  let lt = lid / 16u;
  // what this invocation loads each step: 4 neighbouring columns of one row and of one token
  let li = lid / 4u;
  let lk = (lid % 4u) * 4u;
  var acc: array<array<f32, 4>, 4>;
  var sums: array<array<f32, 4>, 4>;
  for (var c0 = 0u; c0 < P.cols; c0 += ${K}u) {
    // the step's 16 columns of the tile's 64 rows and 64 tokens (zeros past the edges)
    let c = c0 + lk;
    let r = r0 + li;
${edgeLoad("w", "weight4_at", "r", "r < P.rows")}
    let t = t0 + li;
${edgeLoad("a", "activation4_at", "t", "t < P.nTokens")}
    for (var q = 0u; q < 4u; q++) {
      tileW[(lk + q) * ${R}u + li] = w[q];
      tileX[(lk + q) * ${T}u + li] = a[q];
    }
    workgroupBarrier();
    for (var k = 0u; k < ${K}u; k++) {
      var wr: array<f32, 4>;
      for (var i = 0u; i < 4u; i++) { wr[i] = tileW[k * ${R}u + lr + 16u * i]; }
      for (var j = 0u; j < 4u; j++) {
        let a = tileX[k * ${T}u + lt + 16u * j];
        for (var i = 0u; i < 4u; i++) { acc[i][j] += wr[i] * a; }
      }
    }
    // a chunk's ${FOLD_CHUNK} columns done (or the row's last): into the sums, in chunk order
    if ((c0 + ${K}u) % ${FOLD_CHUNK}u == 0u || c0 + ${K}u >= P.cols) {
      for (var i = 0u; i < 4u; i++) {
        for (var j = 0u; j < 4u; j++) { sums[i][j] += acc[i][j]; acc[i][j] = 0.0; }
      }
    }
    workgroupBarrier();
  }
  for (var i = 0u; i < 4u; i++) {
    let r = r0 + lr + 16u * i;
    for (var j = 0u; j < 4u; j++) {
      let t = t0 + lt + 16u * j;
      if (r < P.rows && t < P.nTokens) {
        var v = sums[i][j];
        if (P.hasBias != 0u) { v = v + BIAS[P.rowBase + r]; }
        if (P.gelu != 0u) { v = gelu_erf(v); }
        $out[P.o_out + t * P.outStride + r] = v;
      }
    }
  }`,
  };
  tiledMatmulDefs.set(type, def);
  return def;
}

/**
 * The quantized types' tiled kernel: invocation lid takes row lid % 64 of the tile and 16 of its
 * 64 tokens (lid / 64); unit by unit (32 columns), the workgroup copies the tile's tokens' int8
 * activations of the unit into workgroup memory (TX, 8 words a token), each invocation decodes its
 * row's unit once into registers (the one-row kernel's decode) and takes its value for each of its
 * 16 tokens with the one-row kernel's dot (x_word reading TX), from zero, then adds it to that
 * token's sum: the ordered one-row kernel's arithmetic, unit for unit, so the same bits.
 */
const quantizedTiledBody = (code: MatmulCode): string => `  let rowTiles = (P.rows + ${TILED_MATMUL.rows - 1}u) / ${TILED_MATMUL.rows}u;
  let r = (wgi % rowTiles) * ${TILED_MATMUL.rows}u + lid % ${TILED_MATMUL.rows}u;
  let t0 = (wgi / rowTiles) * ${TILED_MATMUL.tokens}u;
  let tg = t0 + (lid / ${TILED_MATMUL.rows}u) * 16u;
  let nt = min(16u, max(P.nTokens, tg) - tg);
  var wv: array<vec4<i32>, 8>;
  var acc: array<f32, 16>;
  var sums: array<f32, 16>;
  for (var tt = 0u; tt < 16u; tt++) { sums[tt] = 0.0; }
  for (var u = 0u; u < P.units; u++) {
    for (var i = lid; i < ${8 * TILED_MATMUL.tokens}u; i += 256u) {
      let t = t0 + i / 8u;
      var word = 0u;
      if (t < P.nTokens) { word = XQ[(t * P.cols) / 4u + 8u * u + i % 8u]; }
      TX[i] = word;
    }
    workgroupBarrier();
    if (r < P.rows && nt > 0u) {
      ${code.decode}
      for (var tt = 0u; tt < nt; tt++) {
        let t = tg + tt;
        acc[tt] = 0.0;
        ${code.dot}
        // rounded: the value as the one-row kernel stores it, never fused into the sum
        sums[tt] += rounded(acc[tt]);
      }
    }
    workgroupBarrier();
  }
  if (r < P.rows) {
    for (var tt = 0u; tt < nt; tt++) {
      var v = sums[tt];
      if (P.hasBias != 0u) { v = v + BIAS[P.rowBase + r]; }
      if (P.gelu != 0u) { v = gelu_erf(v); }
      $out[P.o_out + (tg + tt) * P.outStride + r] = v;
    }
  }`;

/**
 * The one-row kernel in the tiled kernels' order (the float types always, a quantized type where
 * the backend tiles it): each invocation sums one unit of 32 columns per token from zero (a
 * float chunk of FOLD_CHUNK columns in column order, a quantized unit's integer sum scaled once),
 * 64 units at a time; then invocation t adds token t's 64 in unit order to its running sum. A
 * row's result is then the same bits whichever kernel the batch's row count picks (where a tree
 * or subgroupAdd over strided units would not be).
 */
const foldBody = (code: MatmulCode, float: boolean): string => `  let r = wgi / P.tiles;
  let t0 = (wgi - r * P.tiles) * ${MATMUL_TILE}u;
  let nt = min(${MATMUL_TILE}u, P.nTokens - t0);
  ${float ? "var wf: array<f32, 32>;" : "var wv: array<vec4<i32>, 8>;"}
  var total = 0.0;
  for (var u0 = 0u; u0 < P.units; u0 += 64u) {
    let u = u0 + lid;
    // zeroed each pass by hand: lavapipe kept the last pass's values in this loop-scoped var
    var acc: array<f32, ${MATMUL_TILE}>;
    for (var tt = 0u; tt < nt; tt++) { acc[tt] = 0.0; }
    if (u < P.units) {
      ${code.decode}
      for (var tt = 0u; tt < nt; tt++) {
        let t = t0 + tt;
        ${code.dot}
      }
    }
    for (var tt = 0u; tt < nt; tt++) { red[tt * 64u + lid] = acc[tt]; }
    workgroupBarrier();
    if (lid < nt) {
      let n = min(64u, P.units - u0);
      for (var i = 0u; i < n; i++) { total += red[lid * 64u + i]; }
    }
    workgroupBarrier();
  }
  if (lid < nt) {
    var v = total;
    if (P.hasBias != 0u) { v = v + BIAS[P.rowBase + r]; }
    if (P.gelu != 0u) { v = gelu_erf(v); }
    $out[P.o_out + (t0 + lid) * P.outStride + r] = v;
  }`;

/** the extra bindings of a type's matmul kernels: the grid i-quants' grid G */
const matmulExtras = (type: string): KernelDef["extras"] => [{ name: "W", type: "u32" }, { name: "XQ", type: "u32" }, { name: "BIAS", type: "f32" }, ...(MATMUL_GRIDS[type] ? [{ name: "G", type: "u32" } as const] : [])];

/** the matmul kernels' parameters; `zero` is always 0 (see ROUNDED) */
const MATMUL_PARAMS: KernelDef["params"] = [["rows", "u32"], ["outStride", "u32"], ["rowBase", "u32"], ["cols", "u32"], ["rowBytes", "u32"], ["nqw", "u32"], ["units", "u32"], ["tiles", "u32"], ["nTokens", "u32"], ["hasBias", "u32"], ["gelu", "u32"], ["zero", "u32"]];

/**
 * the one-row matmul kernel for a weight type; `subgroups`: reduce with subgroupAdd (needs the
 * device feature); `ordered`: a quantized type's units folded in order as the float types' always
 * are (foldBody), so that its tiled kernel gives a row the same bits (the backend asks for it where
 * it tiles the type)
 */
export function matmulDef(type: string, subgroups = false, ordered = false): KernelDef {
  const float = MATMUL_TYPES[type]?.block === 1;
  const fold = float || ordered;
  const key = `${type}${fold ? (float ? "" : "-ordered") : subgroups ? "-subgroups" : ""}`;
  let def = matmulDefs.get(key);
  const code = MATMUL_CODE[type];
  if (!def && code) {
    def = {
      name: `matmul-${key}`,
      subgroups: subgroups && !fold,
      workgroupSize: 64,
      arrays: [{ name: "out", write: true }, { name: "x", write: false }],
      extras: matmulExtras(type),
      params: MATMUL_PARAMS,
      helpers: MATMUL_HELPERS + ONE_ROW_X + ROUNDED(fold),
      body: fold ? foldBody(code, float) : `  let r = wgi / P.tiles;
  let t0 = (wgi - r * P.tiles) * ${MATMUL_TILE}u;
  let nt = min(${MATMUL_TILE}u, P.nTokens - t0);
  var acc: array<f32, ${MATMUL_TILE}>;
  var wv: array<vec4<i32>, 8>;
  for (var u = lid; u < P.units; u += 64u) {
    ${code.decode}
    for (var tt = 0u; tt < nt; tt++) {
      let t = t0 + tt;
      ${code.dot}
    }
  }
${subgroups ? SUBGROUP_REDUCTION : TREE_REDUCTION}
  if (lid < nt) {
    var v = red[lid * 64u];
    for (var i = 1u; i < parts; i++) { v += red[lid * 64u + i]; }
    if (P.hasBias != 0u) { v = v + BIAS[P.rowBase + r]; }
    if (P.gelu != 0u) { v = gelu_erf(v); }
    $out[P.o_out + (t0 + lid) * P.outStride + r] = v;
  }`,
    };
    matmulDefs.set(key, def);
  }
  if (!def) throw new Error(`webgpu backend: no matmul kernel for ${type}`);
  return def;
}
