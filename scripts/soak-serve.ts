/**
 * A soak of `tsllm serve` under load and faults: a real server in a child process, rounds of
 * concurrent clients of three kinds (the `openai` npm client, raw node:http, curl) mixing
 * streamed and whole answers, chat and text completions, n > 1, logprobs, grammars, tools,
 * response formats and stop strings, greedy or seeded; a share of them leave at a random point
 * (while the body is still being sent, while the prompt is computed, mid-stream, or without
 * reading the answer). After each round it checks what a production user relies on:
 *
 * - the engine is back to its baseline (no request running or waiting, no KV block in use) and
 *   /health answers ok;
 * - /metrics is valid Prometheus text (scripts/prometheus-text.ts) and adds up: the requests by
 *   status are the requests sent, the 429s those the clients got, the 499s at most those that left;
 * - every answered request's output is what the same request gives alone (its non-streamed
 *   answer on the idle server: greedy, or seeded);
 * - the server's resident memory (RSS) after each round, to see it flat across rounds;
 * - nothing on the server's stderr but its own lines (no unhandled rejection, no stack).
 *
 * At the end a SIGTERM with requests running and waiting: the running finish, the waiting are
 * refused at once (503 with Retry-After), and the server exits 0.
 *
 *   node --import tsx scripts/soak-serve.ts [--model FILE.gguf | --only smollm-q8_0] [--rounds 5] [--clients 200]
 *        [--parallel 8] [--max-queue 256] [--leave 0.3] [--solo 60] [--seed 1] [--json]
 *
 * Not a test (it runs for minutes): test/server-load.test.ts holds the small committed checks.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { readFileSync, writeFileSync, mkdtempSync, rmSync } from "node:fs";
import { request as httpRequest } from "node:http";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import OpenAI from "openai";
import { BENCH_MODELS, spawnTsllmServe, type ServeChild } from "../src/bench/index.js";
import { optionalNumber, optionalString, UsageError, type ParsedValues } from "../src/cli/args.js";
import { ensureRandomModel } from "../src/testing/index.js";
import { noPositionals, scriptOptions } from "./script-args.js";
import { parsePrometheusText, sampleSum, sampleValue, type Family } from "./prometheus-text.js";

const USAGE = `Usage: node --import tsx scripts/soak-serve.ts [options]

Drives a tsllm serve child process with rounds of concurrent clients (openai, raw http, curl),
some of which leave at random points, and checks after each round that the engine is idle again,
/health is ok, /metrics is valid and adds up, every answered request equals its answer alone,
and the server's stderr holds no error; prints RSS per round. Ends with SIGTERM under load
(requests running finish, those waiting are refused at once).

Options:
  --model FILE      the GGUF to serve (default ../shared/models/stories260K.gguf)
  --only NAME       serve a random-weight bench model instead, e.g. smollm-q8_0 (generated once into
                    the model cache, as npm run bench:serve does)
  --rounds N        rounds of clients (default 5)
  --clients N       concurrent requests a round (default 200)
  --parallel N      the server's --parallel (default 8)
  --max-queue N     the server's --max-queue (default 256; fewer than --clients makes 429s)
  --leave F         the share of clients that leave at a random point (default 0.3)
  --solo N          answered requests a round compared with their answer alone (default 60)
  --seed N          seed of the request mix (default 1)
  --json            print the report as JSON
  -h, --help        show this help
`;

interface Settings { model: string; only?: string; rounds: number; clients: number; parallel: number; maxQueue: number; leave: number; solo: number; seed: number; json: boolean }

const ROOT = resolve(import.meta.dirname, "..");
const TEMPLATE = "{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}{% if add_generation_prompt %}assistant:{% endif %}";

function settingsOf(values: ParsedValues, positionals: string[]): Settings {
  noPositionals(positionals);
  const only = optionalString(values, "only");
  if (only !== undefined && values["model"] !== undefined) throw new UsageError("give --model or --only, not both");
  if (only !== undefined && !BENCH_MODELS.some((m) => m.name === only)) throw new UsageError(`--only: unknown model "${only}" (known: ${BENCH_MODELS.map((m) => m.name).join(", ")})`);
  return {
    ...(only !== undefined ? { only } : {}),
    model: optionalString(values, "model") ?? resolve(ROOT, "../shared/models/stories260K.gguf"),
    rounds: optionalNumber(values, "rounds", { integer: true, min: 1 }) ?? 5,
    clients: optionalNumber(values, "clients", { integer: true, min: 1 }) ?? 200,
    parallel: optionalNumber(values, "parallel", { integer: true, min: 1 }) ?? 8,
    maxQueue: optionalNumber(values, "max-queue", { integer: true, min: 0 }) ?? 256,
    leave: optionalNumber(values, "leave", { min: 0, max: 1 }) ?? 0.3,
    solo: optionalNumber(values, "solo", { integer: true, min: 0 }) ?? 60,
    seed: optionalNumber(values, "seed", { integer: true, min: 0 }) ?? 1,
    json: values["json"] === true,
  };
}

/** xorshift32 in [0, 1) */
function rng(seed: number): () => number {
  let s = seed >>> 0 || 1;
  return () => {
    s ^= s << 13; s >>>= 0; s ^= s >>> 17; s ^= s << 5; s >>>= 0;
    return s / 2 ** 32;
  };
}

