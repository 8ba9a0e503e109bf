// llama.cpp's tools turn escapes typed in their text (-p, -r; llama-tokenize's prompt) into the
// characters unless --no-escape: common/common.cpp's string_process_escapes, run by common/arg.cpp
// after parsing when params.escape (default true, -e/--escape, --no-escape), and by
// tools/tokenize/tokenize.cpp unless its --no-escape. The expected strings below are that
// function's, read branch by branch; the token ids are node-llama-cpp's (llama.cpp) of the text.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { after, test } from "node:test";
import { processEscapes, UsageError } from "../src/cli/args.js";
import { PROJECT_ROOT, sharedFile, skipWithoutShared } from "./helpers/shared.js";
import { disposeSharedLlama, sharedLlama } from "./helpers/llama-cpp-oracle.js";

const MODEL = "models/stories260K.gguf";
const skip = skipWithoutShared(MODEL);
after(() => disposeSharedLlama());

function tsllm(args: string[]) {
  const r = spawnSync(process.execPath, ["--import", "tsx", resolve(PROJECT_ROOT, "src/cli/main.ts"), ...args], { cwd: PROJECT_ROOT, encoding: "utf8", input: "" });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

test("processEscapes is llama.cpp's string_process_escapes: its six escapes, \\xHH as strtol reads two characters, anything else (a trailing backslash too) as typed", () => {
  // [typed (as the shell passes it), what string_process_escapes leaves]
  const cases: [string, string][] = [
    ["a\\nb\\rc\\td", "a\nb\rc\td"],
    ["\\'\\\"\\\\", "'\"\\"],
    ["\\\\n", "\\n"], // \\ is consumed whole: the n after it stays a letter
    ["\\x41\\x4a\\x4A", "AJJ"],
    ["\\x00", "\u0000"],
    ["\\xc3\\xa9", "é"], // bytes: two escapes make one UTF-8 character
    ["\\x 9", "\t"], // strtol skips leading white space...
    ["\\x+a", "\n"], // ...and takes a sign
    ["\\x4", "\\x4"], // fewer than two characters after x: as typed
    ["\\x4g", "\\x4g"], // strtol stops before the end of the two: as typed
    ["\\x0x1", "\\x0x1"],
    ["\\X41", "\\X41"], // only a lower-case x
    ["\\a\\0\\u00e9\\é", "\\a\\0\\u00e9\\é"], // unknown escapes keep their backslash
    ["end\\", "end\\"], // a trailing backslash stays
    ["plain text", "plain text"],
  ];
  for (const [typed, expected] of cases) assert.equal(processEscapes(typed, "--prompt"), expected, typed);
  // char(-1) and a lone 0xc3 are no UTF-8: one line naming the option, where llama.cpp would tokenize U+FFFD
  for (const typed of ["\\x-1", "\\xc3", "\\xff\\xfe"]) {
    assert.throws(() => processEscapes(typed, "--text"), (e: unknown) => e instanceof UsageError && e.message.startsWith("--text: its \\x escapes make bytes that are not UTF-8 text;") && e.message.includes("--no-escape"), typed);
  }
});

test("tokenize -p processes llama-tokenize's escapes (\\n is a line break, \\x41 an A) unless --no-escape; the ids are llama.cpp's of that text", { skip }, async () => {
  const typed = "Once\\nupon a\\ttime \\x41 cat\\\\";
  const model = await (await sharedLlama()).loadModel({ modelPath: sharedFile(MODEL)!, vocabOnly: true });
  try {
    for (const [args, text] of [[[], "Once\nupon a\ttime A cat\\"], [["-e"], "Once\nupon a\ttime A cat\\"], [["--no-escape"], typed]] as const) {
      const r = tsllm(["tokenize", "-m", sharedFile(MODEL)!, "-p", typed, "--ids", ...args]);
      assert.equal(r.code, 0, r.stderr);
      assert.equal(r.stdout, `[${Array.from(model.tokenize(text, true)).join(", ")}]\n`, args.join(" "));
    }
  } finally {
    await model.dispose();
  }
  assert.deepEqual(tsllm(["tokenize", "-m", sharedFile(MODEL)!, "-p", "x", "--escape", "--no-escape"]), { code: 2, stdout: "", stderr: "tsllm: error: --escape and --no-escape contradict each other: give one (escapes are processed unless --no-escape)\n" });
  const bad = tsllm(["tokenize", "-m", sharedFile(MODEL)!, "-p", "a\\xff"]);
  assert.equal(bad.code, 2);
  assert.match(bad.stderr, /^tsllm: error: --text: its \\x escapes make bytes that are not UTF-8 text; .* or --no-escape to keep backslashes as typed\n$/);
});

test("generate --prompt and --stop process llama.cpp's escapes (as its -p and -r) unless --no-escape", { skip }, () => {
  const greedy = (args: string[]) => {
    const r = tsllm(["generate", "--model", sharedFile(MODEL)!, "--temperature", "0", "--max-tokens", "12", "--backend", "reference", "--json", ...args]);
    assert.equal(r.code, 0, r.stderr);
    const { prompt, promptTokens, completion, finishReason } = JSON.parse(r.stdout) as { prompt: string; promptTokens: number[]; completion: string; finishReason: string };
    return { prompt, promptTokens, completion, finishReason }; // not the timings, nor the random seed greedy ignores
  };
  const typed = "Once upon a time,\\nthere";
  const escaped = greedy(["-p", typed]);
  assert.equal(escaped.prompt, "Once upon a time,\nthere");
  assert.deepEqual(escaped, greedy(["-p", "Once upon a time,\nthere"]), "the typed \\n is the line break itself");
  assert.equal(greedy(["-p", typed, "--no-escape"]).prompt, typed);
  // --stop "\x20": the first space ends the completion; kept as typed (4 characters) it never occurs
  const free = greedy(["-p", "Once upon a time"]);
  assert.match(free.completion, / ./, "the free completion has a space after its first character");
  const stopped = greedy(["-p", "Once upon a time", "--stop", "\\x20"]);
  assert.equal(stopped.finishReason, "stop");
  assert.equal(stopped.completion, free.completion.slice(0, free.completion.indexOf(" ", 1)));
  assert.deepEqual(greedy(["-p", "Once upon a time", "--stop", "\\x20", "--no-escape"]), free);
});

test("embed --input (llama-embedding's -p) processes escapes unless --no-escape, before --embd-separator splits", { skip }, () => {
  const embed = (args: string[]) => {
    const r = tsllm(["embed", "--model", sharedFile(MODEL)!, "--backend", "reference", "--json", ...args]);
    assert.equal(r.code, 0, r.stderr);
    return JSON.parse(r.stdout) as number[][];
  };
  assert.deepEqual(embed(["-p", "one\\ttwo"]), embed(["-p", "one\ttwo"]));
  assert.notDeepEqual(embed(["-p", "one\\ttwo", "--no-escape"]), embed(["-p", "one\ttwo"]));
  // "a\nb" typed, split at line breaks: two texts, as llama-embedding -p "a\nb" (escapes first, then split_lines)
  assert.deepEqual(embed(["-p", "Once\\nupon", "--embd-separator", "\n"]), embed(["-p", "Once", "-p", "upon"]));
});

// common/arg.cpp's -f reads the file into params.prompt (one final "\n" dropped) and the escapes
// are processed in params.prompt after parsing, whichever of -p and -f filled it; llama-tokenize
// processes its prompt's from -f and --stdin too. A prompt piped to generate is its -f here.
test("generate --file / stdin, tokenize --file / --stdin and embed --file process the escapes in the text read (as llama.cpp's -f), unless --no-escape", { skip }, async () => {
  const dir = mkdtempSync(join(tmpdir(), "tsllm-escapes-"));
  try {
    const file = join(dir, "prompt.txt");
    writeFileSync(file, "Once upon a time,\\nthere\\x20was\n"); // the backslashes as written in the file
    const greedy = (args: string[], input = "") => {
      const r = spawnSync(process.execPath, ["--import", "tsx", resolve(PROJECT_ROOT, "src/cli/main.ts"), "generate", "--model", sharedFile(MODEL)!, "--temperature", "0", "--max-tokens", "4", "--backend", "reference", "--json", ...args], { cwd: PROJECT_ROOT, encoding: "utf8", input });
      assert.equal(r.status, 0, r.stderr);
      const { prompt, promptTokens, completion } = JSON.parse(r.stdout) as { prompt: string; promptTokens: number[]; completion: string };
      return { prompt, promptTokens, completion };
    };
    const typed = greedy(["-p", "Once upon a time,\nthere was"]);
    assert.equal(typed.prompt, "Once upon a time,\nthere was");
    assert.deepEqual(greedy(["-f", file]), typed, "-f's \\n and \\x20 are the line break and the space");
    assert.deepEqual(greedy([], "Once upon a time,\\nthere\\x20was\n"), typed, "so are stdin's");
    assert.equal(greedy(["-f", file, "--no-escape"]).prompt, "Once upon a time,\\nthere\\x20was");
    assert.equal(greedy(["--no-escape"], "Once upon a time,\\nthere\\x20was\n").prompt, "Once upon a time,\\nthere\\x20was");
    const bad = join(dir, "bad.txt");
    writeFileSync(bad, "a\\xff");
    const refused = tsllm(["generate", "-m", sharedFile(MODEL)!, "-f", bad]);
    assert.equal(refused.code, 2);
    assert.match(refused.stderr, new RegExp(`^tsllm: error: --file ${bad.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}: its \\\\x escapes make bytes that are not UTF-8 text; .* or --no-escape to keep backslashes as typed\n$`));

    // llama-tokenize reads its file whole (the final line break kept), then processes the escapes
    const model = await (await sharedLlama()).loadModel({ modelPath: sharedFile(MODEL)!, vocabOnly: true });
    try {
      const ids = (text: string) => `[${Array.from(model.tokenize(text, true)).join(", ")}]\n`;
      for (const [args, input, text] of [
        [["-f", file], "", "Once upon a time,\nthere was\n"],
        [["--stdin"], "a\\tb\\\\n", "a\tb\\n"],
        [["-f", file, "--no-escape"], "", "Once upon a time,\\nthere\\x20was\n"],
      ] as const) {
        const r = spawnSync(process.execPath, ["--import", "tsx", resolve(PROJECT_ROOT, "src/cli/main.ts"), "tokenize", "-m", sharedFile(MODEL)!, "--ids", ...args], { cwd: PROJECT_ROOT, encoding: "utf8", input });
        assert.equal(r.status, 0, r.stderr);
        assert.equal(r.stdout, ids(text), args.join(" "));
      }
    } finally {
      await model.dispose();
    }

    // llama-embedding: -f's text, escapes processed, then split at line breaks
    const embed = (args: string[]) => {
      const r = tsllm(["embed", "--model", sharedFile(MODEL)!, "--backend", "reference", "--json", ...args]);
      assert.equal(r.code, 0, r.stderr);
      return JSON.parse(r.stdout) as number[][];
    };
    const two = join(dir, "two.txt");
    writeFileSync(two, "Once\\nupon\n");
    assert.deepEqual(embed(["-f", two]), embed(["-p", "Once", "-p", "upon"]));
    assert.deepEqual(embed(["-f", two, "--no-escape"]), embed(["-p", "Once\\nupon", "--no-escape"]));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("perplexity --file drops one final line break and processes the escapes, as llama-perplexity's -f; --no-escape scores the backslashes", { skip }, async () => {
  const dir = mkdtempSync(join(tmpdir(), "tsllm-escapes-ppl-"));
  try {
    const story = "Once upon a time there was a little cat.\\nShe liked to play.\\t";
    const file = join(dir, "text.txt");
    writeFileSync(file, `${story.repeat(12)}\n`);
    const tokens = (args: string[]) => {
      const r = tsllm(["perplexity", "--model", sharedFile(MODEL)!, "--file", file, "--ctx", "16", "--chunks", "1", "--backend", "reference", "--json", ...args]);
      assert.equal(r.code, 0, r.stderr);
      return (JSON.parse(r.stdout) as { textTokens: number }).textTokens;
    };
    // the judge: llama.cpp's tokenizer of the text llama-perplexity scores (BOS first, special text as text)
    const model = await (await sharedLlama()).loadModel({ modelPath: sharedFile(MODEL)!, vocabOnly: true });
    try {
      const count = (text: string) => 1 + model.tokenize(text, false).length;
      const processed = "Once upon a time there was a little cat.\nShe liked to play.\t".repeat(12);
      assert.equal(tokens([]), count(processed));
      assert.equal(tokens(["--no-escape"]), count(story.repeat(12)));
      assert.notEqual(count(processed), count(`${processed}\n`), "the final line break is a token of its own");
    } finally {
      await model.dispose();
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
