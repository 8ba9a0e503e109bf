import { printable } from "../units/index.js";

/**
 * A file that is not what it should be: `path: field: what is wrong`, with control characters
 * escaped (field names and values come from the file). The format-specific errors extend it.
 */
export class FileFieldError extends Error {
  constructor(path: string, field: string, message: string) {
    super(printable(`${path}: ${field}: ${message}`));
    this.name = "FileFieldError";
  }
}
