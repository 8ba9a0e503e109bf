import { spawn, type ChildProcess } from "node:child_process";
import { createServer, type AddressInfo } from "node:net";
import { nodeScriptCommand } from "./child.js";
import type { ServerName } from "./types.js";

/** A server child process, ready (GET /health answered 200). */
export interface ServerProcess {
  readonly name: ServerName;
  readonly url: string;
  /** the command line, for the report (the model path shortened to its file name) */
  readonly command: string;
  /** SIGTERM, then SIGKILL if it has not exited within 10 s */
  stop(): Promise<void>;
}

/** What both servers are started with. */
export interface ServerSettings {
  readonly modelPath: string;
  readonly threads: number;
  /** parallel slots (sequences decoded together) */
  readonly parallel: number;
  /** KV cells one slot holds */
  readonly slotContextSize: number;
  /** how long loading may take before it counts as failed (default 180 s) */
  readonly readyTimeoutMs?: number;
}

/** `tsllm serve` in a child process (through tsx from src/, node from dist/). */
export function startTsllmServe(s: ServerSettings & { backend?: "wasm" | "reference" }): Promise<ServerProcess> {
  const { command, args } = nodeScriptCommand("../cli/main");
  const flags = ["--threads", String(s.threads), "--parallel", String(s.parallel), "--ctx-size", String(s.slotContextSize), ...(s.backend ? ["--backend", s.backend] : [])];
  return startServer("tsllm", command, [...args, "serve", "--model", s.modelPath, "--host", "127.0.0.1", ...flags], `tsllm serve ${flags.join(" ")}`, s);
}

/**
 * llama.cpp's `llama-server` at `binary`: `--parallel N --cont-batching`, a context of N slots of
 * `slotContextSize` cells (without --kv-unified each slot gets ctx / N), no web UI.
 */
export function startLlamaServer(binary: string, s: ServerSettings): Promise<ServerProcess> {
  const flags = ["-t", String(s.threads), "--parallel", String(s.parallel), "--cont-batching", "-c", String(s.parallel * s.slotContextSize), "--no-webui"];
  return startServer("llama-server", binary, ["-m", s.modelPath, "--host", "127.0.0.1", ...flags], `llama-server ${flags.join(" ")}`, s);
}

/** A `tsllm serve` child process that said on stderr where it listens. */
export interface ServeChild {
  readonly child: ChildProcess;
  /** the address it listens on, e.g. http://127.0.0.1:41234 */
  readonly url: string;
  /** its stderr so far */
  stderr(): string;
  /** its exit code (null when a signal ended it) */
  readonly exited: Promise<number | null>;
}

/**
 * `tsllm serve ARGS` in a child process (pass `--port 0` for a free port): resolves once its
 * stderr names the address it listens on and, unless `until` is "listening", says the model is
 * ready; rejects with its stderr if it exits first. Its stdout is ignored.
 */
export function spawnTsllmServe(args: readonly string[], options: { until?: "listening" | "ready"; env?: NodeJS.ProcessEnv } = {}): Promise<ServeChild> {
  const { command, args: script } = nodeScriptCommand("../cli/main");
  const child = spawn(command, [...script, "serve", ...args], { stdio: ["ignore", "ignore", "pipe"], ...(options.env ? { env: options.env } : {}) });
  let stderr = "";
  const exited = new Promise<number | null>((r) => child.on("exit", (code) => r(code)));
  return new Promise((resolve, reject) => {
    child.stderr!.on("data", (d: Buffer) => {
      stderr += d.toString();
      const m = /listening on (\S+)/.exec(stderr);
      if (m && (options.until === "listening" || stderr.includes("ready:"))) resolve({ child, url: m[1]!, stderr: () => stderr, exited });
    });
    void exited.then((code) => reject(new Error(`tsllm serve exited with ${code}: ${stderr}`)));
  });
}

/** a port nothing listens on now (the OS's pick for port 0) */
async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const { port } = srv.address() as AddressInfo;
      srv.close(() => resolve(port));
    });
  });
}

async function startServer(name: ServerName, command: string, args: string[], shown: string, s: ServerSettings): Promise<ServerProcess> {
  const port = await freePort();
  const child = spawn(command, [...args, "--port", String(port)], { stdio: ["ignore", "pipe", "pipe"] });
  // the last lines of its output, for the error when it fails (llama-server logs every request)
  let tail = "";
  const keep = (d: string) => (tail = (tail + d).slice(-4000));
  child.stdout!.setEncoding("utf8").on("data", keep);
  child.stderr!.setEncoding("utf8").on("data", keep);
  const exited = new Promise<string>((resolve) => {
    child.once("error", (e) => resolve(`could not start: ${e.message}`));
    child.once("exit", (code, signal) => resolve(signal ? `was killed by ${signal}` : `exited with code ${String(code)}`));
  });
  let gone: string | undefined;
  void exited.then((why) => (gone = why));
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + (s.readyTimeoutMs ?? 180_000);
  const lastLines = () => tail.trim().split("\n").slice(-5).join("\n");
  try {
    for (;;) {
      if (gone !== undefined) throw new Error(`${name} ${gone} before it was ready: ${lastLines()}`);
      if (Date.now() > deadline) throw new Error(`${name} was not ready within ${((s.readyTimeoutMs ?? 180_000) / 1000).toFixed(0)} s: ${lastLines()}`);
      if (await healthy(url)) break;
      await new Promise((r) => setTimeout(r, 100));
    }
  } catch (e) {
    await stopChild(child, exited);
    throw e;
  }
  return { name, url, command: shown, stop: () => stopChild(child, exited) };
}

async function healthy(url: string): Promise<boolean> {
  try {
    const r = await fetch(`${url}/health`, { signal: AbortSignal.timeout(2000) });
    await r.arrayBuffer();
    return r.status === 200;
  } catch {
    return false;
  }
}

async function stopChild(child: ChildProcess, exited: Promise<string>): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  child.kill("SIGTERM");
  let timer: NodeJS.Timeout | undefined;
  const killed = await Promise.race([exited.then(() => false), new Promise<boolean>((r) => (timer = setTimeout(() => r(true), 10_000)))]);
  clearTimeout(timer);
  if (killed) {
    child.kill("SIGKILL");
    await exited;
  }
}
