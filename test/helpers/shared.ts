import { existsSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";

export const PROJECT_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
export const SHARED = resolve(PROJECT_ROOT, "../shared");

/** path of a file in ../shared, or undefined when the folder (or file) is absent */
export function sharedFile(rel: string): string | undefined {
  const p = resolve(SHARED, rel);
  return existsSync(p) ? p : undefined;
}

/** the reason to skip a test that needs ../shared/<rel>, or false when it is there */
export function skipWithoutShared(rel: string): string | false {
  return sharedFile(rel) ? false : `../shared/${rel} not found: this test needs the project's shared test data beside the checkout`;
}
