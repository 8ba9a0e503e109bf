/**
 * Benchmark child process: runs one engine once and prints its sample as one line
 * `BENCH_RESULT {json}` on stdout (the engines may print their own lines too). Run by
 * `child.ts`, one process per engine per repetition, so the peak RSS is that engine's alone.
 * The job is a JSON WorkerJob in argv[2].
 */
import { runLlamaCpp } from "./llama-cpp-engine.js";
import { runTsllm } from "./tsllm-engine.js";
import { RESULT_PREFIX } from "./child.js";
import type { EngineSample, WorkerJob } from "./types.js";

async function main(): Promise<void> {
  const arg = process.argv[2];
  if (arg === undefined) throw new Error("bench worker: expected a JSON job as the first argument");
  const job = JSON.parse(arg) as WorkerJob;
  const run = job.engine === "tsllm" ? runTsllm : job.engine === "llama.cpp" ? runLlamaCpp : undefined;
  if (!run) throw new Error(`bench worker: unknown engine "${String(job.engine)}" (expected tsllm or llama.cpp)`);
  const measured = await run(job);
  // maxRSS is in kilobytes (KiB on Linux)
  const sample: EngineSample = { ...measured, peakRssBytes: process.resourceUsage().maxRSS * 1024 };
  process.stdout.write(`${RESULT_PREFIX}${JSON.stringify(sample)}\n`);
}

main().then(
  // exit explicitly: an engine's native threads or timers must not keep the child alive
  () => process.exit(0),
  (err: unknown) => {
    process.stderr.write(`${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  },
);
