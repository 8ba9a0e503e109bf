// tsllm's chat page: streams replies from /v1/chat/completions (SSE), one conversation in memory.
"use strict";
const $ = (id) => document.getElementById(id);
const history = [];
let controller = null;
let modelId;

const keyInput = $("api-key");
keyInput.value = localStorage.getItem("tsllm-api-key") ?? "";
keyInput.addEventListener("change", () => localStorage.setItem("tsllm-api-key", keyInput.value));
const headers = () => ({ "Content-Type": "application/json", ...(keyInput.value ? { Authorization: `Bearer ${keyInput.value}` } : {}) });

async function loadInfo() {
  try {
    const res = await fetch("/v1/models", { headers: headers() });
    const body = await res.json();
    if (!res.ok) throw new Error(body.error?.message ?? res.statusText);
    const m = body.data[0];
    modelId = m.id;
    const params = m.meta.n_params >= 1e9 ? `${(m.meta.n_params / 1e9).toFixed(1)}B` : m.meta.n_params >= 1e6 ? `${(m.meta.n_params / 1e6).toFixed(1)}M` : `${(m.meta.n_params / 1e3).toFixed(0)}K`;
    $("model-info").textContent = `${m.id} · ${m.meta.architecture} · ${params} parameters · context ${m.meta.n_ctx} · ${m.meta.parallel} parallel`;
  } catch (e) {
    $("model-info").textContent = `model info unavailable: ${e.message}`;
  }
}

function bubble(role, text) {
  const li = document.createElement("li");
  li.className = role;
  const content = document.createElement("span");
  content.className = "content";
  content.textContent = text;
  li.append(content);
  $("messages").append(li);
  li.scrollIntoView({ block: "end" });
  return li;
}

function setBusy(busy) {
  $("send").disabled = busy;
  $("stop").disabled = !busy;
}

async function send(text) {
  $("error").textContent = "";
  history.push({ role: "user", content: text });
  bubble("user", text);
  const li = bubble("assistant", "");
  const content = li.querySelector(".content");
  const system = $("system").value.trim();
  const messages = system ? [{ role: "system", content: system }, ...history] : [...history];
  controller = new AbortController();
  setBusy(true);
  const started = performance.now();
  let firstAt = 0, tokens = 0, timings = null, finish = null;
  try {
    const res = await fetch("/v1/chat/completions", {
      method: "POST", headers: headers(), signal: controller.signal,
      body: JSON.stringify({ model: modelId, messages, stream: true, stream_options: { include_usage: true }, temperature: Number($("temperature").value), max_tokens: Number($("max-tokens").value) }),
    });
    if (!res.ok) throw new Error((await res.json()).error?.message ?? res.statusText);
    const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
    let buf = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buf += value;
      let at;
      while ((at = buf.indexOf("\n\n")) >= 0) {
        const data = buf.slice(0, at).replace(/^data: ?/, "");
        buf = buf.slice(at + 2);
        if (data === "[DONE]") continue;
        const chunk = JSON.parse(data);
        if (chunk.error) throw new Error(chunk.error.message);
        const delta = chunk.choices[0]?.delta?.content;
        if (delta) {
          if (!firstAt) firstAt = performance.now();
          tokens++;
          content.textContent += delta;
          li.scrollIntoView({ block: "end" });
        }
        finish = chunk.choices[0]?.finish_reason ?? finish;
        timings = chunk.timings ?? timings;
      }
    }
  } catch (e) {
    if (e.name === "AbortError") finish = "stopped";
    else $("error").textContent = e.message;
  } finally {
    controller = null;
    setBusy(false);
  }
  history.push({ role: "assistant", content: content.textContent });
  const stats = document.createElement("span");
  stats.className = "stats";
  const end = performance.now();
  const ttft = timings ? timings.ttft_ms : firstAt ? firstAt - started : NaN;
  const tpot = timings ? timings.predicted_per_token_ms : tokens > 1 ? (end - firstAt) / (tokens - 1) : NaN;
  const tps = tpot > 0 ? 1000 / tpot : NaN;
  const n = timings ? timings.predicted_n : tokens;
  stats.textContent = `${finish ?? "?"} · ${n} tokens · TTFT ${ttft.toFixed(1)} ms · TPOT ${Number.isFinite(tpot) ? tpot.toFixed(1) : "–"} ms · ${Number.isFinite(tps) ? tps.toFixed(1) : "–"} tok/s`;
  li.append(stats);
}

$("composer").addEventListener("submit", (e) => {
  e.preventDefault();
  const text = $("input").value.trim();
  if (!text || controller) return;
  $("input").value = "";
  void send(text);
});
$("input").addEventListener("keydown", (e) => {
  if (e.key === "Enter" && !e.shiftKey) { e.preventDefault(); $("composer").requestSubmit(); }
});
$("stop").addEventListener("click", () => controller?.abort());
$("clear").addEventListener("click", () => { controller?.abort(); history.length = 0; $("messages").replaceChildren(); });
void loadInfo();
