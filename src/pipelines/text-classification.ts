import type { ModelInput } from "../tokenizer/index.js";
import { OptionError } from "../units/index.js";
import type { EncoderRunner } from "./encoder-runner.js";
import { encoderCallOptions, inputError, isObject, truncationOf, withDefaults, type Truncation } from "./inputs.js";
import { sigmoid, softmax } from "./math.js";

/**
 * one input: a text, or a pair as transformers takes it: {text, text_pair}, or in a list of inputs
 * its older form [[text, text_pair]] (transformers' preprocess still reads it; anywhere else a list
 * is refused, as transformers refuses it). A null text_pair is no pair, as Python's None
 */
export type TextClassificationInput = string | { readonly text: string; readonly text_pair?: string | null } | readonly [readonly [string, string | null]];

export interface TextClassificationOptions {
  /**
   * labels per input, best first. Left out: transformers' legacy shape (the best label; a single
   * string input gets a one-element list). A number k: the k best as a list (0: an empty list,
   * as transformers' slice). null: every label.
   */
  readonly topK?: number | null;
  /** "softmax", "sigmoid" or "none"; default as transformers: sigmoid for multi-label or single-logit models, softmax otherwise, none for regression */
  readonly functionToApply?: "softmax" | "sigmoid" | "none";
  /**
   * transformers' `truncation` (a tokenizer argument it passes on): true cuts an input (a pair:
   * the longer text first) to the tokens the model reads. Left out, tsllm cuts too, where
   * transformers would fail in the model, with one warning per input cut (onWarning); false
   * refuses a longer input, naming it. transformers' strategies by name too: "longest_first" (true),
   * "do_not_truncate" (false), "only_first" / "only_second" (that text of a pair alone; refused,
   * naming the input, where it cannot give up enough, or "only_second" on one text, as tokenizers).
   */
  readonly truncation?: Truncation;
}

export interface LabelScore {
  label: string;
  score: number;
}

const TASK = "text-classification";

/**
 * a text, {text, text_pair?} of texts, or in a list [[text, text_pair]], as the text (and pair) it
 * is; `index`: its place in a list
 */
function inputOf(x: unknown, index: number | undefined): { text: string; pair?: string } {
  if (typeof x === "string") return { text: x };
  const where = index === undefined ? undefined : `input ${index}`;
  const field = (name: string) => (where === undefined ? name : `${where}: ${name}`);
  /** the text and its pair, checked; a null pair is none, as transformers' tokenizer(text, text_pair=None) */
  const checked = (text: unknown, pair: unknown) => {
    if (typeof text !== "string") throw inputError(TASK, "a string", text, field("text"));
    if (pair !== undefined && pair !== null && typeof pair !== "string") throw inputError(TASK, "a string", pair, field("text_pair"));
    return pair === undefined || pair === null ? { text } : { text, pair };
  };
  // transformers' preprocess reads a list of inputs' [[text, text_pair]] as a pair (its older form) and
  // refuses any other list there ("if you are trying to send text pairs, ... send a dictionary")
  if (index !== undefined && Array.isArray(x)) {
    const [pair] = x as unknown[];
    if (x.length !== 1 || !Array.isArray(pair) || pair.length !== 2) throw inputError(TASK, "a string, {text, text_pair} or [[text, text_pair]]", x, where);
    return checked(pair[0], pair[1]);
  }
  if (!isObject(x)) throw inputError(TASK, index === undefined ? "a string or {text, text_pair}, or a list of them" : "a string, {text, text_pair} or [[text, text_pair]]", x, where);
  // transformers' tokenizer(**input) fails on another key (textPair): the pair must not be left out unsaid
  const other = Object.keys(x).find((k) => k !== "text" && k !== "text_pair");
  if (other !== undefined) throw new TypeError(`${TASK}: ${where === undefined ? "" : `${where}: `}unknown key ${JSON.stringify(other)}: a pair is {text, text_pair}`);
  const { text, text_pair: pair } = x as Record<string, unknown>;
  return checked(text, pair);
}

const FUNCTIONS = ["softmax", "sigmoid", "none"] as const;

