import { readFileSync, statSync } from "node:fs";
import { resolveModelReference } from "../hub/index.js";
import { printable } from "../units/index.js";
import { optionalNonEmpty, type ParsedValues } from "./args.js";

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
    const at = firstInvalidByte(bytes);
    throw new Error(`${where}: not UTF-8 text (byte ${at}, 0x${bytes[at]!.toString(16).padStart(2, "0").toUpperCase()}, starts no UTF-8 character); convert it to UTF-8 first, e.g. iconv -f latin1 -t utf-8`);
  }
}

/**
 * The UTF-8 text of the file a flag names (--file, --grammar, --chat-template, ...): one line
 * naming the flag and the path when it is missing, a folder, unreadable or not UTF-8 (exit 1,
 * as a --model that is not found: the command line was well formed, the file is not usable).
 */
export function readTextFile(path: string, flag: string): string {
  const where = `${flag} ${path}`;
  let bytes: Buffer;
  try {
    bytes = readFileSync(path);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    throw new Error(`${where}: ${code === "ENOENT" ? "no such file" : code === "EISDIR" ? "it is a folder, not a text file" : `cannot be read (${printable((e as Error).message)})`}`);
  }
  return decodeUtf8(bytes, where);
}

/** all of stdin as UTF-8 text (`--file -`, or a prompt piped in), `where` naming it in errors */
export async function readStdinText(where: string): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return decodeUtf8(Buffer.concat(chunks), where);
}

/** readTextFile, with `-` for stdin, as the GNU tools take it */
export async function readTextInput(path: string, flag: string): Promise<string> {
  return path === "-" ? readStdinText(`${flag} - (stdin)`) : readTextFile(path, flag);
}

/**
 * A file an option names that its reader opens later (convert / quantize --vocab), checked up
 * front so that a missing one or a folder is one line naming the option: the reader's own
 * failure was Node's "ENOENT: no such file or directory, open '...'", which names no option.
 */
export function existingFile(path: string, flag: string): string {
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
 * one was "model not found: ..." after the first model had loaded, naming no flag.
 */
export function modelNamedBy(flag: string, ref: string): Promise<string> {
  return resolveModelReference(ref).catch((e: unknown) => {
    throw new Error(`${flag}: ${e instanceof Error ? e.message : String(e)}`);
  });
}
