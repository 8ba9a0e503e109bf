import { spawn } from "node:child_process";
import { PROJECT_ROOT } from "./shared.js";

/** runs a script in a fresh Node process (through tsx, from the project root); resolves with its exit code */
export function runChild(code: string, timeoutMs: number): Promise<{ code: number | null; stderr: string; timedOut: boolean }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ["--import", "tsx", "--input-type=module", "-e", code], { cwd: PROJECT_ROOT, stdio: ["ignore", "ignore", "pipe"] });
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
