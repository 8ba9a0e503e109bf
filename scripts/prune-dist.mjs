// Removes from dist/ what tsc compiled from a source that src/ no longer has (X.js, X.js.map,
// X.d.ts of a deleted or moved src/X.ts). tsc's incremental build never deletes an output, so
// without this `npm pack` of a long-lived checkout ships modules that no longer exist in src/.
// Run by `npm run build` after tsc; other files in dist/ (the wasm kernels) are kept.
import { existsSync, readdirSync, rmSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const dist = path.join(root, "dist");
const COMPILED = /\.(js|js\.map|d\.ts|d\.ts\.map)$/;

let removed = 0;
for (const entry of existsSync(dist) ? readdirSync(dist, { recursive: true, withFileTypes: true }) : []) {
  if (!entry.isFile() || !COMPILED.test(entry.name)) continue;
  const file = path.join(entry.parentPath ?? entry.path, entry.name);
  const source = path.join(root, "src", path.relative(dist, file).replace(COMPILED, ".ts"));
  if (existsSync(source)) continue;
  rmSync(file);
  removed++;
}
if (removed > 0) console.log(`prune-dist: removed ${removed} files of sources no longer in src/`);
