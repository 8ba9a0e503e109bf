import { readFileSync } from "node:fs";
import type { IncomingMessage, ServerResponse } from "node:http";
import { dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { ApiError } from "./errors.js";

/** the chat page's files: web/ at the package root (beside src/ and dist/), shipped in the package */
const WEB_DIR = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..", "web");

const FILES: Record<string, { file: string; type: string }> = {
  "/": { file: "index.html", type: "text/html; charset=utf-8" },
  "/index.html": { file: "index.html", type: "text/html; charset=utf-8" },
  "/chat.js": { file: "chat.js", type: "text/javascript; charset=utf-8" },
  "/chat.css": { file: "chat.css", type: "text/css; charset=utf-8" },
  // the page links this icon, and browsers ask for /favicon.ico without one: a 404 there is an error in the console
  "/favicon.svg": { file: "favicon.svg", type: "image/svg+xml" },
  "/favicon.ico": { file: "favicon.svg", type: "image/svg+xml" },
};

/** the paths the page's files are served at */
export const PAGE_PATHS: readonly string[] = Object.keys(FILES);

const cache = new Map<string, Buffer>();

/** GET /: the web chat page (plain HTML, CSS and JS; no CDN, nothing to build) */
export function servePage(_req: IncomingMessage, res: ServerResponse, path: string): void {
  const entry = FILES[path];
  if (!entry) throw new ApiError(404, `no page ${path}`, "invalid_request_error", null, "not_found");
  let body = cache.get(entry.file);
  if (!body) {
    try {
      body = readFileSync(resolve(WEB_DIR, entry.file));
    } catch {
      throw new ApiError(404, `the chat page's file ${entry.file} is missing from ${WEB_DIR}`, "invalid_request_error", null, "not_found");
    }
    cache.set(entry.file, body);
  }
  res.writeHead(200, {
    "Content-Type": entry.type, "Content-Length": body.length, "Cache-Control": "no-cache",
    "Content-Security-Policy": "default-src 'self'; style-src 'self'; script-src 'self'; connect-src 'self'", "X-Content-Type-Options": "nosniff",
  });
  res.end(body);
}
