import { statSync } from "node:fs";
import { availableParallelism } from "node:os";
import { parseArgs, type ParseArgsConfig } from "node:util";
import type { BackendName } from "../kernels/index.js";
import { closest } from "../units/index.js";

/** a warning for the command line's user: one line on stderr (loadModel's onWarning for every command that loads) */
export function printWarning(message: string): void {
  process.stderr.write(`tsllm: warning: ${message}\n`);
}

/** A usage error: printed as one line, exit code 2. */
export class UsageError extends Error {
  override name = "UsageError";
}

export type OptionSpec = NonNullable<ParseArgsConfig["options"]>;

export type ParsedValues = Record<string, string | boolean | string[] | undefined>;

/**
 * Parses `argv` strictly (unknown options are usage errors); `--help`/`-h` is always accepted.
 * An argument starting with a dash after an option that takes a value is that value
 * (`--max-tokens -1`, `--text "- item"`), unless it is one of the command's options; parseArgs'
 * multi-line advice becomes one line.
 */
export function parse(argv: string[], options: OptionSpec): ParsedValues {
  return parseStrict(argv, options, false).values;
}

/** parse() for commands that also take positional arguments (download REF, rm REPO) */
export function parseWithPositionals(argv: string[], options: OptionSpec): { values: ParsedValues; positionals: string[] } {
  return parseStrict(argv, options, true);
}

/**
 * llama.cpp's spellings (llama-cli, llama-completion, llama-perplexity, llama-bench) of options
 * tsllm names otherwise: each maps to the first of its names that the command has; elsewhere it
 * stays unknown.
 */
export const LLAMA_CPP_ALIASES: Record<string, readonly string[]> = {
  "-m": ["model"],
  "-p": ["text", "input", "prompt", "prompt-tokens"], // tokenize's and embed's text, generate's prompt, bench's prompt size
  "--prompt": ["prompt", "text", "input"], // llama-tokenize's long spelling of -p (a command with its own --prompt keeps it)
  "-sys": ["system"],
  "-f": ["file"],
  "-n": ["max-tokens", "gen-tokens"],
  "--n-predict": ["max-tokens"],
  "--predict": ["max-tokens"],
  "-c": ["ctx-size", "ctx"],
  "--ctx-size": ["ctx"], // llama-perplexity's long spellings of -c and -b (perplexity's are --ctx, --batch)
  "-b": ["batch"],
  "--batch-size": ["batch"],
  "-t": ["threads"],
  "--temp": ["temperature"],
  "-s": ["seed"],
  "-r": ["repetitions"],
  "-ctk": ["cache-type-k"],
  "-ctv": ["cache-type-v"],
  "-fa": ["flash-attn"],
  "-e": ["escape"],
  "--grammar-file": ["grammar"], // llama.cpp's --grammar is the grammar's text, --grammar-file a file: tsllm's --grammar takes both
  "--chat-template-file": ["chat-template"], // the same split for llama.cpp's --chat-template / --chat-template-file
  // llama-server's draft model and draft length, by its current and earlier names
  "-md": ["draft-model"],
  "--model-draft": ["draft-model"],
  "--spec-draft-model": ["draft-model"],
  "--spec-draft-n-max": ["draft-tokens"],
  "--draft-max": ["draft-tokens"],
  "--draft-n": ["draft-tokens"],
  "-sps": ["slot-prompt-similarity"],
};

/** llama.cpp's GPU-offload options: a model here runs on the --backend chosen, so they are taken and ignored, with a note */
const IGNORED_LLAMA_CPP_OPTIONS = new Set(["-ngl", "--gpu-layers", "--n-gpu-layers"]);

/** the one of `options` that llama.cpp's spelling `name` (-n, --temp) means here, if any */
function aliasTarget(name: string, options: OptionSpec): string | undefined {
  return Object.hasOwn(LLAMA_CPP_ALIASES, name) ? LLAMA_CPP_ALIASES[name]!.find((o) => Object.hasOwn(options, o)) : undefined;
}

/** whether a command with `options` takes the option typed as `typed` (--json, --top-k=5, -m, -ngl) */
export function takesOption(typed: string, options: OptionSpec): boolean {
  const name = typed.startsWith("--") ? typed.split("=")[0]! : typed;
  return (name.startsWith("--") && Object.hasOwn(options, name.slice(2))) || aliasTarget(name, options) !== undefined
    || (IGNORED_LLAMA_CPP_OPTIONS.has(name) && Object.hasOwn(options, "model"));
}

