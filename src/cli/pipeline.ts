import {
  DEFAULT_MODELS, PIPELINE_TASKS, pipeline, type AggregationStrategy, type FeatureExtractionPipeline, type FillMaskPipeline, type PipelineTask, type TextClassificationPipeline,
  type TextGenerationPipeline, type TokenClassificationPipeline,
} from "../pipelines/index.js";
import { closest, OptionError } from "../units/index.js";
import { flagOf, seedFrom } from "./generate.js";
import { resolveInterruptibly } from "./interrupt.js";
import { MODEL_MEANING, backendOption, decimalNumber, flag, inputLabel, memoryMarginOption, optionalNonEmpty, optionalNumber, optionalString, parse, printWarning, requireString, strings, threadsOption, UsageError, type OptionSpec, type ParsedValues } from "./args.js";

export const pipelineHelp = `Usage: tsllm pipeline TASK --model MODEL --input TEXT [--input TEXT]... [--top-k K]
                      [--pair TEXT]... [--function-to-apply F] [--aggregation-strategy S]
                      [--ignore-labels L,...] [--stride N] [--is-split-into-words [--delimiter D] [--input-json]]
                      [--target WORD]... [--max-new-tokens N] [--max-length N] [--do-sample | --no-do-sample]
                      [--temperature T] [--top-p P] [--typical-p P] [--epsilon-cutoff E] [--eta-cutoff E]
                      [--repetition-penalty R] [--no-repeat-ngram-size N]
                      [--min-new-tokens N] [--min-length N] [--suppress-tokens ID,...]
                      [--begin-suppress-tokens ID,...] [--bad-words-ids ID,...]... [--sequence-bias ID,...=BIAS]...
                      [--forced-bos-token-id ID] [--forced-eos-token-id ID,...]
                      [--exponential-decay-length-penalty START,FACTOR] [--seed S] [--memory-margin SIZE]
                      [--threads N] [--backend wasm|reference|webgpu] [--json]

Runs a Hugging Face-style pipeline on each input. TASK: ${PIPELINE_TASKS.join(", ")}.
An option meant for other tasks (as its text below says) is a usage error, not ignored.
With several inputs, a warning or error about one names it: input 1 ("its first words...").

Options:
  --model MODEL                 HF folder or Hub id (default: transformers' default model for TASK)
  --input TEXT                  an input (repeatable; required)
  --pair TEXT                   text-classification: the second text of the input at the same place (repeatable)
  --top-k K                     labels (text-classification; "all" for every label) or proposals (fill-mask, default 5),
                                0 for none;
                                text-generation: sampling's top-k, 0 for none (default: the folder's top_k, else 50)
  --function-to-apply F         text-classification: softmax, sigmoid or none (default: the model's, as transformers)
  --aggregation-strategy S      token-classification: none (default), simple, first, average, max
  --ignore-labels L,...         token-classification: labels left out, comma-separated (default O; "" keeps all)
  --stride N                    token-classification: read an input longer than the model in windows sharing N
                                tokens, merging their entities (transformers' stride; with no aggregation
                                strategy given, each token once; refused with none given, as transformers)
  --is-split-into-words         token-classification: each --input is pre-split words joined by --delimiter, each
                                word tokenized alone (transformers' is_split_into_words; WordPiece models)
  --delimiter D                 token-classification: what joins the words of --is-split-into-words (default one
                                space); the spans index the --input as given
  --input-json                  token-classification, with --is-split-into-words: each --input is a JSON list of
                                words ('["New York", "is", "big"]'), so a word may hold the delimiter; the spans
                                index the words joined by --delimiter
  --target WORD                 fill-mask: score only this token (repeatable; transformers' targets)
  --max-new-tokens N            text-generation: new tokens at most, 1 or more (default: the model folder's
                                generation_config.json max_new_tokens, else 256)
  --max-length N                text-generation: tokens in all, the prompt's included, more than the prompt's
                                (unused beside the folder's max_new_tokens, as transformers); token-classification:
                                tokens the model reads at once, special tokens included (default the model's)
  --do-sample, --no-do-sample   text-generation: sample, or decode greedily (default: the folder's
                                generation_config.json do_sample, else greedy, as transformers)
  --temperature T               text-generation: sampling's temperature, above 0 (default: the folder's, else 1)
  --top-p P                     text-generation: sampling's top-p, 0 to 1 (default: the folder's top_p, else 1)
  --typical-p P                 text-generation: locally typical sampling's mass, above 0, 1 or more for none
                                (default: the folder's typical_p, else none; transformers' typical_p)
  --epsilon-cutoff E            text-generation: sampling drops the tokens less likely than E, after typical-p;
                                0 < E < 1 cuts, other numbers none (default: the folder's epsilon_cutoff, else
                                none; transformers' epsilon_cutoff)
  --eta-cutoff E                text-generation: as --epsilon-cutoff with the cutoff min(E, sqrt(E) *
                                exp(-entropy)), after it (default: the folder's eta_cutoff, else none;
                                transformers' eta_cutoff)
  --repetition-penalty R        text-generation: divides the logit of each token already in the prompt or reply
                                (multiplies a negative one), above 0, 1 for none; greedy or sampling (default:
                                the folder's repetition_penalty, else 1; transformers' repetition_penalty)
  --no-repeat-ngram-size N      text-generation: never repeat an n-gram of N tokens, the prompt's included (a
                                token that would is banned), 0 for none; greedy or sampling (default: the
                                folder's no_repeat_ngram_size, else 0; transformers' no_repeat_ngram_size)
  --min-new-tokens N            text-generation: EOS is banned until N new tokens (default: the folder's
                                min_new_tokens, else none; it wins over any min-length, as transformers)
  --min-length N                text-generation: EOS is banned until N tokens in all, the prompt's included
                                (default: the folder's min_length, else 0; transformers' min_length)
  --suppress-tokens ID,...      text-generation: token ids never generated ("" for none: the folder's off)
                                (default: the folder's suppress_tokens; transformers' suppress_tokens)
  --begin-suppress-tokens ID,...
                                text-generation: token ids not generated first ("" for none) (default: the
                                folder's begin_suppress_tokens; transformers' begin_suppress_tokens)
  --bad-words-ids ID,...        text-generation: a token sequence never generated: its last token is banned where
                                the text so far ends with the rest (repeatable; "" alone for none; default: the
                                folder's bad_words_ids; transformers' bad_words_ids)
  --sequence-bias ID,...=BIAS   text-generation: BIAS added to the sequence's last token's logit where the text so
                                far ends with the rest (repeatable; default: the folder's sequence_bias;
                                transformers' sequence_bias)
  --forced-bos-token-id ID      text-generation: the token generated first where the prompt is one token (an empty
                                --input starts from BOS) ("" for none: the folder's off) (default: the folder's;
                                transformers' forced_bos_token_id)
  --forced-eos-token-id ID,...  text-generation: the token (or one of them) generated last, at the last step the
                                budget allows ("" for none: the folder's off) (default: the folder's;
                                transformers' forced_eos_token_id)
  --exponential-decay-length-penalty START,FACTOR
                                text-generation: after START new tokens, EOS's logit gains |logit| * (FACTOR^(new
                                tokens - START) - 1) at each step, after the repetition penalty (default: the
                                folder's; transformers' exponential_decay_length_penalty)
  --seed S                      text-generation: the sampler's seed, 0 to 4294967295 (same seed, same text); -1
                                (default): a random one, printed (stderr) when the run samples: give it back to
                                repeat the run (with --json, a run that samples gives each result its "seed")
  --memory-margin SIZE          text-generation: free memory the default KV pool leaves unused, e.g. 512M, 0
                                (default: TSLLM_MEMORY_MARGIN, else 1G; as generate and llama.cpp's fit target)
  --threads N                   worker threads
  --backend NAME                wasm (default), reference or webgpu
  --json                        one JSON array, one element per input: what transformers' pipeline returns for it
                                (text-generation that samples: each generated_text beside the "seed" used)
  -h, --help                    show this help
`;

