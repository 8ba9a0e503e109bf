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
import { sentError } from "../src/browser/errors.js";
import type { Reply, Request } from "../src/browser/protocol.js";
import { ChatTemplateError, NoChatTemplateError } from "../src/chat/index.js";
import { RequestError } from "../src/engine/index.js";
import { loadModel, type GenerateOptions } from "../src/index.js";
import { OptionError } from "../src/units/index.js";
import { sharedFile, skipWithoutShared } from "./helpers/shared.js";

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
  // (a schema that compiles: its description is no part of the grammar)
  assert.throws(() => client.stream("Lily", { jsonSchema: { type: "string", description: () => "x" } as never }), /^Error: tsllm generate: options\.jsonSchema\.description \(a function\) cannot be sent to the engine worker/);
  // a stop string that is no string is refused by the range checks first, with Node's message
  assert.throws(() => client.stream("Lily", { stop: [(() => "x") as unknown as string] }), (e: unknown) => e instanceof OptionError && e.option === "stop" && e.message === "stop strings[0]: expected a string, got function");
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

test("stream() and streamChat(): a value out of range (temperature, maxTokens, n, a stop string, beam numbers) throws at the call as Model.stream's checks do, with nothing sent; streamChat's own arguments too", () => {
  const { client, worker } = engine();
  const bad = (options: object) => options as Parameters<TsllmWorker["stream"]>[1];
  const messages = [{ role: "user", content: "Lily" }];
  for (const [options, option, message] of [
    [{ temperature: -1 }, "temperature", /^sampling option temperature = -1: expected a finite number >= 0/],
    [{ maxTokens: -1 }, "maxTokens", /^maxTokens must be a non-negative integer, got -1$/],
    [{ n: 0 }, "n", /^n must be an integer >= 1/],
    [{ stop: ["ok", ""] }, "stop", /^stop strings\[1\]: a stop string must not be empty$/],
    [{ numBeams: 2, numReturnSequences: 3 }, "numReturnSequences", /^numReturnSequences \(3\) must be <= numBeams \(2\)$/],
    [{ json: "yaml" }, "json", /^json must be "value" or "object"/],
  ] as const) {
    const refused = (e: unknown) => e instanceof OptionError && e.option === option && message.test(e.message);
    assert.throws(() => client.stream("Lily", bad(options)), refused, JSON.stringify(options));
    assert.throws(() => client.streamChat(messages, bad(options)), refused, JSON.stringify(options));
  }
  assert.throws(() => client.streamChat("Lily" as never), (e: unknown) => e instanceof OptionError && e.option === "messages");
  assert.throws(() => client.streamChat(messages, { system: 5 as never }), (e: unknown) => e instanceof OptionError && e.option === "system");
  assert.throws(() => client.streamChat(messages, bad({ chatTemplat: "x" })), (e: unknown) => e instanceof OptionError && /chatTemplat/.test(e.message));
  assert.equal(worker.posted.length, 0, "nothing reached the worker");
  client.terminate();
});

test("stream(), streamChat(), generate(), chat(): a grammar, JSON schema, regex or choice list that does not compile is refused at the call (generate and chat: their promise rejects) as Engine.submit refuses it, with no model loaded and nothing sent", async () => {
  const { client, worker } = engine();
  const messages = [{ role: "user", content: "Lily" }];
  const chatTemplate = "{{ messages[0].content }}";
  for (const [options, option] of [
    [{ jsonSchema: { type: "foo" } }, "jsonSchema"], [{ grammar: "root ::= foo" }, "grammar"], [{ regex: "(" }, "regex"], [{ choice: [] }, "choice"],
  ] as const) {
    const refused = (e: unknown) => e instanceof RequestError && e.option === option && e.message.startsWith(`${option}: `);
    assert.throws(() => client.stream("Lily", options as never), refused, JSON.stringify(options));
    assert.throws(() => client.streamChat(messages, { chatTemplate, ...(options as object) }), refused, JSON.stringify(options));
    await assert.rejects(client.generate("Lily", options as never), refused, JSON.stringify(options));
    await assert.rejects(client.chat(messages, { chatTemplate, ...(options as object) }), refused, JSON.stringify(options));
  }
  // generate() and chat() refuse what stream() does, the same way
  await assert.rejects(client.generate("Lily", { temperature: -1 }), (e: unknown) => e instanceof OptionError && e.option === "temperature");
  await assert.rejects(client.chat(messages, { system: 5 as never }), (e: unknown) => e instanceof OptionError && e.option === "system");
  assert.equal(worker.posted.length, 0, "nothing reached the worker");
  // a schema that compiles is sent, and sent again (compiled once on the page)
  for (let i = 0; i < 2; i++) client.stream("Lily", { jsonSchema: { type: "string" } }).return(undefined as never).catch(() => undefined);
  assert.deepEqual(worker.posted.map((r) => r.op), ["generate", "abort", "generate", "abort"]);
  client.terminate();
});

