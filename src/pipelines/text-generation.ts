import type { ChatMessage, ChatMessageInput } from "../chat/index.js";
import type { GenerationDefaults } from "../formats/index.js";
import type { GenerateOptions } from "../generation/index.js";
import type { Model } from "../llm.js";
import { OptionError, shownValue } from "../units/index.js";
import { inputError, isObject, knownOptions, withDefaults } from "./inputs.js";

export interface TextGenerationOptions {
  /** new tokens at most (default: the model's generation_config.json max_new_tokens, else transformers 5's pipeline default, 256) */
  readonly maxNewTokens?: number;
  /** tokens in all, the prompt's included, as generate(max_length=...) counts them; a maxNewTokens (the call's, the pipeline's, the folder's) wins, as transformers */
  readonly maxLength?: number;
  /** sample instead of greedy decoding (default: the model's generation_config.json do_sample, else false, as transformers) */
  readonly doSample?: boolean;
  /** sampling's temperature (above 0 when sampling, as transformers), top-k, top-p (default: the model's generation_config.json values, do_sample false or not, else 1, 50, 1) */
  readonly temperature?: number;
  readonly topK?: number;
  readonly topP?: number;
  /** locally typical sampling's mass, as TypicalLogitsWarper keeps it, after min-p (default: the folder's typical_p, else none); 1 or more: none */
  readonly typicalP?: number;
  /** epsilon sampling, as EpsilonLogitsWarper, after typical-p: drops the tokens whose probability is below it (default: the folder's epsilon_cutoff, else none); outside (0, 1): none */
  readonly epsilonCutoff?: number;
  /** eta sampling, as EtaLogitsWarper, after epsilon: the cutoff min(eta, sqrt(eta) * exp(-entropy)) (default: the folder's eta_cutoff, else none); outside (0, 1): none */
  readonly etaCutoff?: number;
  /** default: the model's generation_config.json repetition_penalty, else 1 */
  readonly repetitionPenalty?: number;
  /** never repeat an n-gram of this size, the prompt's included (default: the folder's no_repeat_ngram_size, else 0: none) */
  readonly noRepeatNgramSize?: number;
  /** EOS is held back until this many new tokens (default: the folder's min_new_tokens, else none); a minNewTokens wins over any minLength, as transformers */
  readonly minNewTokens?: number;
  /** EOS is held back until this many tokens in all, the prompt's included (default: the folder's min_length, else 0) */
  readonly minLength?: number;
  /** token ids never generated (default: the folder's suppress_tokens, else none) */
  readonly suppressTokens?: readonly number[];
  /** token ids not generated first (default: the folder's begin_suppress_tokens, else none) */
  readonly beginSuppressTokens?: readonly number[];
  /** token sequences never generated (default: the folder's bad_words_ids, else none) */
  readonly badWordsIds?: readonly (readonly number[])[];
  /** [token sequence, bias] pairs, the bias added to the logit of a sequence's last token where it completes it (default: the folder's sequence_bias, else none) */
  readonly sequenceBias?: readonly (readonly [readonly number[], number])[];
  /** the token generated first where the prompt is one token, an empty prompt's BOS (default: the folder's forced_bos_token_id, else none; null: none, the folder's off, as transformers' forced_bos_token_id=None) */
  readonly forcedBosTokenId?: number | null;
  /** the token (or one of the tokens) generated last, at the last step the budget allows (default: the folder's forced_eos_token_id, else none; null: none, the folder's off) */
  readonly forcedEosTokenId?: number | readonly number[] | null;
  /** [start index, decay factor]: after that many new tokens, EOS's logit gains |logit| * (factor^(new tokens - start) - 1) each step (default: the folder's exponential_decay_length_penalty, else none) */
  readonly exponentialDecayLengthPenalty?: readonly [startIndex: number, decayFactor: number];
  readonly seed?: number;
  /** prompt + completion (default true) or the completion alone */
  readonly returnFullText?: boolean;
  /** chat: a Jinja template to use instead of the model's own */
  readonly chatTemplate?: string;
}

