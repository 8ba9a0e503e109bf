import { KVBlockPool } from "../cache/index.js";
import type { KVCacheType } from "../kernels/index.js";
import type { EngineRequest, RequestParams } from "./request.js";

/**
 * llama-server's slots in the engine's terms. llama-server runs --parallel slots, each one sequence
 * with a KV region of its own; the engine runs up to maxSequences sequences from one shared pool,
 * each with the whole context. So a slot here is one place of those maxSequences: a running
 * request holds as many as its strategy's width (n choices, beams), from when the scheduler gives
 * it room until it ends (or is preempted). What a slot keeps after its request has gone is the
 * tokens of its sequence: their rows stay in the shared prefix cache, and erasing the slot drops
 * them from it. A request not pinned to a slot gets its first one as llama-server's
 * get_available_slot picks it (tools/server/server-context.cpp): the idle slot whose tokens share
 * the longest prefix with its prompt, as a fraction of the prompt, where that is more than the
 * similarity threshold (--slot-prompt-similarity, 0: never), else the least recently used idle
 * slot (ties: the highest id, as its `<=` scan); its other places, as llama-server's child tasks'
 * get_free_slots, the lowest free ones. The prefix cache is shared, so the choice changes no
 * request's cache hits here, only the slot GET /slots and a reply's id_slot name.
 */

/** llama-server's default --slot-prompt-similarity (common.h, the version node-llama-cpp 3.21.1 bundles) */
export const DEFAULT_SLOT_PROMPT_SIMILARITY = 0.1;

/** what a running request shows in the slots it holds */
export interface SlotTask {
  /** the engine's id of the request (llama-server's id_task) */
  readonly id: number;
  readonly params: RequestParams;
  /** prompt tokens whose rows came from the prefix cache */
  readonly cachedPromptTokens: number;
  /** whether the prompt has been computed */
  readonly prefilled: boolean;
  /** tokens the slot's sequence has generated so far */
  readonly generated: number;
}

export interface SlotState {
  readonly id: number;
  /** the request running in the slot; none: the slot is idle */
  readonly task?: SlotTask;
}

/** how an engine's KV pool stores a block's rows: a saved slot's rows fit only a pool where all of it is the same (Engine.kvLayout) */
export interface KVLayout {
  readonly layers: number;
  readonly headCountKv: number;
  readonly headDim: number;
  /** positions a block holds */
  readonly blockSize: number;
  readonly cacheTypeK: KVCacheType;
  readonly cacheTypeV: KVCacheType;
  /** whether each layer's arrays are one plane per KV head (KVBlockPool.planar) */
  readonly planar: boolean;
  /** floats one block's rows are (KVBlockPool.blockFloats) */
  readonly blockFloats: number;
}

/** a slot's cached tokens and their rows (Engine.saveSlot, restoreSlot): whole blocks, one array of KVLayout.blockFloats per block */
export interface SlotCache {
  readonly tokens: readonly number[];
  readonly blocks: readonly Float32Array[];
}

/** what a slot task (Engine.slotTask) does to its slot: each at once, the slot's request and earlier tasks having ended */
export interface SlotTaskAccess {
  /** Engine.saveSlot's cache: the slot's cached tokens and their rows */
  read(): Promise<SlotCache>;
  /** Engine.restoreSlot's: the rows back into the prefix cache; resolves with the tokens */
  restore(cache: SlotCache): Promise<number>;
  /** Engine.eraseSlot's: resolves with the tokens whose rows leave the prefix cache */
  erase(): number;
}

export class SlotTable {
  /** the request holding each slot */
  private readonly holders: (EngineRequest | undefined)[];
  /** which of its holder's sequences each slot shows (its place among the holder's slots) */
  private readonly places: number[];
  /** the tokens of the sequence each slot ran last, whose rows its request left in the prefix cache */
  private readonly last: (readonly number[] | undefined)[];
  /** when each slot's request last ended, by `clock` (-1: never; llama-server's t_last_used) */
  private readonly lastUsed: number[];
  private clock = 0;

  /** `similarity`: the prompt fraction a slot's tokens must share, more than which picks it (0: pick by recency alone) */
  constructor(readonly size: number, private readonly similarity = DEFAULT_SLOT_PROMPT_SIMILARITY) {
    this.holders = new Array<EngineRequest | undefined>(size).fill(undefined);
    this.places = new Array<number>(size).fill(0);
    this.last = new Array<readonly number[] | undefined>(size).fill(undefined);
    this.lastUsed = new Array<number>(size).fill(-1);
  }

