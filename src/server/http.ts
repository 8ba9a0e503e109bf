import { timingSafeEqual, createHash } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import { ApiError } from "./errors.js";

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

/** The body as a JSON object; malformed JSON or another JSON value is a 400. */
export function parseJsonObject(body: Buffer): Record<string, unknown> {
  let value: unknown;
  try {
    value = JSON.parse(body.toString("utf8"));
  } catch (e) {
    throw new ApiError(400, `the request body is not valid JSON: ${(e as Error).message}`, "invalid_request_error", null, "invalid_json");
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) throw new ApiError(400, "the request body must be a JSON object", "invalid_request_error", null, "invalid_json");
  return value as Record<string, unknown>;
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
