/**
 * Small seeded PRNG for test data: sfc32 (32-bit state words, fast in JS) seeded through
 * splitmix32, plus Box-Muller normals. Not for cryptography; only reproducibility matters.
 */
export class Rng {
  private a: number;
  private b: number;
  private c: number;
  private d: number;
  private spare = 0;
  private hasSpare = false;

  constructor(seed: number) {
    // splitmix32 spreads a small integer seed over all four state words
    let s = seed >>> 0;
    const next = () => {
      s = (s + 0x9e3779b9) >>> 0;
      let z = s;
      z = Math.imul(z ^ (z >>> 16), 0x85ebca6b);
      z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35);
      return (z ^ (z >>> 16)) >>> 0;
    };
    this.a = next();
    this.b = next();
    this.c = next();
    this.d = next();
    for (let i = 0; i < 12; i++) this.u32();
  }

  /** uniform 32-bit unsigned integer */
  u32(): number {
    const t = (((this.a + this.b) | 0) + this.d) | 0;
    this.d = (this.d + 1) | 0;
    this.a = this.b ^ (this.b >>> 9);
    this.b = (this.c + (this.c << 3)) | 0;
    this.c = (this.c << 21) | (this.c >>> 11);
    this.c = (this.c + t) | 0;
    return t >>> 0;
  }

  /** uniform in [0, 1) */
  uniform(): number {
    return this.u32() / 4294967296;
  }

  /** standard normal (Box-Muller; the second value of each pair is kept for the next call) */
  normal(): number {
    if (this.hasSpare) {
      this.hasSpare = false;
      return this.spare;
    }
    let u = 0;
    while (u === 0) u = this.uniform(); // log(0) would be -inf
    const r = Math.sqrt(-2 * Math.log(u));
    const theta = 2 * Math.PI * this.uniform();
    this.spare = r * Math.sin(theta);
    this.hasSpare = true;
    return r * Math.cos(theta);
  }

  /** fills `out` with mean + std * N(0, 1) */
  fillNormal(out: Float32Array, std: number, mean = 0): Float32Array {
    for (let i = 0; i < out.length; i++) out[i] = mean + std * this.normal();
    return out;
  }

  /** fills `out` with uniform random bytes */
  fillBytes(out: Uint8Array): Uint8Array {
    let i = 0;
    for (; i + 4 <= out.length; i += 4) {
      const v = this.u32();
      out[i] = v & 0xff;
      out[i + 1] = (v >>> 8) & 0xff;
      out[i + 2] = (v >>> 16) & 0xff;
      out[i + 3] = v >>> 24;
    }
    for (; i < out.length; i++) out[i] = this.u32() & 0xff;
    return out;
  }
}

/** a seed for one named stream derived from a base seed (FNV-1a over the name) */
export function deriveSeed(seed: number, name: string): number {
  let h = 0x811c9dc5 ^ (seed >>> 0);
  for (let i = 0; i < name.length; i++) h = Math.imul(h ^ name.charCodeAt(i), 0x01000193);
  return h >>> 0;
}
