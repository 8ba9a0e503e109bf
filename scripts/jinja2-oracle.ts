import { execFileSync, spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";

/**
 * Python's jinja2 set up as Hugging Face transformers sets it up (jinja2-oracle.py beside this
 * file): the judge of how a chat template renders, for the tests and scripts/fuzz-jinja.ts.
 */
const ORACLE = fileURLToPath(new URL("jinja2-oracle.py", import.meta.url));

/** why jinja2 cannot judge here, or false when it can */
export const skipWithoutJinja2: string | false = spawnSync("python3", ["-c", "import jinja2"], { stdio: "ignore" }).status === 0
  ? false
  : "python3 with jinja2 is not installed (Debian: apt-get install python3-jinja2): the comparisons with jinja2 are skipped";

/** what a template's render gave: its text, or the error it raised ("ExceptionName: message") */
export type Jinja2Outcome = { out: string } | { error: string };

/** renders `template` once per context (messages, add_generation_prompt, the special tokens and any other variables) */
export function renderWithJinja2(template: string, contexts: readonly Record<string, unknown>[]): Jinja2Outcome[] {
  return JSON.parse(execFileSync("python3", [ORACLE], { input: JSON.stringify({ template, contexts }), maxBuffer: 64 << 20 }).toString()) as Jinja2Outcome[];
}

/** renders many templates (each with its contexts) in one python process; a template past `seconds` gives {"error": "TimeoutError: ..."} */
export function renderBatchWithJinja2(batch: readonly { template: string; contexts: readonly Record<string, unknown>[] }[], seconds = 2): Jinja2Outcome[][] {
  return JSON.parse(execFileSync("python3", [ORACLE], { input: JSON.stringify({ batch, seconds }), maxBuffer: 256 << 20 }).toString()) as Jinja2Outcome[][];
}
