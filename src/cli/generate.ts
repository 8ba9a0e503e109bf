import type { ChatTemplateSource } from "../chat/index.js";
import { formatTimings } from "../generation/index.js";
import type { GenerateOptions, GenerationResult } from "../generation/index.js";
import { PROMPT_NORMALIZATIONS, type PromptNormalization } from "../tokenizer/index.js";
import { loadModel, loadModelForOneRequest, loadPlanRequest, type LoadModelOptions, type Model } from "../llm.js";
import { checkCacheTypes, decoderShape, LOAD_QUANTIZATIONS, openModel, type LoadQuantization } from "../models/index.js";
import { resolveModelReference } from "../hub/index.js";
import { typeFromName, typeName } from "../tensor/index.js";
import { canQuantize } from "../tensor/quant/index.js";
import { checkAttentionOrder, parseKVCacheType, type KVCacheType } from "../kernels/index.js";
import { defaultDraftTokens, memoryBeside, planDraft, refusalInTerms, RequestError, type RefusalTerms } from "../engine/index.js";
import { DEFAULT_BLOCK_SIZE, kvBytesPerToken } from "../cache/index.js";
import { formatBytes, OptionError } from "../units/index.js";
import { randomSeed, samplerStepsFromLlamaCpp, type SamplerStep } from "../sampling/index.js";
import { MODEL_MEANING, backendOption, decimalNumber, escapesOption, ESCAPE_ARGS, flag, memoryMarginOption, optionalModel, optionalNonEmpty, optionalNumber, optionalString, parse, printWarning, processEscapes, requireString, strings, threadsOption, UsageError, type OptionSpec, type ParsedValues } from "./args.js";
import { fileText, modelNamedBy, namedByFlag, readStdinText, readTextFile, readTextInput } from "./input-files.js";
import { EXIT_INTERRUPTED, resolveInterruptibly } from "./interrupt.js";

export const generateHelp = `Usage: tsllm generate --model MODEL (--prompt TEXT | --file FILE | < FILE) [options]

Streams a completion to stdout and the timings to stderr. Ctrl-C stops it where it is: the line
ends, the timings and the seed are printed as at any end, and the status is 130 (as llama.cpp's).
A model folder's generation_config.json gives the defaults of what it sets (max_new_tokens,
do_sample false: greedy, temperature, top_k, top_p, min_p, repetition_penalty), as transformers'
generate reads it; the options below win over it, and their own defaults stand where it is silent.

Options:
  --model MODEL         .gguf file, Hugging Face model folder, or Hub reference org/name[@rev][:QUANT] (required)
  --prompt TEXT         prompt text; BOS is added when the model's metadata says so. Without --prompt or
                        --file, the prompt is read from stdin when that is not a terminal (echo hi | tsllm generate ...)
  --file FILE           read the prompt from this file (UTF-8, else refused; one final line break is dropped, as
                        llama.cpp's -f drops it, and a leading BOM; escapes processed as --prompt's; - reads stdin)
  --max-tokens N        most tokens to generate (default: the model folder's generation_config.json
                        max_new_tokens, else 256; -1 or -2: until the context is full, as llama.cpp's
                        -n -1 / -2, which stop there when context shift is off, its default)
  --temperature T       <= 0 = greedy (default 0.8)
  --top-k K             keep the K most likely tokens; <= 0 = off (default 40)
  --top-p P             nucleus sampling; >= 1 = off, <= 0 keeps only the top token (default 0.95)
  --min-p P             drop tokens below P x the top probability; <= 0 = off, > 1 keeps the one top token (default 0.05)
  --typical-p P         locally typical sampling; >= 1 = off (default 1)
  --samplers LIST       the sampler chain, in order, as llama.cpp's: names split by ";" (penalties, top_k, typ_p,
                        top_p, min_p, temperature; dry, top_n_sigma and xtc, off here, are skipped); one left out
                        does not run (default penalties;top_k;typ_p;top_p;min_p;temperature)
  --sampling-seq SEQ    the same chain one letter each (e k y p m t; d s x skipped), as llama.cpp's
                        (--sampler-seq also; default ekypmt)
  --min-keep N          top-p, min-p and typical-p keep at least N tokens (default 0: one)
  --repeat-penalty R    penalize the last --repeat-last-n tokens; 1 = off, must be > 0 (default 1)
  --repeat-last-n N     how many recent tokens the penalties look at (default 64; 0 = none; -1 = all, as older llama.cpp)
  --frequency-penalty F subtract F x a token's count in that window (default 0)
  --presence-penalty P  subtract P from every token in that window (default 0)
  --seed S              random seed, 0 to 4294967295 (same seed, same text); -1 (default): a random one.
                        The seed used is printed (stderr, or "seed" with --json): give it back to repeat a run
  --stop STR            stop at this text (repeatable)
  --no-escape           take the prompt (--prompt, --file or stdin) and --stop as written; by default, as llama.cpp's
                        tools (-e, --escape), \\n \\r \\t \\' \\" \\\\ and \\xHH in them are that character or byte
  --threads N           compute threads (default -1; 0 or less: all cores)
  --backend NAME        wasm (default), reference or webgpu
  --ctx-size N|auto|0   KV cache size in tokens; auto: the largest that fits in free memory (at most
                        the trained context); 0: the model's trained context (the KV cache is then
                        sized for all of it, 128K tokens on some models). Before loading, a model whose weights + KV cache +
                        scratch do not fit in free memory is refused with what would fit
  --memory-margin SIZE  free memory that auto and the default KV pool leave unused, e.g. 512M, 0
                        (default: TSLLM_MEMORY_MARGIN, else 1G; as llama.cpp's fit target)
  --quantize Q          quantize F32/F16/BF16 weights while loading: q8_0, q6_k, q5_k, q4_k, q3_k, q2_k,
                        q5_1, q5_0, q4_1, q4_0, iq4_nl, iq4_xs, or the in-memory nf4 / int8
  --cache-type-k T      KV cache type of keys: f32 (default), f16, q8_0 (3.8x smaller) or q4_0 (7.1x),
                        as llama.cpp's -ctk
  --cache-type-v T      KV cache type of values, as --cache-type-k (llama.cpp's -ctv)
  --flash-attn on|off|auto  attend in llama.cpp's flash-attention order (on) or its matrix-product order
                        (off; not for q8_0 / q4_0 sides); auto (default): on for a q8_0 / q4_0 side, else off
  --no-warmup           skip the throwaway 2-token run at load that compiles every kernel before the first prompt
  --ignore-eos          keep going past end-of-generation tokens
  --chat                wrap the prompt as a user message in the model's chat template; stop at its end of turn
  --system TEXT         system prompt (with --chat)
  --chat-template T     Jinja chat template to use instead of the model's own (with --chat):
                        a file, or the template itself (text holding {{ or {%, as llama.cpp's own option takes it)
  --chat-template-name NAME  which of the model's own templates to use: default, tool_use, rag... (with --chat)
  --normalize FORM      Unicode-normalize the prompt first: none (default), nfc, or nfkc (full-width -> half-width)
  --logprobs K          report each token's log-probability and the top K alternatives (needs --json)
  --logit-bias ID=BIAS  add BIAS to token ID's logit (repeatable; -inf bans the token)
  --num-beams N         beam search with N beams (Hugging Face semantics; sampling options are ignored)
  --draft-model FILE    speculative decoding with this draft model (same vocabulary; sampling uses the rejection rule)
  --draft-quantize Q    quantize the draft model while loading, as --quantize (e.g. a Q4_0 copy of --model)
  --draft-tokens N      tokens the draft proposes per round (default 8; 10 with --prompt-lookup)
  --prompt-lookup       speculative decoding that drafts from earlier n-grams of the text
  --n N                 N independent completions sharing one prefill; completion i uses seed S + i
  --grammar G           the completion follows this GBNF grammar (llama.cpp's syntax, start rule root):
                        a file, or the grammar itself (text holding ::=, as llama.cpp's own option takes it)
  --json-schema S       the completion is JSON valid under this JSON Schema (a file, or the JSON itself)
  --json-object         the completion is a JSON object
  --choice TEXT         the completion is one of these texts (repeatable)
  --regex RE            the whole completion matches this regular expression
  --json                print one JSON object {prompt, promptTokens, completion, completionTokens, finishReason, timings, seed}
                        (+ finishDetail when finishReason is "length": "maxTokens (N) reached" or "context full (N tokens)";
                        logprobs, beams, speculative when asked for; with --n, choices: [{completion, completionTokens, finishReason}])
  -h, --help            show this help
`;

