import { existsSync, readFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import { join } from "node:path";
import { after, before } from "node:test";
import { chromium, type Browser } from "playwright-core";
// @ts-expect-error: a plain .mjs build script
import { browserDir, ensureBrowserBuild } from "../../scripts/build-browser.mjs";

/** Debian's chromium, the real browser every page test drives (through playwright-core) */
export const CHROMIUM = "/usr/bin/chromium";

/** false where the browser is installed, else the message a test that needs it skips with */
export function skipWithoutChromium(): string | false {
  return existsSync(CHROMIUM) ? false : `${CHROMIUM} not found: this test needs Debian's chromium (apt-get install -y chromium; .ci/run installs it)`;
}

/** a page server and the chromium that visits it, for one test file (pagesOver) */
export interface PageRig {
  /** the server's origin, http://127.0.0.1:PORT */
  base: string;
  browser: Browser;
}

/**
 * Registers the file's before and after: the browser build made (if stale), `start`'s server
 * listening on loopback and chromium launched (with `args` beside --no-sandbox); both closed after.
 * Nothing starts where `skip` says why not. The rig's fields are set once before has run.
 */
export function pagesOver(skip: string | false, start: () => Promise<Server>, args: readonly string[] = []): PageRig {
  const rig = {} as PageRig;
  let server: Server | undefined;
  before(async () => {
    if (skip) return;
    await ensureBrowserBuild();
    server = await start();
    rig.base = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
    rig.browser = await chromium.launch({ executablePath: CHROMIUM, args: ["--no-sandbox", ...args] });
  });
  after(async () => {
    await rig.browser?.close();
    server?.close();
  });
  return rig;
}

/** what startBuildServer serves besides the build */
export interface BuildPages {
  /** scripts by path: served in place of the build's, or beside it */
  scripts: Record<string, string>;
  /** folders (names) that hold the build's kernels (.wasm) only, beside /tsllm/, which holds all of the build */
  kernelFolders?: readonly string[];
  /** served at /models/<name> */
  models: Record<string, Buffer>;
}

/**
 * A static server on loopback with COOP/COEP on everything (its pages are cross-origin isolated):
 * an empty page at /, `scripts` by path, the browser build under /tsllm/ (its kernels under each
 * of `kernelFolders` too), the models under /models/; anything else answers 404.
 */
export function startBuildServer({ scripts, kernelFolders = [], models }: BuildPages): Promise<Server> {
  const server = createServer((req, res) => {
    const p = new URL(req.url ?? "/", "http://127.0.0.1").pathname;
    const headers = { "cross-origin-opener-policy": "same-origin", "cross-origin-embedder-policy": "require-corp", "cross-origin-resource-policy": "same-origin" };
    const send = (type: string, body: Buffer | string): void => void res.writeHead(200, { ...headers, "content-type": type }).end(body);
    if (p === "/") return send("text/html; charset=utf-8", "<!doctype html><title>tsllm test</title>");
    if (scripts[p] !== undefined) return send("text/javascript", scripts[p]);
    const [, folder, file] = /^\/([\w-]+)\/([\w.-]+)$/.exec(p) ?? [];
    if (folder === "models" && models[file!]) return void res.writeHead(200, { ...headers, "content-type": "application/octet-stream", "content-length": models[file!]!.length }).end(models[file!]);
    const served = folder === "tsllm" || (kernelFolders.includes(folder!) && file!.endsWith(".wasm"));
    if (served && existsSync(join(browserDir, file!))) return send(file!.endsWith(".wasm") ? "application/wasm" : "text/javascript", readFileSync(join(browserDir, file!)));
    res.writeHead(404, headers).end();
  });
  return new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve(server)));
}
