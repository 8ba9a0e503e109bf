import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";
import { typeName } from "../tensor/index.js";
import { canQuantize } from "../tensor/quant/index.js";
import { writeRandomModel, type RandomModelSpec } from "./random-model.js";

/** bump when the generator's output for a given spec changes, so cached files are rebuilt */
const GENERATOR_VERSION = 1;

export function defaultModelCacheDir(): string {
  return process.env["TSLLM_CACHE"] ?? join(homedir(), ".cache", "tsllm", "models");
}

/**
 * Key of a spec: its fields (sorted), the tokenizer file's content, the generator version and
 * whether the weight type was quantized or filled with random bits. The tokenizer counts by its
 * content, not its path: the presets borrow it from ../shared by an absolute path, so a key with
 * the path made every clone of the project (every CI run) write its own copy of each model.
 */
export function randomModelKey(spec: RandomModelSpec): string {
  const h = createHash("sha256");
  const fields = Object.keys(spec)
    .filter((k) => k !== "tokenizerFrom")
    .sort()
    .map((k) => [k, spec[k as keyof RandomModelSpec]]);
  h.update(JSON.stringify({ v: GENERATOR_VERSION, fields, quantized: canQuantize(spec.weightType) }));
  h.update(readFileSync(spec.tokenizerFrom));
  return h.digest("hex").slice(0, 16);
}

/**
 * Path of a random model for `spec` in `cacheDir`, generating it only when no file for the
 * same key exists. The file is written under a temporary name and renamed, so an
 * interrupted run never leaves a half-written model behind under the final name.
 */
export async function ensureRandomModel(spec: RandomModelSpec, cacheDir: string = defaultModelCacheDir()): Promise<string> {
  const path = join(cacheDir, `random-${spec.arch}-${typeName(spec.weightType)}-${randomModelKey(spec)}.gguf`);
  if (existsSync(path)) return path;
  mkdirSync(cacheDir, { recursive: true });
  const tmp = `${path}.tmp-${process.pid}`;
  try {
    await writeRandomModel(tmp, spec);
    renameSync(tmp, path);
  } finally {
    rmSync(tmp, { force: true });
  }
  return path;
}
