import type { SlotState } from "../engine/index.js";
import type { Model } from "../llm.js";
import { resolveSamplingOptions } from "../sampling/index.js";
import { ApiError, invalid } from "./errors.js";

/*
 * llama-server's GET /slots and POST /slots/{id_slot}?action=... (tools/server: server-context.cpp's
 * get_slots / post_slots, server_slot::to_json). Its slots are the --parallel sequences it runs;
 * here they are the engine's maxSequences places (engine/slots.ts): each running request holds as
 * many as its choices, every slot has the whole context. A slot is listed as llama-server lists it
 * by default (LLAMA_SERVER_SLOTS_DEBUG unset: params' metrics form, no prompt or generated text);
 * an idle slot shows only id, n_ctx, speculative and is_processing (llama-server's slot before its
 * first task).
 */

/** the path of POST /slots/{id_slot} as routes and metrics name it */
export const SLOT_PREFIX = "/slots/";
export const SLOT_ROUTE = `${SLOT_PREFIX}{id_slot}`;

/** one slot as llama-server's server_slot::to_json(only_metrics = true) writes it */
function slotJson(slot: SlotState, contextSize: number, canDraft: boolean): Record<string, unknown> {
  const t = slot.task;
  // (speculative: whether the slot drafts; an idle one, whether the server has a draft model to)
  const base = { id: slot.id, n_ctx: contextSize, speculative: t ? t.params.decoding.kind === "speculative" : canDraft, is_processing: t !== undefined };
  if (!t) return base;
  const p = t.params, s = resolveSamplingOptions(p.sampling), prompt = p.promptTokens.length;
  return {
    ...base, id_task: t.id, n_prompt_tokens: prompt, n_prompt_tokens_processed: t.prefilled ? prompt - t.cachedPromptTokens : 0, n_prompt_tokens_cache: t.cachedPromptTokens,
    params: {
      seed: s.seed, temperature: s.temperature, top_k: s.topK, top_p: s.topP, min_p: s.minP, typical_p: s.typicalP, repeat_last_n: s.repeatLastN, repeat_penalty: s.repeatPenalty,
      presence_penalty: s.presencePenalty, frequency_penalty: s.frequencyPenalty, max_tokens: p.maxTokens, n_predict: p.maxTokens, ignore_eos: p.ignoreEos, n_probs: p.topLogprobs ?? 0, min_keep: s.minKeep,
    },
    next_token: [{ has_next_token: true, n_remain: p.maxTokens - t.generated, n_decoded: t.generated }],
  };
}

/**
 * GET /slots: every slot; with `fail_on_no_slot` given a value (any, "0" too: llama-server checks
 * only that it is not empty), a 503 where none is idle
 */
export function listSlots(model: Model, canDraft: boolean, query: URLSearchParams): Record<string, unknown>[] {
  const slots = model.engine.slots();
  if ((query.get("fail_on_no_slot") ?? "") !== "" && slots.every((s) => s.task !== undefined)) {
    throw new ApiError(503, "no slot available", "unavailable_error", null, "no_slot_available", { "Retry-After": "1" });
  }
  return slots.map((s) => slotJson(s, model.contextSize, canDraft));
}

/** GET /slots on a server started without it (llama-server's --no-slots answer, 501) */
export function slotsOff(setting: string): ApiError {
  return new ApiError(501, `This server does not support slots endpoint: it was started with ${setting}`, "not_supported_error", null, "not_supported");
}

/**
 * POST /slots/{id_slot}?action=erase: once the slot's request (if any) has ended, the rows of the
 * tokens it ran last are dropped from the prefix cache (those another running request holds stay),
 * {id_slot, n_erased} as llama-server answers; save and restore (llama-server's files of a slot's
 * KV cache, under --slot-save-path) are a 501: this server writes no KV cache to files
 */
export async function slotAction(model: Model, rawId: string, query: URLSearchParams): Promise<{ id_slot: number; n_erased: number }> {
  const slots = model.engine.maxSequences;
  let id = Number.NaN;
  try {
    id = /^\d{1,9}$/.test(decodeURIComponent(rawId)) ? Number(decodeURIComponent(rawId)) : Number.NaN;
  } catch {
    // (a malformed escape: no id)
  }
  if (!(id < slots)) throw invalid("id_slot", `Invalid slot ID: ${JSON.stringify(rawId)}; this server's slots are 0..${slots - 1} (GET /slots lists them)`);
  const action = query.get("action") ?? "";
  if (action === "save" || action === "restore") {
    throw new ApiError(501, `This server does not support slots action "${action}": it keeps no slot's KV cache in files (llama-server's slot-save-path); action=erase is supported`, "not_supported_error", "action", "not_supported");
  }
  if (action !== "erase") throw invalid("action", `Invalid action: ${JSON.stringify(action)}; expected erase (save and restore are not supported)`);
  return { id_slot: id, n_erased: await model.engine.eraseSlot(id) };
}
