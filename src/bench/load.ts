import { Agent, request } from "node:http";
import { percentile } from "./stats.js";
import type { ServeMetric, ServeRequestSample } from "./types.js";

/** One streamed POST /v1/completions a load client sends (the body both servers understand). */
export interface CompletionRequest {
  /** the prompt as token ids (sent as-is, so both servers see the same tokens) */
  readonly prompt: readonly number[];
  readonly maxTokens: number;
  /** `logit_bias`: token id -> bias (both servers take an object of id strings) */
  readonly logitBias?: Readonly<Record<string, number>>;
}

/**
 * The request body: greedy, `ignore_eos` so every request runs to `max_tokens` (tsllm serve and
 * llama-server both accept it), usage in the stream so the client knows how many tokens came.
 */
export function completionBody(r: CompletionRequest): Record<string, unknown> {
  return {
    prompt: r.prompt, max_tokens: r.maxTokens, temperature: 0, ignore_eos: true, stream: true, stream_options: { include_usage: true },
    ...(r.logitBias ? { logit_bias: r.logitBias } : {}),
  };
}

/**
 * Sends one streaming completion to `baseUrl` and times it from the client side: TTFT to the
 * first SSE chunk with text, TPOT as the mean gap between the first and last text chunks over
 * the tokens between them (a token whose text is empty or half a UTF-8 character arrives with
 * a later chunk, so the span is divided by the server's token count, not the chunk count).
 */
export function streamCompletion(baseUrl: string, r: CompletionRequest, agent: Agent, timeoutMs = 120_000): Promise<ServeRequestSample> {
  const payload = JSON.stringify(completionBody(r));
  return new Promise((resolve, reject) => {
    const sentAt = performance.now();
    let firstAt: number | undefined;
    let lastAt = sentAt;
    let textChunks = 0;
    let usageTokens: number | undefined;
    let timingTokens: number | undefined;
    let done = false;
    let failure: Error | undefined;
    const req = request(new URL("/v1/completions", baseUrl), {
      method: "POST", agent, timeout: timeoutMs,
      headers: { "Content-Type": "application/json", "Content-Length": Buffer.byteLength(payload), Accept: "text/event-stream" },
    }, (res) => {
      res.setEncoding("utf8");
      let buffer = "";
      if (res.statusCode !== 200) {
        res.on("data", (d: string) => (buffer += d));
        res.on("end", () => reject(new Error(`POST ${baseUrl}/v1/completions answered ${res.statusCode}: ${buffer.slice(0, 300)}`)));
        return;
      }
      const onEvent = (data: string) => {
        if (data === "[DONE]") { done = true; return; }
        const event = JSON.parse(data) as { error?: { message?: string }; choices?: { text?: string }[]; usage?: { completion_tokens?: number } | null; timings?: { predicted_n?: number } };
        if (event.error) { failure = new Error(`the stream from ${baseUrl} failed: ${event.error.message ?? JSON.stringify(event.error)}`); return; }
        if (event.choices?.some((c) => typeof c.text === "string" && c.text !== "")) {
          lastAt = performance.now();
          firstAt ??= lastAt;
          textChunks++;
        }
        if (typeof event.usage?.completion_tokens === "number") usageTokens = event.usage.completion_tokens;
        if (typeof event.timings?.predicted_n === "number") timingTokens = event.timings.predicted_n;
      };
      res.on("data", (d: string) => {
        buffer += d;
        // events end with a blank line; a chunk may hold several events or part of one
        for (let end = buffer.indexOf("\n\n"); end >= 0; end = buffer.indexOf("\n\n")) {
          const event = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          const data = event.split("\n").filter((l) => l.startsWith("data:")).map((l) => l.slice(5).trimStart()).join("\n");
          if (data !== "") {
            try {
              onEvent(data);
            } catch (e) {
              failure ??= new Error(`unreadable SSE event from ${baseUrl}: ${data.slice(0, 200)} (${(e as Error).message})`);
            }
          }
        }
      });
      res.on("end", () => {
        const totalMs = performance.now() - sentAt;
        const completionTokens = usageTokens ?? timingTokens ?? textChunks;
        if (failure) reject(failure);
        else if (!done) reject(new Error(`the stream from ${baseUrl} ended without data: [DONE]`));
        else if (firstAt === undefined) reject(new Error(`the stream from ${baseUrl} carried no text`));
        else resolve({ ttftMs: firstAt - sentAt, tpotMs: completionTokens > 1 ? (lastAt - firstAt) / (completionTokens - 1) : 0, totalMs, completionTokens, textChunks });
      });
      res.on("error", reject);
    });
    req.on("timeout", () => req.destroy(new Error(`POST ${baseUrl}/v1/completions: no answer within ${timeoutMs / 1000} s`)));
    req.on("error", reject);
    req.end(payload);
  });
}

export interface LoadResult {
  /** from the first request sent to the last response ended (ms) */
  readonly wallMs: number;
  /** in the order the requests were taken */
  readonly requests: readonly ServeRequestSample[];
}

/**
 * A closed-loop load: `concurrency` clients, each sending the next request of `requests` as soon
 * as its previous one ended, until all are sent. Each request opens its own connection
 * (`Connection: close`): llama-server answers `Keep-Alive` but closes the connection after a
 * streamed response, so a reused socket hangs up; a loopback connect costs both servers alike.
 * Fails (after the clients in flight finish) if any request fails or gets another token count
 * than its max_tokens.
 */
export async function runLoad(baseUrl: string, requests: readonly CompletionRequest[], concurrency: number, timeoutMs?: number): Promise<LoadResult> {
  if (!Number.isInteger(concurrency) || concurrency < 1) throw new RangeError(`concurrency must be an integer >= 1, got ${concurrency}`);
  const agent = new Agent({ keepAlive: false });
  const samples: ServeRequestSample[] = new Array(requests.length);
  let next = 0;
  let failure: unknown;
  const client = async () => {
    while (failure === undefined && next < requests.length) {
      const i = next++;
      const r = requests[i]!;
      try {
        const s = await streamCompletion(baseUrl, r, agent, timeoutMs);
        if (s.completionTokens !== r.maxTokens) throw new Error(`request ${i + 1} of ${requests.length} to ${baseUrl} generated ${s.completionTokens} tokens, expected ${r.maxTokens}`);
        samples[i] = s;
      } catch (e) {
        failure ??= e;
      }
    }
  };
  const t0 = performance.now();
  try {
    await Promise.all(Array.from({ length: Math.min(concurrency, requests.length) }, client));
  } finally {
    agent.destroy();
  }
  const wallMs = performance.now() - t0;
  if (failure !== undefined) throw failure;
  return { wallMs, requests: samples };
}

/** throughput and the p50 / p99 of TTFT and TPOT over a level's requests */
export function summarizeLoad(r: LoadResult): Record<ServeMetric, number> {
  const ttft = r.requests.map((s) => s.ttftMs);
  const tpot = r.requests.map((s) => s.tpotMs);
  const tokens = r.requests.reduce((n, s) => n + s.completionTokens, 0);
  return {
    tokensPerSecond: (tokens * 1000) / r.wallMs,
    ttftP50Ms: percentile(ttft, 50),
    ttftP99Ms: percentile(ttft, 99),
    tpotP50Ms: percentile(tpot, 50),
    tpotP99Ms: percentile(tpot, 99),
  };
}
