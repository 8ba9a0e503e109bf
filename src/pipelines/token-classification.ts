import type { HFTokenizer } from "../tokenizer/hf/hf-tokenizer.js";
import { assembleModelInput, inputTemplateOf, type ModelInput, type Offset } from "../tokenizer/index.js";
import { checkFlags, OptionError, shownValue } from "../units/index.js";
import type { EncoderRunner } from "./encoder-runner.js";
import { describe, encoderCallOptions, inputError, textsOf, withDefaults } from "./inputs.js";
import { argmax, softmax } from "./math.js";

export type AggregationStrategy = "none" | "simple" | "first" | "average" | "max";

export interface TokenClassificationOptions {
  /** how tokens become entities (default "none": one entry per token) */
  readonly aggregationStrategy?: AggregationStrategy;
  /** labels left out of the result (default ["O"]) */
  readonly ignoreLabels?: readonly string[];
  /**
   * the input is pre-split words (transformers' is_split_into_words): a list of words is one
   * input, a list of such lists a batch (either way one list of entities per input: transformers
   * answers one list of words as a batch of one, `[[...]]`); the text the spans index is the words
   * joined by `delimiter`
   */
  readonly isSplitIntoWords?: boolean;
  /** what joins pre-split words into the text the spans index (default " "; only with isSplitIntoWords) */
  readonly delimiter?: string;
  /**
   * read a text longer than the model in windows that overlap by this many tokens, as transformers'
   * stride: each window is classified and aggregated alone, then of entities that overlap the
   * longest (then the higher score) is kept; with the strategy left out ("none"), each token's entry
   * once (a token two windows share: the higher score). As transformers, refused beside an
   * aggregationStrategy "none" given in the same options (the pipeline's own, or one call's)
   */
  readonly stride?: number;
}

/** aggregation "none": one per token */
export interface TokenEntity { entity: string; score: number; index: number; word: string; start: number | null; end: number | null }
/** the other strategies: groups of tokens (words) */
export interface EntityGroup { entity_group: string; score: number; word: string; start: number | null; end: number | null }

interface PreEntity { word: string; scores: number[]; start: number | null; end: number | null; index: number; isSubword: boolean }
interface Tagged { entity: string; score: number; word: string; start: number | null; end: number | null; index?: number }

const STRATEGIES: readonly AggregationStrategy[] = ["none", "simple", "first", "average", "max"];

/** a strategy's name in any case, as transformers reads it (AggregationStrategy[name.upper()]) */
function strategyNamed(name: unknown): AggregationStrategy {
  if (name === undefined) return "none";
  const strategy = STRATEGIES.find((s) => typeof name === "string" && s === name.toLowerCase());
  if (strategy === undefined) throw new OptionError(`aggregationStrategy: expected one of ${STRATEGIES.join(", ")}, got ${JSON.stringify(name)}`, "aggregationStrategy");
  return strategy;
}

/** code-point slice, as Python's str[start:end] */
function slice(cps: readonly string[], s: number, e: number): string {
  return cps.slice(s, e).join("");
}

/** TokenClassificationOptions' names */
export const TOKEN_CLASSIFICATION_OPTIONS: readonly string[] = ["aggregationStrategy", "ignoreLabels", "isSplitIntoWords", "delimiter", "stride"];

/**
 * transformers' aggregate_overlapping_entities, for the entities (groups, or with "none" tokens) of
 * overlapping windows: by start, an entity starting inside the one kept replaces it when longer, or
 * as long with a higher score (a token two windows share: the higher-scored entry, ties the first)
 */
function mergeOverlapping<T extends TokenEntity | EntityGroup>(entities: T[]): T[] {
  if (entities.length === 0) return entities;
  const sorted = [...entities].sort((a, b) => a.start! - b.start!);
  const out: T[] = [];
  let kept = sorted[0]!;
  for (const e of sorted) {
    if (kept.start! <= e.start! && e.start! < kept.end!) {
      const length = e.end! - e.start!, keptLength = kept.end! - kept.start!;
      if (length > keptLength || (length === keptLength && e.score > kept.score)) kept = e;
    } else {
      out.push(kept);
      kept = e;
    }
  }
  out.push(kept);
  return out;
}

/**
 * token-classification / ner, as transformers' TokenClassificationPipeline: per-token softmax,
 * special tokens dropped, words found from offsets (a WordPiece "##" piece, or a piece longer
 * than its span, continues the word; otherwise a piece not preceded by a space), then the
 * aggregation strategy and B-/I- grouping, labels in ignoreLabels left out. `defaults`: options
 * given when the pipeline was made (transformers' pipeline("ner", aggregation_strategy="simple")),
 * a call's own options over them. `warn`: where the first call that groups words (first, average,
 * max) by the space guess, the tokenizer marking no continuing token, is told of that, once.
 */
