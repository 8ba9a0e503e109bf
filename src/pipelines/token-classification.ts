import type { HFTokenizer } from "../tokenizer/hf/hf-tokenizer.js";
import type { ModelInput } from "../tokenizer/index.js";
import { OptionError } from "../units/index.js";
import type { EncoderRunner } from "./encoder-runner.js";
import { describe, isObject, knownOptions, textsOf, withDefaults } from "./inputs.js";
import { argmax, softmax } from "./math.js";

export type AggregationStrategy = "none" | "simple" | "first" | "average" | "max";

export interface TokenClassificationOptions {
  /** how tokens become entities (default "none": one entry per token) */
  readonly aggregationStrategy?: AggregationStrategy;
  /** labels left out of the result (default ["O"]) */
  readonly ignoreLabels?: readonly string[];
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
export const TOKEN_CLASSIFICATION_OPTIONS: readonly string[] = ["aggregationStrategy", "ignoreLabels"];

/**
 * transformers' stride (overlapping windows over a long text): no recorded transformers output to
 * judge the windows' merging by, so refused rather than guessed, saying what happens instead
 */
function refuseStride(options: unknown, maxLength: number): void {
  if (isObject(options) && "stride" in options) throw new OptionError(`token-classification: stride (transformers' overlapping windows over a text longer than the model) is not supported: a text past the ${maxLength} tokens the model reads is truncated`, "stride");
}

/**
 * token-classification / ner, as transformers' TokenClassificationPipeline: per-token softmax,
 * special tokens dropped, words found from offsets (a WordPiece "##" piece, or a piece longer
 * than its span, continues the word; otherwise a piece not preceded by a space), then the
 * aggregation strategy and B-/I- grouping, labels in ignoreLabels left out. `defaults`: options
 * given when the pipeline was made (transformers' pipeline("ner", aggregation_strategy="simple")),
 * a call's own options over them.
 */
export function tokenClassification(runner: EncoderRunner, defaults: TokenClassificationOptions = {}) {
  const info = runner.model.info;
  if (info.head !== "token-classification") throw new Error(`${runner.opened.path}: token-classification needs a token classifier (…ForTokenClassification), found ${info.hfArchitecture}`);
  const tok = runner.tokenizer as HFTokenizer;
  const wordAware = typeof tok.continuingSubwordPrefix === "string";
  const joinTokens = (tokens: string[]) => (typeof tok.tokensToString === "function" ? tok.tokensToString(tokens) : tokens.join(" "));

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

  /** the options checked once per call, before any work */
  const settings = (options: TokenClassificationOptions): { strategy: AggregationStrategy; ignore: ReadonlySet<string> } => {
    const strategy = strategyNamed(options.aggregationStrategy);
    if ((strategy === "first" || strategy === "average" || strategy === "max") && !tok.tokenOffsets) {
      throw new OptionError(`aggregationStrategy "${strategy}" needs character offsets, which this tokenizer cannot give`, "aggregationStrategy");
    }
    const ignoreLabels: unknown = options.ignoreLabels ?? ["O"];
    if (!Array.isArray(ignoreLabels) || !ignoreLabels.every((l) => typeof l === "string")) throw new OptionError(`ignoreLabels: expected a list of label names, got ${describe(ignoreLabels)}`, "ignoreLabels");
    return { strategy, ignore: new Set(ignoreLabels) };
  };
  refuseStride(defaults, runner.maxLength);
  settings(withDefaults(defaults, {}));

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

  return async (input: string | readonly string[], options?: TokenClassificationOptions): Promise<unknown> => {
    const texts = textsOf("token-classification", input);
    refuseStride(options, runner.maxLength);
    const checked = settings(withDefaults(defaults, knownOptions("token-classification", options, TOKEN_CLASSIFICATION_OPTIONS)));
    const encs = texts.map((t) => runner.tokenize(t));
    const logits = (await runner.run(encs)).logits!;
    const results = texts.map((t, i) => one(gather(t, encs[i]!, logits[i]!), checked));
    return typeof input === "string" ? results[0] : results;
  };
}
