import { GrammarError, matchesChar, type CharClass, type Grammar } from "./grammar.js";

/**
 * Where a parse stands: the frames of the rules entered, innermost first. A frame points at the
 * next element of one alternative of one rule. Frames are interned (one object per distinct
 * frame), so equal stacks are the same object and a set of stacks is a Set.
 */
export interface Frame {
  readonly rule: number;
  readonly alt: number;
  readonly index: number;
  readonly parent: Frame | null;
  readonly id: number;
}

/** null: the empty stack, a complete parse */
export type Stack = Frame | null;

/** a set of stacks, interned: one object (and id) per distinct set, so results can be cached by it */
export interface StackSet {
  readonly id: number;
  readonly stacks: readonly Stack[];
  /** whether the parse may end here (the empty stack is in the set) */
  readonly complete: boolean;
}

/** how deep rule references may nest without consuming a character (left recursion never ends) */
const MAX_EXPANSION_DEPTH = 512;
/** distinct frames kept interned; past this the tables are dropped and rebuilt as needed */
const MAX_FRAMES = 500_000;

/**
 * llama.cpp's grammar recognizer: a set of stacks, each expanded until its top element is a
 * character class (or it is empty); a character moves every stack whose top class matches it one
 * element on and expands again. Results of (stack, character) are cached: a vocabulary walk asks
 * the same questions many times.
 */
export class GrammarMatcher {
  private frames = new Map<string, Frame>();
  private nextId = 0;
  private expansions = new Map<Stack, readonly Stack[]>();
  /** the stacks being expanded now, and their depth on the way down */
  private readonly expanding = new Map<Stack, number>();
  private steps = new Map<number, readonly Stack[]>();

  private sets = new Map<string, StackSet>();
  private nextSetId = 0;

  constructor(readonly grammar: Grammar) {}

  /** the stacks before any character: the root rule's alternatives, expanded */
  initial(): Stack[] {
    const out = new Set<Stack>();
    this.grammar.rules[this.grammar.root]!.forEach((_, alt) => this.expand(this.frame(this.grammar.root, alt, 0, null), out, 0));
    return [...out];
  }

  /** the interned set of the initial stacks */
  initialSet(): StackSet {
    return this.intern(this.initial());
  }

  /**
   * The set after code point c (undefined: c is not allowed there). Not cached by (set, c): the
   * caller asks once per class of characters the grammar cannot tell apart (parse-states.ts).
   */
  next(set: StackSet, c: number): StackSet | undefined {
    const stacks = this.advance(set.stacks, c);
    return stacks.length === 0 ? undefined : this.intern(stacks);
  }

  /** the character class on top of stack `s` (undefined: the empty stack, which takes no character) */
  top(s: Stack): CharClass | undefined {
    return s === null ? undefined : (this.grammar.rules[s.rule]![s.alt]![s.index] as CharClass);
  }

  private intern(stacks: readonly Stack[]): StackSet {
    const key = stacks.map((t) => (t === null ? -1 : t.id)).sort((a, b) => a - b).join(",");
    let set = this.sets.get(key);
    if (!set) {
      set = { id: this.nextSetId++, stacks, complete: stacks.includes(null) };
      if (this.sets.size > MAX_FRAMES) this.sets = new Map();
      this.sets.set(key, set);
    }
    return set;
  }

  /** the stacks after code point c from `stacks` (empty: c is not allowed there) */
  advance(stacks: readonly Stack[], c: number): Stack[] {
    if (stacks.length === 1) return this.advanceOne(stacks[0]!, c) as Stack[];
    const out = new Set<Stack>();
    for (const s of stacks) for (const t of this.advanceOne(s, c)) out.add(t);
    return [...out];
  }

  /** whether the parse may end here */
  static complete(stacks: readonly Stack[]): boolean {
    return stacks.includes(null);
  }

  private advanceOne(s: Stack, c: number): readonly Stack[] {
    if (s === null) return [];
    const key = s.id * 0x110000 + c;
    const cached = this.steps.get(key);
    if (cached) return cached;
    let result: readonly Stack[] = [];
    if (matchesChar(this.top(s)!, c)) {
      const out = new Set<Stack>();
      this.expand(this.frame(s.rule, s.alt, s.index + 1, s.parent), out, 0);
      result = [...out];
    }
    if (this.steps.size > MAX_FRAMES || this.frames.size > MAX_FRAMES) this.reset();
    this.steps.set(key, result);
    return result;
  }

  private frame(rule: number, alt: number, index: number, parent: Frame | null): Stack {
    // an alternative's end continues with the frame below: no frame for it
    if (index >= this.grammar.rules[rule]![alt]!.length) return parent;
    const key = `${rule},${alt},${index},${parent ? parent.id : -1}`;
    let f = this.frames.get(key);
    if (!f) {
      f = { rule, alt, index, parent, id: this.nextId++ };
      this.frames.set(key, f);
    }
    return f;
  }

  /**
   * Every stack `s` can reach without consuming a character, whose top is a character class (or
   * empty), added to `out`. A stack met again while it is being expanded (`X*` of an `X` that may
   * match nothing comes back to the same stack, which adds nothing new) is not expanded twice;
   * grammar.ts refuses the cycles that grow the stack instead (left recursion). Returns the
   * shallowest depth of such a stack met below (Infinity: none), so a set that misses what an
   * ancestor still adds is not cached.
   */
  private expand(s: Stack, out: Set<Stack>, depth: number): number {
    const cached = this.expansions.get(s);
    if (cached) {
      for (const t of cached) out.add(t);
      return Infinity;
    }
    const onPath = this.expanding.get(s);
    if (onPath !== undefined) return onPath;
    if (depth > MAX_EXPANSION_DEPTH) {
      throw new GrammarError(`rule ${this.grammar.names[s!.rule]} nests more than ${MAX_EXPANSION_DEPTH} rules deep without a character (left recursion?)`);
    }
    const mine = new Set<Stack>();
    let low = Infinity;
    if (s === null) mine.add(null);
    else {
      const e = this.grammar.rules[s.rule]![s.alt]![s.index]!;
      if (e.kind === "char") mine.add(s);
      else {
        this.expanding.set(s, depth);
        const cont = this.frame(s.rule, s.alt, s.index + 1, s.parent);
        this.grammar.rules[e.rule]!.forEach((_, alt) => {
          low = Math.min(low, this.expand(this.frame(e.rule, alt, 0, cont as Frame | null), mine, depth + 1));
        });
        this.expanding.delete(s);
      }
    }
    if (low >= depth) this.expansions.set(s, [...mine]);
    for (const t of mine) out.add(t);
    return low >= depth ? Infinity : low;
  }

  /** drops the caches (and the interning: equal stacks made later may be new objects, which only costs duplicates) */
  private reset(): void {
    this.steps = new Map();
    this.expansions = new Map();
    this.frames = new Map();
  }
}
