/**
 * Greedy speculative decoding. A proposer guesses the next `draftTokens` tokens; the target
 * model checks them all in one batched forward pass (logits for every position) and keeps the
 * longest prefix that its own greedy choice agrees with, plus its own choice at the first
 * disagreement (or after the last accepted token). The chooser is the same greedy sampler
 * plain generation uses (logit bias and penalties included, given the exact history), so the
 * output is token for token what plain greedy decoding of the target produces: every emitted
 * token is the target's choice given the tokens before it.
 *
 * Proposers: a draft model (same vocabulary; e.g. a Q4_0 copy of the target) decoding greedily
 * with its own KV cache, or prompt lookup: the last n tokens (n = promptLookup down to 1) are
 * searched for earlier in prompt + output and the tokens that followed that occurrence are
 * proposed.
 *
 * Cache bookkeeping: `seq` is prompt + accepted output; `cur` is the newest token, chosen but
 * not yet run through the target. The target cache always holds seq minus cur; rejected draft
 * rows are dropped with truncate(). The draft cache holds some prefix of seq and catches up
 * before drafting.
 */
import type { KVCache } from "../cache/kv-cache.js";
import type { LanguageModel } from "../models/model.js";

export interface SpeculativeOptions {
  maxTokens: number;
  /** tokens proposed per round (default 8 with a draft model, 10 with prompt lookup) */
  draftTokens?: number;
  /** the draft model; otherwise prompt lookup */
  draft?: LanguageModel;
  /** longest n-gram prompt lookup matches (default 3) */
  promptLookup?: number;
  /** the target's greedy choice for a logits row given the history (prompt + output so far) */
  choose: (logits: Float32Array, history: readonly number[]) => number;
  /** tokens that end the generation (not emitted) */
  endIds: ReadonlySet<number>;
  /** called with each accepted token as soon as it is final; return true to stop */
  onToken?: (token: number) => boolean;
}

export interface SpeculativeStats {
  /** proposal rounds (= batched target passes after the prefill) */
  rounds: number;
  /** tokens proposed */
  drafted: number;
  /** proposed tokens the target agreed with */
  accepted: number;
  /** accepted / drafted */
  acceptanceRate: number;
  /** generated tokens per target forward pass after the prefill */
  tokensPerTargetPass: number;
}

export interface SpeculativeResult {
  tokens: number[];
  finishReason: "stop" | "length";
  stats: SpeculativeStats;
}

function argmax(row: Float32Array): number {
  let best = 0;
  for (let i = 1; i < row.length; i++) if (row[i]! > row[best]!) best = i;
  return best;
}

/** prompt lookup: the tokens that followed the latest earlier occurrence of seq's last n tokens */
export function lookupDraft(seq: readonly number[], maxNgram: number, k: number): number[] {
  for (let n = Math.min(maxNgram, seq.length - 1); n >= 1; n--) {
    const tail = seq.length - n;
    for (let i = tail - 1; i >= 0; i--) {
      let j = 0;
      while (j < n && seq[i + j] === seq[tail + j]) j++;
      if (j === n) return seq.slice(i + n, Math.min(i + n + k, seq.length));
    }
  }
  return [];
}

export function validateSpeculative(o: { draftTokens?: number; promptLookup?: number }): void {
  for (const [name, v] of [["draftTokens", o.draftTokens], ["promptLookup", o.promptLookup]] as const) {
    if (v !== undefined && (!Number.isInteger(v) || v < 1)) throw new RangeError(`${name} must be an integer >= 1, got ${v}`);
  }
}

export function speculativeGreedy(target: LanguageModel, promptTokens: readonly number[], o: SpeculativeOptions): SpeculativeResult {
  validateSpeculative(o);
  const k = o.draftTokens ?? (o.draft ? 8 : 10);
  const ngram = o.promptLookup ?? 3;
  if (o.draft && o.draft.info.vocabSize !== target.info.vocabSize) {
    throw new RangeError(`draft model: its vocabulary has ${o.draft.info.vocabSize} tokens, the target's ${target.info.vocabSize}`);
  }
  const V = target.info.vocabSize;
  const capacity = promptTokens.length + o.maxTokens + k + 1;
  const tCache = target.createCache(capacity);
  const dCache: KVCache | undefined = o.draft?.createCache(capacity);
  const stats = { rounds: 0, drafted: 0, accepted: 0 };
  const seq = [...promptTokens];
  const out: number[] = [];
  let finishReason: "stop" | "length" = "length";
  const done = () => {
    const s = stats.drafted > 0 ? stats.accepted / stats.drafted : 0;
    return { tokens: out, finishReason, stats: { ...stats, acceptanceRate: s, tokensPerTargetPass: stats.rounds > 0 ? out.length / stats.rounds : 0 } };
  };
  if (o.maxTokens === 0) return done();
  // emits an accepted token; false when generation must stop
  const accept = (t: number): boolean => {
    if (o.endIds.has(t)) { finishReason = "stop"; return false; }
    out.push(t);
    seq.push(t);
    if (o.onToken?.(t)) { finishReason = "stop"; return false; }
    return out.length < o.maxTokens;
  };

  let logits = target.forward(promptTokens, tCache);
  if (!accept(o.choose(logits, seq))) return done();
  for (;;) {
    const cur = seq[seq.length - 1]!;
    // propose
    let proposal: number[];
    const room = Math.min(k, o.maxTokens - out.length);
    if (o.draft && dCache) {
      proposal = [];
      let dl = o.draft.forward(seq.slice(dCache.length), dCache);
      for (let i = 0; i < room; i++) {
        const t = argmax(dl);
        proposal.push(t);
        if (i + 1 < room) dl = o.draft.forward([t], dCache);
      }
    } else {
      proposal = lookupDraft(seq, ngram, room);
    }
    // verify: one pass over cur + proposal, logits at every position
    const base = tCache.length;
    const rows = target.forward([cur, ...proposal], tCache, { allLogits: true });
    stats.rounds++;
    stats.drafted += proposal.length;
    let m = 0;
    const history = [...seq];
    let next = o.choose(rows.subarray(0, V), history);
    while (m < proposal.length && next === proposal[m]) {
      m++;
      history.push(next);
      next = o.choose(rows.subarray(m * V, (m + 1) * V), history);
    }
    stats.accepted += m;
    // keep cur and the accepted tokens' K/V; the rest of the proposal is forgotten
    tCache.truncate(base + 1 + m);
    let go = true;
    for (let i = 0; i < m && go; i++) go = accept(proposal[i]!);
    if (go) go = accept(next);
    if (dCache && dCache.length > seq.length - 1) dCache.truncate(seq.length - 1);
    if (!go) return done();
  }
}