/** the bans given as token lists (transformers' suppress_tokens, begin_suppress_tokens, bad_words_ids, sequence_bias): an empty one bans nothing */
export const LIST_BANS = ["suppressTokens", "beginSuppressTokens", "badWordsIds", "sequenceBias"] as const;

/** the tokens forced at a step (transformers' forced_bos_token_id, forced_eos_token_id): null is none (a folder's turned off, as generate()'s None), left out the folder's */
export const FORCED_TOKENS = ["forcedBosTokenId", "forcedEosTokenId"] as const;

/** the bans a folder's no_repeat_ngram_size, min_new_tokens, min_length, LIST_BANS and FORCED_TOKENS set, as written (0 or empty: none) */
const FOLDER_BANS = ["noRepeatNgramSize", "minNewTokens", "minLength", ...LIST_BANS, ...FORCED_TOKENS, "exponentialDecayLengthPenalty"] as const;

/** TextGenerationOptions' names: any other key (transformers' max_new_tokens, do_sample ...) is refused, not ignored */
export const TEXT_GENERATION_OPTIONS: readonly string[] = ["maxNewTokens", "maxLength", "doSample", "temperature", "topK", "topP", "typicalP", "epsilonCutoff", "etaCutoff", "repetitionPenalty", ...FOLDER_BANS, "seed", "returnFullText", "chatTemplate"];

/** transformers 5's TextGenerationPipeline._default_generation_config */
export const DEFAULT_MAX_NEW_TOKENS = 256;

/**
 * What the model's generation_config.json sets (Model's generation defaults, do_sample and max_length
 * as written, and its sampling values as written): below the pipeline's and a call's options, above
 * the pipeline's own defaults, as transformers' Pipeline.__init__ orders them (kwargs, then the
 * model's generation config, then the pipeline's _default_generation_config: max_new_tokens=256)
 */
export interface ShippedGeneration extends GenerationDefaults, Pick<TextGenerationOptions, (typeof FOLDER_BANS)[number]> {
  readonly doSample?: boolean;
  /** max_length: tokens in all, the prompt's included; used without a max_new_tokens when other than transformers' default 20 */
  readonly maxLength?: number;
  /** temperature, top_k, top_p, min_p as written, do_sample false included (a call's doSample samples with them, as transformers) */
  readonly sampling?: Pick<GenerationDefaults, "temperature" | "topK" | "topP" | "minP">;
  /** typical_p as written, 1 or more read as 1 (none); epsilon_cutoff and eta_cutoff as written */
  readonly typicalP?: number;
  readonly epsilonCutoff?: number;
  readonly etaCutoff?: number;
  /**
   * config.json's task_specific_params["text-generation"] (`source` names it) as options: over the
   * pipeline's own options, under a call's (textGeneration's underTask); they are also in the
   * values above, over the file's
   */
  readonly task?: { readonly options: TextGenerationOptions; readonly source: string };
  /** where each token-id setting above is written, as `<file>: <key>`: an id past the vocabulary is refused naming it (checkFolderIds) */
  readonly idSources?: { readonly [K in TokenIdOption]?: string };
}

/** the options of token ids (LIST_BANS, FORCED_TOKENS) */
type TokenIdOption = (typeof LIST_BANS)[number] | (typeof FORCED_TOKENS)[number];

/**
 * A folder's token ids against the model's vocabulary (`tokens` ids), when the pipeline opens it:
 * refused naming the file and key that write the id, as the folder's other values are (else the
 * engine's check at generation would name the library's option, which the user did not give)
 */
