import type { Offset } from "./offsets.js";
import type { Tokenizer } from "./types.js";

/**
 * Encoder inputs as transformers' tokenizer(text, text_pair, truncation=True, max_length=...)
 * builds them: the post-processor's special tokens around one text ([CLS] a [SEP]; <s> a </s>) or
 * a pair ([CLS] a [SEP] b [SEP]; <s> a </s></s> b </s>), token type ids, the special-tokens
 * mask, and character offsets; texts too long for `maxLength` are truncated (longest first).
 */

export interface TemplateToken {
  readonly id: number;
  readonly typeId: number;
}

export interface InputTemplate {
  readonly single: { readonly prefix: readonly TemplateToken[]; readonly suffix: readonly TemplateToken[] };
  readonly pair: { readonly prefix: readonly TemplateToken[]; readonly middle: readonly TemplateToken[]; readonly suffix: readonly TemplateToken[]; readonly typeA: number; readonly typeB: number };
}

export interface ModelInput {
  readonly ids: number[];
  readonly typeIds: number[];
  /** true for the tokens the template added */
  readonly specialMask: boolean[];
  /** [start, end) in code points of the text the token came from ([0, 0] for added tokens); undefined when the tokenizer cannot say */
  readonly offsets?: Offset[];
  /** which text each token came from: 0 (text), 1 (pair), null (added) — transformers' sequence_ids() */
  readonly sequenceIds: (0 | 1 | null)[];
}

export interface ModelInputOptions {
  readonly pair?: string;
  /** at most this many tokens in all (special tokens included); longer texts are truncated */
  readonly maxLength?: number;
  /** how a longer input is cut to maxLength (truncateModelInput); longest first unless told */
  readonly truncation?: TruncationStrategy;
  readonly addSpecialTokens?: boolean;
}

/**
 * transformers' truncation strategies that cut (TruncationStrategy, tokenizers' own): the longer
 * text of a pair first, or only the first or only the second text
 */
export type TruncationStrategy = "longest_first" | "only_first" | "only_second";

/** Tokenizers that know their template and offsets (HFTokenizer); others get BERT's or RoBERTa's by their type. */
interface InputAware {
  readonly inputTemplate?: InputTemplate;
  tokenOffsets?(text: string, ids: readonly number[]): Offset[] | undefined;
}

export function inputTemplateOf(tok: Tokenizer): InputTemplate {
  const own = (tok as Tokenizer & InputAware).inputTemplate;
  if (own) return own;
  const cls = tok.clsId ?? tok.bosId, sep = tok.sepId ?? tok.eosId;
  if (cls === undefined || sep === undefined) return { single: { prefix: [], suffix: [] }, pair: { prefix: [], middle: [], suffix: [], typeA: 0, typeB: 0 } };
  const t = (id: number, typeId = 0): TemplateToken => ({ id, typeId });
  if (tok.type === "bert") return { single: { prefix: [t(cls)], suffix: [t(sep)] }, pair: { prefix: [t(cls)], middle: [t(sep)], suffix: [t(sep, 1)], typeA: 0, typeB: 1 } };
  return { single: { prefix: [t(cls)], suffix: [t(sep)] }, pair: { prefix: [t(cls)], middle: [t(sep), t(sep)], suffix: [t(sep)], typeA: 0, typeB: 0 } };
}

/** Tokenizes one input (a text or a pair) for an encoder. */
export function encodeModelInput(tok: Tokenizer, text: string, options: ModelInputOptions = {}): ModelInput {
  const aware = tok as Tokenizer & InputAware;
  const a = tok.encode(text, { addSpecialTokens: false });
  const b = options.pair === undefined ? undefined : tok.encode(options.pair, { addSpecialTokens: false });
  const offA = aware.tokenOffsets?.(text, a);
  const offB = b === undefined || options.pair === undefined ? undefined : aware.tokenOffsets?.(options.pair, b);
  const whole = assembleModelInput(inputTemplateOf(tok), a, offA, options.addSpecialTokens ?? true, b === undefined ? undefined : { ids: b, offsets: offB });
  return options.maxLength === undefined ? whole : truncateModelInput(tok, whole, options.maxLength, options.truncation);
}

/**
 * The tokens a pair of texts of `na` and `nb` tokens keeps in `room`, as tokenizers' LongestFirst
 * computes them: the shorter text whole when the longer can give up the rest; else half the room
 * each, an odd room's extra token to the longer (of two of a length, the second). Removing one
 * token at a time from the longer gave that token to the first text where the second was as long
 * or longer: another input than transformers' model reads.
 */
function longestFirst(na: number, nb: number, room: number): [number, number] {
  const swap = na > nb;
  let short = Math.min(na, nb), long = short > room ? short : Math.max(short, room - short);
  if (short + long > room) {
    short = Math.floor(room / 2);
    long = short + (room % 2);
  }
  // a text keeps at most the tokens it has (tokenizers' truncate to a longer length leaves it whole)
  return swap ? [Math.min(na, long), Math.min(nb, short)] : [Math.min(na, short), Math.min(nb, long)];
}

