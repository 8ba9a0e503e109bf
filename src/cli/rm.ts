import { parseArgs } from "node:util";
import { removeCachedRepo } from "../hub/index.js";
import { formatBytes } from "../units/index.js";
import { UsageError } from "./args.js";
import { cacheRootFromOptions } from "./ls.js";

export const rmHelp = `Usage: tsllm rm REPO [--revision R] [--source hf|modelscope] [--cache DIR]

Removes a model from the Hugging Face cache: the whole repo folder, or with --revision (or
REPO@R) one snapshot, the refs pointing at it and the blobs no other snapshot uses.

  --revision R    a branch, tag or commit of the repo
  --source S      hf (default) or modelscope ($MODELSCOPE_CACHE)
  --cache DIR     another cache root
`;

export const RM_ARGS = { revision: { type: "string" }, source: { type: "string" }, cache: { type: "string" } } as const;

export async function runRm(argv: string[]): Promise<void> {
  let parsed;
  try {
    parsed = parseArgs({
      args: argv, allowPositionals: true, strict: true,
      options: { ...RM_ARGS, help: { type: "boolean", short: "h" } },
    });
  } catch (e) {
    throw new UsageError((e as Error).message);
  }
  const { values, positionals } = parsed;
  if (values.help) { process.stdout.write(rmHelp); return; }
  if (positionals.length !== 1) throw new UsageError(`rm expects one repo (org/name), got ${positionals.length}`);
  const root = cacheRootFromOptions(values);
  const r = await removeCachedRepo(root, positionals[0]!, values.revision);
  process.stdout.write(`removed ${r.repo}${r.commit ? `@${r.commit}` : ""} (${formatBytes(r.freedBytes)} freed)\n`);
}
