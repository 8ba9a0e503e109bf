import { existsSync } from "node:fs";
import { basename } from "node:path";
import { GGUFError, GGUFMetadata, readGGUFHeader } from "./gguf-reader.js";
import type { GGUFHeader, GGUFTensorInfo } from "./gguf-types.js";
import { GGUFTensorSource, type TensorSource } from "./tensor-source.js";

/**
 * Split GGUF sets, as llama.cpp's gguf-split writes them and its model loader reads them:
 * files `<prefix>-00001-of-0000N.gguf` ... `<prefix>-0000N-of-0000N.gguf`; every part carries
 * `split.no` (u16, 0-based), `split.count` (u16) and `split.tensors.count` (i32, tensors in the
 * whole set); the first part also holds all of the model's metadata; each part lists the
 * tensor infos of its own tensors, with offsets into its own data section. The first part may
 * hold no tensors at all (gguf-split --no-tensor-first-split).
 */

export const SPLIT_NO = "split.no";
export const SPLIT_COUNT = "split.count";
export const SPLIT_TENSORS_COUNT = "split.tensors.count";

/** `<prefix>-00002-of-00003.gguf` for index 1 of 3 (llama.cpp's llama_split_path) */
export function splitPartPath(prefix: string, index: number, count: number): string {
  const pad = (n: number) => String(n).padStart(5, "0");
  return `${prefix}-${pad(index + 1)}-of-${pad(count)}.gguf`;
}

/** the prefix of a part's path, or undefined when the name does not end as part `index` of `count` */
export function splitPrefix(path: string, index: number, count: number): string | undefined {
  const tail = splitPartPath("", index, count);
  return path.endsWith(tail) && path.length > tail.length ? path.slice(0, -tail.length) : undefined;
}

/** A tensor of a split set: where it is (part index) and its info in that part. */
export interface SplitTensorInfo extends GGUFTensorInfo {
  readonly part: number;
}

export interface GGUFSplitSet {
  /** the first part's path */
  readonly path: string;
  /** headers of all parts, in order */
  readonly parts: readonly GGUFHeader[];
  readonly tensors: ReadonlyMap<string, SplitTensorInfo>;
}

/** the split count a header declares (1 when it has none: an ordinary single file) */
export function splitCount(header: GGUFHeader): number {
  return new GGUFMetadata(header.path, header.metadata).number(SPLIT_COUNT) ?? 1;
}

/**
 * The first part of the set a later part belongs to (`x-00002-of-00003.gguf` -> `x-00001-of-00003.gguf`),
 * undefined for a first part, an ordinary file, or a part not named as llama.cpp names them.
 */
export function firstSplitPart(header: GGUFHeader): string | undefined {
  const meta = new GGUFMetadata(header.path, header.metadata);
  const no = meta.number(SPLIT_NO), count = meta.number(SPLIT_COUNT);
  if (no === undefined || count === undefined || !Number.isInteger(no) || !Number.isInteger(count) || no < 1 || no >= count) return undefined;
  const prefix = splitPrefix(header.path, no, count);
  return prefix === undefined ? undefined : splitPartPath(prefix, 0, count);
}

/**
 * Reads the headers of every part of the set whose first part is `first` (a parsed header),
 * checking what llama.cpp checks: the first part is split 0, every part exists and carries
 * its own index, no tensor appears twice, and the tensor count matches `split.tensors.count`.
 */
export function readGGUFSplit(first: GGUFHeader): GGUFSplitSet {
  const meta = new GGUFMetadata(first.path, first.metadata);
  const count = meta.requireNumber(SPLIT_COUNT);
  if (!Number.isInteger(count) || count < 1) throw new GGUFError(first.path, SPLIT_COUNT, `expected a positive integer, found ${count}`);
  const no = meta.requireNumber(SPLIT_NO);
  const name = basename(first.path);
  if (no !== 0) {
    const firstName = /-\d{5}-of-\d{5}\.gguf$/.test(name) ? name.replace(/-\d{5}-of-(\d{5})\.gguf$/, "-00001-of-$1.gguf") : "the part -00001-of-...";
    throw new GGUFError(first.path, SPLIT_NO, `this is part ${no + 1} of ${count} of a split GGUF; load the first part (${firstName}) instead`);
  }
  const prefix = count > 1 ? splitPrefix(first.path, 0, count) : undefined;
  if (count > 1 && prefix === undefined) {
    throw new GGUFError(first.path, "file name", `a split GGUF of ${count} parts must be named <name>${splitPartPath("", 0, count)} so its other parts can be found`);
  }
  const parts: GGUFHeader[] = [first];
  for (let i = 1; i < count; i++) {
    const path = splitPartPath(prefix!, i, count);
    if (!existsSync(path)) throw new GGUFError(first.path, `split part ${i + 1} of ${count}`, `${path} is missing (every part of the set must sit beside the first one)`);
    const header = readGGUFHeader(path);
    const pm = new GGUFMetadata(path, header.metadata);
    const idx = pm.number(SPLIT_NO);
    if (idx === undefined) throw new GGUFError(path, SPLIT_NO, `missing: not a part of a split GGUF (expected part ${i + 1} of ${count} of ${name})`);
    if (idx !== i) throw new GGUFError(path, SPLIT_NO, `expected ${i} (part ${i + 1} of ${count} of ${name}), found ${idx}`);
    const pc = pm.number(SPLIT_COUNT);
    if (pc !== undefined && pc !== count) throw new GGUFError(path, SPLIT_COUNT, `expected ${count} as in ${name}, found ${pc} (parts of different sets?)`);
    parts.push(header);
  }
  const tensors = new Map<string, SplitTensorInfo>();
  parts.forEach((h, part) => {
    for (const t of h.tensors) {
      const prev = tensors.get(t.name);
      if (prev) throw new GGUFError(h.path, `tensor "${t.name}"`, `duplicated: also in ${basename(parts[prev.part]!.path)}`);
      tensors.set(t.name, { ...t, part });
    }
  });
  const expected = meta.number(SPLIT_TENSORS_COUNT);
  if (expected !== undefined && expected !== tensors.size) {
    throw new GGUFError(first.path, SPLIT_TENSORS_COUNT, `expected ${expected} tensors in the ${count} parts, found ${tensors.size} (corrupted or mixed-up parts)`);
  }
  return { path: first.path, parts, tensors };
}

/** The tensors of a split set: each read goes to the part (a GGUFTensorSource of its own) that holds the tensor. */
export class GGUFSplitTensorSource implements TensorSource {
  readonly path: string;
  readonly tensors: ReadonlyMap<string, SplitTensorInfo>;
  private readonly parts: GGUFTensorSource[] = [];

  constructor(set: GGUFSplitSet) {
    this.path = set.path;
    this.tensors = set.tensors;
    try {
      for (const p of set.parts) this.parts.push(new GGUFTensorSource(p));
    } catch (e) {
      this.close();
      throw e;
    }
  }

  read(name: string, into: Uint8Array, byteOffset: number): void {
    const info = this.tensors.get(name);
    if (!info) throw new GGUFError(this.path, `tensor "${name}"`, "not in this split set");
    this.parts[info.part]!.read(name, into, byteOffset);
  }

  close(): void {
    for (const p of this.parts) p.close();
  }
}
