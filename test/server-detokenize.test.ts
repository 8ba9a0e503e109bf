import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import type { LlamaModel } from "node-llama-cpp";
import { disposeSharedLlama, llamaToken, sharedLlama } from "./helpers/llama-cpp-oracle.js";
import { post, serveStories, skipStories, STORIES } from "./helpers/serve.js";
import { sharedFile } from "./helpers/shared.js";

/**
 * llama-server's POST /detokenize answers tokens_to_str: every token's common_token_to_piece
 * (special tokens' text included) joined. llama.cpp's llama_detokenize gives the same pieces after
 * a first token, whose leading space it alone may drop: its text after BOS, less BOS's own text,
 * is the pieces joined.
 */
function llamaServerText(llama: LlamaModel, ids: readonly number[]): string {
  const bos = llama.tokens.bos!;
  return llama.detokenize([bos, ...ids.map(llamaToken)], true).slice(llama.detokenize([bos], true).length);
}

describe("POST /detokenize answers llama-server's text: the tokens' pieces joined", { skip: skipStories }, () => {
  let s: Awaited<ReturnType<typeof serveStories>>;
  let llama: LlamaModel;
  before(async () => {
    s = await serveStories();
    llama = await (await sharedLlama()).loadModel({ modelPath: sharedFile(STORIES)!, vocabOnly: true });
  });
  after(async () => {
    await s?.close();
    await llama?.dispose();
    await disposeSharedLlama();
  });

  const detokenize = async (tokens: number[]): Promise<string> => {
    const r = await post(`${s.url}/detokenize`, { tokens });
    assert.equal(r.status, 200, JSON.stringify(r.json));
    return r.json.content as string;
  };

  test("a SentencePiece text's first word keeps its space, as /tokenize's with_pieces shows it; parts detokenized apart join into the whole", async () => {
    const tok = await post(`${s.url}/tokenize`, { content: "Once upon a time, Lily saw a ✓ here", with_pieces: true });
    const pieces = tok.json.tokens as { id: number; piece: string | number[] }[];
    const ids = pieces.map((p) => p.id);
    const whole = await detokenize(ids);
    assert.equal(whole, llamaServerText(llama, ids));
    assert.ok(whole.startsWith(" Once"), whole);
    // a word's token alone is its piece, space and all
    const first = pieces[0]!;
    assert.equal(await detokenize([first.id]), first.piece);
    assert.equal(await detokenize([first.id]), llamaServerText(llama, [first.id]));
    // a client that detokenizes the ids in parts (a character's bytes kept together) gets the whole text back, words apart
    const bytesAt = pieces.findIndex((p) => typeof p.piece !== "string");
    const bytesEnd = pieces.findIndex((p, i) => i > bytesAt && typeof p.piece === "string");
    assert.ok(bytesAt > 0 && bytesEnd > bytesAt, JSON.stringify(pieces));
    const parts = [ids.slice(0, bytesAt), ids.slice(bytesAt, bytesEnd), ids.slice(bytesEnd)];
    let joined = "";
    for (const part of parts) joined += await detokenize(part);
    assert.equal(joined, whole);
  });

  test("a lone space token, special tokens among words, and a character's bytes are llama-server's", async () => {
    const space = (await post(`${s.url}/tokenize`, { content: " ✓" })).json.tokens as number[];
    for (const ids of [space.slice(0, 1), space, [1, ...space, 2], [2, space.at(-1)!]]) {
      assert.equal(await detokenize(ids), llamaServerText(llama, ids), JSON.stringify(ids));
    }
  });

  test("past one slice of ids (decoded between turns of the event loop), the same pieces joined", async () => {
    const ids = Array.from({ length: 40_000 }, (_, i) => 3 + (i * 7919) % (s.model.info.vocabSize - 3));
    assert.equal(await detokenize(ids), llamaServerText(llama, ids));
  });
});
