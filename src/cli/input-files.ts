import { constants } from "node:buffer";
import { closeSync, fstatSync, openSync, readSync, statSync } from "node:fs";
import { PassThrough, type Readable } from "node:stream";
import { printable } from "../units/index.js";
import { MODEL_MEANING, optionalNonEmpty, UsageError, type ParsedValues } from "./args.js";
import { resolveInterruptibly } from "./interrupt.js";

// ignoreBOM keeps a leading BOM in the text, as Buffer's utf8 reading did: perplexity scores it
// as llama.cpp does; generate's --file drops it itself, as llama.cpp's -f
const strictUtf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });
const lenientUtf8 = new TextDecoder("utf-8", { ignoreBOM: true });

/** where in `bytes` the first byte that no UTF-8 character holds is (bytes fail strict decoding) */
function firstInvalidByte(bytes: Uint8Array): number {
  // the text before the first invalid sequence decodes the same either way: the first U+FFFD
  // not written as its own three bytes (EF BF BD) is that sequence's replacement
  const text = lenientUtf8.decode(bytes);
  let offset = 0;
  for (const ch of text) {
    if (ch === "\uFFFD" && !(bytes[offset] === 0xef && bytes[offset + 1] === 0xbf && bytes[offset + 2] === 0xbd)) return offset;
    offset += Buffer.byteLength(ch);
  }
  return offset;
}

/**
 * A file's bytes as UTF-8 text, or an error naming `where`: a Latin-1 or UTF-16 file read
 * leniently became U+FFFD characters, whose tokens are neither the file's bytes (what llama.cpp
 * tokenizes) nor its text, so the prompt or the perplexity was of another text without a word.
 */
export function decodeUtf8(bytes: Uint8Array, where: string): string {
  try {
    return strictUtf8.decode(bytes);
  } catch {
    throw notUtf8(where, bytes, 0);
  }
}

/** the bytes a UTF-8 character whose first byte is `lead` holds (RFC 3629; the lead of a valid prefix) */
function utf8Length(lead: number): number {
  return lead >= 0xf0 ? 4 : lead >= 0xe0 ? 3 : 2;
}

/**
 * the error for `bytes` (the input from byte `base` on), which hold an invalid sequence, told apart
 * as Python's bytes.decode("utf-8") tells them: a byte that starts no character ("invalid start
 * byte"), a character's first bytes followed by a byte that cannot continue it ("invalid
 * continuation byte": Latin-1's "é " is E9 20), or an input cut off inside a character
 * ("unexpected end of data"), which no conversion from another encoding mends
 */
function notUtf8(where: string, bytes: Uint8Array, base: number): Error {
  const at = firstInvalidByte(bytes);
  const hex = (i: number) => `0x${bytes[i]!.toString(16).padStart(2, "0").toUpperCase()}`;
  // a streaming strict decoder holds a character's first bytes without a word and throws at the
  // first byte that no character can hold there: the bytes it held from `at` on are a character's start
  const holds = (end: number) => {
    try {
      return new TextDecoder("utf-8", { fatal: true }).decode(bytes.subarray(at, end), { stream: true }) === "";
    } catch {
      return false;
    }
  };
  let end = at + 1; // the first byte after those the decoder holds from `at` on
  while (end <= bytes.length && end - at <= 4 && holds(end)) end++;
  const held = end - 1 - at;
  if (at + held === bytes.length) {
    return new Error(`${where}: not UTF-8 text: it ends inside a character (byte ${base + at}, ${hex(at)}, starts a ${utf8Length(bytes[at]!)}-byte character and the input ends after ${held} of its bytes); was it cut off?`);
  }
  const convert = "convert it to UTF-8 first, e.g. iconv -f latin1 -t utf-8";
  if (held === 0) return new Error(`${where}: not UTF-8 text (byte ${base + at}, ${hex(at)}, starts no UTF-8 character); ${convert}`);
  const bad = at + held;
  return new Error(`${where}: not UTF-8 text (byte ${base + at}, ${hex(at)}, starts a ${utf8Length(bytes[at]!)}-byte character, but byte ${base + bad}, ${hex(bad)}, cannot continue it: invalid continuation byte); ${convert}`);
}

/**
 * A byte stream (chat's piped stdin) as UTF-8 text for a line reader, decoded as it comes and as
 * strictly as decodeUtf8: at the first byte no UTF-8 character holds, the lines before it go on,
 * the line holding it and the rest do not, the text ends, and `failure()` is the error naming
 * `where` and the byte's offset in the whole input. Read leniently, such bytes became U+FFFD
 * characters silently, as a text file once did.
 */