type Path = "/v1/chat/completions" | "/v1/completions";
type Client = "openai" | "http" | "curl";
/** where a leaving client leaves: before its body is complete, before the answer begins, after some stream events, or without reading the answer */
type Leave = "mid-body" | "mid-prefill" | "mid-stream" | "no-read";

interface Spec { path: Path; body: Record<string, unknown>; client: Client; leave?: Leave; leaveAfterMs: number; leaveAfterEvents: number }

/** what a request's answer says, reduced to what must equal the answer alone */
interface Answer { choices: { text: string; finish: string | null; calls: string; tokens: string[]; logprobs: number[] }[]; completionTokens: number }

interface Outcome { spec: Spec; status: number | "left" | "error"; answer?: Answer; error?: string }

const WORDS = ["Once upon a time", "Lily and Ben", "The cat sat", "One day, a little girl", "Tom wanted", "The sun was", "A big dog"];
const TOOLS = [{ type: "function", function: { name: "get_weather", description: "the weather in a city", parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] } } }];

function specOf(random: () => number, settings: Settings): Spec {
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(random() * xs.length)]!;
  const chat = random() < 0.5;
  const stream = random() < 0.5;
  const body: Record<string, unknown> = { max_tokens: 4 + Math.floor(random() * 40), stream };
  if (stream && random() < 0.7) body["stream_options"] = { include_usage: true };
  const prompt = `${pick(WORDS)} ${Math.floor(random() * 1000)}`;
  if (chat) body["messages"] = [{ role: "user", content: prompt }];
  // (a batch of up to 12 prompts: one abort signal for all their runs)
  else body["prompt"] = random() < 0.15 ? [prompt, ...Array.from({ length: 1 + Math.floor(random() * 11) }, () => pick(WORDS))] : prompt;
  if (random() < 0.5) body["temperature"] = 0;
  else Object.assign(body, { temperature: 0.9, seed: Math.floor(random() * 1e6) });
  if (random() < 0.3) body["n"] = 1 + Math.floor(random() * 3);
  if (random() < 0.3) Object.assign(body, chat ? { logprobs: true, top_logprobs: 2 } : { logprobs: 2 });
  if (random() < 0.25) body["stop"] = pick([["the"], [".", "!"], ["and", "was"]]);
  const shape = random();
  if (chat && shape < 0.12) body["tools"] = TOOLS;
  else if (chat && shape < 0.2) body["response_format"] = { type: "json_object" };
  else if (shape < 0.3) body["grammar"] = 'root ::= [a-z ]+ "." | "The " [a-z]+';
  const leave = random() < settings.leave ? pick<Leave>(stream ? ["mid-body", "mid-prefill", "mid-stream", "no-read"] : ["mid-body", "mid-prefill", "no-read"]) : undefined;
  return {
    path: chat ? "/v1/chat/completions" : "/v1/completions", body, client: leave === "mid-body" ? "http" : pick<Client>(["openai", "openai", "http", "http", "curl"]),
    ...(leave ? { leave } : {}), leaveAfterMs: Math.floor(random() * 300), leaveAfterEvents: 1 + Math.floor(random() * 6),
  };
}

