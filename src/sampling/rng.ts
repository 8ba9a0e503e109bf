/** Anything that yields uniform doubles in [0, 1): the draw step needs nothing more. */
export interface UniformSource {
  nextDouble(): number;
}

const N = 624;
const M = 397;
const UPPER_MASK = 0x80000000;
const LOWER_MASK = 0x7fffffff;
const MATRIX_A = 0x9908b0df;

/**
 * MT19937, the 32-bit Mersenne Twister, seeded like C++ `std::mt19937(seed)`: llama.cpp's
 * dist sampler uses exactly this generator, so a seed means the same stream of numbers here
 * as there (Matsumoto & Nishimura 1998; the C++ standard fixes the 10000th output for the
 * default seed 5489 at 4123659995).
 */
export class Mt19937 implements UniformSource {
  private readonly state = new Uint32Array(N);
  private index = N;

  /** @param seed reduced modulo 2^32 (ToUint32), as C++ converts it to `uint32_t` */
  constructor(seed: number) {
    const mt = this.state;
    mt[0] = seed >>> 0;
    for (let i = 1; i < N; i++) {
      const prev = mt[i - 1]! ^ (mt[i - 1]! >>> 30);
      // Math.imul keeps the 32-bit wrap-around product that the reference computes in uint32
      mt[i] = (Math.imul(1812433253, prev) + i) >>> 0;
    }
  }

  private twist(): void {
    const mt = this.state;
    for (let i = 0; i < N; i++) {
      const y = (mt[i]! & UPPER_MASK) | (mt[(i + 1) % N]! & LOWER_MASK);
      mt[i] = mt[(i + M) % N]! ^ (y >>> 1) ^ (y & 1 ? MATRIX_A : 0);
    }
    this.index = 0;
  }

  /** next tempered output, an integer in [0, 2^32) */
  nextUint32(): number {
    if (this.index >= N) this.twist();
    let y = this.state[this.index++]!;
    y ^= y >>> 11;
    y ^= (y << 7) & 0x9d2c5680;
    y ^= (y << 15) & 0xefc60000;
    y ^= y >>> 18;
    return y >>> 0;
  }

  /**
   * A double in [0, 1) built like libstdc++'s `generate_canonical<double, 53>` (what
   * `uniform_real_distribution<double>(0, 1)` calls): two outputs, the first as the low word,
   * (lo + hi * 2^32) / 2^64, clamped below 1.
   */
  nextDouble(): number {
    const lo = this.nextUint32();
    const hi = this.nextUint32();
    const r = (lo + hi * 4294967296) / 2 ** 64;
    // the rounded sum can reach 2^64 exactly; the largest double below 1 replaces it
    return r >= 1 ? 1 - 2 ** -53 : r;
  }
}

/** a fresh 32-bit seed from the OS entropy source (Web Crypto: Node and browsers), for callers that gave none */
export function randomSeed(): number {
  return globalThis.crypto.getRandomValues(new Uint32Array(1))[0]!;
}
