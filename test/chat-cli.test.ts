import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { after, test } from "node:test";
import { PROJECT_ROOT, sharedFile, skipWithoutShared } from "./helpers/shared.js";

const MODEL = "models/stories260K.gguf";
const skip = skipWithoutShared(MODEL);
const dir = mkdtempSync(join(tmpdir(), "tsllm-chat-"));
after(() => rmSync(dir, { recursive: true, force: true }));
// stories260K has no chat template: a plain one given with --chat-template
const template = join(dir, "t.jinja");
writeFileSync(template, "{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}{% if add_generation_prompt %}assistant:{% endif %}");

/** runs the CLI as a terminal program with `input` piped to stdin */
function tsllm(args: string[], input = "") {
  const r = spawnSync(process.execPath, ["--import", "tsx", resolve(PROJECT_ROOT, "src/cli/main.ts"), ...args], { cwd: PROJECT_ROOT, encoding: "utf8", input, timeout: 120_000 });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

const common = () => ["--model", sharedFile(MODEL)!, "--chat-template", template, "--temperature", "0", "--max-tokens", "12", "--backend", "reference"];

test("tsllm chat: replies stream per line, the conversation is kept, /reset forgets it, /exit quits", { skip }, () => {
  const r = tsllm(["chat", ...common(), "--system", "Tell a story.", "--timings"], "Once upon a time\nLily had a dog\n/reset\nOnce upon a time\n/exit\nnever read\n");
  assert.equal(r.code, 0, r.stderr);
  const lines = r.stdout.split("\n");
  const reset = lines.indexOf("[conversation reset]");
  assert.ok(reset > 0, r.stdout);
  const before = lines.slice(0, reset).join("\n");
  const after = lines.slice(reset + 1).join("\n").trimEnd();
  // greedy: after /reset the same first message gets the same reply as at the start
  const first = tsllm(["generate", ...common(), "--chat", "--system", "Tell a story.", "--prompt", "Once upon a time"]);
  assert.equal(first.code, 0, first.stderr);
  assert.equal(after, first.stdout.trimEnd());
  assert.ok(before.startsWith(first.stdout.trimEnd()), "the first reply equals generate --chat's");
  // three replies, each timed; the second prompt held the whole conversation, the third did not
  const prompts = [...r.stderr.matchAll(/prompt (\d+) tok/g)].map((m) => Number(m[1]));
  assert.equal(prompts.length, 3, r.stderr);
  assert.ok(prompts[1]! > prompts[0]! && prompts[2] === prompts[0], `prompt sizes ${prompts}`);
});

test("tsllm chat / generate --chat: no template is one clear error; --system without --chat is a usage error", { skip }, () => {
  const noTemplate = tsllm(["chat", "--model", sharedFile(MODEL)!], "hi\n");
  assert.equal(noTemplate.code, 1);
  assert.match(noTemplate.stderr, /^tsllm: error: the model has no chat template .*--chat-template FILE\n$/);
  const gen = tsllm(["generate", "--model", sharedFile(MODEL)!, "--chat", "--prompt", "hi"]);
  assert.equal(gen.code, 1);
  assert.match(gen.stderr, /no chat template/);
  const usage = tsllm(["generate", "--model", sharedFile(MODEL)!, "--system", "x", "--prompt", "hi"]);
  assert.equal(usage.code, 2);
  assert.match(usage.stderr, /--system and --chat-template need --chat/);
  const norm = tsllm(["generate", "--model", sharedFile(MODEL)!, "--normalize", "nfx", "--prompt", "hi"]);
  assert.equal(norm.code, 2);
  assert.match(norm.stderr, /--normalize must be one of none, nfc, nfkc/);
  const help = tsllm(["chat", "--help"]);
  assert.equal(help.code, 0);
  assert.match(help.stdout, /^Usage: tsllm chat/);
});

test("generate --normalize nfkc: a full-width prompt tokenizes like its half-width form", { skip }, () => {
  const run = (prompt: string, ...extra: string[]) => JSON.parse(tsllm(["generate", "--model", sharedFile(MODEL)!, "--prompt", prompt, "--max-tokens", "1", "--temperature", "0", "--backend", "reference", "--json", ...extra]).stdout) as { promptTokens: number[] };
  const half = run("Once upon a time");
  assert.deepEqual(run("Ｏｎｃｅ　ｕｐｏｎ　ａ　ｔｉｍｅ", "--normalize", "nfkc").promptTokens, half.promptTokens);
  assert.notDeepEqual(run("Ｏｎｃｅ　ｕｐｏｎ　ａ　ｔｉｍｅ").promptTokens, half.promptTokens);
});

test("tsllm chat / generate --chat: a --chat-template that does not parse is one line naming the flag, the file and what is wrong", { skip }, () => {
  const broken = join(dir, "broken.jinja");
  writeFileSync(broken, "{% for m in messages %}\n{{ m.content }}\n");
  for (const args of [["chat", "--model", sharedFile(MODEL)!, "--chat-template", broken], ["generate", "--model", sharedFile(MODEL)!, "--chat", "--chat-template", broken, "--prompt", "hi"]]) {
    const r = tsllm(args, "hi\n");
    assert.equal(r.code, 1, r.stderr);
    assert.equal(r.stderr, `tsllm: error: --chat-template ${broken}: the template does not parse: unterminated for loop: {% for m in messages %} (line 1) has no {% endfor %}\n`);
  }
});
