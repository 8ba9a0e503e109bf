import { printable } from "../units/index.js";

/** characters of an error line kept: names and values quoted from a file can be megabytes long */
const MAX_MESSAGE = 2000;

function shortened(text: string): string {
  return text.length <= MAX_MESSAGE ? text : `${text.slice(0, MAX_MESSAGE - 200)}... (${text.length - MAX_MESSAGE + 200} more characters)`;
}

/**
 * What a FileFieldError is: a model file whose content is refused (`invalid_model`), or one the
 * system could not read (`model_unreadable`: permissions, an I/O error), the retryable kind.
 */
export type FileFieldErrorCode = "invalid_model" | "model_unreadable";

/**
 * A file that is not what it should be: `path: field: what is wrong`, with control characters
 * escaped (field names and values come from the file). The format-specific errors extend it, and
 * it is exported with them: every problem with a model's files is caught by this one class, told
 * apart by `code`, `path` and `field` rather than by the message's text.
 */
export class FileFieldError extends Error {
  constructor(
    /** the file */ readonly path: string,
    /** the field refused, or "file" for the file as a whole */ readonly field: string,
    message: string,
    readonly code: FileFieldErrorCode = "invalid_model",
  ) {
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
  if (code === "EISDIR") return new FileFieldError(path, "file", "is a folder, not a file");
  if (code === "ENOTREG") return new FileFieldError(path, "file", e.message);
  return new FileFieldError(path, "file", `cannot be read: ${e.message}`, "model_unreadable");
}
