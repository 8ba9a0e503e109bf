import { runPass, type LanguageModel } from "../models/index.js";
import { yieldToEventLoop } from "../platform/host.js";
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
  const pass = model.passBatch(plan.chunks.map((c) => ({ tokens: c.tokens, cache: c.sequence.cache, logits: c.logits })));
  // no await at all while the slice lasts: a pass has dozens of stages
  return runPass(pass, () => (slicer.due ? slicer.turn() : undefined));
}
