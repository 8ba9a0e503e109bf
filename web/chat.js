// tsllm's chat page: streams replies from /v1/chat/completions (SSE), one conversation in memory.
"use strict";
const $ = (id) => document.getElementById(id);
/** the conversation: replaced (not emptied) by New chat, so that a reply still streaming into the old one stays out of the new one */
let history = [];
let controller = null;
let modelId;

const list = $("messages");
const keyInput = $("api-key");
keyInput.value = localStorage.getItem("tsllm-api-key") ?? "";
keyInput.addEventListener("change", () => {
  localStorage.setItem("tsllm-api-key", keyInput.value);
  void loadInfo();
});
const headers = () => ({ "Content-Type": "application/json", ...(keyInput.value ? { Authorization: `Bearer ${keyInput.value}` } : {}) });

/** the message of a failed response: the server's OpenAI-shaped error, else the HTTP status (a proxy's HTML error page is no JSON) */
async function errorOf(res) {
  let message;
  try {
    message = JSON.parse(await res.text()).error?.message;
  } catch {}
  message ??= `HTTP ${res.status} ${res.statusText}`.trim();
  if (res.status === 401) {
    keyInput.focus();
    message += " (enter the server's key in the API key field)";
  }
  return message;
}

async function loadInfo() {
  try {
    const res = await fetch("/v1/models", { headers: headers() });
    if (!res.ok) throw new Error(await errorOf(res));
    const m = (await res.json()).data[0];
    modelId = m.id;
    const params = m.meta.n_params >= 1e9 ? `${(m.meta.n_params / 1e9).toFixed(1)}B` : m.meta.n_params >= 1e6 ? `${(m.meta.n_params / 1e6).toFixed(1)}M` : `${(m.meta.n_params / 1e3).toFixed(0)}K`;
    $("model-info").textContent = `${m.id} · ${m.meta.architecture} · ${params} parameters · context ${m.meta.n_ctx} · ${m.meta.parallel} parallel`;
  } catch (e) {
    $("model-info").textContent = `model info unavailable: ${e.message}`;
  }
}

/** whether the messages list shows its end (then new text keeps it there; a reader who scrolled up is left alone) */
const atBottom = () => list.scrollHeight - list.scrollTop - list.clientHeight < 30;

function bubble(role, text) {
  const li = document.createElement("li");
  li.className = role;
  const content = document.createElement("span");
  content.className = "content";
  content.textContent = text;
  li.append(content);
  list.append(li);
  list.scrollTop = list.scrollHeight;
  return li;
}

function setBusy(busy) {
  $("send").disabled = busy;
  $("stop").disabled = !busy;
}

/** a number field's value, or undefined when it is empty (the server's default then) */
function numberOf(id) {
  const v = $(id).value.trim();
  return v === "" ? undefined : Number(v);
}

const fmt = (x) => (Number.isFinite(x) ? x.toFixed(1) : "–");

async function send(text) {
  $("error").textContent = "";
  const turns = history;
  const user = { role: "user", content: text };
  const userLi = bubble("user", text);
  const li = bubble("assistant", "");
  li.setAttribute("aria-busy", "true");
  const content = li.querySelector(".content");
  const system = $("system").value.trim();
  const messages = [...(system ? [{ role: "system", content: system }] : []), ...turns, user];
  const body = { model: modelId, messages, stream: true, stream_options: { include_usage: true } };
  const temperature = numberOf("temperature"), maxTokens = numberOf("max-tokens");
  if (temperature !== undefined) body.temperature = temperature;
  if (maxTokens !== undefined) body.max_tokens = maxTokens;
  controller = new AbortController();
  setBusy(true);
  const started = performance.now();
  let firstAt = 0, tokens = 0, timings = null, finish = null, error = null;
  try {
    let res;
    try {
      res = await fetch("/v1/chat/completions", { method: "POST", headers: headers(), signal: controller.signal, body: JSON.stringify(body) });
    } catch (e) {
      if (e.name === "AbortError") throw e;
      throw new Error(`cannot reach the server (${e.message})`);
    }
    if (!res.ok) throw new Error(await errorOf(res));
    const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
    let buf = "";
    for (;;) {
      let value, done;
      try {
        ({ value, done } = await reader.read());
      } catch (e) {
        if (e.name === "AbortError") throw e;
        throw new Error(`the connection to the server was lost (${e.message})`);
      }
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
          const follow = atBottom();
          content.textContent += delta;
          if (follow) list.scrollTop = list.scrollHeight;
        }
        finish = chunk.choices[0]?.finish_reason ?? finish;
        timings = chunk.timings ?? timings;
      }
    }
    if (modelId === undefined) void loadInfo();
  } catch (e) {
    if (e.name === "AbortError") finish = "stopped";
    else {
      finish = "error";
      error = e.message;
    }
  } finally {
    controller = null;
    setBusy(false);
    li.removeAttribute("aria-busy");
  }
  const reply = content.textContent;
  if (error) $("error").textContent = error;
  if (reply === "" && (error || finish === "stopped")) {
    // nothing came back: the turn is taken back and its text returns to the input, to send again
    userLi.remove();
    li.remove();
    if ($("input").value === "") $("input").value = text;
    return;
  }
  turns.push(user, { role: "assistant", content: reply });
  const stats = document.createElement("span");
  stats.className = "stats";
  const end = performance.now();
  const ttft = timings ? timings.ttft_ms : firstAt ? firstAt - started : NaN;
  const tpot = timings ? timings.predicted_per_token_ms : tokens > 1 ? (end - firstAt) / (tokens - 1) : NaN;
  const n = timings ? timings.predicted_n : tokens;
  stats.textContent = `${finish ?? "?"} · ${n} tokens · TTFT ${fmt(ttft)} ms · TPOT ${fmt(tpot)} ms · ${fmt(tpot > 0 ? 1000 / tpot : NaN)} tok/s`;
  const follow = atBottom();
  li.append(stats);
  if (follow) list.scrollTop = list.scrollHeight;
}

$("composer").addEventListener("submit", (e) => {
  e.preventDefault();
  const text = $("input").value.trim();
  if (!text || controller) return;
  $("input").value = "";
  void send(text);
});
$("input").addEventListener("keydown", (e) => {
  // Enter that confirms an input method's composition (Japanese, Chinese, ...) is not a send
  if (e.key === "Enter" && !e.shiftKey && !e.isComposing && e.keyCode !== 229) {
    e.preventDefault();
    $("composer").requestSubmit();
  }
});
$("stop").addEventListener("click", () => controller?.abort());
$("clear").addEventListener("click", () => {
  controller?.abort();
  history = [];
  list.replaceChildren();
  $("error").textContent = "";
});
void loadInfo();
