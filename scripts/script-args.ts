/**
 * The command line of a script under scripts/, read as tsllm's own commands read theirs
 * (src/cli/args.ts): `--help` / `-h` prints the script's usage and exits 0 before anything is
 * measured or written; an unknown option or a bad value is one line on stderr and exit 2, not a
 * stack trace. test/scripts-docs.test.ts runs every script the docs name with --help and checks
 * that the options the docs show are in its usage.
 */
import path from "node:path";
import { parseWithPositionals, UsageError, type OptionSpec, type ParsedValues } from "../src/cli/args.js";

/**
 * Parses `argv` against `options` and hands the values (and positionals) to `read`, whose result
 * is returned; `read` may throw UsageError for a bad value. `usage` is printed for --help.
 */
export function scriptOptions<T>(usage: string, options: OptionSpec, read: (values: ParsedValues, positionals: string[]) => T, argv = process.argv.slice(2)): T {
  const name = path.basename(process.argv[1] ?? "script");
  try {
    const { values, positionals } = parseWithPositionals(argv, options);
    if (values["help"] === true) {
      process.stdout.write(usage.endsWith("\n") ? usage : `${usage}\n`);
      process.exit(0);
    }
    return read(values, positionals);
  } catch (e) {
    if (!(e instanceof UsageError)) throw e;
    process.stderr.write(`${name}: ${e.message}${e.message.includes("--help") ? "" : " (--help shows the usage)"}\n`);
    process.exit(2);
  }
}

/** refuses positional arguments where a script takes none */
export function noPositionals(positionals: string[]): void {
  if (positionals.length > 0) throw new UsageError(`unexpected argument ${JSON.stringify(positionals[0])}`);
}