/**
 * `-n5`, `-n=5`, `-c512`: a short spelling with its value run into it. Node's parser read `-n5`
 * as generate's one-letter --n (5 completions, not 5 tokens, silently) and `-c512` as an unknown
 * -c; llama.cpp's tools refuse both ("invalid argument"). The longest alias `a` starts with wins
 * (-ctkq8_0 is -ctk's).
 */
function runTogether(a: string, options: OptionSpec): string | undefined {
  if (a.startsWith("--") || a.length < 3) return undefined;
  // the longest of all the short spellings (-sys is not -s with "ys", -ngl99 not -n with "gl99")
  const short = [...Object.keys(LLAMA_CPP_ALIASES), ...IGNORED_LLAMA_CPP_OPTIONS]
    .filter((k) => !k.startsWith("--") && a.startsWith(k))
    .sort((x, y) => y.length - x.length)[0];
  if (short === undefined || (aliasTarget(short, options) === undefined && !(IGNORED_LLAMA_CPP_OPTIONS.has(short) && Object.hasOwn(options, "model")))) return undefined;
  const value = a.slice(short.length).replace(/^=/, "");
  return `${a}: an option and its value run together; write ${short} ${value === "" ? "VALUE" : value} (the value as the next argument, as llama.cpp's tools take it)`;
}

/**
 * llama.cpp's own multi-letter short spellings (common/arg.cpp) that are no alias here, with their
 * long names and what tsllm has instead: -cnv was read as -c with the value "nv" ("write -c nv"),
 * -np as Node's -n -p ("unknown option -n")
 */
const LLAMA_CPP_OWN_SHORT: Record<string, readonly [long: string, here: string]> = {
  "-cnv": ["--conversation", "tsllm chat is the conversation"],
  "-no-cnv": ["--no-conversation", "tsllm generate is one completion"],
  "-st": ["--single-turn", "tsllm generate answers once"],
  "-sp": ["--special", ""],
  "-cb": ["--cont-batching", "tsllm serve always batches"],
  "-nocb": ["--no-cont-batching", ""],
  "-np": ["--parallel", ""],
  "-tb": ["--threads-batch", ""],
  "-ub": ["--ubatch-size", ""],
};

/** the refusal of llama.cpp's own short spelling `name` that this command has no alias for, if it is one */
function llamaCppOwnShort(name: string, options: OptionSpec): string | undefined {
  if (!Object.hasOwn(LLAMA_CPP_OWN_SHORT, name) || aliasTarget(name, options) !== undefined) return undefined;
  const [long, here] = LLAMA_CPP_OWN_SHORT[name]!;
  const way = Object.hasOwn(options, long.slice(2)) ? ` (did you mean ${long}?)` : here !== "" ? `; ${here}` : " (--help lists the options)";
  return `unknown option ${name}: llama.cpp's ${long}${way}`;
}

/** `-m x` and `--temp=0.5` as this command's own `--model x` and `--temperature=0.5`; -ngl N dropped with a warning */
function llamaCppSpellings(argv: readonly string[], options: OptionSpec): string[] {
  const out: string[] = [];
  let isValue = false; // the argument is the value of the option before it (`--prompt -n5`), as parseStrict takes it
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (a === "--") {
      out.push(...argv.slice(i));
      break;
    }
    const eq = a.startsWith("--") ? a.indexOf("=") : -1;
    const name = eq > 0 ? a.slice(0, eq) : a;
    if (IGNORED_LLAMA_CPP_OPTIONS.has(name) && Object.hasOwn(options, "model")) {
      if (eq < 0) i++; // its value
      printWarning(`${name} is llama.cpp's GPU offload and is ignored here; --backend picks where the model runs`);
      isValue = false;
      continue;
    }
    const target = aliasTarget(name, options);
    if (target === undefined && !isValue) {
      const own = llamaCppOwnShort(name, options);
      if (own !== undefined) throw new UsageError(own);
      const together = runTogether(a, options);
      if (together !== undefined) throw new UsageError(together);
    }
    const arg = target === undefined ? a : `--${target}${eq > 0 ? a.slice(eq) : ""}`;
    out.push(arg);
    const option = arg.startsWith("--") && !arg.includes("=") ? options[arg.slice(2)] : undefined;
    isValue = !isValue && option?.type === "string";
  }
  return out;
}

