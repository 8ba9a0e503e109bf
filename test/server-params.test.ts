// Request parameters the server reads and the field its 400s name, against `tsllm serve` on real
// HTTP on loopback with the `openai` client. The judge: OpenAI's API (its error shape
// {message, type, param, code}; nested parameters named by their path, `messages[0].content`).
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import OpenAI from "openai";
import type { ChatMessage } from "../src/chat/index.js";
import type { SamplingOptions } from "../src/sampling/index.js";
import { renderWithJinja2, skipWithoutJinja2 } from "../scripts/jinja2-oracle.js";
import { post, serveStories, skipStories as skip } from "./helpers/serve.js";

describe("request parameters on stories260K", { skip }, () => {
  let s: Awaited<ReturnType<typeof serveStories>>;
  let client: OpenAI;
  before(async () => {
    s = await serveStories();
    client = new OpenAI({ baseURL: `${s.url}/v1`, apiKey: "none", maxRetries: 0 });
  });
  after(() => s?.close());
  const base = { model: "stories260K", messages: [{ role: "user" as const, content: "Once upon a time" }] };

  /** the 400 a call of the openai client ends in */
  const refusal = async (call: Promise<unknown>): Promise<{ param: unknown; code: unknown; message: string }> => {
    const e = await call.then(() => assert.fail("expected a 400"), (e: unknown) => e);
    assert.ok(e instanceof OpenAI.BadRequestError, String(e));
    return { param: e.param, code: e.code, message: e.message };
  };

  test("max_tokens and max_completion_tokens both set: a 400 naming both, as OpenAI's API answers it; either alone limits the reply", async () => {
    // OpenAI: "Setting 'max_tokens' and 'max_completion_tokens' at the same time is not supported"
    // (param max_tokens, code invalid_parameter_combination), even where they agree
    for (const [a, b] of [[3, 5], [4, 4]] as const) {
      const r = await refusal(client.chat.completions.create({ ...base, max_tokens: a, max_completion_tokens: b, temperature: 0 }));
      assert.equal(r.param, "max_tokens");
      assert.equal(r.code, "invalid_parameter_combination");
      assert.match(r.message, /'max_tokens' and 'max_completion_tokens' cannot both be set/);
    }
    const text = await post(`${s.url}/v1/completions`, { prompt: "Once", max_tokens: 3, max_completion_tokens: 3 });
    assert.equal(text.status, 400);
    assert.equal(text.json.error.param, "max_tokens");
    // one of them (the other absent or null) is the limit
    for (const limits of [{ max_completion_tokens: 3 }, { max_tokens: 3 }, { max_tokens: 3, max_completion_tokens: null }, { max_tokens: null, max_completion_tokens: 3 }]) {
      const r = await client.chat.completions.create({ ...base, temperature: 0, ignore_eos: true, ...limits } as unknown as OpenAI.ChatCompletionCreateParamsNonStreaming);
      assert.equal(r.usage?.completion_tokens, 3, JSON.stringify(limits));
      assert.equal(r.choices[0]!.finish_reason, "length");
    }
  });

  test("n_predict, llama-server's token limit, limits the reply on both OpenAI routes (-1: no limit); beside max_tokens / max_completion_tokens it must agree", async () => {
    // llama-server (tools/server/server-common.cpp, oaicompat_completion_params_parse and
    // oaicompat_chat_params_parse) copies n_predict into its params ("if n_predict is present, we
    // overwrite the value specified earlier by max_tokens"), and params_from_json_cmpl takes
    // n_predict, else max_completion_tokens, else max_tokens: it was ignored here, the reply unlimited
    const chat = { ...base, temperature: 0, ignore_eos: true };
    const text = { model: "stories260K", prompt: "Once upon a time", temperature: 0, ignore_eos: true };
    const byMaxTokens = await client.chat.completions.create({ ...chat, max_tokens: 3 });
    const byNPredict = await client.chat.completions.create({ ...chat, n_predict: 3 } as unknown as OpenAI.ChatCompletionCreateParamsNonStreaming);
    assert.equal(byNPredict.usage!.completion_tokens, 3);
    assert.equal(byNPredict.choices[0]!.finish_reason, "length");
    assert.equal(byNPredict.choices[0]!.message.content, byMaxTokens.choices[0]!.message.content);
    const t = await client.completions.create({ ...text, n_predict: 4 } as unknown as OpenAI.CompletionCreateParamsNonStreaming);
    assert.equal(t.usage!.completion_tokens, 4);
    // -1: no limit, to the end of the context (512), as max_tokens -1
    const unlimited = await client.completions.create({ ...text, n_predict: -1 } as unknown as OpenAI.CompletionCreateParamsNonStreaming);
    assert.equal(unlimited.usage!.total_tokens, s.model.contextSize);
    // beside the OpenAI names: taken where they agree, the request's 400 naming n_predict where they do not
    // (llama-server takes n_predict silently: the client's max_tokens went unheeded)
    for (const limits of [{ max_tokens: 3 }, { max_completion_tokens: 3 }]) {
      const same = await client.chat.completions.create({ ...chat, ...limits, n_predict: 3 } as unknown as OpenAI.ChatCompletionCreateParamsNonStreaming);
      assert.equal(same.usage!.completion_tokens, 3, JSON.stringify(limits));
      const r = await refusal(client.chat.completions.create({ ...chat, ...limits, n_predict: 5 } as unknown as OpenAI.ChatCompletionCreateParamsNonStreaming));
      assert.equal(r.param, "n_predict");
      assert.equal(r.code, "invalid_parameter_combination");
      assert.match(r.message, new RegExp(`'n_predict' \\(5\\) and '${Object.keys(limits)[0]}' \\(3\\) are two names of one limit and disagree`));
    }
    // its own faults name it: another negative, and 0 on a text completion without echo
    const negative = await post(`${s.url}/v1/chat/completions`, { ...chat, n_predict: -2 });
    assert.equal(negative.status, 400);
    assert.equal(negative.json.error.param, "n_predict");
    assert.equal(negative.json.error.message, "'n_predict' must be -1 (no limit: up to the end of the context) or an integer in 1..inf, got -2");
    const zero = await post(`${s.url}/v1/completions`, { ...text, n_predict: 0 });
    assert.equal(zero.status, 400);
    assert.equal(zero.json.error.param, "n_predict");
  });

  test("response_format json_schema without a name is answered, as llama-server answers it; a name given keeps OpenAI's rule", async () => {
    const schema = { type: "object", properties: { a: { type: "boolean" } }, required: ["a"], additionalProperties: false };
    const r = await client.chat.completions.create({
      ...base, max_completion_tokens: 40, temperature: 0,
      response_format: { type: "json_schema", json_schema: { schema, strict: true } } as unknown as OpenAI.ResponseFormatJSONSchema,
    });
    assert.equal(r.choices[0]!.finish_reason, "stop", r.choices[0]!.message.content!);
    assert.equal(typeof (JSON.parse(r.choices[0]!.message.content!) as { a: unknown }).a, "boolean");
    const bad = await refusal(client.chat.completions.create({ ...base, response_format: { type: "json_schema", json_schema: { name: "no spaces", schema } } }));
    assert.equal(bad.param, "response_format.json_schema.name");
  });

  test("llama-server's schema forms hold the reply to the schema: response_format {type: json_object, schema} and a top-level json_schema, on both routes", async () => {
    // the judge: llama-server's oaicompat params (response_format json_object's `schema`, its
    // `json_schema` field); a schema whose only answer is {"a": true} or {"a": false}: a free reply or
    // any object would not match it
    const schema = { type: "object", properties: { a: { type: "boolean" } }, required: ["a"], additionalProperties: false };
    const bodies = [{ response_format: { type: "json_object", schema } }, { json_schema: schema }];
    for (const extra of bodies) {
      for (const [route, ask] of [["chat/completions", { messages: base.messages }], ["completions", { prompt: "Once upon a time" }]] as const) {
        const r = await post(`${s.url}/v1/${route}`, { ...ask, ...extra, max_tokens: 40, temperature: 0 });
        assert.equal(r.status, 200, JSON.stringify(r.json));
        const c = r.json.choices[0];
        const text: string = c.message?.content ?? c.text;
        assert.equal(c.finish_reason, "stop", `${route} ${JSON.stringify(extra).slice(0, 40)}: ${text}`);
        assert.deepEqual(Object.keys(JSON.parse(text) as object), ["a"], text);
      }
    }
    // two constraints in one request: which one holds would be this server's guess
    for (const [extra, param] of [[{ json_schema: schema, grammar: "root ::= \"x\"" }, "json_schema"], [{ json_schema: schema, response_format: { type: "json_object" } }, "json_schema"], [{ response_format: { type: "json_object", schema: [] } }, "response_format.schema"], [{ json_schema: "{}" }, "json_schema"]] as const) {
      const r = await post(`${s.url}/v1/chat/completions`, { messages: base.messages, ...extra, max_tokens: 4 });
      assert.equal(r.status, 400, JSON.stringify(extra));
      assert.equal(r.json.error.param, param, r.json.error.message);
    }
    // a fault of the schema names the field it came in, down to its spot, on both routes
    const unheld = { type: "array", uniqueItems: true };
    for (const [extra, param] of [[{ json_schema: unheld }, "json_schema.uniqueItems"], [{ response_format: { type: "json_object", schema: unheld } }, "response_format.schema.uniqueItems"]] as const) {
      for (const ask of [{ messages: base.messages }, { prompt: "Once" }]) {
        const r = await post(`${s.url}/v1/${"prompt" in ask ? "completions" : "chat/completions"}`, { ...ask, ...extra, max_tokens: 4 });
        assert.equal(r.status, 400, JSON.stringify(r.json));
        assert.equal(r.json.error.param, param, r.json.error.message);
      }
    }
  });

  test("/v1/completions takes llama-server's mixed prompts: ids and strings in one list are one prompt, a list of prompts may mix strings, id lists and mixed lists", async () => {
    // the judge: llama-server's tokenize_input_prompts / tokenize_mixed: each string tokenized in
    // its place, BOS only where a string opens the list; the answer equals the same ids sent as ids
    const tok = s.model.tokenizer;
    const once = tok.encode("Once upon", { addSpecialTokens: true });
    const time = tok.encode(" a time", { addSpecialTokens: false });
    const greedy = async (prompt: unknown) => {
      const r = await post(`${s.url}/v1/completions`, { prompt, max_tokens: 6, temperature: 0, echo: true });
      assert.equal(r.status, 200, JSON.stringify(r.json));
      return { texts: (r.json.choices as { text: string }[]).map((c) => c.text), tokens: r.json.usage.prompt_tokens as number };
    };
    const ids = await greedy([...once, ...time]);
    assert.deepEqual(await greedy(["Once upon", ...time]), ids);
    assert.deepEqual(await greedy([...once, " a time"]), ids);
    const several = await greedy(["Once upon a time", [...once, " a time"], [...once, ...time]]);
    assert.equal(several.texts.length, 3);
    assert.deepEqual(several.texts.slice(1), [ids.texts[0], ids.texts[0]]);
    // still refused: a list of lists of strings alone, an id out of the vocabulary among strings
    for (const [prompt, param] of [[[["Once", "upon"]], "prompt[0]"], [["Once", 1e6], "prompt"]] as const) {
      const r = await post(`${s.url}/v1/completions`, { prompt, max_tokens: 2 });
      assert.equal(r.status, 400, JSON.stringify(prompt));
      assert.equal(r.json.error.param, param);
    }
  });

  test("/v1/completions takes llama-server's prompt objects {prompt_string}, alone or in a list of prompts; multimodal_data (even empty) is a 400 naming it", async () => {
    // the judge: llama-server's tokenize_input_subprompt (tools/server/server-common.cpp): an
    // object's prompt_string is read as a prompt (a string, or ids and strings as tokenize_mixed
    // reads them); with multimodal_data and no projector it refuses the request
    const tok = s.model.tokenizer;
    const once = tok.encode("Once upon", { addSpecialTokens: true });
    const greedy = async (prompt: unknown) => {
      const r = await post(`${s.url}/v1/completions`, { prompt, max_tokens: 6, temperature: 0, echo: true });
      assert.equal(r.status, 200, JSON.stringify(r.json));
      return { texts: (r.json.choices as { text: string }[]).map((c) => c.text), tokens: r.json.usage.prompt_tokens as number };
    };
    const plain = await greedy("Once upon a time");
    assert.deepEqual(await greedy({ prompt_string: "Once upon a time" }), plain);
    const ids = await greedy([...once, " a time"]);
    const several = await greedy([{ prompt_string: "Once upon a time" }, "Once upon a time", { prompt_string: [...once, " a time"] }]);
    assert.deepEqual(several.texts, [plain.texts[0], plain.texts[0], ids.texts[0]]);
    // the openai client sends it as given
    const r = await client.completions.create({ model: "stories260K", prompt: { prompt_string: "Once upon a time" } as unknown as string, max_tokens: 6, temperature: 0, echo: true });
    assert.equal(r.choices[0]!.text, plain.texts[0]);
    for (const [prompt, param, re] of [
      [{ prompt_string: "Once", multimodal_data: ["aGVsbG8="] }, "prompt.multimodal_data", /'prompt.multimodal_data' cannot be read: this server reads text only/],
      // the key itself, as llama-server refuses it on a model without multimodal support (json_prompt.contains): an empty list too, and null
      [{ prompt_string: "Once", multimodal_data: [] }, "prompt.multimodal_data", /this model has no multimodal support \(send the prompt_string alone, without the key\)$/],
      [[{ prompt_string: "Once", multimodal_data: null }], "prompt[0].multimodal_data", /'prompt\[0\].multimodal_data' cannot be read/],
      [["Once", { prompt_string: "upon", multimodal_data: ["aGVsbG8="] }], "prompt[1].multimodal_data", /'prompt\[1\].multimodal_data' cannot be read/],
      [{}, "prompt.prompt_string", /'prompt.prompt_string' must be a string or a non-empty array of token ids and strings, got none/],
      [[{ prompt_string: 5 }], "prompt[0].prompt_string", /got number/],
      [{ prompt_string: [1e6] }, "prompt.prompt_string", / prompt\.prompt_string\[0\] is 1000000: token ids are integers in \[0, 512\)$/],
      [["Once", [5, "upon", -1]], "prompt[1]", / prompt\[1\]\[2\] is -1: token ids are integers in \[0, 512\)$/],
      [["Once", []], "prompt[1]", / prompt\[1\] is an empty array/],
      // a value quoted in the message is cut short: a megabyte sent is not sent back
      [[5, ["x".repeat(100_000)]], "prompt", / prompt\[1\] is \["x{38}\.\.\.: token ids are integers in \[0, 512\)$/],
    ] as const) {
      const bad = await refusal(client.completions.create({ model: "stories260K", prompt: prompt as unknown as string, max_tokens: 2 }));
      assert.equal(bad.param, param, bad.message);
      assert.match(bad.message, re);
    }
  });

  test("a prompt that fills the context with no token limit: the server's own 400 naming the prompt's tokens, n_ctx and the token limit's field (it was the engine's words)", async () => {
    // the judge: OpenAI's context_length_exceeded ("This model's maximum context length is N
    // tokens. However, ..."), as this server's other refusal of a prompt too long words it;
    // llama-server refuses such a prompt too (exceed_context_size_error, with n_prompt_tokens and n_ctx)
    const engineWords = /leaves no room for a token to generate|contextSize or a shorter prompt/;
    const full = Array.from({ length: 512 }, (_, i) => 100 + (i % 50));
    for (const [body, name] of [[{ prompt: full }, "max_tokens"], [{ prompt: full, n_predict: -1 }, "n_predict"], [{ prompt: full, max_tokens: null }, "max_tokens"]] as const) {
      const r = await post(`${s.url}/v1/completions`, body);
      assert.equal(r.status, 400, JSON.stringify(r.json));
      assert.deepEqual([r.json.error.param, r.json.error.code, r.json.error.type], ["prompt", "context_length_exceeded", "invalid_request_error"]);
      assert.doesNotMatch(r.json.error.message, engineWords);
      assert.equal(r.json.error.message, "This model's maximum context length is 512 tokens (n_ctx in GET /v1/models). However, your prompt resulted in 512 tokens, which leaves no room for the completion " +
        `(with no limit set by ${name} the completion runs to the end of the context, and needs at least 1 token). Please reduce the length of the prompt, or start the server with a larger contextSize.`);
    }
    // one token less leaves room for one
    const one = await post(`${s.url}/v1/completions`, { prompt: full.slice(1), temperature: 0 });
    assert.equal(one.status, 200, JSON.stringify(one.json));
    assert.equal(one.json.usage.completion_tokens, 1);
    // a chat's, through the openai client: names messages
    const chat = await refusal(client.chat.completions.create({ model: "stories260K", messages: [{ role: "user", content: "Once upon a time ".repeat(200) }] }));
    assert.equal(chat.param, "messages");
    assert.equal(chat.code, "context_length_exceeded");
    assert.match(chat.message, /^400 This model's maximum context length is 512 tokens \(n_ctx in GET \/v1\/models\)\. However, your messages resulted in \d+ tokens, more than the context holds .*Please reduce the length of the messages/);
  });

  test("llama-server's samplers this server lacks (mirostat, DRY, XTC, dynamic temperature, top-n-sigma), its LoRA scales, and OpenAI's audio / web search outputs: a 400 naming the field when asked for, taken when off (they were ignored, the reply made without them)", async () => {
    // the judge: llama-server's params_from_json_cmpl reads each of these (0 = disabled, top_n_sigma
    // at or below 0 off; llama.cpp's web UI sends them all, off); OpenAI's modalities ["text", "audio"]
    // asks for a spoken reply, web_search_options for a search model
    const greedy = { model: "stories260K", prompt: "Once upon a time", max_tokens: 5, temperature: 0 };
    const plain = await client.completions.create(greedy);
    const off = { mirostat: 0, dry_multiplier: 0, xtc_probability: 0, dynatemp_range: 0, top_n_sigma: -1, t_max_predict_ms: 0, mirostat_tau: 5, dry_base: 1.75, xtc_threshold: 0.1 };
    const same = await client.completions.create({ ...greedy, ...off, lora: [] } as unknown as OpenAI.CompletionCreateParamsNonStreaming);
    assert.equal(same.choices[0]!.text, plain.choices[0]!.text);
    const text = await client.chat.completions.create({ ...base, max_tokens: 2, modalities: ["text"] });
    assert.equal(text.choices[0]!.finish_reason, "length");
    for (const [extra, param, re] of [
      [{ mirostat: 2 }, "mirostat", /^400 'mirostat' 2 asks for a sampler this server does not implement: leave it out, or send 0 \(off\)$/],
      [{ dry_multiplier: 0.8 }, "dry_multiplier", /'dry_multiplier' 0\.8 asks for a sampler/],
      [{ xtc_probability: 0.5 }, "xtc_probability", /'xtc_probability' 0\.5/],
      [{ dynatemp_range: 0.5 }, "dynatemp_range", /'dynatemp_range' 0\.5/],
      [{ top_n_sigma: 1 }, "top_n_sigma", /send -1 \(or any value at or below 0\) \(off\)$/],
      [{ modalities: ["text", "audio"] }, "modalities", /'modalities' may hold only "text": this server answers text, not "audio"$/],
      [{ web_search_options: {} }, "web_search_options", /'web_search_options' is not supported by this server$/],
      // llama-server's per-request LoRA scales: no adapter is loaded, so every id is unknown (its parse_lora_request: "invalid adapter id")
      [{ lora: [{ id: 0, scale: 0.5 }] }, "lora[0].id", /'lora\[0\]\.id' 0 names no adapter: this server loads no LoRA adapters/],
    ] as const) {
      const r = await refusal(client.chat.completions.create({ ...base, max_tokens: 2, ...extra } as unknown as OpenAI.ChatCompletionCreateParamsNonStreaming));
      assert.equal(r.param, param, r.message);
      assert.equal(r.code, param === "lora[0].id" ? "invalid_value" : "unsupported_parameter");
      assert.match(r.message, re);
    }
    const typed = await post(`${s.url}/v1/completions`, { prompt: "Once", mirostat: "2" });
    assert.deepEqual([typed.status, typed.json.error.param, typed.json.error.code], [400, "mirostat", "invalid_type"]);
    // OpenAI's service_tier: any tier is answered by this one server, a value of the wrong type is a 400 (it was taken)
    const tier = await post(`${s.url}/v1/chat/completions`, { ...base, max_tokens: 1, service_tier: 5 });
    assert.deepEqual([tier.status, tier.json.error.param, tier.json.error.code], [400, "service_tier", "invalid_type"]);
    assert.equal((await client.chat.completions.create({ ...base, max_tokens: 1, service_tier: "auto" })).choices.length, 1);
  });

  test("POST /tokenize takes llama-server's mixed content (token ids and texts in one list): the ids kept, each text tokenized in its place, BOS only where a text opens the list", async () => {
    // the judge: llama-server's handle_tokenize reads content with tokenize_mixed (add_special for
    // a first element that is a text only; parse_special for every text); it was a 400 here
    const tok = s.model.tokenizer;
    const bos = tok.encode("Once", { addSpecialTokens: true })[0]!;
    const plain = (text: string) => tok.encode(text, { addSpecialTokens: false });
    const ask = async (body: unknown) => {
      const r = await post(`${s.url}/tokenize`, body);
      assert.equal(r.status, 200, JSON.stringify(r.json));
      return r.json.tokens;
    };
    assert.deepEqual(await ask({ content: [5, "Once upon"], add_special: true }), [5, ...plain("Once upon")]);
    assert.deepEqual(await ask({ content: ["Once", 42, " upon"], add_special: true }), [bos, ...plain("Once"), 42, ...plain(" upon")]);
    assert.deepEqual(await ask({ content: ["Once", 42] }), [...plain("Once"), 42]);
    assert.deepEqual(await ask({ content: [7, 8] }), [7, 8]);
    assert.deepEqual((await ask({ content: [42, "Once"], with_pieces: true })).map((p: { id: number }) => p.id), [42, ...plain("Once")]);
    for (const [content, code, re] of [[[5, 1e6], "invalid_value", /^content\[1\] is 1000000: token ids are integers in \[0, 512\)$/], [{ a: 1 }, "invalid_type", /^'content' must be a string, or a list of token ids and strings/], [[["x"]], "invalid_type", /'content' must be/]] as const) {
      const r = await post(`${s.url}/tokenize`, { content });
      assert.equal(r.status, 400, JSON.stringify(content));
      assert.deepEqual([r.json.error.param, r.json.error.code], ["content", code]);
      assert.match(r.json.error.message, re);
    }
  });

  test("logprobs: the sampled token's entry in top_logprobs is keyed as `tokens` shows it (a text's first word without its space, a character's first byte token \"\"), so lm-evaluation-harness's is_greedy holds for a greedy reply", async () => {
    // the judge: OpenAI's legacy completions (top_logprobs hold the sampled token; lm-evaluation-harness's
    // is_greedy compares tokens[i] with top_logprobs[i]'s best key); they disagreed where a token's
    // text as shown is not its own text
    const tok = s.model.tokenizer;
    const keyed = (lp: { tokens: string[]; token_logprobs: (number | null)[]; top_logprobs: (Record<string, number> | null)[] }, from: number) => {
      for (let i = from; i < lp.tokens.length; i++) assert.equal(lp.top_logprobs[i]![lp.tokens[i]!], lp.token_logprobs[i], `token ${i} ${JSON.stringify(lp.tokens[i])} in ${JSON.stringify(lp.top_logprobs[i])}`);
    };
    // a reply from BOS alone: its first word shows without its leading space
    const first = await client.completions.create({ model: "stories260K", prompt: "", max_tokens: 4, temperature: 0, logprobs: 2 });
    const lp = first.choices[0]!.logprobs! as unknown as Parameters<typeof keyed>[0];
    assert.ok(!lp.tokens[0]!.startsWith(" "), JSON.stringify(lp.tokens));
    keyed(lp, 0);
    lp.tokens.forEach((t, i) => {
      const top = lp.top_logprobs[i]!;
      assert.equal(Object.keys(top).reduce((a, b) => (top[a]! >= top[b]! ? a : b)), t, "greedy: the best key is the token");
    });
    // an echoed prompt: every token after the first
    const echoed = await client.completions.create({ model: "stories260K", prompt: "Once upon a time", max_tokens: 2, temperature: 0, logprobs: 1, echo: true });
    keyed(echoed.choices[0]!.logprobs! as unknown as Parameters<typeof keyed>[0], 1);
    // byte tokens making up a character (stories260K spells CJK with <0xNN>; a grammar writes them): the first ones show ""
    assert.equal(tok.encode("日本", { addSpecialTokens: false }).filter((id) => /^<0x[0-9A-F]{2}>$/.test(tok.piece(id))).length, 6, "CJK is spelled in byte tokens");
    const grammar = 'root ::= "日本"';
    const bytes = await client.completions.create({ model: "stories260K", prompt: "Lily", max_tokens: 8, temperature: 0, logprobs: 2, grammar } as unknown as OpenAI.CompletionCreateParamsNonStreaming);
    assert.equal(bytes.choices[0]!.text, "日本");
    const blp = bytes.choices[0]!.logprobs! as unknown as Parameters<typeof keyed>[0];
    assert.deepEqual(blp.tokens.slice(0, 6), ["", "", "日", "", "", "本"]); // (then the end token, listed last)
    keyed(blp, 0);
    // chat: the sampled token's alternative entry has the token's text
    const chat = await client.chat.completions.create({ ...base, max_tokens: 8, temperature: 0, logprobs: true, top_logprobs: 2, grammar } as unknown as OpenAI.ChatCompletionCreateParamsNonStreaming);
    assert.equal(chat.choices[0]!.message.content, "日本");
    for (const e of chat.choices[0]!.logprobs!.content!) assert.ok(e.top_logprobs.some((t) => t.token === e.token && t.logprob === e.logprob), JSON.stringify(e));
  });

  test("content parts as OpenAI's client sends a conversation back: an assistant's refusal part, input_text / output_text, read as their text, as vLLM reads them", async () => {
    // the judge: OpenAI's reference (an assistant message's content: text or refusal parts) and
    // vLLM's content-part parser (text, input_text, output_text and refusal are text); the prompt
    // equals the one with the same words as strings
    const ask = async (messages: unknown) => {
      const r = await post(`${s.url}/v1/chat/completions`, { messages, max_tokens: 6, temperature: 0 });
      assert.equal(r.status, 200, JSON.stringify(r.json));
      return [r.json.usage.prompt_tokens, r.json.choices[0].message.content];
    };
    const want = await ask([{ role: "user", content: "Once upon" }, { role: "assistant", content: "I cannot." }, { role: "user", content: "a time" }]);
    assert.deepEqual(await ask([
      { role: "user", content: [{ type: "input_text", text: "Once upon" }] },
      { role: "assistant", content: [{ type: "refusal", refusal: "I cannot." }] },
      { role: "user", content: [{ type: "text", text: "a time" }] },
    ]), want);
    assert.deepEqual(await ask([{ role: "user", content: "Once upon" }, { role: "assistant", content: [{ type: "output_text", text: "I cannot." }] }, { role: "user", content: "a time" }]), want);
    // a message's name (OpenAI's participant name) is a string on every role
    const named = await post(`${s.url}/v1/chat/completions`, { messages: [{ role: "user", content: "x", name: 5 }], max_tokens: 2 });
    assert.equal(named.status, 400);
    assert.equal(named.json.error.param, "messages[0].name");
    assert.equal((await post(`${s.url}/v1/chat/completions`, { messages: [{ role: "user", content: "x", name: "bob" }], max_tokens: 2 })).status, 200);
    // a part of a known type without its string is still the request's fault, named
    const bad = await post(`${s.url}/v1/chat/completions`, { messages: [{ role: "user", content: "x" }, { role: "assistant", content: [{ type: "refusal", text: "no" }] }] });
    assert.equal(bad.status, 400);
    assert.equal(bad.json.error.param, "messages[1].content[0]");
    assert.match(bad.json.error.message, /without its 'refusal' string/);
  });

  test("a schema fault names its exact spot in param: response_format's schema and a strict function's parameters", async () => {
    const obj = (properties: Record<string, object>) => ({ type: "object", properties, required: Object.keys(properties), additionalProperties: false });
    const format = (schema: object, strict?: boolean) => ({ type: "json_schema", json_schema: { name: "x", schema, ...(strict ? { strict } : {}) } }) as OpenAI.ResponseFormatJSONSchema;
    const cases: [OpenAI.ResponseFormatJSONSchema, string, RegExp][] = [
      // strict: OpenAI's strict rules
      [format(obj({ a: { type: "object", properties: { b: { type: "string" } } } }), true), "response_format.json_schema.schema.properties.a", /#\/properties\/a: 'additionalProperties' is required/],
      [format(obj({ a: { anyOf: [{ type: "null" }, { type: "string", not: { const: "x" } }] } }), true), "response_format.json_schema.schema.properties.a.anyOf[1].not", /'not' is not supported/],
      [format(obj({ a: { oneOf: [{ type: "integer" }] } }), true), "response_format.json_schema.schema.properties.a.oneOf", /oneOf is not supported/],
      // a schema the grammar cannot hold, strict or not
      [format({ type: "object", properties: { a: { type: "wizard" } } }), "response_format.json_schema.schema.properties.a.type", /#\/properties\/a\/type: expected one of/],
      [format({ type: "array", items: [{ type: "string" }, { type: "string", pattern: "(" }] }), "response_format.json_schema.schema.items[1].pattern", /#\/items\/1\/pattern/],
    ];
    for (const [response_format, param, message] of cases) {
      const r = await refusal(client.chat.completions.create({ ...base, max_completion_tokens: 4, response_format }));
      assert.equal(r.param, param, r.message);
      assert.match(r.message, message);
    }
    // a text completion's response_format, refused where the engine compiles it
    const text = await post(`${s.url}/v1/completions`, { prompt: "x", max_tokens: 2, response_format: format({ type: "object", properties: { a: { type: "array", uniqueItems: true } } }) });
    assert.equal(text.status, 400, JSON.stringify(text.json));
    assert.equal(text.json.error.param, "response_format.json_schema.schema.properties.a.uniqueItems");
    // a strict function's parameters, named under tools[i].function.parameters
    const strictTool = (parameters: object): OpenAI.ChatCompletionTool => ({ type: "function", function: { name: "f", strict: true, parameters: parameters as OpenAI.FunctionParameters } });
    const f = await refusal(client.chat.completions.create({ ...base, tools: [strictTool(obj({})), strictTool(obj({ a: { type: "object", properties: {} } }))] }));
    assert.equal(f.param, "tools[1].function.parameters.properties.a");
    assert.equal(f.code, "invalid_function_parameters");
    const g = await refusal(client.chat.completions.create({ ...base, tools: [strictTool(obj({ a: { type: "string", pattern: "(" } }))] }));
    assert.equal(g.param, "tools[0].function.parameters.properties.a.pattern", g.message);
    // a fault of the whole schema names the schema
    const whole = await refusal(client.chat.completions.create({ ...base, response_format: format({ type: "array" }, true) }));
    assert.equal(whole.param, "response_format.json_schema.schema.type");
  });

  test("/v1/completions takes logprobs: true as llama-server reads it, 1 alternative per token; false as no logprobs", async () => {
    // OpenAI's completions API takes a count; llama-server converts a boolean to its count (true: n_probs 1, false: 0, none)
    const request = { model: "stories260K", prompt: "Once upon a time", max_tokens: 6, temperature: 0 };
    const one = await client.completions.create({ ...request, logprobs: 1 });
    const flag = await client.completions.create({ ...request, logprobs: true as unknown as number });
    const lp = flag.choices[0]!.logprobs!;
    assert.equal(lp.tokens!.length, 6);
    for (const top of lp.top_logprobs!) assert.equal(Object.keys(top).length, 1);
    assert.deepEqual(lp, one.choices[0]!.logprobs);
    const off = await client.completions.create({ ...request, logprobs: false as unknown as number });
    assert.equal(off.choices[0]!.logprobs, null);
    assert.equal(off.choices[0]!.text, one.choices[0]!.text);
    // streamed: each chunk's tokens with their one alternative
    const stream = await client.completions.create({ ...request, logprobs: true as unknown as number, stream: true });
    const tokens: string[] = [];
    for await (const chunk of stream) for (const c of chunk.choices) tokens.push(...(c.logprobs?.tokens ?? []));
    assert.deepEqual(tokens, lp.tokens);
  });

  test("logit_bias in llama-server's list form ([token id, bias] pairs; false bans) biases as OpenAI's object form does", async () => {
    // llama-server's documented form: "logit_bias": [[15043, 1.0]], and [[15043, false]] so that a token never appears
    const request = { prompt: "Once upon a time", max_tokens: 4, temperature: 0, logprobs: 1 };
    const greedy = await post(`${s.url}/v1/completions`, request);
    const first = greedy.json.choices[0].logprobs.tokens[0] as string;
    const id = (await post(`${s.url}/tokenize`, { content: first, add_special: false })).json.tokens.at(-1) as number;
    const object = await post(`${s.url}/v1/completions`, { ...request, logit_bias: { [id]: -100 } });
    assert.notEqual(object.json.choices[0].logprobs.tokens[0], first);
    for (const bias of [[[id, -100]], [[id, false]]]) {
      const list = await post(`${s.url}/v1/completions`, { ...request, logit_bias: bias });
      assert.equal(list.status, 200, JSON.stringify(list.json));
      assert.equal(list.json.choices[0].text, object.json.choices[0].text, JSON.stringify(bias));
    }
    // false in the object form too
    assert.equal((await post(`${s.url}/v1/completions`, { ...request, logit_bias: { [id]: false } })).json.choices[0].text, object.json.choices[0].text);
    const bad = await post(`${s.url}/v1/completions`, { ...request, logit_bias: [[id]] });
    assert.equal(bad.status, 400);
    assert.equal(bad.json.error.param, "logit_bias");
    assert.match(bad.json.error.message, /\[token id or text, bias\] pairs/);
  });

  test("logit_bias keyed by token text, as llama-server takes it: each of the text's tokens biased, in the list and the object form", async () => {
    // llama-server's README: "logit_bias": [["Hello, World!", -0.5]] biases every token of the string; its
    // params_from_json_cmpl tokenizes a list entry's string and an object key that is not a number (no BOS)
    const request = { prompt: "Once upon a time", max_tokens: 4, temperature: 0, logprobs: 1 };
    const greedy = await post(`${s.url}/v1/completions`, request);
    // the first two tokens' text: more than one token, so each must be biased
    const text = (greedy.json.choices[0].logprobs.tokens as string[]).slice(0, 2).join("");
    const ids = (await post(`${s.url}/tokenize`, { content: text, add_special: false })).json.tokens as number[];
    assert.ok(ids.length >= 2, JSON.stringify(ids));
    const byIds = await post(`${s.url}/v1/completions`, { ...request, logit_bias: Object.fromEntries(ids.map((id) => [id, -100])) });
    assert.equal(byIds.status, 200, JSON.stringify(byIds.json));
    assert.notEqual(byIds.json.choices[0].text, greedy.json.choices[0].text);
    for (const bias of [[[text, -100]], { [text]: -100 }]) {
      const r = await post(`${s.url}/v1/completions`, { ...request, logit_bias: bias });
      assert.equal(r.status, 200, JSON.stringify(r.json));
      assert.equal(r.json.choices[0].text, byIds.json.choices[0].text, JSON.stringify(bias));
    }
    // false bans each of them, as with ids
    const banned = await post(`${s.url}/v1/completions`, { ...request, logit_bias: Object.fromEntries(ids.map((id) => [id, false])) });
    assert.equal((await post(`${s.url}/v1/completions`, { ...request, logit_bias: [[text, false]] })).json.choices[0].text, banned.json.choices[0].text);
    // with the openai client's object form
    const c = await client.completions.create({ model: "stories260K", prompt: "Once upon a time", max_tokens: 4, temperature: 0, logit_bias: { [text]: -100 } });
    assert.equal(c.choices[0]!.text, byIds.json.choices[0].text);
  });

  test("/v1/completions' top_logprobs hold the chosen token too, up to logprobs+1 entries, as OpenAI documents and vLLM answers: sampled tokens, logprobs 0, an echoed prompt", async () => {
    // the judge: OpenAI's completions reference ("The API will always return the logprob of the
    // sampled token, so there may be up to logprobs+1 elements in the response") and vLLM's
    // completions, whose top_logprobs hold the chosen token beside the top ones
    for (const logprobs of [0, 1]) {
      const r = await post(`${s.url}/v1/completions`, { prompt: "Lily", max_tokens: 24, temperature: 1.5, seed: 5, logprobs, echo: true });
      assert.equal(r.status, 200, JSON.stringify(r.json));
      const lp = r.json.choices[0].logprobs as { token_logprobs: (number | null)[]; top_logprobs: (Record<string, number> | null)[] };
      let outside = 0;
      lp.top_logprobs.forEach((top, j) => {
        if (top === null) return;
        assert.ok(Object.keys(top).length >= 1 && Object.keys(top).length <= logprobs + 1, JSON.stringify(top));
        // the chosen token's logprob is among them
        assert.ok(Object.values(top).includes(lp.token_logprobs[j]!), `position ${j}: ${JSON.stringify(top)} lacks ${lp.token_logprobs[j]}`);
        if (Object.keys(top).length > logprobs) outside++;
      });
      // (at temperature 1.5 some chosen tokens are not the most likely: the case that lost them)
      assert.ok(outside > 0, `logprobs ${logprobs}: no token outside the top`);
    }
  });

  test("/v1/completions reads llama-server's n_probs as the number of alternatives per token, over logprobs", async () => {
    // llama-server's params_from_json_cmpl: n_probs is the count; logprobs is read only while n_probs is 0
    const request = { model: "stories260K", prompt: "Once upon a time", max_tokens: 5, temperature: 0 };
    const three = await client.completions.create({ ...request, logprobs: 3 });
    for (const extra of [{ n_probs: 3 }, { n_probs: 3, logprobs: 1 }, { n_probs: 0, logprobs: 3 }]) {
      const r = await client.completions.create({ ...request, ...extra } as unknown as OpenAI.CompletionCreateParamsNonStreaming);
      assert.deepEqual(r.choices[0]!.logprobs, three.choices[0]!.logprobs, JSON.stringify(extra));
      for (const top of r.choices[0]!.logprobs!.top_logprobs!) assert.equal(Object.keys(top).length, 3);
    }
    const none = await client.completions.create({ ...request, n_probs: 0 } as unknown as OpenAI.CompletionCreateParamsNonStreaming);
    assert.equal(none.choices[0]!.logprobs, null);
    const bad = await post(`${s.url}/v1/completions`, { ...request, n_probs: 21 });
    assert.equal(bad.status, 400);
    assert.equal(bad.json.error.param, "n_probs");
  });

  test("/v1/chat/completions reads llama-server's n_probs: logprobs.content with n_probs alternatives per token, top_logprobs over it", async () => {
    // llama-server's oaicompat_chat_params_parse: logprobs true sets n_probs to top_logprobs; else the body's own n_probs
    // is copied through, and its params_from_json_cmpl reports that many alternatives per token (0: none)
    const request = { ...base, max_tokens: 5, temperature: 0 };
    const three = await client.chat.completions.create({ ...request, logprobs: true, top_logprobs: 3 });
    assert.equal(three.choices[0]!.logprobs!.content!.length, 5);
    const asked = (extra: object) => client.chat.completions.create({ ...request, ...extra } as unknown as OpenAI.ChatCompletionCreateParamsNonStreaming);
    // (logprobs true without top_logprobs: n_probs stands in for it; llama-server's own default there is 20, OpenAI's 0)
    for (const extra of [{ n_probs: 3 }, { n_probs: 3, logprobs: false }, { n_probs: 3, logprobs: true }]) {
      const r = await asked(extra);
      assert.deepEqual(r.choices[0]!.logprobs, three.choices[0]!.logprobs, JSON.stringify(extra));
      for (const e of r.choices[0]!.logprobs!.content!) assert.equal(e.top_logprobs.length, 3);
    }
    // top_logprobs, where given, is the count
    const one = await asked({ logprobs: true, top_logprobs: 1, n_probs: 3 });
    for (const e of one.choices[0]!.logprobs!.content!) assert.equal(e.top_logprobs.length, 1);
    assert.equal((await asked({ n_probs: 0 })).choices[0]!.logprobs, null);
    // streamed: each delta's tokens come with it
    const chunks = await client.chat.completions.create({ ...request, stream: true, n_probs: 3 } as unknown as OpenAI.ChatCompletionCreateParamsStreaming);
    const streamed: unknown[] = [];
    for await (const c of chunks) streamed.push(...(c.choices[0]?.logprobs?.content ?? []));
    assert.deepEqual(streamed, three.choices[0]!.logprobs!.content);
    const bad = await post(`${s.url}/v1/chat/completions`, { ...request, n_probs: 21 });
    assert.equal(bad.status, 400);
    assert.equal(bad.json.error.param, "n_probs");
  });

  test("max_tokens -1 is llama-server's no limit: the reply runs as one given no limit, to the end of the context", async () => {
    // llama-server: n_predict (max_tokens, max_completion_tokens) -1 is its default, "-1 is infinity" (server_slot::has_budget)
    const chat = { ...base, temperature: 0, ignore_eos: true };
    const text = { model: "stories260K", prompt: "Once upon a time", temperature: 0, ignore_eos: true };
    const unlimitedChat = await client.chat.completions.create(chat as unknown as OpenAI.ChatCompletionCreateParamsNonStreaming);
    const unlimitedText = await client.completions.create(text as unknown as OpenAI.CompletionCreateParamsNonStreaming);
    // to the end of the context (512 here; vLLM's default max_tokens is max_model_len less the prompt), each of n choices
    assert.equal(unlimitedChat.choices[0]!.finish_reason, "length");
    assert.equal(unlimitedChat.usage!.total_tokens, s.model.contextSize);
    assert.equal(unlimitedText.usage!.total_tokens, s.model.contextSize);
    const long = Array.from({ length: 470 }, (_, i) => 1 + (i % 400));
    const two = await post(`${s.url}/v1/completions`, { prompt: long, max_tokens: -1, n: 2, temperature: 0, ignore_eos: true });
    assert.deepEqual(two.json.choices.map((c: { finish_reason: string }) => c.finish_reason), ["length", "length"]);
    assert.equal(two.json.usage.completion_tokens, 2 * (s.model.contextSize - 470));
    for (const limit of [{ max_tokens: -1 }, { max_completion_tokens: -1 }]) {
      const c = await client.chat.completions.create({ ...chat, ...limit } as unknown as OpenAI.ChatCompletionCreateParamsNonStreaming);
      assert.equal(c.choices[0]!.message.content, unlimitedChat.choices[0]!.message.content, JSON.stringify(limit));
      // (the prompt's cached tokens depend on what ran before: the counts are what must agree)
      assert.deepEqual([c.usage!.prompt_tokens, c.usage!.completion_tokens], [unlimitedChat.usage!.prompt_tokens, unlimitedChat.usage!.completion_tokens]);
      const t = await client.completions.create({ ...text, ...limit } as unknown as OpenAI.CompletionCreateParamsNonStreaming);
      assert.equal(t.choices[0]!.text, unlimitedText.choices[0]!.text, JSON.stringify(limit));
      assert.deepEqual([t.usage!.prompt_tokens, t.usage!.completion_tokens], [unlimitedText.usage!.prompt_tokens, unlimitedText.usage!.completion_tokens]);
    }
    // another negative is no limit llama-server knows (its has_budget stops at once): still the request's 400
    const bad = await post(`${s.url}/v1/chat/completions`, { ...chat, max_tokens: -2 });
    assert.equal(bad.status, 400);
    assert.equal(bad.json.error.param, "max_tokens");
    // (and says what it may be)
    assert.equal(bad.json.error.message, "'max_tokens' must be -1 (no limit: up to the end of the context) or an integer in 1..inf, got -2");
  });

  test("a body nested past 256 levels names the path to where the depth ran out, not only its top key", async () => {
    // body 1, messages 2, messages[0] 3, content 4, content[0] 5, then 253 levels of lists: the last of them opens level 257
    const deep = `{"max_tokens":2,"messages":[{"role":"user","content":[{"type":"text","text":"a","x":${"[".repeat(253)}1${"]".repeat(253)}}]}]}`;
    const r = await post(`${s.url}/v1/chat/completions`, deep);
    assert.equal(r.status, 400, JSON.stringify(r.json));
    assert.equal(r.json.error.param, `messages[0].content[0].x${"[0]".repeat(252)}`);
    assert.match(r.json.error.message, /^'messages' nests deeper than the 256 levels of objects and arrays this server accepts: the value at 'messages\[0\]\.content\[0\]\.x\[0\]\[0\].*\.\.\..*\[0\]' is 257 levels down$/);
    // the same inside a tool call's arguments (a JSON string): named down to the spot inside it
    const args = `{"a":{"b c":${"[".repeat(255)}1${"]".repeat(255)}}}`;
    const messages = [{ role: "user", content: "a" }, { role: "assistant", content: null, tool_calls: [{ type: "function", function: { name: "f", arguments: args } }] }, { role: "user", content: "b" }];
    const a = await post(`${s.url}/v1/chat/completions`, { max_tokens: 2, messages });
    assert.equal(a.status, 400, JSON.stringify(a.json));
    // (the arguments' object 1, a 2, "b c" 3: the list there and 254 inside it, the last opening level 257)
    assert.equal(a.json.error.param, `messages[1].tool_calls[0].function.arguments.a.b c${"[0]".repeat(254)}`);
    assert.match(a.json.error.message, /^'messages\[1\]\.tool_calls\[0\]\.function\.arguments' nests deeper than the 256 levels of objects and arrays this server accepts: the value at 'messages\[1\]\.tool_calls\[0\]\.function\.arguments\.a\.b c\[0\].*\.\.\..*\[0\]' is 257 levels down$/);
    const fitting = args.replace("[".repeat(255), "[".repeat(254)).replace("]".repeat(255), "]".repeat(254));
    const taken = await post(`${s.url}/v1/chat/completions`, { max_tokens: 2, messages: [messages[0], { ...messages[1], tool_calls: [{ type: "function", function: { name: "f", arguments: fitting } }] }, messages[2]] });
    assert.equal(taken.status, 200, JSON.stringify(taken.json));
    // one level less is taken (the message is read, its unknown field ignored)
    const fits = deep.replace("[".repeat(253), "[".repeat(252)).replace("]".repeat(253), "]".repeat(252));
    const ok = await post(`${s.url}/v1/chat/completions`, fits);
    assert.equal(ok.status, 200, JSON.stringify(ok.json));
    // keys and list indexes on the way: the second message, a key with a quote in it, its list's third
    // element (level 5), then objects in "a": the one at level 258 is 253 "a"s below it
    const second = `{"messages":[{"role":"user","content":"a"},{"role":"user","content":"b","k\\"]":[0,[1],${"{\"a\":".repeat(256)}`;
    const q = await post(`${s.url}/v1/chat/completions`, second);
    assert.equal(q.json.error.param, `messages[1].k"][2]${".a".repeat(253)}`);
  });
});

describe("a token limit the KV cache cannot hold, on stories260K with a 48-token KV cache", { skip }, () => {
  let s: Awaited<ReturnType<typeof serveStories>>;
  before(async () => {
    s = await serveStories({ kvCacheBytes: 64 * 1024 });
  });
  after(() => s?.close());

  test("the 400 names the limit by the name the request gave it: max_completion_tokens or max_tokens", async () => {
    const client = new OpenAI({ baseURL: `${s.url}/v1`, apiKey: "none", maxRetries: 0 });
    const messages = [{ role: "user" as const, content: "hi" }];
    for (const name of ["max_completion_tokens", "max_tokens"] as const) {
      const e = await client.chat.completions.create({ model: "stories260K", messages, [name]: 400 }).then(() => assert.fail("expected a 400"), (e: unknown) => e);
      assert.ok(e instanceof OpenAI.BadRequestError, String(e));
      assert.equal(e.param, name);
      assert.equal(e.code, "context_length_exceeded");
      assert.match(e.message, /needs room for up to \d+ tokens of KV cache/);
    }
    const text = await post(`${s.url}/v1/completions`, { prompt: "Once", max_completion_tokens: 400 });
    assert.equal(text.status, 400);
    assert.equal(text.json.error.param, "max_completion_tokens");
  });

  test("a prompt the KV cache cannot hold, with no token limit: a 400 naming the prompt, not a max_tokens the request did not send", async () => {
    // the server picks the limit where none is given (what the context and the KV cache leave, at
    // least a token); the engine's refusal of it named max_tokens and told the client to lower it
    const long = Array.from({ length: 100 }, () => 100);
    const r = await post(`${s.url}/v1/completions`, { prompt: long });
    assert.equal(r.status, 400);
    assert.deepEqual([r.json.error.param, r.json.error.code], ["prompt", "context_length_exceeded"]);
    assert.match(r.json.error.message, /^the request needs room for up to \d+ tokens of KV cache \(prompt 100 \+ a completion of 1\) but the KV cache holds 48 tokens \(\d+ bytes\); shorten the prompt, or start the server with a larger kvCacheBytes$/);
    const wide = await post(`${s.url}/v1/chat/completions`, { messages: [{ role: "user", content: "Once upon a time there was" }], n: 3 });
    assert.deepEqual([wide.status, wide.json.error.param], [400, "messages"]);
    assert.match(wide.json.error.message, /, 3 choices\) .*; shorten the messages or ask for fewer choices, or start the server with a larger kvCacheBytes$/);
    assert.doesNotMatch(`${r.json.error.message} ${wide.json.error.message}`, /max_tokens|maxTokens/);
    // with a limit given, the limit is still what it names
    const given = await post(`${s.url}/v1/completions`, { prompt: long, max_tokens: 1 });
    assert.deepEqual([given.status, given.json.error.param], [400, "max_tokens"]);
    assert.match(given.json.error.message, /\+ max_tokens 1\).*; lower max_tokens, or start the server with a larger kvCacheBytes$/);
  });

  test("the engine's refusals speak the server's words: the request's field, and the options this server was started with from the library (kvCacheBytes, contextSize), never the library's maxTokens nor serve's flags", async () => {
    const wrong = /maxTokens|--kv-memory|--ctx-size/;
    for (const name of ["max_completion_tokens", "max_tokens"]) {
      const r = await post(`${s.url}/v1/chat/completions`, { messages: [{ role: "user", content: "hi" }], [name]: 400 });
      assert.equal(r.status, 400);
      const message: string = r.json.error.message;
      assert.doesNotMatch(message, wrong);
      assert.match(message, new RegExp(`\\+ ${name} 400\\b.*; lower ${name}, or start the server with a larger kvCacheBytes$`));
    }
    // a prompt past the context with no token limit: the server's own refusal
    const long = await post(`${s.url}/v1/completions`, { prompt: "Once upon a time ".repeat(200) });
    assert.equal(long.status, 400);
    assert.equal(long.json.error.param, "prompt");
    assert.doesNotMatch(long.json.error.message, wrong);
    assert.match(long.json.error.message, /^This model's maximum context length is \d+ tokens \(n_ctx in GET \/v1\/models\)\. However, your prompt resulted in \d+ tokens, more than the context holds .*Please reduce the length of the prompt, or start the server with a larger contextSize\.$/);
    // n past the sequences run at once: the library's maxSequences
    const wide = await post(`${s.url}/v1/completions`, { prompt: "Once", n: 99, max_tokens: 1 });
    assert.equal(wide.status, 400);
    assert.match(wide.json.error.message, /sequences this server runs at once \(maxSequences\)$/);
  });
});

/** a template that writes each turn's participant name, as some do (`name` when the message has one) */
const NAMED = "{% for m in messages %}{{ m.role }}{% if m.name is defined %} ({{ m.name }}){% endif %}: {{ m.content }}\n{% endfor %}{% if add_generation_prompt %}assistant:{% endif %}";

describe("participant names on stories260K", { skip: skip || skipWithoutJinja2 }, () => {
  let s: Awaited<ReturnType<typeof serveStories>>;
  before(async () => (s = await serveStories({}, { chatTemplate: NAMED })));
  after(() => s?.close());

  test("a message's name reaches the chat template on every role, as llama.cpp hands it over (an empty one left out)", async () => {
    // the judge: Python's jinja2 rendering the template with the messages as llama.cpp builds them
    // for it (common_chat_msgs_parse_oaicompat keeps every role's name, the message handed to the
    // template holds it when not empty); the server's prompt is the library's encoding of that
    // text (its token count and the greedy reply it leads to). The names were dropped but a tool's.
    const client = new OpenAI({ baseURL: `${s.url}/v1`, apiKey: "none", maxRetries: 0 });
    const sent: OpenAI.ChatCompletionMessageParam[] = [
      { role: "system", content: "Tell a story.", name: "narrator" },
      { role: "user", content: "Once upon a time", name: "lily" },
      { role: "assistant", content: "there was a cat", name: "storyteller" },
      { role: "user", content: "and then", name: "" },
    ];
    const given: ChatMessage[] = sent.map((m) => ({ role: m.role, content: m.content as string, ...("name" in m && m.name ? { name: m.name } : {}) }));
    const [out] = renderWithJinja2(NAMED, [{ messages: given, add_generation_prompt: true }]);
    assert.ok(out && "out" in out, JSON.stringify(out));
    assert.equal(out.out, "system (narrator): Tell a story.\nuser (lily): Once upon a time\nassistant (storyteller): there was a cat\nuser: and then\nassistant:");
    const formatter = s.model.chatFormatter(NAMED);
    assert.equal(formatter.prompt(given, {}, {}), out.out);
    const tokens = formatter.encode(given, {}, {});
    const want = await s.model.generate(tokens, { maxTokens: 6, temperature: 0, stopTokens: [...formatter.endOfTurnIds] });
    const r = await client.chat.completions.create({ model: "stories260K", messages: sent, max_tokens: 6, temperature: 0 });
    assert.equal(r.usage!.prompt_tokens, tokens.length);
    assert.equal(r.choices[0]!.message.content, want.completion);
  });
  test("llama-server's `samplers` (names or letters) sets the chain's order, a sampler left out does not run; `min_keep` is heeded (both were ignored); a malformed `timings_per_token` is a 400 (true is test/server-timings-per-token.test.ts's)", async () => {
    // the judge: llama.cpp's common_sampler_init builds the chain from exactly the list
    // params_from_json_cmpl reads (common_sampler_types_from_names / _from_chars), and passes min_keep
    // to top-p, min-p and typical-p
    const once = { prompt: "Once upon a time", max_tokens: 8 };
    const text = async (extra: Record<string, unknown>) => {
      const r = await post(`${s.url}/v1/completions`, { ...once, ...extra });
      assert.equal(r.status, 200, JSON.stringify(r.json));
      return r.json.choices[0].text as string;
    };
    const greedy = await text({ temperature: 0 });
    const hot = { temperature: 2, top_k: 1, top_p: 1, min_p: 0, seed: 7 };
    // top-k 1 in the chain: the argmax, whatever the temperature; left out of it, a draw at temperature 2
    assert.equal(await text({ ...hot, samplers: "kt" }), greedy);
    assert.equal(await text({ ...hot, samplers: ["top_k", "temperature"] }), greedy);
    assert.notEqual(await text({ ...hot, samplers: "t" }), greedy);
    // temperature before or after top-p: each reply is the library's with that order
    const cut = { temperature: 2, top_k: 0, top_p: 0.8, min_p: 0, seed: 1 };
    const lib = async (samplerOrder: SamplingOptions["samplerOrder"], more: SamplingOptions = {}) =>
      (await s.model.generate(once.prompt, { maxTokens: 8, temperature: 2, topK: 0, topP: 0.8, minP: 0, seed: 1, samplerOrder, ...more })).completion;
    const pt = await text({ ...cut, samplers: "pt" });
    const tp = await text({ ...cut, samplers: ["temp", "nucleus"] });
    assert.equal(pt, await lib(["topP", "temperature"]));
    assert.equal(tp, await lib(["temperature", "topP"]));
    assert.notEqual(pt, tp);
    // min_keep: top-p 0 keeps the top token alone, unless min_keep asks for more
    const narrow = { temperature: 2, top_k: 0, top_p: 0, min_p: 0, seed: 7 };
    assert.equal(await text(narrow), greedy);
    assert.equal(await text({ ...narrow, min_keep: 20 }), await lib("llama.cpp", { topP: 0, seed: 7, minKeep: 20 }));
    assert.notEqual(await text({ ...narrow, min_keep: 20 }), greedy);
    // llama.cpp's web UI's default list (DRY, top-n-sigma and XTC off) is taken
    assert.equal(await text({ temperature: 0, samplers: "edskypmxt" }), greedy);
    for (const [extra, param, re] of [
      [{ samplers: "kq" }, "samplers", /^'samplers': "q" names no sampler; expected letters of edskypmxtia$/],
      [{ samplers: ["top_k", "adaptive_p"] }, "samplers", /"adaptive_p" \(adaptive_p\) is a sampler this library does not implement/],
      [{ samplers: 3 }, "samplers", /'samplers' must be a list of sampler names or a string of sampler letters, got 3/],
      [{ samplers: "tke", repeat_penalty: 1.3 }, "samplers", /"penalties" first or left out/],
      [{ min_keep: -1 }, "min_keep", /'min_keep' must be an integer in 0\.\.inf, got -1/],
      [{ timings_per_token: "yes" }, "timings_per_token", /^'timings_per_token' must be a boolean, got "yes"$/],
    ] as const) {
      const r = await post(`${s.url}/v1/completions`, { ...once, ...extra });
      assert.equal(r.status, 400, JSON.stringify(r.json));
      assert.equal(r.json.error.param, param, r.json.error.message);
      assert.match(r.json.error.message, re);
    }
    assert.equal(await text({ temperature: 0, timings_per_token: false }), greedy);
  });
});
