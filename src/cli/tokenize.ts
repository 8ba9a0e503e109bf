import { loadTokenizer } from "../llm.js";
import { flag, optionalString, parse, requireString, UsageError, type OptionSpec } from "./args.js";

export const tokenizeHelp = `Usage: tsllm tokenize --model MODEL --text TEXT [--add-special] [--json]

Prints a table "Token ID | Token Text", one row per token, pieces as the tokenizer stores them.

Options:
  --model MODEL     a .gguf file (a vocab-only GGUF too), a Hugging Face folder (its tokenizer
                    files) or a Hub reference org/name[@rev][:QUANT] (required)
  --text TEXT       text to tokenize (required)
  --add-special     add BOS/EOS (or CLS/SEP) as the model's metadata says; off by default
  --json            print {"ids": [...], "pieces": [...]}
  -h, --help        show this help
`;

export const TOKENIZE_ARGS: OptionSpec = { model: { type: "string" }, text: { type: "string" }, "add-special": { type: "boolean" }, json: { type: "boolean" } };

export async function runTokenize(argv: string[]): Promise<void> {
  const values = parse(argv, TOKENIZE_ARGS);
  if (flag(values, "help")) { process.stdout.write(tokenizeHelp); return; }
  const path = requireString(values, "model");
  const text = optionalString(values, "text");
  if (text === undefined) throw new UsageError("--text is required");
  const tokenizer = await loadTokenizer(path);
  const ids = tokenizer.encode(text, { addSpecialTokens: flag(values, "add-special") });
  const pieces = ids.map((id) => tokenizer.piece(id));
  if (flag(values, "json")) {
    process.stdout.write(JSON.stringify({ ids, pieces }) + "\n");
    return;
  }
  const width = Math.max(8, ...ids.map((id) => String(id).length));
  const lines = [`${"Token ID".padStart(width)} | Token Text`, `${"-".repeat(width)}-+-${"-".repeat(10)}`];
  for (let i = 0; i < ids.length; i++) lines.push(`${String(ids[i]).padStart(width)} | ${JSON.stringify(pieces[i]).slice(1, -1)}`);
  process.stdout.write(lines.join("\n") + "\n");
}