/**
 * The tokens texts of `na` and `nb` tokens (`nb` undefined: one text) keep in `room` as tokenizers'
 * truncate_encodings cuts them with `strategy`. only_first and only_second cut their text alone,
 * which must keep a token at least (tokenizers' "Sequence to truncate too short to respect the
 * provided max_length"); only_second on one text has nothing to cut ("Second sequence not
 * provided"). Both are refused here with a RangeError saying why, as tokenizers refuses them:
 * transformers' fast tokenizers raise them (its Python tokenizers log them and leave the input whole,
 * which its model cannot read). A room of 0 (a maxLength of the special tokens alone) cuts every text
 * to nothing, whichever the strategy, as tokenizers does.
 */
function keptLengths(na: number, nb: number | undefined, room: number, strategy: TruncationStrategy): [number, number] {
  if (room === 0) return [0, 0];
  const remove = na + (nb ?? 0) - room;
  if (strategy === "longest_first") return nb === undefined ? [room, 0] : longestFirst(na, nb, room);
  if (strategy === "only_second" && nb === undefined) {
    throw new RangeError(`truncation "only_second" cuts only a pair's second text, and this input is one text (tokenizers: "Second sequence not provided")`);
  }
  const [which, n] = strategy === "only_first" ? ["first", na] : ["second", nb!];
  if (n <= remove) {
    throw new RangeError(`truncation "${strategy}" cuts only the ${which} text, whose ${n} tokens cannot give up the ${remove} that must go (it keeps one at least; "longest_first" cuts both) (tokenizers: "Sequence to truncate too short to respect the provided max_length")`);
  }
  return strategy === "only_first" ? [na - remove, nb ?? 0] : [na, nb! - remove];
}

/**
 * An input (encodeModelInput's, uncut) cut to `maxLength` tokens in all as the tokenizer's
 * truncation cuts it, the special tokens kept: by default (truncation=True) longest first as the fast
 * tokenizers' LongestFirst (tokenizers' truncate_encodings), which transformers' AutoTokenizer
 * applies; "only_first" / "only_second" cut that text alone (keptLengths). The input itself when it
 * fits; no text is tokenized again.
 */
export function truncateModelInput(tok: Tokenizer, input: ModelInput, maxLength: number, strategy: TruncationStrategy = "longest_first"): ModelInput {
  const added = input.specialMask.filter(Boolean).length;
  const room = maxLength - added;
  if (room < 0) throw new RangeError(`maxLength ${maxLength} leaves no room for the ${added} special tokens`);
  if (input.ids.length <= maxLength) return input;
  const of = (seq: 0 | 1) => {
    const at = input.sequenceIds.flatMap((s, i) => (s === seq ? [i] : []));
    return { ids: at.map((i) => input.ids[i]!), offsets: input.offsets && at.map((i) => input.offsets![i]!) };
  };
  const tpl = inputTemplateOf(tok), single = tpl.single.prefix.length + tpl.single.suffix.length;
  // a pair whose second text has no tokens ("") is told by its template's special tokens
  const a = of(0), pair = input.sequenceIds.includes(1) || (added > 0 && added !== single) ? of(1) : undefined;
  const [na, nb] = keptLengths(a.ids.length, pair?.ids.length, room, strategy);
  const cut = pair === undefined ? undefined : { ids: pair.ids.slice(0, nb), offsets: pair.offsets?.slice(0, nb) };
  return assembleModelInput(tpl, a.ids.slice(0, na), a.offsets?.slice(0, na), added > 0, cut);
}

/**
 * An encoder's input from its texts' tokens (and their offsets): the template's special tokens
 * around them (unless `addSpecial` is false), type ids, the special-tokens mask, sequence ids.
 */
export function assembleModelInput(tpl: InputTemplate, a: readonly number[], offA: readonly Offset[] | undefined, addSpecial = true, pair?: { ids: readonly number[]; offsets: readonly Offset[] | undefined }): ModelInput {
  const b = pair?.ids, offB = pair?.offsets;
  const ids: number[] = [], typeIds: number[] = [], specialMask: boolean[] = [], sequenceIds: (0 | 1 | null)[] = [];
  const offsets: Offset[] | undefined = offA && (b === undefined || offB) ? [] : undefined;
  const special = (ts: readonly TemplateToken[]) => {
    if (!addSpecial) return;
    for (const t of ts) { ids.push(t.id); typeIds.push(t.typeId); specialMask.push(true); sequenceIds.push(null); offsets?.push([0, 0]); }
  };
  const content = (xs: readonly number[], type: number, seq: 0 | 1, offs: readonly Offset[] | undefined) => {
    xs.forEach((id, i) => { ids.push(id); typeIds.push(type); specialMask.push(false); sequenceIds.push(seq); if (offsets) offsets.push(offs![i]!); });
  };
  if (b === undefined) {
    special(tpl.single.prefix);
    content(a, 0, 0, offA);
    special(tpl.single.suffix);
  } else {
    special(tpl.pair.prefix);
    content(a, tpl.pair.typeA, 0, offA);
    special(tpl.pair.middle);
    content(b, tpl.pair.typeB, 1, offB);
    special(tpl.pair.suffix);
  }
  return { ids, typeIds, specialMask, sequenceIds, ...(offsets ? { offsets } : {}) };
}
