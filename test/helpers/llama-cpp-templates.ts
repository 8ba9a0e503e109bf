import { execFileSync, spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PROJECT_ROOT } from "./shared.js";

/**
 * The real chat templates llama.cpp keeps in its models/templates/ (each a model's own
 * chat_template), read from the llama.cpp source that node-llama-cpp (a devDependency) installs
 * as a git bundle: fetched once into a temporary repository, so no template text is copied here.
 */
const BUNDLE = join(PROJECT_ROOT, "node_modules", "node-llama-cpp", "llama", "gitRelease.bundle");

let repo: string | undefined;

/** why the templates cannot be read (no bundle, no git), or false when they can */
export function skipWithoutLlamaCppTemplates(): string | false {
  if (!existsSync(BUNDLE)) return `${BUNDLE} not found (node-llama-cpp's llama.cpp source): the real chat templates are not available`;
  if (spawnSync("git", ["--version"], { stdio: "ignore" }).status !== 0) return "git is not installed: llama.cpp's chat templates cannot be read from node-llama-cpp's source bundle";
  return false;
}

function repository(): string {
  if (!repo) {
    const dir = mkdtempSync(join(tmpdir(), "tsllm-llama-cpp-templates-"));
    execFileSync("git", ["init", "-q", dir]);
    process.on("exit", () => rmSync(dir, { recursive: true, force: true }));
    execFileSync("git", ["-C", dir, "fetch", "-q", BUNDLE, "HEAD"]);
    repo = dir;
  }
  return repo;
}

/** the names of the templates (file names in models/templates/) */
export function llamaCppTemplateNames(): string[] {
  return execFileSync("git", ["-C", repository(), "ls-tree", "--name-only", "FETCH_HEAD", "models/templates/"]).toString().split("\n")
    .filter((p) => p.endsWith(".jinja")).map((p) => p.slice("models/templates/".length));
}

/** one template's text */
export function llamaCppTemplate(name: string): string {
  return llamaCppSourceFile(`models/templates/${name}`);
}

/** a file of that llama.cpp source (its tests, for their cases), by its path in the repository */
export function llamaCppSourceFile(path: string): string {
  return execFileSync("git", ["-C", repository(), "show", `FETCH_HEAD:${path}`], { maxBuffer: 16 << 20 }).toString();
}
