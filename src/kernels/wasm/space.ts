import { CONTROL_BYTES, PRIVATE_BASE, PRIVATE_BYTES, RECORD_BYTES, RECORDS } from "./control.js";
import { SharedArena } from "./memory.js";
import { instantiateKernels, type KernelExports } from "./module.js";
import type { KernelsMemory } from "./protocol.js";

const F16_TABLE_BYTES = 65536 * 4;

/**
 * One shared memory of a wasm backend with what a kernel job needs inside it: the calling
 * thread's instance of the kernels over it, a control block for the job's words (work() reads
 * them at an offset into its own memory), the f16 table and the matmul scratch. A kernel reads
 * only the memory its instance imports, so a job runs in the memory that holds its weight (or
 * KV cache), its activations copied into that memory's scratch. Memory 0 is created with the
 * backend; further memories when weights outgrow it (see memories.ts).
 */
export class KernelSpace {
  readonly arena: SharedArena;
  readonly kernels: KernelExports;
  /** byte offset of this memory's control block */
  readonly ctrl: number;
  /**
   * the control block's words: it lies in the memory's first page, and a shared memory's old
   * buffers stay valid when it grows, so this one view serves for good
   */
  readonly control: Int32Array;
  /** byte offset of this memory's f16 table (each instance reads its own memory's table) */
  readonly f16Table: number;
  /** bytes in use before any scratch, weight or activation: what a memory costs the allocator */
  readonly baseBytes: number;
  private scratchPtr = 0;
  private scratchBytes = 0;
  private privateBytes = 0;

  constructor(
    module: WebAssembly.Module,
    limitBytes: number,
    /** bytes of matmul scratch allocated up front (memory 0: the common case needs no growth) */
    initialScratch: number,
    /** the memory the module imports: shared, or (one thread, no cross-origin isolation) not */
    kind: KernelsMemory = "shared",
  ) {
    this.arena = new SharedArena(1 << 20, 0, limitBytes, kind);
    this.kernels = instantiateKernels(module, this.arena.memory);
    // the module's static data (e.g. the tables of Mathf.exp) sits below its heap base: the
    // arena starts above it, or the first allocations would overwrite those tables
    this.arena.reserve(this.kernels.heapBase());
    this.ctrl = this.arena.alloc(CONTROL_BYTES, "the control block");
    this.control = new Int32Array(this.arena.buffer, this.ctrl, CONTROL_BYTES / 4);
    this.f16Table = this.arena.alloc(F16_TABLE_BYTES, "the f16 table");
    this.kernels.fillF16Table(this.f16Table);
    this.kernels.useF16Table(this.f16Table);
    this.baseBytes = this.arena.used;
    if (initialScratch > 0) this.scratch(initialScratch);
  }

  get memory(): WebAssembly.Memory {
    return this.arena.memory;
  }

  /**
   * Claim records and private outputs of `bytes` per thread for a stealable job, their
   * addresses written into the control block. Outgrown private outputs are abandoned, not
   * reused: a worker late from an old job may still write into its own.
   */
  prepareStealing(threads: number, bytes: number): void {
    const control = this.control;
    if (control[RECORDS] === 0) {
      const records = this.arena.alloc(threads * RECORD_BYTES, "claim records");
      new Uint8Array(this.arena.buffer, records, threads * RECORD_BYTES).fill(0);
      control[RECORDS] = records;
    }
    if (bytes > this.privateBytes) {
      const size = Math.ceil(Math.max(bytes, 2 * this.privateBytes) / 64) * 64;
      control[PRIVATE_BASE] = this.arena.alloc(threads * size, "private outputs");
      control[PRIVATE_BYTES] = size;
      this.privateBytes = size;
    }
  }

  /** the scratch area, at least `bytes` long */
  scratch(bytes: number): number {
    if (bytes > this.scratchBytes) {
      // the old area is abandoned: scratch only grows a few times, by doubling
      const size = Math.max(bytes, 2 * this.scratchBytes);
      this.scratchPtr = this.arena.alloc(size, "matmul scratch");
      this.scratchBytes = size;
    }
    return this.scratchPtr;
  }
}