/**
 * Other tools' one-letter spellings that tsllm does not take as aliases (the letter means different
 * things across tools: -o is llama-imatrix's and llama-gguf-split's output file, most Unix tools'
 * too), only suggests: the first of the names that the command has.
 */
const OTHER_TOOLS_SHORT_OPTIONS: Record<string, readonly string[]> = {
  "-o": ["out", "output", "outfile"],
};

/** what a stray argument names, if it is a path that exists: a folder, a file, or nothing there */
function pathKind(arg: string): "folder" | "file" | undefined {
  try {
    return statSync(arg).isDirectory() ? "folder" : "file";
  } catch {
    return undefined;
  }
}

/**
 * whether a stray argument names a model rather than being a text: a folder, a .gguf name, or (when
 * no such path exists) a Hub org/name; an existing other file (wiki.test.raw) is a text's file
 */
function looksLikeModel(arg: string): boolean {
  const kind = pathKind(arg);
  return kind === "folder" || /\.gguf$/i.test(arg) || (kind === undefined && /^[\w.-]+\/[\w.-]+$/.test(arg));
}

/**
 * The options that take a command's text, the first one a command has being its text (embed's
 * --prompt is a prefix to its --input; generate's --file and tokenize's are the second way), with
 * what the line calls it. llama-cli's and ollama run's users type the prompt bare.
 */
const TEXT_OPTIONS: readonly (readonly [string, string])[] = [["input", "the text"], ["prompt", "the prompt"], ["text", "the text"], ["file", "the text file"]];

/**
 * The way on for a stray argument `arg`: the model (--model, where not given yet) if it looks like
 * one, else the command's text option (--file for an existing file where the command reads one),
 * else the model, else none
 */
