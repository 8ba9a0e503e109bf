import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import type { EngineSample, ParallelSample, ParallelWorkerJob, WorkerJob } from "./types.js";

/** the line prefix a worker prints its result after */
export const RESULT_PREFIX = "BENCH_RESULT ";

/**
 * How to start the Node script `relative` (without its extension, relative to this module:
 * "./worker", "../cli/main"): next to this module, so it works from src/ (through tsx, resolved
 * from here, not from the caller's working directory) and from dist/ alike.
 */
export function nodeScriptCommand(relative: string): { command: string; args: string[] } {
  const here = import.meta.url;
  if (here.endsWith(".ts")) {
    const script = fileURLToPath(new URL(`${relative}.ts`, here));
    return { command: process.execPath, args: ["--import", import.meta.resolve("tsx"), script] };
  }
  const script = fileURLToPath(new URL(`${relative}.js`, here));
  if (!existsSync(script)) throw new Error(`script not found: ${script}`);
  return { command: process.execPath, args: [script] };
}

/** default limit for one child run: a hung engine (e.g. a deadlocked thread pool) must not stall a whole benchmark */
export const DEFAULT_WORKER_TIMEOUT_MS = 10 * 60 * 1000;

/** Runs one job in a fresh child process and returns its sample; the child is killed after `timeoutMs`. */
export function runWorker(job: WorkerJob, timeoutMs?: number): Promise<EngineSample>;
export function runWorker(job: ParallelWorkerJob, timeoutMs?: number): Promise<ParallelSample>;
export function runWorker(job: WorkerJob | ParallelWorkerJob, timeoutMs = DEFAULT_WORKER_TIMEOUT_MS): Promise<EngineSample | ParallelSample> {
  const { command, args } = nodeScriptCommand("./worker");
  return new Promise((resolve, reject) => {
    // the job on stdin: a long prompt's ids pass what one argument may hold (E2BIG)
    const child = spawn(command, args, { stdio: ["pipe", "pipe", "pipe"] });
    child.stdin.on("error", () => undefined); // a child that dies at start: its exit says why
    child.stdin.end(JSON.stringify(job));
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      child.kill("SIGKILL");
    }, timeoutMs);
    let stdout = "";
    let stderr = "";
    child.stdout.setEncoding("utf8").on("data", (d: string) => (stdout += d));
    child.stderr.setEncoding("utf8").on("data", (d: string) => (stderr += d));
    child.on("error", (e) => reject(new Error(`${job.engine} bench worker could not start: ${e.message}`)));
    child.on("close", (code, signal) => {
      clearTimeout(timer);
      const line = stdout.split("\n").find((l) => l.startsWith(RESULT_PREFIX));
      if (code !== 0 || line === undefined) {
        const why = timedOut ? `did not finish within ${(timeoutMs / 1000).toFixed(0)} s (killed)` : signal ? `was killed by ${signal}` : `exited with code ${String(code)}`;
        const tail = stderr.trim().split("\n").slice(-5).join("\n");
        reject(new Error(`${job.engine} bench worker on ${job.modelPath} ${why}${tail ? `: ${tail}` : " and printed no result"}`));
        return;
      }
      // a rate not measured (NaN: no decode steps) crosses the pipe as JSON's null: a number again here
      resolve(JSON.parse(line.slice(RESULT_PREFIX.length), (_key, v: unknown) => (v === null ? NaN : v)) as EngineSample | ParallelSample);
    });
  });
}
