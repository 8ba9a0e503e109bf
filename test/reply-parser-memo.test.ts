import assert from "node:assert/strict";
import { test } from "node:test";
import { decodeStringPrefix, ScanMemo, scanValue } from "../src/server/json-scan.js";

/*
 * A stream reads its reply again after each token, its scans going on from where the last ran out
 * (a memo): what a scan says of a text must not depend on the shorter texts scanned before it.
 */
const TEXTS = [
  '{"a": [1, -2.5e+3, true, null, {"b": "c\\"d\\\\"}], "e": "\\u00e9\\ud83d\\ude00😀", "f": {}}',
  '["x", "\\n\\t\\/", [[[]]], 0, "y"] tail',
  '"just a string with \\"escapes\\" and \\u0041"',
  '{"a": "bad \\x escape"}',
  '{"a": 1,, "b": 2}',
  '{"k": "v"',
];

test("a scan that goes on from an earlier one's memo says what a scan from the start says, wherever the earlier text ended", () => {
  for (const full of TEXTS) {
    for (let cut = 0; cut <= full.length; cut++) {
      for (let end = cut; end <= full.length; end += Math.max(1, Math.floor((full.length - cut) / 7))) {
        const memo = new ScanMemo();
        scanValue(full.slice(0, cut), 0, memo);
        assert.deepEqual(scanValue(full.slice(0, end), 0, memo), scanValue(full.slice(0, end), 0), `${JSON.stringify(full)} cut at ${cut}, then ${end}`);
        if (full[0] === "\"") {
          const m = new ScanMemo();
          decodeStringPrefix(full.slice(0, cut), 0, m);
          assert.equal(decodeStringPrefix(full.slice(0, end), 0, m), decodeStringPrefix(full.slice(0, end), 0), `${JSON.stringify(full)} decoded at ${cut}, then ${end}`);
        }
      }
    }
  }
});
