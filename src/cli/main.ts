#!/usr/bin/env node
import { readFileSync } from "node:fs";
import { printable } from "../units/index.js";
import { UsageError } from "./args.js";
import { COMMANDS } from "./commands.js";

const usage = `Usage: tsllm <command> [options]   (tsllm --version)

Commands:
${Object.entries(COMMANDS).map(([name, c]) => `  ${name.padEnd(10)} ${c.summary}`).join("\n")}

Run "tsllm <command> --help" for a command's options.
`;

async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  if (command === undefined || command === "--help" || command === "-h" || command === "help") {
    process.stdout.write(usage);
    return command === undefined ? 2 : 0;
  }
  if (command === "--version" || command === "-V") {
    // package.json is two folders up from both src/cli/ and dist/cli/
    const pkg = JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as { version: string };
    process.stdout.write(`tsllm ${pkg.version}\n`);
    return 0;
  }
  const cmd = Object.hasOwn(COMMANDS, command) ? COMMANDS[command] : undefined;
  if (!cmd) throw new UsageError(`unknown command "${command}" (commands: ${Object.keys(COMMANDS).join(", ")})`);
  await cmd.run(rest);
  return 0;
}

main(process.argv.slice(2)).then(
  (code) => { process.exitCode = code; },
  (err: unknown) => {
    const message = err instanceof Error ? err.message : String(err);
    process.stderr.write(`tsllm: error: ${printable(message)}\n`);
    process.exitCode = err instanceof UsageError ? 2 : 1;
  },
);
