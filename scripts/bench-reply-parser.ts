/**
 * How long `tsllm serve`'s streamed chat reply parser takes per token as the reply grows: a long
 * reply (text; text after reasoning; a call with a long string argument, Hermes' JSON and
 * Qwen3-Coder's XML) pushed through ReplyStream a piece at a time, as a stream pushes each token.
 * Prints, per 1000-piece window, the mean microseconds a push took at that reply length: constant
 * when the parser's work per token is bounded, growing with the length when each token rereads the
 * reply.
 *
 *   node --import tsx scripts/bench-reply-parser.ts [pieces=20000]
 */
import { UsageError } from "../src/cli/args.js";
import { ReplyStream, type ReplySyntax } from "../src/server/reply-parser.js";
import { scriptOptions } from "./script-args.js";

const USAGE = `usage: node --import tsx scripts/bench-reply-parser.ts [pieces]

  pieces   how many token-sized pieces each reply grows to (default 20000, at least 1000)`;
const pieces = scriptOptions(USAGE, {}, (_values, positionals) => {
  if (positionals.length > 1) throw new UsageError(`unexpected argument ${JSON.stringify(positionals[1])}`);
  const n = Number(positionals[0] ?? 20000);
  if (!Number.isInteger(n) || n < 1000) throw new UsageError(`pieces: expected an integer of at least 1000, got ${JSON.stringify(positionals[0])}`);
  return n;
});
const names = new Set(["write_file"]);
const calls = (format: "hermes" | "qwen3-coder") => ({ format, names, parallel: true, stringParameters: new Map([["write_file", new Set(["content", "path"])]]) });

/** a token-sized piece of text: a few letters, a space, sometimes a newline or punctuation */
const words = ["the", " model", " writes", " code", ",", " and", "\n", " more", " text", "."];
const piece = (i: number) => words[i % words.length]!;

const cases: { name: string; syntax: ReplySyntax; head: string; escape: (s: string) => string }[] = [
  { name: "text (no tools)", syntax: { thinking: { open: "<think>", close: "</think>", forcedOpen: false } }, head: "<think>ok</think>", escape: (s) => s },
  { name: "reasoning (forced open)", syntax: { thinking: { open: "<think>", close: "</think>", forcedOpen: true } }, head: "", escape: (s) => s },
  { name: "text with tools (hermes)", syntax: { calls: calls("hermes") }, head: "", escape: (s) => s },
  { name: "hermes call, long string argument", syntax: { calls: calls("hermes") }, head: '<tool_call>\n{"name": "write_file", "arguments": {"path": "a.txt", "content": "', escape: (s) => JSON.stringify(s).slice(1, -1) },
  { name: "generic format, long response", syntax: { calls: { format: "generic", names, parallel: true } }, head: '{"response": "', escape: (s) => JSON.stringify(s).slice(1, -1) },
  { name: "qwen3-coder call, long string parameter", syntax: { calls: calls("qwen3-coder") }, head: "<tool_call>\n<function=write_file>\n<parameter=content>\n", escape: (s) => s },
];

for (const c of cases) {
  const stream = new ReplyStream(c.syntax);
  stream.push(c.head);
  const window = 1000;
  const row: string[] = [];
  let t = performance.now();
  for (let i = 1; i <= pieces; i++) {
    stream.push(c.escape(piece(i)));
    if (i % window === 0) {
      const now = performance.now();
      if (i === window || i % (pieces / 4) === 0) row.push(`${i}: ${((now - t) * 1000 / window).toFixed(1)}`);
      t = now;
    }
  }
  stream.end();
  console.log(`${c.name.padEnd(40)} µs/token at tokens ${row.join("  ")}`);
}
