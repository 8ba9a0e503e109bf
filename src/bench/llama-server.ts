import { spawn } from "node:child_process";
import { createWriteStream, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

/** node-llama-cpp's llama/ folder: the llama.cpp source it ships (a git bundle) and the release it records */
const NODE_LLAMA_CPP_LLAMA = fileURLToPath(new URL("../../node_modules/node-llama-cpp/llama/", import.meta.url));

/** where llama-server is built: $TSLLM_LLAMA_SERVER_BUILD or ~/.cache/tsllm/llama-server-build (outside the repo) */
export function defaultLlamaServerBuildDir(): string {
  return process.env["TSLLM_LLAMA_SERVER_BUILD"] ?? join(homedir(), ".cache", "tsllm", "llama-server-build");
}

/** the llama.cpp release node-llama-cpp ships, e.g. "b8000" (from llama/llama.cpp.info.json), and its own version */
export function shippedLlamaCpp(): { tag: string; nodeLlamaCpp: string } {
  const info = JSON.parse(readFileSync(join(NODE_LLAMA_CPP_LLAMA, "llama.cpp.info.json"), "utf8")) as { tag?: string };
  const pkg = JSON.parse(readFileSync(join(NODE_LLAMA_CPP_LLAMA, "..", "package.json"), "utf8")) as { version?: string };
  return { tag: info.tag ?? "unknown", nodeLlamaCpp: pkg.version ?? "unknown" };
}

/**
 * The path of a `llama-server` built from the llama.cpp source node-llama-cpp ships: the git
 * bundle `llama/gitRelease.bundle` cloned into `dir`, configured with
 * `-DGGML_NATIVE=ON -DLLAMA_CURL=OFF -DCMAKE_BUILD_TYPE=Release`, target llama-server built
 * with `jobs` jobs. Built once: a later call finds the binary (a stamp records the release it
 * was built from; another release rebuilds). The build's output goes to `dir`/build.log.
 * Throws when a step fails, naming the step and the log.
 */
export async function ensureLlamaServer(o: { dir?: string; jobs?: number; log?: (line: string) => void } = {}): Promise<string> {
  const dir = o.dir ?? defaultLlamaServerBuildDir();
  const binary = join(dir, "build", "bin", "llama-server");
  const { tag } = shippedLlamaCpp();
  const stamp = join(dir, "tsllm-release.txt");
  if (existsSync(binary) && existsSync(stamp) && readFileSync(stamp, "utf8").trim() === tag) return binary;
  const bundle = join(NODE_LLAMA_CPP_LLAMA, "gitRelease.bundle");
  if (!existsSync(bundle)) throw new Error(`no llama.cpp source to build llama-server from: ${bundle} not found (npm ci installs node-llama-cpp)`);
  o.log?.(`building llama-server from node-llama-cpp's llama.cpp ${tag} in ${dir} (first use only; several minutes)...`);
  const logPath = join(dir, "build.log");
  if (!existsSync(join(dir, "CMakeLists.txt"))) {
    rmSync(dir, { recursive: true, force: true });
    mkdirSync(join(dir, ".."), { recursive: true });
    await step("git clone", "git", ["clone", "--quiet", bundle, dir], undefined, undefined);
  }
  await step("cmake configure", "cmake", ["-B", "build", "-DGGML_NATIVE=ON", "-DLLAMA_CURL=OFF", "-DCMAKE_BUILD_TYPE=Release"], dir, logPath);
  await step("cmake build", "cmake", ["--build", "build", "--target", "llama-server", "-j", String(o.jobs ?? 2)], dir, logPath);
  if (!existsSync(binary)) throw new Error(`the llama-server build finished without ${binary} (see ${logPath})`);
  writeFileSync(stamp, `${tag}\n`);
  return binary;
}

/** runs one build step, its output appended to `logPath`; rejects naming the step */
function step(what: string, command: string, args: string[], cwd: string | undefined, logPath: string | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    const log = logPath ? createWriteStream(logPath, { flags: "a" }) : undefined;
    const child = spawn(command, args, { cwd, stdio: ["ignore", log ? "pipe" : "ignore", log ? "pipe" : "ignore"] });
    if (log) {
      child.stdout!.pipe(log, { end: false });
      child.stderr!.pipe(log, { end: false });
    }
    child.once("error", (e) => { log?.end(); reject(new Error(`${what} could not start (${e.message})`)); });
    child.once("close", (code) => {
      log?.end();
      if (code === 0) resolve();
      else reject(new Error(`${what} failed with code ${String(code)}${logPath ? ` (see ${logPath})` : ""}`));
    });
  });
}
