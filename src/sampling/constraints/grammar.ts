/**
 * A context-free grammar over Unicode code points, in the shape llama.cpp's grammar sampler
 * works on: rules of alternatives, each a sequence of elements that are either a character class
 * or a reference to a rule. GBNF's sugar (strings, groups, repetition) is compiled into this form
 * by gbnf.ts; the matcher (matcher.ts) runs it.
 */

/** inclusive code point ranges, and whether the class matches what is outside them */
export interface CharClass {
  readonly kind: "char";
  readonly ranges: readonly (readonly [number, number])[];
  readonly negated: boolean;
}

export interface RuleRef {
  readonly kind: "rule";
  readonly rule: number;
}

export type Element = CharClass | RuleRef;

/** one alternative: the elements in order (empty: matches nothing, i.e. the empty string) */
export type Alternative = readonly Element[];

export interface Grammar {
  /** rule names (for errors and for printing), index = rule id */
  readonly names: readonly string[];
  readonly rules: readonly (readonly Alternative[])[];
  /** the start rule's id */
  readonly root: number;
}

/** the largest repetition count a grammar, regex or JSON schema may ask for ({m,n}, minItems, maxLength, ...) */
export const MAX_REPETITION = 10_000;

/** what is wrong with a repetition {min,max} (max Infinity: unbounded), or undefined when nothing is */
export function repetitionProblem(min: number, max: number, limit = MAX_REPETITION): string | undefined {
  if (max < min) return `the maximum is below the minimum`;
  if (Math.max(min, Number.isFinite(max) ? max : 0) > limit) return `repetition bounds above ${limit}`;
  return undefined;
}

export class GrammarError extends Error {
  override name = "GrammarError";
}

/** whether a character class matches code point c */
export function matchesChar(e: CharClass, c: number): boolean {
  let inside = false;
  for (const [lo, hi] of e.ranges) {
    if (c >= lo && c <= hi) {
      inside = true;
      break;
    }
  }
  return inside !== e.negated;
}
