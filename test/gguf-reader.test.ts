import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readdirSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { gguf } from "@huggingface/gguf";
import { readGGUFHeader } from "../src/formats/gguf-reader.js";
import { GGUFValueType } from "../src/formats/gguf-types.js";

const SHARED = resolve(dirname(fileURLToPath(import.meta.url)), "..", "../shared");
const DIRS = ["tokenizer-tests", "models"].map((d) => join(SHARED, d));

function sharedGGUFs(): string[] {
  return DIRS.filter(existsSync).flatMap((d) => readdirSync(d).filter((f) => f.endsWith(".gguf")).map((f) => join(d, f)));
}

/**
 * plain JSON-comparable form: typed arrays -> arrays, bigint -> "123n" (unless safe).
 * @huggingface/gguf decodes strings with a default TextDecoder, which drops a leading BOM
 * (llama-spm has the token "\uFEFF"); llama.cpp keeps the bytes as we do, so the BOM is
 * removed before comparing.
 */
function norm(v: unknown): unknown {
  if (typeof v === "string") return v.startsWith("\uFEFF") ? v.slice(1) : v;
  if (typeof v === "bigint") return Number.isSafeInteger(Number(v)) && BigInt(Number(v)) === v ? Number(v) : `${v}n`;
  if (ArrayBuffer.isView(v)) return Array.from(v as unknown as ArrayLike<number>, norm);
  if (Array.isArray(v)) return v.map(norm);
  return v;
}

const files = sharedGGUFs();
const skip = files.length === 0 ? `../shared not found (looked in ${DIRS.join(", ")})` : false;

test("readGGUFHeader agrees with @huggingface/gguf on every shared GGUF", { skip }, async (t) => {
  for (const path of files) {
    await t.test(path.slice(SHARED.length + 1), async () => {
      const ours = readGGUFHeader(path);
      const hf = await gguf(path, { allowLocalFile: true, typedMetadata: true });
      const hm = hf.typedMetadata as unknown as Record<string, { value: unknown; type: number; subType?: number }>;
      assert.equal(ours.version, hm["version"]!.value);
      const hfKeys = Object.keys(hm).filter((k) => k !== "version" && k !== "tensor_count" && k !== "kv_count");
      assert.deepEqual([...ours.metadata.keys()].sort(), hfKeys.sort());
      for (const [k, e] of ours.metadata) {
        const h = hm[k]!;
        assert.equal(e.type, h.type, `${k} type`);
        if (e.type === GGUFValueType.ARRAY) assert.equal(e.itemType, h.subType, `${k} item type`);
        assert.deepEqual(norm(e.value), norm(h.value), k);
      }
      assert.equal(ours.dataOffset, Number(hf.tensorDataOffset));
      assert.deepEqual(
        ours.tensors.map((x) => ({ name: x.name, type: x.type, dims: x.dims, fileOffset: x.fileOffset })),
        hf.tensorInfos.map((x) => ({ name: x.name, type: Number(x.dtype), dims: x.shape.map(Number), fileOffset: Number(hf.tensorDataOffset + x.offset) })),
      );
    });
  }
});