test("streamChat(): the chat request is sent at the call with the chat options; left before its first step, it is stopped in the worker and lets go of the caller's signal", async () => {
  const { client, worker } = engine();
  const caller = new AbortController();
  const messages = [{ role: "user", content: "Lily" }];
  const it = client.streamChat(messages, { system: "Be brief.", chatTemplate: "{{ messages[0].content }}", maxTokens: 3, signal: caller.signal });
  assert.deepEqual(worker.posted.map((r) => r.op), ["chat"]);
  const sent = worker.posted[0] as Extract<Request, { op: "chat" }>;
  assert.deepEqual([sent.messages, sent.options], [messages, { system: "Be brief.", chatTemplate: "{{ messages[0].content }}", maxTokens: 3 }]);
  assert.equal((await it.return(undefined as never)).done, true);
  assert.deepEqual(worker.posted.map((r) => r.op), ["chat", "abort"]);
  assert.equal((worker.posted[1] as Extract<Request, { op: "abort" }>).target, sent.id);
  assert.equal(getEventListeners(caller.signal, "abort").length, 0);
  client.terminate();
});

test("a refusal the worker sends is rebuilt as the library's class of that name with its fields (instanceof OptionError, RequestError, NoChatTemplateError); another name stays an Error with that name", async () => {
  const { client, worker } = engine();
  const sent = (name: string, message: string, fields?: Record<string, string>) => {
    const done = client.generate("Lily");
    worker.reply({ id: worker.posted.at(-1)!.id, kind: "error", name, message, ...(fields ? { fields } : {}) });
    return done.then(() => undefined, (e: unknown) => e);
  };
  const option = await sent("OptionError", "sampling option temperature = -1: expected a finite number >= 0 (0 = greedy)", { option: "temperature" });
  assert.ok(option instanceof OptionError && option instanceof RangeError && !(option instanceof RequestError));
  assert.deepEqual([option.name, option.option], ["OptionError", "temperature"]);
  const request = await sent("RequestError", "the prompt has 300 tokens but the context holds 256; use a larger contextSize or a shorter prompt", { option: "prompt", code: "context_length_exceeded" });
  assert.ok(request instanceof RequestError && request instanceof OptionError);
  assert.deepEqual([request.name, request.option, request.code], ["RequestError", "prompt", "context_length_exceeded"]);
  const template = new NoChatTemplateError();
  const noTemplate = await sent("NoChatTemplateError", template.message, { reason: template.reason });
  assert.ok(noTemplate instanceof NoChatTemplateError && noTemplate instanceof ChatTemplateError);
  assert.deepEqual([noTemplate.message, noTemplate.reason], [template.message, template.reason]);
  const other = await sent("AbortError", "x.gguf: aborted");
  assert.ok(other instanceof Error && !(other instanceof OptionError));
  assert.deepEqual([other.name, other.message], ["AbortError", "x.gguf: aborted"]);
  client.terminate();
});

test("streamChat() with chatTemplateName (one of the model's named templates) sends it to the worker, as Model.streamChat takes it; the worker's NoChatTemplateError arrives with the template names (its `names`), as sentError sends it", async () => {
  const { client, worker } = engine();
  const messages = [{ role: "user", content: "Lily" }];
  const it = client.streamChat(messages, { chatTemplateName: "tool_use", maxTokens: 2 });
  const sent = worker.posted[0] as Extract<Request, { op: "chat" }>;
  assert.deepEqual([sent.op, sent.options], ["chat", { chatTemplateName: "tool_use", maxTokens: 2 }]);
  await it.return(undefined as never);
  // the worker's side: sentError, as engine-worker.ts sends a thrown error
  const thrown = new NoChatTemplateError(`x.gguf: the model has several named chat templates and none is "default" (names: "rag", "tool_use")`, ["rag", "tool_use"]);
  const done = client.chat(messages);
  worker.reply({ id: worker.posted.at(-1)!.id, kind: "error", ...sentError(thrown) });
  const rebuilt = await done.then(() => undefined, (e: unknown) => e);
  assert.ok(rebuilt instanceof NoChatTemplateError, String(rebuilt));
  assert.deepEqual([rebuilt.message, rebuilt.reason, rebuilt.names], [thrown.message, thrown.reason, ["rag", "tool_use"]]);
  client.terminate();
});

