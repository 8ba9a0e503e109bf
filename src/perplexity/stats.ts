/** Running mean of per-token values and the standard error of that mean (llama.cpp's formula). */
export class MeanAccumulator {
  sum = 0;
  sum2 = 0;
  count = 0;

  add(v: number): void {
    this.sum += v;
    this.sum2 += v * v;
    this.count++;
  }

  get mean(): number {
    return this.count > 0 ? this.sum / this.count : NaN;
  }

  /**
   * sqrt((E[v^2] - E[v]^2) / (count - 1)): the population variance over count - 1, as
   * llama.cpp's perplexity tool computes it; 0 when it cannot be estimated.
   */
  get standardError(): number {
    if (this.count < 2) return 0;
    const m = this.mean;
    const variance = this.sum2 / this.count - m * m;
    return variance > 0 ? Math.sqrt(variance / (this.count - 1)) : 0;
  }
}
