// tsllm's chat page: streams replies from /v1/chat/completions (SSE). The conversation, the
// system prompt and a message not yet sent are kept in sessionStorage: a reload of the tab keeps
// them (a reply still streaming with what came so far, marked stopped), New chat (or closing the
// tab) drops the conversation; the sampling settings are kept in localStorage. Replies render a little Markdown (code blocks,
// `code`, **bold**, http(s) links) as elements made one by one around text nodes, never as HTML:
// what a model writes cannot become markup. A thinking model's
// reasoning (the stream's reasoning_content) shows as it streams, in a collapsible "Thinking"
// block above the reply, and is not sent back with the conversation. Each conversation sends an
// id of its own in the X-Session-Id header: a load balancer in front of several replicas
// (deploy/nginx.conf) sends its turns to one replica, whose prefix cache holds the turns before.
"use strict";
const $ = (id) => document.getElementById(id);
/**
 * the conversation, [{role, content, stats?}]: replaced (not emptied) by New chat and by edits,
 * so that a reply still streaming into the old one stays out of the new one
 */
let history = [];
/** this conversation's id (X-Session-Id): kept with it over a reload, a new one for New chat */
let session = newSession();
let controller = null;
/** while a reply streams: saves the conversation with the reply so far, marked stopped (the page is being left or reloaded) */
let leaving = null;
/** whether the page is being left (pagehide) */
let pageLeft = false;
let modelId;
/**
 * while "Drop the oldest turns and retry" runs: the conversation before the drop and the message
 * being sent, and the trimmed conversation now on the page (`trimmed`); until a retry is answered
 * the tab keeps the whole one (a reload or a failure must not lose the dropped turns)
 */
let retrying = null;

const list = $("messages");
const STORED = "tsllm-chat";

/** 128 random bits as hex (crypto.randomUUID exists only on https: and localhost pages, this works on plain http too) */
function newSession() {
  return Array.from(crypto.getRandomValues(new Uint8Array(16)), (b) => b.toString(16).padStart(2, "0")).join("");
}

/** keeps the conversation (`messages`: history and a turn still streaming), its id and the system prompt for a reload of this tab */
function save(messages = history) {
  // (a New chat or an edit during a retry replaced `history`: that one is kept, not the old whole)
  const whole = retrying?.trimmed === history ? retrying : null;
  try {
    sessionStorage.setItem(STORED, JSON.stringify({ history: whole ? whole.before : messages, session, system: $("system").value, draft: whole ? withTyped(whole.text) : $("input").value }));
  } catch {} // storage full or disabled: the conversation just does not outlive the page
}

/** a message being retried and what was typed in the box meanwhile, one after the other: either alone in the box would lose the other */
function withTyped(text) {
  const typed = $("input").value.trim();
  return typed ? `${text}\n\n${typed}` : text;
}

function restore() {
  let stored;
  try {
    stored = JSON.parse(sessionStorage.getItem(STORED) ?? "null");
  } catch {}
  if (!stored || !Array.isArray(stored.history)) return;
  history = stored.history.filter((m) => m && (m.role === "user" || m.role === "assistant") && typeof m.content === "string");
  if (typeof stored.system === "string") $("system").value = stored.system;
  if (typeof stored.draft === "string") $("input").value = stored.draft;
  if (typeof stored.session === "string" && /^[0-9a-f]{32}$/.test(stored.session)) session = stored.session;
  renderAll();
}
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

/** the code of a failed response's OpenAI-shaped error (model_not_found, context_length_exceeded, ...), read from a copy */
async function codeOf(res) {
  try {
    return JSON.parse(await res.clone().text()).error?.code;
  } catch {
    return undefined;
  }
}

/** a failed response as an Error with the server's message, and its code as `code` */
async function failure(res) {
  const code = await codeOf(res);
  return Object.assign(new Error(await errorOf(res)), { code });
}

/**
 * whether a 404 says that the server serves another model now (restarted with it): the page
 * then shows that model and asks it instead (true when the model changed)
 */
