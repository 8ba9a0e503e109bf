import { readFileSync, statSync } from "node:fs";

/** tokenizer.json for big vocabularies (gemma3: 33 MB) stays far below this; anything larger is refused before parsing */
const MAX_JSON_BYTES = 256 * 1024 * 1024;

export type JsonObject = Record<string, unknown>;

export function isObject(v: unknown): v is JsonObject {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** Reads and parses a JSON file that must hold an object; errors name the file. */
export function readJsonObject(path: string): JsonObject {
  const size = statSync(path).size;
  if (size > MAX_JSON_BYTES) throw new Error(`${path}: ${size} bytes is larger than the ${MAX_JSON_BYTES}-byte limit for a tokenizer file`);
  let value: unknown;
  try {
    value = JSON.parse(readFileSync(path, "utf8"));
  } catch (e) {
    throw new Error(`${path}: not valid JSON (${(e as Error).message})`);
  }
  if (!isObject(value)) throw new Error(`${path}: expected a JSON object at the top level`);
  return value;
}

/**
 * A special-token entry of tokenizer_config.json / special_tokens_map.json: a string, an
 * AddedToken-like object `{content: "..."}`, or null.
 */
export function tokenText(v: unknown): string | undefined {
  if (typeof v === "string") return v;
  if (isObject(v) && typeof v.content === "string") return v.content;
  return undefined;
}