/** generate-only options: beam search and speculative decoding */
const SEARCH_ARGS: OptionSpec = {
  "num-beams": { type: "string" },
  "draft-model": { type: "string" },
  "draft-quantize": { type: "string" },
  "draft-tokens": { type: "string" },
  "prompt-lookup": { type: "boolean" },
  n: { type: "string" },
};

/** The options of `generate`; `chat` takes the same ones except --prompt, --json and --logprobs. */
export const GENERATE_ARGS: OptionSpec = {
  model: { type: "string" },
  prompt: { type: "string" },
  "max-tokens": { type: "string" },
  temperature: { type: "string" },
  "top-k": { type: "string" },
  "top-p": { type: "string" },
  "min-p": { type: "string" },
  "typical-p": { type: "string" },
  samplers: { type: "string" },
  "sampling-seq": { type: "string" },
  "sampler-seq": { type: "string" },
  "min-keep": { type: "string" },
  "repeat-penalty": { type: "string" },
  "repeat-last-n": { type: "string" },
  "frequency-penalty": { type: "string" },
  "presence-penalty": { type: "string" },
  seed: { type: "string" },
  stop: { type: "string", multiple: true },
  threads: { type: "string" },
  backend: { type: "string" },
  "ctx-size": { type: "string" },
  "memory-margin": { type: "string" },
  quantize: { type: "string" },
  "cache-type-k": { type: "string" },
  "cache-type-v": { type: "string" },
  "flash-attn": { type: "string" },
  "no-warmup": { type: "boolean" },
  "ignore-eos": { type: "boolean" },
  logprobs: { type: "string" },
  "logit-bias": { type: "string", multiple: true },
  json: { type: "boolean" },
  chat: { type: "boolean" },
  system: { type: "string" },
  "chat-template": { type: "string" },
  "chat-template-name": { type: "string" },
  normalize: { type: "string" },
  ...ESCAPE_ARGS,
};

/** generate-only options: what the completion must be */
const CONSTRAINT_ARGS: OptionSpec = {
  grammar: { type: "string" },
  "json-schema": { type: "string" },
  "json-object": { type: "boolean" },
  choice: { type: "string", multiple: true },
  regex: { type: "string" },
};

/** generate's options: GENERATE_ARGS, the search ones and the constraints */
export const GENERATE_OPTIONS: OptionSpec = { ...GENERATE_ARGS, file: { type: "string" }, ...SEARCH_ARGS, ...CONSTRAINT_ARGS };

/**
 * --prompt, --file, or stdin when it is not a terminal: exactly one of them, with the words that
 * name where it came from (a refusal of the prompt names what the user gave, not --prompt)
 */
