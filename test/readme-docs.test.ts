// What README.md and docs/*.md point at and name, checked against the code: links to files and
// headings, the library's option and result names (listed here as records of the exported types,
// so the compiler names one that is added or renamed), the defaults README gives for them, and
// the JSON objects README and --help document for `tsllm generate --json` / `tokenize --json`.
// test/cli-docs.test.ts checks the CLI synopsis; test/scripts-docs.test.ts the commands in the docs.
import assert from "node:assert/strict";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { dirname, join, normalize } from "node:path";
import { test } from "node:test";
import { COMMANDS } from "../src/cli/commands.js";
import type { GenerateOptions, GenerationResult, Timings } from "../src/generation/index.js";
import { type ChatOptions, type LoadModelOptions, loadModel } from "../src/llm.js";
import { DEFAULT_SAMPLING } from "../src/sampling/index.js";
import { runTsllm } from "./helpers/child.js";
import { documentedKeys } from "./helpers/documented-json.js";
import { PROJECT_ROOT, sharedFile, skipWithoutShared } from "./helpers/shared.js";

const docs = ["README.md", ...readdirSync(join(PROJECT_ROOT, "docs")).filter((f) => f.endsWith(".md")).sort().map((f) => `docs/${f}`)];
const read = (rel: string) => readFileSync(join(PROJECT_ROOT, rel), "utf8");
const readme = read("README.md");

/** the anchors GitHub gives a markdown file's headings (lowercased, punctuation dropped, spaces to -, repeats numbered) */
function anchors(md: string): Set<string> {
  const out = new Set<string>();
  const seen = new Map<string, number>();
  for (const h of md.replace(/```[\s\S]*?```/g, "").matchAll(/^#{1,6}\s+(.+?)\s*#*$/gm)) {
    const slug = h[1]!.toLowerCase().replace(/[^\p{L}\p{N}\s_-]/gu, "").replace(/\s/g, "-");
    const n = seen.get(slug) ?? 0;
    out.add(n === 0 ? slug : `${slug}-${n}`);
    seen.set(slug, n + 1);
  }
  return out;
}

test("every relative link in README.md and docs/*.md names a file that exists, and a heading there", () => {
  const broken: string[] = [];
  for (const doc of docs) {
    for (const m of read(doc).replace(/```[\s\S]*?```/g, "").matchAll(/\]\(([^)\s]+)\)/g)) {
      const link = m[1]!;
      if (/^[a-z]+:/i.test(link)) continue; // http(s), mailto
      const [path, anchor] = link.split("#") as [string, string | undefined];
      const target = path === "" ? doc : normalize(join(dirname(doc), decodeURIComponent(path)));
      if (!existsSync(join(PROJECT_ROOT, target))) broken.push(`${doc}: (${link}): no file ${target}`);
      else if (anchor !== undefined && target.endsWith(".md") && !anchors(read(target)).has(anchor)) broken.push(`${doc}: (${link}): ${target} has no heading #${anchor}`);
    }
  }
  assert.deepEqual(broken, []);
});

// Every name of the exported option and result types. A record over `keyof` fails the type check
// (npm run typecheck) when the type gains, loses or renames a key.
const GENERATE_OPTIONS: Record<keyof GenerateOptions, true> = {
  maxTokens: true, stop: true, addSpecialTokens: true, ignoreEos: true, signal: true, stopTokens: true, normalize: true, logprobs: true, logprobsAfterSampling: true,
  promptLogprobs: true, numBeams: true, lengthPenalty: true, earlyStopping: true, numReturnSequences: true, noRepeatNgramSize: true, minNewTokens: true,
  suppressTokens: true, beginSuppressTokens: true, badWordsIds: true, sequenceBias: true, forcedBosTokenId: true, forcedEosTokenId: true, exponentialDecayLengthPenalty: true,
  draftModel: true, draftTokens: true, promptLookup: true, grammar: true, jsonSchema: true, json: true, choice: true, regex: true, preservedTokens: true, n: true, minLineIndent: true, newLineAfterMs: true, slot: true,
  temperature: true, topK: true, topP: true, minP: true, typicalP: true, epsilonCutoff: true, etaCutoff: true, repeatPenalty: true, repeatLastN: true, frequencyPenalty: true,
  presencePenalty: true, logitBias: true, seed: true, samplerOrder: true, minKeep: true,
};
const CHAT_ONLY_OPTIONS: Record<Exclude<keyof ChatOptions, keyof GenerateOptions>, true> = { system: true, chatTemplate: true, chatTemplateName: true, parseSpecialInContent: true };
const LOAD_OPTIONS: Record<keyof LoadModelOptions, true> = {
  backend: true, threads: true, contextSize: true, quantize: true, cacheTypeK: true, cacheTypeV: true, flashAttention: true,
  availableMemory: true, memoryMargin: true, kvCacheBytes: true, maxSequences: true, maxBatchTokens: true, cacheReplies: true, admission: true, slotPromptSimilarity: true, onWarning: true, warmup: true,
};
const RESULT_FIELDS: Record<keyof GenerationResult, true> = {
  prompt: true, completion: true, promptTokens: true, completionTokens: true, finishReason: true, finishDetail: true, timings: true,
  logprobs: true, promptLogprobs: true, endToken: true, beams: true, speculative: true, choices: true,
};
const TIMINGS: Record<keyof Timings, true> = {
  loadMs: true, promptTokens: true, completionTokens: true, prefillMs: true, ttftMs: true, tpotMs: true, decodeMs: true,
  prefillTokensPerSecond: true, decodeTokensPerSecond: true, totalMs: true, queueMs: true, cachedPromptTokens: true,
};

