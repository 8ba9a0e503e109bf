/**
 * Errors across the worker boundary. postMessage copies an Error as a plain Error (a class of the
 * library's lost its prototype and fields), so the worker sends what a page needs to rebuild it —
 * message, name and the error's own fields (an OptionError's `option`, a RequestError's `code`) —
 * and the page makes it an instance of the same exported class again: `e instanceof OptionError`
 * holds on a page as it does in Node.
 */
import { ChatTemplateError, NoChatTemplateError } from "../chat/index.js";
import { RequestError } from "../engine/errors.js";
import { FileFieldError } from "../formats/errors.js";
import { GGUFError } from "../formats/gguf-reader.js";
import { DisposedError, OptionError } from "../units/index.js";

/** an error as the worker sends it */
export interface SentError {
  message: string;
  /** the Error's name ("OptionError", "RequestError", "AbortError" for an aborted load, ...) */
  name?: string;
  /** its own fields of plain values or lists of them, as the class set them (`option`, `code`, `reason`, NoChatTemplateError's `names`) */
  fields?: Record<string, PlainField>;
}

type Plain = string | number | boolean;
type PlainField = Plain | Plain[];

const isPlain = (value: unknown): value is Plain => typeof value === "string" || typeof value === "number" || typeof value === "boolean";

/** the library's exported error classes a page can meet (browser/index.ts exports them), by name */
const CLASSES: Record<string, new (...args: never[]) => Error> = { OptionError, RequestError, DisposedError, ChatTemplateError, NoChatTemplateError, FileFieldError, GGUFError };

/** what the page needs of a thrown value to rebuild it */
export function sentError(err: unknown): SentError {
  if (!(err instanceof Error)) return { message: String(err) };
  const fields: Record<string, PlainField> = {};
  for (const [key, value] of Object.entries(err)) {
    if (key === "name" || key === "message") continue;
    if (isPlain(value)) fields[key] = value;
    else if (Array.isArray(value) && value.every(isPlain)) fields[key] = [...value];
  }
  return { message: err.message, name: err.name, ...(Object.keys(fields).length > 0 ? { fields } : {}) };
}

/**
 * The error again on the page: an instance of the library's class of that name (made without its
 * constructor, whose arguments differ from class to class and may compose the message), else an
 * Error with that name; the fields as the worker's error had them.
 */
export function rebuiltError(sent: SentError): Error {
  const cls = sent.name !== undefined && Object.hasOwn(CLASSES, sent.name) ? CLASSES[sent.name] : undefined;
  const error = (cls ? Reflect.construct(Error, [sent.message], cls) : new Error(sent.message)) as Error;
  if (sent.name !== undefined) error.name = sent.name;
  return Object.assign(error, sent.fields);
}