async function promptFrom(values: ParsedValues): Promise<{ text: string; source: string }> {
  const prompt = optionalString(values, "prompt");
  const file = optionalString(values, "file");
  if (prompt !== undefined && file !== undefined) throw new UsageError("give --prompt or --file, not both");
  // llama.cpp processes escapes (\n) in its params.prompt after parsing, whether -p or -f filled it,
  // unless --no-escape (common/arg.cpp); a pipe's text is -f's here, so it goes the same way
  const escaped = (text: string, source: string) => ({ text: escapesOption(values) ? processEscapes(text, source) : text, source });
  if (prompt !== undefined) return escaped(prompt, "--prompt");
  // an empty FILE is an empty prompt, as llama.cpp's -f (which then starts from BOS alone); an empty pipe is not
  if (file !== undefined) {
    const text = await readTextInput(file, "--file");
    if (file === "-" && text === "") throw new UsageError("no prompt: --file - read an empty stdin (give --prompt TEXT or --file FILE; --prompt \"\" for an empty prompt)");
    return escaped(fileText(text), `--file ${file}`);
  }
  if (process.stdin.isTTY) throw new UsageError("--prompt is required (or --file FILE, or a prompt piped to stdin)");
  const text = await readStdinText("the prompt on stdin");
  // nothing piped is a mistake (a script that spawned us without writing); an empty prompt is --prompt ""
  if (text === "") throw new UsageError("no prompt: stdin was empty (give --prompt TEXT or --file FILE; --prompt \"\" for an empty prompt)");
  return escaped(fileText(text), "the prompt on stdin");
}

/** --grammar FILE|GBNF, --json-schema FILE|JSON, --json-object, --choice TEXT..., --regex RE as the library's constraint options */
function constraintFrom(values: ParsedValues): Pick<GenerateOptions, "grammar" | "jsonSchema" | "json" | "choice" | "regex"> {
  const given = ["grammar", "json-schema", "json-object", "choice", "regex"].filter((k) => values[k] !== undefined && values[k] !== false);
  if (given.length > 1) throw new UsageError(`give one of --grammar, --json-schema, --json-object, --choice and --regex, not ${given.map((g) => `--${g}`).join(" and ")}`);
  const grammar = optionalNonEmpty(values, "grammar", "a GBNF grammar file or the grammar's text");
  // the grammar's text, as llama.cpp's --grammar takes it (its --grammar-file, an alias here, a
  // file): every GBNF grammar defines a rule, "::=", which a file's path does not hold
  if (grammar !== undefined) return { grammar: grammar.includes("::=") ? grammar : readTextFile(grammar, "--grammar") };
  // an empty one ("$SCHEMA" unset) is neither a file nor JSON: readTextFile's "give a file name" told half of it
  const schema = optionalNonEmpty(values, "json-schema", "a JSON Schema file or the schema's JSON");
  if (schema !== undefined) {
    // inline JSON, or a file holding it
    const text = schema.trimStart().startsWith("{") ? schema : readTextFile(schema, "--json-schema");
    try {
      return { jsonSchema: JSON.parse(text) };
    } catch (e) {
      throw new UsageError(`--json-schema: ${schema === text ? "the argument" : schema} is not JSON: ${(e as Error).message}`);
    }
  }
  if (flag(values, "json-object")) return { json: "object" };
  const choice = strings(values, "choice");
  if (choice) return { choice };
  const regex = optionalString(values, "regex");
  return regex !== undefined ? { regex } : {};
}

// (defined beside the Ctrl-C handling of a download, which every command that downloads shares)
export { EXIT_INTERRUPTED };