function strayArgumentWay(arg: string, options: OptionSpec, modelGiven: boolean): string {
  const model = Object.hasOwn(options, "model") && !modelGiven;
  const modelWay = model ? `the model is given as --model ${arg}` : "this command takes options only; --help lists them";
  if (looksLikeModel(arg)) return modelWay;
  const text = Object.hasOwn(options, "file") && pathKind(arg) === "file" ? TEXT_OPTIONS.at(-1) : TEXT_OPTIONS.find(([o]) => Object.hasOwn(options, o));
  if (text === undefined) return modelWay;
  const value = /[\s"'\\]/.test(arg) ? JSON.stringify(arg) : arg;
  // a value starting with a dash (--help, --text, "-- a" after --) is written --prompt=VALUE: after a
  // space, one that names an option is refused as that option (parseStrict below)
  return `${text[1]} is given as --${text[0]}${arg.startsWith("-") ? "=" : " "}${value}`;
}

function parseStrict(typed: string[], options: OptionSpec, allowPositionals: boolean): { values: ParsedValues; positionals: string[] } {
  const argv = llamaCppSpellings(typed, options);
  const args: string[] = [];
  // what parseArgs would take for an option (or the end of options) rather than a value
  const isOption = (a: string) => a === "--" || a === "-h" || (a.startsWith("--") && (a === "--help" || Object.hasOwn(options, a.slice(2).split("=")[0]!)));
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!, next = argv[i + 1];
    const name = a.startsWith("--") && !a.includes("=") ? a.slice(2) : undefined;
    // a value that starts with a dash (a negative number, "- item", "-v") is the value, as llama.cpp
    // takes the next argument; only one of this command's options is refused as a value (below)
    if (name !== undefined && Object.hasOwn(options, name) && options[name]!.type === "string" && next?.startsWith("-") && !isOption(next)) {
      args.push(`${a}=${next}`);
      i++;
    } else {
      args.push(a);
    }
  }
  try {
    const { values, positionals } = parseArgs({ args, options: { ...options, help: { type: "boolean", short: "h" } }, allowPositionals, strict: true });
    return { values: values as ParsedValues, positionals };
  } catch (e) {
    // Node's own sentence for an unknown option goes on about positional arguments: the first clause says it
    const unknown = /^Unknown option '([^']+)'/.exec((e as Error).message);
    if (unknown) {
      // llama.cpp's older snake_case names (--n_predict, --repeat_penalty) are its dashed ones
      const wanted = unknown[1]!.startsWith("--") ? unknown[1]!.slice(2).replaceAll("_", "-") : undefined;
      const alias = wanted === undefined ? undefined : LLAMA_CPP_ALIASES[`--${wanted}`]?.find((o) => Object.hasOwn(options, o));
      const short = OTHER_TOOLS_SHORT_OPTIONS[unknown[1]!]?.find((o) => Object.hasOwn(options, o));
      const suggestion = alias ?? short ?? (wanted === undefined ? undefined : closest(wanted, Object.keys(options)));
      throw new UsageError(`unknown option ${unknown[1]}${suggestion ? ` (did you mean --${suggestion}?)` : " (--help lists the options)"}`);
    }
    // Node's "Unexpected argument 'X'. This command does not take positional arguments" named no
    // way on: `tsllm inspect model.gguf` (llama.cpp's convert script takes its folder so) wants --model
    const positional = /^Unexpected argument '([\s\S]*)'\. This command does not take positional arguments/.exec((e as Error).message);
    if (positional) {
      // where the command also takes a text (generate's --prompt, pipeline's --input), a stray argument is
      // a model only if it looks like one: `generate -m M hello`, `pipeline TASK "some text"` is the text
      const modelGiven = args.some((a) => a === "--model" || a.startsWith("--model="));
      throw new UsageError(`unexpected argument '${positional[1]!}' (${strayArgumentWay(positional[1]!, options, modelGiven)})`);
    }
    // Node's "Option '--flash-attn <value>' argument missing" named the long option where -fa was
    // typed: the option the user typed last (only the last can lack its value) is named as typed
    const missing = /^Option '(--[^' ]+) <value>' argument missing/.exec((e as Error).message);
    if (missing) {
      const end = typed.indexOf("--");
      const last = (end < 0 ? typed : typed.slice(0, end)).at(-1);
      const name = last !== undefined && (last === missing[1] || `--${aliasTarget(last, options)}` === missing[1]) ? last : missing[1];
      throw new UsageError(`${name} needs a value after it`);
    }
    const switchValue = /^Option '(--[^' ]+)' does not take an argument/.exec((e as Error).message);
    if (switchValue) throw new UsageError(`${switchValue[1]} takes no value: give ${switchValue[1]} alone`);
    // its advice to write --name=-XYZ is on a later line
    const ambiguous = /^Option '(--[^']+)' argument is ambiguous/.exec((e as Error).message);
    if (ambiguous) {
      // named as typed (--temp, not the --temperature it stands for): the first spelling of the
      // option that an option-like argument follows is the one Node stopped at
      const at = typed.findIndex((a, i) => (a === ambiguous[1] || `--${aliasTarget(a, options)}` === ambiguous[1]) && typed[i + 1]?.startsWith("-"));
      const name = at < 0 ? ambiguous[1]! : typed[at]!;
      // a short spelling's -p=VALUE is refused as run together (llama.cpp's way): its long name takes =VALUE
      const write = name.startsWith("--") ? name : ambiguous[1];
      throw new UsageError(`${name} is followed by an option, not its value (for a value that is also an option's name, write ${write}=VALUE)`);
    }
    throw new UsageError((e as Error).message.split("\n")[0]!);
  }
}

/** what a model option (--model, --draft-model, --base) names, for the line that says it is empty */
export const MODEL_MEANING = "a .gguf file, a model folder or a Hub reference org/name";

/**
 * A string option that must be given; an empty one ("$OUT" unset) is said to be empty, naming
 * `meaning`, not called missing: the user did give it
 */
export function requireString(values: ParsedValues, name: string, meaning = "a value"): string {
  const v = values[name];
  if (v === "") throw new UsageError(`--${name} is empty; give ${meaning}`);
  if (typeof v !== "string") throw new UsageError(`--${name} is required`);
  return v;
}

/**
 * A file name to write, as typed. Off Windows a backslash is a character of a file name, not a
 * folder separator: out\model.gguf (a Windows path) would become one file of that name in the
 * working folder, so it is refused, naming the option, rather than guessed at.
 */
export function outputPath(path: string, what: string, platform: NodeJS.Platform = process.platform): string {
  // llama-quantize (and llama.cpp's converter) take "-" as a file name and write a file called "-";
  // read as stdout it would mix a binary GGUF with the command's own lines: refused, with the ways to say either
  if (path === "-") throw new UsageError(`${what} -: "-" is not stdout here (llama-quantize would write a file named "-"); give a file name (${platform === "win32" ? "" : "/dev/stdout to write the GGUF to stdout, "}./- for a file named "-")`);
  if (platform !== "win32" && path.includes("\\")) throw new UsageError(`${what} ${path}: contains a backslash, which is not a folder separator on this system (only / is); write the path with /`);
  return path;
}