const STRATEGIES = ["none", "simple", "first", "average", "max"];
const FUNCTIONS = ["softmax", "sigmoid", "none"];

/** the options only some tasks take: given to another task they would be silently ignored */
const TASK_OPTIONS: Readonly<Record<string, readonly PipelineTask[]>> = {
  pair: ["text-classification", "sentiment-analysis"],
  "top-k": ["text-classification", "sentiment-analysis", "fill-mask", "text-generation"],
  "function-to-apply": ["text-classification", "sentiment-analysis"],
  "aggregation-strategy": ["token-classification", "ner"],
  "ignore-labels": ["token-classification", "ner"],
  stride: ["token-classification", "ner"],
  "is-split-into-words": ["token-classification", "ner"],
  delimiter: ["token-classification", "ner"],
  "input-json": ["token-classification", "ner"],
  target: ["fill-mask"],
  "max-new-tokens": ["text-generation"],
  "max-length": ["text-generation", "token-classification", "ner"],
  "memory-margin": ["text-generation"],
  "do-sample": ["text-generation"],
  "no-do-sample": ["text-generation"],
  temperature: ["text-generation"],
  "top-p": ["text-generation"],
  "typical-p": ["text-generation"],
  "epsilon-cutoff": ["text-generation"],
  "eta-cutoff": ["text-generation"],
  "repetition-penalty": ["text-generation"],
  "no-repeat-ngram-size": ["text-generation"],
  "min-new-tokens": ["text-generation"],
  "min-length": ["text-generation"],
  "suppress-tokens": ["text-generation"],
  "begin-suppress-tokens": ["text-generation"],
  "bad-words-ids": ["text-generation"],
  "sequence-bias": ["text-generation"],
  "forced-bos-token-id": ["text-generation"],
  "forced-eos-token-id": ["text-generation"],
  "exponential-decay-length-penalty": ["text-generation"],
  seed: ["text-generation"],
};

