import { existsSync } from "node:fs";
import type { Server } from "node:http";
import { after, before } from "node:test";
import { chromium, type Browser } from "playwright-core";
// @ts-expect-error: a plain .mjs build script
import { ensureBrowserBuild } from "../../scripts/build-browser.mjs";

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
