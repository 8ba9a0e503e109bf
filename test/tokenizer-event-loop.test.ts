import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { after, before, describe, test } from "node:test";
import { GGUFMetadata, readGGUFHeader } from "../src/formats/index.js";
import { loadEmbeddingModel, startServer, type EmbeddingModel, type OpenAIServer } from "../src/index.js";
import { loadGGUFTokenizer, SpmMerger, type Tokenizer } from "../src/tokenizer/index.js";
import { serveStories, skipStories } from "./helpers/serve.js";
import { sharedFile, skipWithoutShared } from "./helpers/shared.js";

/*
 * encodeAsync: encode()'s ids a slice at a time, the event loop turning between slices, so that
 * `tsllm serve` answers /health while it tokenizes a multi-megabyte prompt (before, a 4 MiB
 * message held the loop for seconds). The ids are encode()'s; encode() itself is judged by
 * llama.cpp in tokenizer-llamacpp.test.ts.
 */
const VOCABS = ["llama-spm", "phi-3", "gpt-2", "starcoder", "deepseek-llm", "bert-bge"];
const TEXTS = ["text/wiki.test.raw", "text/hongloumeng-300k.txt", "text/tinystories-valid-30k.txt"];
const skipTexts = TEXTS.map((t) => skipWithoutShared(t)).find((s) => s !== false) ?? false;

/** ~700 KB: English, Chinese and stories, special-token text and runs of spaces, tabs and newlines in between */
function mixedText(tok: Tokenizer): { text: string; literalRanges: [number, number][] } {
  const [wiki, zh, stories] = TEXTS.map((t) => readFileSync(sharedFile(t)!, "utf8"));
  const special = [...Array(tok.vocabSize).keys()].filter((id) => tok.isSpecial(id)).map((id) => tok.piece(id)).slice(0, 8);
  const parts = [wiki!.slice(0, 300_000), zh!.slice(0, 100_000), stories!];
  let text = "";
  const literalRanges: [number, number][] = [];
  for (let i = 0; i < 40; i++) {
    for (const p of parts) text += p.slice(i * (p.length / 40), (i + 1) * (p.length / 40));
    const s = special[i % Math.max(1, special.length)] ?? "";
    // every other special-token text is message content: it stays text
    if (i % 2 === 1) literalRanges.push([text.length, text.length + s.length]);
    text += `${s}${"  ".repeat(i % 5)}\t\n${" ".repeat(i)}`;
  }
  return { text, literalRanges };
}

for (const vocab of VOCABS) {
  const rel = `tokenizer-tests/ggml-vocab-${vocab}.gguf`;
  test(`${vocab}: encodeAsync gives encode()'s ids and lets the event loop turn meanwhile`, { skip: skipWithoutShared(rel) || skipTexts }, async () => {
    const tok = loadGGUFTokenizer(sharedFile(rel)!);
    const { text, literalRanges } = mixedText(tok);
    for (const options of [{}, { addSpecialTokens: false, parseSpecial: false }, { literalRanges }]) {
      const want = tok.encode(text, options);
      // a fresh tokenizer: no word cache from the run above
      const fresh = loadGGUFTokenizer(sharedFile(rel)!);
      let turns = 0, done = false;
      const turn = () => { turns++; if (!done) setImmediate(turn); };
      setImmediate(turn);
      const got = await fresh.encodeAsync(text, options);
      done = true;
      assert.equal(got.length, want.length, JSON.stringify(options));
      assert.ok(got.every((id, i) => id === want[i]), `${JSON.stringify(options)}: the same ids`);
      assert.ok(turns >= 10, `the event loop turned ${turns} times while ${text.length} characters were encoded`);
    }
  });
}

test("bert-bge: a megabyte with no white space is normalized, split and encoded a slice at a time, with encode()'s ids", { skip: skipWithoutShared("tokenizer-tests/ggml-vocab-bert-bge.gguf") }, async () => {
  // one BERT chunk each (no white space, no ideograph): before, one synchronous step (the event
  // loop turned once, after it); a run of marks after one letter is the one text no cut fits
  // (stacked marks: the normalizing is cut only before a letter or a "!")
  const tok = loadGGUFTokenizer(sharedFile("tokenizer-tests/ggml-vocab-bert-bge.gguf")!);
  for (const text of ["a".repeat(1_000_000), "Ab,c\u0301\u00e9-x".repeat(125_000), "E\u0327\u0301\u0308\u0323!".repeat(200_000), `${"q".repeat(600_000)}\u0001${"\u00dcb".repeat(200_000)}`]) {
    const options = { parseSpecial: false };
    const want = tok.encode(text, options);
    let turns = 0, done = false;
    const turn = () => { turns++; if (!done) setImmediate(turn); };
    setImmediate(turn);
    const got = await loadGGUFTokenizer(sharedFile("tokenizer-tests/ggml-vocab-bert-bge.gguf")!).encodeAsync(text, options);
    done = true;
    assert.equal(got.length, want.length);
    assert.ok(got.every((id, i) => id === want[i]), "the same ids");
    assert.ok(turns >= 10, `${JSON.stringify(text.slice(0, 8))}: the event loop turned ${turns} times`);
  }
});