/** the answer, whole or as its stream's events, reduced (choices by index; calls as name+arguments) */
function answerOf(events: readonly Record<string, any>[]): Answer {
  const choices: Answer["choices"] = [];
  let completionTokens = 0;
  for (const e of events) {
    if (e["usage"]) completionTokens = e["usage"].completion_tokens;
    for (const c of e["choices"] ?? []) {
      const slot = (choices[c.index] ??= { text: "", finish: null, calls: "", tokens: [], logprobs: [] });
      const part = c.message ?? c.delta;
      slot.text += part ? part.content ?? "" : c.text ?? "";
      for (const call of part?.tool_calls ?? []) slot.calls += `${call.function?.name ?? ""}${call.function?.arguments ?? ""}`;
      if (c.finish_reason) slot.finish = c.finish_reason;
      const lp = c.logprobs;
      if (lp?.content) for (const t of lp.content) { slot.tokens.push(t.token); slot.logprobs.push(t.logprob); }
      if (lp?.tokens) { slot.tokens.push(...lp.tokens); slot.logprobs.push(...lp.token_logprobs); }
    }
  }
  return { choices, completionTokens };
}

/** one request by raw node:http; a leaving client destroys its socket at its point */
function viaHttp(url: string, spec: Spec): Promise<Outcome> {
  return new Promise((done) => {
    const body = Buffer.from(JSON.stringify(spec.body));
    const req = httpRequest(`${url}${spec.path}`, { method: "POST", headers: { "Content-Type": "application/json", "Content-Length": body.length } });
    const leave = () => { req.destroy(); done({ spec, status: "left" }); };
    req.on("error", (e) => done({ spec, status: "error", error: e.message }));
    if (spec.leave === "mid-body") {
      req.write(body.subarray(0, body.length >> 1));
      setTimeout(leave, spec.leaveAfterMs);
      return;
    }
    req.end(body);
    if (spec.leave === "mid-prefill" || spec.leave === "no-read") { setTimeout(leave, spec.leave === "mid-prefill" ? spec.leaveAfterMs / 10 : spec.leaveAfterMs); return; }
    req.on("response", (res) => {
      let text = "";
      let events = 0;
      res.setEncoding("utf8");
      res.on("data", (d: string) => {
        text += d;
        if (spec.leave === "mid-stream" && (events = text.split("\n\n").length - 1) >= spec.leaveAfterEvents) { res.destroy(); leave(); }
      });
      res.on("end", () => done(finished(spec, res.statusCode ?? 0, text)));
      res.on("error", () => {});
      void events;
    });
  });
}

/** an answer's text (JSON, or SSE events) as an Outcome */
function finished(spec: Spec, status: number, text: string): Outcome {
  if (status !== 200) return { spec, status, error: text.slice(0, 300) };
  try {
    if (!spec.body["stream"]) return { spec, status, answer: answerOf([JSON.parse(text)]) };
    const events = text.split("\n\n").filter((e) => e.startsWith("data: ")).map((e) => e.slice(6));
    if (events.at(-1) !== "[DONE]") return { spec, status: "error", error: `the stream did not end with [DONE]: ${text.slice(-300)}` };
    const parsed = events.slice(0, -1).map((e) => JSON.parse(e));
    const failed = parsed.find((e) => e.error);
    if (failed) return { spec, status: "error", error: JSON.stringify(failed) };
    return { spec, status, answer: answerOf(parsed) };
  } catch (e) {
    return { spec, status: "error", error: `${(e as Error).message}: ${text.slice(0, 300)}` };
  }
}