export async function runGenerate(argv: string[]): Promise<number | undefined> {
  const values = parse(argv, GENERATE_OPTIONS);
  if (flag(values, "help")) { process.stdout.write(generateHelp); return; }
  const modelPath = requireString(values, "model", MODEL_MEANING);
  if (!flag(values, "chat") && (values.system !== undefined || values["chat-template"] !== undefined || values["chat-template-name"] !== undefined)) throw new UsageError("--system, --chat-template and --chat-template-name need --chat");
  const draftPath = optionalModel(values, "draft-model");
  const draftQuantize = draftQuantizeFrom(values);
  if (draftPath === undefined && (draftQuantize !== undefined || values["draft-tokens"] !== undefined && !flag(values, "prompt-lookup"))) {
    throw new UsageError("--draft-quantize and --draft-tokens need --draft-model (or --prompt-lookup for --draft-tokens)");
  }
  if (values["num-beams"] !== undefined && (draftPath !== undefined || flag(values, "prompt-lookup"))) throw new UsageError("--num-beams cannot be combined with --draft-model or --prompt-lookup");
  if (draftPath !== undefined && flag(values, "prompt-lookup")) throw new UsageError("--draft-model and --prompt-lookup are two ways of drafting: choose one");
  // the library's refusal came after the load, naming its own option ("logprobs are not available ...")
  if (values.logprobs !== undefined && (values["num-beams"] !== undefined || draftPath !== undefined || flag(values, "prompt-lookup"))) throw new UsageError("--logprobs cannot be combined with --num-beams, --draft-model or --prompt-lookup (sampling gives the log-probabilities)");
  const nChoices = optionalNumber(values, "n", { integer: true, min: 1 });
  if (nChoices !== undefined && nChoices > 1 && (values["num-beams"] !== undefined || draftPath !== undefined || flag(values, "prompt-lookup"))) {
    throw new UsageError("--n cannot be combined with --num-beams, --draft-model or --prompt-lookup");
  }
  if (values.logprobs !== undefined && !flag(values, "json")) throw new UsageError("--logprobs needs --json (the log-probabilities are part of its result)");
  const constraint = constraintFrom(values);
  if (Object.keys(constraint).length > 0 && (draftPath !== undefined || flag(values, "prompt-lookup"))) {
    throw new UsageError("--grammar, --json-schema, --json-object, --choice and --regex work with sampling and --num-beams, not with --draft-model or --prompt-lookup");
  }
  const options: GenerateOptions = {
    ...generateOptionsFrom(values),
    ...constraint,
    numBeams: optionalNumber(values, "num-beams", { integer: true, min: 1 }),
    draftTokens: optionalNumber(values, "draft-tokens", { integer: true, min: 1 }),
    promptLookup: flag(values, "prompt-lookup") || undefined,
    n: nChoices,
  };
  // read last among the checks: a usage error must not wait for a pipe's end
  const { text: prompt, source: promptSource } = await promptFrom(values);
  // one request here: an engine wide enough for all its beams or choices, where the default is not
  const width = Math.max(options.numBeams ?? 1, options.n ?? 1);
  const widthFlag = (options.numBeams ?? 1) > 1 ? "--num-beams" : (options.n ?? 1) > 1 ? "--n" : undefined;
  // --ctx-size 0: the model's trained context; a draft model shares it
  const loadFlags = loadOptionsFrom(values);
  // a hub reference is downloaded here, where Ctrl-C stops it as it stops tsllm download
  const { path, options: loadOptions } = await withTrainedContext(await resolveInterruptibly("generate", modelPath), loadFlags);
  const draftFile = draftPath === undefined ? undefined : await modelNamedBy("generate", "--draft-model", draftPath);
  // a speculative request's pool holds its context and a round's proposal past it; the draft's
  // weights, scratch and planned draft pool come off what the pool may take (one account)
  const draftOptions = { ...loadOptions, quantize: draftQuantize };
  // (the one load plans both, opening the draft's header: a draft that fails there is named by its flag)
  const model = await loadModelForOneRequest(path, loadOptions, width, draftFile === undefined ? undefined : { ref: draftFile, options: draftOptions, draftTokens: draftTokensOf(options) })
    .catch((e: unknown) => loadRefusalInFlagWords(draftFile !== undefined && draftFile !== path ? namedByFlag(e, "--draft-model", draftFile) : e));
  // (the pool is sized for this one request: its context is what sizes it)
  const draft = draftFile === undefined ? undefined : await loadDraftBeside(model, draftFile, draftOptions, "--ctx-size", draftTokensOf(options)).catch((e: unknown) => { model.dispose(); throw e; });
  if (draft) options.draftModel = draft;
  const remedies = { widthFlag, speculative: draft !== undefined, smallerCache: smallerCacheFlags(model), promptSource };
  // Ctrl-C stops the completion where it is and ends the line, then the timings and the seed
  // (to repeat the run) as at any end, status 130: llama.cpp's sigint_handler prints its
  // timings and exits 130 too. Killed by the signal, the text ended mid-line and the seed of a
  // random run was lost. A second Ctrl-C (a long prompt pass still running) quits at once.
  const interrupt = new AbortController();
  const onInterrupt = () => {
    if (!interrupt.signal.aborted) { interrupt.abort(); return; }
    process.stdout.write("\n");
    process.exit(EXIT_INTERRUPTED);
  };
  process.on("SIGINT", onInterrupt);
  try {
    const streamOptions = { ...options, signal: interrupt.signal };
    const it = startStream(() => flag(values, "chat")
      ? model.streamChat([{ role: "user", content: prompt }], { ...streamOptions, system: optionalString(values, "system"), chatTemplate: chatTemplateFrom(values), chatTemplateName: chatTemplateNameFrom(values) })
      : model.stream(prompt, streamOptions), remedies);
    let result;
    let header = -1;
    for (;;) {
      const r = await it.next().catch((e: unknown) => asUsageError(e, remedies));
      if (r.done) { result = r.value; break; }
      if (flag(values, "json")) continue;
      // with --n the choices stream one after another: a header line before each
      const choice = r.value.choice;
      if (choice !== undefined && choice !== header) {
        process.stdout.write(`${header >= 0 ? "\n" : ""}[choice ${choice}]\n`);
        header = choice;
      }
      process.stdout.write(r.value.text);
    }
    if (flag(values, "json")) {
      const { prompt, promptTokens, completion, completionTokens, finishReason, finishDetail, timings, logprobs, beams, speculative, choices } = result;
      process.stdout.write(JSON.stringify({ prompt, promptTokens, completion, completionTokens, finishReason, ...(finishDetail ? { finishDetail } : {}), timings, seed: options.seed, ...(logprobs ? { logprobs } : {}), ...(beams ? { beams } : {}), ...(speculative ? { speculative } : {}), ...(choices ? { choices } : {}) }) + "\n");
    } else {
      process.stdout.write("\n");
      process.stderr.write(`[${result.finishReason}] ${formatTimings(result.timings)} | seed ${options.seed}\n`);
      writeContextFullNote(result);
      const sp = result.speculative;
      if (sp) process.stderr.write(`speculative: ${sp.accepted}/${sp.drafted} drafted tokens accepted (${(100 * sp.acceptanceRate).toFixed(1)}%), ${sp.tokensPerTargetPass.toFixed(2)} tokens per target pass\n`);
    }
    return interrupt.signal.aborted ? EXIT_INTERRUPTED : undefined;
  } finally {
    process.off("SIGINT", onInterrupt);
    model.dispose();
    draft?.dispose();
  }
}