for (const vocab of ["llama-spm", "phi-3"]) {
  const rel = `tokenizer-tests/ggml-vocab-${vocab}.gguf`;
  test(`${vocab}: SentencePiece text cut where no token spans encodes as the whole text merged at once`, { skip: skipWithoutShared(rel) || skipTexts }, () => {
    // the cut is the tokenizer's own; the one-piece merge over the whole escaped text is the reference
    const path = sharedFile(rel)!;
    const tok = loadGGUFTokenizer(path);
    const meta = new GGUFMetadata(path, readGGUFHeader(path).metadata);
    const byText = new Map(meta.strings("tokenizer.ggml.tokens")!.map((t, id) => [t, id]));
    const scores = meta.numbers("tokenizer.ggml.scores")!;
    const byteId = (b: number) => byText.get(`<0x${b.toString(16).toUpperCase().padStart(2, "0")}>`)!;
    const whole = new SpmMerger(byText, scores);
    const zh = readFileSync(sharedFile(TEXTS[1]!)!, "utf8").slice(0, 20_000);
    const wiki = readFileSync(sharedFile(TEXTS[0]!)!, "utf8").slice(0, 60_000);
    // runs of spaces (the ▁▁... tokens span them), lone surrogates, emoji, combining marks
    const odd = Array.from({ length: 200 }, (_, i) => `x${" ".repeat(i % 17)}y\uD800${i}\uDC00z 😀${"😀".repeat(i % 3)} e\u0301 \t\r\n`).join("");
    for (const text of [zh, wiki, odd]) {
      const want: number[] = [];
      // (a lone surrogate is read as U+FFFD, what llama.cpp sees: 467c292)
      const wellFormed = text.replace(/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g, "\uFFFD");
      whole.encode(`\u2581${wellFormed.replaceAll(" ", "\u2581")}`, (b, out) => out.push(byteId(b)), want);
      const got = tok.encode(text, { addSpecialTokens: false, parseSpecial: false });
      assert.equal(got.length, want.length);
      assert.ok(got.every((id, i) => id === want[i]), "the same ids");
    }
  });
}

/**
 * Watches (does not replace) a served model's tokenizer: the promise `started(nth)` gives resolves
 * at the nth call since with a text of more than a megabyte, when the server starts tokenizing it
 */
function watchBigTexts(tokenizer: Tokenizer): (nth: number) => Promise<void> {
  const tok = tokenizer as unknown as Record<"encode" | "encodeAsync", (text: string, options?: object) => unknown>;
  let signal = () => {};
  for (const name of ["encode", "encodeAsync"] as const) {
    const real = tok[name].bind(tok);
    tok[name] = (text: string, options?: object) => {
      if (text.length > 1_000_000) signal();
      return real(text, options);
    };
  }
  return (nth) => new Promise<void>((resolve) => { signal = () => { if (--nth === 0) resolve(); }; });
}

/**
 * POSTs `body` to `path` and, once the server tokenizes its big text (the `nth` time), GETs
 * /health: the big request's answer, once /health was answered before it (before encodeAsync, the
 * event loop stayed with the tokenizer until it was done)
 */
async function healthFirst(url: string, started: (nth: number) => Promise<void>, path: string, body: unknown, nth = 1): Promise<{ status: number; text: string }> {
  const order: string[] = [];
  const tokenizing = started(nth);
  const request = fetch(`${url}${path}`, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) })
    .then(async (r) => { order.push("big request"); return { status: r.status, text: await r.text() }; });
  const health = tokenizing.then(() => fetch(`${url}/health`)).then((r) => { order.push("health"); return r.status; });
  const [answer, healthStatus] = await Promise.all([request, health]);
  assert.equal(healthStatus, 200);
  assert.deepEqual(order, ["health", "big request"]);
  return answer;
}

const big = () => readFileSync(sharedFile(TEXTS[2]!)!, "utf8").repeat(80); // 2.4 MB