async function modelGone(res) {
  if ((await codeOf(res)) !== "model_not_found") return false;
  const before = modelId;
  await loadInfo();
  return modelId !== before;
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

/** `text` with `code`, **bold** and [link](https://...) spans, as nodes appended to `into` (elements made one by one: nothing is parsed as HTML) */
function inline(text, into) {
  let at = 0;
  for (const m of text.matchAll(/`([^`\n]+)`|\*\*([^*\n]+)\*\*|\[([^\]\n]+)\]\((https?:\/\/[^\s()]+)\)/g)) {
    into.append(text.slice(at, m.index));
    let el;
    if (m[3] !== undefined) {
      // [text](http(s) URL) only (no javascript: or data: link), opened in a new tab, and the
      // address in its title: a link's text can name another place than the one it leads to
      el = document.createElement("a");
      el.href = m[4];
      el.target = "_blank";
      el.rel = "noopener noreferrer";
      el.title = m[4];
      el.textContent = m[3];
    } else {
      el = document.createElement(m[1] !== undefined ? "code" : "strong");
      el.textContent = m[1] ?? m[2];
    }
    into.append(el);
    at = m.index + m[0].length;
  }
  into.append(text.slice(at));
}

/** a reply's text as Markdown-lite into `into`: ``` fences as code blocks (an unclosed one runs to the end while it streams), the rest inline */
function renderMarkdown(text, into) {
  into.replaceChildren();
  let at = 0;
  for (const m of text.matchAll(/```([^\n`]*)\n([\s\S]*?)(?:\n```[^\n]*\n?|$)/g)) {
    inline(text.slice(at, m.index), into);
    const pre = document.createElement("pre");
    const code = document.createElement("code");
    if (m[1].trim()) code.dataset.lang = m[1].trim();
    code.textContent = m[2];
    pre.append(code);
    into.append(pre);
    at = m.index + m[0].length;
  }
  inline(text.slice(at), into);
}

/**
 * a reply's reasoning, as text, in a <details> before its content (made when the first reasoning
 * arrives); open while the model thinks, closed once the reply itself begins
 */
function showReasoning(li, reasoning, thinking) {
  let details = li.querySelector("details.reasoning");
  if (!details) {
    if (!reasoning) return;
    details = document.createElement("details");
    details.className = "reasoning";
    const summary = document.createElement("summary");
    const text = document.createElement("div");
    text.className = "thought";
    details.append(summary, text);
    li.querySelector(".who").after(details);
  }
  details.querySelector(".thought").textContent = reasoning;
  // opened or folded only when the thinking starts or ends: a reader's own click holds meanwhile
  const state = thinking ? "thinking" : "thought";
  if (details.dataset.state !== state) {
    details.dataset.state = state;
    details.querySelector("summary").textContent = thinking ? "Thinking…" : "Thought";
    details.open = thinking;
  }
}

/** the list item of one message; `index` is its place in history (undefined while it streams) */
function bubble(role, text, index) {
  const li = document.createElement("li");
  li.className = role;
  // who said it, for a screen reader (the bubbles' sides and colours say it to the eye only)
  const who = document.createElement("span");
  who.className = "who sr-only";
  who.textContent = role === "user" ? "You:" : "Assistant:";
  li.append(who);
  const content = document.createElement("div");
  content.className = "content";
  if (role === "assistant") renderMarkdown(text, content);
  else content.textContent = text;
  li.append(content);
  if (index !== undefined && typeof history[index].reasoning === "string") showReasoning(li, history[index].reasoning, false);
  if (index !== undefined) decorate(li, index);
  list.append(li);
  list.scrollTop = list.scrollHeight;
  return li;
}

/**
 * `text` onto the clipboard: the Clipboard API exists only on https: and localhost pages, and a
 * server on the LAN (http://192.168.1.5:8080) is neither, where a selected textarea and "copy" still work
 */
async function copyText(text) {
  if (navigator.clipboard) return navigator.clipboard.writeText(text);
  const area = document.createElement("textarea");
  area.value = text;
  area.style.position = "fixed";
  area.style.opacity = "0";
  document.body.append(area);
  area.select();
  const copied = document.execCommand("copy");
  area.remove();
  if (!copied) throw new Error("the browser refused to copy");
}

/** a finished message's stats and buttons: Edit on a user's message, Copy on a reply, Regenerate on the last one */
function decorate(li, index) {
  const m = history[index];
  if (m.stats) {
    const stats = document.createElement("span");
    stats.className = "stats";
    stats.textContent = m.stats;
    li.append(stats);
  }
  const actions = document.createElement("span");
  actions.className = "actions";
  const button = (label, title, onClick) => {
    const b = document.createElement("button");
    b.type = "button";
    b.className = label.toLowerCase();
    b.textContent = label;
    b.title = title;
    b.addEventListener("click", () => {
      if (!controller) onClick();
    });
    actions.append(b);
  };
  if (m.role === "user") button("Edit", "Edit this message: the conversation goes back to before it", () => edit(index));
  else {
    // the reply as the model wrote it (its Markdown), without its reasoning
    button("Copy", "Copy this reply", () => {
      copyText(m.content).then(() => ($("error").textContent = ""), (e) => ($("error").textContent = `cannot copy: ${e.message}`));
    });
    if (index === history.length - 1) button("Regenerate", "Ask for another reply to the same message", regenerate);
  }
  if (actions.childElementCount) li.append(actions);
}

function renderAll() {
  list.replaceChildren();
  history.forEach((m, i) => bubble(m.role, m.content, i));
}

/** the conversation back to before message `index`, whose text returns to the input to change and send again */
function edit(index) {
  const text = history[index].content;
  history = history.slice(0, index);
  $("trim").hidden = true;
  renderAll();
  $("input").value = text;
  save();
  $("input").focus();
}

/** the last reply dropped and asked for again */
function regenerate() {
  const user = history.at(-2);
  if (history.at(-1)?.role !== "assistant" || user?.role !== "user" || !sampling()) return;
  history = history.slice(0, -2);
  renderAll();
  void send(user.content);
}

function setBusy(busy) {
  $("send").disabled = busy;
  $("stop").disabled = !busy;
}

/**
 * the sampling fields (input id, request field): an empty one leaves its field to the server's
 * default; their values are kept in localStorage, for every tab and the next visit (the
 * conversation is this tab's alone)
 */
const SAMPLING = [["temperature", "temperature"], ["max-tokens", "max_tokens"], ["top-p", "top_p"], ["top-k", "top_k"], ["min-p", "min_p"]];
const SETTINGS = "tsllm-settings";
try {
  const kept = JSON.parse(localStorage.getItem(SETTINGS) ?? "null");
  for (const [id] of SAMPLING) if (typeof kept?.[id] === "string") $(id).value = kept[id];
} catch {} // storage disabled or a bad entry: the page's defaults
for (const [id] of SAMPLING) {
  $(id).addEventListener("input", () => {
    try {
      localStorage.setItem(SETTINGS, JSON.stringify(Object.fromEntries(SAMPLING.map(([field]) => [field, $(field).value]))));
    } catch {}
  });
}

/**
 * the request's sampling fields; undefined, with the error shown, when a field holds no number
 * (a number input's value is then "", which would silently send the server's default instead)
 */
function sampling() {
  const fields = {};
  for (const [id, field] of SAMPLING) {
    const input = $(id);
    if (input.validity.badInput) {
      $("error").textContent = `${input.labels[0].firstChild.textContent.trim()}: enter a number, or nothing for the server's default`;
      input.closest("details")?.setAttribute("open", "");
      input.focus();
      return undefined;
    }
    const v = input.value.trim();
    if (v !== "") fields[field] = Number(v);
  }
  return fields;
}

const fmt = (x) => (Number.isFinite(x) ? x.toFixed(1) : "–");

/**
 * one message sent and its reply streamed into the conversation; how it ended: "refused" when the
 * server refused it for the context (context_length_exceeded), the turn taken back; "stopped" or
 * "error" when it was stopped or failed (the turn taken back when nothing came); "done" otherwise
 */
async function send(text) {
  $("error").textContent = "";
  $("note").textContent = "";
  $("trim").hidden = true;
  const params = sampling();
  if (!params) {
    if (!retrying && $("input").value === "") $("input").value = text;
    return "error";
  }
  const turns = history;
  const user = { role: "user", content: text };
  const userLi = bubble("user", text);
  const li = bubble("assistant", "");
  li.setAttribute("aria-busy", "true");
  const content = li.querySelector(".content");
  let reply = "", reasoning = "", rendering = 0;
  /** the reply so far, rendered once per frame (not per token: a long reply re-renders whole) */
  const show = (streaming = true) => {
    rendering = 0;
    const follow = atBottom();
    showReasoning(li, reasoning, streaming && reply === "");
    renderMarkdown(reply, content);
    if (follow) list.scrollTop = list.scrollHeight;
  };
  const system = $("system").value.trim();
  // (the page's own fields, such as a reply's stats, stay out of the request)
  const messages = [...(system ? [{ role: "system", content: system }] : []), ...turns.map(({ role, content }) => ({ role, content })), user];
  // continuous_usage_stats: every chunk says how many tokens the reply has so far, so a reply
  // stopped mid-way shows its real count (a chunk may carry several tokens, or none)
  const body = { messages, stream: true, stream_options: { include_usage: true, continuous_usage_stats: true }, ...params };
  controller = new AbortController();
  setBusy(true);
  const started = performance.now();
  let firstAt = 0, chunks = 0, made = null, timings = null, finish = null, error = null, code;
  /** the turn as it stands: what the conversation keeps when the reply ends, or when the page is left while it streams */
  const turn = () => {
    const end = performance.now();
    const ttft = timings ? timings.ttft_ms : firstAt ? firstAt - started : NaN;
    // the server's count of the tokens so far; the chunks, from a server that does not send it
    const tokens = made ?? chunks;
    const tpot = timings ? timings.predicted_per_token_ms : tokens > 1 ? (end - firstAt) / (tokens - 1) : NaN;
    const n = timings ? timings.predicted_n : tokens;
    const stats = `${finish ?? "?"} · ${n} tokens · TTFT ${fmt(ttft)} ms · TPOT ${fmt(tpot)} ms · ${fmt(tpot > 0 ? 1000 / tpot : NaN)} tok/s`;
    return [user, { role: "assistant", content: reply, ...(reasoning ? { reasoning } : {}), stats }];
  };
  // a reload mid-reply keeps what came (the browser aborts the request, the server frees it); a
  // turn with nothing back yet is not kept: a conversation ending in a user's message could not go on
  leaving = () => {
    if (turns !== history || (reply === "" && reasoning === "")) return;
    finish = "stopped";
    save([...history, ...turn()]);
  };
  try {
    const post = async () => {
      try {
        return await fetch("/v1/chat/completions", { method: "POST", headers: { ...headers(), "X-Session-Id": session }, signal: controller.signal, body: JSON.stringify({ ...body, model: modelId }) });
      } catch (e) {
        if (e.name === "AbortError") throw e;
        throw new Error(`cannot reach the server (${e.message})`);
      }
    };
    let res = await post();
    if (res.status === 404 && (await modelGone(res))) res = await post();
    if (!res.ok) throw await failure(res);
    const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
    let buf = "", ended = false;
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
      // Server-Sent Events: events end at a blank line; an event's data is its data: lines
      // (a proxy's ": keep-alive" comment, an event: or id: line, CRLF line ends are no data)
      let end;
      while ((end = /\r?\n\r?\n/.exec(buf))) {
        const lines = buf.slice(0, end.index).split(/\r?\n/);
        buf = buf.slice(end.index + end[0].length);
        const data = lines.filter((l) => l.startsWith("data:")).map((l) => l.slice(5).replace(/^ /, "")).join("\n");
        if (data === "[DONE]") ended = true;
        if (data === "" || data === "[DONE]") continue;
        const chunk = JSON.parse(data);
        if (chunk.error) throw new Error(chunk.error.message);
        const delta = chunk.choices[0]?.delta;
        const text = delta?.content, thought = delta?.reasoning_content;
        if (text || thought) {
          if (!firstAt) firstAt = performance.now();
          chunks++;
          if (text) reply += text;
          if (thought) reasoning += thought;
          rendering ||= requestAnimationFrame(() => show());
        }
        if (chunk.usage) made = chunk.usage.completion_tokens;
        finish = chunk.choices[0]?.finish_reason ?? finish;
        timings = chunk.timings ?? timings;
      }
    }
    // a stream closed before its finish_reason and [DONE] (a proxy or a replica gone between two
    // events, a connection closed without chunked encoding's end) is cut short, not a finished reply
    if (!ended && finish === null) throw new Error("the reply was cut off: the stream ended before the server finished it");
    if (modelId === undefined) void loadInfo();
  } catch (e) {
    // leaving the page cut the connection: pagehide kept the turn already (`leaving`)
    if (pageLeft) return "stopped";
    if (e.name === "AbortError") finish = "stopped";
    else {
      finish = "error";
      error = e.message;
      code = e.code;
    }
  } finally {
    controller = null;
    leaving = null;
    setBusy(false);
    li.removeAttribute("aria-busy");
    if (rendering) cancelAnimationFrame(rendering);
    show(false);
    // the Send or Stop button that had the focus is disabled now: the focus goes back to the message box
    if (document.activeElement === document.body || document.activeElement?.disabled) $("input").focus();
  }
  if (error) $("error").textContent = error;
  if (reply === "" && reasoning === "" && (error || finish === "stopped")) {
    // nothing came back: the turn is taken back and its text returns to the input, to send again;
    // not after a New chat meanwhile: the message was the conversation's that was left (and a
    // retry of dropped turns gives it back itself, once it gives up)
    userLi.remove();
    li.remove();
    if (turns === history && !retrying && $("input").value === "") $("input").value = text;
    save();
    if (code !== "context_length_exceeded" || turns !== history) return finish;
    // the conversation outgrew the context: the page offers to drop its oldest turns
    $("trim").hidden = history.length === 0;
    return "refused";
  }
  turns.push(...turn());
  const ended = finish === "stopped" || finish === "error" ? finish : "done";
  // a New chat or an edit while it streamed replaced the conversation: this turn is not on the page any more
  if (turns !== history) return ended;
  const follow = atBottom();
  // the previous reply loses its Regenerate button: only the last one can be asked for again
  for (const old of list.querySelectorAll("li.assistant button.regenerate")) old.remove();
  decorate(userLi, history.length - 2);
  decorate(li, history.length - 1);
  // a screen reader announces the reply's text, and only that (the status region, not the conversation)
  $("announce").textContent = content.textContent;
  save();
  if (follow) list.scrollTop = list.scrollHeight;
  return ended;
}

