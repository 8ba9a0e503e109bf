import type { SlotState } from "../engine/index.js";
import type { Model } from "../llm.js";
import { resolveSamplingOptions } from "../sampling/index.js";
import { ApiError, invalid } from "./errors.js";
import { modelIdentity, readSlotFile, SlotFileError, validSlotFilename, writeSlotFile } from "./slot-files.js";

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

/** where POST /slots/{id}?action=save|restore keeps its files, and what the refusal without it names */
export interface SlotFiles {
  /** the folder (ServeOptions.slotSavePath); none: save and restore are llama-server's 501 */
  readonly folder?: string;
  /** the setting that names it, after "Start it with" */
  readonly setting: string;
}

type SlotActionResult =
  | { id_slot: number; n_erased: number }
  | { id_slot: number; filename: string; n_saved: number; n_written: number; timings: { save_ms: number } }
  | { id_slot: number; filename: string; n_restored: number; n_read: number; timings: { restore_ms: number } };

/**
 * POST /slots/{id_slot}?action=erase|save|restore (llama-server's post_slots, handle_slots_*).
 * erase: once the slot's request (if any) has ended, the rows of the tokens it ran last are
 * dropped from the prefix cache (those another running request holds stay), {id_slot, n_erased}.
 * save: once the slot is idle, the tokens it ran last whose rows the prefix cache holds (whole
 * blocks of 16) and those rows go to the folder's file `filename` (slot-files.ts: tsllm's own
 * format, not llama.cpp's), {id_slot, filename, n_saved, n_written, timings.save_ms}. restore: the
 * file's rows go back into the prefix cache under its tokens, so the next request starting with
 * them reuses them, {id_slot, filename, n_restored, n_read, timings.restore_ms}. Without a folder
 * save and restore are llama-server's 501 (it refuses erase too; here erase needs no files). `body`:
 * the request's JSON object, parsed only for save and restore (erase reads none).
 */
export async function slotAction(model: Model, rawId: string, query: URLSearchParams, body: () => Record<string, unknown>, files: SlotFiles): Promise<SlotActionResult> {
  const slots = model.engine.maxSequences;
  let id = Number.NaN;
  try {
    id = /^\d{1,9}$/.test(decodeURIComponent(rawId)) ? Number(decodeURIComponent(rawId)) : Number.NaN;
  } catch {
    // (a malformed escape: no id)
  }
  if (!(id < slots)) throw invalid("id_slot", `Invalid slot ID: ${JSON.stringify(rawId)}; this server's slots are 0..${slots - 1} (GET /slots lists them)`);
  const action = query.get("action") ?? "";
  if (action === "erase") return { id_slot: id, n_erased: await model.engine.eraseSlot(id) };
  if (action !== "save" && action !== "restore") throw invalid("action", `Invalid action: ${JSON.stringify(action)}; expected erase, save or restore`);
  if (files.folder === undefined) {
    throw new ApiError(501, `This server does not support slots action "${action}". Start it with ${files.setting}`, "not_supported_error", "action", "not_supported");
  }
  const filename = body().filename;
  if (typeof filename !== "string" || !validSlotFilename(filename)) {
    const given = filename === undefined ? "none given" : JSON.stringify(filename);
    throw invalid("filename", `Invalid filename: ${given}; expected a file name in the slot save folder: 1 to 255 bytes, no / \\ : * ? " < > | or control characters, no "..", no leading or trailing space, no trailing dot`);
  }
  // (the file, and how its weights were loaded: quantized at load, the same file computes other rows)
  const identity = { ...(await modelIdentity(model.path)), ...(model.loadQuantization === undefined ? {} : { quantize: model.loadQuantization }) };
  const kv = model.engine.kvLayout();
  // (the file's write or read is part of the slot's task: a restore asked after a save of the same
  // file reads what the save wrote; the timings start where the task does, as llama-server's
  // t_start after a busy slot's deferral, not at the request's arrival)
  const folder = files.folder;
  if (action === "save") {
    return model.engine.slotTask(id, async (slot) => {
      const started = performance.now();
      const cache = await slot.read();
      let written: number;
      try {
        written = await writeSlotFile(folder, filename, identity, kv, cache);
      } catch (e) {
        throw new ApiError(500, `Unable to save slot: ${(e as Error).message}`, "server_error", null, null);
      }
      return { id_slot: id, filename, n_saved: cache.tokens.length, n_written: written, timings: { save_ms: performance.now() - started } };
    });
  }
  return model.engine.slotTask(id, async (slot) => {
    const started = performance.now();
    let restored: number, read: number;
    try {
      const file = await readSlotFile(folder, filename, identity, kv, model.contextSize);
      read = file.bytes;
      restored = await slot.restore(file.cache);
    } catch (e) {
      if (!(e instanceof SlotFileError || e instanceof RangeError)) throw e;
      throw invalid("filename", `Unable to restore slot: ${e.message}`);
    }
    return { id_slot: id, filename, n_restored: restored, n_read: read, timings: { restore_ms: performance.now() - started } };
  });
}
