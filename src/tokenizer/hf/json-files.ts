import { readWholeFile } from "../../formats/index.js";

/** tokenizer.json for big vocabularies (gemma3: 33 MB) stays far below this; anything larger is refused before parsing */
const MAX_JSON_BYTES = 256 * 1024 * 1024;

export type JsonObject = Record<string, unknown>;

export function isObject(v: unknown): v is JsonObject {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** A tokenizer file's text (tokenizer.json, merges.txt, vocab.txt, a template), bounded; errors name the file. */
export function readTokenizerFile(path: string): string {
  return readWholeFile(path, MAX_JSON_BYTES, (size) => new Error(`${path}: ${size} bytes is larger than the ${MAX_JSON_BYTES}-byte limit for a tokenizer file`)).toString("utf8");
}

/** Reads and parses a JSON file that must hold an object; errors name the file. */
export function readJsonObject(path: string): JsonObject {
  const text = readTokenizerFile(path);
  let value: unknown;
  try {
    value = JSON.parse(text);
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