async function viaOpenAI(client: OpenAI, spec: Spec): Promise<Outcome> {
  const controller = new AbortController();
  const options = { signal: controller.signal };
  let timer: NodeJS.Timeout | undefined;
  if (spec.leave === "mid-prefill" || spec.leave === "no-read") timer = setTimeout(() => controller.abort(), spec.leave === "mid-prefill" ? spec.leaveAfterMs / 10 : spec.leaveAfterMs);
  const api = spec.path === "/v1/completions" ? client.completions : client.chat.completions;
  try {
    if (!spec.body["stream"]) {
      const r = await (api.create as (b: unknown, o: unknown) => Promise<unknown>)(spec.body, options);
      return { spec, status: 200, answer: answerOf([r as Record<string, unknown>]) };
    }
    const stream = await (api.create as (b: unknown, o: unknown) => Promise<AsyncIterable<Record<string, unknown>>>)(spec.body, options);
    const events: Record<string, unknown>[] = [];
    for await (const e of stream) {
      events.push(e);
      if (spec.leave === "mid-stream" && events.length >= spec.leaveAfterEvents) { controller.abort(); return { spec, status: "left" }; }
    }
    // (the openai client ends a stream it aborted without an error)
    if (controller.signal.aborted) return { spec, status: "left" };
    return { spec, status: 200, answer: answerOf(events) };
  } catch (e) {
    if (controller.signal.aborted) return { spec, status: "left" };
    const status = (e as { status?: number }).status;
    return { spec, status: status ?? "error", error: (e as Error).message };
  } finally {
    clearTimeout(timer);
  }
}

function viaCurl(url: string, spec: Spec): Promise<Outcome> {
  return new Promise((done) => {
    const curl = spawn("curl", ["-sS", "-N", "-w", "\n%{http_code}", "-H", "Content-Type: application/json", "--data-binary", "@-", `${url}${spec.path}`], { stdio: ["pipe", "pipe", "pipe"] });
    let out = "";
    curl.stdout.setEncoding("utf8").on("data", (d: string) => {
      out += d;
      if (spec.leave === "mid-stream" && out.split("\n\n").length - 1 >= spec.leaveAfterEvents) curl.kill("SIGKILL");
    });
    curl.stdin.end(JSON.stringify(spec.body));
    if (spec.leave === "mid-prefill" || spec.leave === "no-read") setTimeout(() => curl.kill("SIGKILL"), spec.leave === "mid-prefill" ? spec.leaveAfterMs / 10 : spec.leaveAfterMs);
    // ("close": its output read to the end, which "exit" may come before)
    curl.on("close", (code, signal) => {
      if (signal) return done({ spec, status: "left" });
      const cut = out.lastIndexOf("\n");
      if (code !== 0) return done({ spec, status: "error", error: `curl exited ${code}` });
      done(finished(spec, Number(out.slice(cut + 1)), out.slice(0, cut)));
    });
  });
}

/** a request as it is sent alone: its whole (non-streamed) answer */
async function alone(url: string, spec: Spec): Promise<Answer> {
  const body: Record<string, unknown> = { ...spec.body, stream: false };
  delete body["stream_options"];
  const res = await fetch(`${url}${spec.path}`, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) });
  if (!res.ok) throw new Error(`alone: ${res.status} ${await res.text()}`);
  return answerOf([(await res.json()) as Record<string, unknown>]);
}

/** the first difference between two answers, or undefined */
function difference(a: Answer, b: Answer): string | undefined {
  if (a.choices.length !== b.choices.length) return `${a.choices.length} choices, alone ${b.choices.length}`;
  for (const [i, c] of a.choices.entries()) {
    const d = b.choices[i]!;
    for (const k of ["text", "finish", "calls"] as const) if (c[k] !== d[k]) return `choice ${i} ${k}: ${JSON.stringify(c[k])} alone ${JSON.stringify(d[k])}`;
    if (JSON.stringify(c.tokens) !== JSON.stringify(d.tokens)) return `choice ${i} logprob tokens differ`;
    const worst = c.logprobs.reduce((w, v, j) => Math.max(w, Math.abs(v - d.logprobs[j]!)), 0);
    if (worst > 1e-4) return `choice ${i} logprobs differ by up to ${worst} (${JSON.stringify(c.logprobs)} alone ${JSON.stringify(d.logprobs)})`;
  }
  return undefined;
}

