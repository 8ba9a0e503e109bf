import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { after, test } from "node:test";
import { parseGGUFHeader, readGGUFHeader } from "../src/formats/gguf-reader.js";
import { memoryFile } from "../src/browser/files.js";
import { sharedFile, skipWithoutShared } from "./helpers/shared.js";
// @ts-expect-error: a plain .mjs build script
import { browserBuildIsStale, buildBrowser } from "../scripts/build-browser.mjs";

const tmp = mkdtempSync(join(tmpdir(), "tsllm-browser-build-"));
after(() => rmSync(tmp, { recursive: true, force: true }));

test("each host.ts seam has a browser side with (at least) the same exports", async () => {
  for (const dir of ["../src/platform", "../src/kernels/wasm"]) {
    const node = Object.keys(await import(`${dir}/host.ts`)).sort();
    const browser = Object.keys(await import(`${dir}/host.browser.ts`));
    assert.deepEqual(node.filter((name) => !browser.includes(name)), [], `${dir}/host.browser.ts lacks exports of host.ts`);
  }
});

test("the browser bundles import nothing from node: and hold the kernels", async () => {
  const out = join(tmp, "ok");
  const sizes: Record<string, number> = await buildBrowser({ outdir: out });
  assert.deepEqual(Object.keys(sizes).sort(), ["engine-worker.js", "kernel-worker.js", "kernels-relaxed.wasm", "kernels.wasm", "tsllm-isolate.js", "tsllm.js"]);
  // a service worker script and a plain <script src> tag: no module syntax left in it
  assert.doesNotMatch(readFileSync(join(out, "tsllm-isolate.js"), "utf8"), /^\s*(import|export)\b/m);
  for (const f of readdirSync(out).filter((f) => f.endsWith(".js"))) {
    const js = readFileSync(join(out, f), "utf8");
    assert.doesNotMatch(js, /from\s*["']node:|import\(\s*["']node:|require\(/, f);
    assert.doesNotMatch(js, /\bprocess\.(env|emitWarning)|setImmediate\(|\bBuffer\./, `${f} uses a Node global`);
  }
});

test("a rebuild over a built folder never leaves a file of it missing or half written: a page served from it meanwhile (another test's process, the example server) reads the old file or the new one", async () => {
  const out = join(tmp, "rebuilt");
  const sizes: Record<string, number> = await buildBrowser({ outdir: out });
  // every look at the folder while it rebuilds: the files missing or of another size than a whole build's
  const seen = new Set<string>();
  let looks = 0;
  let building = true;
  const look = async (): Promise<void> => {
    while (building) {
      looks++;
      for (const [f, n] of Object.entries(sizes)) {
        let size: number | "missing" = "missing";
        try {
          size = readFileSync(join(out, f)).length;
        } catch {
          // (missing)
        }
        if (size !== n) seen.add(`${f}: ${size}`);
      }
      await new Promise((r) => setImmediate(r));
    }
  };
  const looking = look();
  try {
    assert.deepEqual(await buildBrowser({ outdir: out }), sizes);
  } finally {
    building = false;
    await looking;
  }
  assert.ok(looks > 1, "the folder was looked at while it was rebuilt");
  // (it was emptied first: every file missing until esbuild wrote it, a kernel worker served empty never answered)
  assert.deepEqual([...seen], []);
  assert.deepEqual(readdirSync(tmp).filter((f) => f.startsWith("rebuilt.")), [], "no build folder is left beside it");
});

test("the build fails, naming the module, when a node: import is left in a bundle", async () => {
  const entry = join(tmp, "uses-fs.ts");
  writeFileSync(entry, 'import { readFileSync } from "node:fs";\nexport const read = (p: string) => readFileSync(p);\n');
  await assert.rejects(buildBrowser({ outdir: join(tmp, "bad"), entries: { bad: entry } }), /node-only imports reached.*\n.*bad\.js imports node:fs \(from .*uses-fs\.ts\)/);
});

test("the GGUF header parses the same from memory (a browser's whole-file fetch) as from the file", { skip: skipWithoutShared("models/stories260K.gguf") }, () => {
  const path = sharedFile("models/stories260K.gguf")!;
  const fromMemory = parseGGUFHeader(memoryFile(readFileSync(path)), path);
  assert.deepEqual(fromMemory, readGGUFHeader(path));
});

test("package.json exports the browser build as tsllm/browser (Node entry unchanged) and npm pack ships it", async () => {
  const pkg = JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8"));
  // "default" lets require("tsllm") load the ESM entry (Node 20.19+ / 22.12+)
  assert.deepEqual(pkg.exports["."], { types: "./dist/index.d.ts", import: "./dist/index.js", default: "./dist/index.js" });
  assert.equal(pkg.main, "dist/index.js");
  assert.deepEqual(pkg.exports["./browser"], { types: "./dist/browser/index.d.ts", browser: "./dist-browser/tsllm.js", import: "./dist-browser/tsllm.js" });
  assert.equal(pkg.exports["./browser/*"], "./dist-browser/*");
  assert.ok(pkg.files.includes("dist-browser") && pkg.files.includes("dist"));
  assert.equal(pkg.scripts.prepack, "npm run build:browser");
  // the package resolves its own name through exports
  assert.equal(import.meta.resolve("tsllm/browser"), new URL("../dist-browser/tsllm.js", import.meta.url).href);
  assert.equal(import.meta.resolve("tsllm/browser/engine-worker.js"), new URL("../dist-browser/engine-worker.js", import.meta.url).href);
  assert.equal(import.meta.resolve("tsllm"), new URL("../dist/index.js", import.meta.url).href);
  if (browserBuildIsStale()) await buildBrowser();
  // what npm pack would put in the tarball (scripts skipped: the build is checked above)
  const { stdout } = await promisify(execFile)("npm", ["pack", "--dry-run", "--ignore-scripts", "--json"], { cwd: new URL("..", import.meta.url).pathname, maxBuffer: 1 << 24 });
  const files: string[] = JSON.parse(stdout)[0].files.map((f: { path: string }) => f.path);
  assert.ok(files.includes("package.json"));
  const built = readdirSync(new URL("../dist-browser", import.meta.url)).filter((f) => !f.endsWith(".map"));
  for (const f of built) assert.ok(files.includes(`dist-browser/${f}`), `npm pack leaves out dist-browser/${f}`);
  assert.ok(!files.some((f) => f.startsWith("src/") || f.startsWith("test/")), "the tarball holds the builds, not the sources");
});
