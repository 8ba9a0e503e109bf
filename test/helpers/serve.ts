import { loadModel, type Model } from "../../src/index.js";
import { startServer, type OpenAIServer, type ServeOptions } from "../../src/server/index.js";
import { spawnTsllmServe, type ServeChild } from "../../src/bench/index.js";
import { llamaCppTemplate } from "./llama-cpp-templates.js";
import { sharedFile, skipWithoutShared } from "./shared.js";

export const STORIES = "models/stories260K.gguf";
export const skipStories = skipWithoutShared(STORIES);
/** stories260K has no chat template: a plain one */
export const CHAT_TEMPLATE = "{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}{% if add_generation_prompt %}assistant:{% endif %}";

/** stories260K loaded with a small engine, and a server on a free loopback port */
export async function serveStories(load: Parameters<typeof loadModel>[1] = {}, options: ServeOptions = {}): Promise<{ model: Model; server: OpenAIServer; url: string; close(): Promise<void> }> {
  const model = await loadModel(sharedFile(STORIES)!, { threads: 1, contextSize: 512, ...load });
  const server = await startServer(model, { port: 0, chatTemplate: CHAT_TEMPLATE, ...options });
  return { model, server, url: server.url, close: async () => { await server.close(1000); model.dispose(); } };
}

/** serveStories with llama.cpp's chat template `name` (its source returned beside the server) */
export async function serveStoriesWithTemplate(name: string): Promise<{ s: Awaited<ReturnType<typeof serveStories>>; source: string }> {
  const source = llamaCppTemplate(name);
  return { s: await serveStories({}, { chatTemplate: { source, where: name } }), source };
}

/** POST JSON, the parsed answer and its status */
export async function post(url: string, body: unknown, headers: Record<string, string> = {}, signal?: AbortSignal): Promise<{ status: number; json: any; headers: Headers }> {
  const res = await fetch(url, { method: "POST", headers: { "Content-Type": "application/json", ...headers }, body: typeof body === "string" ? body : JSON.stringify(body), ...(signal ? { signal } : {}) });
  const text = await res.text();
  let json: unknown;
  try { json = JSON.parse(text); } catch { json = text; }
  return { status: res.status, json, headers: res.headers };
}

/** the `data:` events of an SSE body, parsed ("[DONE]" as the string) */
export function sseEvents(body: string): unknown[] {
  return body.split("\n\n").map((e) => e.trim()).filter((e) => e.startsWith("data: ")).map((e) => {
    const data = e.slice("data: ".length);
    return data === "[DONE]" ? data : JSON.parse(data);
  });
}

/** resolves once `check` holds (polling), or rejects after `ms` */
export async function until(check: () => boolean | Promise<boolean>, what: string, ms = 20_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** `tsllm serve` as a child process on a free port (stories260K unless the arguments name a model); resolves with its URL once the model is loaded, or with `until: "listening"` once it listens */
export function spawnServe(args: string[], options: Parameters<typeof spawnTsllmServe>[1] = {}): Promise<ServeChild> {
  const model = args.includes("--model") ? [] : ["--model", sharedFile(STORIES)!];
  return spawnTsllmServe([...model, "--port", "0", "--threads", "1", ...args], options);
}
