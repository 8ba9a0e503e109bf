import { DEFAULT_BLOCK_SIZE } from "../cache/index.js";
import type { EngineStats } from "../engine/index.js";

/** A Prometheus histogram (cumulative buckets, sum, count) in seconds. */
class Histogram {
  private readonly counts: number[];
  private sum = 0;
  private count = 0;

  constructor(readonly name: string, readonly help: string, readonly buckets: readonly number[]) {
    this.counts = new Array<number>(buckets.length).fill(0);
  }

  observe(seconds: number): void {
    if (!Number.isFinite(seconds) || seconds < 0) return;
    this.sum += seconds;
    this.count++;
    for (let i = 0; i < this.buckets.length; i++) if (seconds <= this.buckets[i]!) this.counts[i]!++;
  }

  render(): string {
    const lines = [`# HELP ${this.name} ${this.help}`, `# TYPE ${this.name} histogram`];
    this.buckets.forEach((b, i) => lines.push(`${this.name}_bucket{le="${b}"} ${this.counts[i]}`));
    lines.push(`${this.name}_bucket{le="+Inf"} ${this.count}`, `${this.name}_sum ${this.sum}`, `${this.name}_count ${this.count}`);
    return lines.join("\n");
  }
}

const LATENCY = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];
const PER_TOKEN = [0.001, 0.0025, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 1];

/** what one ended generation did (its Timings) */
export interface RequestMetrics {
  ttftMs: number;
  tpotMs: number;
  totalMs: number;
  queueMs: number;
  /** from the first token to the last */
  decodeMs: number;
  completionTokens: number;
}

/** The server's counters and histograms, rendered in the Prometheus text format (with the engine's gauges). */
export class Metrics {
  private readonly requests = new Map<string, number>();
  private readonly streamErrors = new Map<string, number>();
  private generationTokens = 0;
  /** llama-server's tokens_predicted_total: its slots' n_gen, the end-of-generation tokens sampled counted too */
  private predictedTokens = 0;
  /** llama-server's decode seconds counter, over ended generations: from the first token to the last */
  private decodeSeconds = 0;
  /**
   * llama-server's rate buckets (server_metrics' prompt_bucket and predict_bucket), emptied by
   * each read of /metrics: its two throughput gauges are over the work counted since the last
   * read. The prompt's: the engine's prompt steps (EngineStats.promptStepTokens, promptStepMs) as
   * the last read left them
   */
  private promptTokensAtRead = 0;
  private promptMsAtRead = 0;
  /** decode steps (llama-server's n_gen_steps: n_gen - 1 a request, its first token came with the prompt) and their seconds */
  private bucketSteps = 0;
  private bucketDecodeSeconds = 0;
  private readonly ttft = new Histogram("tsllm_time_to_first_token_seconds", "Time from the request's arrival to its first generated token.", LATENCY);
  private readonly tpot = new Histogram("tsllm_time_per_output_token_seconds", "Mean time per generated token after the first, per request.", PER_TOKEN);
  private readonly e2e = new Histogram("tsllm_e2e_request_latency_seconds", "Time from the request's arrival to its last token.", LATENCY);
  private readonly queue = new Histogram("tsllm_request_queue_time_seconds", "Time a request waited for room in the engine, over the requests that left the queue to run.", LATENCY);
  private abandonedInQueue = 0;

  /** one answered HTTP request */
  count(endpoint: string, status: number): void {
    const key = `endpoint="${endpoint}",status="${status}"`;
    this.requests.set(key, (this.requests.get(key) ?? 0) + 1);
  }

  /** a stream that failed after its 200 status line (its error went in the stream): counted apart, the request is counted once, as 200 */
  streamFailed(status: number): void {
    const key = `status="${status}"`;
    this.streamErrors.set(key, (this.streamErrors.get(key) ?? 0) + 1);
  }

  /**
   * one ended generation (finished or cancelled: what it did before it was); `scheduled`: whether
   * the engine ever took it from the queue (one cancelled while queued, its client gone or refused
   * at shutdown, never was); `decoded`: its tokens as llama-server counts them (openai.ts'
   * decodedTokens, the end tokens sampled too)
   */
  observe(m: RequestMetrics, scheduled: boolean, decoded = m.completionTokens): void {
    this.generationTokens += m.completionTokens;
    this.predictedTokens += decoded;
    this.decodeSeconds += m.decodeMs / 1000;
    // (metrics_on_prediction: added where n_gen > 0)
    if (decoded > 0) {
      this.bucketSteps += decoded - 1;
      this.bucketDecodeSeconds += m.decodeMs / 1000;
    }
    if (m.completionTokens > 0) this.ttft.observe(m.ttftMs / 1000);
    if (m.completionTokens > 1) this.tpot.observe(m.tpotMs / 1000);
    this.e2e.observe(m.totalMs / 1000);
    // as vLLM's queue-time histogram: the wait of those that got to run. A wait cut short by its
    // end is no queue time (it would pull the histogram toward how long clients are willing to wait)
    if (scheduled) this.queue.observe(m.queueMs / 1000);
    else this.abandonedInQueue++;
  }

