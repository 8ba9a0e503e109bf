// tsllm as a user installs it: `npm pack` of the checkout (dist compiled from src first), unpacked
// into a temporary project of its own ("type": "module", TypeScript strict) whose node_modules
// holds only the package and its dependencies. README's TypeScript examples are compiled there
// against the packed .d.ts (moduleResolution NodeNext and bundler) and the Library one is run; the
// package's contents, its error classes, `using`, and `require("tsllm")` from CommonJS are checked
// on the same unpacked copy.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, test } from "node:test";
import { writeRandomBertFolder } from "../src/testing/random-bert.js";
import { PROJECT_ROOT, SHARED, sharedFile, skipWithoutShared } from "./helpers/shared.js";

const STORIES = "models/stories260K.gguf";
const work = mkdtempSync(path.join(tmpdir(), "tsllm-package-"));
const app = path.join(work, "app");
const installed = path.join(app, "node_modules", "tsllm");
const tsc = path.join(PROJECT_ROOT, "node_modules", "typescript", "bin", "tsc");
let packedFiles: string[] = [];
after(() => rmSync(work, { recursive: true, force: true }));

function run(cmd: string, args: string[], cwd: string) {
  const r = spawnSync(cmd, args, { cwd, encoding: "utf8", timeout: 300_000 });
  return { status: r.status, out: `${r.stdout ?? ""}${r.stderr ?? ""}` };
}

before(() => {
  // dist as `npm run build` leaves it (tsc, incremental, then prune-dist); the wasm kernels come from a first `npm run build`
  const built = run(process.execPath, [tsc, "-p", "tsconfig.json"], PROJECT_ROOT);
  assert.equal(built.status, 0, built.out);
  const pruned = run(process.execPath, ["scripts/prune-dist.mjs"], PROJECT_ROOT);
  assert.equal(pruned.status, 0, pruned.out);
  assert.ok(existsSync(path.join(PROJECT_ROOT, "dist", "kernels", "wasm", "kernels.wasm")), "dist has no wasm kernels: run npm run build first");
  const packed = spawnSync("npm", ["pack", "--ignore-scripts", "--json", "--pack-destination", work], { cwd: PROJECT_ROOT, encoding: "utf8" });
  assert.equal(packed.status, 0, packed.stderr);
  const info = JSON.parse(packed.stdout)[0] as { filename: string; files: { path: string }[] };
  packedFiles = info.files.map((f) => f.path);
  mkdirSync(installed, { recursive: true });
  const untar = run("tar", ["xzf", path.join(work, info.filename), "-C", installed, "--strip-components=1"], work);
  assert.equal(untar.status, 0, untar.out);
  // the dependencies as npm would place them (the checkout's copies: no registry in a test)
  for (const dep of ["@huggingface/tokenizers", "@types/node", "undici-types"]) {
    if (!existsSync(path.join(PROJECT_ROOT, "node_modules", dep))) continue;
    mkdirSync(path.dirname(path.join(app, "node_modules", dep)), { recursive: true });
    symlinkSync(path.join(PROJECT_ROOT, "node_modules", dep), path.join(app, "node_modules", dep), "dir");
  }
  writeFileSync(path.join(app, "package.json"), JSON.stringify({ name: "app", private: true, type: "module" }));
  const compilerOptions = { target: "ES2022", strict: true, types: ["node"], lib: ["ES2022", "ESNext.Disposable"], skipLibCheck: false, outDir: "out" };
  writeFileSync(path.join(app, "tsconfig.json"), JSON.stringify({ compilerOptions: { ...compilerOptions, module: "NodeNext", moduleResolution: "NodeNext" }, include: ["*.ts"] }));
  writeFileSync(path.join(app, "tsconfig.bundler.json"), JSON.stringify({ compilerOptions: { ...compilerOptions, module: "ESNext", moduleResolution: "bundler", noEmit: true }, include: ["*.ts"] }));
});