function checkFolderIds(shipped: ShippedGeneration, tokens: number): void {
  // (suppress_tokens and begin_suppress_tokens past the vocabulary ban nothing, as transformers' isin mask: checkBannedTokens)
  for (const k of ["badWordsIds", "sequenceBias", ...FORCED_TOKENS] as const) {
    const v = shipped[k], where = shipped.idSources?.[k];
    if (v === undefined || v === null || where === undefined) continue;
    const ids = k === "sequenceBias" ? (v as readonly (readonly [readonly number[], number])[]).flatMap(([seq]) => seq) : [v].flat(2) as number[];
    const bad = ids.find((t) => t >= tokens);
    if (bad !== undefined) throw new Error(`${where}: token id ${bad} is outside the vocabulary (${tokens} tokens)`);
  }
}

/** transformers' GenerationConfig default max_length: its pipeline keeps its own 256 new tokens over it */
export const DEFAULT_MAX_LENGTH = 20;

/**
 * The pipeline's own generation config, as transformers' Pipeline.__init__ prepares it: the file's
 * values, then (GenerationMixin._prepare_generation_config's edge case) a temperature of 0 turns
 * do_sample off, then the pipeline's options over them; a max_new_tokens equal to the pipeline's
 * default 256 beside a max_length other than 20 is dropped (max_length wins).
 */
interface PipelineConfig {
  readonly doSample: boolean;
  readonly temperature?: number;
  readonly topK?: number;
  readonly topP?: number;
  readonly maxNewTokens?: number;
  readonly maxLength?: number;
  /** where maxNewTokens and maxLength came from, as a warning names them */
  readonly maxNewTokensFrom?: string;
  readonly maxLengthFrom?: string;
}

function pipelineConfig(shipped: ShippedGeneration, o: TextGenerationOptions): PipelineConfig {
  // a do_sample: false file is read as temperature 0 by Model's defaults: the sampling values as written are the file's
  const file = shipped.sampling ?? (shipped.doSample === false ? {} : shipped);
  const fileSample = (shipped.doSample ?? false) && file.temperature !== 0;
  const fileLength = shipped.maxLength !== DEFAULT_MAX_LENGTH ? shipped.maxLength : undefined;
  let maxNewTokens = o.maxNewTokens ?? shipped.maxTokens;
  let maxLength = o.maxLength ?? fileLength;
  if (maxNewTokens === DEFAULT_MAX_NEW_TOKENS && maxLength !== undefined && maxLength !== DEFAULT_MAX_LENGTH) maxNewTokens = undefined;
  let maxNewTokensFrom = o.maxNewTokens !== undefined ? "maxNewTokens, --max-new-tokens" : `the model's generation_config.json max_new_tokens, ${maxNewTokens}`;
  let maxLengthFrom = o.maxLength !== undefined ? "maxLength, --max-length" : `the model's generation_config.json max_length, ${maxLength}`;
  // task_specific_params update the config after the options and that rule: their max_new_tokens
  // is the config's; their max_length only where max_new_tokens was dropped (else generate() lets
  // the 256 or the given max_new_tokens win over it: gpt2's max_length 50 does nothing)
  const task = shipped.task;
  if (task?.options.maxNewTokens !== undefined) {
    maxNewTokens = task.options.maxNewTokens;
    maxNewTokensFrom = `${task.source} max_new_tokens, ${maxNewTokens}`;
  } else if (task?.options.maxLength !== undefined && maxNewTokens === undefined && maxLength !== undefined) {
    maxLength = task.options.maxLength;
    maxLengthFrom = `${task.source} max_length, ${maxLength}`;
  }
  return {
    doSample: o.doSample ?? fileSample,
    temperature: o.temperature ?? file.temperature,
    topK: o.topK ?? file.topK,
    topP: o.topP ?? file.topP,
    ...(maxNewTokens === undefined ? {} : { maxNewTokens, maxNewTokensFrom }),
    ...(maxLength === undefined ? {} : { maxLength, maxLengthFrom }),
  };
}

/**
 * The pipeline's options with config.json's task_specific_params["text-generation"] over them, as
 * transformers' Pipeline.__init__ orders them: its kwargs go into the pipeline's generation config
 * first, then that config is updated with those params (so gpt2's do_sample: true wins over
 * pipeline(..., do_sample=False)); a call's options still win over both. The lengths are
 * pipelineConfig's. An option so overruled is warned about, since transformers says nothing.
 */