export const PIPELINE_ARGS: OptionSpec = {
  model: { type: "string" }, input: { type: "string", multiple: true }, pair: { type: "string", multiple: true }, "top-k": { type: "string" },
  "function-to-apply": { type: "string" }, "aggregation-strategy": { type: "string" }, "ignore-labels": { type: "string" }, target: { type: "string", multiple: true },
  stride: { type: "string" }, "is-split-into-words": { type: "boolean" }, delimiter: { type: "string" }, "input-json": { type: "boolean" },
  "max-new-tokens": { type: "string" }, "max-length": { type: "string" }, "memory-margin": { type: "string" },
  "do-sample": { type: "boolean" }, "no-do-sample": { type: "boolean" }, temperature: { type: "string" }, "top-p": { type: "string" }, "typical-p": { type: "string" },
  "epsilon-cutoff": { type: "string" }, "eta-cutoff": { type: "string" }, "repetition-penalty": { type: "string" },
  "no-repeat-ngram-size": { type: "string" }, "min-new-tokens": { type: "string" }, "min-length": { type: "string" },
  "suppress-tokens": { type: "string" }, "begin-suppress-tokens": { type: "string" }, "bad-words-ids": { type: "string", multiple: true }, "sequence-bias": { type: "string", multiple: true },
  "forced-bos-token-id": { type: "string" }, "forced-eos-token-id": { type: "string" }, "exponential-decay-length-penalty": { type: "string" }, seed: { type: "string" }, threads: { type: "string" }, backend: { type: "string" }, json: { type: "boolean" },
};