/**
 * A second model's option (--draft-model, --base): an empty one ("$DRAFT" unset) is said to be
 * empty before anything is looked up, not found later behind the first model's own errors
 */
export function optionalModel(values: ParsedValues, name: string): string | undefined {
  const v = optionalString(values, name);
  if (v === "") throw new UsageError(`--${name} is empty; give ${MODEL_MEANING}`);
  return v;
}

export function optionalString(values: ParsedValues, name: string): string | undefined {
  const v = values[name];
  return typeof v === "string" ? v : undefined;
}

/**
 * An optional value that may not be empty: `--host "$HOST"` with HOST unset must not quietly mean
 * something else (an empty --host listens on every interface; an empty --api-key locks every client out).
 */
export function optionalNonEmpty(values: ParsedValues, name: string, meaning: string): string | undefined {
  const v = optionalString(values, name);
  if (v === "") throw new UsageError(`--${name} is empty; give ${meaning} or leave the option out`);
  return v;
}

export function flag(values: ParsedValues, name: string): boolean {
  return values[name] === true;
}

export function strings(values: ParsedValues, name: string): string[] | undefined {
  const v = values[name];
  return Array.isArray(v) ? v : undefined;
}

/**
 * Which of a command's repeatable --input values a message is about: "the input" when there is one,
 * else its place (0-based, as the library names a list's inputs) and the start of its text, so that
 * messages about several inputs can be told apart (JSON-quoted: a control character stays escaped)
 */
export function inputLabel(inputs: readonly string[], i: number): string {
  if (inputs.length === 1) return "the input";
  const chars = [...inputs[i]!];
  return `input ${i} (${JSON.stringify(chars.length > 24 ? `${chars.slice(0, 24).join("")}...` : inputs[i])})`;
}

