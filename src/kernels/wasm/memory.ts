import type { KernelsMemory } from "./protocol.js";

/**
 * One WebAssembly.Memory of a wasm backend, carved up by a bump allocator. Views handed out
 * stay valid when the memory grows: a shared memory's buffer is never detached, growing only
 * returns a new, longer SharedArrayBuffer over the same bytes; an unshared memory (a page
 * without cross-origin isolation, one thread) is made to behave the same by turning its buffer
 * into a resizable ArrayBuffer, which grow() lengthens in place instead of detaching.
 */
export const PAGE = 65536;
/** wasm32 addresses 4 GiB at most */
export const MAX_PAGES = 65536;
export const MAX_BYTES = MAX_PAGES * PAGE;
const ALIGN = 64;

export class SharedArena {
  readonly memory: WebAssembly.Memory;
  /** bytes this memory may grow to (whole pages, at most 4 GiB) */
  readonly limit: number;
  private top: number;
  /** every SharedArrayBuffer object this memory has shown, to recognise views into it */
  private readonly buffers = new WeakSet<ArrayBufferLike>();

  constructor(initialBytes: number, base: number, limitBytes = MAX_BYTES, kind: KernelsMemory = "shared") {
    const maximum = Math.min(MAX_PAGES, Math.floor(limitBytes / PAGE));
    const initial = Math.ceil(initialBytes / PAGE);
    if (!(maximum >= initial)) throw new Error(`wasm backend: a memory limit of ${limitBytes} bytes is below the ${initial * PAGE} bytes a memory starts with`);
    this.memory = new WebAssembly.Memory({ initial, maximum, shared: kind === "shared" });
    if (kind === "unshared") {
      if (!this.memory.toResizableBuffer) throw new Error("wasm backend: an unshared memory needs WebAssembly.Memory.prototype.toResizableBuffer, which this runtime lacks");
      // from now on memory.buffer is this one resizable buffer, never detached by grow()
      this.memory.toResizableBuffer();
    }
    this.limit = maximum * PAGE;
    this.top = base;
    this.buffers.add(this.memory.buffer);
  }

  /**
   * The current buffer (re-read after every allocation: growing replaces it). V8 also hands out
   * a new buffer object for this memory when *another* shared memory of the process grows (a
   * second backend, or the next memory of this one), so every object seen here is remembered:
   * views made from any of them are recognised by offsetOf (before, such views silently fell
   * back to the reference kernels).
   */
  get buffer(): ArrayBufferLike {
    const b = this.memory.buffer;
    this.buffers.add(b);
    return b;
  }

  /** bytes handed out so far */
  get used(): number {
    return this.top;
  }

  /** keeps everything below `end` out of the allocator's reach (the module's static data) */
  reserve(end: number): void {
    if (end > this.memory.buffer.byteLength) throw new Error(`wasm backend: the kernels' static data (${end} bytes) does not fit in the initial memory`);
    this.top = Math.max(this.top, end);
  }

  /** whether `byteLength` more bytes (64-byte aligned) keep the used bytes at or below `cap` (default: the limit) */
  fits(byteLength: number, cap = this.limit): boolean {
    return Math.ceil(this.top / ALIGN) * ALIGN + byteLength <= Math.min(cap, this.limit);
  }

  /** reserves `byteLength` bytes, 64-byte aligned, growing the memory; returns the offset */
  alloc(byteLength: number, what: string): number {
    const ptr = Math.ceil(this.top / ALIGN) * ALIGN;
    const end = ptr + byteLength;
    if (end > this.limit) {
      throw new Error(`wasm backend: cannot allocate ${byteLength} bytes for ${what}: ${ptr} bytes of this memory are in use and it holds at most ${this.limit}`);
    }
    const have = this.memory.buffer.byteLength;
    if (end > have) {
      this.memory.grow(Math.ceil((end - have) / PAGE));
      this.buffers.add(this.memory.buffer);
    }
    this.top = end;
    return ptr;
  }

  /** frees the `byteLength` bytes at `ptr` when they are the last allocated (a bump allocator frees only its top); else keeps them */
  giveBackTop(ptr: number, byteLength: number): void {
    if (this.top === ptr + byteLength) this.top = ptr;
  }

  /** the offset of `view` in this memory, or undefined if it is not a view into it */
  offsetOf(view: ArrayBufferView): number | undefined {
    return this.buffers.has(view.buffer) ? view.byteOffset : undefined;
  }
}
