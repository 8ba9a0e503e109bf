import { timingSafeEqual, createHash } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import { constants } from "node:buffer";
import { brotliDecompressSync, gunzipSync, inflateSync } from "node:zlib";
import { ApiError, invalid, paramPath } from "./errors.js";
import { pathAt } from "./json-scan.js";

/** the largest request body a server takes by default (ServeOptions.bodyLimit) */
export const DEFAULT_BODY_LIMIT = 4 * 2 ** 20;

/** the largest bodyLimit: a body is decoded into one string, and a longer one than this cannot be (a 500 instead of a 413) */
export const MAX_BODY_LIMIT = constants.MAX_STRING_LENGTH;

/** the largest request body a server takes, and what its refusals call that setting (ServeOptions.bodyLimit, `tsllm serve --body-limit`) */
export interface BodyLimit {
  readonly bytes: number;
  readonly setting: string;
}

/**
 * Reads a request body up to `limit.bytes` bytes, decompressed where its Content-Encoding is gzip,
 * deflate or br (as llama-server's HTTP library does); more bytes, sent or unpacked, are a 413
 * (the rest is not read), another encoding a 415. A request that ends before its body does (the
 * client left, or the server's read timeout cut it) rejects.
 */
export async function readBody(req: IncomingMessage, limit: BodyLimit, budget?: BodyBudget): Promise<Buffer> {
  const decode = checkBodyHeaders(req, limit);
  let size = 0;
  const read = new Promise<Buffer>((resolve, reject) => {
    const parts: Buffer[] = [];
    const refuse = (e: ApiError) => {
      req.removeAllListeners("data");
      req.pause();
      reject(e);
    };
    req.on("data", (chunk: Buffer) => {
      if (size + chunk.length > limit.bytes) return refuse(tooLarge(limit));
      if (budget && !budget.take(size, chunk.length)) return refuse(budget.busy());
      size += chunk.length;
      parts.push(chunk);
    });
    req.on("end", () => resolve(Buffer.concat(parts)));
    // (node's own error is a bare "aborted", which read as the server's failure)
    const cut = () => reject(new BodyCutOff());
    req.on("error", cut);
    req.on("close", cut);
  });
  let raw: Buffer;
  try {
    raw = await read;
  } catch (e) {
    budget?.give(size);
    throw e;
  }
  // a whole body stays counted until the server is done with it (BodyBudget.release)
  budget?.keep(req, size);
  return decode(raw);
}

/**
 * A request whose body stopped arriving: its client left (closed or reset its connection), or node
 * gave up on the connection (the read timeout's 408, malformed HTTP's 400, answered by the
 * server's clientError handler). No answer can reach it, and nothing failed inside the server: the
 * request is counted as its connection ended (499, 408, 400), not reported as a 500.
 */
export class BodyCutOff extends Error {
  override name = "BodyCutOff";

  constructor() {
    super("the request ended before its body was complete");
  }
}

/**
 * The bytes of request bodies a server holds, all requests together: while they arrive, and once
 * whole until the server is done with them (a completion's once its prompts are tokenized, others
 * when answered). Each body is bounded (bodyLimit) but connections are not: 200 clients each
 * sending a 4 MiB body less its last byte held 766 MiB of a `tsllm serve` (and delayed /health
 * 0.8 s), so a few thousand would exhaust the machine; and 50 sending whole 4 MiB prompts, counted
 * only while they arrived, took it from 139 MiB to 1.57 GiB while their text was parsed and
 * tokenized one after another (/health 3.4 s), each only to be refused as longer than the context.
 * A body that would take the total past `max` is refused 503 (retry later) and its connection closed. A body's first FREE_BODY_BYTES are not counted: a connection costs
 * that order in socket buffers anyway, and requests that small (nearly every chat request) are
 * never refused because a few large bodies held unfinished fill the budget. llama-server bounds
 * the same by reading requests on a fixed pool of HTTP threads (max(parallel + 2, cores - 1)),
 * where connections beyond it wait unread, small requests too.
 */