function underTask(defaults: TextGenerationOptions, task: ShippedGeneration["task"], warn: (message: string) => void): TextGenerationOptions {
  if (task === undefined) return defaults;
  const { maxNewTokens: _new, maxLength: _length, ...rest } = task.options;
  for (const [k, v] of Object.entries(rest)) {
    const given = defaults[k as keyof TextGenerationOptions];
    // by value: a list option (a ban) equal to the task's is not overruled
    if (given !== undefined && JSON.stringify(given) !== JSON.stringify(v)) warn(`text-generation: the pipeline's ${k} ${JSON.stringify(given)} gives way to ${JSON.stringify(v)} from ${task.source}, as transformers' pipeline applies those after its own options; give ${k} with each call to override it`);
  }
  const { maxNewTokens } = task.options;
  if (maxNewTokens !== undefined && defaults.maxNewTokens !== undefined && defaults.maxNewTokens !== maxNewTokens) {
    warn(`text-generation: the pipeline's maxNewTokens ${defaults.maxNewTokens} gives way to ${maxNewTokens} from ${task.source}, as transformers' pipeline applies those after its own options; give maxNewTokens with each call to override it`);
  }
  return { ...defaults, ...rest };
}

/** the token budgets, the bans and the repetition penalty checked, before any work (the sampler's own check would name its repeatPenalty) */
function checkBudgets(o: TextGenerationOptions): void {
  for (const k of ["noRepeatNgramSize", "minNewTokens", "minLength"] as const) {
    const v = o[k];
    // transformers' NoRepeatNGramLogitsProcessor and MinLengthLogitsProcessor refuse a negative or fractional size; 0 adds none
    if (v !== undefined && (!Number.isInteger(v) || v < 0)) throw new OptionError(`${k} must be an integer >= 0 (0 for none), got ${shownValue(v)}`, k);
  }
  for (const k of ["maxNewTokens", "maxLength"] as const) {
    const v = o[k];
    // transformers' GenerationConfig.validate: "max_new_tokens must be greater than 0" (a maxLength of 0 has no room either)
    if (v !== undefined && (!Number.isInteger(v) || v < 1)) throw new OptionError(`${k} must be a positive integer, got ${shownValue(v)}`, k);
  }
  // transformers' TypicalLogitsWarper refuses a mass of 0 or below; generate() adds none for 1 or more
  if (o.typicalP !== undefined && !(typeof o.typicalP === "number" && o.typicalP > 0)) throw new OptionError(`typicalP must be a number above 0 (1 or more for none), got ${shownValue(o.typicalP)}`, "typicalP");
  // generate() adds EpsilonLogitsWarper / EtaLogitsWarper for 0 < x < 1 only: any other number is none
  for (const k of ["epsilonCutoff", "etaCutoff"] as const) {
    const v = o[k];
    if (v !== undefined && !(typeof v === "number" && Number.isFinite(v))) throw new OptionError(`${k} must be a number (0 < x < 1 cuts; others: none), got ${shownValue(v)}`, k);
  }
  const p = o.repetitionPenalty;
  // transformers' RepetitionPenaltyLogitsProcessor: "penalty has to be a strictly positive float"; 1 is none
  if (p !== undefined && !(typeof p === "number" && Number.isFinite(p) && p > 0)) throw new OptionError(`repetitionPenalty must be a finite number above 0 (1 for none), got ${shownValue(p)}`, "repetitionPenalty");
}

/** the token an empty prompt starts from: BOS, as generate()'s _maybe_initialize_input_ids_for_generation (it fails without one too) */
function startTokenOf(model: Model): number {
  const bos = model.tokenizer.bosId;
  if (bos === undefined) throw new Error(`${model.path}: the prompt is empty and the model has no BOS token to start from (transformers: "bos_token_id has to be defined when no input_ids are provided")`);
  return bos;
}

