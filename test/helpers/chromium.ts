import { existsSync } from "node:fs";

/** Debian's chromium, the real browser every page test drives (through playwright-core) */
export const CHROMIUM = "/usr/bin/chromium";

/** false where the browser is installed, else the message a test that needs it skips with */
export function skipWithoutChromium(): string | false {
  return existsSync(CHROMIUM) ? false : `${CHROMIUM} not found: this test needs Debian's chromium (apt-get install -y chromium; .ci/run installs it)`;
}
