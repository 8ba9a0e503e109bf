/**
 * The engine's checks of a request that need neither the model's tokenizer nor its KV cache's
 * contents: token ids against the vocabulary, a token prompt against the context, a request's
 * width against the sequences run at once (the model's limits), its KV worst case against the
 * pool's size, and a constraint's grammar, which needs no model at all. Engine.submit runs them
 * (the scheduler's admission uses the same worst case); the browser build's page runs them too,
 * with the limits the worker sent at load, so that such a request throws at the call of stream()
 * as Model.stream does, not at its first step.
 */
import { speculativePositions, type TokenBans } from "../generation/index.js";
import { compileConstraint, type ConstraintSpec, type Grammar } from "../sampling/constraints/index.js";
import { shownValue } from "../units/index.js";
import { RequestError } from "./errors.js";

/** what an engine checks a request against */
export interface RequestLimits {
  /** positions one sequence may hold */
  contextSize: number;
  /** ids that are tokens (of both the tokenizer and the embedding) */
  tokenIds: number;
  /** rows of the logits (the embedding's, which a Hugging Face checkpoint pads past the tokenizer) */
  rows: number;
  /** sequences run at once (a request's choices or beams count each) */
  maxSequences: number;
  /** the KV pool every request's worst case must fit (absent: not checked) */
  kv?: KvPoolLimits;
}

/** the engine's KV pool, as a request's worst case is checked against it */
export interface KvPoolLimits {
  /** blocks of the pool */
  blocks: number;
  /** positions one block holds */
  blockSize: number;
  /** bytes of the whole pool */
  bytes: number;
}

/** what a request's KV worst case depends on: its prompt, maxTokens and how it decodes (`draft`: a draft model's cache counts in it, see SpeculativeStrategy.chargesOutside) */
export interface KvRequest {
  promptTokens: number;
  maxTokens: number;
  decoding: { kind: "sample"; n: number } | { kind: "beam"; numBeams: number } | { kind: "speculative"; draftTokens: number; draft: boolean };
}

/**
 * An empty prompt, one past the context, one that fills it but for a request that generates, a
 * token id outside the vocabulary. A prompt of exactly the context's length fits its positions: a
 * request generating nothing (`maxTokens` 0, scoring its prompt: OpenAI's echo with max_tokens 0,
 * as lm-evaluation-harness's OpenAI model sent windows of the whole context, and llama.cpp's
 * perplexity tool scores n_ctx tokens in a context of n_ctx) runs; one generating needs room for a
 * token. `maxTokens` unknown (a default applied later): counted as generating.
 */
export function checkPromptTokens(promptTokens: readonly number[], limits: Pick<RequestLimits, "contextSize" | "tokenIds">, maxTokens?: number): void {
  if (promptTokens.length === 0) throw new RequestError("the prompt is empty (no tokens): give some text or enable addSpecialTokens", "prompt");
  const length = promptTokens.length, context = limits.contextSize;
  if (length > context || (length === context && maxTokens !== 0)) {
    const full = length === context ? ", which leaves no room for a token to generate" : "";
    throw new RequestError(`the prompt has ${length} tokens but the context holds ${context}${full}; use a larger contextSize or a shorter prompt`, "prompt", "context_length_exceeded");
  }
  const vocab = limits.tokenIds;
  for (const t of promptTokens) if (!Number.isInteger(t) || t < 0 || t >= vocab) throw new RequestError(`token id ${t} is outside the vocabulary [0, ${vocab})`, "prompt");
}

export function checkStopTokens(stopTokens: readonly number[], tokenIds: number): void {
  stopTokens.forEach((t, i) => {
    if (!Number.isInteger(t) || t < 0 || t >= tokenIds) throw new RequestError(`stopTokens[${i}]: token id ${shownValue(t)} is outside the vocabulary [0, ${tokenIds})`, "stopTokens");
  });
}

