import { printable } from "../units/index.js";

/** characters of an error line kept: names and values quoted from a file can be megabytes long */
const MAX_MESSAGE = 2000;

function shortened(text: string): string {
  return text.length <= MAX_MESSAGE ? text : `${text.slice(0, MAX_MESSAGE - 200)}... (${text.length - MAX_MESSAGE + 200} more characters)`;
}

/**
 * A file that is not what it should be: `path: field: what is wrong`, with control characters
 * escaped (field names and values come from the file). The format-specific errors extend it.
 */
export class FileFieldError extends Error {
  constructor(path: string, field: string, message: string) {
    super(shortened(printable(`${path}: ${field}: ${message}`)));
    this.name = "FileFieldError";
  }
}

/**
 * A failure of the system call reading `path` (a folder where a file should be, an I/O error) as a
 * FileFieldError naming the file: Node's own message for a failed read() names no file
 * ("EISDIR: illegal operation on a directory, read"). Any other error is returned as it is.
 */
export function readFailure(path: string, e: unknown): unknown {
  const code = (e as { code?: unknown } | undefined)?.code;
  if (!(e instanceof Error) || typeof code !== "string" || !/^E[A-Z]+$/.test(code)) return e;
  const why = code === "EISDIR" ? "is a folder, not a file" : code === "ENOTREG" ? e.message : `cannot be read: ${e.message}`;
  return new FileFieldError(path, "file", why);
}
