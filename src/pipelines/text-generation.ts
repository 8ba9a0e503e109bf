import type { ChatMessage, ChatMessageInput } from "../chat/index.js";
import type { GenerationDefaults } from "../formats/index.js";
import type { GenerateOptions } from "../generation/index.js";
import type { Model } from "../llm.js";
import { OptionError } from "../units/index.js";
import { inputError, isObject, knownOptions, withDefaults } from "./inputs.js";

export interface TextGenerationOptions {
  /** new tokens at most (default: the model's generation_config.json max_new_tokens, else transformers 5's pipeline default, 256) */
  readonly maxNewTokens?: number;
  /** tokens in all, the prompt's included, as generate(max_length=...) counts them; maxNewTokens wins when both are given */
  readonly maxLength?: number;
  /** sample instead of greedy decoding (default: the model's generation_config.json do_sample, else false, as transformers) */
  readonly doSample?: boolean;
  /** sampling's temperature, top-k, top-p (default: the model's generation_config.json values, else 1, 50, 1) */
  readonly temperature?: number;
  readonly topK?: number;
  readonly topP?: number;
  /** default: the model's generation_config.json repetition_penalty, else 1 */
  readonly repetitionPenalty?: number;
  readonly seed?: number;
  /** prompt + completion (default true) or the completion alone */
  readonly returnFullText?: boolean;
  /** chat: a Jinja template to use instead of the model's own */
  readonly chatTemplate?: string;
}

/** TextGenerationOptions' names: any other key (transformers' max_new_tokens, do_sample ...) is refused, not ignored */
export const TEXT_GENERATION_OPTIONS: readonly string[] = ["maxNewTokens", "maxLength", "doSample", "temperature", "topK", "topP", "repetitionPenalty", "seed", "returnFullText", "chatTemplate"];

const DEFAULT_MAX_NEW_TOKENS = 256;

/**
 * What the model's generation_config.json sets (its sampling values read as Model's generation
 * defaults, and do_sample as written): below the pipeline's and a call's options, above the
 * pipeline's own defaults, as transformers' Pipeline.__init__ orders them (kwargs, then the model's
 * generation config, then the pipeline's _default_generation_config: max_new_tokens=256)
 */
export interface ShippedGeneration extends GenerationDefaults {
  readonly doSample?: boolean;
  /** max_length: tokens in all, the prompt's included; used without a max_new_tokens when other than transformers' default 20 */
  readonly maxLength?: number;
}

/** transformers' GenerationConfig default max_length: its pipeline keeps its own 256 new tokens over it */
const DEFAULT_MAX_LENGTH = 20;

/** the token budgets checked, before any work */
function checkBudgets(o: TextGenerationOptions): void {
  for (const k of ["maxNewTokens", "maxLength"] as const) {
    const v = o[k];
    if (v !== undefined && (!Number.isInteger(v) || v < 0)) throw new OptionError(`${k} must be a non-negative integer, got ${v}`, k);
  }
}

/** the token an empty prompt starts from: BOS, as generate()'s _maybe_initialize_input_ids_for_generation (it fails without one too) */
function startTokenOf(model: Model): number {
  const bos = model.tokenizer.bosId;
  if (bos === undefined) throw new Error(`${model.path}: the prompt is empty and the model has no BOS token to start from (transformers: "bos_token_id has to be defined when no input_ids are provided")`);
  return bos;
}

/**
 * the file's max_length where it limits a generation: without max_new_tokens, when other than 20
 * (transformers' pipeline drops its default 256 new tokens for such a max_length)
 */
function shippedLength(shipped: ShippedGeneration): number | undefined {
  return shipped.maxTokens === undefined && shipped.maxLength !== undefined && shipped.maxLength !== DEFAULT_MAX_LENGTH ? shipped.maxLength : undefined;
}

