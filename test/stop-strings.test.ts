import assert from "node:assert/strict";
import { test } from "node:test";
import { createStopMatcher } from "../src/generation/stop-strings.js";

/** feeds chunks; returns everything emitted (plus the flush when not stopped) and the stop flag */
function run(stops: string[], chunks: string[]): { text: string; stopped: boolean; emits: string[] } {
  const m = createStopMatcher(stops);
  const emits: string[] = [];
  let stopped = false;
  for (const chunk of chunks) {
    const r = m.push(chunk);
    emits.push(r.emit);
    if (r.stopped) {
      stopped = true;
      break;
    }
  }
  if (!stopped) emits.push(m.flush());
  return { text: emits.join(""), stopped, emits };
}

/** every way of cutting `text` into 1..3 pieces, plus one character at a time */
function chunkings(text: string): string[][] {
  const out: string[][] = [[text], [...text]];
  for (let i = 0; i <= text.length; i++) {
    out.push([text.slice(0, i), text.slice(i)]);
    for (let j = i; j <= text.length; j++) out.push([text.slice(0, i), text.slice(i, j), text.slice(j)]);
  }
  return out;
}

test("text without any stop string passes through unchanged", () => {
  assert.deepEqual(run(["###"], ["Hello", ", ", "world"]), {
    text: "Hello, world",
    stopped: false,
    emits: ["Hello", ", ", "world", ""],
  });
  assert.deepEqual(run([], ["a", "b"]).text, "ab");
});

test("a stop string inside one chunk: emit the text before it and stop", () => {
  const m = createStopMatcher(["</s>"]);
  assert.deepEqual(m.push("Hi there</s>ignored"), { emit: "Hi there", stopped: true, matched: "</s>" });
  assert.deepEqual(m.push("more"), { emit: "", stopped: true });
  assert.equal(m.flush(), "");
});

test("a stop string straddling chunks is held back, never emitted", () => {
  const m = createStopMatcher(["STOP"]);
  assert.deepEqual(m.push("abcS"), { emit: "abc", stopped: false });
  assert.deepEqual(m.push("T"), { emit: "", stopped: false });
  assert.deepEqual(m.push("OP tail"), { emit: "", stopped: true, matched: "STOP" });
});

test("a held-back prefix that turns out not to be a stop is released", () => {
  const m = createStopMatcher(["STOP"]);
  assert.deepEqual(m.push("xST"), { emit: "x", stopped: false });
  assert.deepEqual(m.push("AY"), { emit: "STAY", stopped: false });
  assert.deepEqual(m.push("ST"), { emit: "", stopped: false });
  assert.equal(m.flush(), "ST");
});

test("holds back the longest suffix that is a prefix of a stop string", () => {
  // "aab": "ab" begins the stop "abc"; "aab" does not, so only the first "a" is safe
  const m = createStopMatcher(["abc"]);
  assert.deepEqual(m.push("aab"), { emit: "a", stopped: false });
  // "abab": the final "ab" could still start "abc"
  const n = createStopMatcher(["abc"]);
  assert.deepEqual(n.push("abab"), { emit: "ab", stopped: false });
  assert.deepEqual(n.push("c!"), { emit: "", stopped: true, matched: "abc" });
});

test("every chunking of the same text gives the same result", () => {
  const cases: Array<[string[], string, string, boolean]> = [
    [["STOP"], "one STOP two", "one ", true],
    [["STOP"], "one STO two", "one STO two", false],
    [["aab"], "aaaab", "aa", true], // the match starts after a false start
    [["abcd", "bc"], "xabcd", "xa", true], // "bc" completes first
    [["bc", "abc"], "xabc", "x", true], // both complete at once: the earlier start wins
    [["abc", "c"], "abxc", "abx", true],
    [["b", "abc"], "xabc", "xa", true],
    [["\n\n", "User:"], "Hi!\nUser: hello", "Hi!\n", true],
    [["\n\n", "User:"], "Hi!\n\nUser:", "Hi!", true],
    [["<|im_end|>", "<|endoftext|>"], "ok <|im_en", "ok <|im_en", false],
  ];
  for (const [stops, text, expected, stopped] of cases) {
    for (const chunks of chunkings(text)) {
      const r = run(stops, chunks);
      assert.equal(r.text, expected, `${JSON.stringify(stops)} on ${JSON.stringify(chunks)}`);
      assert.equal(r.stopped, stopped, `${JSON.stringify(stops)} on ${JSON.stringify(chunks)}`);
    }
  }
});

test("overlapping stop strings: a shorter one completing first stops before the longer", () => {
  const m = createStopMatcher(["abcd", "bc"]);
  assert.deepEqual(m.push("a"), { emit: "", stopped: false });
  assert.deepEqual(m.push("b"), { emit: "", stopped: false });
  assert.deepEqual(m.push("c"), { emit: "a", stopped: true, matched: "bc" });
});

test("emits exactly what can no longer start a stop string, after every character", () => {
  const stops = ["<|im_end|>", "\nUser", "<<"];
  const text = "a<|im\n<b<|im_e\nUs<|c<x";
  // brute force from the definition: after reading P, hold back P.slice(i) for the smallest
  // i at which P.slice(i) is still a prefix of some stop string
  const safeLength = (p: string) => {
    for (let i = 0; i < p.length; i++) if (stops.some((s) => s.startsWith(p.slice(i)))) return i;
    return p.length;
  };
  const m = createStopMatcher(stops);
  let shown = "";
  for (let n = 1; n <= text.length; n++) {
    const r = m.push(text[n - 1]!);
    assert.equal(r.stopped, false);
    shown += r.emit;
    assert.equal(shown, text.slice(0, safeLength(text.slice(0, n))), `after ${JSON.stringify(text.slice(0, n))}`);
  }
  assert.equal(shown + m.flush(), text);
});

test("unicode: multi-unit characters in stops and text, split surrogate pairs", () => {
  for (const chunks of chunkings("你好🙂世界")) {
    assert.deepEqual(run(["🙂"], chunks), { ...run(["🙂"], chunks), text: "你好", stopped: true });
  }
  for (const chunks of chunkings("naïve café ☕ done")) {
    assert.equal(run(["☕"], chunks).text, "naïve café ");
  }
  // a chunk ending in half of a surrogate pair keeps that half until its partner arrives
  const m = createStopMatcher(["END"]);
  const emoji = "😀";
  assert.deepEqual(m.push("x" + emoji[0]), { emit: "x", stopped: false });
  assert.deepEqual(m.push(emoji[1] + "y"), { emit: emoji + "y", stopped: false });
  // a stop string that ends in an emoji must not match half of a different emoji
  assert.equal(run(["a😀"], ["a😁"]).text, "a😁");
});

test("flush returns the held-back text once", () => {
  const m = createStopMatcher(["###"]);
  assert.equal(m.push("done#").emit, "done");
  assert.equal(m.flush(), "#");
  assert.equal(m.flush(), "");
});

test("bad stop lists are rejected with the index", () => {
  assert.throws(() => createStopMatcher(["ok", ""]), /stop strings\[1\]: a stop string must not be empty/);
  assert.throws(() => createStopMatcher(["ok", 5 as unknown as string]), /stop strings\[1\]: expected a string, got number/);
  assert.throws(() => createStopMatcher("STOP" as unknown as string[]), /expected an array of strings/);
  assert.throws(() => createStopMatcher(["\uD83D"]), /stop strings\[0\]: contains an unpaired UTF-16 surrogate/);
  assert.throws(() => createStopMatcher(["x"]).push(3 as unknown as string), /push\(\): expected a string/);
});