/** README's ```ts blocks under a `## ` heading, each a module of its own */
function readmeExamples(): { heading: string; code: string }[] {
  const readme = readFileSync(path.join(PROJECT_ROOT, "README.md"), "utf8");
  const out: { heading: string; code: string }[] = [];
  let heading = "";
  for (const part of readme.split(/^(#{2,3} .+)$/m)) {
    if (/^#{2,3} /.test(part)) heading = part;
    else for (const m of part.matchAll(/^( *)```ts\n([\s\S]*?)^ *```$/gm)) out.push({ heading, code: m[2]!.replace(new RegExp(`^${m[1]}`, "gm"), "") });
  }
  return out;
}

test("npm pack: dist and the browser build without build state, every source map carries its sources, engines node >= 20", () => {
  assert.deepEqual(packedFiles.filter((f) => !/^(dist|dist-browser|web)\/|^(package\.json|README\.md|LICENSE)$/.test(f)), []);
  assert.deepEqual(packedFiles.filter((f) => f.endsWith(".tsbuildinfo")), []);
  const maps = packedFiles.filter((f) => f.endsWith(".map"));
  assert.ok(maps.length > 100, `${maps.length} maps`);
  const unresolved: string[] = [];
  for (const map of maps) {
    const m = JSON.parse(readFileSync(path.join(installed, map), "utf8")) as { sources: string[]; sourcesContent?: (string | null)[] };
    m.sources.forEach((s, i) => {
      if (typeof m.sourcesContent?.[i] !== "string" && !existsSync(path.resolve(installed, path.dirname(map), s))) unresolved.push(`${map}: ${s}`);
    });
  }
  assert.deepEqual(unresolved.slice(0, 5), [], `${unresolved.length} sources a map names are neither packed nor inlined`);
  const pkg = JSON.parse(readFileSync(path.join(installed, "package.json"), "utf8"));
  assert.equal(pkg.engines.node, ">=20");
});

test("README's TypeScript examples compile against the packed .d.ts, strict, under NodeNext and bundler resolution", () => {
  const examples = readmeExamples();
  assert.ok(examples.length >= 4, `${examples.length} examples`);
  examples.forEach(({ heading, code }, i) => {
    // a snippet that goes on from the Library example uses its `model`
    const prelude = /^import /m.test(code) ? "" : 'import type { Model } from "tsllm";\ndeclare const model: Model;\n';
    writeFileSync(path.join(app, `readme-${i}.ts`), `// README.md ${heading}\n${prelude}${code}\nexport {};\n`);
  });
  for (const config of ["tsconfig.json", "tsconfig.bundler.json"]) {
    const r = run(process.execPath, [tsc, "-p", config, "--noEmit"], app);
    assert.equal(r.status, 0, `${config}:\n${r.out}`);
  }
  // no `any` in the public declarations (comments and string literals aside)
  const anys = packedFiles.filter((f) => f.endsWith(".d.ts")).filter((f) => {
    const code = readFileSync(path.join(installed, f), "utf8").replace(/"(?:[^"\\\n]|\\.)*"|\/\*[\s\S]*?\*\/|\/\/.*$/gm, "");
    return /\bany\b/.test(code);
  });
  assert.deepEqual(anys, []);
});

test("README's Library example runs on the packed package", { skip: skipWithoutShared(STORIES) }, () => {
  const example = readmeExamples().find((e) => e.heading === "## Library");
  assert.ok(example);
  // stories260K has no chat template: the one chat call gets one through the documented option
  const code = example.code.replaceAll('"model.gguf"', JSON.stringify(sharedFile(STORIES))).replace('{ system: "Be brief." }', '{ system: "Be brief.", chatTemplate: "{% for m in messages %}{{ m.content }}\\n{% endfor %}" }');
  assert.notEqual(code, example.code);
  writeFileSync(path.join(app, "library.ts"), `${code}\nconsole.log("\\nreply:", JSON.stringify(reply.completion), "ids:", ids.length);\n`);
  const built = run(process.execPath, [tsc, "-p", "tsconfig.json"], app);
  assert.equal(built.status, 0, built.out);
  const r = run(process.execPath, ["out/library.js"], app);
  assert.equal(r.status, 0, r.out);
  assert.match(r.out, /^reply: ".+" ids: \d+$/m);
});

test("a user tells a request too long for the context from a bad option and a missing chat template by class, and `using` disposes the model", { skip: skipWithoutShared(STORIES) }, () => {
  writeFileSync(
    path.join(app, "errors.ts"),
    `import { loadModel, RequestError, ChatTemplateError, NoChatTemplateError, type Model } from "tsllm";
let kept: Model;
{
  using model = await loadModel(${JSON.stringify(sharedFile(STORIES))}, { threads: 1, contextSize: 64, warmup: false });
  kept = model;
  const tooLong = await model.generate("Once upon a time ".repeat(40), { maxTokens: 4 }).catch((e: unknown) => e);
  console.log("tooLong", tooLong instanceof RequestError && tooLong.code === "context_length_exceeded" && tooLong.option === "prompt");
  const typo = await model.generate("Once", { maxToken: 4 } as never).catch((e: unknown) => e);
  console.log("typo", typo instanceof RangeError && !(typo instanceof RequestError && typo.code === "context_length_exceeded"));
  const noTemplate = await model.chat([{ role: "user", content: "Hi" }]).catch((e: unknown) => e);
  console.log("noTemplate", noTemplate instanceof NoChatTemplateError && noTemplate instanceof ChatTemplateError);
}
console.log("disposed", kept.disposed);
`,
  );
  const built = run(process.execPath, [tsc, "-p", "tsconfig.json"], app);
  assert.equal(built.status, 0, built.out);
  const r = run(process.execPath, ["out/errors.js"], app);
  assert.equal(r.status, 0, r.out);
  assert.equal(r.out.trim(), "tooLong true\ntypo true\nnoTemplate true\ndisposed true");
});

test("a user reads a bad option's name from an OptionError, and switches over stream steps and submit events by their `type` (strict TypeScript)", { skip: skipWithoutShared(STORIES) }, () => {
  writeFileSync(
    path.join(app, "typed.ts"),
    `import { loadModel, OptionError, RequestError, type GenerationStep, type RequestEvent, type TokenLogprob, type EndToken } from "tsllm";
const model = await loadModel(${JSON.stringify(sharedFile(STORIES))}, { threads: 1, contextSize: 64, warmup: false });
const named = (e: unknown) => e instanceof OptionError ? \`\${e.name} \${e.option}\` : String(e);
console.log("temperature", named(await model.generate("Once", { temperature: -1 }).catch((e: unknown) => e)));
console.log("typo", named(await model.generate("Once", { maxToken: 4 } as never).catch((e: unknown) => e)));
console.log("load", named(await loadModel(${JSON.stringify(sharedFile(STORIES))}, { warmup: "no" } as never).catch((e: unknown) => e)));
const tooLong = await model.generate("Once upon a time ".repeat(40)).catch((e: unknown) => e);
console.log("tooLong", tooLong instanceof OptionError && tooLong instanceof RequestError && tooLong.option === "prompt");
const ids: number[] = [];
let text = "", logprobs = 0, ends = 0;
// (a callback typed with the exported step type; the switch narrows step.token to a number)
const onStep = (step: GenerationStep): void => {
  switch (step.type) {
    case "token": { ids.push(step.token); const lp: TokenLogprob | undefined = step.logprob; if (lp) logprobs++; break; }
    case "end": { const end: EndToken | undefined = step.endToken; if (end) ends++; break; }
  }
  text += step.text;
};
const it = model.stream("Once upon a time", { maxTokens: 6, temperature: 0, logprobs: 1 });
let r = await it.next();
for (; !r.done; r = await it.next()) onStep(r.value);
console.log("stream", JSON.stringify(ids) === JSON.stringify(r.value.completionTokens), text === r.value.completion, logprobs === ids.length);
const finishes: string[] = [];
for await (const e of model.submit("Lily", { maxTokens: 3, n: 2, temperature: 0.7, seed: 3 }).events()) {
  const event: RequestEvent = e;
  if (event.type === "finish") finishes.push(\`\${event.choice}:\${event.finishReason}\`);
  else if (event.step.type === "token" && event.step.token < 0) throw new Error("a token id below 0");
}
console.log("finish", finishes.sort().join(" "));
model.dispose();
`,
  );
  const built = run(process.execPath, [tsc, "-p", "tsconfig.json"], app);
  assert.equal(built.status, 0, built.out);
  const r = run(process.execPath, ["out/typed.js"], app);
  assert.equal(r.status, 0, r.out);
  assert.equal(r.out.trim(), "temperature OptionError temperature\ntypo OptionError maxToken\nload OptionError warmup\ntooLong true\nstream true true true\nfinish 0:length 1:length");
});

test("require(\"tsllm\") from CommonJS loads the package (Node's require of an ES module)", { skip: skipWithoutShared(STORIES) }, () => {
  writeFileSync(
    path.join(app, "main.cjs"),
    `const { loadModel } = require("tsllm");
loadModel(${JSON.stringify(sharedFile(STORIES))}, { threads: 1, warmup: false }).then(async (m) => {
  const r = await m.generate("Once upon a time", { maxTokens: 4, temperature: 0 });
  console.log(JSON.stringify(r.completion));
  m.dispose();
});
`,
  );
  const r = run(process.execPath, ["main.cjs"], app);
  assert.equal(r.status, 0, r.out);
  assert.match(r.out, /^".+"$/m);
});

test("npm run build's prune-dist removes what tsc compiled from a source no longer in src/, and keeps the rest", () => {
  const dir = path.join(PROJECT_ROOT, "dist", "chat");
  const stale = ["zz-removed-source.js", "zz-removed-source.js.map", "zz-removed-source.d.ts"].map((f) => path.join(dir, f));
  for (const f of stale) writeFileSync(f, "");
  const r = run(process.execPath, ["scripts/prune-dist.mjs"], PROJECT_ROOT);
  assert.equal(r.status, 0, r.out);
  assert.deepEqual(stale.filter((f) => existsSync(f)), []);
  for (const kept of ["chat/template.js", "chat/template.d.ts", "kernels/wasm/kernels.wasm"]) assert.ok(existsSync(path.join(PROJECT_ROOT, "dist", kept)), kept);
});

test("`using` disposes a pipeline and an embedding model from the packed package", { skip: skipWithoutShared("hf-oracle/bert-uncased-sst") }, async () => {
  const bert = path.join(work, "bert");
  await writeRandomBertFolder(bert, { hidden: 16, layers: 1, heads: 2, ffn: 32, vocab: 30522, seed: 3 }, path.join(SHARED, "hf-oracle/bert-uncased-sst"));
  writeFileSync(
    path.join(app, "using.ts"),
    `import { loadEmbeddingModel, pipeline, type EmbeddingModel, type FeatureExtractionPipeline } from "tsllm";
let m: EmbeddingModel, p: FeatureExtractionPipeline;
{
  using model = await loadEmbeddingModel(${JSON.stringify(bert)}, { threads: 1 });
  using features = await pipeline("feature-extraction", ${JSON.stringify(bert)}, { threads: 1 });
  [m, p] = [model, features];
  console.log((await model.embed(["a cat"]))[0]!.length, (await features("a cat")).length);
}
const outcome = (run: () => Promise<unknown>) => Promise.resolve().then(run).then(() => "still runs", (e: Error) => e.message);
console.log("embed", await outcome(() => m.embed(["a cat"])));
console.log("pipeline", await outcome(() => p("a cat")));
`,
  );
  const built = run(process.execPath, [tsc, "-p", "tsconfig.json"], app);
  assert.equal(built.status, 0, built.out);
  const r = run(process.execPath, ["out/using.js"], app);
  assert.equal(r.status, 0, r.out);
  const [first, ...after] = r.out.trim().split("\n");
  assert.equal(first, "16 1");
  assert.equal(after.length, 2, r.out);
  for (const line of after) assert.match(line, /^(embed|pipeline) .*has been disposed$/, r.out);
});
