// The browser example's page: loads a GGUF into tsllm's engine worker and generates or chats.
// Query parameters (for links, scripts and tests): ?model=URL&prompt=TEXT&maxTokens=N&
// temperature=T&backend=wasm|webgpu|reference&seed=S&mode=generate|chat&cache=0&wholeFile=1&run=1
// (an unknown parameter or a bad value is an error naming it)
// (a URL's model is kept in the Cache API and read from there on the next load; cache=0: no cache,
// Range reads; wholeFile=1 with cache=0: fetch the model in one request; memoryLimitMiB=M: at
// most M MiB per wasm memory, which spreads a small model over several, as one over 4 GiB is). When a
// generation ends, #result holds {"completionTokens", "completion", "backend", "timings",
// "load": {"fromCache", "cached", "size", "refetched"?}} as JSON, or {"error": "..."} when loading or generating failed.
import { TsllmWorker } from "/tsllm/tsllm.js";

const $ = (id) => document.getElementById(id);
const params = new URLSearchParams(location.search);

/**
 * what each query parameter accepts: a bad value is one error naming it, not a silent default
 * (a number field or a select given text it cannot hold would just come up empty)
 */
const wholeNumber = (v) => /^\d+$/.test(v);
const PARAMS = {
  model: { field: "model", ok: () => true },
  prompt: { field: "prompt", ok: () => true },
  maxTokens: { field: "max-tokens", ok: wholeNumber, expected: "a whole number >= 0" },
  temperature: { field: "temperature", ok: (v) => v.trim() !== "" && Number.isFinite(Number(v)) && Number(v) >= 0, expected: "a number >= 0 (0 = greedy)" },
  seed: { field: "seed", ok: wholeNumber, expected: "a whole number >= 0" },
  backend: { field: "backend", ok: (v) => ["wasm", "webgpu", "reference"].includes(v), expected: "wasm, webgpu or reference" },
  mode: { field: "mode", ok: (v) => ["generate", "chat"].includes(v), expected: "generate or chat" },
  memoryLimitMiB: { ok: (v) => wholeNumber(v) && Number(v) >= 4 && Number(v) <= 4096, expected: "a whole number of MiB from 4 to 4096" },
  cache: { ok: (v) => v === "0" || v === "1", expected: "0 or 1" },
  wholeFile: { ok: (v) => v === "0" || v === "1", expected: "0 or 1" },
  run: { ok: (v) => v === "0" || v === "1", expected: "0 or 1" },
};
/** the first bad query parameter, in words, or undefined */
const badParam = (() => {
  for (const [name, v] of params) {
    const spec = PARAMS[name];
    if (!spec) return `unknown query parameter ${name} (expected ${Object.keys(PARAMS).join(", ")})`;
    if (!spec.ok(v)) return `query parameter ${name}=${v}: expected ${spec.expected}`;
  }
  return undefined;
})();
if (!badParam) {
  for (const [name, spec] of Object.entries(PARAMS)) {
    const v = params.get(name);
    if (v !== null && spec.field) $(spec.field).value = v;
  }
}

// tsllm-isolate.js (a script before this one) settles this once the page is cross-origin isolated
// or will not be, and never when it reloads the page to be: nothing starts on the page it throws away
await globalThis.tsllmIsolation;

const engine = new TsllmWorker("/tsllm/engine-worker.js");
/** what is loaded: the source (URL string or File) and backend, and the worker's answer */
let loaded;
/** the chat so far (mode "chat") */
let conversation = [];
let controller;

const status = (text) => ($("status").textContent = text);
const fmt = (ms) => (ms < 10 ? ms.toFixed(2) : ms.toFixed(1));
const mib = (bytes) => `${(bytes / 2 ** 20).toFixed(bytes < 10 * 2 ** 20 ? 2 : 0)} MiB`;

status(badParam ?? (crossOriginIsolated ? "ready" : "ready (not cross-origin isolated: the wasm backend runs on one thread; COOP/COEP headers give it more, as the example server sends, or tsllm-isolate.js where a host cannot send them)"));
if (badParam) $("error").textContent = badParam;

fetch("/models/").then((r) => (r.ok ? r.json() : [])).then((names) => {
  for (const n of names) $("models").append(new Option(`/models/${n}`));
}, () => undefined);

function add(role, text) {
  const li = document.createElement("li");
  li.className = role;
  li.textContent = text;
  $("messages").append(li);
  return li;
}

