// A page on another site, open in the user's browser, against `tsllm serve` on the user's machine:
// a POST with a text/plain body needs no preflight, so the browser sends it, and only the reading of
// the answer is blocked. Real chromium visits a page on http://localhost:P and posts to the server on
// http://127.0.0.1:Q (another site), as any web page could.
import assert from "node:assert/strict";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, test } from "node:test";
import { chromium, type Browser } from "playwright-core";
import { post, serveStories, skipStories, until } from "./helpers/serve.js";
import { CHROMIUM, skipWithoutChromium } from "./helpers/chromium.js";

const skip = skipStories || skipWithoutChromium();
let browser: Browser;
let site: Server;
let siteUrl: string;

before(async () => {
  if (skip) return;
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ["--no-sandbox"] });
  site = createServer((_req, res) => res.writeHead(200, { "Content-Type": "text/html" }).end("<!doctype html><title>some site</title>"));
  await new Promise<void>((resolve) => site.listen(0, "127.0.0.1", resolve));
  // ("localhost" and "127.0.0.1" are two sites to the browser)
  siteUrl = `http://localhost:${(site.address() as AddressInfo).port}/`;
});
after(async () => {
  await browser?.close();
  site?.close();
});

/** what the server logged for each request it answered ("POST /v1/completions 403 ...") */
async function serveLogged(options: Parameters<typeof serveStories>[1] = {}) {
  const lines: string[] = [];
  const s = await serveStories({}, { logRequests: true, log: (line) => lines.push(line), ...options });
  return { s, lines };
}

/** the page at siteUrl posts `body` as text/plain to `url` (no-cors: the browser sends it, the page reads nothing) */
async function postFromOtherSite(url: string, body: unknown): Promise<void> {
  const page = await browser.newPage();
  try {
    await page.goto(siteUrl);
    await page.evaluate(async ([u, b]) => {
      await fetch(u!, { method: "POST", mode: "no-cors", headers: { "Content-Type": "text/plain" }, body: b! });
    }, [url, JSON.stringify(body)]);
  } finally {
    await page.close();
  }
}

test("a page of another site in the user's browser cannot make the server generate (403), though it could have sent the POST with no preflight", { skip }, async () => {
  const { s, lines } = await serveLogged();
  try {
    const before = s.model.engine.stats.steps;
    await postFromOtherSite(`${s.url}/v1/completions`, { prompt: "Once upon a time", max_tokens: 50 });
    await postFromOtherSite(`${s.url}/slots/0?action=erase`, {});
    // (a request is logged as its answer closes)
    await until(() => lines.length === 2, "both requests logged");
    assert.deepEqual(lines.map((l) => l.split(" ").slice(0, 3).join(" ")), ["POST /v1/completions 403", "POST /slots/0 403"]);
    assert.equal(s.model.engine.stats.steps, before, "nothing ran for it");
    // the answer says why and what lets that origin in
    const r = await post(`${s.url}/v1/completions`, { prompt: "a", max_tokens: 1 }, { Origin: siteUrl.slice(0, -1), "Sec-Fetch-Site": "cross-site" });
    assert.equal(r.status, 403);
    assert.equal(r.json.error.code, "origin_not_allowed");
    assert.match(r.json.error.message, new RegExp(`another origin \\(${siteUrl.slice(0, -1)}\\).*cors option`));
    // clients that are not browsers send neither header: answered as before
    assert.equal((await post(`${s.url}/v1/completions`, { prompt: "a", max_tokens: 1 })).status, 200);
  } finally {
    await s.close();
  }
});

test("the origin --cors names may call the API from its pages; '*' lets every origin; the server's own page (same origin) always", { skip }, async () => {
  const origin = siteUrl.slice(0, -1);
  const named = await serveLogged({ cors: origin });
  try {
    await postFromOtherSite(`${named.s.url}/v1/completions`, { prompt: "Once", max_tokens: 1 });
    await until(() => named.lines.length === 1, "the request logged");
    assert.match(named.lines[0]!, /^POST \/v1\/completions 200 /);
    // another origin is still refused
    assert.equal((await post(`${named.s.url}/v1/completions`, { prompt: "a", max_tokens: 1 }, { Origin: "http://elsewhere.example", "Sec-Fetch-Site": "cross-site" })).status, 403);
  } finally {
    await named.s.close();
  }
  const any = await serveLogged({ cors: "*" });
  try {
    await postFromOtherSite(`${any.s.url}/v1/completions`, { prompt: "Once", max_tokens: 1 });
    await until(() => any.lines.length === 1, "the request logged");
    assert.match(any.lines[0]!, /^POST \/v1\/completions 200 /);
  } finally {
    await any.s.close();
  }
  const own = await serveLogged();
  try {
    const page = await browser.newPage();
    await page.goto(`${own.s.url}/`);
    const status = await page.evaluate(async () => (await fetch("/v1/completions", { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ prompt: "Once", max_tokens: 1 }) })).status);
    await page.close();
    assert.equal(status, 200);
  } finally {
    await own.s.close();
  }
});

test("a browser that sends no Sec-Fetch-Site is judged by its Origin against the Host it called: another is refused, its own is not", { skip }, async () => {
  const { s } = await serveLogged();
  try {
    const host = new URL(s.url).host;
    assert.equal((await post(`${s.url}/v1/completions`, { prompt: "a", max_tokens: 1 }, { Origin: "http://evil.example" })).status, 403);
    // a sandboxed frame or a file:// page
    assert.equal((await post(`${s.url}/v1/completions`, { prompt: "a", max_tokens: 1 }, { Origin: "null" })).status, 403);
    assert.equal((await post(`${s.url}/v1/completions`, { prompt: "a", max_tokens: 1 }, { Origin: `http://${host}` })).status, 200);
  } finally {
    await s.close();
  }
});
