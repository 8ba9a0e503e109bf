import { loadModel, loadTokenizer, type Model } from "../llm.js";
import { computeKlDivergence, computePerplexity, planWindows } from "../perplexity/index.js";
import { isQuantization, QUANTIZATIONS, type Quantization } from "../tensor/index.js";
import { MODEL_MEANING, backendOption, escapesOption, ESCAPE_ARGS, flag, memoryMarginOption, optionalModel, optionalNumber, optionalString, parse, printWarning, processEscapes, requireString, threadsOption, UsageError, type OptionSpec } from "./args.js";
import { modelNamedBy, readTextInput } from "./input-files.js";
import { cacheTypesFrom, MAX_CONTEXT, TRAINED_CONTEXT, trainedContextOf } from "./generate.js";
import { resolveInterruptibly } from "./interrupt.js";

export const perplexityHelp = `Usage: tsllm perplexity --model MODEL --file TEXT [options]

Perplexity as llama.cpp's perplexity tool computes it: the text is tokenized once (BOS first),
cut into non-overlapping windows of --ctx tokens, each window starts with BOS and only its
second half is scored. Prints the running estimate after each window, then the final value
with its standard error.

Options:
  --model MODEL         .gguf file, Hugging Face model folder, or Hub reference org/name[@rev][:QUANT] (required)
  --file TEXT           UTF-8 text file to evaluate (required; - reads stdin); as llama-perplexity's -f, one
                        final line break is dropped and \\n \\r \\t \\' \\" \\\\ and \\xHH in it are that
                        character or byte
  --no-escape           score the file's backslashes as written (--escape, the default, is taken)
  --ctx N               window size in tokens (default 512); 0: the model's trained context (the
                        KV cache is then sized for it, 128K tokens on some models)
  --batch N             tokens per forward pass (default: the whole window)
  --chunks N            evaluate at most N windows (default -1: all, as llama-perplexity)
  --quantize Q          quantize --model while loading (as generate --quantize), to measure that quantization
  --cache-type-k T      KV cache type of keys (f32, f16, q8_0, q4_0; as generate), to measure that cache
  --cache-type-v T      KV cache type of values (as --cache-type-k)
  --kl-divergence       compare --model against --base: mean KL divergence, top-1 agreement; with
                        --quantize and no --base, the base is --model itself unquantized
  --base FILE           the full-precision base model for --kl-divergence
  --threads N           compute threads (default -1; 0 or less: all cores)
  --memory-margin SIZE  free memory the default KV pool leaves unused, as generate (e.g. 512M, 0;
                        default: TSLLM_MEMORY_MARGIN, else 1G)
  --backend NAME        wasm (default), reference or webgpu
  --json                print one JSON object instead of the progress lines
  -h, --help            show this help
`;

export const PERPLEXITY_ARGS: OptionSpec = {
  model: { type: "string" },
  file: { type: "string" },
  ctx: { type: "string" },
  batch: { type: "string" },
  chunks: { type: "string" },
  quantize: { type: "string" },
  "cache-type-k": { type: "string" },
  "cache-type-v": { type: "string" },
  "kl-divergence": { type: "boolean" },
  base: { type: "string" },
  threads: { type: "string" },
  "memory-margin": { type: "string" },
  backend: { type: "string" },
  json: { type: "boolean" },
  ...ESCAPE_ARGS,
};