/** the text-generation flags of token ids, whose library option (its name in camel case) the engine checks against the vocabulary */
const TOKEN_ID_FLAGS = ["suppress-tokens", "begin-suppress-tokens", "bad-words-ids", "sequence-bias", "forced-bos-token-id", "forced-eos-token-id"] as const;

/** `text` as token ids separated by commas (decimal, >= 0); "" is none where `empty` (a folder's list turned off) */
function tokenIds(text: string, name: string, empty: boolean): number[] {
  if (text.trim() === "" && empty) return [];
  const parts = text.split(",").map((t) => t.trim());
  if (!parts.every((t) => /^\d+$/.test(t) && Number.isSafeInteger(Number(t)))) {
    throw new UsageError(`--${name} expects token ids separated by commas (such as 35169,7675${empty ? `; "" for none` : ""}), got "${text}"`);
  }
  return parts.map(Number);
}

function tokenIdsOption(values: ParsedValues, name: string, empty: boolean): number[] | undefined {
  const text = optionalString(values, name);
  return text === undefined ? undefined : tokenIds(text, name, empty);
}

/** --sequence-bias ID,...=BIAS (repeatable), as --logit-bias ID=BIAS writes a bias: the pairs transformers' sequence_bias lists */
function sequenceBiasOption(values: ParsedValues): [number[], number][] | undefined {
  return strings(values, "sequence-bias")?.map((spec) => {
    const at = spec.lastIndexOf("=");
    const bias = at < 0 ? undefined : decimalNumber(spec.slice(at + 1).trim());
    if (bias === undefined || !Number.isFinite(bias)) throw new UsageError(`--sequence-bias expects ID,...=BIAS (token ids separated by commas and a finite number), got "${spec}"`);
    return [tokenIds(spec.slice(0, at), "sequence-bias", false), bias];
  });
}

/** --exponential-decay-length-penalty START,FACTOR: the pair transformers' exponential_decay_length_penalty takes */
function decayOption(values: ParsedValues): [number, number] | undefined {
  const text = optionalString(values, "exponential-decay-length-penalty");
  if (text === undefined) return undefined;
  const [start, factor, ...rest] = text.split(",").map((t) => t.trim());
  const f = factor === undefined ? undefined : decimalNumber(factor);
  if (rest.length > 0 || start === undefined || !/^-?\d+$/.test(start) || !Number.isSafeInteger(Number(start)) || f === undefined || !Number.isFinite(f)) {
    throw new UsageError(`--exponential-decay-length-penalty expects START,FACTOR (an integer and a finite number, such as 10,1.5), got "${text}"`);
  }
  return [Number(start), f];
}