  /** the metrics now; a read of /metrics: it empties the rate buckets (llama-server's reset_bucket on each /metrics) */
  render(engine: EngineStats, extra: { draining: boolean; bodyBytesHeld: number }): string {
    const out: string[] = [];
    const metric = (name: string, type: "counter" | "gauge", help: string, samples: [string, number][]) => {
      out.push(`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`);
      for (const [labels, v] of samples) out.push(`${name}${labels ? `{${labels}}` : ""} ${v}`);
    };
    metric("tsllm_http_requests_total", "counter", "HTTP requests answered, by endpoint and status code (499: the client left before the answer).", [...this.requests]);
    metric("tsllm_stream_errors_total", "counter", "Streams that ended with an error event after their 200 status line, by the error's status (503: the server shut down).", [...this.streamErrors]);
    metric("tsllm_prompt_tokens_total", "counter", "Prompt tokens of the requests whose prompt was computed (those taken from the prefix cache included; a request cancelled before its prefill ended adds none).", [["", engine.prefilledPromptTokens]]);
    metric("tsllm_generation_tokens_total", "counter", "Tokens generated by ended generations (finished, or cancelled: those generated before the cancel).", [["", this.generationTokens]]);
    metric("tsllm_prefix_cache_hit_tokens_total", "counter", "Prompt tokens taken from the prefix cache instead of being computed.", [["", engine.cachedPromptTokens]]);
    metric("tsllm_preemptions_total", "counter", "Requests preempted when the KV cache ran out (their blocks freed; each recomputed later from its prompt and tokens so far, its stream going on where it was), each time counted.", [["", engine.preemptions]]);
    metric("tsllm_requests_abandoned_in_queue_total", "counter", "Generations that ended while waiting for room in the engine, never run (their client left, or the server refused them at shutdown); not in tsllm_request_queue_time_seconds.", [["", this.abandonedInQueue]]);
    metric("tsllm_engine_steps_total", "counter", "Engine steps (one forward pass over every scheduled sequence each).", [["", engine.steps]]);
    // (llama-server has no counterpart of these two: its counters below count tokens proposed and accepted and the target's verifying steps, not the draft model's passes)
    metric("tsllm_draft_passes_total", "counter", "Forward passes of draft models for speculative requests (one per draft position for all the requests of a step drafting with the same model, batched; one per request where a batched pass failed and each was run again alone).", [["", engine.draftPasses]]);
    metric("tsllm_draft_rows_total", "counter", "Token rows the draft models' passes computed, all requests together.", [["", engine.draftRowsComputed]]);
    // counted as llama-server counts them (and vLLM, whose names its spec_decode_* ones are): each request's when it ends
    const drafted = "speculative requests that ended (finished or cancelled; a failed one adds none)";
    metric("tsllm_draft_tokens_total", "counter", `Tokens proposed for the target to verify (by the draft model or prompt lookup), over the ${drafted}.`, [["", engine.draftTokensProposed]]);
    metric("tsllm_draft_tokens_accepted_total", "counter", `Proposed tokens the target accepted, over the ${drafted}.`, [["", engine.draftTokensAccepted]]);
    metric("tsllm_draft_rounds_total", "counter", `Speculative rounds (one verification of a proposal by the target each), over the ${drafted}.`, [["", engine.draftRounds]]);
    // a draft model's KV pool is the size the memory plan counts (a context and a round's proposal), shared by the speculative
    // requests: a round it has no room for proposes nothing (plain decoding) and the next tries again
    metric("tsllm_draft_kv_bytes", "gauge", "Bytes the draft model's KV pool holds (its planned size, allocated by the first speculative request; 0 before).", [["", engine.draftKvBytes]]);
    metric("tsllm_draft_kv_used_bytes", "gauge", "Bytes of the draft model's KV pool that speculative requests' draft caches hold now.", [["", engine.draftKvUsedBytes]]);
    metric("tsllm_draft_fallbacks_total", "counter", "Times a speculative request decoded without drafting because the draft model's KV pool had no room for its round (once per stretch of such rounds; each round tries again).", [["", engine.draftFallbacks]]);
    metric("tsllm_draft_resumes_total", "counter", "Times such a request found room again and drafted on (its draft cache computed again from its tokens).", [["", engine.draftResumes]]);
    metric("tsllm_requests_running", "gauge", "Requests the engine is running.", [["", engine.running]]);
    metric("tsllm_requests_waiting", "gauge", "Requests waiting for room in the engine.", [["", engine.waiting]]);
    // a request's blocks are given back when the engine ends it, before its answer's last bytes are
    // written, and a cancelled one's at the engine's next step: with no request in the engine, none
    // is used. Blocks only the prefix cache keeps are not used: they are reused or evicted on demand
    metric("tsllm_kv_blocks_used", "gauge", "KV cache blocks referenced by the sequences of requests in the engine (a block two sequences share counts once; 0 when no request runs). Blocks the prefix cache keeps for later requests are tsllm_kv_blocks_cached, not these.", [["", engine.kv?.blocksInUse ?? 0]]);
    metric("tsllm_kv_blocks_cached", "gauge", "KV cache blocks holding reusable prefixes that no sequence references (free for new requests: evicted, least recently used first, when room is needed).", [["", engine.kv?.cachedBlocks ?? 0]]);
    metric("tsllm_kv_blocks_total", "gauge", "KV cache blocks the pool holds.", [["", Math.floor(engine.kvCapacityTokens / DEFAULT_BLOCK_SIZE)]]);
    metric("tsllm_kv_capacity_tokens", "gauge", "Tokens the KV cache holds.", [["", engine.kvCapacityTokens]]);
    metric("tsllm_draining", "gauge", "1 while the server is shutting down.", [["", extra.draining ? 1 : 0]]);
    metric("tsllm_request_body_bytes_held", "gauge", "Bytes of request bodies held, all requests together (each past its first 64 KiB): arriving, or whole until a completion's prompts are tokenized (other requests: until answered); a body that would take it past the server's bodiesLimit is refused 503.", [["", extra.bodyBytesHeld]]);
    // llama-server's names and meanings (its --metrics), so dashboards and autoscalers made for it read tsllm too; its
    // prompt tokens are those computed (a prefix-cache hit is not, nor the prompt of a request cancelled while queued)
    const computedPromptTokens = engine.prefilledPromptTokens - engine.cachedPromptTokens;
    metric("llamacpp:prompt_tokens_total", "counter", "Number of prompt tokens processed (prefix-cache hits not counted).", [["", computedPromptTokens]]);
    // (llama-server's add_prompt: the time of each batch holding prompt tokens, once however many prompts it holds)
    metric("llamacpp:prompt_seconds_total", "counter", "Prompt process time (engine steps that computed prompt tokens, each once).", [["", engine.promptStepMs / 1000]]);
    metric("llamacpp:tokens_predicted_total", "counter", "Number of generation tokens processed.", [["", this.predictedTokens]]);
    metric("llamacpp:tokens_predicted_seconds_total", "counter", "Predict process time (ended requests: from the first token to the last).", [["", this.decodeSeconds]]);
    metric("llamacpp:n_decode_total", "counter", "Total number of engine steps (llama_decode() calls).", [["", engine.steps]]);
    metric("llamacpp:spec_decode_num_draft_tokens_total", "counter", "Tokens proposed by speculative decoding (as tsllm_draft_tokens_total).", [["", engine.draftTokensProposed]]);
    metric("llamacpp:spec_decode_num_accepted_tokens_total", "counter", "Proposed tokens the target model accepted (as tsllm_draft_tokens_accepted_total).", [["", engine.draftTokensAccepted]]);
    metric("llamacpp:spec_decode_num_drafts_total", "counter", "Verifications of proposals by the target model (as tsllm_draft_rounds_total).", [["", engine.draftRounds]]);
    // llama-server's bucket.n_per_second(): steps over the bucket's seconds (a prompt token is a step), 0 with no time
    const bucketPromptMs = engine.promptStepMs - this.promptMsAtRead;
    const promptRate = bucketPromptMs > 0 ? (engine.promptStepTokens - this.promptTokensAtRead) / (bucketPromptMs / 1000) : 0;
    const predictedRate = this.bucketDecodeSeconds > 0 ? this.bucketSteps / this.bucketDecodeSeconds : 0;
    metric("llamacpp:prompt_tokens_seconds", "gauge", "Average prompt throughput in tokens/s (the prompt tokens computed since the last read of /metrics over the seconds of the steps that computed them).", [["", promptRate]]);
    metric("llamacpp:predicted_tokens_seconds", "gauge", "Average generation throughput in tokens/s (decode steps of the requests ended since the last read of /metrics, a request's first token not one, over their seconds).", [["", predictedRate]]);
    this.promptTokensAtRead = engine.promptStepTokens;
    this.promptMsAtRead = engine.promptStepMs;
    this.bucketSteps = 0;
    this.bucketDecodeSeconds = 0;
    metric("llamacpp:requests_processing", "gauge", "Number of requests processing.", [["", engine.running]]);
    metric("llamacpp:requests_deferred", "gauge", "Number of requests deferred.", [["", engine.waiting]]);
    for (const h of [this.ttft, this.tpot, this.e2e, this.queue]) out.push(h.render());
    return out.join("\n") + "\n";
  }
}