/**
 * the message in the box sent again with the conversation's oldest turns dropped (a message and
 * its replies at a time; the system prompt is no turn and stays), as few as make it fit the
 * context; a note says how many went. The drop holds only once a reply is done: a retry that
 * fails (a 500, the server gone), is stopped, or does not fit even alone gives the conversation
 * back whole, on the page and in the tab's storage, the message back in the box
 */
async function trimAndRetry() {
  const text = $("input").value.trim();
  if (!text || controller) return;
  const before = history;
  retrying = { before, text, trimmed: null };
  // emptied once: what is typed there while the retry runs is the user's next message, kept
  $("input").value = "";
  // the button hides while the retry runs: the focus goes to the message box (Tab from there
  // reaches Stop), not to the page's start
  $("input").focus();
  let dropped = 0, ended;
  try {
    do {
      let n = 1;
      while (n < history.length && history[n].role !== "user") n++;
      history = retrying.trimmed = history.slice(n);
      dropped += n;
      renderAll();
      save();
      ended = await send(text);
      // a New chat or an edit meanwhile: that conversation is the page's now
      if (history !== retrying.trimmed) return;
    } while (ended === "refused" && history.length > 0);
  } finally {
    retrying = null;
  }
  if (ended === "done") {
    save();
    $("note").textContent = `${dropped} oldest message${dropped === 1 ? " was" : "s were"} dropped to fit the model's context`;
    return;
  }
  // the error line (or the refusal, when the message alone does not fit) stays said
  history = before;
  renderAll();
  $("input").value = withTyped(text);
  save();
  // offered again after a failure or a stop; not when the message alone does not fit
  $("trim").hidden = ended === "refused";
  if (ended === "stopped") $("note").textContent = "Stopped: the dropped turns are back";
}
$("trim").addEventListener("click", () => void trimAndRetry());

