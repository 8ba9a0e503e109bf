/**
 * The browser example's server: `npm run example:browser -- --port P [--models DIR]`.
 * Serves on 127.0.0.1, with the headers that make the page cross-origin isolated (shared wasm
 * memory needs them) on every response:
 *   /            the page (index.html, page.js, page.css beside this file; tsllm-isolate.js from
 *                dist-browser/, which isolates the page where a host sends no such headers)
 *   /tsllm/      the browser build (dist-browser/), built first when missing or stale
 *   /models/     the files of DIR (default ../shared/models when present), with HTTP Range
 *                support; /models/ itself lists the .gguf files as JSON
 * Prints "tsllm browser example: http://127.0.0.1:PORT/" once listening (--port 0: any free port).
 */
import { createReadStream, existsSync, readdirSync, statSync } from "node:fs";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
// @ts-expect-error: a plain .mjs build script
import { browserDir, ensureBrowserBuild } from "../../scripts/build-browser.mjs";

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, "../..");

const { values } = parseArgs({ options: { port: { type: "string", default: "8080" }, models: { type: "string" }, "log-requests": { type: "boolean" }, help: { type: "boolean", short: "h" } } });
if (values.help) {
  console.log("usage: npm run example:browser -- [--port P] [--models DIR] [--log-requests]\n  serves the tsllm browser example on http://127.0.0.1:P/ (default 8080; 0 = any free port)\n  --models DIR  served under /models/ (default ../shared/models when present)\n  --log-requests  print one line per request for a file under /models/ (\"request: GET /models/x.gguf bytes=0-0\")");
  process.exit(0);
}
const port = Number(values.port);
if (!Number.isInteger(port) || port < 0 || port > 65535) {
  console.error(`--port: expected a port number, got ${JSON.stringify(values.port)}`);
  process.exit(2);
}
const defaultModels = path.resolve(root, "../shared/models");
const modelsDir = values.models !== undefined ? path.resolve(values.models) : existsSync(defaultModels) ? defaultModels : undefined;
if (modelsDir !== undefined && !existsSync(modelsDir)) {
  console.error(`--models: ${modelsDir} does not exist`);
  process.exit(2);
}

const built = await ensureBrowserBuild();
if (built) console.log(`built the browser bundle into ${path.relative(process.cwd(), browserDir) || browserDir}`);

const TYPES: Record<string, string> = {
  ".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8", ".wasm": "application/wasm",
  ".map": "application/json", ".json": "application/json", ".gguf": "application/octet-stream",
};

/** the headers every response carries: cross-origin isolation (COOP + COEP), same-origin resources, no caching */
function isolated(res: ServerResponse): void {
  res.setHeader("Cross-Origin-Opener-Policy", "same-origin");
  res.setHeader("Cross-Origin-Embedder-Policy", "require-corp");
  res.setHeader("Cross-Origin-Resource-Policy", "same-origin");
  res.setHeader("Cache-Control", "no-cache");
}

function fail(res: ServerResponse, status: number, message: string): void {
  res.writeHead(status, { "Content-Type": "text/plain; charset=utf-8" });
  res.end(`${message}\n`);
}

/** `dir`/`rel` when it stays inside `dir` */
function inside(dir: string, rel: string): string | undefined {
  const p = path.resolve(dir, "." + path.posix.normalize("/" + rel));
  return p === dir || p.startsWith(dir + path.sep) ? p : undefined;
}

/** the byte range a Range header asks for in a file of `size` bytes: [start, end], "unsatisfiable", or undefined for the whole file */
function rangeOf(header: string | undefined, size: number): [number, number] | "unsatisfiable" | undefined {
  if (!header) return undefined;
  const m = /^bytes=(\d*)-(\d*)$/.exec(header.trim());
  // several ranges, or another unit: answered with the whole file, as RFC 9110 allows
  if (!m || (m[1] === "" && m[2] === "")) return undefined;
  let start: number, end: number;
  if (m[1] === "") {
    start = Math.max(0, size - Number(m[2]));
    end = size - 1;
  } else {
    start = Number(m[1]);
    end = m[2] === "" ? size - 1 : Math.min(Number(m[2]), size - 1);
  }
  return start >= size || start > end ? "unsatisfiable" : [start, end];
}

function sendFile(req: IncomingMessage, res: ServerResponse, file: string | undefined): void {
  if (!file || !existsSync(file) || !statSync(file).isFile()) return fail(res, 404, `not found: ${req.url}`);
  const stat = statSync(file), size = stat.size;
  const type = TYPES[path.extname(file)] ?? "application/octet-stream";
  const range = rangeOf(req.headers.range, size);
  res.setHeader("Accept-Ranges", "bytes");
  res.setHeader("Content-Type", type);
  // validators: what the page's model cache keys an entry by (cache: "revalidate" compares them)
  res.setHeader("ETag", `W/"${size.toString(16)}-${Math.floor(stat.mtimeMs).toString(16)}"`);
  res.setHeader("Last-Modified", stat.mtime.toUTCString());
  if (range === "unsatisfiable") {
    res.writeHead(416, { "Content-Range": `bytes */${size}` });
    return void res.end();
  }
  const [start, end] = range ?? [0, size - 1];
  if (range) res.writeHead(206, { "Content-Range": `bytes ${start}-${end}/${size}`, "Content-Length": end - start + 1 });
  else res.writeHead(200, { "Content-Length": size });
  if (req.method === "HEAD" || size === 0) return void res.end();
  createReadStream(file, { start, end, highWaterMark: 1 << 20 }).pipe(res);
}

const server = createServer((req, res) => {
  isolated(res);
  if (req.method !== "GET" && req.method !== "HEAD") return fail(res, 405, `${req.method} is not served here`);
  const url = new URL(req.url ?? "/", "http://127.0.0.1");
  const p = decodeURIComponent(url.pathname);
  if (p === "/" || p === "/index.html") return sendFile(req, res, path.join(here, "index.html"));
  if (p === "/page.js" || p === "/page.css") return sendFile(req, res, path.join(here, p.slice(1)));
  // beside the page: a service worker controls only its own folder and below (unused here, where the headers isolate the page)
  if (p === "/tsllm-isolate.js") return sendFile(req, res, path.join(browserDir, "tsllm-isolate.js"));
  if (p.startsWith("/tsllm/")) return sendFile(req, res, inside(browserDir, p.slice("/tsllm/".length)));
  if (p === "/models/" || p === "/models") {
    const list = modelsDir ? readdirSync(modelsDir).filter((f) => f.endsWith(".gguf")).sort() : [];
    res.writeHead(200, { "Content-Type": "application/json" });
    return void res.end(JSON.stringify(list));
  }
  if (p.startsWith("/models/")) {
    if (values["log-requests"]) console.log(`request: ${req.method} ${p} ${req.headers.range ?? "whole"}`);
    if (!modelsDir) return fail(res, 404, `not found: ${p} (no models folder: start the server with --models DIR)`);
    return sendFile(req, res, inside(modelsDir, p.slice("/models/".length)));
  }
  fail(res, 404, `not found: ${p}`);
});

server.listen(port, "127.0.0.1", () => {
  const address = server.address();
  const actual = typeof address === "object" && address ? address.port : port;
  console.log(`tsllm browser example: http://127.0.0.1:${actual}/${modelsDir ? `  (models from ${modelsDir})` : "  (no models folder)"}`);
});
for (const signal of ["SIGINT", "SIGTERM"] as const) process.on(signal, () => server.close(() => process.exit(0)));
