import { median } from "./stats.js";
import type { ParallelSample, RequestSample } from "./types.js";

/** One request of a concurrent run: calling it starts the request, which yields its generated token ids. */
export type StartRequest = () => AsyncIterable<number>;

export type ConcurrentTimes = Pick<ParallelSample, "wallMs" | "aggregateTokensPerSecond" | "ttftMs" | "tpotMs" | "requests">;

/**
 * Starts every request in the same tick (so an engine that batches what is pending can batch
 * them all) and consumes them concurrently, noting when each token arrives. A request is timed
 * from its own start; the wall time runs from the first start to the last finish. Both engines
 * are measured by this one function, so they are timed alike.
 */
export async function timeConcurrentRequests(requests: readonly StartRequest[], genTokens: number): Promise<ConcurrentTimes> {
  if (!Number.isInteger(genTokens) || genTokens < 2) throw new RangeError(`a concurrent run needs at least 2 tokens a request (for the time per output token), got ${genTokens}`);
  const t0 = performance.now();
  const timed = await Promise.all(requests.map(async (start, i): Promise<RequestSample> => {
    const startedAt = performance.now();
    const tokens: number[] = [];
    let firstAt = startedAt;
    let lastAt = startedAt;
    for await (const token of start()) {
      lastAt = performance.now();
      if (tokens.length === 0) firstAt = lastAt;
      tokens.push(token);
    }
    if (tokens.length !== genTokens) throw new Error(`request ${i + 1} of ${requests.length} generated ${tokens.length} tokens, expected ${genTokens}`);
    return { ttftMs: firstAt - startedAt, tpotMs: (lastAt - firstAt) / (tokens.length - 1), tokens };
  }));
  const wallMs = performance.now() - t0;
  const generated = timed.reduce((n, r) => n + r.tokens.length, 0);
  return {
    wallMs,
    aggregateTokensPerSecond: (generated * 1000) / wallMs,
    ttftMs: median(timed.map((r) => r.ttftMs)),
    tpotMs: median(timed.map((r) => r.tpotMs)),
    requests: timed,
  };
}