/** a generation's limit: new tokens, or tokens in all (the prompt's included), and which option set it (a warning names it, the command line's flag beside it) */
interface Budget {
  readonly newTokens?: number;
  readonly total?: number;
  readonly from: string;
}

/**
 * The call's limit over the pipeline's config, as generate() reads them: a call's maxNewTokens, else
 * the config's max_new_tokens, which wins over a call's maxLength too (_prepare_generated_length:
 * "max_new_tokens will take precedence"), else max_length. The pipeline's own default 256 yields to
 * any maxLength given (transformers ignores a call's max_length beside it, issue #40751: an option
 * that does nothing is not kept).
 */
function budgetOf(c: PipelineConfig, call: TextGenerationOptions, warn: (message: string) => void): Budget {
  if (call.maxNewTokens !== undefined) return { newTokens: call.maxNewTokens, from: "maxNewTokens, --max-new-tokens" };
  if (c.maxNewTokens !== undefined) {
    const from = c.maxNewTokensFrom ?? "maxNewTokens";
    if (call.maxLength !== undefined) warn(`text-generation: maxLength ${call.maxLength} is not used: ${from} takes precedence, as in transformers (give maxNewTokens instead)`);
    return { newTokens: c.maxNewTokens, from };
  }
  if (call.maxLength !== undefined) return { total: call.maxLength, from: "maxLength, --max-length" };
  if (c.maxLength !== undefined) return { total: c.maxLength, from: c.maxLengthFrom ?? "maxLength" };
  return { newTokens: DEFAULT_MAX_NEW_TOKENS, from: `the default ${DEFAULT_MAX_NEW_TOKENS} new tokens` };
}

/**
 * text-generation (and chat: a list of messages in, the conversation with the assistant's reply
 * out), as transformers' TextGenerationPipeline returns it: [{generated_text}]. Greedy unless
 * doSample (transformers ignores temperature then, and so do we). `defaults`: options given when
 * the pipeline was made (transformers' pipeline("text-generation", max_new_tokens=...)), a call's
 * own options over them. `warn`: where a generation asking for more tokens than the context holds
 * is told, one line per input, before it runs.
 */