test("stream(): once a load has answered with the model's limits, a request they refuse throws at the call with nothing sent; while a load or unload sent since is unanswered, it goes to the worker", async () => {
  const { client, worker } = engine();
  const limits = { contextSize: 256, tokenIds: 512, rows: 512, maxSequences: 4 };
  const load = (hasChatTemplate: boolean) => {
    const done = client.load("http://localhost/m.gguf");
    worker.reply({ id: worker.posted.at(-1)!.id, kind: "result", value: { limits, hasChatTemplate } });
    return done;
  };
  await load(false);
  const posted = worker.posted.length;
  const messages = [{ role: "user", content: "Lily" }];
  const refused = (option: string) => (e: unknown) => e instanceof RequestError && e.option === option;
  assert.throws(() => client.stream([1, 512]), refused("prompt"));
  assert.throws(() => client.stream(new Array(256).fill(1)), (e: unknown) => refused("prompt")(e) && (e as RequestError).code === "context_length_exceeded");
  assert.throws(() => client.stream("Lily", { stopTokens: [512] }), refused("stopTokens"));
  assert.throws(() => client.stream("Lily", { logitBias: { 512: 1 } }), refused("logitBias"));
  assert.throws(() => client.stream("Lily", { n: 5 }), refused("n"));
  assert.throws(() => client.streamChat(messages, { chatTemplate: "{{ messages[0].content }}", numBeams: 5 }), refused("numBeams"));
  assert.throws(() => client.streamChat(messages), (e: unknown) => e instanceof NoChatTemplateError);
  assert.throws(() => client.stream(new Array(256).fill(1), { maxTokens: 1 }), (e: unknown) => refused("prompt")(e) && /which leaves no room for a token to generate/.test((e as Error).message));
  assert.equal(worker.posted.length, posted, "nothing reached the worker");
  // a prompt that fills the context and generates nothing (scored only) is sent, as the engine runs it
  client.stream(new Array(256).fill(1), { maxTokens: 0 }).return(undefined as never).catch(() => undefined);
  assert.deepEqual(worker.posted.slice(posted).map((r) => r.op), ["generate", "abort"]);
  // a second load not answered yet: the model may change, the worker decides
  void client.load("http://localhost/other.gguf").catch(() => undefined);
  client.stream([1, 512]).return(undefined as never).catch(() => undefined);
  assert.deepEqual(worker.posted.slice(posted + 2).map((r) => r.op), ["load", "generate", "abort"]);
  await load(true);
  client.streamChat(messages).return(undefined as never).catch(() => undefined);
  assert.equal(worker.posted.at(-2)!.op, "chat", "a model with a chat template");
  void client.unload().catch(() => undefined);
  client.stream([1, 512]).return(undefined as never).catch(() => undefined);
  assert.deepEqual(worker.posted.slice(-3).map((r) => r.op), ["unload", "generate", "abort"]);
  client.terminate();
});

test("streamChat() and chat(): with the end-of-turn ids of the model's own template (the load's answer), stopTokens outside the vocabulary are refused at the call, indexed after them as Model.streamChat indexes them; with a chatTemplate option they go to the worker", async () => {
  const { client, worker } = engine();
  const done = client.load("http://localhost/m.gguf");
  worker.reply({ id: worker.posted.at(-1)!.id, kind: "result", value: { limits: { contextSize: 256, tokenIds: 512, rows: 512, maxSequences: 4 }, hasChatTemplate: true, endOfTurnIds: [2] } });
  await done;
  const posted = worker.posted.length;
  const messages = [{ role: "user", content: "Lily" }];
  const refused = (e: unknown) => e instanceof RequestError && e.option === "stopTokens" && e.message.startsWith("stopTokens[2]: token id 512 ");
  assert.throws(() => client.streamChat(messages, { stopTokens: [5, 512] }), refused);
  await assert.rejects(client.chat(messages, { stopTokens: [5, 512] }), refused);
  assert.equal(worker.posted.length, posted, "nothing reached the worker");
  client.streamChat(messages, { chatTemplate: "{{ messages[0].content }}", stopTokens: [512] }).return(undefined as never).catch(() => undefined);
  assert.deepEqual(worker.posted.slice(posted).map((r) => r.op), ["chat", "abort"]);
  client.terminate();
});

