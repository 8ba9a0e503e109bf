import type { TruncationStrategy } from "../tokenizer/index.js";
import { checkOptionKeys, OptionError, shownValue } from "../units/index.js";

/**
 * Checks of what a pipeline is called with, shared by every task: a value of the wrong kind is
 * one TypeError naming the task, what it takes and what it was given (a number given where a
 * text belongs would otherwise surface as "input is not iterable" or a missing field).
 */

/** what a value is, for an error message: "number 5", "undefined", "an empty list", "an array", "an object" */
export function describe(x: unknown): string {
  if (x === null || x === undefined) return String(x);
  if (Array.isArray(x)) return x.length === 0 ? "an empty list" : "an array";
  if (typeof x === "object") return "an object";
  if (typeof x === "function") return "a function";
  if (typeof x === "string") return "a string";
  return `${typeof x} ${String(x)}`;
}

/** `where`: which input, or which field of it ("input 2", "text_pair") */
export function inputError(task: string, expected: string, got: unknown, where?: string): TypeError {
  return new TypeError(`${task}: ${where === undefined ? "" : `${where}: `}expected ${expected}, got ${describe(got)}`);
}

export const isObject = (x: unknown): x is object => typeof x === "object" && x !== null && !Array.isArray(x);

/**
 * The options object a call was given, checked: an unknown key (transformers' snake_case names
 * among them: top_k, aggregation_strategy; or one tsllm does not take: stride) is an error
 * naming it and the options there are, not an option silently ignored.
 */
export function knownOptions<T extends object>(task: string, options: T | undefined, known: readonly string[]): T {
  if (options === undefined) return {} as T;
  if (!isObject(options)) throw inputError(task, "an options object", options, "options");
  checkOptionKeys(options, known, task);
  return options;
}

/**
 * transformers takes batch_size (Pipeline.__call__) and a tokenizer's max_length (the encoder
 * pipelines' tokenizer kwargs) at a call; tsllm's encoder pipelines take batchSize and maxLength
 * when they are made (the runner's batches and window). Their names at a call, either spelling.
 */
const MADE_WITH: Readonly<Record<string, string>> = { batchSize: "batchSize", batch_size: "batchSize", maxLength: "maxLength", max_length: "maxLength" };

/**
 * An encoder task's call options, checked as knownOptions; one the pipeline takes when it is made
 * (MADE_WITH) is told where it goes, where "unknown option" would leave the caller guessing.
 */
export function encoderCallOptions<T extends object>(task: string, options: T | undefined, known: readonly string[]): T {
  const made = isObject(options) ? Object.keys(options).find((k) => Object.hasOwn(MADE_WITH, k)) : undefined;
  if (made !== undefined) {
    const name = MADE_WITH[made]!;
    throw new OptionError(`${task}: ${JSON.stringify(made)} is not a call's option: ${name} is the pipeline's own, given when it is made (pipeline("${task}", model, { ${name}: ... })); a call takes ${known.join(", ")}`, made);
  }
  return knownOptions(task, options, known);
}

/** a string or a list of strings, as a list (token-classification, fill-mask, feature-extraction) */
export function textsOf(task: string, input: unknown): string[] {
  if (typeof input === "string") return [input];
  if (!Array.isArray(input)) throw inputError(task, "a string or a list of strings", input);
  input.forEach((x, i) => {
    if (typeof x !== "string") throw inputError(task, "a string", x, `input ${i}`);
  });
  return input as string[];
}

/** transformers' truncation strategies by name (its TruncationStrategy's values), each as this project cuts with it */
const TRUNCATION_STRATEGIES: Readonly<Record<string, TruncationStrategy | false>> = { longest_first: "longest_first", only_first: "only_first", only_second: "only_second", do_not_truncate: false };

/** a pipeline's `truncation` as transformers takes it: true or false, or a strategy's name (Truncation) */
export type Truncation = boolean | TruncationStrategy | "do_not_truncate";

/**
 * transformers' `truncation` (a tokenizer argument the encoder pipelines pass on): true cuts an
 * input to the tokens the model reads, the longer text of a pair first ("longest_first", the same);
 * "only_first" / "only_second" cut that text of a pair alone (tokenizers' OnlyFirst / OnlySecond,
 * refused where it cannot be cut enough: truncateModelInput); false ("do_not_truncate") keeps it
 * whole, which the model cannot read (EncoderRunner.encode). Left out (undefined here): cut as
 * true, tsllm's default, where transformers' own (no truncation) fails in the model; the pipeline
 * warns of each input it cuts then (EncoderRunner.encode). The strategy it cuts with, or false.
 */
export function truncationOf(task: string, value: unknown): TruncationStrategy | false | undefined {
  if (value === undefined || typeof value === "boolean") return value === true ? "longest_first" : value;
  const strategy = typeof value === "string" && Object.hasOwn(TRUNCATION_STRATEGIES, value) ? TRUNCATION_STRATEGIES[value] : undefined;
  if (strategy === undefined) throw new OptionError(`${task}: truncation: expected true, false, "longest_first", "only_first", "only_second" or "do_not_truncate", got ${shownValue(value)}`, "truncation");
  return strategy;
}

/**
 * A call's options over the pipeline's own (given when it was made), as transformers merges its
 * __init__ parameters with a call's: an option the call leaves undefined or null keeps the
 * pipeline's (transformers' _sanitize_parameters passes on only what is not None), except those
 * in `nullIsValue`, where null means something (text-classification's top_k=None: every label).
 */
export function withDefaults<T extends object>(defaults: T, call: T, nullIsValue: readonly string[] = []): T {
  const out: Record<string, unknown> = {};
  for (const options of [defaults, call]) {
    for (const [k, v] of Object.entries(options)) if (v !== undefined && (v !== null || nullIsValue.includes(k))) out[k] = v;
  }
  return out as T;
}