export function textGeneration(model: Model, defaults: TextGenerationOptions, warn: (message: string) => void, shipped: ShippedGeneration = {}) {
  checkBudgets(defaults);
  checkFolderIds(shipped, model.engine.tokenIds);
  const own = underTask(defaults, shipped.task, warn);
  const config = pipelineConfig(shipped, own);
  /**
   * the new tokens a budget leaves; a maxLength the prompt already fills is refused, as generate()'s
   * _validate_generated_length refuses it (an empty reply would pass for the model's)
   */
  const tokensFor = (promptTokens: number, b: Budget, label: string): number => {
    if (b.newTokens !== undefined) return b.newTokens;
    if (promptTokens >= b.total!) {
      throw new OptionError(`text-generation: ${label} has ${promptTokens} tokens and maxLength ${b.total} (${b.from}) counts them: no room for a new token; transformers refuses it too ("Input length of input_ids is ${promptTokens}, but max_length is set to ${b.total}"): give maxNewTokens, or a larger maxLength`, "maxLength");
    }
    return b.total! - promptTokens;
  };
  // the answer has no finish reason, and the generation stops at the end of the context at the latest:
  // transformers warns there (MaxLengthCriteria's "friendly reminder" once past max_position_embeddings;
  // GPT-2's model then fails), so the caller is told when a generation asks for more
  const checkRoom = (promptTokens: number, maxTokens: number, b: Budget, label: string): void => {
    const total = promptTokens + maxTokens;
    if (total > model.contextSize) {
      warn(`text-generation: ${label} asks for up to ${total} tokens in all, the prompt's ${promptTokens} included (${b.from}); the model's context holds ${model.contextSize}: the generation stops there at the latest`);
    }
  };
  // generate()'s own _prepare_generation_config turns do_sample off again for the pipeline's temperature 0, before the call's options
  const samplingOf = (call: TextGenerationOptions) => ({ doSample: call.doSample ?? (config.temperature === 0 ? false : config.doSample), temperature: call.temperature ?? config.temperature ?? 1 });
  /**
   * the new tokens EOS is held back for: a minNewTokens (the call's, the pipeline's, the folder's)
   * wins over any minLength, as generate()'s _prepare_generated_length sets min_length to
   * min_new_tokens + the prompt's length; a minLength counts the prompt's tokens
   */
  const minNewTokensOf = (promptTokens: number, o: TextGenerationOptions): number => {
    const minNew = o.minNewTokens ?? shipped.minNewTokens;
    if (minNew !== undefined) return minNew;
    return Math.max(0, (o.minLength ?? shipped.minLength ?? 0) - promptTokens);
  };
  const generateOptions = (promptTokens: number, maxTokens: number, b: Budget, o: TextGenerationOptions, call: TextGenerationOptions, label: string): GenerateOptions => {
    const { doSample, temperature } = samplingOf(call);
    const noRepeatNgramSize = o.noRepeatNgramSize ?? shipped.noRepeatNgramSize ?? 0;
    const minNewTokens = minNewTokensOf(promptTokens, o);
    // transformers' _validate_generated_length warns of it too ("Unfeasible length constraints"): the budget ends the generation first
    if (minNewTokens > maxTokens) warn(`text-generation: ${label} holds EOS back for ${minNewTokens} new tokens (minNewTokens, minLength), more than the ${maxTokens} it may generate (${b.from}): the generation stops at ${maxTokens}`);
    return {
      maxTokens,
      // transformers' logits processors, before its warpers: no_repeat_ngram_size's bans and min_new_tokens' EOS ban
      ...(noRepeatNgramSize > 0 ? { noRepeatNgramSize } : {}),
      ...(minNewTokens > 0 ? { minNewTokens } : {}),
      // suppress_tokens, begin_suppress_tokens, bad_words_ids, sequence_bias (a call's empty list turns the folder's off)
      ...Object.fromEntries(LIST_BANS.map((k) => [k, o[k] ?? shipped[k]]).filter(([, v]) => v !== undefined && (v as readonly unknown[]).length > 0)),
      // forced_bos_token_id, forced_eos_token_id (ForcedBOS/ForcedEOSTokenLogitsProcessor, after those bans; null turns the folder's off)
      ...Object.fromEntries(FORCED_TOKENS.map((k) => [k, o[k] === undefined ? shipped[k] : o[k]]).filter(([, v]) => v !== undefined && v !== null)),
      // ExponentialDecayLengthPenalty: the sampler runs it after the repetition penalty, as _get_logits_processor orders them
      ...((o.exponentialDecayLengthPenalty ?? shipped.exponentialDecayLengthPenalty) === undefined ? {} : { exponentialDecayLengthPenalty: o.exponentialDecayLengthPenalty ?? shipped.exponentialDecayLengthPenalty }),
      // transformers' warpers: temperature first, so top-p and min-p cut the tempered distribution
      ...(doSample
        ? { temperature, topK: call.topK ?? config.topK ?? 50, topP: call.topP ?? config.topP ?? 1, minP: (shipped.sampling ?? shipped).minP ?? 0, typicalP: Math.min(o.typicalP ?? shipped.typicalP ?? 1, 1), epsilonCutoff: o.epsilonCutoff ?? shipped.epsilonCutoff ?? 0, etaCutoff: o.etaCutoff ?? shipped.etaCutoff ?? 0, seed: o.seed, samplerOrder: "transformers" as const }
        : { temperature: 0 }),
      repeatPenalty: o.repetitionPenalty ?? shipped.repeatPenalty ?? 1,
      // transformers' RepetitionPenaltyLogitsProcessor reads the whole sequence (prompt and reply), not llama.cpp's last 64 tokens
      repeatLastN: -1,
    };
  };
  /** transformers' TemperatureLogitsWarper refuses a temperature of 0 or below when sampling (1 adds no warper) */
  const checkTemperature = (call: TextGenerationOptions): void => {
    const { doSample, temperature } = samplingOf(call);
    if (doSample && temperature !== 1 && !(temperature > 0)) {
      throw new OptionError(`temperature must be above 0 when sampling (doSample), got ${temperature}: transformers refuses it too ("has to be a strictly positive float"); for greedy decoding leave doSample out or false`, "temperature");
    }
  };

  // a conversation's content may be a string or a list of parts, as transformers passes it to the
  // template; src/chat checks the parts (a part that is not text is refused, naming it)
  const one = async (input: string | readonly ChatMessageInput[], o: TextGenerationOptions, call: TextGenerationOptions, label: string): Promise<{ generated_text: string | ChatMessageInput[] }[]> => {
    const b = budgetOf(config, call, warn);
    if (typeof input === "string") {
      const ids = model.tokenizer.encode(input);
      // transformers' "Allow empty prompts": no input_ids, so generate() starts from [bos_token_id]
      // (which max_length counts); the decoded text skips it as a special token, and the prompt
      // text prefixed is "" (TextGenerationPipeline._forward / postprocess)
      const prompt = ids.length > 0 ? input : [startTokenOf(model)];
      const promptTokens = ids.length > 0 ? ids.length : 1;
      const maxTokens = tokensFor(promptTokens, b, label);
      checkRoom(promptTokens, maxTokens, b, label);
      const { completion } = await model.generate(prompt, generateOptions(promptTokens, maxTokens, b, o, call, label));
      return [{ generated_text: (o.returnFullText ?? true) ? input + completion : completion }];
    }
    const formatter = model.chatFormatter(o.chatTemplate);
    const promptTokens = formatter.encode([...input]).length;
    const maxTokens = tokensFor(promptTokens, b, label);
    checkRoom(promptTokens, maxTokens, b, label);
    const { completion: reply } = await model.chat(input, { ...generateOptions(promptTokens, maxTokens, b, o, call, label), chatTemplate: o.chatTemplate });
    const assistant: ChatMessage = { role: "assistant", content: reply };
    return [{ generated_text: (o.returnFullText ?? true) ? [...input, assistant] : reply }];
  };

  const generate = async (input: string | readonly ChatMessageInput[] | readonly string[], given?: TextGenerationOptions): Promise<unknown> => {
    const call = knownOptions("text-generation", given, TEXT_GENERATION_OPTIONS);
    // a call's null forced token is kept: it turns the pipeline's or the folder's off
    const options = withDefaults(own, call, FORCED_TOKENS);
    checkBudgets(options);
    checkTemperature(call);
    if (typeof input === "string") return one(input, options, call, "the input");
    if (!Array.isArray(input)) throw inputError("text-generation", "a string, a list of strings or a list of chat messages", input);
    // a list of prompts (none: no results), or one conversation (its messages' fields are the chat template's to check)
    const prompts = input.length === 0 || typeof input[0] === "string";
    input.forEach((x, i) => {
      if (prompts ? typeof x === "string" : isObject(x)) return;
      const expected = i === 0 ? "a string or a chat message {role, content}" : prompts ? "a string, as input 0" : "a chat message {role, content}, as input 0";
      throw inputError("text-generation", expected, x, `input ${i}`);
    });
    return prompts ? Promise.all((input as string[]).map((p, i) => one(p, options, call, `input ${i}`))) : one(input as readonly ChatMessageInput[], options, call, "the conversation");
  };
  // whether a call with these options samples (so a caller that drew a seed can tell it was used: the command line prints it)
  const samples = (given?: TextGenerationOptions): boolean => samplingOf(knownOptions("text-generation", given, TEXT_GENERATION_OPTIONS)).doSample;
  return Object.assign(generate, { samples });
}
