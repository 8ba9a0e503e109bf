#!/usr/bin/env node
import { readFileSync } from "node:fs";
import { NoChatTemplateError } from "../chat/index.js";
import { closest, printable } from "../units/index.js";
import { takesOption, UsageError } from "./args.js";
import { COMMANDS, type Command } from "./commands.js";

const usage = `Usage: tsllm <command> [options]   (tsllm --version)

Commands:
${Object.entries(COMMANDS).map(([name, c]) => `  ${name.padEnd(10)} ${c.summary}`).join("\n")}

Run "tsllm <command> --help" or "tsllm help <command>" for a command's options. llama.cpp's
spellings of them work too (-m -p -f -n -c -b -t -s -sys -ctk -ctv -fa -r -e, --temp, --n-predict);
-ngl is taken and ignored. Escapes in the prompt (\\n, \\t, \\xHH), typed with -p or read with -f or
from stdin, are processed, as llama.cpp does, unless --no-escape.
`;

/** ollama's and llama.cpp's names for tsllm's commands (ollama run, ollama pull, llama-server, ...) */
const OTHER_TOOLS_NAMES: Record<string, string> = { run: "chat", pull: "download", list: "ls", show: "inspect", server: "serve", completion: "generate", cli: "chat" };

async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  // `tsllm help generate`, as `git help` / `ollama help run`: that command's help, not the list
  if (command === "help" && rest.length > 0) {
    if (rest.length > 1) throw new UsageError(`unexpected argument '${rest[1]}' (help takes one command: tsllm help ${rest[0]})`);
    process.stdout.write(commandNamed(rest[0]!).help);
    return 0;
  }
  if (command === undefined || command === "--help" || command === "-h" || command === "help") {
    process.stdout.write(usage);
    return command === undefined ? 2 : 0;
  }
  // -v as node -v, npm -v and ollama -v: no command takes it, and here it can mean nothing else
  if (command === "--version" || command === "-V" || command === "-v") {
    // `tsllm --version extra` printed the version and dropped the rest, as no command does
    if (rest.length > 0) throw new UsageError(`unexpected argument '${rest[0]}' (${command} takes no arguments)`);
    // package.json is two folders up from both src/cli/ and dist/cli/
    const pkg = JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as { version: string };
    process.stdout.write(`tsllm ${pkg.version}\n`);
    return 0;
  }
  const status = await commandNamed(command).run(rest);
  return typeof status === "number" ? status : 0;
}

/** the command `name`, else a usage error naming the closest one (or the other tool's name for it) */
function commandNamed(name: string): Command {
  const cmd = Object.hasOwn(COMMANDS, name) ? COMMANDS[name] : undefined;
  if (cmd) return cmd;
  if (name.startsWith("-")) {
    // the advice is a command that takes the option (`tsllm convert --verbose`); `tsllm generate -v`
    // was refused in its turn, and `tsllm --versio` meant no command at all
    const taking = Object.keys(COMMANDS).filter((c) => takesOption(name, COMMANDS[c]!.options));
    const commands = `(commands: ${Object.keys(COMMANDS).join(", ")})`;
    if (taking.length > 0) throw new UsageError(`tsllm takes a command first, then its options: tsllm ${taking.includes("generate") ? "generate" : taking[0]} ${name} ... ${commands}`);
    const own = name.startsWith("--") ? closest(name.slice(2).split("=")[0]!, ["version", "help"]) : undefined;
    throw new UsageError(`unknown option ${name}${own ? ` (did you mean --${own}?)` : `: tsllm takes a command first, then its options ${commands}`}`);
  }
  const suggestion = Object.hasOwn(OTHER_TOOLS_NAMES, name) ? OTHER_TOOLS_NAMES[name] : closest(name, Object.keys(COMMANDS));
  throw new UsageError(`unknown command "${name}"${suggestion ? ` (did you mean "${suggestion}"?)` : ` (commands: ${Object.keys(COMMANDS).join(", ")})`}`);
}

/**
 * The status of a command whose reader went away (`tsllm generate ... | head`): 128 + SIGPIPE (13),
 * what a shell reports for GNU tools and llama.cpp, which the signal kills. Node ignores SIGPIPE, so
 * here the write fails with EPIPE instead, and the process cannot die by the signal itself.
 */
const EXIT_BROKEN_PIPE = 141;

// Once stdout (or stderr) is closed nothing more can be shown: stop every command's work at once,
// quietly, as the signal would have, instead of an unhandled 'error' event's stack trace. Any other
// failed write (a full disk under `> file`) is an error like the others: one line, exit 1.
for (const stream of [process.stdout, process.stderr]) {
  stream.on("error", (err: NodeJS.ErrnoException) => {
    if (err.code !== "EPIPE" && stream === process.stdout) process.stderr.write(`tsllm: error: cannot write the output: ${printable(err.message)}\n`);
    process.exit(err.code === "EPIPE" ? EXIT_BROKEN_PIPE : 1);
  });
}

/**
 * Whether the command line asks a command that has --json for JSON: its failure is then also one
 * JSON object on stdout, so a script reading stdout (`| jq`) gets a value, not nothing. Every
 * --json command writes its one result at its end, so a failed one has written nothing there.
 */
function wantsJson(argv: readonly string[]): boolean {
  const [command, ...rest] = argv;
  const cmd = command !== undefined && Object.hasOwn(COMMANDS, command) ? COMMANDS[command] : undefined;
  return cmd !== undefined && Object.hasOwn(cmd.options, "json") && rest.includes("--json");
}

main(process.argv.slice(2)).then(
  (code) => { process.exitCode = code; },
  (err: unknown) => {
    // the library's error names its chatTemplate option; here the remedy is the flag
    const message = err instanceof NoChatTemplateError ? `${err.reason}; give one with --chat-template FILE${err.names.length > 0 ? " or name one with --chat-template-name NAME" : ""}` : err instanceof Error ? err.message : String(err);
    const usage = err instanceof UsageError;
    process.stderr.write(`tsllm: error: ${printable(message)}\n`);
    if (wantsJson(process.argv.slice(2))) process.stdout.write(JSON.stringify({ error: { message, type: usage ? "usage_error" : "error" } }) + "\n");
    process.exitCode = usage ? 2 : 1;
  },
);
