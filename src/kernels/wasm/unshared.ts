/**
 * The kernels are built (scripts/build-wasm.mjs) to import a shared memory, which a page
 * without cross-origin isolation may not be able to create (Firefox and Safari refuse
 * `shared: true` there; Chromium allows it but not sending it to a worker). One thread needs
 * no sharing: the same build with its memory import's limits flag cleared imports an ordinary
 * memory. The threads proposal lets atomic instructions run on an unshared memory (a notify
 * wakes nobody; only wait traps, which the kernels do only in a test hook on worker threads),
 * so nothing else in the module changes. Rewriting one byte here beats shipping two more builds.
 */

/** reads an unsigned LEB128 at `at`: the value and the offset after it */
function uleb(bytes: Uint8Array, at: number): [number, number] {
  let value = 0;
  for (let shift = 0; shift < 35; shift += 7) {
    if (at >= bytes.length) break;
    const b = bytes[at++]!;
    value += (b & 0x7f) * 2 ** shift;
    if ((b & 0x80) === 0) return [value, at];
  }
  throw new Error("wasm kernels: a LEB128 number runs past its section");
}

/** skips a name (length, then UTF-8 bytes) */
const skipName = (bytes: Uint8Array, at: number): number => {
  const [n, next] = uleb(bytes, at);
  return next + n;
};

/** skips table or memory limits: a flags byte, the minimum, and the maximum when flag bit 0 says there is one */
const skipLimits = (bytes: Uint8Array, at: number): number => {
  const flags = bytes[at]!;
  let next = uleb(bytes, at + 1)[1];
  if (flags & 1) next = uleb(bytes, next)[1];
  return next;
};

/**
 * A copy of a wasm module's bytes whose shared memory import imports an unshared memory
 * instead; throws if the module imports no shared memory.
 */
export function unsharedMemoryImport(module: Uint8Array): Uint8Array {
  const bytes = module.slice();
  if (bytes.length < 8 || bytes[0] !== 0 || bytes[1] !== 0x61 || bytes[2] !== 0x73 || bytes[3] !== 0x6d) throw new Error("wasm kernels: not a WebAssembly module (no \\0asm magic)");
  for (let at = 8; at < bytes.length; ) {
    const id = bytes[at]!;
    const [size, body] = uleb(bytes, at + 1);
    at = body + size;
    if (id !== 2) continue;
    // the import section: count, then (module name, field name, kind, description) each
    let p = body;
    const [count, first] = uleb(bytes, p);
    p = first;
    for (let i = 0; i < count; i++) {
      p = skipName(bytes, skipName(bytes, p));
      const kind = bytes[p++]!;
      if (kind === 0) p = uleb(bytes, p)[1]; // function: type index
      else if (kind === 1) p = skipLimits(bytes, p + 1); // table: element type, limits
      else if (kind === 3) p += 2; // global: value type, mutability
      else if (kind === 4) p = uleb(bytes, p + 1)[1]; // tag: attribute, type index
      else if (kind === 2) {
        // memory limits flags: bit 0 a maximum follows, bit 1 shared (which needs a maximum)
        if ((bytes[p]! & 2) === 0) throw new Error("wasm kernels: the memory import is not shared already");
        bytes[p] = bytes[p]! & ~2;
        return bytes;
      } else throw new Error(`wasm kernels: unknown import kind ${kind}`);
    }
  }
  throw new Error("wasm kernels: the module imports no memory");
}