async function metrics(url: string): Promise<Family[]> {
  return parsePrometheusText(await (await fetch(`${url}/metrics`)).text());
}

function rssOf(child: ChildProcess): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${child.pid}/status`, "utf8"));
  return m ? Number(m[1]) * 1024 : 0;
}

function startServer(s: Settings, dir: string): Promise<ServeChild> {
  writeFileSync(join(dir, "template.jinja"), TEMPLATE);
  return spawnTsllmServe(["--model", s.model, "--port", "0", "--threads", "1", "--parallel", String(s.parallel),
    "--max-queue", String(s.maxQueue), "--ctx-size", "512", "--chat-template", join(dir, "template.jinja"), "--grace-ms", "20000"]);
}

interface RoundReport {
  round: number; sent: number; answered: number; left: number; refused429: number; otherStatus: Record<string, number>; errors: string[];
  differences: string[]; compared: number; idleAfterMs: number; rssBytes: number; metricsProblems: string[]; wallMs: number;
  /** the slowest of the /health answers polled during the round (Infinity: one failed), and how many */
  healthMaxMs: number; healthProbes: number;
}

const ENDPOINTS: readonly Path[] = ["/v1/chat/completions", "/v1/completions"];

async function round(index: number, s: Settings, url: string, child: ChildProcess, random: () => number): Promise<RoundReport> {
  const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: "soak", maxRetries: 0, timeout: 600_000 });
  const before = await metrics(url);
  const specs = Array.from({ length: s.clients }, () => specOf(random, s));
  const t0 = Date.now();
  // /health is polled throughout (a liveness probe's view: Kubernetes' default timeout is 1 s)
  let loaded = true;
  const healthMs: number[] = [];
  const probe = (async () => {
    while (loaded) {
      const h0 = performance.now();
      const ok = await fetch(`${url}/health`).then((r) => r.ok, () => false);
      healthMs.push(ok ? performance.now() - h0 : Infinity);
      await new Promise((r) => setTimeout(r, 50));
    }
  })();
  const outcomes = await Promise.all(specs.map((spec) => spec.client === "openai" ? viaOpenAI(client, spec) : spec.client === "curl" ? viaCurl(url, spec) : viaHttp(url, spec)));
  const wallMs = Date.now() - t0;
  loaded = false;
  await probe;
  // the engine returns to idle: nothing running or waiting, no KV block referenced
  const idleFrom = Date.now();
  let after = await metrics(url);
  while (sampleValue(after, "tsllm_requests_running") + sampleValue(after, "tsllm_requests_waiting") + sampleValue(after, "tsllm_kv_blocks_used") > 0) {
    if (Date.now() - idleFrom > 30_000) throw new Error(`round ${index}: the engine did not return to idle in 30 s`);
    await new Promise((r) => setTimeout(r, 20));
    after = await metrics(url);
  }
  const idleAfterMs = Date.now() - idleFrom;
  const health = await fetch(`${url}/health`);
  const report: RoundReport = {
    round: index, sent: specs.length, answered: 0, left: 0, refused429: 0, otherStatus: {}, errors: [], differences: [], compared: 0, idleAfterMs,
    rssBytes: rssOf(child), metricsProblems: [], wallMs, healthMaxMs: Math.round(Math.max(0, ...healthMs)), healthProbes: healthMs.length,
  };
  if (report.healthMaxMs === Infinity) report.errors.push("a /health probe failed during the round");
  if (!health.ok) report.errors.push(`/health answered ${health.status}: ${await health.text()}`);
  for (const o of outcomes) {
    if (o.status === 200) report.answered++;
    else if (o.status === "left") report.left++;
    else if (o.status === 429) report.refused429++;
    else {
      report.otherStatus[String(o.status)] = (report.otherStatus[String(o.status)] ?? 0) + 1;
      if (report.errors.length < 10) report.errors.push(`${o.spec.client} ${o.spec.path} ${JSON.stringify(o.spec.body)}: ${o.status} ${o.error}`);
    }
  }
  // the counters add up: every request sent is counted once under its endpoint, 429s as the clients saw them
  const delta = (name: string, labels: Record<string, string>) => sampleSum(after, name, labels) - sampleSum(before, name, labels);
  for (const path of ENDPOINTS) {
    const sent = outcomes.filter((o) => o.spec.path === path);
    // (a client that leaves before its connection is up is never seen)
    const counted = delta("tsllm_http_requests_total", { endpoint: path });
    const reached = sent.filter((o) => o.status !== "left").length;
    if (counted > sent.length || counted < reached) report.metricsProblems.push(`${path}: ${counted} requests counted, ${sent.length} sent, ${reached} of them did not leave`);
    const c429 = delta("tsllm_http_requests_total", { endpoint: path, status: "429" });
    const seen429 = sent.filter((o) => o.status === 429).length;
    const leftEarly = sent.filter((o) => o.status === "left" && o.spec.leave !== "mid-stream").length;
    // (a client that left without reading may have been answered 429 first)
    if (c429 < seen429 || c429 > seen429 + leftEarly) report.metricsProblems.push(`${path}: ${c429} 429s counted, clients got ${seen429} (and ${leftEarly} left before an answer)`);
    const c499 = delta("tsllm_http_requests_total", { endpoint: path, status: "499" });
    const left = sent.filter((o) => o.status === "left").length;
    if (c499 > left) report.metricsProblems.push(`${path}: ${c499} 499s counted, only ${left} clients left`);
    const c200 = delta("tsllm_http_requests_total", { endpoint: path, status: "200" });
    const got200 = sent.filter((o) => o.status === 200).length;
    if (c200 < got200) report.metricsProblems.push(`${path}: ${c200} 200s counted, clients got ${got200}`);
  }
  // tokens: every answered request's completion tokens are in the counter (those that left add theirs)
  const usage = outcomes.reduce((sum, o) => sum + (o.answer?.completionTokens ?? 0), 0);
  const generated = delta("tsllm_generation_tokens_total", {});
  if (generated < usage) report.metricsProblems.push(`${generated} generation tokens counted, answered usage ${usage}`);
  if (report.left === 0 && report.refused429 === 0 && generated !== usage && outcomes.every((o) => o.answer && (!o.spec.body["stream"] || (o.spec.body["stream_options"] as { include_usage?: boolean } | undefined)?.include_usage))) {
    report.metricsProblems.push(`${generated} generation tokens counted, the answers' usage sums to ${usage}`);
  }
  // every answered request is what it is alone (a sample of them, sent one at a time to the idle server)
  for (const o of outcomes.filter((x) => x.answer).slice(0, s.solo)) {
    const d = difference(o.answer!, await alone(url, o.spec));
    report.compared++;
    if (d && report.differences.length < 10) report.differences.push(`${o.spec.client} ${o.spec.path} ${JSON.stringify(o.spec.body)}: ${d}`);
  }
  return report;
}