export function utf8Lines(input: Readable, where: string, maxLineBytes = MAX_TEXT_BYTES): { text: PassThrough; failure: () => Error | undefined; stop: () => void } {
  const text = new PassThrough({ encoding: "utf8" });
  const decoder = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });
  let decoded = 0; // bytes of the input decoded into text so far
  let held: Buffer = Buffer.alloc(0); // the bytes after those: a character's first bytes, which the decoder holds
  let failure: Error | undefined;
  // the line being read, held back until its line break: a failure never hands the reader half a
  // line (which it would take for a whole one at the end), and a line too long is never passed on
  let line = "";
  let lineBytes = 0;
  const finish = (rest: string, e: Error) => {
    failure = e;
    text.end(rest);
    input.removeListener("data", onData);
    input.destroy(); // nothing more of it is read
  };
  const fail = (bytes: Buffer) => {
    // the lines before the invalid byte; the one holding it is cut off, not sent in part
    const before = lenientUtf8.decode(bytes.subarray(0, firstInvalidByte(bytes)));
    const end = Math.max(before.lastIndexOf("\n"), before.lastIndexOf("\r")) + 1;
    finish(end > 0 ? line + before.slice(0, end) : "", notUtf8(where, bytes, decoded));
  };
  const onData = (chunk: Buffer | string) => {
    const bytes = Buffer.concat([held, typeof chunk === "string" ? Buffer.from(chunk) : chunk]);
    let out: string;
    try {
      out = decoder.decode(typeof chunk === "string" ? Buffer.from(chunk) : chunk, { stream: true });
    } catch {
      fail(bytes);
      return;
    }
    const used = Buffer.byteLength(out);
    decoded += used;
    held = bytes.subarray(used);
    const end = Math.max(out.lastIndexOf("\n"), out.lastIndexOf("\r")) + 1;
    if (end > 0) {
      text.write(line + out.slice(0, end));
      line = out.slice(end);
      lineBytes = Buffer.byteLength(line);
    } else {
      line += out;
      lineBytes += used;
    }
    // readline's own buffer threw "Invalid string length", a stack trace, at /dev/zero
    if (lineBytes > maxLineBytes) finish("", new Error(`${where}: a line of more than ${maxLineBytes} bytes (from byte ${decoded - lineBytes}); give shorter lines`));
  };
  input.on("data", onData);
  input.on("end", () => {
    if (failure) return;
    try {
      text.end(line + decoder.decode());
    } catch {
      fail(held); // the input ended inside a character
    }
  });
  input.on("error", (e: Error) => text.destroy(e));
  // reading no more: a flowing input (stdin) kept the process alive after the command's end
  const stop = () => { input.removeListener("data", onData); input.pause(); };
  return { text, failure: () => failure, stop };
}

/**
 * The most bytes a text read here may have: the longest string JavaScript holds (an ASCII text of
 * more could not be one). `--file /dev/zero` (or `< /dev/zero`) was read without end, past 4 GB of
 * memory in 40 s; a regular file of more is refused by its size, before any is read.
 */
const MAX_TEXT_BYTES = constants.MAX_STRING_LENGTH;

function tooLong(where: string): Error {
  return new Error(`${where}: more than ${MAX_TEXT_BYTES} bytes, the longest text a JavaScript string holds; give a smaller text`);
}

/** appends `chunk` to `chunks` unless that makes more than MAX_TEXT_BYTES, the count so far given */
function addChunk(chunks: Buffer[], total: number, chunk: Buffer, where: string): number {
  if (total + chunk.length > MAX_TEXT_BYTES) throw tooLong(where);
  chunks.push(chunk);
  return total + chunk.length;
}

/** a file's bytes, at most MAX_TEXT_BYTES of them (a device or FIFO read until it ends or passes that) */
function readBounded(path: string, where: string): Buffer {
  const fd = openSync(path, "r");
  try {
    if (fstatSync(fd).size > MAX_TEXT_BYTES) throw tooLong(where);
    const chunks: Buffer[] = [];
    let total = 0;
    for (;;) {
      const buf = Buffer.allocUnsafe(1 << 20);
      const n = readSync(fd, buf, 0, buf.length, null);
      if (n === 0) return Buffer.concat(chunks, total);
      total = addChunk(chunks, total, buf.subarray(0, n), where);
    }
  } finally {
    closeSync(fd);
  }
}

/**
 * The UTF-8 text of the file a flag names (--file, --grammar, --chat-template, ...): one line
 * naming the flag and the path when it is missing, a folder, unreadable or not UTF-8 (exit 1,
 * as a --model that is not found: the command line was well formed, the file is not usable).
 */
