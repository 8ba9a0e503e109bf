import { basename } from "node:path";
import { runLoad, summarizeLoad, type CompletionRequest } from "./load.js";
import { partialTextTokens, randomPrompts } from "./prompt.js";
import { startLlamaServer, startTsllmServe, type ServerProcess, type ServerSettings } from "./servers.js";
import { median, medians, ratios } from "./stats.js";
import { SERVE_METRICS, type ServeBenchReport, type ServeLevelReport, type ServeLevelSample, type ServerName } from "./types.js";

export interface ServeBenchOptions {
  readonly modelPath: string;
  readonly threads: number;
  /** clients sending at once, one level each */
  readonly concurrency: readonly number[];
  readonly promptTokens: number;
  readonly maxTokens: number;
  /** requests a level sends in all (default: 4 per client, at least 16) */
  readonly requests?: (concurrency: number) => number;
  /** a llama-server binary to compare with; without it only tsllm runs */
  readonly llamaServer?: string;
  readonly llamaServerDetail?: string;
  /** why there is no llama-server (recorded in the report) */
  readonly llamaServerSkipped?: string;
  /** tsllm's compute backend (default wasm) */
  readonly backend?: "wasm" | "reference";
  /** limit for one request (default 120 s) */
  readonly requestTimeoutMs?: number;
  /** runs of each level per server, tsllm and llama-server alternating (default 1); the report gives their medians */
  readonly repetitions?: number;
  /** progress: called after each server's level */
  readonly onLevel?: (sample: ServeLevelSample, concurrency: number) => void;
}

/** KV cells a slot gets beyond its prompt and generated tokens (tsllm stops one short of a full cache) */
const SLOT_SLACK = 32;

/** one server's runs of a level as one sample: every metric's median, every run's requests */
function medianSample(runs: readonly ServeLevelSample[]): ServeLevelSample {
  if (runs.length === 1) return runs[0]!;
  return { server: runs[0]!.server, command: runs[0]!.command, wallMs: median(runs.map((r) => r.wallMs)), ...medians(runs, SERVE_METRICS), requests: runs.flatMap((r) => r.requests) };
}

/** default requests per level: 4 per client, at least 16 (so p99 at one client is over more than a handful) */
export function defaultRequests(concurrency: number): number {
  return Math.max(16, 4 * concurrency);
}

/**
 * `npm run bench:serve`'s measurement: for each concurrency level C, a fresh `tsllm serve` and
 * then (when given) a fresh llama-server, each with C parallel slots and the same threads, get
 * one warm-up request and then the same load: C clients sending streaming completions back to
 * back (each a different prompt of `promptTokens` token ids, `maxTokens` generated with
 * ignore_eos, tokens that are not whole text banned) until the level's requests are sent. Every figure is taken by the client over
 * loopback HTTP, the same code for both servers.
 */
export async function runServeBenchmark(o: ServeBenchOptions): Promise<ServeBenchReport> {
  for (const [name, v, min] of [["threads", o.threads, 1], ["promptTokens", o.promptTokens, 1], ["maxTokens", o.maxTokens, 2]] as const) {
    if (!Number.isInteger(v) || v < min) throw new RangeError(`bench:serve: ${name} must be an integer >= ${min}, got ${v}`);
  }
  if (o.concurrency.length === 0 || o.concurrency.some((c) => !Number.isInteger(c) || c < 1)) throw new RangeError(`bench:serve: concurrency must be integers >= 1, got ${o.concurrency.join(",")}`);
  const count = o.requests ?? defaultRequests;
  const repetitions = o.repetitions ?? 1;
  if (!Number.isInteger(repetitions) || repetitions < 1) throw new RangeError(`bench:serve: repetitions must be an integer >= 1, got ${repetitions}`);
  const slotContextSize = o.promptTokens + o.maxTokens + SLOT_SLACK;
  // tokens that are not whole text are banned (see partialTextTokens), so both servers stream one chunk per token
  const logitBias = Object.fromEntries((await partialTextTokens(o.modelPath)).map((id) => [String(id), -100]));
  const levels: ServeLevelReport[] = [];
  for (const c of o.concurrency) {
    const n = count(c);
    if (!Number.isInteger(n) || n < 1) throw new RangeError(`bench:serve: requests at concurrency ${c} must be an integer >= 1, got ${n}`);
    // every request of a level a different prompt (no prefix-cache hits), the same ones on both servers;
    // the warm-up prompt (seed n + 1) is none of them
    const prompts = await randomPrompts(o.modelPath, o.promptTokens, n + 1);
    const warmup = prompts.pop()!;
    const requests: CompletionRequest[] = prompts.map((prompt) => ({ prompt, maxTokens: o.maxTokens, logitBias }));
    const settings: ServerSettings = { modelPath: o.modelPath, threads: o.threads, parallel: c, slotContextSize };
    const measure = async (name: ServerName, start: () => Promise<ServerProcess>): Promise<ServeLevelSample> => {
      const server = await start();
      try {
        await runLoad(server.url, [{ prompt: warmup, maxTokens: Math.min(8, o.maxTokens), logitBias }], 1, o.requestTimeoutMs);
        const load = await runLoad(server.url, requests, c, o.requestTimeoutMs);
        const sample: ServeLevelSample = { server: name, command: server.command, wallMs: load.wallMs, ...summarizeLoad(load), requests: load.requests };
        o.onLevel?.(sample, c);
        return sample;
      } finally {
        await server.stop();
      }
    };
    // the servers alternate run by run, so a change in the host's load falls on both
    const binary = o.llamaServer;
    const ours: ServeLevelSample[] = [], theirs: ServeLevelSample[] = [];
    for (let r = 0; r < repetitions; r++) {
      ours.push(await measure("tsllm", () => startTsllmServe({ ...settings, backend: o.backend })));
      if (binary !== undefined) theirs.push(await measure("llama-server", () => startLlamaServer(binary, settings)));
    }
    const tsllm = medianSample(ours);
    const runs = repetitions > 1 ? { runs: { tsllm: ours, ...(theirs.length > 0 ? { llamaServer: theirs } : {}) } } : {};
    if (binary === undefined) {
      levels.push({ concurrency: c, requests: n, repetitions, tsllm, ...runs });
      continue;
    }
    const llamaServer = medianSample(theirs);
    levels.push({ concurrency: c, requests: n, repetitions, tsllm, llamaServer, ratio: ratios(tsllm, llamaServer, SERVE_METRICS), ...runs });
  }
  return {
    model: basename(o.modelPath), threads: o.threads, promptTokens: o.promptTokens, maxTokens: o.maxTokens, slotContextSize,
    ...(o.llamaServerDetail !== undefined && o.llamaServer !== undefined ? { llamaServerDetail: o.llamaServerDetail } : {}),
    ...(o.llamaServerSkipped !== undefined ? { llamaServerSkipped: o.llamaServerSkipped } : {}),
    levels,
  };
}