export class BodyBudget {
  private counted = 0;

  /** `setting`: what the 503 calls the bound (ServeOptions.bodiesLimit, `tsllm serve --bodies-limit`) */
  constructor(readonly max: number, private readonly setting = "bodiesLimit") {}

  /** whether a body that has `had` bytes may hold `bytes` more (then they are counted) */
  take(had: number, bytes: number): boolean {
    const more = counts(had + bytes) - counts(had);
    if (this.counted + more > this.max) return false;
    this.counted += more;
    return true;
  }

  /** the bytes counted now (each body's past its first FREE_BODY_BYTES) */
  get held(): number {
    return this.counted;
  }

  /** a body of `size` bytes is no longer held */
  give(size: number): void {
    this.counted -= counts(size);
  }

  /** whole bodies still counted, by request, until release */
  private readonly kept = new WeakMap<IncomingMessage, number>();

  /** the request's whole body of `size` bytes stays counted until release(req) */
  keep(req: IncomingMessage, size: number): void {
    this.kept.set(req, size);
  }

  /** the server is done with the request's body (its prompts are made, or it is answered); again, or for a request without one, nothing */
  release(req: IncomingMessage): void {
    const size = this.kept.get(req);
    if (size === undefined) return;
    this.kept.delete(req);
    this.give(size);
  }

  busy(): ApiError {
    return new ApiError(503, `the server holds ${this.max} bytes of request bodies already (arriving, or being made into prompts), as many as it holds at once (${this.setting}); retry later`, "server_error", null, "server_busy", { "Retry-After": "1", Connection: "close" });
  }
}

/**
 * What the headers alone say of the body: a declared Content-Length over `limit` is a 413, an
 * encoding this server does not read a 415 (so a client that waits for "100 Continue" is
 * refused before it sends the body); else how the body is unpacked.
 */
export function checkBodyHeaders(req: IncomingMessage, limit: BodyLimit): (body: Buffer) => Buffer {
  const decode = decoderOf(req.headers["content-encoding"], limit);
  const declared = Number(req.headers["content-length"]);
  if (Number.isFinite(declared) && declared > limit.bytes) throw tooLarge(limit);
  return decode;
}

/** how a body in `encoding` becomes its bytes, unpacking at most `limit` of them */
function decoderOf(encoding: string | undefined, limit: BodyLimit): (body: Buffer) => Buffer {
  const name = (encoding ?? "identity").trim().toLowerCase();
  if (name === "identity" || name === "") return (body) => body;
  const unpack = { gzip: gunzipSync, "x-gzip": gunzipSync, deflate: inflateSync, br: brotliDecompressSync }[name];
  if (!unpack) {
    throw new ApiError(415, `the request body's Content-Encoding ${JSON.stringify(encoding)} is not one this server reads: send it as is, or gzip, deflate or br`, "invalid_request_error", null, "unsupported_content_encoding");
  }
  return (body) => {
    try {
      return unpack(body, { maxOutputLength: limit.bytes });
    } catch (e) {
      if (e instanceof RangeError) throw tooLarge(limit, "unpacked");
      throw new ApiError(400, `the request body is not valid ${name} data (its Content-Encoding): ${(e as Error).message}`, "invalid_request_error", null, "invalid_content_encoding");
    }
  };
}

/** how much of a body's first bytes BodyBudget does not count */
const FREE_BODY_BYTES = 64 * 1024;

function counts(size: number): number {
  return Math.max(0, size - FREE_BODY_BYTES);
}

/** (the setting named: the client's operator, or the operator reading it in a log, learns what raises the limit, as the 408 and 429 name theirs) */
function tooLarge(limit: BodyLimit, unpacked?: "unpacked"): ApiError {
  return new ApiError(413, `the request body is larger than the ${limit.bytes} bytes this server accepts${unpacked ? " once unpacked" : ""} (${limit.setting})`, "invalid_request_error", null, "request_too_large");
}