/** README's "## Library" section with its subsections (up to the next "## ") */
const library = readme.slice(readme.indexOf("\n## Library\n"), readme.indexOf("\n## ", readme.indexOf("\n## Library\n") + 1));
/** the names README's Library section gives in code (fenced blocks and `spans`): `maxTokens`, `{ threads, contextSize }`, `r.timings.ttftMs` */
const libraryCode = [...library.matchAll(/```[a-z]*\n([\s\S]*?)```/g), ...library.replace(/```[a-z]*\n[\s\S]*?```/g, "").matchAll(/`([^`]+)`/g)].map((m) => m[1]!).join("\n");
const namedInLibrary = new Set([...libraryCode.matchAll(/[A-Za-z_$][\w$]*/g)].map((m) => m[0]));
/** README's "- Options:" bullet of the Library section */
const optionsBullet = /\n- Options: ([\s\S]*?)\n(?:- |\n)/.exec(library)?.[1] ?? "";

test("README's Library section names every option of loadModel, generate and chat, every result field and every timing", () => {
  assert.ok(library.length > 100 && optionsBullet.length > 100, "README has a ## Library section with an Options bullet");
  for (const [what, names] of [["loadModel option", LOAD_OPTIONS], ["generation option", GENERATE_OPTIONS], ["chat option", CHAT_ONLY_OPTIONS], ["result field", RESULT_FIELDS], ["timings field", TIMINGS]] as const) {
    const left = Object.keys(names).filter((n) => !namedInLibrary.has(n));
    assert.deepEqual(left, [], `README's Library section does not name the ${what}s ${left.join(", ")}`);
  }
});

test("the names README gives as loadModel's and generate's options are options, with the defaults README states", () => {
  const call = /loadModel\(ref, (\{[\s\S]*?\})\)/.exec(library);
  assert.ok(call, "README shows loadModel(ref, { ... })");
  for (const key of documentedKeys(call[1]!).map((k) => k.replace(/\?$/, ""))) assert.ok(Object.hasOwn(LOAD_OPTIONS, key), `README's loadModel(ref, { ${key}? }): loadModel has no option ${key}`);
  // the bullet's first sentence is the list; later ones give examples of refused names (`maxToken`)
  const list = optionsBullet.split(/\.\s/)[0]!;
  const listed = [...list.matchAll(/`([a-z][A-Za-z]*)`(?: \(([-\d.]+)[;)])?/g)];
  for (const [, name, shownDefault] of listed) {
    assert.ok(Object.hasOwn(GENERATE_OPTIONS, name!) || Object.hasOwn(RESULT_FIELDS, name!), `README's Options bullet names \`${name}\`, which is not a generation option`);
    if (shownDefault !== undefined && Object.hasOwn(DEFAULT_SAMPLING, name!)) {
      assert.equal(Number(shownDefault), DEFAULT_SAMPLING[name as keyof typeof DEFAULT_SAMPLING], `README says ${name} defaults to ${shownDefault}`);
    }
  }
  assert.ok(listed.some(([, name, d]) => name === "maxTokens" && d !== undefined), "README's Options bullet states maxTokens' default");
});

const STORIES = "models/stories260K.gguf";

test("README's maxTokens default is the one generate uses", { skip: skipWithoutShared(STORIES) }, async () => {
  const shown = Number(/`maxTokens` \((\d+)\)/.exec(optionsBullet)?.[1]);
  const model = await loadModel(sharedFile(STORIES)!, { threads: 1, warmup: false });
  try {
    const r = await model.generate("Once upon a time", { temperature: 0, ignoreEos: true });
    assert.equal(r.completionTokens.length, shown, `README says maxTokens defaults to ${shown}`);
  } finally {
    model.dispose();
  }
});

test("`tsllm generate --json` and `tokenize --json` print the keys README and --help document", { skip: skipWithoutShared(STORIES) }, async () => {
  const model = sharedFile(STORIES)!;
  const documented = documentedKeys(readme, "`--json` prints one object");
  assert.deepEqual(documented, documentedKeys(COMMANDS.generate!.help, "\n  --json "), "README and generate --help document the same object");
  const g = await runTsllm(["generate", "--model", model, "--prompt", "Once", "--max-tokens", "2", "--json"]);
  assert.equal(g.code, 0, g.stderr);
  // finishDetail comes with finishReason "length", as both say
  assert.deepEqual(Object.keys(JSON.parse(g.stdout)).sort(), [...documented, "finishDetail"].sort());
  const t = await runTsllm(["tokenize", "--model", model, "--text", "Once", "--json"]);
  assert.equal(t.code, 0, t.stderr);
  assert.deepEqual(Object.keys(JSON.parse(t.stdout)).sort(), documentedKeys(COMMANDS.tokenize!.help, "--json").sort());
});
