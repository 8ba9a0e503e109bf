import { MAX_BYTES } from "./memory.js";
import type { KernelsMemory } from "./protocol.js";
import { KernelSpace } from "./space.js";

/** where an allocation landed: the memory's index and the byte offset in it */
export interface Placement {
  readonly space: number;
  readonly ptr: number;
}

/*
 * How full each memory may get. A memory takes weights up to 7/8 of its limit (3.5 GiB of a
 * wasm32 memory's 4 GiB) and KV cache blocks up to 15/16: the rest is room for the matmul and
 * attention scratch, which grow while the model runs (by doubling, up to a pass of 64 MiB, see
 * backend.ts), so that a running model never finds its scratch without room. Weights that
 * do not fit go into the first memory that has room, else into a new one; a model therefore
 * loads across ceil(weights / 3.5 GiB) memories.
 */
const WEIGHT_SHARE = 7 / 8;
const ACTIVATION_SHARE = 15 / 16;

/**
 * The shared memories of a wasm backend: memory 0 (control, scratch, KV cache, the weights while
 * they fit) and the memories opened when weights outgrow it. A tensor never spans memories (a
 * kernel instance reads one memory), so one tensor must fit in a memory's weight share.
 */
export class Memories {
  readonly spaces: KernelSpace[];
  /** called for every memory opened after memory 0, before anything is placed in it (the thread pool announces it to the workers) */
  onOpen: ((space: KernelSpace, index: number) => void) | undefined;

  constructor(
    private readonly module: WebAssembly.Module,
    /** bytes one memory may hold */
    readonly limit: number,
    initialScratch: number,
    /** whether the memories are shared (the kernels' memory import says which, see host.ts) */
    readonly kind: KernelsMemory = "shared",
  ) {
    this.spaces = [new KernelSpace(module, limit, initialScratch, kind)];
  }

  /** memory 0, where the control block of every job's synchronisation lives */
  get first(): KernelSpace {
    return this.spaces[0]!;
  }

  /** `byteLength` bytes for weights (`what` names them in errors) */
  placeWeights(byteLength: number, what: string): Placement {
    const cap = Math.floor(this.limit * WEIGHT_SHARE);
    const p = this.place(byteLength, cap, what);
    if (p) return p;
    const limit = this.limit === MAX_BYTES ? "4 GiB (the wasm32 limit)" : `${this.limit} bytes (memoryLimitBytes)`;
    throw new Error(
      `wasm backend: ${what} needs ${byteLength} bytes, more than one WebAssembly memory holds for weights ` +
        `(${cap} of its ${limit}); a tensor cannot span memories: use a more quantized model file (e.g. Q8_0 or Q4_K instead of F16/F32)`,
    );
  }

  /** `byteLength` bytes for activations (KV cache): memory 0 first, where the other activations are */
  placeActivations(byteLength: number, what: string): Placement {
    const p = this.place(byteLength, Math.floor(this.limit * ACTIVATION_SHARE), what);
    if (p) return p;
    throw new Error(`wasm backend: ${what} needs ${byteLength} bytes, more than one WebAssembly memory holds (${this.limit} bytes); use a smaller context`);
  }

  /** which memory `view` lies in, and where; undefined when it is in none of them */
  locate(view: ArrayBufferView): Placement | undefined {
    for (let space = 0; space < this.spaces.length; space++) {
      const ptr = this.spaces[space]!.arena.offsetOf(view);
      if (ptr !== undefined) return { space, ptr };
    }
    return undefined;
  }

  /** first fit below `cap` over the memories, else a new memory if it would fit there; undefined if it fits nowhere */
  private place(byteLength: number, cap: number, what: string): Placement | undefined {
    let space = this.spaces.findIndex((s) => s.arena.fits(byteLength, cap));
    if (space < 0) {
      // a new memory starts with what memory 0 started with, less the scratch
      if (Math.ceil(this.first.baseBytes / 64) * 64 + byteLength > cap) return undefined;
      const fresh = new KernelSpace(this.module, this.limit, 0, this.kind);
      space = this.spaces.push(fresh) - 1;
      this.onOpen?.(fresh, space);
    }
    return { space, ptr: this.spaces[space]!.arena.alloc(byteLength, what) };
  }
}
