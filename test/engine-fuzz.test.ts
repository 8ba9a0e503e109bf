import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { skipWithoutShared } from "./helpers/shared.js";

/*
 * A few seeded cases of the engine's differential fuzzer (scripts/fuzz-engine.ts, which runs it
 * for as long as asked): random batches of concurrent requests (shared prefixes, late arrivals,
 * aborts, n choices, beams, speculative decoding, logprobs, stops, penalties, constraints) through one engine with a
 * small KV pool (and a draft model's pool planned small), each request against the same request alone on a fresh engine, bit for bit, and
 * the pool's reference counts against its live sequences before every pass and after the batch.
 * The tests of engine.test.ts check named cases; this checks their combinations.
 */
const root = fileURLToPath(new URL("..", import.meta.url));
const skip = skipWithoutShared("models/stories260K.gguf");

test("the engine fuzzer: random batches through one engine give each request its solo answer and leak no KV block; its default mix preempts, draft-model requests too", { skip }, () => {
  const r = spawnSync(process.execPath, ["--import", "tsx", "scripts/fuzz-engine.ts", "--seed", "13", "--cases", "3", "--only", "stories260K"], { cwd: root, encoding: "utf8", timeout: 300_000 });
  assert.equal(r.status, 0, `${r.stdout}\n${r.stderr}`);
  // (seed 13's three cases include a burst whose draft-model requests outgrow the pool, and rounds
  // that find the draft model's planned KV pool full and decode plainly)
  assert.match(r.stdout, /3 cases, \d+ requests \(\d+ aborted\), \d+ cached prefix blocks evicted, [1-9]\d* preemptions \(\d+ requests: \d+ with n choices, \d+ beam searches, \d+ speculative, [1-9]\d* of them with a draft model\), [1-9]\d* draft-pool fallbacks \(\d+ drafting again\), seed 13: 0 defects/);
  // (a third of the requests read slowly: paused, in bursts, leaving, stalled)
  assert.match(r.stdout, /requests pinned to a slot, [1-9]\d* slow readers \(\d+ paused on their backlog/);
});
