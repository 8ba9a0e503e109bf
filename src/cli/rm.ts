import { parseHubReference, removeCachedRepo, waitingLine } from "../hub/index.js";
import { formatBytes } from "../units/index.js";
import { flag, optionalNonEmpty, parseWithPositionals, UsageError, type ParsedValues } from "./args.js";
import { cacheRootFromOptions } from "./ls.js";

export const rmHelp = `Usage: tsllm rm REPO [--revision R] [--source hf|modelscope] [--cache DIR]

Removes a model from the Hugging Face cache: the whole repo folder, or with --revision (or
REPO@R) one snapshot, the refs pointing at it and the blobs no other snapshot uses. While a
tsllm download is writing into the repo, the whole repo, the snapshot it writes and a blob it
holds are left alone until that download ends; other revisions can be removed meanwhile.
Another rm of the same repo at work is waited for, which is said once on stderr.

  --revision R    a branch, tag or commit of the repo (a commit's short id, as tsllm ls prints it, will do)
  --source S      hf (default) or modelscope ($MODELSCOPE_CACHE)
  --cache DIR     another cache root
  -h, --help      show this help
`;

export const RM_ARGS = { revision: { type: "string" }, source: { type: "string" }, cache: { type: "string" } } as const;

export async function runRm(argv: string[]): Promise<void> {
  const { values, positionals } = parseWithPositionals(argv, RM_ARGS);
  if (flag(values, "help")) { process.stdout.write(rmHelp); return; }
  if (positionals.length !== 1) throw new UsageError(`rm expects one repo (org/name), got ${positionals.length}`);
  const root = cacheRootFromOptions(values);
  const r = await removeCachedRepo(root, positionals[0]!, revisionOption(values, positionals[0]!, "rm", "the revision (branch, tag or commit) to remove"), {
    // a wait on another rm (or a download starting) is said on stderr, not a silent hang
    onWait: (holder, lock, repo) => process.stderr.write(`${waitingLine(holder, lock, repo)}\n`),
  });
  process.stdout.write(`removed ${r.repo}${r.commit ? `@${r.commit}` : ""} (${formatBytes(r.freedBytes)} freed)\n`);
}

/** the revision after REPO@ (a legacy single name, gpt2@main, is no Hub reference but takes one too) */
function revisionInReference(reference: string): string | undefined {
  try {
    return parseHubReference(reference).revision;
  } catch {
    const at = reference.indexOf("@");
    return at < 0 ? undefined : reference.slice(at + 1);
  }
}

/**
 * --revision, refused when REF@R names another revision: the flag silently won, so
 * `rm a/b@main --revision dev` removed dev where the reference said main (download fetched it)
 */
export function revisionOption(values: ParsedValues, reference: string, command: string, meaning: string): string | undefined {
  const revision = optionalNonEmpty(values, "revision", meaning);
  const inReference = revisionInReference(reference);
  if (revision !== undefined && inReference !== undefined && inReference !== revision) {
    throw new UsageError(`${command} ${reference} --revision ${revision}: two revisions (${inReference} after @, ${revision} from --revision); give one`);
  }
  // the same one twice is the reference's (messages would name it twice: REPO@R@R)
  return inReference === undefined ? revision : undefined;
}
