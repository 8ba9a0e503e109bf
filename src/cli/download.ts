import { downloadModel, progressReporter } from "../hub/index.js";
import type { HubSourceName } from "../hub/index.js";
import { flag, optionalNonEmpty, optionalString, parseWithPositionals, strings, UsageError, type ParsedValues } from "./args.js";
import { interruptibleDownload, sayServedWithoutHub } from "./interrupt.js";
import { revisionOption } from "./rm.js";

export const downloadHelp = `Usage: tsllm download REF [--revision R] [--include GLOB]... [--exclude GLOB]...
                      [--token T] [--source hf|modelscope] [--cache DIR] [--offline] [--quiet] [--json]

Downloads a model into the Hugging Face cache ($HF_HUB_CACHE, $HF_HOME/hub or
~/.cache/huggingface/hub — the one Python's huggingface_hub uses) and prints the snapshot folder.

REF is org/name, org/name@revision, org/name:QUANT (one GGUF, e.g. :Q4_K_M, split sets
included) or modelscope:org/name. Without --include only what a model needs is fetched: the
GGUF, or config + tokenizer files + one weight format.

  --revision R     branch, tag or commit (default main; master on ModelScope); with REF@R, the same one
  --include GLOB   fetch the files matching GLOB instead (repeatable); read as huggingface_hub
                   reads --include: * also crosses /, a trailing / means a folder's files, and a
                   backslash is a / (sub\\*.json, as Windows writes it, is sub/*.json)
  --exclude GLOB   skip files matching GLOB (repeatable; read as --include)
  --token T        access token (default $HF_TOKEN); sent only to the hub's own host
  --source S       hf (default; $HF_ENDPOINT selects a mirror) or modelscope
  --cache DIR      another cache root, as ls and rm take it (created if missing, as
                   huggingface_hub's cache_dir is)
  --offline        use the cache only (also HF_HUB_OFFLINE=1)
  --quiet          no progress on stderr
  --json           print {source, repo, revision, commit, snapshot, path, files, fromCache}
  -h, --help       show this help

Environment, read as huggingface_hub reads it: HF_HUB_CACHE / HF_HOME, HF_ENDPOINT, HF_TOKEN,
HF_HUB_OFFLINE=1, and HF_HUB_DOWNLOAD_TIMEOUT / HF_HUB_ETAG_TIMEOUT: seconds a file / metadata
request may go without data before it is abandoned and retried, a file resumed where it stopped
(default 10; raise them on a slow or lossy link).

A hub that cannot be reached leaves the cached snapshot of REF, if any, to serve (asked once, no
retries), said in one line on stderr; one that lacks a file --include names is an error naming it.

Ctrl-C (or SIGTERM) stops the download and lets go of its locks (exit status 130, 143): what was
fetched, a file's part included, stays in the cache and the next run resumes from there.
`;

export const DOWNLOAD_ARGS = {
  revision: { type: "string" }, include: { type: "string", multiple: true }, exclude: { type: "string", multiple: true },
  token: { type: "string" }, source: { type: "string" }, cache: { type: "string" }, offline: { type: "boolean" }, quiet: { type: "boolean" },
  json: { type: "boolean" },
} as const;

export async function runDownload(argv: string[]): Promise<number | undefined> {
  const { values, positionals } = parseWithPositionals(argv, DOWNLOAD_ARGS);
  if (flag(values, "help")) { process.stdout.write(downloadHelp); return; }
  if (positionals.length !== 1) throw new UsageError(`download expects one model reference (org/name), got ${positionals.length}`);
  const source = optionalString(values, "source") ?? "hf";
  if (source !== "hf" && source !== "modelscope") throw new UsageError(`--source expects hf or modelscope, got "${source}"`);
  // Ctrl-C (or a service manager's SIGTERM) stops the transfers and lets go of the locks, as in every command that downloads
  const result = await interruptibleDownload("download", (signal) => download(positionals[0]!, values, source as HubSourceName, signal));
  // the hub unreachable, the cache served as it is: said, so a snapshot the hub has moved on from is no surprise
  if (result.hubFailure !== undefined) sayServedWithoutHub("download", result.hubFailure, result.snapshotDir);
  if (flag(values, "json")) {
    const { repo, revision, commit, snapshotDir, path, files, fromCache } = result;
    process.stdout.write(JSON.stringify({ source: result.source, repo, revision, commit, snapshot: snapshotDir, path, files, fromCache }, null, 2) + "\n");
  } else {
    process.stdout.write(`${result.snapshotDir}\n`);
  }
  return undefined;
}

/** downloadModel with the command line's options */
function download(reference: string, values: ParsedValues, source: HubSourceName, signal: AbortSignal) {
  return downloadModel(reference, {
    source,
    // "$REV" or "$HF_TOKEN" unset: one line naming the flag, not "a/b: empty revision" from the hub client
    revision: revisionOption(values, reference, "download", "a branch, tag or commit"),
    include: strings(values, "include"),
    exclude: strings(values, "exclude"),
    token: optionalNonEmpty(values, "token", "a Hugging Face access token"),
    // ls and rm read this cache with --cache DIR; download writes it so (an empty one is one line)
    cacheDir: optionalNonEmpty(values, "cache", "the cache folder"),
    offline: flag(values, "offline") ? true : undefined,
    refresh: true,
    onProgress: flag(values, "quiet") ? undefined : progressReporter(process.stderr),
    signal,
  });
}