export function readTextFile(path: string, flag: string): string {
  // "$FILE" unset: "--file : no such file" named the flag with a blank where the path goes
  if (path === "") throw new UsageError(`${flag} is empty; give a file name`);
  const where = `${flag} ${path}`;
  let bytes: Buffer;
  try {
    bytes = readBounded(path, where);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === undefined) throw e; // too long: said already
    throw new Error(`${where}: ${code === "ENOENT" ? "no such file" : code === "EISDIR" ? "it is a folder, not a text file" : `cannot be read (${printable((e as Error).message)})`}`);
  }
  return decodeUtf8(bytes, where);
}

/** all of stdin as UTF-8 text (`--file -`, or a prompt piped in), `where` naming it in errors */
export async function readStdinText(where: string): Promise<string> {
  const chunks: Buffer[] = [];
  let total = 0;
  for await (const chunk of process.stdin) total = addChunk(chunks, total, chunk as Buffer, where);
  return decodeUtf8(Buffer.concat(chunks, total), where);
}

/**
 * readTextFile, with `-` for stdin, as the GNU tools take it; a terminal there is refused (it
 * waited, with no prompt, for text typed up to Ctrl-D: the command looked hung)
 */
export async function readTextInput(path: string, flag: string): Promise<string> {
  if (path !== "-") return readTextFile(path, flag);
  if (process.stdin.isTTY) throw new UsageError(`${flag} -: stdin is a terminal, not a pipe or a file (pipe the text in, e.g. cat FILE | tsllm ... ${flag} -, or give ${flag} FILE)`);
  return readStdinText(`${flag} - (stdin)`);
}

/**
 * A prompt or text read from a file or a pipe as llama.cpp's -f reads it: a leading BOM is an
 * encoding mark, not text, and the one line break that ends a file (echo's, an editor's) is
 * dropped, so `echo Once | tsllm generate` and `--prompt Once` tokenize the same. A CRLF ending
 * goes whole; line breaks inside stay as written.
 */
export function fileText(text: string): string {
  return text.replace(/^\uFEFF/, "").replace(/\r?\n$/, "");
}

/**
 * A file an option names that its reader opens later (convert / quantize --vocab), checked up
 * front so that a missing one or a folder is one line naming the option: the reader's own
 * failure was Node's "ENOENT: no such file or directory, open '...'", which names no option.
 */
export function existingFile(path: string, flag: string): string {
  if (path === "") throw new UsageError(`${flag} is empty; give a file name`);
  const where = `${flag} ${path}`;
  let isFolder: boolean;
  try {
    isFolder = statSync(path).isDirectory();
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    throw new Error(`${where}: ${code === "ENOENT" || code === "ENOTDIR" ? "no such file" : `cannot be read (${printable((e as Error).message)})`}`);
  }
  if (isFolder) throw new Error(`${where}: it is a folder, not a file`);
  return path;
}

/** --vocab FILE (convert, quantize): a file that is there, checked before any work, named by the option */
export function vocabOption(values: ParsedValues): string | undefined {
  const vocab = optionalNonEmpty(values, "vocab", "a GGUF file holding the tokenizer");
  return vocab === undefined ? undefined : existingFile(vocab, "--vocab");
}

/**
 * A second model a flag names (--draft-model, --base), found before any model loads: a missing
 * one was "model not found: ..." after the first model had loaded, naming no flag. A hub one is
 * downloaded as `command`'s --model is (resolveInterruptibly): Ctrl-C or SIGTERM during it killed
 * the process by the signal, its locks left behind and nothing said.
 */
export function modelNamedBy(command: string, flag: string, ref: string, requestedStop?: (signal: NodeJS.Signals) => string): Promise<string> {
  if (ref === "") return Promise.reject(new UsageError(`${flag} is empty; give ${MODEL_MEANING}`));
  return resolveInterruptibly(command, ref, requestedStop).catch((e: unknown) => {
    throw new Error(`${flag}: ${e instanceof Error ? e.message : String(e)}`);
  });
}

/**
 * A failure about the file a flag names (a second model, a --vocab GGUF), found while the library
 * read it beside others: its message starts with that file's path, and now with the flag too
 * ("--draft-model: DIR/config.json: file: not found ..."), as the user gave the file by the flag
 */
export function namedByFlag(e: unknown, flag: string, file: string): unknown {
  if (e instanceof Error && e.message.startsWith(file)) e.message = `${flag}: ${e.message}`;
  return e;
}
