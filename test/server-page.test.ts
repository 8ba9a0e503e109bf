import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { after, before, test } from "node:test";
import { chromium, type Browser } from "playwright-core";
import type { PageDocument } from "./helpers/page-document.js";
import { serveStories, skipStories, until } from "./helpers/serve.js";

/** the page's document, for the functions this file runs in the page (helpers/page-document.ts) */
declare const document: PageDocument;

const CHROMIUM = "/usr/bin/chromium";
const skip = skipStories || (existsSync(CHROMIUM) ? false : `${CHROMIUM} not found: this test needs Debian's chromium (apt-get install -y chromium; .ci/run installs it)`);

let s: Awaited<ReturnType<typeof serveStories>>;
let browser: Browser;
before(async () => {
  if (skip) return;
  s = await serveStories({ contextSize: 2048 });
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ["--no-sandbox"] });
});
after(async () => {
  await browser?.close();
  await s?.close();
});

test("the chat page in headless Chromium: model info, a streamed reply with its timings, stop mid-reply", { skip }, async () => {
  const page = await browser.newPage();
  const errors: string[] = [];
  page.on("pageerror", (e) => errors.push(e.message));
  await page.goto(s.url);
  await page.waitForFunction(() => document.getElementById("model-info")!.textContent!.includes("stories260K"));
  assert.match((await page.textContent("#model-info"))!, /llama · .* parameters · context 2048/);

  const want = await s.model.chat([{ role: "system", content: "Tell a story." }, { role: "user", content: "Once upon a time" }], { chatTemplate: (await import("./helpers/serve.js")).CHAT_TEMPLATE, temperature: 0, maxTokens: 20 });
  await page.fill("#system", "Tell a story.");
  await page.fill("#temperature", "0");
  await page.fill("#max-tokens", "20");
  await page.fill("#input", "Once upon a time");
  await page.press("#input", "Enter");
  await page.waitForSelector("li.assistant .stats");
  assert.equal(await page.textContent("li.assistant .content"), want.completion);
  assert.match((await page.textContent("li.assistant .stats"))!, /^(length|stop) · 20 tokens · TTFT [\d.]+ ms · TPOT [\d.]+ ms · [\d.]+ tok\/s$/);

  // slow the engine down (every pass waits 20 ms) so that the reply is still streaming when stop is pressed
  const lm = s.model.languageModel as unknown as { passBatch: (...a: unknown[]) => unknown };
  const original = lm.passBatch;
  lm.passBatch = function (this: unknown, ...a: unknown[]) {
    const t = Date.now();
    while (Date.now() - t < 20) { /* busy */ }
    return original.apply(this, a);
  };
  try {
    await page.fill("#max-tokens", "1500");
    await page.fill("#temperature", "0.8");
    await page.fill("#input", "Tell me a long story");
    await page.click("#send");
    await page.waitForFunction(() => (document.querySelectorAll("li.assistant .content")[1]?.textContent ?? "").length > 10);
    assert.equal(await page.isDisabled("#stop"), false);
    await page.click("#stop");
    await page.waitForSelector("li.assistant:nth-of-type(4) .stats");
    assert.match((await page.textContent("li.assistant:nth-of-type(4) .stats"))!, /^stopped · \d+ tokens · TTFT/);
    await until(() => s.model.engine.stats.running === 0, "the engine to drop the stopped reply");
    assert.equal(await page.isDisabled("#send"), false);
  } finally {
    lm.passBatch = original;
  }
  assert.deepEqual(errors, []);
});