/** which option set a generation's length, as a warning names it (the command line's flag beside it) */
function budgetName(o: TextGenerationOptions, shipped: ShippedGeneration): string {
  if (o.maxNewTokens !== undefined) return "maxNewTokens, --max-new-tokens";
  if (o.maxLength !== undefined) return "maxLength, --max-length";
  if (shipped.maxTokens !== undefined) return `the model's generation_config.json max_new_tokens, ${shipped.maxTokens}`;
  if (shippedLength(shipped) !== undefined) return `the model's generation_config.json max_length, ${shipped.maxLength}`;
  return `the default ${DEFAULT_MAX_NEW_TOKENS} new tokens`;
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
  const budget = (promptTokens: number, o: TextGenerationOptions): number => {
    if (o.maxNewTokens !== undefined) return o.maxNewTokens;
    if (o.maxLength !== undefined) return Math.max(0, o.maxLength - promptTokens);
    if (shipped.maxTokens !== undefined) return shipped.maxTokens;
    const length = shippedLength(shipped);
    return length === undefined ? DEFAULT_MAX_NEW_TOKENS : Math.max(0, length - promptTokens);
  };
  // a do_sample: false file is read as temperature 0 (greedy) by Model's defaults: its temperature is not one to sample with
  const shippedTemperature = shipped.doSample === false ? undefined : shipped.temperature;
  // the answer has no finish reason, and the generation stops at the end of the context at the latest:
  // transformers warns there (MaxLengthCriteria's "friendly reminder" once past max_position_embeddings;
  // GPT-2's model then fails), so the caller is told when a generation asks for more
  const checkRoom = (promptTokens: number, maxTokens: number, o: TextGenerationOptions, label: string): void => {
    const total = promptTokens + maxTokens;
    if (maxTokens > 0 && total > model.contextSize) {
      warn(`text-generation: ${label} asks for up to ${total} tokens in all, the prompt's ${promptTokens} included (${budgetName(o, shipped)}); the model's context holds ${model.contextSize}: the generation stops there at the latest`);
    }
  };
  const generateOptions = (maxTokens: number, o: TextGenerationOptions): GenerateOptions => ({
    maxTokens,
    ...((o.doSample ?? shipped.doSample ?? false)
      // transformers' warpers: temperature first, so top-p and min-p cut the tempered distribution
      ? { temperature: o.temperature ?? shippedTemperature ?? 1, topK: o.topK ?? shipped.topK ?? 50, topP: o.topP ?? shipped.topP ?? 1, minP: shipped.minP ?? 0, seed: o.seed, samplerOrder: "transformers" as const }
      : { temperature: 0 }),
    repeatPenalty: o.repetitionPenalty ?? shipped.repeatPenalty ?? 1,
    // transformers' RepetitionPenaltyLogitsProcessor reads the whole sequence (prompt and reply), not llama.cpp's last 64 tokens
    repeatLastN: -1,
  });

  // a conversation's content may be a string or a list of parts, as transformers passes it to the
  // template; src/chat checks the parts (a part that is not text is refused, naming it)
  const one = async (input: string | readonly ChatMessageInput[], o: TextGenerationOptions, label: string): Promise<{ generated_text: string | ChatMessageInput[] }[]> => {
    if (typeof input === "string") {
      const ids = model.tokenizer.encode(input);
      // transformers' "Allow empty prompts": no input_ids, so generate() starts from [bos_token_id]
      // (which max_length counts); the decoded text skips it as a special token, and the prompt
      // text prefixed is "" (TextGenerationPipeline._forward / postprocess)
      const prompt = ids.length > 0 ? input : [startTokenOf(model)];
      const promptTokens = ids.length > 0 ? ids.length : 1;
      const maxTokens = budget(promptTokens, o);
      checkRoom(promptTokens, maxTokens, o, label);
      const completion = maxTokens === 0 ? "" : (await model.generate(prompt, generateOptions(maxTokens, o))).completion;
      return [{ generated_text: (o.returnFullText ?? true) ? input + completion : completion }];
    }
    const formatter = model.chatFormatter(o.chatTemplate);
    const promptTokens = formatter.encode([...input]).length;
    const maxTokens = budget(promptTokens, o);
    checkRoom(promptTokens, maxTokens, o, label);
    const reply = maxTokens === 0 ? "" : (await model.chat(input, { ...generateOptions(maxTokens, o), chatTemplate: o.chatTemplate })).completion;
    const assistant: ChatMessage = { role: "assistant", content: reply };
    return [{ generated_text: (o.returnFullText ?? true) ? [...input, assistant] : reply }];
  };

  return async (input: string | readonly ChatMessageInput[] | readonly string[], given?: TextGenerationOptions): Promise<unknown> => {
    const options = withDefaults(defaults, knownOptions("text-generation", given, TEXT_GENERATION_OPTIONS));
    checkBudgets(options);
    if (typeof input === "string") return one(input, options, "the input");
    if (!Array.isArray(input)) throw inputError("text-generation", "a string, a list of strings or a list of chat messages", input);
    // a list of prompts (none: no results), or one conversation (its messages' fields are the chat template's to check)
    const prompts = input.length === 0 || typeof input[0] === "string";
    input.forEach((x, i) => {
      if (prompts ? typeof x === "string" : isObject(x)) return;
      const expected = i === 0 ? "a string or a chat message {role, content}" : prompts ? "a string, as input 0" : "a chat message {role, content}, as input 0";
      throw inputError("text-generation", expected, x, `input ${i}`);
    });
    return prompts ? Promise.all((input as string[]).map((p, i) => one(p, options, `input ${i}`))) : one(input as readonly ChatMessageInput[], options, "the conversation");
  };
}
