import { closeSync, openSync } from "node:fs";
import { readTensorInto } from "../formats/gguf-reader.js";
import { splitPartPath } from "../formats/gguf-split.js";
import { ggufEntry, readGGUFHeader, writeGGUF, type GGUFWriteEntry } from "../formats/index.js";

/**
 * Splits a GGUF the way llama.cpp's gguf-split --split-max-tensors does: part i holds
 * tensors [i*n, (i+1)*n) with their infos and offsets in its own data section; every part
 * carries split.no (u16), split.count (u16), split.tensors.count (i32); only the first part
 * carries the model's metadata (first, as gguf_set_kv copies it before the split keys).
 * `edit` may change a part's metadata before it is written (to make broken sets);
 * `noTensorFirstSplit` leaves the first part without tensors (gguf-split --no-tensor-first-split).
 * Returns the parts' paths, `<outPrefix>-00001-of-0000N.gguf` first.
 */
export async function splitGGUF(input: string, outPrefix: string, count: number, edit: (i: number, meta: [string, GGUFWriteEntry][]) => void = () => {}, noTensorFirstSplit = false): Promise<string[]> {
  const h = readGGUFHeader(input);
  const skipFirst = noTensorFirstSplit ? 1 : 0;
  const per = Math.ceil(h.tensors.length / (count - skipFirst));
  const fd = openSync(input, "r");
  const paths: string[] = [];
  try {
    for (let i = 0; i < count; i++) {
      const meta: [string, GGUFWriteEntry][] = i === 0 ? [...h.metadata] : [];
      meta.push(["split.no", ggufEntry.u16(i)], ["split.count", ggufEntry.u16(count)], ["split.tensors.count", ggufEntry.i32(h.tensors.length)]);
      edit(i, meta);
      const j = i - skipFirst;
      const tensors = (j < 0 ? [] : h.tensors.slice(j * per, (j + 1) * per)).map((t) => ({
        name: t.name, type: t.type, dims: t.dims,
        data: () => { const b = new Uint8Array(t.byteLength); readTensorInto(fd, t, b); return b; },
      }));
      const path = splitPartPath(outPrefix, i, count);
      await writeGGUF(path, { metadata: meta, tensors });
      paths.push(path);
    }
  } finally {
    closeSync(fd);
  }
  return paths;
}
