import { OptionError } from "../units/index.js";

/** Unicode normalization applied to prompt text before tokenizing; "none" leaves it as typed. */
export type PromptNormalization = "none" | "nfc" | "nfkc";

export const PROMPT_NORMALIZATIONS: readonly PromptNormalization[] = ["none", "nfc", "nfkc"];

/**
 * NFKC folds compatibility forms: full-width ASCII (ＡＢＣ１２３！) and the ideographic space
 * become their half-width forms, ligatures and circled digits are spelled out. Models trained
 * mostly on half-width text tokenize such input into many rare tokens without it.
 */
export function normalizePrompt(text: string, form: PromptNormalization = "none"): string {
  switch (form) {
    case "none": return text;
    case "nfc": return normalizeForm(text, "NFC");
    case "nfkc": return normalizeForm(text, "NFKC");
    default: throw new OptionError(`normalize: expected one of ${PROMPT_NORMALIZATIONS.join(", ")}, got ${JSON.stringify(form)}`, "normalize");
  }
}

export type NormalizationForm = "NFC" | "NFD" | "NFKC" | "NFKD";

/**
 * marks, and the two half-width kana voicing marks (U+FF9E/F, whose compatibility decompositions
 * are marks): the characters whose decompositions begin with a combining class other than 0. A
 * run of them this long is put in canonical order here before String.prototype.normalize sees it.
 */
const LONG_MARK_RUN = /[\p{M}\uff9e\uff9f]{32,}/gu;

/**
 * `text.normalize(form)` without the time going quadratic in a long run of combining marks:
 * V8's (ICU's) canonical reordering moves one mark at a time, so "a" + 80K marks of alternating
 * combining classes took 2 s and a megabyte minutes, in one synchronous step. A long run is
 * replaced by its decomposition (each character's NFD, or NFKD for the compatibility forms) in
 * canonical order, a stable sort of each stretch between class-0 characters by combining class:
 * the text's full decomposition is then the same characters in the same canonical order (a
 * stretch of it sorted beforehand sorts to the same), so every form of it is the same, and what
 * is left to reorder is already in order.
 */
export function normalizeForm(text: string, form: NormalizationForm): string {
  LONG_MARK_RUN.lastIndex = 0;
  let m = LONG_MARK_RUN.exec(text);
  if (m === null) return text.normalize(form);
  const compat = form === "NFKC" || form === "NFKD";
  let ordered = "", at = 0;
  for (; m !== null; m = LONG_MARK_RUN.exec(text)) {
    ordered += text.slice(at, m.index) + canonicalOrder(m[0], compat);
    at = m.index + m[0].length;
  }
  return (ordered + text.slice(at)).normalize(form);
}

/** per code point: its decomposition's code points (NFD, NFKD) */
const DECOMPOSED = [new Map<number, number[]>(), new Map<number, number[]>()];
/**
 * per code point of a decomposition: its place in the order of combining classes (0: class 0);
 * from what normalize() does to it beside U+0301 (class 230) and U+0316 (220)
 */
const CLASS_RANK = new Map<number, number>();
let classOrder: string[] = [];

/** whether NFD puts b before a: a's combining class is above b's, and b's is not 0 */
const reorders = (a: string, b: string): boolean => (a + b).normalize("NFD") === b + a;

function rankClass(cp: number): void {
  const c = String.fromCodePoint(cp);
  if (!(reorders(c, "\u0301") || reorders("\u0301", c) || reorders(c, "\u0316") || reorders("\u0316", c))) {
    CLASS_RANK.set(cp, 0);
    return;
  }
  // the non-starters seen so far ranked again with this one among them (few distinct ones)
  classOrder.push(c);
  classOrder = classOrder.sort((a, b) => (reorders(a, b) ? 1 : reorders(b, a) ? -1 : 0));
  let rank = 0;
  for (let i = 0; i < classOrder.length; i++) {
    if (i === 0 || reorders(classOrder[i]!, classOrder[i - 1]!)) rank++;
    CLASS_RANK.set(classOrder[i]!.codePointAt(0)!, rank);
  }
}

/**
 * a run's decomposition in canonical order (normalizeForm): the run itself where every character
 * is its own decomposition and their classes do not go down between class-0 characters (one mark
 * repeated: nothing to do), else each stretch between class-0 characters sorted by class (a
 * counting sort, stable), in typed arrays (number arrays and a bucket per class took ~0.17 s per
 * megabyte)
 */
function canonicalOrder(run: string, compat: boolean): string {
  const cache = DECOMPOSED[compat ? 1 : 0]!;
  let ordered = true, last = 0, n = 0;
  for (let i = 0; i < run.length;) {
    const cp = run.codePointAt(i)!;
    i += cp > 0xffff ? 2 : 1;
    let d = cache.get(cp);
    if (d === undefined) {
      cache.set(cp, (d = [...String.fromCodePoint(cp).normalize(compat ? "NFKD" : "NFD")].map((x) => x.codePointAt(0)!)));
      // every rank known before any is used: a new class among them renumbers the others (and
      // `last` with them: the run is sorted then)
      for (const c of d) if (!CLASS_RANK.has(c)) { rankClass(c); ordered = false; }
    }
    n += d.length;
    if (ordered && d.length === 1 && d[0] === cp) {
      const r = CLASS_RANK.get(cp)!;
      if (r !== 0 && r < last) ordered = false;
      else last = r;
    } else ordered = false;
  }
  if (ordered) return run;
  for (const d of cache.values()) for (const c of d) if (!CLASS_RANK.has(c)) rankClass(c);
  const decomposed = new Uint32Array(n), ranks = new Uint16Array(n);
  let top = 0;
  for (let i = 0, k = 0; i < run.length;) {
    const cp = run.codePointAt(i)!;
    i += cp > 0xffff ? 2 : 1;
    const d = cache.get(cp)!;
    for (let j = 0; j < d.length; j++, k++) top = Math.max(top, (ranks[k] = CLASS_RANK.get((decomposed[k] = d[j]!))!));
  }
  // UTF-16 out: at most two units per code point
  const out = new Uint16Array(2 * n);
  const count = new Uint32Array(top + 2);
  const sorted = new Uint32Array(n);
  let u = 0;
  const put = (c: number): void => {
    if (c > 0xffff) {
      out[u++] = 0xd800 + ((c - 0x10000) >> 10);
      out[u++] = 0xdc00 + ((c - 0x10000) & 0x3ff);
    } else out[u++] = c;
  };
  for (let i = 0; i < n;) {
    if (ranks[i] === 0) { put(decomposed[i]!); i++; continue; }
    // the stretch of non-starters [i, e): each placed after the smaller classes, in the order given
    let e = i;
    count.fill(0);
    for (; e < n && ranks[e] !== 0; e++) count[ranks[e]! + 1]!++;
    for (let r = 1; r <= top + 1; r++) count[r]! += count[r - 1]!;
    for (let j = i; j < e; j++) sorted[count[ranks[j]!]!++] = decomposed[j]!;
    for (let j = 0; j < e - i; j++) put(sorted[j]!);
    i = e;
  }
  return UTF16.decode(out.subarray(0, u));
}
const UTF16 = new TextDecoder("utf-16le");
