import { runPass, type LanguageModel } from "../models/index.js";
import { yieldToEventLoop } from "../platform/host.js";
import { onAbort } from "../units/index.js";
import type { StepPlan } from "./scheduler.js";

/**
 * Gives the event loop a turn once `sliceMs` of compute have passed since the last one, so a
 * long pass (a prompt chunk through every layer) never holds the thread that owns the model
 * for much longer than that: timers fire, sockets are read, streams flush mid-pass.
 */
export class TimeSlicer {
  private since = performance.now();

  constructor(readonly sliceMs: number) {}

  /** whether the slice is used up (then `turn`) */
  get due(): boolean {
    return performance.now() - this.since >= this.sliceMs;
  }

  /** a turn for the event loop now (between steps) */
  async turn(): Promise<void> {
    await yieldToEventLoop();
    this.since = performance.now();
  }
}

/**
 * Runs a step as ONE forward pass over every scheduled row (decodes and prompt chunks of all
 * requests, ragged), pausing between the model's stages when the time slice is used up.
 * Returns each chunk's last-token logits, or undefined where the chunk wanted none.
 */
export async function executeStep(model: LanguageModel, plan: StepPlan, slicer: TimeSlicer): Promise<(Float32Array | undefined)[]> {
  return exclusive(model, () => {
    const pass = model.passBatch(plan.chunks.map((c) => ({ tokens: c.tokens, cache: c.sequence.cache, logits: c.logits })));
    // no await at all while the slice lasts: a pass has dozens of stages
    return runPass(pass, () => (slicer.due ? slicer.turn() : undefined));
  });
}

/** per model, the end of the last pass queued on it */
const passQueues = new WeakMap<LanguageModel, Promise<void>>();

/**
 * Runs `pass` once every pass queued before it on `model` has ended. A model's passes share its
 * activation buffers, so one paused mid-way (an engine giving its event loop a turn) makes any
 * other refuse to start; one model may be driven from several places at once: its own engine and
 * the speculative requests of other models' engines that draft with it. `signal` gives up the
 * wait (rejecting with its reason); a pass begun is not cut. A pass given up still hands its turn
 * on only once those before it have ended, so the passes queued behind it keep their order.
 */
export async function exclusive<T>(model: LanguageModel, pass: () => Promise<T>, signal?: AbortSignal): Promise<T> {
  const before = passQueues.get(model);
  let release!: () => void;
  const mine = new Promise<void>((resolve) => (release = resolve));
  passQueues.set(model, mine);
  const handOn = () => {
    release();
    if (passQueues.get(model) === mine) passQueues.delete(model);
  };
  let began = false;
  try {
    if (before) await (signal ? untilAborted(before, signal) : before);
    signal?.throwIfAborted();
    began = true;
    return await pass();
  } finally {
    if (began || !before) handOn();
    else void before.then(handOn);
  }
}

/** `wait`, or the signal's reason as a rejection once it is aborted (one listener on a signal however many calls wait with it: onAbort) */
function untilAborted(wait: Promise<void>, signal: AbortSignal): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason);
    const off = onAbort(signal, () => reject(signal.reason));
    void wait.then(() => {
      off();
      resolve();
    });
  });
}

/**
 * `model` with its passes queued behind the others of the same model (exclusive): a draft model
 * that its own engine, or other requests' engines, run at the same time.
 */
export function queuedPasses(model: LanguageModel): LanguageModel {
  return {
    get info() { return model.info; },
    get kvCacheTypes() { return model.kvCacheTypes; },
    createCache: (contextSize) => model.createCache(contextSize),
    forward: (tokens, cache, options) => model.forward(tokens, cache, options),
    forwardBatch: (seqs) => model.forwardBatch(seqs),
    forwardAsync: (tokens, cache, options) => exclusive(model, () => model.forwardAsync(tokens, cache, options)),
    forwardBatchAsync: (seqs) => exclusive(model, () => model.forwardBatchAsync(seqs)),
    passBatch: (seqs) => model.passBatch(seqs),
    hiddenStatesAsync: (seqs) => exclusive(model, () => model.hiddenStatesAsync(seqs)),
  };
}