/**
 * SIGTERM while `parallel` requests run and 4 more wait for room: the running ones finish (200),
 * those still waiting are refused at once (503 shutting_down with Retry-After; one that started
 * before the signal finishes), and the server exits 0. `problems` lists what broke that.
 */
async function shutdownUnderLoad(url: string, parallel: number, child: ChildProcess, exited: Promise<number | null>): Promise<{ exitCode: number | null; statuses: number[]; problems: string[] }> {
  const send = (i: number) => fetch(`${url}/v1/completions`, {
    method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ prompt: WORDS[i % WORDS.length], max_tokens: 64, temperature: 0, stream: i % 2 === 0 }),
  }).then(async (r) => ({ status: r.status, retryAfter: r.headers.get("retry-after"), body: await r.text() }), () => ({ status: -1, retryAfter: null, body: "" }));
  const running = Array.from({ length: parallel }, (_, i) => send(i));
  await new Promise((r) => setTimeout(r, 50));
  const waiting = Array.from({ length: 4 }, (_, i) => send(parallel + i));
  await new Promise((r) => setTimeout(r, 20));
  child.kill("SIGTERM");
  const problems: string[] = [];
  const ran = await Promise.all(running), queued = await Promise.all(waiting);
  // (a stream's status line goes out at once: its refusal is the error event, its end no [DONE])
  const finished = (a: { status: number; body: string }) => a.status === 200 && (!a.body.startsWith("data:") || a.body.trimEnd().endsWith("data: [DONE]"));
  for (const a of ran) if (!finished(a)) problems.push(`a request running at SIGTERM got ${a.status}: ${a.body.slice(0, 200)}`);
  for (const a of queued) {
    const refused = (a.status === 503 && a.retryAfter !== null && a.body.includes("shutting_down")) || (a.status === 200 && a.body.startsWith("data:") && a.body.includes("shutting_down"));
    if (!refused && !finished(a)) problems.push(`a request waiting at SIGTERM got ${a.status}: ${a.body.slice(0, 200)}`);
  }
  return { exitCode: await exited, statuses: [...ran, ...queued].map((a) => a.status), problems };
}