/** loads the model the form names unless it is loaded already; `signal` (Stop) cancels a download */
async function ensureLoaded(signal) {
  const file = $("file").files[0];
  const source = file ?? $("model").value.trim();
  const backend = $("backend").value;
  if (source === "") throw new Error("no model: give its URL (the model field, or model=URL) or pick a .gguf file");
  if (!file && !URL.canParse(source, location.href)) throw new Error(`model ${source}: not a valid URL`);
  if (loaded && loaded.source === source && loaded.backend === backend) return loaded.info;
  loaded = undefined;
  status(`loading ${file ? file.name : source} on ${backend}…`);
  const memoryLimitMiB = params.get("memoryLimitMiB");
  const name = file ? file.name : source;
  const info = await engine.load(source, {
    backend, signal, cache: params.get("cache") !== "0", wholeFile: params.get("wholeFile") === "1", ...(memoryLimitMiB ? { memoryLimitBytes: Number(memoryLimitMiB) * 2 ** 20 } : {}),
    onProgress: (p) => {
      const bar = $("progress");
      bar.hidden = false;
      bar.max = p.total;
      bar.value = p.loaded;
      const what = p.phase === "download" ? "downloading" : p.phase === "verify" ? "checking the cached copy of" : p.fromCache ? "reading from the cache" : "reading";
      status(`${what} ${name}: ${mib(p.loaded)} / ${mib(p.total)} (${p.total ? Math.floor((100 * p.loaded) / p.total) : 0}%)…`);
    },
  });
  $("progress").hidden = true;
  loaded = { source, backend, info };
  const i = info.info;
  const from = file ? "from the file" : info.fromCache ? "from the cache (no download)" : info.cached ? "downloaded, now cached" : info.notCached ? `downloaded, not cached: ${info.notCached}` : "downloaded (not cached)";
  status(`${i.architecture ?? "model"} · ${(i.parameterCount / 1e6).toFixed(2)}M parameters · context ${info.contextSize} · ${info.backend}${info.backend === "wasm" ? ` (${info.threads} threads, ${info.simd} SIMD${info.memories > 1 ? `, ${info.memories} memories` : ""})` : ""} · ${mib(info.size)} ${from} · loaded in ${fmt(info.loadMs)} ms${info.refetched ? ` · ${info.refetched}` : ""}`);
  return info;
}

/** a number field's value (undefined when empty); text it cannot read is an error naming the field */
function numberOf(id) {
  const field = $(id);
  if (field.validity.badInput) throw new Error(`${field.parentElement.textContent.trim()}: not a number`);
  const v = field.value.trim();
  return v === "" ? undefined : Number(v);
}

async function run() {
  $("error").textContent = "";
  $("result").textContent = "";
  $("stats").textContent = "";
  $("run").disabled = true;
  $("stop").disabled = false;
  controller = new AbortController();
  const prompt = $("prompt").value;
  const mode = $("mode").value;
  try {
    if (badParam) throw new Error(badParam);
    const info = await ensureLoaded(controller.signal);
    const options = { maxTokens: numberOf("max-tokens"), temperature: numberOf("temperature"), seed: numberOf("seed"), signal: controller.signal };
    let out;
    const onStep = (s) => (out.textContent += s.text);
    let result;
    if (mode === "chat") {
      if (!info.hasChatTemplate) throw new Error(`${info.source} has no chat template: use mode "complete the prompt"`);
      conversation.push({ role: "user", content: prompt });
      add("user", prompt);
      out = add("assistant", "");
      result = await engine.chat(conversation, { ...options, onStep });
      conversation.push({ role: "assistant", content: result.completion });
    } else {
      const li = add("assistant", "");
      const p = document.createElement("span");
      p.className = "prompt";
      p.textContent = prompt;
      out = document.createElement("span");
      li.append(p, out);
      result = await engine.generate(prompt, { ...options, onStep });
    }
    out.textContent = result.completion;
    const t = result.timings;
    $("stats").textContent = `${result.finishReason} · ${t.promptTokens} prompt + ${t.completionTokens} tokens · TTFT ${fmt(t.ttftMs)} ms · TPOT ${fmt(t.tpotMs)} ms · ${t.decodeTokensPerSecond.toFixed(1)} tok/s`;
    $("result").textContent = JSON.stringify({ completionTokens: result.completionTokens, completion: result.completion, backend: info.backend, timings: t, finishReason: result.finishReason, promptTokens: result.promptTokens,
      load: { fromCache: info.fromCache, cached: info.cached, size: info.size, ...(info.refetched ? { refetched: info.refetched } : {}) },
      ...(info.backend === "wasm" ? { wasm: { threads: info.threads, simd: info.simd, memories: info.memories, ...(info.threadsNote ? { threadsNote: info.threadsNote } : {}) } } : {}),
    });
  } catch (e) {
    const message = e instanceof Error ? e.message : String(e);
    $("error").textContent = message;
    if (!loaded) {
      $("progress").hidden = true;
      status(e?.name === "AbortError" ? "loading stopped: no model loaded" : "no model loaded");
    }
    $("result").textContent = JSON.stringify({ error: message });
  } finally {
    $("run").disabled = false;
    $("stop").disabled = true;
  }
}

$("composer").addEventListener("submit", (e) => {
  e.preventDefault();
  void run();
});
$("prompt").addEventListener("keydown", (e) => {
  if (e.key === "Enter" && !e.shiftKey) {
    e.preventDefault();
    if (!$("run").disabled) void run();
  }
});
$("stop").addEventListener("click", () => controller?.abort());
$("clear").addEventListener("click", () => {
  conversation = [];
  $("messages").replaceChildren();
  $("stats").textContent = "";
});
$("clear-cache").addEventListener("click", async () => {
  const n = await engine.clearModelCache();
  status(`removed ${n} cached model${n === 1 ? "" : "s"}`);
});
$("mode").addEventListener("change", () => ($("run").textContent = $("mode").value === "chat" ? "Send" : "Generate"));
$("file").addEventListener("change", () => {
  const f = $("file").files[0];
  if (f) $("model").value = "";
});

if (params.get("run") === "1") void run();
