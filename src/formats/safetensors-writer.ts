import { join } from "node:path";
import { writeOutputFile } from "./output-file.js";
import { SAFETENSORS_DTYPE_SIZE, SAFETENSORS_INDEX, type SafetensorsDType } from "./safetensors.js";

/**
 * safetensors writer. The header is built first (shapes and dtypes give every offset), then
 * tensor bytes are streamed one tensor at a time from lazy producers, so writing a large
 * model holds at most one tensor in memory.
 */

export interface SafetensorsTensorSpec {
  readonly name: string;
  readonly dtype: SafetensorsDType;
  /** row-major (PyTorch) order */
  readonly shape: readonly number[];
  /** little-endian bytes, or a producer called once when the tensor is written */
  readonly data: Uint8Array | (() => Uint8Array);
}

function byteLength(t: SafetensorsTensorSpec): number {
  let n = SAFETENSORS_DTYPE_SIZE[t.dtype];
  for (const d of t.shape) {
    if (!Number.isSafeInteger(d) || d < 0) throw new Error(`safetensors writer: tensor "${t.name}": bad dimension ${d}`);
    n *= d;
  }
  return n;
}

/**
 * Writes one .safetensors file with the tensors in the given order, replacing `path` only once
 * the new file is complete (output-file.ts); `inputs` are files the tensors come from.
 */
export async function writeSafetensors(path: string, tensors: readonly SafetensorsTensorSpec[], metadata?: Readonly<Record<string, string>>, inputs: readonly string[] = []): Promise<void> {
  const header: Record<string, unknown> = {};
  if (metadata && Object.keys(metadata).length > 0) header["__metadata__"] = metadata;
  let offset = 0;
  for (const t of tensors) {
    if (t.name === "__metadata__" || Object.hasOwn(header, t.name)) throw new Error(`safetensors writer: ${path}: duplicate or reserved tensor name "${t.name}"`);
    const n = byteLength(t);
    header[t.name] = { dtype: t.dtype, shape: [...t.shape], data_offsets: [offset, offset + n] };
    offset += n;
  }
  let json = Buffer.from(JSON.stringify(header), "utf8");
  // pad with spaces to a multiple of 8 so the data section is 8-byte aligned (as the reference writer does)
  const pad = (8 - (json.length % 8)) % 8;
  if (pad) json = Buffer.concat([json, Buffer.alloc(pad, 0x20)]);
  await writeOutputFile(path, async (fh) => {
    const len = Buffer.alloc(8);
    len.writeBigUInt64LE(BigInt(json.length));
    let pos = 0;
    const write = async (b: Uint8Array) => {
      let done = 0;
      while (done < b.length) {
        const { bytesWritten } = await fh.write(b, done, b.length - done, pos);
        done += bytesWritten;
        pos += bytesWritten;
      }
    };
    await write(len);
    await write(json);
    for (const t of tensors) {
      const data = typeof t.data === "function" ? t.data() : t.data;
      const n = byteLength(t);
      if (data.length !== n) throw new Error(`safetensors writer: ${path}: tensor "${t.name}" has ${data.length} bytes, shape [${t.shape.join(", ")}] of ${t.dtype} needs ${n}`);
      await write(data);
    }
  }, inputs);
}

/**
 * Writes `tensors` as shards of at most `maxShardBytes` data bytes each
 * (model-00001-of-0000N.safetensors, a tensor never split) plus model.safetensors.index.json.
 */
export async function writeSafetensorsSharded(folder: string, tensors: readonly SafetensorsTensorSpec[], maxShardBytes: number): Promise<string[]> {
  const shards: SafetensorsTensorSpec[][] = [];
  let size = Infinity;
  for (const t of tensors) {
    const n = byteLength(t);
    if (size + n > maxShardBytes && !(shards.length > 0 && size === 0)) {
      shards.push([]);
      size = 0;
    }
    shards[shards.length - 1]!.push(t);
    size += n;
  }
  const total = shards.length;
  const names = shards.map((_, i) => `model-${String(i + 1).padStart(5, "0")}-of-${String(total).padStart(5, "0")}.safetensors`);
  const weightMap: Record<string, string> = {};
  let totalSize = 0;
  for (let i = 0; i < total; i++) {
    await writeSafetensors(join(folder, names[i]!), shards[i]!);
    for (const t of shards[i]!) {
      weightMap[t.name] = names[i]!;
      totalSize += byteLength(t);
    }
  }
  const index = Buffer.from(JSON.stringify({ metadata: { total_size: totalSize }, weight_map: weightMap }, null, 2) + "\n", "utf8");
  await writeOutputFile(join(folder, SAFETENSORS_INDEX), (fh) => fh.writeFile(index));
  return names;
}