/** the command line's flag (without its dashes) of a library option: logitBias, logit-bias */
export function flagOf(option: string): string {
  return option.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`);
}

/**
 * The engine refuses a request at submit with a RequestError naming the library's option
 * (stop, logitBias, numBeams, regex, ...): from the command line that is a bad flag, so a usage
 * error (exit 2) naming the flag, in the flags' words (refusalInTerms, as serve words them in
 * its own): a KV cache too small names what the command line sizes it by. `widthFlag`: the
 * flag that made the request wide (--n, --num-beams), which a smaller value of also fits;
 * `speculative`: a request drafting with --draft-model, whose pool holds a round's proposal past the context too;
 * `smallerCache`: the cache types that store the loaded cache in fewer bytes a token
 * (smallerCacheFlags), none where it is already as small as it goes. Other errors pass through.
 */
export function asUsageError(e: unknown, { widthFlag, speculative, smallerCache, promptSource }: StreamRemedies = {}): never {
  if (!(e instanceof RequestError)) throw e;
  const flagName = e.option === "json" ? "--json-object" : e.option === "prompt" && promptSource !== undefined ? promptSource : `--${flagOf(e.option)}`;
  const message = refusalInTerms(e.message.startsWith(`${e.option}: `) ? e.message.slice(e.option.length + 2) : e.message, {
    maxTokens: "--max-tokens",
    // the CLI's pool: what is free less the margin, at least one context. A wide request's pool
    // (loadModelForOneRequest) is already what all of the free memory holds, its width at most
    // (kvPoolBytes): the margin is given up, so a smaller --memory-margin adds nothing to it; so is
    // a speculative request's (its context and a round's proposal past it)
    kvCacheTooSmall: widthFlag !== undefined || speculative
      ? `lower --max-tokens${widthFlag ? ` or ${widthFlag}` : ""}${smallerCache ? `, or make the KV cache smaller per token: ${smallerCache}` : ""}`
      : `lower --max-tokens, or leave the KV cache more memory: a smaller --memory-margin${smallerCache ? `, or ${smallerCache}` : ""}`,
    contextTooSmall: "use a larger --ctx-size or a shorter prompt",
  }).replace(/\bcontextSize\b/g, "--ctx-size"); // the library's option is the command line's --ctx-size
  throw new UsageError(`${flagName}: ${message}`);
}

/** what a refused request's usage error may propose (asUsageError) */
export interface StreamRemedies {
  readonly widthFlag?: string;
  readonly speculative?: boolean;
  readonly smallerCache?: string;
  /** where the prompt came from (--prompt, --file FILE, the prompt on stdin): a refused prompt is named so */
  readonly promptSource?: string;
}

/** starts a library stream: the library refuses a bad option at the call, before any step, so that refusal is a usage error too */
export function startStream<T>(start: () => T, remedies?: StreamRemedies): T {
  try {
    return start();
  } catch (e) {
    return asUsageError(e, remedies);
  }
}

/** how far each side of a KV cache can shrink, q8_0 first (3.8x smaller than f32), f16 where a block format is refused */
const SMALLER_CACHE_TYPES: Readonly<Record<KVCacheType, readonly KVCacheType[]>> = { f32: ["q8_0", "f16"], f16: ["q8_0"], q8_0: ["q4_0"], q4_0: [] };

/**
 * The --cache-type-k / --cache-type-v that store `model`'s KV cache in fewer bytes a token, as
 * its load would take them (its head dim, attention order and backend): undefined where none
 * does (both sides q4_0), so that a refusal does not propose the cache the model already has.
 */
export function smallerCacheFlags(model: Model): string | undefined {
  const types = model.languageModel.kvCacheTypes;
  for (const k of [...SMALLER_CACHE_TYPES[types.k], types.k]) {
    for (const v of [...SMALLER_CACHE_TYPES[types.v], types.v]) {
      if (k === types.k && v === types.v) continue;
      try {
        checkCacheTypes({ ...types, k, v }, model.info.headDim, model.backend);
      } catch {
        continue;
      }
      return `--cache-type-k ${k} --cache-type-v ${v}`;
    }
  }
  return undefined;
}

/** a one-line note on stderr when a completion (any of its choices) stopped because the context was full: the text is cut, not finished */
export function writeContextFullNote(result: GenerationResult): void {
  const full = [result, ...(result.choices ?? [])].find((c) => c.finishDetail?.startsWith("context full"));
  if (full) process.stderr.write(`tsllm: note: generation stopped: ${full.finishDetail}; a larger --ctx-size gives the completion more room\n`);
}

/** --logit-bias ID=BIAS (repeatable): BIAS is a number, or -inf to ban the token */
function parseLogitBias(specs: string[] | undefined): Record<number, number> | undefined {
  if (specs === undefined) return undefined;
  const bias: Record<number, number> = {};
  for (const spec of specs) {
    const m = /^(\d+)=(.+)$/.exec(spec.trim());
    // a decimal number: Number() took 0x10 as 16 and " " as 0
    const value = m ? (/^-inf(inity)?$/i.test(m[2]!) ? -Infinity : decimalNumber(m[2]!)) : undefined;
    if (!m || value === undefined || !(value < Infinity)) {
      throw new UsageError(`--logit-bias expects ID=BIAS (a token id and a number, or -inf), got "${spec}"`);
    }
    bias[Number(m[1])] = (bias[Number(m[1])] ?? 0) + value;
  }
  return bias;
}

/**
 * --max-tokens N; -1 and -2 are llama.cpp's -n -1 ("infinity") and -n -2 ("until the context is
 * filled"): with context shift off, llama.cpp's default and the only mode here, both run until an
 * end of generation, a stop or the full context (finishDetail says which). Other negatives are
 * refused: llama.cpp documents only these two.
 */
function maxTokensFrom(values: ParsedValues): number | undefined {
  if (values["max-tokens"] === "-1" || values["max-tokens"] === "-2") return Number.MAX_SAFE_INTEGER;
  const n = optionalNumber(values, "max-tokens", { integer: true });
  if (n !== undefined && n < 0) throw new UsageError(`--max-tokens must be >= 0, or -1 / -2 for no limit but the context; got ${String(values["max-tokens"])}`);
  return n;
}

/**
 * A sampling knob whose values past its ends mean what the end means, as llama.cpp's sampler
 * reads them (a top-k <= 0 is off, a temperature <= 0 greedy, a top-p >= 1 off): clamped into the
 * library's range rather than refused. Not a number is still refused.
 */
function clampedNumber(values: ParsedValues, name: string, lo: number, hi: number, integer = false): number | undefined {
  const n = optionalNumber(values, name, { integer });
  return n === undefined ? undefined : Math.min(hi, Math.max(lo, n));
}

/**
 * llama.cpp's min-p sampler keeps the tokens whose logit is at least the top one's plus log(p),
 * and always the first of its sorted candidates: above 1 that is the one top token, where the
 * library's min-p 1 keeps every token tied at the top. So a min-p above 1 is top-k 1.
 */
function minPAboveOne(values: ParsedValues): boolean {
  const p = optionalNumber(values, "min-p");
  return p !== undefined && p > 1;
}

/**
 * --stop STR (repeatable): an empty one (--stop "$VAR" with VAR unset) is refused before the model
 * loads, naming the flag; the library's refusal came after the load, as "stop strings[0]: ..."
 */
function stopsFrom(values: ParsedValues): string[] | undefined {
  const stop = strings(values, "stop");
  if (stop?.includes("")) throw new UsageError("--stop is empty; give the text to stop at, or leave the option out");
  // as llama.cpp's reverse prompts (-r): typed escapes processed unless --no-escape, so --stop "\n" is a line break
  return escapesOption(values) ? stop?.map((s) => processEscapes(s, "--stop")) : stop;
}

/** --samplers a;b;c or --sampling-seq / --sampler-seq abc (one of them): llama.cpp's chain as the library's steps */
function samplerOrderFrom(values: ParsedValues): SamplerStep[] | undefined {
  const given = (["samplers", "sampling-seq", "sampler-seq"] as const).filter((f) => optionalString(values, f) !== undefined);
  if (given.length > 1) throw new UsageError(`--${given[0]} and --${given[1]} both set the sampler chain; give one`);
  const flag = given[0];
  if (flag === undefined) return undefined;
  const text = optionalString(values, flag)!;
  try {
    return samplerStepsFromLlamaCpp(flag === "samplers" ? text.split(";") : text, `--${flag}`);
  } catch (e) {
    if (e instanceof OptionError) throw new UsageError(e.message);
    throw e;
  }
}

/** Sampling and stopping options shared by generate and chat. */
export function generateOptionsFrom(values: ParsedValues): GenerateOptions {
  const normalize = optionalString(values, "normalize");
  if (normalize !== undefined && !(PROMPT_NORMALIZATIONS as readonly string[]).includes(normalize)) {
    throw new UsageError(`--normalize must be one of ${PROMPT_NORMALIZATIONS.join(", ")}, got "${normalize}"`);
  }
  return {
    maxTokens: maxTokensFrom(values),
    temperature: clampedNumber(values, "temperature", 0, Infinity),
    topK: minPAboveOne(values) ? 1 : clampedNumber(values, "top-k", 0, Infinity, true),
    topP: clampedNumber(values, "top-p", 0, 1),
    minP: clampedNumber(values, "min-p", 0, 1),
    typicalP: clampedNumber(values, "typical-p", 0, 1),
    minKeep: optionalNumber(values, "min-keep", { integer: true, min: 0 }),
    samplerOrder: samplerOrderFrom(values),
    repeatPenalty: optionalNumber(values, "repeat-penalty", { above: 0 }),
    repeatLastN: optionalNumber(values, "repeat-last-n", { integer: true, min: -1 }),
    frequencyPenalty: optionalNumber(values, "frequency-penalty"),
    presencePenalty: optionalNumber(values, "presence-penalty"),
    seed: seedFrom(values),
    stop: stopsFrom(values),
    ignoreEos: flag(values, "ignore-eos"),
    logprobs: optionalNumber(values, "logprobs", { integer: true, min: 0 }),
    logitBias: parseLogitBias(strings(values, "logit-bias")),
    normalize: normalize as PromptNormalization | undefined,
  };
}

/** the seeds the sampler tells apart: mt19937 takes a uint32, as llama.cpp's --seed */
const MAX_SEED = 2 ** 32 - 1;

/**
 * --seed S, or -1 (llama.cpp's LLAMA_DEFAULT_SEED) or none: a random seed. The random one is drawn
 * here rather than in the library so that the command can say which seed it used: that seed given
 * back with --seed repeats the run.
 */
export function seedFrom(values: ParsedValues): number {
  const text = optionalString(values, "seed");
  if (text === undefined || text === "-1") return randomSeed();
  // compared as text: past 2^53 a Number would round to a seed nobody typed
  if (!/^\d+$/.test(text) || BigInt(text) > BigInt(MAX_SEED)) throw new UsageError(`--seed must be an integer from 0 to ${MAX_SEED}, or -1 for a random seed; got "${text}"`);
  return Number(text);
}

/** Backend, threads, context size, quantization, cache types and warm-up, shared by generate, chat and serve. */
export function loadOptionsFrom(values: ParsedValues): LoadModelOptions {
  const cacheTypes = cacheTypesFrom(values), flash = flashAttentionFrom(values);
  try {
    // refused here in the flags' words (loadModel's refusal names the library's options)
    checkAttentionOrder({ k: cacheTypes.cacheTypeK ?? "f32", v: cacheTypes.cacheTypeV ?? "f32", ...flash }, { k: "--cache-type-k", v: "--cache-type-v", flashOn: "leave --flash-attn auto or on" });
  } catch (e) {
    throw new UsageError((e as Error).message);
  }
  const memoryMargin = memoryMarginOption(values);
  return {
    backend: backendOption(values),
    threads: threadsOption(values),
    contextSize: ctxSizeFrom(values),
    // absent: loadModel reads TSLLM_MEMORY_MARGIN
    ...(memoryMargin !== undefined ? { memoryMargin } : {}),
    quantize: quantizeFrom(values),
    ...cacheTypes,
    ...flash,
    ...(values["no-warmup"] === true ? { warmup: false } : {}),
    onWarning: (message) => printWarning(inFlagWords(message)),
  };
}

/**
 * The flags that set what the load's refusals and warnings (the memory plan's, the KV pool's, the
 * margin given up) name by the library's options: --ctx-size, --parallel, --kv-memory,
 * --cache-type-k / --cache-type-v, --memory-margin (bench words its own: src/bench/tsllm-engine.ts)
 */
const LOAD_FLAG_TERMS: RefusalTerms = {
  contextSize: (tokens) => `--ctx-size ${tokens}`,
  maxSequences: (n) => `--parallel ${n}`,
  kvCacheBytes: (bytes, note) => `--kv-memory ${bytes}${note === "" ? "" : ` (${note})`}`,
  cacheTypes: "--cache-type-k / --cache-type-v",
  context: (tokens) => `--ctx-size ${tokens}`,
  kvBudget: (bytes) => `--kv-memory ${bytes}`,
  memoryMargin: "--memory-margin",
};

/** a load's refusal or warning in the command line's flags (LOAD_FLAG_TERMS; a wide request's n / numBeams as --n / --num-beams) */
export function inFlagWords(message: string): string {
  return refusalInTerms(message, LOAD_FLAG_TERMS).replace("(n / numBeams)", "(--n / --num-beams)");
}

/** a load's refusal rethrown in the command line's flags (inFlagWords), its class kept */
export function loadRefusalInFlagWords(e: unknown): never {
  if (e instanceof Error) e.message = inFlagWords(e.message);
  throw e;
}

/** the largest trained context the loaders accept (src/models/hyperparameters.ts, src/formats/hf-config.ts) */
export const MAX_CONTEXT = 1 << 24;

/**
 * --ctx-size N, "auto" (the largest context that fits in free memory, at most the trained one),
 * or 0: the model's trained context (TRAINED_CONTEXT, as llama.cpp's -c 0), which the command
 * turns into a size with withTrainedContext before loading.
 */
export function ctxSizeFrom(values: ParsedValues): number | "auto" | undefined {
  // at most the longest trained context a model file may declare: beyond it no model is meant to
  // run, and the load's memory plan hung on sizes such as 2^52
  return values["ctx-size"] === "auto" ? "auto" : optionalNumber(values, "ctx-size", { integer: true, min: 0, max: MAX_CONTEXT });
}

/** the context size flag's 0: the model's trained context (llama.cpp's -c 0) */
export const TRAINED_CONTEXT = 0;

/**
 * The load options with a context size of TRAINED_CONTEXT replaced by the model's trained
 * context, read from its header (the library takes a positive size or "auto"); `path` is what to
 * load (a Hub reference resolved once here). The KV pool is then sized for that context, and the
 * load's memory plan refuses one that does not fit, saying what would.
 */
export async function withTrainedContext(ref: string, options: LoadModelOptions, flagName = "--ctx-size"): Promise<{ path: string; options: LoadModelOptions }> {
  if (options.contextSize !== TRAINED_CONTEXT) return { path: ref, options };
  const path = await resolveModelReference(ref);
  return { path, options: { ...options, contextSize: trainedContextOf(path, flagName) } };
}

/** the trained context length in the model's header (config.json's max_position_embeddings, GGUF's context_length) */
export function trainedContextOf(path: string, flagName: string): number {
  const trained = decoderShape(openModel(path).metadata)?.contextLength;
  if (trained === undefined) throw new UsageError(`${flagName} ${TRAINED_CONTEXT} (the model's trained context): ${path} does not say its trained context; give a size`);
  return trained;
}

/** --cache-type-k / --cache-type-v */
export function cacheTypesFrom(values: ParsedValues): Pick<LoadModelOptions, "cacheTypeK" | "cacheTypeV"> {
  const parse = (flagName: string) => {
    const v = optionalString(values, flagName);
    if (v === undefined) return undefined;
    try {
      return parseKVCacheType(v, `--${flagName}`);
    } catch (e) {
      throw new UsageError((e as Error).message);
    }
  };
  return { cacheTypeK: parse("cache-type-k"), cacheTypeV: parse("cache-type-v") };
}

/** --flash-attn on|off|auto (llama.cpp's -fa): the order attention reads the KV cache in (auto: unset) */
export function flashAttentionFrom(values: ParsedValues): Pick<LoadModelOptions, "flashAttention"> {
  const v = optionalString(values, "flash-attn");
  if (v === undefined || v === "auto") return {};
  if (v === "on" || v === "off") return { flashAttention: v === "on" };
  throw new UsageError(`--flash-attn must be on, off or auto, got "${v}"`);
}

const QUANTIZE_CHOICES = `${LOAD_QUANTIZATIONS.slice(0, -1).join(", ")} or ${LOAD_QUANTIZATIONS.at(-1)}`;
const isLoadQuantization = (q: string): q is LoadQuantization => (LOAD_QUANTIZATIONS as readonly string[]).includes(q);

/**
 * --draft-model FILE held to the library's rule (Model.draftMismatch: the model's vocabulary, its
 * size and its tokens' texts), in one line naming both files; the draft is disposed first
 */
export function refuseForeignDraft(model: Model, draft: Model, file: string): void {
  const mismatch = model.draftMismatch(draft, `--model ${model.path}`);
  if (mismatch === undefined) return;
  draft.dispose();
  throw new UsageError(`--draft-model ${file}: ${mismatch}: a draft model must share the model's vocabulary`);
}

/**
 * --draft-model FILE loaded beside `model` as one memory plan, in flag words: the draft's weights,
 * scratch and the draft cache its first request takes (planDraft) must fit in what the model
 * leaves of the free memory (memoryBeside: measured now, less what its KV pool may still grow
 * into; a given figure, less all of the model's plan). The draft's own engine gets a pool of one
 * block, never used: a speculative request's draft cache comes from the pool the model's engine
 * keeps for the draft, of the planned size (Engine.planDraftCache; a request it has no room for
 * decodes without drafting), its own room, not charged to the model's pool. generate's model was
 * planned with the draft beside it (loadModelForOneRequest), so its pool left this room.
 * (`draftTokens`: the tokens a round proposes, which the draft cache holds past the context).
 * Loaded at the model's context, one sequence;
 * refused in one line naming --draft-model and `lower` (the flags that size the model's pool);
 * then held to the vocabulary rule (refuseForeignDraft).
 */
export async function loadDraftBeside(model: Model, file: string, options: LoadModelOptions, lower: string, draftTokens: number): Promise<Model> {
  const loaded = model.memory;
  const { free, room, taken, measured } = memoryBeside(loaded, options.availableMemory);
  const at = { ...options, contextSize: model.contextSize, maxSequences: 1, availableMemory: room };
  const draft = await (async () => {
    const r = loadPlanRequest(openModel(file), at, model.contextSize);
    const block = r && DEFAULT_BLOCK_SIZE * kvBytesPerToken(r.shape, r.kvCacheTypes);
    const p = r && planDraft(r, draftTokens);
    if (p && p.totalBytes > room) {
      // (the --model's share: with the free memory measured now, the pool's growth; with a given figure, all of its plan)
      const model = measured ? `--model's KV pool may still grow into ${formatBytes(taken)} (its budget ${formatBytes(loaded.budgetBytes)}, ${formatBytes(loaded.storedBytes)} allocated)` : `--model takes ${formatBytes(taken)} (weights and scratch ${formatBytes(loaded.residentBytes)} + its KV pool's budget ${formatBytes(loaded.budgetBytes)})`;
      throw new UsageError(`--draft-model ${file}: needs ${formatBytes(p.totalBytes)} (weights ${formatBytes(p.weightBytes)} ${p.weightType} + scratch ${formatBytes(p.scratchBytes)} + its draft cache of ${p.kvTokens} tokens ${formatBytes(p.kvCacheBytes)}), but of the ${formatBytes(free)} free, ${model}: lower ${lower}, or make the draft smaller (--draft-quantize)`);
    }
    return loadModel(file, block === undefined ? at : { ...at, kvCacheBytes: block });
  })().catch((e: unknown) => {
    if (e instanceof UsageError) throw e;
    // (named by its flag: the message names its file, but not that it is the draft)
    if (e instanceof Error) e.message = `--draft-model: ${e.message}`;
    return loadRefusalInFlagWords(e);
  });
  refuseForeignDraft(model, draft, file);
  // its draft pool the size this plan counts (planDraft), which concurrent requests never grow
  model.engine.planDraftCache(draft.languageModel, draftTokens);
  return draft;
}

/** the tokens a draft model proposes a round: --draft-tokens, else the engine's default (the draft's cache holds them past the context) */
export function draftTokensOf(options: { draftTokens?: number }): number {
  return options.draftTokens ?? defaultDraftTokens(true);
}

/** --draft-quantize: what the draft model's weights are quantized to while it loads, as --quantize's */
export function draftQuantizeFrom(values: ParsedValues): LoadQuantization | undefined {
  const q = optionalString(values, "draft-quantize");
  if (q !== undefined && !isLoadQuantization(q)) throw new UsageError(`--draft-quantize must be ${QUANTIZE_CHOICES}, got "${q}"`);
  return q;
}

function quantizeFrom(values: ParsedValues): LoadModelOptions["quantize"] {
  const q = optionalString(values, "quantize");
  if (q !== undefined && !isLoadQuantization(q)) {
    const type = typeFromName(q);
    const why = type !== undefined && !canQuantize(type) ? ` (${typeName(type)} has no quantizer here; ${typeName(type)} GGUF files load as they are)` : "";
    throw new UsageError(`--quantize must be ${QUANTIZE_CHOICES}, got "${q}"${why}`);
  }
  return q;
}

/** --chat-template-name: one of the model's own templates by name (ChatOptions.chatTemplateName) */
export function chatTemplateNameFrom(values: ParsedValues): string | undefined {
  const name = optionalString(values, "chat-template-name");
  if (name === "") throw new UsageError("--chat-template-name is empty: give the name of one of the model's chat templates (default, tool_use...)");
  return name;
}

/**
 * The --chat-template (llama.cpp's --chat-template-file) template, if given, named by the flag in
 * errors: the text itself when it holds Jinja's `{{` or `{%` (llama.cpp's --chat-template and
 * vLLM's take the text; no file name holds them), else a file's text.
 */
export function chatTemplateFrom(values: ParsedValues): ChatTemplateSource | undefined {
  const given = optionalString(values, "chat-template");
  if (given === undefined) return undefined;
  if (values["chat-template-name"] !== undefined) throw new UsageError("--chat-template-name names one of the model's own templates; --chat-template replaces them: give one of the two");
  // the whole template as its name in every error would bury the error
  if (/\{[{%]/.test(given)) return { source: given, where: "--chat-template's text" };
  try {
    return { source: readTextFile(given, "--chat-template"), where: `--chat-template ${given}` };
  } catch (e) {
    // llama.cpp's --chat-template also takes its built-in names (chatml, llama3, ...): "no such file" alone misled
    if (e instanceof Error && !(e instanceof UsageError) && e.message.endsWith(": no such file") && /^[\w-]+$/.test(given)) {
      throw new Error(`${e.message} (tsllm has no built-in templates such as llama.cpp's ${given}: give a Jinja file or the template's text)`);
    }
    throw e;
  }
}