$("composer").addEventListener("submit", (e) => {
  e.preventDefault();
  const text = $("input").value.trim();
  if (!text || controller) return;
  $("input").value = "";
  save();
  // a click on Send took the focus: the message box keeps it, for the next message
  $("input").focus();
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
// Escape stops a reply, wherever the focus is (as the Stop button's title says); not one that
// cancels an input method's composition
addEventListener("keydown", (e) => {
  if (e.key === "Escape" && controller && !e.isComposing) {
    e.preventDefault();
    controller.abort();
  }
});
$("clear").addEventListener("click", () => {
  controller?.abort();
  history = [];
  session = newSession();
  list.replaceChildren();
  $("error").textContent = "";
  $("note").textContent = "";
  $("trim").hidden = true;
  save();
  $("input").focus();
});
// kept as typed, not on change: a reload (F5) with the focus still in the box fires no change
// event, and what was typed there, a system prompt or a message not yet sent, was lost
$("system").addEventListener("input", () => save());
$("input").addEventListener("input", () => save());
// pagehide, not beforeunload: it fires on a reload, a closed tab and a mobile browser putting the page away
addEventListener("pagehide", () => {
  pageLeft = true;
  leaving?.();
});
addEventListener("pageshow", () => (pageLeft = false));
restore();
void loadInfo();
