import { METRICS, SERVE_METRICS, type BenchReport, type Metric, type ParallelBenchReport, type ServeBenchReport, type ServeMetric } from "./types.js";

const LABELS: Record<Metric, string> = {
  loadMs: "load (ms)",
  prefillTokensPerSecond: "prefill (tok/s)",
  decodeTokensPerSecond: "decode (tok/s)",
  peakRssBytes: "peak RSS (MiB)",
};

/** a metric's median in its display unit */
export function displayValue(m: Metric, v: number): string {
  if (!Number.isFinite(v)) return "-";
  if (m === "peakRssBytes") return (v / 2 ** 20).toFixed(0);
  return displayNumber(v);
}

/** three significant digits or so, no decimals from 100 up */
export function displayNumber(v: number | undefined): string {
  if (v === undefined || !Number.isFinite(v)) return "-";
  return v >= 100 ? v.toFixed(0) : v.toFixed(1);
}

export function displayRatio(r: number | undefined): string {
  return r === undefined || !Number.isFinite(r) ? "-" : `${r.toFixed(2)}x`;
}

/** Renders rows as a text table: the first `leftColumns` columns (default 1) left-aligned, the others right-aligned. */
export function renderTable(header: readonly string[], rows: readonly (readonly string[])[], leftColumns = 1): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? "").length)));
  const line = (cells: readonly string[]) =>
    cells.map((c, i) => (i < leftColumns ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join("  ").trimEnd();
  return [line(header), widths.map((w) => "-".repeat(w)).join("  "), ...rows.map(line)].join("\n") + "\n";
}

/** a sample's load warnings under its progress line, one "  warning: ..." line each */
export function formatSampleWarnings(s: { readonly warnings?: readonly string[] }): string {
  return (s.warnings ?? []).map((w) => `  warning: ${w}\n`).join("");
}

/** One model's report: medians per metric for each engine and the ratio tsllm / llama.cpp. */
export function formatReport(r: BenchReport): string {
  const head = `${r.model}\n${r.threads} threads, ${r.promptTokens} prompt tokens, ${r.genTokens} decode steps, context ${r.contextSize}, ` +
    `median of ${r.repetitions} run${r.repetitions === 1 ? "" : "s"} (one process each)\n` +
    `tsllm: ${r.tsllm.detail}${r.llamaCpp ? `; llama.cpp: ${r.llamaCpp.detail}` : ""}\n\n`;
  const header = ["metric", "tsllm"];
  if (r.llamaCpp) header.push("llama.cpp", "tsllm/llama.cpp");
  const rows = METRICS.map((m) => {
    const row = [LABELS[m], displayValue(m, r.tsllm.medians[m])];
    if (r.llamaCpp) row.push(displayValue(m, r.llamaCpp.medians[m]), displayRatio(r.ratio?.[m]));
    return row;
  });
  return head + renderTable(header, rows);
}

/**
 * One row per model (and prompt length): prefill, decode and peak RSS for both engines with their
 * ratios. Where a model was run at several prompt lengths (--prompt-tokens 128,1536), a "prompt"
 * column and "decode at depth": each engine's decode rate after that prompt relative to its rate
 * after the model's shortest one (1.00x in that row).
 */
export function formatSummary(entries: readonly { name: string; type: string; report: BenchReport }[]): string {
  const shown: Metric[] = ["prefillTokensPerSecond", "decodeTokensPerSecond", "peakRssBytes"];
  const short: Record<string, string> = { prefillTokensPerSecond: "prefill tok/s", decodeTokensPerSecond: "decode tok/s", peakRssBytes: "RSS MiB" };
  const depths = new Set(entries.map((e) => e.report.promptTokens)).size > 1;
  const shortest = new Map<string, BenchReport>();
  for (const e of entries) {
    const s = shortest.get(e.name);
    if (!s || e.report.promptTokens < s.promptTokens) shortest.set(e.name, e.report);
  }
  const header = depths ? ["model", "type", "prompt"] : ["model", "type"];
  for (const m of shown) header.push(`${short[m]} tsllm`, "llama.cpp", "ratio");
  if (depths) header.push("decode at depth tsllm", "llama.cpp");
  const decode = (r: EngineReportLike | undefined) => r?.medians.decodeTokensPerSecond;
  const rows = entries.map(({ name, type, report }) => {
    const row = depths ? [name, type, String(report.promptTokens)] : [name, type];
    for (const m of shown) {
      row.push(displayValue(m, report.tsllm.medians[m]), report.llamaCpp ? displayValue(m, report.llamaCpp.medians[m]) : "-", displayRatio(report.ratio?.[m]));
    }
    if (depths) {
      const base = shortest.get(name)!;
      const rel = (a: number | undefined, b: number | undefined) => (a === undefined || b === undefined ? undefined : a / b);
      row.push(displayRatio(rel(decode(report.tsllm), decode(base.tsllm))), displayRatio(rel(decode(report.llamaCpp), decode(base.llamaCpp))));
    }
    return row;
  });
  return renderTable(header, rows) + engineDetails(entries.map((e) => e.report));
}

type EngineReportLike = { medians: Record<Metric, number> };

/**
 * One row per model and number of concurrent requests: aggregate decode tok/s of both engines
 * and their ratio, median TTFT and TPOT, and each engine's aggregate relative to its own at one
 * request (scaling).
 */
export function formatParallelSummary(entries: readonly { name: string; type: string; report: ParallelBenchReport }[]): string {
  const header = ["model", "type", "requests", "aggregate tok/s tsllm", "llama.cpp", "ratio", "TTFT ms tsllm", "llama.cpp", "TPOT ms tsllm", "llama.cpp", "scaling tsllm", "llama.cpp"];
  const rows = entries.flatMap(({ name, type, report }) =>
    report.levels.map((l) => [
      name,
      type,
      String(l.concurrency),
      displayNumber(l.tsllm.medians.aggregateTokensPerSecond),
      displayNumber(l.llamaCpp?.medians.aggregateTokensPerSecond),
      displayRatio(l.ratio?.aggregateTokensPerSecond),
      displayNumber(l.tsllm.medians.ttftMs),
      displayNumber(l.llamaCpp?.medians.ttftMs),
      displayNumber(l.tsllm.medians.tpotMs),
      displayNumber(l.llamaCpp?.medians.tpotMs),
      displayRatio(l.scaling.tsllm),
      displayRatio(l.scaling.llamaCpp),
    ]),
  );
  const first = entries[0]?.report;
  const setup = first
    ? `${first.threads} threads; each request ${first.promptTokens} prompt tokens, ${first.genTokens} generated; median of ${first.repetitions} run${first.repetitions === 1 ? "" : "s"} (one process each), ` +
      "TTFT and TPOT the medians of each run's requests; scaling: aggregate / the same engine's at 1 request\n"
    : "";
  return renderTable(header, rows) + setup + engineDetails(entries.flatMap((e) => e.report.levels));
}

/** "tsllm: wasm, 2 threads; llama.cpp: ..." over every report, each distinct detail once */
function engineDetails(reports: readonly { tsllm: { detail: string }; llamaCpp?: { detail: string } }[]): string {
  const ran = (xs: (string | undefined)[]) => [...new Set(xs.filter((x): x is string => x !== undefined))].join(" / ");
  const lc = ran(reports.map((r) => r.llamaCpp?.detail));
  return `tsllm: ${ran(reports.map((r) => r.tsllm.detail))}${lc ? `; llama.cpp: ${lc}` : ""}\n`;
}

const SERVE_LABELS: Record<ServeMetric, string> = {
  tokensPerSecond: "throughput (tok/s)",
  ttftP50Ms: "TTFT p50 (ms)",
  ttftP99Ms: "TTFT p99 (ms)",
  tpotP50Ms: "TPOT p50 (ms)",
  tpotP99Ms: "TPOT p99 (ms)",
};

/**
 * `npm run bench:serve`'s table: per concurrency level, throughput and the TTFT / TPOT
 * percentiles of both servers and the ratio tsllm / llama-server (for throughput higher is
 * better, for the times lower).
 */
export function formatServeReport(r: ServeBenchReport): string {
  const peer = r.levels.some((l) => l.llamaServer);
  const header = ["clients", "requests", "metric", "tsllm"];
  if (peer) header.push("llama-server", "tsllm/llama-server");
  const rows = r.levels.flatMap((l) => SERVE_METRICS.map((m) => {
    const row = [String(l.concurrency), String(l.requests), SERVE_LABELS[m], displayNumber(l.tsllm[m])];
    if (peer) row.push(displayNumber(l.llamaServer?.[m]), displayRatio(l.ratio?.[m]));
    return row;
  }));
  const commands = [...new Set(r.levels.flatMap((l) => [l.tsllm.command, l.llamaServer?.command].filter((c): c is string => c !== undefined)))];
  const reps = Math.max(...r.levels.map((l) => l.repetitions));
  const head = `${r.model}: streaming POST /v1/completions, ${r.promptTokens} prompt tokens (ids), max_tokens ${r.maxTokens} with ignore_eos, temperature 0; ` +
    (reps > 1 ? `median of ${reps} runs per server, the servers alternating; ` : "") +
    `C clients back to back, timed by the client over loopback HTTP; ${r.threads} threads, ${r.slotContextSize} KV cells per slot\n` +
    `${r.llamaServerDetail ? `peer: ${r.llamaServerDetail}\n` : ""}${r.llamaServerSkipped ? `llama-server not run: ${r.llamaServerSkipped}\n` : ""}\n`;
  return head + renderTable(header, rows, 3) + `servers: ${commands.join("; ")}\n`;
}