  /**
   * Brings the table to the scheduler's running requests: a request no longer running (preempted,
   * or ended without `release`) leaves its slots, one that runs without slots takes as many as its
   * width (the first as `pick` chooses it). The scheduler runs at most `size` sequences at once, so
   * every running request finds its slots.
   */
  sync(running: readonly EngineRequest[]): void {
    const now = new Set(running);
    for (let id = 0; id < this.size; id++) {
      const r = this.holders[id];
      if (r !== undefined && !now.has(r)) this.leave(id);
    }
    const held = new Set(this.holders);
    const arriving = running.filter((r) => !held.has(r));
    // a request pinned to a slot takes it first (the scheduler started it only with the slot free:
    // startable), its other places the lowest free ones with the rest
    const first = new Set<EngineRequest>();
    for (const r of arriving) {
      const pin = r.params.slot;
      if (pin !== undefined && pin < this.size && this.holders[pin] === undefined) {
        this.take(pin, r, 0);
        first.add(r);
      }
    }
    for (const r of arriving) {
      if (!first.has(r)) {
        const chosen = this.pick(r.params.promptTokens);
        if (chosen === undefined) return;
        this.take(chosen, r, 0);
      }
      for (let place = 1; place < r.strategy.width; place++) {
        const id = this.holders.indexOf(undefined);
        if (id < 0) return;
        this.take(id, r, place);
      }
    }
  }

  /** llama-server's get_available_slot for a request of any slot: by prompt similarity, else the least recently used (undefined: none idle) */
  private pick(prompt: readonly number[]): number | undefined {
    let chosen: number | undefined;
    if (this.similarity !== 0 && prompt.length > 0) {
      let best = 0;
      for (let id = 0; id < this.size; id++) {
        const tokens = this.last[id];
        if (this.holders[id] !== undefined || tokens === undefined || tokens.length === 0) continue;
        let common = 0;
        while (common < tokens.length && common < prompt.length && tokens[common] === prompt[common]) common++;
        const share = common / prompt.length;
        if (share > best && share > this.similarity) {
          best = share;
          chosen = id;
        }
      }
    }
    if (chosen !== undefined) return chosen;
    for (let id = 0; id < this.size; id++) {
      if (this.holders[id] === undefined && (chosen === undefined || this.lastUsed[id]! <= this.lastUsed[chosen]!)) chosen = id;
    }
    return chosen;
  }

  /** whether a request pinned to `slot` may start: nobody holds the slot, and no request starting in the same step is pinned to it */
  free(slot: number, starting: readonly EngineRequest[]): boolean {
    return this.holders[slot] === undefined && !starting.some((r) => r.params.slot === slot);
  }

  /** the request ends: its slots are free, each keeping the tokens of its sequence (call before its sequences are retired) */
  release(request: EngineRequest): void {
    for (let id = 0; id < this.size; id++) if (this.holders[id] === request) this.leave(id);
  }

  /** the request holding the slot, if any */
  holder(id: number): EngineRequest | undefined {
    return this.holders[id];
  }

  states(): SlotState[] {
    return this.holders.map((r, id): SlotState => {
      if (r === undefined) return { id };
      const seq = r.sequences[this.places[id]!];
      const generated = r.prefilled && seq ? Math.max(0, seq.tokens.length - r.params.promptTokens.length) : 0;
      return { id, task: { id: r.id, params: r.params, cachedPromptTokens: r.cachedPromptTokens, prefilled: r.prefilled, generated } };
    });
  }

  /** the tokens the slot ran last, forgotten by the table */
  takeLast(id: number): readonly number[] | undefined {
    const tokens = this.last[id];
    this.last[id] = undefined;
    return tokens;
  }

  /** the tokens the slot ran last (or was restored with), kept by the table */
  lastTokens(id: number): readonly number[] | undefined {
    return this.last[id];
  }

  /** the slot is restored: it remembers `tokens` as the ones it ran last (an erase drops their rows) */
  restored(id: number, tokens: readonly number[]): void {
    this.last[id] = [...tokens];
  }

  private take(id: number, r: EngineRequest, place: number): void {
    this.holders[id] = r;
    this.places[id] = place;
    r.slots[place] = id;
  }

  private leave(id: number): void {
    const r = this.holders[id]!;
    // (a choice already retired: its prompt, which its rows began with, is what is known of it)
    this.last[id] = [...(r.sequences[this.places[id]!]?.tokens ?? r.params.promptTokens)];
    this.lastUsed[id] = this.clock++;
    this.holders[id] = undefined;
  }
}

/**
 * The leading full blocks of `tokens` the pool's prefix cache holds, in order, as the scheduler
 * looks a prompt up (each block's key names the registration of the block before it)
 */
export function cachedPrefixBlocks(pool: KVBlockPool, tokens: readonly number[]): number[] {
  const bs = pool.blockSize, blocks: number[] = [];
  let id = 0;
  for (let b = 0; (b + 1) * bs <= tokens.length; b++) {
    const found = pool.lookup(KVBlockPool.prefixKey(id, tokens.slice(b * bs, (b + 1) * bs)));
    if (!found) break;
    id = found.id;
    blocks.push(found.block);
  }
  return blocks;
}