export function tokenClassification(runner: EncoderRunner, defaults: TokenClassificationOptions, warn: (message: string) => void) {
  const info = runner.model.info;
  if (info.head !== "token-classification") throw new Error(`${runner.opened.path}: token-classification needs a token classifier (…ForTokenClassification), found ${info.hfArchitecture}`);
  const tok = runner.tokenizer as HFTokenizer;
  const wordAware = typeof tok.continuingSubwordPrefix === "string";
  const joinTokens = (tokens: string[]) => (typeof tok.tokensToString === "function" ? tok.tokensToString(tokens) : tokens.join(" "));

  /**
   * transformers warns (warnings.warn, which Python's default filter shows once per process) when
   * first/average/max find words by the space guess: told once per pipeline, at the first call
   * that does
   */
  let guessTold = false;
  const tellGuess = (strategy: AggregationStrategy) => {
    if (guessTold) return;
    guessTold = true;
    warn(`token-classification: aggregationStrategy "${strategy}": this tokenizer marks no token as continuing a word (it has no continuing-subword prefix, as WordPiece's "##"), so words are guessed from spaces: a token not preceded by a space joins the word before it (transformers: "Tokenizer does not support real words, using fallback heuristic")`);
  };

  /** the tokens' entries (a token's word start is the space guess when the tokenizer is not wordAware and gives offsets) */
  const gather = (text: string, enc: ModelInput, logits: Float32Array): PreEntity[] => {
    const n = info.labels.length, cps = [...text];
    const out: PreEntity[] = [];
    enc.ids.forEach((id, idx) => {
      if (enc.specialMask[idx]) return;
      const scores = softmax(logits.subarray(idx * n, (idx + 1) * n));
      let word = tok.piece(id);
      const off = enc.offsets?.[idx];
      if (!off) { out.push({ word, scores, start: null, end: null, index: idx, isSubword: false }); return; }
      const [start, end] = off;
      const ref = slice(cps, start, end);
      let isSubword = wordAware ? [...word].length !== [...ref].length : start > 0 && !slice(cps, start - 1, start + 1).includes(" ");
      if (id === tok.unkId) { word = ref; isSubword = false; }
      out.push({ word, scores, start, end, index: idx, isSubword });
    });
    return out;
  };

  const aggregateWord = (group: PreEntity[], strategy: AggregationStrategy): Tagged => {
    let scores: number[];
    if (strategy === "first") scores = group[0]!.scores;
    else if (strategy === "max") scores = group.reduce((best, e) => (Math.max(...e.scores) > Math.max(...best.scores) ? e : best)).scores;
    else scores = group[0]!.scores.map((_, j) => group.reduce((s, e) => s + e.scores[j]!, 0) / group.length);
    const i = argmax(scores);
    return { entity: info.labels[i]!, score: scores[i]!, word: joinTokens(group.map((e) => e.word)), start: group[0]!.start, end: group[group.length - 1]!.end };
  };

  const tag = (name: string): [string, string] => (name.startsWith("B-") ? ["B", name.slice(2)] : name.startsWith("I-") ? ["I", name.slice(2)] : ["I", name]);

  const groupEntities = (entities: Tagged[]): EntityGroup[] => {
    const groups: EntityGroup[] = [];
    let cur: Tagged[] = [];
    const flush = () => {
      if (cur.length === 0) return;
      const name = cur[0]!.entity.includes("-") ? cur[0]!.entity.slice(cur[0]!.entity.indexOf("-") + 1) : cur[0]!.entity;
      groups.push({ entity_group: name, score: cur.reduce((s, e) => s + e.score, 0) / cur.length, word: joinTokens(cur.map((e) => e.word)), start: cur[0]!.start, end: cur[cur.length - 1]!.end });
    };
    for (const e of entities) {
      if (cur.length > 0) {
        const [bi, t] = tag(e.entity), [, lastT] = tag(cur[cur.length - 1]!.entity);
        if (!(t === lastT && bi !== "B")) { flush(); cur = []; }
      }
      cur.push(e);
    }
    flush();
    return groups;
  };

  const template = inputTemplateOf(tok);
  /** content tokens one window holds: the model's tokens less the special tokens around them */
  const room = runner.maxLength - template.single.prefix.length - template.single.suffix.length;

  interface Settings { strategy: AggregationStrategy; ignore: ReadonlySet<string>; words: boolean; delimiter: string; stride?: number }

  /** the options checked once per call, before any work */
  const settings = (options: TokenClassificationOptions): Settings => {
    const strategy = strategyNamed(options.aggregationStrategy);
    if ((strategy === "first" || strategy === "average" || strategy === "max") && !tok.tokenOffsets) {
      throw new OptionError(`aggregationStrategy "${strategy}" needs character offsets, which this tokenizer cannot give`, "aggregationStrategy");
    }
    const ignoreLabels: unknown = options.ignoreLabels ?? ["O"];
    if (!Array.isArray(ignoreLabels) || !ignoreLabels.every((l) => typeof l === "string")) throw new OptionError(`ignoreLabels: expected a list of label names, got ${describe(ignoreLabels)}`, "ignoreLabels");
    checkFlags(options as Record<string, unknown>, ["isSplitIntoWords"], "token-classification");
    const words = options.isSplitIntoWords ?? false;
    // pre-split words are tokenized one by one, which gives the whole text's tokens for WordPiece only (a byte-level BPE marks a word's start by its space)
    if (words && !wordAware) throw new OptionError(`isSplitIntoWords: supported for WordPiece tokenizers (BERT, DistilBERT); this model's tokenizer is not one`, "isSplitIntoWords");
    if (options.delimiter !== undefined && (typeof options.delimiter !== "string" || !words)) {
      throw new OptionError(`delimiter: expected a string joining pre-split words, with isSplitIntoWords: true; got ${shownValue(options.delimiter)}${words ? "" : " without isSplitIntoWords"}`, "delimiter");
    }
    const stride = options.stride;
    if (stride !== undefined) {
      if (!Number.isInteger(stride) || stride < 0 || stride >= room) throw new OptionError(`stride: expected an integer in 0..${room - 1} (tokens shared by consecutive windows of ${room}, the model's ${runner.maxLength} less its special tokens), got ${shownValue(stride)}`, "stride");
      if (!tok.tokenOffsets) throw new OptionError("stride: merging windows needs character offsets, which this tokenizer cannot give", "stride");
    }
    return { strategy, ignore: new Set(ignoreLabels), words, delimiter: options.delimiter ?? " ", ...(stride === undefined ? {} : { stride }) };
  };
  /**
   * transformers' _sanitize_parameters refuses stride beside aggregation_strategy "none" when one
   * set of parameters (pipeline()'s, or a call's) gives both; with the strategy left out it reads
   * the windows token by token all the same (its postprocess default, "none")
   */
  const refuseStrideWithNone = (options: TokenClassificationOptions) => {
    if (options.stride == null || options.aggregationStrategy == null || strategyNamed(options.aggregationStrategy) !== "none") return;
    throw new OptionError(`stride: given with aggregationStrategy "none", which transformers refuses ("please select another one"): choose simple, first, average or max, or leave aggregationStrategy out for each token's entry (a token two windows share once)`, "stride");
  };
  settings(withDefaults(defaults, {}));
  refuseStrideWithNone(defaults);

  /**
   * the text the spans index, its content tokens and their offsets: a text's own, or pre-split
   * words' (each tokenized alone, its offsets moved to where it starts in the words joined by the
   * delimiter, as transformers' word_to_chars_map)
   */
  const contentOf = (input: string | readonly string[], delimiter: string): { text: string; ids: number[]; offsets?: Offset[] } => {
    if (typeof input === "string") {
      const ids = tok.encode(input, { addSpecialTokens: false });
      return { text: input, ids, offsets: tok.tokenOffsets?.(input, ids) };
    }
    const ids: number[] = [], offsets: Offset[] = [];
    let at = 0;
    for (const word of input) {
      const own = tok.encode(word, { addSpecialTokens: false });
      ids.push(...own);
      offsets.push(...(tok.tokenOffsets(word, own) ?? []).map(([s, e]): Offset => [s + at, e + at]));
      at += [...word].length + [...delimiter].length;
    }
    return { text: input.join(delimiter), ids, offsets };
  };

  /** content tokens [from, to) with the template's special tokens around them, as the model reads them */
  const windowInput = (ids: readonly number[], offsets: readonly Offset[] | undefined, from: number, to: number): ModelInput =>
    assembleModelInput(template, ids.slice(from, to), offsets?.slice(from, to));

  /**
   * the windows an input is read in: one, truncated, without a stride; with one, as the fast
   * tokenizers' overflowing tokens: windows of `room` content tokens, each starting `room - stride`
   * after the last, until one reaches the end
   */
  const windowsOf = (ids: readonly number[], offsets: readonly Offset[] | undefined, stride: number | undefined): ModelInput[] => {
    if (stride === undefined) return [windowInput(ids, offsets, 0, Math.min(room, ids.length))];
    const out: ModelInput[] = [];
    for (let from = 0; ; from += room - stride) {
      const to = Math.min(from + room, ids.length);
      out.push(windowInput(ids, offsets, from, to));
      if (to === ids.length) return out;
    }
  };

  const one = (pre: PreEntity[], { strategy, ignore }: ReturnType<typeof settings>): (TokenEntity | EntityGroup)[] => {
    let entities: Tagged[];
    if (strategy === "none" || strategy === "simple") {
      entities = pre.map((p) => {
        const i = argmax(p.scores);
        return { entity: info.labels[i]!, score: p.scores[i]!, index: p.index, word: p.word, start: p.start, end: p.end };
      });
    } else {
      entities = [];
      let group: PreEntity[] = [];
      for (const p of pre) {
        if (group.length > 0 && !p.isSubword) { entities.push(aggregateWord(group, strategy)); group = []; }
        group.push(p);
      }
      if (group.length > 0) entities.push(aggregateWord(group, strategy));
    }
    if (strategy === "none") {
      return entities.filter((e) => !ignore.has(e.entity)).map((e) => ({ entity: e.entity, score: e.score, index: e.index!, word: e.word, start: e.start, end: e.end }));
    }
    return groupEntities(entities).filter((g) => !ignore.has(g.entity_group));
  };

  /**
   * inputs as a list: texts, or pre-split texts (lists of words); `single`: one text was given (its
   * result is not wrapped in a list). One list of words is a batch of one, its result wrapped, as
   * transformers' __call__ passes it on as `[inputs]` to the base pipeline's list path
   */
  const inputsOf = (input: unknown, words: boolean): { inputs: (string | string[])[]; single: boolean } => {
    // transformers' TokenClassificationArgumentHandler refuses an empty list ("At least one input is
    // required"), where its other encoder pipelines answer one with an empty list
    if (Array.isArray(input) && input.length === 0) throw inputError("token-classification", words ? "a list of words, or a non-empty list of such lists (isSplitIntoWords)" : "a string or a non-empty list of strings", input);
    if (!words) return { inputs: textsOf("token-classification", input), single: typeof input === "string" };
    if (!Array.isArray(input)) throw inputError("token-classification", "a list of words, or a list of such lists (isSplitIntoWords)", input);
    // a list of words is one input; a list of lists of words, a batch (transformers tells them apart so too)
    const one = !input.every((x) => Array.isArray(x));
    const inputs = one ? [input] : input;
    inputs.forEach((words, i) => {
      (words as unknown[]).forEach((w, j) => {
        if (typeof w !== "string") throw inputError("token-classification", "a word (string)", w, one ? `word ${j}` : `input ${i}, word ${j}`);
      });
    });
    return { inputs: inputs as string[][], single: false };
  };

  return async (input: string | readonly string[] | readonly (readonly string[])[], options?: TokenClassificationOptions): Promise<unknown> => {
    const given = encoderCallOptions("token-classification", options, TOKEN_CLASSIFICATION_OPTIONS);
    const checked = settings(withDefaults(defaults, given));
    refuseStrideWithNone(given);
    const { inputs, single } = inputsOf(input, checked.words);
    const contents = inputs.map((x) => contentOf(x, checked.delimiter));
    const windows = contents.map((c) => windowsOf(c.ids, c.offsets, checked.stride));
    const logits = (await runner.run(windows.flat())).logits!;
    let next = 0;
    const results = contents.map((c, i) => {
      const found = windows[i]!.map((w) => one(gather(c.text, w, logits[next++]!), checked));
      // transformers merges only when there are several windows (each entry's index stays its window's)
      return found.length > 1 ? mergeOverlapping(found.flat()) : found[0]!;
    });
    // the guess is read for each content token with offsets (transformers' gather_pre_entities warns
    // there); "none" and "simple" never read it
    const guessed = !wordAware && windows.flat().some((w) => w.offsets !== undefined && w.specialMask.includes(false));
    if (guessed && (checked.strategy === "first" || checked.strategy === "average" || checked.strategy === "max")) tellGuess(checked.strategy);
    return single ? results[0] : results;
  };
}