export async function runPerplexity(argv: string[]): Promise<void> {
  const values = parse(argv, PERPLEXITY_ARGS);
  if (flag(values, "help")) { process.stdout.write(perplexityHelp); return; }
  const modelPath = requireString(values, "model", MODEL_MEANING);
  const file = requireString(values, "file", "a file name");
  const ctxArg = optionalNumber(values, "ctx", { integer: true, min: 0, max: MAX_CONTEXT }) ?? 512;
  // a window needs BOS and a scored half: 0 (the trained context, read once the model is resolved) or 4 and up
  if (ctxArg !== TRAINED_CONTEXT && ctxArg < 4) throw new UsageError(`--ctx must be >= 4, or 0 for the model's trained context; got ${ctxArg}`);
  const batch = optionalNumber(values, "batch", { integer: true, min: 1 });
  // any negative N is all the windows, as llama-perplexity's --chunks (its default -1); 0 would score none
  const chunksArg = optionalNumber(values, "chunks", { integer: true });
  if (chunksArg === 0) throw new UsageError("--chunks must be >= 1, or -1 for all the windows (the default); got 0");
  const chunks = chunksArg === undefined || chunksArg < 0 ? undefined : chunksArg;
  const kl = flag(values, "kl-divergence");
  const memoryMargin = memoryMarginOption(values);
  const quantize = optionalString(values, "quantize");
  if (quantize !== undefined && !isQuantization(quantize)) throw new UsageError(`--quantize must be one of ${QUANTIZATIONS.join(", ")}, got "${quantize}"`);
  // --quantize without --base: the base is the same model, unquantized
  const basePath = optionalModel(values, "base") ?? (kl && quantize !== undefined ? modelPath : undefined);
  if (kl && basePath === undefined) throw new UsageError("--kl-divergence needs --base FILE (the full-precision model), or --quantize Q to compare --model quantized against itself");
  if (!kl && basePath !== undefined) throw new UsageError("--base is only used with --kl-divergence");
  const backend = backendOption(values);
  const json = flag(values, "json");
  const escapes = escapesOption(values);
  // llama-perplexity's -f (common/arg.cpp): one final "\n" dropped, then the escapes processed
  // unless --no-escape, as in every prompt llama.cpp's tools read
  const read = await readTextInput(file, "--file");
  const dropped = read.endsWith("\n") ? read.slice(0, -1) : read;
  const text = escapes ? processEscapes(dropped, `--file ${file === "-" ? "- (stdin)" : file}`) : dropped;
  // the text against the window before the model is loaded at that context: a text too short
  // for one window of --ctx 100000 was found only after weights and a 100000-token KV cache were
  // allocated (or after the memory plan refused a context the text never needed)
  // resolved once: a hub reference is not looked up again for the model
  const modelFile = await resolveInterruptibly("perplexity", modelPath);
  // --base found before either model loads, named by its flag: a missing one was "model not
  // found: ..." after the text was tokenized and --model loaded, with no word of which model
  const baseFile = basePath === undefined ? undefined : basePath === modelPath ? modelFile
    : await modelNamedBy("perplexity", "--base", basePath);
  const ctx = ctxArg === TRAINED_CONTEXT ? trainedContextOf(modelFile, "--ctx") : ctxArg;
  const tok = await loadTokenizer(modelFile);
  // as llama.cpp: the whole text tokenized once with BOS, special-token text left as text
  const tokens = tok.encode(text, { addSpecialTokens: true, parseSpecial: false });
  let plan: ReturnType<typeof planWindows>;
  try {
    plan = planWindows(tokens.length, ctx, chunks);
  } catch (e) {
    const most = Math.floor(tokens.length / 2);
    throw new Error(`--file ${file}: ${(e as Error).message}; ${most >= 4 ? `use --ctx ${most} or less, or a longer text` : "use a longer text"}`);
  }
  const bosId = tok.addBos ? tok.bosId : undefined;
  const loadOptions = { backend, threads: threadsOption(values), contextSize: ctx, ...(memoryMargin !== undefined ? { memoryMargin } : {}), onWarning: printWarning } as const;
  const models: Model[] = [];
  try {
    const model = await loadModel(modelFile, { ...loadOptions, ...cacheTypesFrom(values), ...(quantize !== undefined ? { quantize: quantize as Quantization } : {}) }).catch(namingCtx);
    models.push(model);
    const common = { ctx, batch, chunks, bosId };
    // the windows scored, as llama.cpp's "calculating perplexity over N chunks" counts them: it
    // said 243 windows where --chunks 1 scored one
    const all = Math.floor(tokens.length / ctx);
    if (!json) process.stderr.write(`${file === "-" ? "stdin" : file}: ${tokens.length} tokens, ${all} windows of ${ctx}${plan.chunks < all ? `, the first ${plan.chunks} scored (--chunks)` : ""}\n`);
    if (kl) {
      // a base that does not load (a folder without config.json, a damaged file) named by its flag
      const base = await loadModel(baseFile!, loadOptions).catch((e: unknown) => namingCtx(baseFile === modelFile ? e : namingBase(e)));
      models.push(base);
      if (base.tokenizer.vocabSize !== tok.vocabSize) throw new Error(`--base ${basePath}: its vocabulary has ${base.tokenizer.vocabSize} tokens, the model's ${tok.vocabSize}`);
      const r = await computeKlDivergence(model.languageModel, base.languageModel, tokens, {
        ...common,
        onChunk: json ? undefined : (p) => process.stdout.write(`[${p.chunk}] PPL ${p.perplexity.toFixed(4)} KL ${p.meanKl.toFixed(6)} same top ${(100 * p.sameTop).toFixed(3)}%\n`),
      });
      if (json) {
        process.stdout.write(JSON.stringify({ model: modelPath, ...(quantize !== undefined ? { quantize } : {}), base: basePath, file, textTokens: tokens.length, ...r }) + "\n");
      } else {
        process.stdout.write([
          `Mean PPL(Q)    : ${r.perplexity.value.toFixed(6)} +/- ${r.perplexity.standardError.toFixed(6)}`,
          `Mean PPL(base) : ${r.basePerplexity.value.toFixed(6)} +/- ${r.basePerplexity.standardError.toFixed(6)}`,
          `Mean KLD       : ${r.meanKl.value.toFixed(6)} +/- ${r.meanKl.standardError.toFixed(6)}`,
          `Maximum KLD    : ${r.maxKl.toFixed(6)}`,
          `Same top p     : ${(100 * r.sameTop.value).toFixed(3)} +/- ${(100 * r.sameTop.standardError).toFixed(3)} %`,
          `(${r.tokens} tokens in ${r.chunks} windows of ${r.ctx})`,
        ].join("\n") + "\n");
      }
      return;
    }
    const r = await computePerplexity(model.languageModel, tokens, {
      ...common,
      onChunk: json ? undefined : (p) => process.stdout.write(`[${p.chunk}]${p.perplexity.toFixed(4)},`),
    });
    if (json) {
      process.stdout.write(JSON.stringify({ model: modelPath, ...(quantize !== undefined ? { quantize } : {}), file, textTokens: tokens.length, ...r }) + "\n");
    } else {
      process.stdout.write(`\nFinal estimate: PPL = ${r.perplexity.toFixed(4)} +/- ${r.standardError.toFixed(5)} (${r.tokens} tokens in ${r.chunks} windows of ${r.ctx})\n`);
    }
  } finally {
    for (const m of models) m.dispose();
  }
}

/** a failure loading --base, said as "--base: ..." (it named the file only, after --model had loaded) */
function namingBase(e: unknown): unknown {
  if (e instanceof Error) e.message = `--base: ${e.message}`;
  return e;
}

/** the load plan's advice names generate's --ctx-size; this command's window (the context it loads with) is --ctx */
function namingCtx(e: unknown): never {
  if (e instanceof Error && /--ctx-size\b/.test(e.message)) throw new Error(e.message.replace(/--ctx-size\b/g, "--ctx"));
  throw e;
}
