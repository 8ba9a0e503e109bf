/**
 * Benchmark child process: runs one engine once and prints its sample as one line
 * `BENCH_RESULT {json}` on stdout (the engines may print their own lines too). Run by
 * `child.ts`, one process per engine per repetition, so the peak RSS is that engine's alone.
 * The job is a JSON WorkerJob (or ParallelWorkerJob, which has `prompts`) on stdin: a long
 * prompt's ids passed the 128 KiB one argument may hold (spawn E2BIG at ~30K tokens).
 */
import { runLlamaCpp, runLlamaCppParallel } from "./llama-cpp-engine.js";
import { runTsllm, runTsllmParallel } from "./tsllm-engine.js";
import { RESULT_PREFIX } from "./child.js";
import type { ParallelWorkerJob, WorkerJob } from "./types.js";

async function main(): Promise<void> {
  let arg = "";
  for await (const chunk of process.stdin.setEncoding("utf8")) arg += chunk as string;
  if (arg === "") throw new Error("bench worker: expected a JSON job on stdin");
  const job = JSON.parse(arg) as WorkerJob | ParallelWorkerJob;
  if (job.engine !== "tsllm" && job.engine !== "llama.cpp") throw new Error(`bench worker: unknown engine "${String(job.engine)}" (expected tsllm or llama.cpp)`);
  const tsllm = job.engine === "tsllm";
  const measured = "prompts" in job ? await (tsllm ? runTsllmParallel : runLlamaCppParallel)(job) : await (tsllm ? runTsllm : runLlamaCpp)(job);
  // maxRSS is in kilobytes (KiB on Linux)
  const sample = { ...measured, peakRssBytes: process.resourceUsage().maxRSS * 1024 };
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
