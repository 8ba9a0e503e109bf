/**
 * The part of the WebAssembly JS API this backend uses. The project compiles against
 * lib ES2022 + @types/node, neither of which declares WebAssembly (only lib.dom does).
 */
declare namespace WebAssembly {
  interface MemoryDescriptor {
    initial: number;
    maximum?: number;
    shared?: boolean;
  }
  class Memory {
    constructor(descriptor: MemoryDescriptor);
    readonly buffer: ArrayBuffer | SharedArrayBuffer;
    grow(delta: number): number;
    /** a non-shared memory's buffer as a resizable ArrayBuffer that grow() no longer detaches (Chromium 136+); absent in older runtimes */
    toResizableBuffer?(): ArrayBuffer;
  }
  class Module {
    constructor(bytes: BufferSource);
  }
  class Instance {
    constructor(module: Module, importObject?: Record<string, Record<string, unknown>>);
    readonly exports: Record<string, unknown>;
  }
  function validate(bytes: BufferSource): boolean;
}