/** a whole number as written in decimal, with an optional sign: 16, -1, +3 */
const INTEGER_TEXT = /^[+-]?\d+$/;
/** a decimal number, with an optional fraction and exponent: 0.5, .5, 5., 1e-3, -2 */
const DECIMAL_TEXT = /^[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?$/;

/** `text` as a decimal number (1e400 is Infinity), or undefined for anything else (hex, blanks, junk, "") */
export function decimalNumber(text: string): number | undefined {
  return DECIMAL_TEXT.test(text) ? Number(text) : undefined;
}

/**
 * check.above: an exclusive lower bound (a penalty divides by its value: 0 is out, any positive number in).
 * Only the text a user means as a number is taken: JavaScript's Number() read "0x10" as 16, "1e2"
 * as 100, " 5 " as 5 and "" as 0, and llama.cpp's std::stoi reads "0x10" as 0 and "1e2" as 1, so
 * neither reading is what was typed; an integer option takes decimal digits, any other a decimal number.
 */
export function optionalNumber(values: ParsedValues, name: string, check?: { integer?: boolean; min?: number; above?: number; max?: number }): number | undefined {
  const v = values[name];
  if (v === undefined) return undefined;
  const text = String(v);
  if (check?.integer && !INTEGER_TEXT.test(text)) throw new UsageError(`--${name} expects an integer (decimal digits, optionally signed), got "${text}"`);
  const n = decimalNumber(text);
  if (typeof v !== "string" || n === undefined) throw new UsageError(`--${name} expects a decimal number (such as 0.5, -2 or 1e-3), got "${text}"`);
  if (!Number.isFinite(n)) throw new UsageError(`--${name} expects a finite number, got "${text}"`);
  // a safe one: past 2^53 two values are one
  if (check?.integer && !Number.isSafeInteger(n)) throw new UsageError(`--${name} expects an integer from ${Number.MIN_SAFE_INTEGER} to ${Number.MAX_SAFE_INTEGER}, got ${v}`);
  if (check?.min !== undefined && n < check.min) throw new UsageError(`--${name} must be >= ${check.min}, got ${v}`);
  if (check?.above !== undefined && !(n > check.above)) throw new UsageError(`--${name} must be > ${check.above}, got ${v}`);
  if (check?.max !== undefined && n > check.max) throw new UsageError(`--${name} must be <= ${check.max}, got ${v}`);
  return n;
}

/** the bytes of the two characters after `\x` that C's strtol(_, _, 16) reads whole, else undefined */
function strtolTwoHex(a: number, b: number): number | undefined {
  const hex = (c: number) => (c >= 0x30 && c <= 0x39 ? c - 0x30 : c >= 0x41 && c <= 0x46 ? c - 0x37 : c >= 0x61 && c <= 0x66 ? c - 0x57 : -1);
  const digit = hex(b);
  if (digit < 0) return undefined;
  if (hex(a) >= 0) return hex(a) * 16 + digit;
  // strtol skips leading white space (isspace: space, \t \n \v \f \r) and takes a sign: " 5", "+5", "-5"
  if (a === 0x20 || (a >= 0x09 && a <= 0x0d) || a === 0x2b) return digit;
  if (a === 0x2d) return (256 - digit) & 0xff; // char(-5): the byte 0xfb
  return undefined;
}

/** \n \r \t \' \" \\ : the byte after the backslash and the byte it stands for */
const SIMPLE_ESCAPES = new Map<number, number>([[0x6e, 0x0a], [0x72, 0x0d], [0x74, 0x09], [0x27, 0x27], [0x22, 0x22], [0x5c, 0x5c]]);

/**
 * llama.cpp's escapes in text typed on a command line (string_process_escapes, which its tools run
 * on -p, -r and llama-tokenize's prompt unless --no-escape): \n \r \t \' \" \\ and \xHH (two
 * characters strtol reads as hex) become the character or byte; any other backslash, a trailing one
 * too, stays as typed. It works on the UTF-8 bytes, so \xc3\xa9 is "é"; bytes that are not UTF-8
 * are refused naming `what`, where llama.cpp would tokenize them as replacement characters.
 */
export function processEscapes(text: string, what: string): string {
  if (!text.includes("\\")) return text;
  const input = Buffer.from(text, "utf8");
  const out = Buffer.alloc(input.length);
  let n = 0;
  for (let i = 0; i < input.length; i++) {
    if (input[i] !== 0x5c || i + 1 >= input.length) { out[n++] = input[i]!; continue; }
    const c = input[++i]!;
    const simple = SIMPLE_ESCAPES.get(c);
    const byte = simple ?? (c === 0x78 && i + 2 < input.length ? strtolTwoHex(input[i + 1]!, input[i + 2]!) : undefined);
    if (simple !== undefined) out[n++] = simple;
    else if (byte !== undefined) { out[n++] = byte; i += 2; }
    else { out[n++] = 0x5c; out[n++] = c; }
  }
  try {
    return new TextDecoder("utf-8", { fatal: true, ignoreBOM: true }).decode(out.subarray(0, n));
  } catch {
    throw new UsageError(`${what}: its \\x escapes make bytes that are not UTF-8 text; give whole UTF-8 sequences (\\xc3\\xa9 for "é") or the characters themselves, or --no-escape to keep backslashes as typed`);
  }
}

/**
 * --escape (-e, llama.cpp's default) and --no-escape: whether command-line text goes through
 * processEscapes; both given contradict each other
 */
export function escapesOption(values: ParsedValues): boolean {
  if (flag(values, "escape") && flag(values, "no-escape")) throw new UsageError("--escape and --no-escape contradict each other: give one (escapes are processed unless --no-escape)");
  return !flag(values, "no-escape");
}

/** the escape options, as llama.cpp's common options name them */
export const ESCAPE_ARGS: OptionSpec = { escape: { type: "boolean" }, "no-escape": { type: "boolean" } };

/** more values than any benchmark sweep runs: a range such as 1-1000000000 is a typo, not a plan */
const MAX_LIST_VALUES = 1000;

/**
 * A count or a list of counts, as llama-bench reads -p / -n: items separated by commas, each N,
 * FIRST-LAST (every integer between, both included), FIRST-LAST+STEP or FIRST-LAST*FACTOR
 * (16-128*2 is 16,32,64,128). Values in the order given, a repeated one once; undefined when the
 * option is absent. A step that makes no progress (+0, *1) is refused, as llama-bench refuses it.
 */
export function optionalCountList(values: ParsedValues, name: string, check: { min: number }): number[] | undefined {
  const v = values[name];
  if (v === undefined) return undefined;
  const text = String(v);
  const out = new Set<number>();
  for (const item of text.split(",")) {
    const m = /^\s*(-?\d+)(?:-(\d+)(?:([+*])(\d+))?)?\s*$/.exec(item);
    if (!m) throw new UsageError(`--${name} expects a number or a list as llama-bench takes it (e.g. 128, 16,32 or 16-128*2), got "${text}"`);
    const [first, last, step] = [Number(m[1]), Number(m[2] ?? m[1]), Number(m[4] ?? 1)];
    const op = m[3] ?? "+";
    if (![first, last, step].every(Number.isSafeInteger)) throw new UsageError(`--${name} expects integers, got "${text}"`);
    if (m[2] !== undefined && (op === "+" ? step < 1 : step < 2 || first < 1)) throw new UsageError(`--${name}: the range ${item.trim()} never reaches its end (a step must be at least +1 or *2, from 1 up)`);
    for (let i = first; i <= last; i = op === "+" ? i + step : i * step) {
      if (i < check.min) throw new UsageError(`--${name} must be >= ${check.min}, got ${String(i) === text.trim() ? i : `${i} (in "${text}")`}`);
      out.add(i);
      if (out.size > MAX_LIST_VALUES) throw new UsageError(`--${name} "${text}" holds more than ${MAX_LIST_VALUES} values; give fewer`);
    }
    if (first > last) throw new UsageError(`--${name}: the range ${item.trim()} ends before it starts`);
  }
  return [...out];
}

/**
 * --threads: 0 or less (-1 is the documented one), or absent, for the default (all cores), as
 * llama.cpp's -t (and llama-bench's) take any N <= 0 for the hardware's thread count; at most the
 * machine's cores (more only oversubscribe them: a worker per thread, each polling), with a
 * warning on stderr when capped.
 */
export function threadsOption(values: ParsedValues): number | undefined {
  const n = optionalNumber(values, "threads", { integer: true });
  if (n === undefined || n <= 0) return undefined;
  const cores = availableParallelism();
  if (n <= cores) return n;
  printWarning(`--threads ${n} is more than the ${cores} cores of this machine; using ${cores}`);
  return cores;
}

/**
 * A size in bytes as typed: 268435456, 512M, 256MiB, 1G (K/M/G/T are powers of 1024, as
 * llama.cpp's sizes); `zero` allows 0 (a margin may be none, a pool may not).
 */
export function parseBytes(text: string, flag: string, check?: { zero?: boolean }): number {
  const m = /^(\d+(?:\.\d+)?)\s*([kmgt]?)(i?b?)$/i.exec(text.trim());
  if (!m) throw new UsageError(`--${flag} expects a size in bytes (e.g. 268435456, 256MiB, 1G), got "${text}"`);
  const power = { "": 0, k: 1, m: 2, g: 3, t: 4 }[m[2]!.toLowerCase() as "" | "k" | "m" | "g" | "t"];
  const base = m[3]!.toLowerCase().startsWith("i") || m[2] !== "" ? 1024 : 1;
  const bytes = Math.floor(Number(m[1]) * base ** power);
  if (!(bytes > 0) && !(check?.zero && bytes === 0)) throw new UsageError(`--${flag} must be ${check?.zero ? "0 or more" : "positive"}, got "${text}"`);
  if (!Number.isSafeInteger(bytes)) throw new UsageError(`--${flag} expects at most ${Number.MAX_SAFE_INTEGER} bytes, got "${text}"`);
  return bytes;
}

/**
 * --memory-margin SIZE: the free memory automatic sizes (--ctx-size auto, the default KV pool) leave
 * unused, as llama.cpp's --fit-target; absent, loadModel reads TSLLM_MEMORY_MARGIN, else 1 GiB.
 */
export function memoryMarginOption(values: ParsedValues): number | undefined {
  const v = optionalString(values, "memory-margin");
  return v === undefined ? undefined : parseBytes(v, "memory-margin", { zero: true });
}

/** --backend: wasm, reference or webgpu (undefined: the default, wasm) */
export function backendOption(values: ParsedValues): BackendName | undefined {
  const backend = optionalString(values, "backend");
  if (backend !== undefined && backend !== "wasm" && backend !== "reference" && backend !== "webgpu") throw new UsageError(`--backend must be wasm, reference or webgpu, got "${backend}"`);
  return backend;
}
