import { METRICS, type BenchReport, type Metric } from "./types.js";

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
  return v >= 100 ? v.toFixed(0) : v.toFixed(1);
}

export function displayRatio(r: number | undefined): string {
  return r === undefined || !Number.isFinite(r) ? "-" : `${r.toFixed(2)}x`;
}

/** Renders rows as a text table: first column left-aligned, the others right-aligned. */
export function renderTable(header: readonly string[], rows: readonly (readonly string[])[]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? "").length)));
  const line = (cells: readonly string[]) =>
    cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join("  ").trimEnd();
  return [line(header), widths.map((w) => "-".repeat(w)).join("  "), ...rows.map(line)].join("\n") + "\n";
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

/** One row per model: prefill, decode and peak RSS for both engines with their ratios. */
export function formatSummary(entries: readonly { name: string; type: string; report: BenchReport }[]): string {
  const shown: Metric[] = ["prefillTokensPerSecond", "decodeTokensPerSecond", "peakRssBytes"];
  const short: Record<string, string> = { prefillTokensPerSecond: "prefill tok/s", decodeTokensPerSecond: "decode tok/s", peakRssBytes: "RSS MiB" };
  const header = ["model", "type"];
  for (const m of shown) header.push(`${short[m]} tsllm`, "llama.cpp", "ratio");
  const rows = entries.map(({ name, type, report }) => {
    const row = [name, type];
    for (const m of shown) {
      row.push(displayValue(m, report.tsllm.medians[m]), report.llamaCpp ? displayValue(m, report.llamaCpp.medians[m]) : "-", displayRatio(report.ratio?.[m]));
    }
    return row;
  });
  const ran = (xs: (string | undefined)[]) => [...new Set(xs.filter((x): x is string => x !== undefined))].join(" / ");
  const lc = ran(entries.map((e) => e.report.llamaCpp?.detail));
  return renderTable(header, rows) + `tsllm: ${ran(entries.map((e) => e.report.tsllm.detail))}${lc ? `; llama.cpp: ${lc}` : ""}\n`;
}
