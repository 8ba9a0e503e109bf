import { existsSync, statSync } from "node:fs";
import { sep } from "node:path";
import { defaultCacheDir, listCachedRepos, type HubSourceName } from "../hub/index.js";
import { formatBytes } from "../units/index.js";
import { flag, optionalNonEmpty, optionalString, parse, UsageError, type OptionSpec } from "./args.js";

export const lsHelp = `Usage: tsllm ls [--json] [--source hf|modelscope] [--cache DIR]

Lists the models in the Hugging Face cache ($HF_HUB_CACHE, $HF_HOME/hub or
~/.cache/huggingface/hub): repo, cached revisions (refs and commits), snapshot count and
size on disk (each blob counted once, however many snapshots share it).

  --json          print [{repo, dir, sizeOnDisk, snapshots, refs, revisions: [...], unreferencedBytes,
                  problems}] (unreferencedBytes: blobs no snapshot points at, such as an interrupted
                  download's; problems: what is damaged, e.g. a snapshot file whose blob is gone)

A damaged repo is listed with what can be read; each damage is named on stderr
("warning: REPO: PATH: what is wrong"), as huggingface_hub's cache scan warns.
  --source S      hf (default) or modelscope ($MODELSCOPE_CACHE)
  --cache DIR     another cache root
  -h, --help      show this help
`;

/** the cache root the CLI's --source / --cache options name */
export function cacheRootFromOptions(values: ReturnType<typeof parse>): string {
  const source = optionalString(values, "source") ?? "hf";
  if (source !== "hf" && source !== "modelscope") throw new UsageError(`--source expects hf or modelscope, got "${source}"`);
  const given = optionalNonEmpty(values, "cache", "the cache folder");
  // a mistyped --cache read as an empty cache ("no models in /typo") would pass for the truth;
  // huggingface_hub's scan_cache_dir refuses a folder that is not there (CacheNotFound). The
  // default cache may be absent: nothing was downloaded yet
  if (given !== undefined && !statSync(given, { throwIfNoEntry: false })?.isDirectory()) {
    throw new Error(`--cache ${given}: ${existsSync(given) ? "is a file, not a folder" : "no such folder"} (the cache root: HF_HUB_CACHE's folder, e.g. ~/.cache/huggingface/hub)`);
  }
  if (given !== undefined) return given;
  // the default may be absent, not a file: HF_HUB_CACHE naming one had ls fail with Node's
  // "ENOTDIR: not a directory, scandir ..." (rm likewise), naming neither the variable nor a remedy
  const root = defaultCacheDir(source as HubSourceName);
  if (existsSync(root) && !statSync(root).isDirectory()) {
    const named = source === "hf" ? "HF_HUB_CACHE (else HF_HOME/hub)" : "MODELSCOPE_CACHE";
    throw new Error(`the cache root ${root} is a file, not a folder (${named} names the cache root; set it to a folder, or give --cache DIR)`);
  }
  return root;
}

export const LS_ARGS: OptionSpec = { json: { type: "boolean" }, source: { type: "string" }, cache: { type: "string" } };

export async function runLs(argv: string[]): Promise<void> {
  const values = parse(argv, LS_ARGS);
  if (flag(values, "help")) { process.stdout.write(lsHelp); return; }
  const root = cacheRootFromOptions(values);
  const repos = listCachedRepos(root);
  for (const r of repos) for (const p of r.problems) process.stderr.write(`warning: ${r.repo}: ${r.dir}${sep}${p}\n`); // not join(): it would normalize a path quoted in the message
  if (flag(values, "json")) {
    const out = repos.map((r) => ({
      repo: r.repo, dir: r.dir, sizeOnDisk: r.sizeOnDisk, snapshots: r.revisions.length, refs: r.refs,
      revisions: r.revisions.map((v) => ({ commit: v.commit, refs: v.refs, files: v.files, sizeOnDisk: v.sizeOnDisk })),
      unreferencedBytes: r.unreferencedBytes, problems: r.problems,
    }));
    process.stdout.write(JSON.stringify(out, null, 2) + "\n");
    return;
  }
  if (repos.length === 0) {
    process.stdout.write(`no models in ${root}\n`);
    return;
  }
  const rows = repos.map((r) => [
    r.repo,
    r.revisions.map((v) => (v.refs.length ? `${v.refs.join(",")} (${v.commit.slice(0, 8)})` : v.commit.slice(0, 8))).join(" ") || "-",
    String(r.revisions.length),
    formatBytes(r.sizeOnDisk),
  ]);
  const header = ["REPO", "REVISIONS", "SNAPSHOTS", "SIZE"];
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((row) => row[i]!.length)));
  const line = (cells: string[]) => cells.map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i]!))).join("  ").trimEnd() + "\n";
  process.stdout.write(line(header) + rows.map(line).join(""));
  const total = repos.reduce((s, r) => s + r.sizeOnDisk, 0);
  process.stdout.write(`${repos.length} model(s), ${formatBytes(total)} in ${root}\n`);
}