export async function runPipeline(argv: string[]): Promise<void> {
  const task = argv[0] !== undefined && !argv[0].startsWith("-") ? argv[0] : undefined;
  const values = parse(task === undefined ? argv : argv.slice(1), PIPELINE_ARGS);
  if (flag(values, "help")) { process.stdout.write(pipelineHelp); return; }
  if (task === undefined) throw new UsageError(`a TASK is required (${PIPELINE_TASKS.join(", ")})`);
  if (!PIPELINE_TASKS.includes(task as PipelineTask)) {
    // transformers' task aliases (sentiment-analysis, ner) are among the names, so are suggested too
    const suggestion = closest(task, PIPELINE_TASKS);
    throw new UsageError(`unknown task "${task}" (${suggestion ? `did you mean "${suggestion}"?` : `tasks: ${PIPELINE_TASKS.join(", ")}`})`);
  }
  for (const [name, tasks] of Object.entries(TASK_OPTIONS)) {
    if (values[name] !== undefined && !tasks.includes(task as PipelineTask)) throw new UsageError(`--${name} is for ${tasks.join(", ")}, not ${task}`);
  }
  const inputs = strings(values, "input");
  if (!inputs || inputs.length === 0) throw new UsageError("--input is required");
  const pairs = strings(values, "pair") ?? [];
  if (pairs.length > inputs.length) throw new UsageError(`${pairs.length} --pair for ${inputs.length} --input`);
  const topKText = optionalString(values, "top-k");
  // fill-mask has no "every token" (transformers' top_k=None there is its default, 5)
  if (topKText === "all" && task === "fill-mask") throw new UsageError(`--top-k all is for text-classification, sentiment-analysis; fill-mask takes a number of proposals`);
  if (topKText === "all" && task === "text-generation") throw new UsageError(`--top-k all is for text-classification, sentiment-analysis; text-generation takes sampling's top-k (0 for none)`);
  // text-generation's top-k 0 keeps every token (transformers adds no TopKLogitsWarper for it); elsewhere 0 asks for
  // no label or proposal (transformers' slice [:0], topk(0)): an empty list, as the library answers
  const topK = topKText === "all" ? null : optionalNumber(values, "top-k", { integer: true, min: 0 });
  // in any case, as the library and transformers (AggregationStrategy[name.upper()]) read them
  const strategy = optionalString(values, "aggregation-strategy")?.toLowerCase();
  if (strategy !== undefined && !STRATEGIES.includes(strategy)) throw new UsageError(`--aggregation-strategy must be one of ${STRATEGIES.join(", ")}, got "${strategy}"`);
  const functionToApply = optionalString(values, "function-to-apply")?.toLowerCase();
  if (functionToApply !== undefined && !FUNCTIONS.includes(functionToApply)) throw new UsageError(`--function-to-apply must be one of ${FUNCTIONS.join(", ")}, got "${functionToApply}"`);
  const ignoreLabelsText = optionalString(values, "ignore-labels");
  const ignoreLabels = ignoreLabelsText === undefined ? undefined : ignoreLabelsText.split(",").map((l) => l.trim()).filter((l) => l !== "");
  const targets = strings(values, "target");
  const stride = optionalNumber(values, "stride", { integer: true, min: 0 });
  // transformers refuses stride beside aggregation_strategy "none" given with it; left out, it reads the windows token by token
  if (stride !== undefined && strategy === "none") throw new UsageError(`--stride with --aggregation-strategy none is refused, as transformers refuses it: give simple, first, average or max, or leave --aggregation-strategy out for each token's entry (a token two windows share once)`);
  const words = flag(values, "is-split-into-words");
  // an --input is split at it, so an empty one would split it into characters
  const delimiter = optionalNonEmpty(values, "delimiter", "the text joining the words of --is-split-into-words");
  if (delimiter !== undefined && !words) throw new UsageError("--delimiter joins the words of --is-split-into-words; give that too");
  const json = flag(values, "input-json");
  if (json && !words) throw new UsageError("--input-json reads each --input as the words of --is-split-into-words; give that too");
  // each --input's words, checked before the model loads: split at the delimiter, or a JSON list (a word may then hold the delimiter)
  const wordLists = !words ? undefined : inputs.map((text, i) => (json ? jsonWords(text, inputs.length === 1 ? "--input" : `--input ${i}`) : text.split(delimiter ?? " ")));
  // at least one, as transformers' GenerationConfig.validate ("max_new_tokens must be greater than 0")
  const maxNewTokens = optionalNumber(values, "max-new-tokens", { integer: true, min: 1 });
  // an encoder's window holds its special tokens and at least one more
  const encoder = task !== "text-generation";
  const maxLength = optionalNumber(values, "max-length", { integer: true, min: encoder ? 2 : 1 });
  if (flag(values, "do-sample") && flag(values, "no-do-sample")) throw new UsageError("--do-sample and --no-do-sample: give one");
  const doSample = flag(values, "do-sample") ? true : flag(values, "no-do-sample") ? false : undefined;
  const temperature = optionalNumber(values, "temperature", { min: 0 });
  const topP = optionalNumber(values, "top-p", { min: 0, max: 1 });
  // transformers' TypicalLogitsWarper takes a mass above 0; generate() adds the cutoffs' warpers only for 0 < x < 1, other numbers none
  const cutoffs = { typicalP: optionalNumber(values, "typical-p", { above: 0 }), epsilonCutoff: optionalNumber(values, "epsilon-cutoff"), etaCutoff: optionalNumber(values, "eta-cutoff") };
  // transformers' RepetitionPenaltyLogitsProcessor takes a strictly positive penalty
  const repetitionPenalty = optionalNumber(values, "repetition-penalty", { above: 0 });
  // transformers' logits processors: whole numbers, 0 adding none
  const noRepeatNgramSize = optionalNumber(values, "no-repeat-ngram-size", { integer: true, min: 0 });
  const minNewTokens = optionalNumber(values, "min-new-tokens", { integer: true, min: 0 });
  const minLength = optionalNumber(values, "min-length", { integer: true, min: 0 });
  // "" for none, as the list flags': the folder's forced token off (the library's null, transformers' None)
  const forcedBosTokenId = optionalString(values, "forced-bos-token-id")?.trim() === "" ? null : optionalNumber(values, "forced-bos-token-id", { integer: true, min: 0 });
  const forcedEos = tokenIdsOption(values, "forced-eos-token-id", true);
  const listBans = {
    suppressTokens: tokenIdsOption(values, "suppress-tokens", true), beginSuppressTokens: tokenIdsOption(values, "begin-suppress-tokens", true),
    // an empty --bad-words-ids adds no sequence: given alone, the folder's are off
    badWordsIds: strings(values, "bad-words-ids")?.map((text) => tokenIds(text, "bad-words-ids", true)).filter((seq) => seq.length > 0), sequenceBias: sequenceBiasOption(values),
    forcedBosTokenId, forcedEosTokenId: forcedEos?.length === 0 ? null : forcedEos?.length === 1 ? forcedEos[0] : forcedEos,
    exponentialDecayLengthPenalty: decayOption(values),
  };
  const bans = {
    ...(noRepeatNgramSize === undefined ? {} : { noRepeatNgramSize }), ...(minNewTokens === undefined ? {} : { minNewTokens }), ...(minLength === undefined ? {} : { minLength }),
    ...Object.fromEntries(Object.entries(listBans).filter(([, v]) => v !== undefined)),
  };
  // drawn here, as generate's, so that a sampled run can say which seed it used
  const seedText = optionalString(values, "seed");
  const seedGiven = seedText !== undefined && seedText !== "-1";
  const seed = task === "text-generation" ? seedFrom(values) : undefined;
  const sampling = { ...(doSample === undefined ? {} : { doSample }), ...(temperature === undefined ? {} : { temperature }), ...(topK == null ? {} : { topK }), ...(topP === undefined ? {} : { topP }), ...Object.fromEntries(Object.entries(cutoffs).filter(([, v]) => v !== undefined)), ...(repetitionPenalty === undefined ? {} : { repetitionPenalty }), seed };
  const memoryMargin = memoryMarginOption(values);
  const threads = threadsOption(values);
  const backend = backendOption(values);
  // a hub --model, or the task's default model, is downloaded here, where Ctrl-C stops it as it stops tsllm download and its progress shows
  const model = await resolveInterruptibly("pipeline", values.model === undefined ? DEFAULT_MODELS[task as PipelineTask] : requireString(values, "model", MODEL_MEANING));

  // the input being run, while one is: what the library says during its call (a warning, an error) names it
  let running: number | undefined;
  const about = (message: string) => (running === undefined || inputs.length === 1 ? message : `${inputLabel(inputs, running)}: ${message}`);
  /** whether library option `name` is one of the token-id flags', and that flag was given */
  const givenTokenIdFlag = (name: string) => (TOKEN_ID_FLAGS as readonly string[]).includes(flagOf(name)) && values[flagOf(name)] !== undefined;
  // the library's warnings (a decoder's load's; a generation asking for more than the context holds; a --target that is no vocabulary entry; words guessed from spaces by --aggregation-strategy first, average or max), one line each
  const onWarning = (message: string) => printWarning(about(message));
  const decoder = memoryMargin !== undefined ? { memoryMargin } : {};
  // --target is the pipeline's own (transformers' pipeline(..., targets=)): told of once, not once per --input
  // truncation: true where the library takes it: the command line tells of each input it cuts itself (below), in its own words
  const own = { ...(targets ? { targets } : {}), ...(["text-classification", "sentiment-analysis", "fill-mask", "feature-extraction"].includes(task) ? { truncation: true } : {}) };
  const p = await pipeline(task as PipelineTask, model, { threads, backend, onWarning, ...(encoder ? { ...(maxLength !== undefined ? { maxLength } : {}), ...own } : decoder) }).catch((e: unknown) => {
    // past the model's positions (known once it is open): the flag's own usage error
    throw e instanceof OptionError && e.option === "maxLength" ? new UsageError(`--max-length${e.message.slice("maxLength".length)}`) : e;
  });
  try {
    if (stride !== undefined && "countTokens" in p) {
      // a window holds the model's tokens less its special tokens (those of an empty text), as the library counts them
      const room = p.maxTokens - p.countTokens("");
      if (stride >= room) throw new UsageError(`--stride must be <= ${room - 1} (windows of ${room} tokens: ${p.maxTokens} less ${p.maxTokens - room} special), got ${stride}`);
    }
    // an encoder reads its first tokens only (transformers would fail on a longer input): the command line says so; with --stride it reads them all
    if ("countTokens" in p && stride === undefined) {
      inputs.forEach((text, i) => {
        // pre-split words are WordPiece's, whose tokens are those of the words joined by a space
        const n = p.countTokens(wordLists ? wordLists[i]!.join(" ") : text, p.task === "text-classification" || p.task === "sentiment-analysis" ? pairs[i] : undefined);
        if (n > p.maxTokens) printWarning(`${inputLabel(inputs, i)} has ${n} tokens; only ${p.maxTokens} (${maxLength === p.maxTokens ? "--max-length" : "this model's limit"}) are read`);
      });
    }
    /** one --input's result, as transformers' pipeline returns it for that input */
    const runOne = async (text: string, i: number): Promise<unknown> => {
      switch (p.task) {
        case "text-classification":
        case "sentiment-analysis": {
          const input = pairs[i] !== undefined ? { text, text_pair: pairs[i] } : text;
          return (p as TextClassificationPipeline)(input, { ...(topK === undefined ? {} : { topK }), ...(functionToApply === undefined ? {} : { functionToApply: functionToApply as "softmax" }) });
        }
        case "token-classification":
        case "ner": {
          const options = {
            // the strategy only when given: the library, as transformers, refuses stride beside a "none" given with it
            ...(strategy === undefined ? {} : { aggregationStrategy: strategy as AggregationStrategy }), ...(ignoreLabels ? { ignoreLabels } : {}), ...(stride === undefined ? {} : { stride }),
            ...(words ? { isSplitIntoWords: true, ...(delimiter === undefined ? {} : { delimiter }) } : {}),
          };
          // pre-split words go as a batch of one, whose one result is this input's (one list of words alone is answered [[...]], as transformers)
          return wordLists ? ((await (p as TokenClassificationPipeline)([wordLists[i]!], options)) as unknown[])[0] : (p as TokenClassificationPipeline)(text, options);
        }
        case "fill-mask":
          return (p as FillMaskPipeline)(text, { topK: topK ?? 5 });
        case "feature-extraction":
          return (p as FeatureExtractionPipeline)(text);
        case "text-generation":
          return (p as TextGenerationPipeline)(text, { maxNewTokens, maxLength, ...sampling, ...bans });
      }
    };
    const results: unknown[] = [];
    for (const [i, text] of inputs.entries()) {
      running = i;
      try {
        results.push(await runOne(text, i));
      } catch (e) {
        // the library's refusal of a temperature of 0 when sampling, in the flags' words
        if (e instanceof OptionError && e.option === "temperature") {
          throw new UsageError(`--temperature must be above 0 when sampling (--do-sample, or the model folder's do_sample), got ${temperature ?? 0}, as transformers refuses it; give --no-do-sample for greedy decoding`);
        }
        // a flag's token id refused (outside the vocabulary, a forced one suppressed): the flag's usage error, in the flags' words
        if (e instanceof OptionError && givenTokenIdFlag(e.option)) {
          throw new UsageError(e.message.replace(/\b[a-z]+(?:[A-Z][a-z]+)+\b/g, (name) => (givenTokenIdFlag(name) ? `--${flagOf(name)}` : name)));
        }
        // an option's refusal is about the option, whichever input it came with
        if (e instanceof Error && !(e instanceof OptionError)) e.message = about(e.message);
        throw e;
      }
    }
    running = undefined;
    const sampled = p.task === "text-generation" && (p as TextGenerationPipeline).samples(sampling);
    // a random seed that was used: printed so that --seed repeats the run (as generate prints it)
    if (sampled && !seedGiven) process.stderr.write(`seed ${seed} (--seed ${seed} repeats the run)\n`);
    if (flag(values, "json")) {
      // a sampled run's output says which seed made it, so that it can be repeated from the output alone
      process.stdout.write(JSON.stringify(sampled ? results.map((r) => (r as object[]).map((x) => ({ ...x, seed }))) : results) + "\n");
      return;
    }
    process.stdout.write(results.map((r, i) => table(p.task, inputs[i]!, r)).join("\n") + "\n");
  } finally {
    p.dispose();
  }
}

