/**
 * A dot product of one weight row (bytes at w[wOffset], `n` values in the weight type) with one
 * activation row already converted to the weight type's vec_dot type (bytes at x[xOffset]).
 */
export type DotKernel = (w: Uint8Array, wOffset: number, x: Uint8Array, xOffset: number, n: number) => number;
