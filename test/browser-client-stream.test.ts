// TsllmWorker.stream (the page's side of the browser build) sends its request at the call, as
// Model.stream queues its generation at the call since 2f0bcd4: a refused option or prompt, a
// terminated worker or a value that cannot be sent throws there with nothing sent (before, an
// async generator: nothing ran until the first next(), and a bad option came back from the
// worker), and a stream left before its first step stops its request in the worker. The judge is
// the library's contract (Model.stream, test/library-stream.test.ts) and the structured clone
// algorithm (Node's structuredClone, as a browser's postMessage copies). No browser: a stand-in
// Worker records what the page posts and answers as engine-worker.ts does.
import assert from "node:assert/strict";
import { getEventListeners } from "node:events";
import { after, test } from "node:test";
import { TsllmWorker } from "../src/browser/client.js";
import type { Reply, Request } from "../src/browser/protocol.js";
import { OptionError } from "../src/units/index.js";

class StandInWorker {
  static last: StandInWorker | undefined;
  readonly posted: Request[] = [];
  onmessage: ((e: { data: Reply }) => void) | null = null;
  onerror: ((e: { message: string }) => void) | null = null;
  constructor() {
    StandInWorker.last = this;
  }
  postMessage(message: unknown): void {
    // what a browser's postMessage does with a function or a symbol: a DataCloneError, thrown at the call
    this.posted.push(structuredClone(message) as Request);
  }
  terminate(): void {}
  reply(data: Reply): void {
    this.onmessage?.({ data });
  }
}

const had = Object.getOwnPropertyDescriptor(globalThis, "Worker");
Object.defineProperty(globalThis, "Worker", { value: StandInWorker, configurable: true, writable: true });
after(() => {
  if (had) Object.defineProperty(globalThis, "Worker", had);
  else delete (globalThis as { Worker?: unknown }).Worker;
});

function engine(): { client: TsllmWorker; worker: StandInWorker } {
  const client = new TsllmWorker("http://localhost/engine-worker.js");
  return { client, worker: StandInWorker.last! };
}

test("stream(): a misspelt option, a flag that is no boolean, a prompt that is neither text nor tokens, a terminated worker, a value that cannot be sent throw at the call, with nothing sent", () => {
  const { client, worker } = engine();
  const bad = (options: object) => options as Parameters<TsllmWorker["stream"]>[1];
  assert.throws(() => client.stream("Lily", bad({ maxTokns: 5 })), (e: unknown) => e instanceof OptionError && /maxTokns/.test(e.message) && /maxTokens/.test(e.message));
  assert.throws(() => client.stream("Lily", bad({ ignoreEos: "no" })), (e: unknown) => e instanceof OptionError && /^ignoreEos: /.test(e.message));
  assert.throws(() => client.stream("Lily", bad({ signal: "stop" })), (e: unknown) => e instanceof OptionError && /^signal: expected an AbortSignal/.test(e.message));
  assert.throws(() => client.stream({ text: "Lily" } as unknown as string), (e: unknown) => e instanceof OptionError && /^prompt: expected a string or an array of token ids, got /.test(e.message));
  assert.throws(() => client.stream("Lily", { stop: [(() => "x") as unknown as string] }), /^Error: tsllm generate: options\.stop\[0\] \(a function\) cannot be sent to the engine worker/);
  assert.equal(worker.posted.length, 0, "nothing reached the worker");
  client.terminate();
  assert.throws(() => client.stream("Lily"), /^Error: tsllm engine worker terminated$/);
  assert.equal(worker.posted.length, 0);
});

test("stream(): the request is sent at the call; left before its first step (return()), it is stopped in the worker and lets go of the caller's signal", async () => {
  const { client, worker } = engine();
  const caller = new AbortController();
  const it = client.stream("Lily", { maxTokens: 3, temperature: 0, signal: caller.signal });
  assert.deepEqual(worker.posted.map((r) => r.op), ["generate"]);
  const sent = worker.posted[0] as Extract<Request, { op: "generate" }>;
  assert.deepEqual(sent.options, { maxTokens: 3, temperature: 0 });
  const done = await it.return(undefined as never);
  assert.equal(done.done, true);
  assert.deepEqual(worker.posted.map((r) => r.op), ["generate", "abort"]);
  assert.equal((worker.posted[1] as Extract<Request, { op: "abort" }>).target, sent.id);
  assert.equal(getEventListeners(caller.signal, "abort").length, 0);
  client.terminate();
});

test("stream(): read to its end, the worker's steps and then its result; a stream never read lets go of the caller's signal when the request ends", async () => {
  const { client, worker } = engine();
  const caller = new AbortController();
  const it = client.stream([1, 2], { maxTokens: 2, signal: caller.signal });
  const id = worker.posted[0]!.id;
  const result = { completion: "ab" } as unknown;
  worker.reply({ id, kind: "step", step: { type: "token", token: 5, text: "a" } } as Reply);
  worker.reply({ id, kind: "step", step: { type: "token", token: 6, text: "b" } } as Reply);
  worker.reply({ id, kind: "result", value: result } as Reply);
  const texts: string[] = [];
  let r = await it.next();
  for (; !r.done; r = await it.next()) texts.push(r.value.text);
  assert.deepEqual(texts, ["a", "b"]);
  assert.equal(r.value, result);
  assert.deepEqual(worker.posted.map((q) => q.op), ["generate"], "no abort for a finished request");

  const unread = new AbortController();
  client.stream("Lily", { signal: unread.signal });
  assert.equal(getEventListeners(unread.signal, "abort").length, 1);
  worker.reply({ id: worker.posted.at(-1)!.id, kind: "result", value: result } as Reply);
  await new Promise((r) => setTimeout(r, 0));
  assert.equal(getEventListeners(unread.signal, "abort").length, 0);
  client.terminate();
});
