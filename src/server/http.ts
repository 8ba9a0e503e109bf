import { timingSafeEqual, createHash } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import { ApiError, invalid } from "./errors.js";

/** Reads a request body up to `limit` bytes; more is a 413 (the rest is not read). */
export function readBody(req: IncomingMessage, limit: number): Promise<Buffer> {
  const declared = Number(req.headers["content-length"]);
  if (Number.isFinite(declared) && declared > limit) return Promise.reject(tooLarge(limit));
  return new Promise((resolve, reject) => {
    const parts: Buffer[] = [];
    let size = 0;
    req.on("data", (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) {
        req.removeAllListeners("data");
        req.pause();
        reject(tooLarge(limit));
        return;
      }
      parts.push(chunk);
    });
    req.on("end", () => resolve(Buffer.concat(parts)));
    req.on("error", reject);
  });
}

function tooLarge(limit: number): ApiError {
  return new ApiError(413, `the request body is larger than the ${limit} bytes this server accepts`, "invalid_request_error", null, "request_too_large");
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
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (e) {
    throw new ApiError(400, `the request body is not valid JSON: ${(e as Error).message}`, "invalid_request_error", null, "invalid_json");
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) throw new ApiError(400, "the request body must be a JSON object", "invalid_request_error", null, "invalid_json");
  for (const [key, v] of Object.entries(value)) {
    if (jsonDepth(v, MAX_JSON_DEPTH) > MAX_JSON_DEPTH) throw invalid(key, `'${key}' nests deeper than the ${MAX_JSON_DEPTH} levels of objects and arrays this server accepts`);
  }
  return value as Record<string, unknown>;
}

/** the nesting depth of a parsed JSON value (a scalar 0), counted without recursion and only up to just past `limit` */
export function jsonDepth(value: unknown, limit: number): number {
  let deepest = 0;
  const stack: [unknown, number][] = [[value, 0]];
  while (stack.length > 0) {
    const [v, d] = stack.pop()!;
    if (typeof v !== "object" || v === null) continue;
    if (d + 1 > deepest) deepest = d + 1;
    if (deepest > limit) return deepest;
    for (const child of Array.isArray(v) ? v : Object.values(v)) if (typeof child === "object" && child !== null) stack.push([child, d + 1]);
  }
  return deepest;
}

export function sendJson(res: ServerResponse, status: number, value: unknown, headers: Readonly<Record<string, string>> = {}): void {
  const body = JSON.stringify(value);
  res.writeHead(status, { ...headers, "Content-Type": "application/json; charset=utf-8", "Content-Length": Buffer.byteLength(body) });
  res.end(body);
}

export function sendError(res: ServerResponse, e: ApiError): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  sendJson(res, e.status, e.body, e.headers);
}

export function sendText(res: ServerResponse, status: number, body: string, contentType: string): void {
  res.writeHead(status, { "Content-Type": contentType, "Content-Length": Buffer.byteLength(body) });
  res.end(body);
}

/** Whether the request carries `Authorization: Bearer KEY`, compared in constant time (hashes of equal length). */
export function authorized(req: IncomingMessage, key: string): boolean {
  const header = req.headers.authorization ?? "";
  const m = /^Bearer\s+(.+)$/i.exec(header);
  const given = createHash("sha256").update(m ? m[1]!.trim() : "\u0000no key\u0000").digest();
  const expected = createHash("sha256").update(key).digest();
  return timingSafeEqual(given, expected) && m !== null;
}