/**
 * a sampled request's banned, biased and forced token ids (badWordsIds, sequenceBias, the forced
 * ones) against the vocabulary, as SequenceBiasLogitsProcessor checks its ids (ForcedBOS indexes
 * past the scores); suppressTokens and beginSuppressTokens are not: transformers'
 * SuppressTokens(AtBegin)LogitsProcessor masks the vocabulary with isin(arange(vocab), ids), so
 * an id past it bans nothing (Whisper's lists name ids of larger vocabularies), as Sequence skips it
 */
export function checkBannedTokens(bans: TokenBans, tokenIds: number): void {
  const lists: [string, readonly (readonly number[])[]][] = [
    ["badWordsIds", bans.badWordsIds ?? []], ["sequenceBias", (bans.sequenceBias ?? []).map(([seq]) => seq)],
    ["forcedBosTokenId", [bans.forcedBosTokenId === undefined ? [] : [bans.forcedBosTokenId]]], ["forcedEosTokenId", [[bans.forcedEosTokenId ?? []].flat()]],
  ];
  for (const [name, seqs] of lists) {
    for (const seq of seqs) for (const t of seq) if (t >= tokenIds) throw new RequestError(`${name}: token id ${shownValue(t)} is outside the vocabulary [0, ${tokenIds})`, name);
  }
}

/** the biased ids against the logits' rows, as the sampler applies them (checked before the prefill, not where the first token is sampled) */
export function checkLogitBiasIds(ids: Iterable<number>, rows: number): void {
  for (const id of ids) if (id >= rows) throw new RequestError(`logitBias: token id ${id} is outside the vocabulary [0, ${rows})`, "logitBias");
}

/** a request's choices or beams (`width`) against the sequences run at once */
export function checkWidth(width: number, beams: boolean, maxSequences: number): void {
  if (width > maxSequences) {
    throw new RequestError(`${beams ? "numBeams" : "n"} = ${width} ${beams ? "beams" : "completions"} exceed the ${maxSequences} sequences the engine runs at once (maxSequences)`, beams ? "numBeams" : "n");
  }
}

/** draft tokens a speculative round proposes when the request does not say: 8 with a draft model, 10 by prompt lookup */
export function defaultDraftTokens(draft: boolean): number {
  return draft ? 8 : 10;
}

/**
 * The positions a draft model's KV pool holds beside the target's (the memory plan's draft cache,
 * planDraft, and the engine's cap on that pool, Engine.draftCache): one context and a round's
 * proposal of `draftTokens` past its current token (speculativePositions), in whole blocks
 */
export function draftPoolPositions(contextSize: number, draftTokens: number, blockSize: number): number {
  return Math.ceil(speculativePositions(0, contextSize, draftTokens) / blockSize) * blockSize;
}

/**
 * the blocks n choices add beyond the first choice's: each further one extends past the prompt by
 * its `room` (maxTokens, within the context: a choice stops at the context's end as one choice
 * does), starting mid-block; a choice may take the prompt's next free slot first
 */
export function choicesExtraBlocks(n: number, room: number, blockSize: number): number {
  return n > 1 ? 1 + (n - 1) * (Math.ceil(room / blockSize) + 1) : 0;
}

/** the blocks a beam search's beams add: each beam's `room` tokens and one partial block it copies at a fork (forkCopy) */
export function beamExtraBlocks(numBeams: number, room: number, blockSize: number): number {
  return numBeams * (Math.ceil(room / blockSize) + 1);
}

/** the blocks a speculative request adds: one round's proposal past the accepted tokens (maybe over a block boundary), and a draft model's whole cache (`draftBlocks` of its positions) */
export function speculativeExtraBlocks(promptTokens: number, room: number, draftTokens: number, blockSize: number, draftBlocks?: (positions: number) => number): number {
  return Math.ceil((draftTokens + 1) / blockSize) + 1 + (draftBlocks?.(speculativePositions(promptTokens, room, draftTokens)) ?? 0);
}

/**
 * The KV blocks a request may hold at once, at worst: its first sequence's prompt + maxTokens
 * (within the context) less `cachedBlocks` found in the prefix cache, plus `extra`, what its
 * strategy adds (Strategy.extraBlocks: the *ExtraBlocks above)
 */
