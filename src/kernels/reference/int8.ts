/** the signed value of byte b (0..255) read as int8 */
export function i8(b: number): number {
  return (b << 24) >> 24;
}
