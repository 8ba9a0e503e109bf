// Loads one model, tokenizer or chat template the way a user's first command would, for the
// hostile corpus (test/hostile-corpus.test.ts) and the fuzzer (scripts/fuzz.ts).
//
//   node --import tsx scripts/hostile-load.ts model|tokenizer|chat PATH
//
// On failure it prints what the CLI prints (`tsllm: error: MESSAGE`, one line) to stderr and
// exits 1; either way its last stdout line is a JSON report {ok, name, message, maxRssBytes, ms}.
// `--batch FILE` loads many cases in one process (see below).
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { chatFormatterFor } from "../src/chat/index.js";
import { loadModel } from "../src/llm.js";
import { openTokenizer } from "../src/tokenizer/open.js";
import { printable } from "../src/units/index.js";

export type LoadKind = "model" | "tokenizer" | "chat";

const TEXT = "Once upon a time aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaab, the end.";

/** what `tsllm generate` / `tokenize` / `chat` does first with such a file; throws what they would print */
export async function loadCase(kind: LoadKind, path: string): Promise<void> {
  if (kind === "model") {
    const model = await loadModel(path, { backend: "reference", threads: 1, contextSize: 32 });
    try {
      await model.generate(TEXT.slice(0, 16), { maxTokens: 2, temperature: 0 });
    } finally {
      model.dispose();
    }
  } else if (kind === "tokenizer") {
    const tokenizer = openTokenizer(path);
    tokenizer.decode(tokenizer.encode(TEXT));
  } else {
    chatFormatterFor(openTokenizer(path)).encode([{ role: "user", content: "Hi" }]);
  }
}

/** Node's own error classes: a file should never reach one of these (an untyped error) */
/**
 * Whether a message is the JS engine's own words about our code ("Cannot read properties of
 * undefined", "x.map is not a function", "tokens is not iterable") that reached the user through an
 * Error of ours. jinja2's TypeError "'int' object is not iterable", which a template's error
 * repeats on purpose, is not one.
 */
export function untypedMessage(message: string): boolean {
  return /Cannot read properties|is not a function|(?<!'[\w.]+' object )is not iterable/.test(message);
}

export const UNTYPED_ERRORS = new Set(["TypeError", "RangeError", "ReferenceError", "SyntaxError", "EvalError", "URIError", "AggregateError", "InternalError"]);

export interface LoadReport {
  ok: boolean;
  /** the thrown error's name (constructor) and message */
  name?: string;
  message?: string;
  maxRssBytes: number;
  ms: number;
}

/** loads one case, capturing what it writes to stderr meanwhile; the report's `maxRssBytes` is the process's peak so far */
export async function reportCase(kind: LoadKind, path: string): Promise<LoadReport & { stderr: string }> {
  const t0 = performance.now();
  const report: LoadReport & { stderr: string } = { ok: true, maxRssBytes: 0, ms: 0, stderr: "" };
  const write = process.stderr.write;
  process.stderr.write = ((chunk: string | Uint8Array) => { report.stderr += String(chunk); return true; }) as typeof process.stderr.write;
  try {
    await loadCase(kind, path);
  } catch (e) {
    report.ok = false;
    report.name = e instanceof Error ? e.constructor.name : typeof e;
    report.message = e instanceof Error ? e.message : String(e);
  } finally {
    process.stderr.write = write;
  }
  report.ms = performance.now() - t0;
  report.maxRssBytes = process.resourceUsage().maxRSS * 1024;
  return report;
}

/*
 * `KIND PATH`: one case; `--batch FILE`: the cases [{kind, path}] of a JSON file one after the
 * other, a line {"start": i} before each and its report after it (so a parent can tell which case
 * hangs, and, the peak RSS being the process's, that every case so far stayed under a bound).
 */
if (process.argv[1] && import.meta.url === pathToFileURL(resolve(process.argv[1])).href) {
  const args = process.argv.slice(2);
  if (args[0] === "--batch") {
    const list = JSON.parse(readFileSync(args[1]!, "utf8")) as { kind: LoadKind; path: string }[];
    for (let i = 0; i < list.length; i++) {
      process.stdout.write(JSON.stringify({ start: i }) + "\n");
      const r = await reportCase(list[i]!.kind, list[i]!.path);
      process.stdout.write(JSON.stringify({ i, ...r }) + "\n");
    }
  } else {
    const r = await reportCase(args[0] as LoadKind, args[1]!);
    process.stderr.write(r.stderr);
    if (!r.ok) process.stderr.write(`tsllm: error: ${printable(r.message!)}\n`);
    process.stdout.write(JSON.stringify(r) + "\n");
    process.exitCode = r.ok ? 0 : 1;
  }
}
