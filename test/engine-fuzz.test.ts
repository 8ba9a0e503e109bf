import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { skipWithoutShared } from "./helpers/shared.js";

/*
 * A few seeded cases of the engine's differential fuzzer (scripts/fuzz-engine.ts, which runs it
 * for as long as asked): random batches of concurrent requests (shared prefixes, late arrivals,
 * aborts, n choices, beams, speculative decoding, logprobs, stops, penalties, constraints) through one engine with a
 * small KV pool, each request against the same request alone on a fresh engine, bit for bit, and
 * the pool's reference counts against its live sequences before every pass and after the batch.
 * The tests of engine.test.ts check named cases; this checks their combinations.
 */
const root = fileURLToPath(new URL("..", import.meta.url));
const skip = skipWithoutShared("models/stories260K.gguf");

test("the engine fuzzer: random batches through one engine give each request its solo answer and leak no KV block", { skip }, () => {
  const r = spawnSync(process.execPath, ["--import", "tsx", "scripts/fuzz-engine.ts", "--seed", "11", "--cases", "3", "--only", "stories260K"], { cwd: root, encoding: "utf8", timeout: 300_000 });
  assert.equal(r.status, 0, `${r.stdout}\n${r.stderr}`);
  assert.match(r.stdout, /3 cases, \d+ requests \(\d+ aborted\), \d+ cached prefix blocks evicted, \d+ preemptions \(\d+ requests: \d+ with n choices, \d+ beam searches, \d+ speculative\), seed 11: 0 defects/);
});