describe("tsllm serve answers /health while it tokenizes a multi-megabyte prompt", { skip: skipStories || skipWithoutShared(TEXTS[2]!) }, () => {
  let s: Awaited<ReturnType<typeof serveStories>>;
  let started: (nth: number) => Promise<void>;
  before(async () => {
    s = await serveStories();
    started = watchBigTexts(s.model.tokenizer);
  });
  after(() => s?.close());

  for (const [path, body] of [
    ["/tokenize", () => ({ content: big() })],
    ["/v1/completions", () => ({ prompt: big(), max_tokens: 1 })],
    ["/v1/chat/completions", () => ({ messages: [{ role: "user", content: big() }], max_tokens: 1 })],
    // the model's embeddings (llama-server --embeddings): refused once tokenized, or, truncated, tokenized again to be embedded
    ["/v1/embeddings", () => ({ input: big() })],
    ["/v1/embeddings", () => ({ input: big(), truncate: true })],
  ] as const) {
    const truncated = "truncate" in body();
    test(`${path}${truncated ? " (truncate)" : ""}: /health is answered before the big request's response`, async () => {
      // a truncated input is tokenized twice (its length checked, then embedded): /health is sent during the second
      const answer = await healthFirst(s.url, started, path, body(), truncated ? 2 : 1);
      // the prompt is far past stories260K's 512-token context: refused once tokenized, or tokenized
      if (path === "/tokenize") assert.equal(answer.status, 200);
      else if (path !== "/v1/embeddings") assert.match(answer.text, /maximum context length/);
      else if (truncated) assert.equal(JSON.parse(answer.text).data[0].embedding.length, s.model.info.embeddingLength);
      else assert.match(answer.text, /more than the \d+ this model takes per input/);
    });
  }
});

describe("tsllm serve on an encoder answers /health while it tokenizes a multi-megabyte input", { skip: skipWithoutShared("hf-oracle/minilm-embed") || skipWithoutShared(TEXTS[2]!) }, () => {
  let m: EmbeddingModel;
  let server: OpenAIServer;
  let started: (nth: number) => Promise<void>;
  before(async () => {
    m = await loadEmbeddingModel(sharedFile("hf-oracle/minilm-embed")!, { threads: 1 });
    started = watchBigTexts(m.tokenizer);
    server = await startServer(m, { port: 0 });
  });
  after(async () => { await server?.close(1000); m?.dispose(); });

  test("/v1/embeddings: refused once tokenized, or (truncate) tokenized again and embedded", async () => {
    const refused = await healthFirst(server.url, started, "/v1/embeddings", { input: big() });
    assert.match(refused.text, /more than the \d+ this model takes per input/);
    const cut = await healthFirst(server.url, started, "/v1/embeddings", { input: big(), truncate: true, encoding_format: "float" }, 2);
    assert.equal(JSON.parse(cut.text).data[0].embedding.length, m.dimensions);
  });
});

describe("tsllm serve answers /health while it detokenizes a million ids", { skip: skipStories }, () => {
  let s: Awaited<ReturnType<typeof serveStories>>;
  before(async () => { s = await serveStories(); });
  after(() => s?.close());

  test("POST /detokenize of 1M ids: /health is answered before it, and the text is decode()'s", async () => {
    // watched, not replaced: the signal comes when the server starts decoding (decode() in one piece, a stream decoder, or a GGUF vocabulary's pieces)
    const tok = s.model.tokenizer as unknown as Record<"decode" | "createStreamDecoder" | "tokenBytes", (...args: unknown[]) => unknown>;
    let signal = () => {};
    const decoding = new Promise<void>((resolve) => { signal = resolve; });
    for (const name of ["decode", "createStreamDecoder", "tokenBytes"] as const) {
      const real = tok[name].bind(tok);
      tok[name] = (...args: unknown[]) => { signal(); return real(...args); };
    }
    const ids = Array.from({ length: 1_000_000 }, (_, i) => 1 + (i * 7919) % (s.model.info.vocabSize - 1));
    const order: string[] = [];
    const request = fetch(`${s.url}/detokenize`, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ tokens: ids }) })
      .then(async (r) => { order.push("detokenize"); return { status: r.status, json: await r.json() as { content: string } }; });
    const health = decoding.then(() => fetch(`${s.url}/health`)).then((r) => { order.push("health"); return r.status; });
    const [answer, healthStatus] = await Promise.all([request, health]);
    assert.equal(healthStatus, 200);
    assert.deepEqual(order, ["health", "detokenize"]);
    assert.equal(answer.status, 200);
    // (the library's decode(), the one the server answered with in one piece before)
    assert.equal(answer.json.content, s.model.tokenizer.decode(ids));
  });
});

test("POST /detokenize on a tokenizer.json's model, past one slice of ids: decode()'s text", { skip: skipWithoutShared("hf-oracle/minilm-embed") }, async () => {
  // the slices go through the tokenizer's stream decoder (WordPiece's joined words, its clean-up of spaces): joined, decode()'s text
  const m = await loadEmbeddingModel(sharedFile("hf-oracle/minilm-embed")!, { threads: 1 });
  const server = await startServer(m, { port: 0 });
  try {
    const ids = Array.from({ length: 40_000 }, (_, i) => 999 + (i * 7919) % (m.tokenizer.vocabSize - 999));
    const r = await fetch(`${server.url}/detokenize`, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ tokens: ids }) });
    assert.equal(r.status, 200);
    assert.equal(((await r.json()) as { content: string }).content, m.tokenizer.decode(ids));
  } finally {
    await server.close(1000);
    m.dispose();
  }
});