export function worstKvBlocks(request: Pick<KvRequest, "promptTokens" | "maxTokens">, contextSize: number, blockSize: number, extra: number, cachedBlocks = 0): number {
  const length = Math.min(request.promptTokens + request.maxTokens, contextSize);
  return Math.ceil(length / blockSize) - cachedBlocks + extra;
}

/**
 * A request whose worst case (worstKvBlocks) exceeds the whole KV pool could never run: refused in
 * one line naming both sizes. Engine.submit runs it (the scheduler gives its strategy's `extra`);
 * the browser build's page runs it for a token prompt with `extra` computed from its options (no
 * draft model there), so both refuse it at the call, with the same message.
 */
export function checkKvWorstCase(request: KvRequest, limits: Pick<RequestLimits, "contextSize"> & { kv: KvPoolLimits }, extra?: number): void {
  const { blocks, blockSize: bs, bytes } = limits.kv;
  const d = request.decoding;
  const room = Math.min(request.maxTokens, limits.contextSize - request.promptTokens);
  extra ??= d.kind === "beam" ? beamExtraBlocks(d.numBeams, room, bs) : d.kind === "sample" ? choicesExtraBlocks(d.n, room, bs) : speculativeExtraBlocks(request.promptTokens, room, d.draftTokens, bs);
  const need = worstKvBlocks(request, limits.contextSize, bs, extra);
  if (need <= blocks) return;
  const what = d.kind === "beam" ? `, ${d.numBeams} beams` : d.kind === "sample" ? (d.n > 1 ? `, ${d.n} choices` : "") : d.draft ? ", a speculative proposal and the draft model's KV cache" : ", a speculative proposal";
  throw new RequestError(
    `the request needs room for up to ${need * bs} tokens of KV cache (prompt ${request.promptTokens} + maxTokens ${request.maxTokens}${what}) ` +
      `but the KV cache holds ${blocks * bs} tokens (${bytes} bytes); lower maxTokens or raise kvCacheBytes`,
    "maxTokens", "context_length_exceeded",
  );
}

/**
 * The page's KV check of a token prompt (the browser build), from the options as stream() takes
 * them: beam search with numBeams, speculative decoding by prompt lookup, else n choices (as
 * Model.submit reads them). Without maxTokens, `defaultMaxTokens`: the model's own default (its
 * generation config's, else 256), which the worker applies and sends with the load's answer;
 * unchecked where it is not known.
 */
export function checkTokenPromptKv(
  promptTokens: number,
  options: { maxTokens?: number; n?: number; numBeams?: number; promptLookup?: boolean | number; draftTokens?: number },
  limits: RequestLimits,
  defaultMaxTokens?: number,
): void {
  const maxTokens = options.maxTokens ?? defaultMaxTokens;
  if (!limits.kv || maxTokens === undefined) return;
  const decoding: KvRequest["decoding"] = options.numBeams !== undefined ? { kind: "beam", numBeams: options.numBeams }
    : options.promptLookup ? { kind: "speculative", draftTokens: options.draftTokens ?? defaultDraftTokens(false), draft: false }
    : { kind: "sample", n: options.n ?? 1 };
  checkKvWorstCase({ promptTokens, maxTokens, decoding }, { contextSize: limits.contextSize, kv: limits.kv });
}

/** a constraint compiled (the engine's grammar), or a RequestError naming the option whose grammar, schema, choices or regex does not compile, and where */
export function compileRequestConstraint(spec: ConstraintSpec): Grammar {
  try {
    return compileConstraint(spec);
  } catch (e) {
    const option = "grammar" in spec ? "grammar" : "jsonSchema" in spec ? "jsonSchema" : "choice" in spec ? "choice" : "regex" in spec ? "regex" : "json";
    // (a message that already names the option is not prefixed again: "choice: choice: ...")
    const message = (e as Error).message;
    throw new RequestError(message.startsWith(`${option}: `) ? message : `${option}: ${message}`, option);
  }
}