async function main(): Promise<void> {
  const s = scriptOptions(USAGE, { model: { type: "string" }, only: { type: "string" }, rounds: { type: "string" }, clients: { type: "string" }, parallel: { type: "string" }, "max-queue": { type: "string" }, leave: { type: "string" }, solo: { type: "string" }, seed: { type: "string" }, json: { type: "boolean" } }, settingsOf);
  if (s.only !== undefined) s.model = await ensureRandomModel(BENCH_MODELS.find((m) => m.name === s.only)!.spec);
  const dir = mkdtempSync(join(tmpdir(), "tsllm-soak-"));
  const server = await startServer(s, dir);
  const log = (line: string) => { if (!s.json) process.stderr.write(`${line}\n`); };
  log(`soak: ${server.url}, ${s.rounds} rounds of ${s.clients} clients, --parallel ${s.parallel} --max-queue ${s.maxQueue}, leave ${s.leave}`);
  const random = rng(s.seed);
  const rounds: RoundReport[] = [];
  let failed = false;
  try {
    for (let i = 1; i <= s.rounds; i++) {
      const r = await round(i, s, server.url, server.child, random);
      rounds.push(r);
      const bad = r.errors.length + r.differences.length + r.metricsProblems.length;
      if (bad > 0) failed = true;
      log(`round ${i}: ${r.sent} sent, ${r.answered} answered, ${r.left} left, ${r.refused429} got 429, other ${JSON.stringify(r.otherStatus)}; ${r.wallMs} ms; /health max ${r.healthMaxMs} ms of ${r.healthProbes}; idle ${r.idleAfterMs} ms after; ` +
        `RSS ${(r.rssBytes / 2 ** 20).toFixed(1)} MiB; ${r.compared} compared alone, ${r.differences.length} differ; metrics problems ${r.metricsProblems.length}`);
      for (const line of [...r.errors, ...r.differences, ...r.metricsProblems]) log(`  ${line}`);
    }
    const shutdown = await shutdownUnderLoad(server.url, s.parallel, server.child, server.exited);
    const stderrLines = server.stderr().split("\n").filter((l) => l !== "" && !l.startsWith("tsllm serve: "));
    if (shutdown.exitCode !== 0 || shutdown.problems.length > 0 || stderrLines.length > 0) failed = true;
    log(`shutdown under load: exit ${shutdown.exitCode}, statuses (running, then waiting) ${shutdown.statuses.join(",")}; foreign stderr lines ${stderrLines.length}`);
    for (const line of shutdown.problems) log(`  ${line}`);
    for (const line of stderrLines.slice(0, 20)) log(`  stderr: ${line}`);
    if (s.json) process.stdout.write(`${JSON.stringify({ settings: s, rounds, shutdown, stderrLines }, null, 2)}\n`);
  } finally {
    server.child.kill("SIGKILL");
    rmSync(dir, { recursive: true, force: true });
  }
  process.exitCode = failed ? 1 : 0;
}

await main();
