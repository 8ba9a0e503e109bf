import { spawn } from "node:child_process";
import { resolve } from "node:path";
import { PROJECT_ROOT } from "./shared.js";

/** runs a script in a fresh Node process (through tsx, from the project root; `nodeArgs` before the script, `env` for its environment); resolves with its exit code */
export function runChild(code: string, timeoutMs: number, options: { nodeArgs?: readonly string[]; env?: NodeJS.ProcessEnv } = {}): Promise<{ code: number | null; stderr: string; timedOut: boolean }> {
  return new Promise((resolve) => {
    const args = [...(options.nodeArgs ?? []), "--import", "tsx", "--input-type=module", "-e", code];
    const child = spawn(process.execPath, args, { cwd: PROJECT_ROOT, stdio: ["ignore", "ignore", "pipe"], env: options.env ?? process.env });
    let stderr = "";
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      child.kill("SIGKILL");
    }, timeoutMs);
    child.once("exit", (exitCode) => {
      clearTimeout(timer);
      resolve({ code: exitCode, stderr, timedOut });
    });
  });
}

/**
 * Runs the tsllm CLI (src/cli/main.ts through tsx) in a child process, asynchronously, so a
 * server in the test's own process (the loopback hub) keeps answering while it runs.
 */
export function runTsllm(args: readonly string[], env: NodeJS.ProcessEnv = process.env): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((done) => {
    const child = spawn(process.execPath, ["--import", "tsx", resolve(PROJECT_ROOT, "src/cli/main.ts"), ...args], { cwd: PROJECT_ROOT, env });
    let stdout = "", stderr = "";
    child.stdout.on("data", (d) => (stdout += d));
    child.stderr.on("data", (d) => (stderr += d));
    child.on("close", (code) => done({ code, stdout, stderr }));
  });
}
