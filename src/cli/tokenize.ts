import { loadTokenizer } from "../llm.js";
import { MODEL_MEANING, escapesOption, ESCAPE_ARGS, flag, optionalString, parse, processEscapes, requireString, UsageError, type OptionSpec } from "./args.js";
import { readTextInput } from "./input-files.js";

export const tokenizeHelp = `Usage: tsllm tokenize --model MODEL (--text TEXT | --file FILE | --stdin) [--add-special | --no-bos]
                      [--no-parse-special] [--no-escape] [--ids | --json] [--show-count] [--log-disable]

Prints a table "Token ID | Token Text", one row per token, pieces as the tokenizer stores them.

Options:
  --model MODEL     a .gguf file (a vocab-only GGUF too), a Hugging Face folder (its tokenizer
                    files) or a Hub reference org/name[@rev][:QUANT] (required)
  --text TEXT       text to tokenize (this or --file is required)
  --file FILE       tokenize the UTF-8 text of FILE, all of it, as llama-tokenize -f does (- reads
                    stdin, as --stdin)
  --stdin           tokenize all of stdin, as llama-tokenize --stdin (--file -)
  --add-special     add BOS/EOS (or CLS/SEP) as the model's metadata says; off by default (where
                    llama-tokenize adds the model's BOS unless --no-bos)
  --no-bos          no BOS, as llama-tokenize --no-bos (this command's default already)
  --no-parse-special  special tokens' text (<s>, <|im_end|>) tokenized as plain text, not as those
                    tokens, as llama-tokenize --no-parse-special
  --no-escape       take the text (--text, --file or stdin) as written; by default, as llama-tokenize,
                    \\n \\r \\t \\' \\" \\\\ and \\xHH in it are that character or byte (--escape, the
                    default, is taken)
  --log-disable     taken, as llama-tokenize takes it; this command logs nothing anyway
  --ids             print only the ids, as llama-tokenize --ids: [1, 2, 3]
  --show-count      end with the line "Total number of tokens: N", as llama-tokenize --show-count
  --json            print {"ids": [...], "pieces": [...]}
  -h, --help        show this help
`;

export const TOKENIZE_ARGS: OptionSpec = { model: { type: "string" }, text: { type: "string" }, file: { type: "string" }, "add-special": { type: "boolean" }, json: { type: "boolean" }, stdin: { type: "boolean" }, ids: { type: "boolean" }, "show-count": { type: "boolean" }, "no-bos": { type: "boolean" }, "no-parse-special": { type: "boolean" }, "log-disable": { type: "boolean" }, ...ESCAPE_ARGS };

export async function runTokenize(argv: string[]): Promise<void> {
  const values = parse(argv, TOKENIZE_ARGS);
  if (flag(values, "help")) { process.stdout.write(tokenizeHelp); return; }
  const path = requireString(values, "model", MODEL_MEANING);
  const given = optionalString(values, "text");
  const sources = [given !== undefined && "--text", values.file !== undefined && "--file", flag(values, "stdin") && "--stdin"].filter((x) => x !== false);
  if (sources.length > 1) throw new UsageError(`${sources.slice(0, -1).join(", ")} and ${sources.at(-1)} ${sources.length === 2 ? "both" : "all"} give the text; give one`);
  if (flag(values, "json") && (flag(values, "ids") || flag(values, "show-count"))) throw new UsageError(`--json and ${flag(values, "ids") ? "--ids" : "--show-count"} both choose the output; give one (--json's ids are the tokens, their length the count)`);
  if (flag(values, "add-special") && flag(values, "no-bos")) throw new UsageError("--add-special and --no-bos contradict each other: give one (without either no BOS is added)");
  // llama-tokenize --stdin is --file -
  const file = flag(values, "stdin") ? "-" : optionalString(values, "file");
  // llama-tokenize -f FILE (and --stdin): the text read whole, a final line break included; its
  // escapes (\n) are then processed unless --no-escape, whichever of -p, -f and --stdin gave it
  const escapes = escapesOption(values);
  const read = file === undefined ? given : await readTextInput(file, "--file");
  if (read === undefined) throw new UsageError("--text is required (or --file FILE; --stdin or --file - reads stdin)");
  const text = escapes ? processEscapes(read, file === undefined ? "--text" : file === "-" ? "stdin" : `--file ${file}`) : read;
  const tokenizer = await loadTokenizer(path);
  // llama-tokenize's parse_special: special tokens' text is those tokens unless --no-parse-special
  const ids = tokenizer.encode(text, { addSpecialTokens: flag(values, "add-special"), parseSpecial: !flag(values, "no-parse-special") });
  const pieces = ids.map((id) => tokenizer.piece(id));
  if (flag(values, "json")) {
    process.stdout.write(JSON.stringify({ ids, pieces }) + "\n");
    return;
  }
  const lines: string[] = [];
  if (flag(values, "ids")) lines.push(`[${ids.join(", ")}]`);
  else {
    const width = Math.max(8, ...ids.map((id) => String(id).length));
    lines.push(`${"Token ID".padStart(width)} | Token Text`, `${"-".repeat(width)}-+-${"-".repeat(10)}`);
    for (let i = 0; i < ids.length; i++) lines.push(`${String(ids[i]).padStart(width)} | ${JSON.stringify(pieces[i]).slice(1, -1)}`);
  }
  if (flag(values, "show-count")) lines.push(`Total number of tokens: ${ids.length}`);
  process.stdout.write(lines.join("\n") + "\n");
}