test("stories260K: a token prompt whose KV worst case the loaded model's pool can never hold is refused at stream()'s call with nothing sent, in the Node engine's words (n choices, beams, prompt lookup too); one that fits is sent", { skip: skipWithoutShared("models/stories260K.gguf") }, async () => {
  const probe = await loadModel(sharedFile("models/stories260K.gguf")!, { contextSize: 512 });
  const perToken = probe.engine.bytesPerToken;
  probe.dispose();
  // 10 blocks of 16 tokens: the judge is Model.stream's refusal of the same request (the engine's scheduler's rule)
  const model = await loadModel(sharedFile("models/stories260K.gguf")!, { contextSize: 512, kvCacheBytes: 10 * 16 * perToken });
  const { client, worker } = engine();
  try {
    const done = client.load("http://localhost/m.gguf");
    worker.reply({ id: worker.posted.at(-1)!.id, kind: "result", value: { limits: model.engine.limits, hasChatTemplate: false } });
    await done;
    const posted = worker.posted.length;
    const prompt = Array.from({ length: 40 }, (_, i) => 10 + i);
    const cases: GenerateOptions[] = [{ maxTokens: 150 }, { maxTokens: 60, n: 3 }, { maxTokens: 30, numBeams: 3 }, { maxTokens: 100, promptLookup: true, draftTokens: 30 }];
    for (const options of cases) {
      let expected: RequestError | undefined;
      try {
        model.stream(prompt, options);
      } catch (e) {
        expected = e as RequestError;
      }
      assert.ok(expected instanceof RequestError && expected.code === "context_length_exceeded", `${JSON.stringify(options)}: the engine refuses it`);
      assert.throws(() => client.stream(prompt, options), (e: unknown) => e instanceof RequestError && e.message === expected.message && e.option === "maxTokens" && e.code === expected.code, JSON.stringify(options));
      await assert.rejects(client.generate(prompt, options), (e: unknown) => e instanceof RequestError && e.message === expected.message);
    }
    assert.equal(worker.posted.length, posted, "nothing reached the worker");
    // one that fits (as the engine admits it) goes to the worker
    const fits = { maxTokens: 40 };
    await model.generate(prompt, fits);
    client.stream(prompt, fits).return(undefined as never).catch(() => undefined);
    assert.deepEqual(worker.posted.slice(posted).map((r) => r.op), ["generate", "abort"]);
  } finally {
    client.terminate();
    model.dispose();
  }
});

// A dozen calls given one AbortSignal (a page's Stop button for everything it runs) added a
// listener each to it: Node warns of a leak past 10 (MaxListenersExceededWarning), as Model's
// calls did before onAbort (src/units/abort-listeners.ts). The judge is the library's own rule
// (test/library-stream.test.ts "concurrent calls sharing one AbortSignal put one listener on it").
test("generate(), chat() and stream() calls sharing one AbortSignal put one listener on it; an abort still stops every one still running, and none is left once they end", async () => {
  const { client, worker } = engine();
  const caller = new AbortController();
  const settled: Promise<unknown>[] = [];
  for (let i = 0; i < 4; i++) {
    settled.push(client.generate("Lily", { maxTokens: 2, signal: caller.signal }));
    settled.push(client.chat([{ role: "user", content: "Hi" }], { chatTemplate: "{{ messages[0].content }}", maxTokens: 2, signal: caller.signal }));
    client.stream("Lily", { maxTokens: 2, signal: caller.signal });
  }
  const ids = worker.posted.map((r) => r.id);
  assert.equal(ids.length, 12);
  assert.equal(getEventListeners(caller.signal, "abort").length, 1);
  // the first three end on their own; the signal keeps its one listener for the other nine
  for (const id of ids.slice(0, 3)) worker.reply({ id, kind: "result", value: { completion: "ab" } } as Reply);
  await new Promise((r) => setTimeout(r, 0));
  assert.equal(getEventListeners(caller.signal, "abort").length, 1);
  caller.abort();
  const aborted = worker.posted.filter((r): r is Extract<Request, { op: "abort" }> => r.op === "abort").map((r) => r.target);
  assert.deepEqual(aborted.sort((a, b) => a - b), ids.slice(3), "each running request, and only those, is stopped in the worker");
  for (const id of ids.slice(3)) worker.reply({ id, kind: "result", value: { completion: "", finishReason: "abort" } } as Reply);
  await Promise.all(settled);
  assert.equal(getEventListeners(caller.signal, "abort").length, 0);

  // a shared signal never aborted: its one listener leaves with the last call
  const shared = new AbortController();
  const more = [client.generate("Lily", { signal: shared.signal }), client.generate("Lily", { signal: shared.signal })];
  assert.equal(getEventListeners(shared.signal, "abort").length, 1);
  for (const r of worker.posted.slice(-2)) worker.reply({ id: r.id, kind: "result", value: { completion: "" } } as Reply);
  await Promise.all(more);
  assert.equal(getEventListeners(shared.signal, "abort").length, 0);
  client.terminate();
});