/** functionToApply in any case, as transformers reads it (ClassificationFunction[name.upper()]) */
function functionNamed(name: unknown): (typeof FUNCTIONS)[number] | undefined {
  if (name === undefined) return undefined;
  const fn = FUNCTIONS.find((f) => typeof name === "string" && f === name.toLowerCase());
  if (fn === undefined) throw new OptionError(`functionToApply: expected "softmax", "sigmoid" or "none", got ${JSON.stringify(name)}`, "functionToApply");
  return fn;
}

/** TextClassificationOptions' names */
export const TEXT_CLASSIFICATION_OPTIONS: readonly string[] = ["topK", "functionToApply", "truncation"];
/** topK: null asks for every label; another option's null is left out, as transformers' None */
const NULL_IS_VALUE = ["topK"];

/**
 * text-classification / sentiment-analysis, shaped as transformers' TextClassificationPipeline:
 * clf("text") -> [{label, score}]; clf(["a", "b"]) -> [{...}, {...}]; clf("text", {topK: null}) ->
 * every label sorted; clf({text, text_pair}) -> {label, score}; clf([[[text, text_pair]]]) -> [{label, score}]
 * (a list's older pair form; clf([[text, text_pair]]) is refused, as transformers). `defaults`: options given when the
 * pipeline was made (transformers' pipeline(task, top_k=None)), a call's own options over them.
 * `warn`: where an input cut with truncation left out is told (EncoderRunner.encode).
 */
export function textClassification(runner: EncoderRunner, defaults: TextClassificationOptions, warn: (message: string) => void) {
  const info = runner.model.info;
  if (info.head !== "sequence-classification") throw new Error(`${runner.opened.path}: text-classification needs a sequence classifier (…ForSequenceClassification), found ${info.hfArchitecture}`);
  // transformers' order: a regression head is never squashed, even with its single output
  const defaultFn = info.problemType === "regression" ? "none" : info.problemType === "multi_label_classification" || info.labels.length === 1 ? "sigmoid" : "softmax";

  /** the options' values checked, before any work */
  const settings = (options: TextClassificationOptions) => {
    const { topK } = options;
    if (topK !== undefined && topK !== null && (!Number.isInteger(topK) || topK < 0)) throw new OptionError(`topK must be a non-negative integer or null, got ${topK}`, "topK");
    return { topK, fn: functionNamed(options.functionToApply) ?? defaultFn, truncation: truncationOf(TASK, options.truncation) };
  };
  settings(withDefaults(defaults, {}, NULL_IS_VALUE));

  const classify = async (enc: readonly ModelInput[], fn: (typeof FUNCTIONS)[number]): Promise<LabelScore[][]> => {
    return (await runner.run(enc)).logits!.map((row) => {
      const scores = fn === "softmax" ? softmax(row) : fn === "sigmoid" ? sigmoid(row) : Array.from(row);
      return scores.map((score, i) => ({ label: info.labels[i]!, score })).sort((a, b) => b.score - a.score);
    });
  };

  return async (input: TextClassificationInput | readonly TextClassificationInput[], given?: TextClassificationOptions): Promise<unknown> => {
    const call = encoderCallOptions(TASK, given, TEXT_CLASSIFICATION_OPTIONS);
    const { topK, fn, truncation } = settings(withDefaults(defaults, call, NULL_IS_VALUE));
    const list = Array.isArray(input) ? (input as readonly TextClassificationInput[]) : [input as TextClassificationInput];
    const enc = runner.encode(TASK, list.map((x, i) => inputOf(x, Array.isArray(input) ? i : undefined)), Array.isArray(input), truncation, warn);
    const results = (await classify(enc, fn)).map((sorted) => (topK === undefined ? sorted[0]! : topK === null ? sorted : sorted.slice(0, topK)));
    if (Array.isArray(input)) return results;
    // transformers' __call__ wraps a single string's result in a list unless this call names top_k:
    // the best label alone, or (top_k given when the pipeline was made) the list of labels, [[...]]
    return typeof input === "string" && call.topK === undefined ? [results[0]] : results[0];
  };
}
