/** x[r, i] += bias[i] for each of `rows` rows */
export function addBias(x: Float32Array, bias: Float32Array, rows: number): void {
  const n = bias.length;
  for (let r = 0; r < rows; r++) for (let i = 0; i < n; i++) x[r * n + i] = x[r * n + i]! + bias[i]!;
}

/** x += y (residual connection) */
export function addInPlace(x: Float32Array, y: Float32Array): void {
  for (let i = 0; i < x.length; i++) x[i] = x[i]! + y[i]!;
}