/** an --input-json value: a non-empty JSON list of strings (the words), else a usage error naming the --input */
function jsonWords(text: string, where: string): string[] {
  let words: unknown;
  try {
    words = JSON.parse(text);
  } catch {
    throw new UsageError(`${where}: expected a JSON list of words (--input-json), got ${JSON.stringify(text.length > 40 ? `${text.slice(0, 40)}...` : text)}`);
  }
  if (!Array.isArray(words) || words.length === 0 || !words.every((w) => typeof w === "string")) {
    throw new UsageError(`${where}: expected a non-empty JSON list of strings (--input-json), got ${JSON.stringify(words).slice(0, 60)}`);
  }
  return words;
}

const num = (x: unknown) => (typeof x === "number" ? x.toFixed(4) : String(x));

/** a readable rendering of one input's result */
function table(task: PipelineTask, input: string, result: unknown): string {
  const head = `> ${input}`;
  if (task === "feature-extraction") {
    const r = result as number[][][];
    return `${head}\n  [1][${r[0]!.length}][${r[0]![0]?.length ?? 0}] first token: ${r[0]![0]!.slice(0, 4).map(num).join(" ")} ...`;
  }
  if (task === "text-generation") return `${head}\n${(result as { generated_text: string }[])[0]!.generated_text}`;
  const rows = (Array.isArray(result) ? result : [result]).flat() as Record<string, unknown>[];
  if (rows.length === 0) return `${head}\n  (nothing)`;
  const keys = Object.keys(rows[0]!);
  const cells = rows.map((r) => keys.map((k) => (k === "score" ? num(r[k]) : String(r[k]))));
  const widths = keys.map((k, j) => Math.max(k.length, ...cells.map((c) => c[j]!.length)));
  const line = (c: string[]) => "  " + c.map((x, j) => x.padEnd(widths[j]!)).join("  ").trimEnd();
  return [head, line(keys), ...cells.map(line)].join("\n");
}
