import { BufferUsage, MapMode, type GPUBufferLike, type GPUCommandEncoderLike, type GPUDeviceLike, type GPUQuerySetLike } from "./gpu-types.js";

/** GPU time of one kernel over the dispatches profiled so far */
export interface KernelTime {
  kernel: string;
  dispatches: number;
  ms: number;
}

/** timestamp pairs per batch (a batch holds at most this many dispatches while profiling) */
export const PROFILED_PER_BATCH = 1024;

/**
 * GPU time per kernel from timestamp queries (the adapter's "timestamp-query" feature). WebGPU
 * writes timestamps only at the start and end of a pass, so while profiling every dispatch gets
 * a pass of its own; a batch's timestamps are resolved into a buffer when it is submitted and
 * read back as the GPU finishes it. For finding where a pass's GPU time goes: the extra passes
 * cost time of their own, so the rates measured with it off are the ones to quote.
 */
export class KernelProfiler {
  private readonly querySet: GPUQuerySetLike;
  private readonly resolved: GPUBufferLike;
  /** the kernel of each dispatch of the batch being recorded, in query order */
  private batch: string[] = [];
  private pending: Promise<void>[] = [];
  private readonly totals = new Map<string, { dispatches: number; ns: bigint }>();

  constructor(private readonly device: GPUDeviceLike) {
    this.querySet = device.createQuerySet({ type: "timestamp", count: 2 * PROFILED_PER_BATCH });
    this.resolved = device.createBuffer({ size: 16 * PROFILED_PER_BATCH, usage: BufferUsage.QUERY_RESOLVE | BufferUsage.COPY_SRC });
  }

  /** the batch has no room for another dispatch's timestamps: submit it first */
  get full(): boolean {
    return this.batch.length >= PROFILED_PER_BATCH;
  }

  /** the descriptor of the pass that holds the next dispatch, of kernel `name` */
  passFor(name: string): object {
    const i = this.batch.push(name) - 1;
    return { timestampWrites: { querySet: this.querySet, beginningOfPassWriteIndex: 2 * i, endOfPassWriteIndex: 2 * i + 1 } };
  }

  /** records the batch's resolve and copy (its passes ended) and returns what to do once it is submitted */
  endBatch(encoder: GPUCommandEncoderLike): (() => void) | null {
    const names = this.batch;
    this.batch = [];
    if (names.length === 0) return null;
    const bytes = 16 * names.length;
    const staging = this.device.createBuffer({ size: bytes, usage: BufferUsage.MAP_READ | BufferUsage.COPY_DST });
    encoder.resolveQuerySet(this.querySet, 0, 2 * names.length, this.resolved, 0);
    encoder.copyBufferToBuffer(this.resolved, 0, staging, 0, bytes);
    return () => {
      this.pending.push(staging.mapAsync(MapMode.READ, 0, bytes).then(() => {
        const t = new BigUint64Array(staging.getMappedRange(0, bytes));
        names.forEach((name, i) => {
          const s = this.totals.get(name) ?? { dispatches: 0, ns: 0n };
          // a timestamp pair out of order (a GPU may reset its counter) counts as zero
          if (t[2 * i + 1]! > t[2 * i]!) s.ns += t[2 * i + 1]! - t[2 * i]!;
          s.dispatches++;
          this.totals.set(name, s);
        });
        staging.destroy();
      }));
    };
  }

  /** the GPU time per kernel since the last call (the batches submitted by then), largest first */
  async take(): Promise<KernelTime[]> {
    const pending = this.pending;
    this.pending = [];
    await Promise.all(pending);
    const out = [...this.totals].map(([kernel, s]) => ({ kernel, dispatches: s.dispatches, ms: Number(s.ns) / 1e6 }));
    this.totals.clear();
    return out.sort((a, b) => b.ms - a.ms);
  }

  destroy(): void {
    this.resolved.destroy();
    this.querySet.destroy();
  }
}