const strictUtf8 = new TextDecoder("utf-8", { fatal: true });

/**
 * How deep a request's JSON may nest (objects and arrays). A JSON Schema nests at most 64
 * schemas deep (json-schema.ts), two or three JSON levels each; deeper values only overflow the
 * stack of whatever walks them (a template's tojson, a key's JSON.stringify).
 */
export const MAX_JSON_DEPTH = 256;

/**
 * The body as a JSON object; bytes that are not UTF-8 (which a lenient decoder would turn into
 * U+FFFD inside a prompt), malformed JSON, another JSON value or one nested deeper than
 * MAX_JSON_DEPTH is a 400 (the last naming the top-level parameter it is in).
 */
export function parseJsonObject(body: Buffer): Record<string, unknown> {
  let text: string;
  try {
    text = strictUtf8.decode(body);
  } catch {
    throw new ApiError(400, "the request body is not valid UTF-8 (JSON text must be UTF-8)", "invalid_request_error", null, "invalid_json");
  }
  // the body itself is depth 1: a parameter's value may nest MAX_JSON_DEPTH below it
  const deep = nestsPast(text, MAX_JSON_DEPTH + 1);
  if (deep !== undefined) {
    if (typeof deep.path[0] !== "string") throw new ApiError(400, `the request body nests deeper than the ${MAX_JSON_DEPTH} levels of objects and arrays this server accepts`, "invalid_request_error", null, "invalid_json");
    throw nestedTooDeep(String(deep.path[0]), paramPath("", deep.path));
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (e) {
    throw new ApiError(400, `the request body is not valid JSON: ${(e as Error).message}`, "invalid_request_error", null, "invalid_json");
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) throw new ApiError(400, "the request body must be a JSON object", "invalid_request_error", null, "invalid_json");
  return value as Record<string, unknown>;
}

/**
 * Whether JSON text nests deeper than `limit` levels of objects and arrays, read from its
 * characters before anything parses it: JSON.parse of a body nested two million deep (4 MiB of
 * brackets) held the event loop 1.8 s and built as many arrays before a depth check on the
 * parsed value could refuse it. A text nested too deep gives the path (keys and indexes) to the
 * value that opens the level past the limit. Text that is not JSON is scanned as far as it goes;
 * JSON.parse judges it afterwards.
 */
export function nestsPast(text: string, limit: number): { path: (string | number)[] } | undefined {
  // a native search from one character that matters to the next: a loop over every character
  // took five times as long as the parse it guards
  const marks = /[\\"[\]{}]/g;
  let depth = 0;
  let inString = false;
  for (let m = marks.exec(text); m !== null; m = marks.exec(text)) {
    const c = text.charCodeAt(m.index);
    if (inString) {
      if (c === 0x5c) marks.lastIndex = m.index + 2; // an escape: the next character is never the string's end
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x7b || c === 0x5b) {
      // (the path is read again from the start only here: the keys and commas on the way cost nothing otherwise)
      if (++depth > limit) return { path: pathAt(text, m.index) };
    } else if (c === 0x7d || c === 0x5d) depth--;
  }
  return undefined;
}

/**
 * The 400 for the value of request field `field` nested deeper than MAX_JSON_DEPTH: named down to
 * the value that opens the level past the limit (`param`, the path from the body's root, as OpenAI
 * names a nested parameter), the field's value itself being level 1
 */
export function nestedTooDeep(field: string, param: string): ApiError {
  return invalid(param, `'${field}' nests deeper than the ${MAX_JSON_DEPTH} levels of objects and arrays this server accepts: the value at '${abbreviated(param)}' is ${MAX_JSON_DEPTH + 1} levels down`);
}

/** a parameter's path shortened for a message (a path 256 levels deep is most of a kilobyte): its start and its end */
function abbreviated(path: string): string {
  return path.length <= 120 ? path : `${path.slice(0, 80)}...${path.slice(-30)}`;
}

/** how long a client may take no bytes while a response's bytes wait for it, unless the server says otherwise (nginx's send_timeout) */
export const DEFAULT_WRITE_TIMEOUT_MS = 60_000;

/** a response body is handed to the socket in pieces of this size, so a client that stops reading is seen while it stops */
const WRITE_PIECE = 64 * 1024;

/**
 * Resolves true once the bytes the response holds have gone to the socket (at once when it holds
 * none over its high-water mark), false once the client is gone. A client that takes nothing for
 * `timeoutMs` meanwhile is cut off (the response destroyed): one that never reads would otherwise
 * keep the connection and its buffers for as long as it keeps the connection open.
 */
export function drained(res: ServerResponse, timeoutMs: number): Promise<boolean> {
  if (res.destroyed) return Promise.resolve(false);
  if (!res.writableNeedDrain) return Promise.resolve(true);
  return settled(res, "drain", timeoutMs);
}

/** resolves true on the response's `event`, false when it closes first or stalls for `timeoutMs` (then it is destroyed) */
function settled(res: ServerResponse, event: "drain" | "finish", timeoutMs: number): Promise<boolean> {
  return new Promise((resolve) => {
    const stalled = setTimeout(() => res.destroy(), timeoutMs);
    const done = (ok: boolean) => {
      clearTimeout(stalled);
      res.off(event, onEvent);
      res.off("close", onClose);
      resolve(ok);
    };
    const onEvent = () => done(true);
    const onClose = () => done(false);
    res.on(event, onEvent);
    res.on("close", onClose);
  });
}

/**
 * Writes a whole response, its body a piece at a time, each piece once the client has taken the
 * one before: a client that takes nothing for `writeTimeoutMs` is cut off, as a stream's is.
 */
async function sendBody(res: ServerResponse, status: number, headers: Readonly<Record<string, string | number>>, body: Buffer, writeTimeoutMs: number): Promise<void> {
  res.writeHead(status, { ...headers, "Content-Length": body.length });
  let at = 0;
  for (; at + WRITE_PIECE < body.length; at += WRITE_PIECE) {
    res.write(body.subarray(at, at + WRITE_PIECE));
    if (!(await drained(res, writeTimeoutMs))) return;
  }
  res.end(body.subarray(at));
  if (!res.writableFinished && !res.destroyed) await settled(res, "finish", writeTimeoutMs);
}

export function sendJson(res: ServerResponse, status: number, value: unknown, headers: Readonly<Record<string, string>> = {}, writeTimeoutMs = DEFAULT_WRITE_TIMEOUT_MS): Promise<void> {
  return sendBody(res, status, { ...headers, "Content-Type": "application/json; charset=utf-8" }, Buffer.from(JSON.stringify(value)), writeTimeoutMs);
}

export function sendError(res: ServerResponse, e: ApiError, writeTimeoutMs = DEFAULT_WRITE_TIMEOUT_MS): Promise<void> {
  // a response already under way (a stream), or a client already gone, cannot take an error answer
  if (res.headersSent || res.destroyed) {
    res.destroy();
    return Promise.resolve();
  }
  return sendJson(res, e.status, e.body, e.headers, writeTimeoutMs);
}

export function sendText(res: ServerResponse, status: number, body: string, contentType: string, writeTimeoutMs = DEFAULT_WRITE_TIMEOUT_MS): Promise<void> {
  return sendBody(res, status, { "Content-Type": contentType }, Buffer.from(body), writeTimeoutMs);
}

/** Whether the request carries `Authorization: Bearer KEY`, compared in constant time (hashes of equal length). */
export function authorized(req: IncomingMessage, key: string): boolean {
  const header = req.headers.authorization ?? "";
  const m = /^Bearer\s+(.+)$/i.exec(header);
  const given = createHash("sha256").update(m ? m[1]!.trim() : "\u0000no key\u0000").digest();
  const expected = createHash("sha256").update(key).digest();
  return timingSafeEqual(given, expected) && m !== null;
}
