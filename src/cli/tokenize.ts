import { loadTokenizer } from "../llm.js";
import { flag, optionalString, parse, requireString, UsageError, type OptionSpec } from "./args.js";
import { readTextInput } from "./input-files.js";

export const tokenizeHelp = `Usage: tsllm tokenize --model MODEL (--text TEXT | --file FILE) [--add-special] [--json]

Prints a table "Token ID | Token Text", one row per token, pieces as the tokenizer stores them.

Options:
  --model MODEL     a .gguf file (a vocab-only GGUF too), a Hugging Face folder (its tokenizer
                    files) or a Hub reference org/name[@rev][:QUANT] (required)
  --text TEXT       text to tokenize (this or --file is required)
  --file FILE       tokenize the UTF-8 text of FILE, all of it, as llama-tokenize -f does (- reads
                    stdin, as llama-tokenize's stdin flag)
  --add-special     add BOS/EOS (or CLS/SEP) as the model's metadata says; off by default
  --json            print {"ids": [...], "pieces": [...]}
  -h, --help        show this help
`;

export const TOKENIZE_ARGS: OptionSpec = { model: { type: "string" }, text: { type: "string" }, file: { type: "string" }, "add-special": { type: "boolean" }, json: { type: "boolean" } };

export async function runTokenize(argv: string[]): Promise<void> {
  const values = parse(argv, TOKENIZE_ARGS);
  if (flag(values, "help")) { process.stdout.write(tokenizeHelp); return; }
  const path = requireString(values, "model");
  const given = optionalString(values, "text"), file = optionalString(values, "file");
  if (given !== undefined && file !== undefined) throw new UsageError("--text and --file both give the text; give one");
  // llama-tokenize -f FILE (and --stdin): the text read as it is, a final line break included
  const text = file === undefined ? given : await readTextInput(file, "--file");
  if (text === undefined) throw new UsageError("--text is required (or --file FILE; --file - reads stdin)");
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
