import { createInterface, type Interface } from "node:readline";
import { withSystem, type ChatMessage } from "../chat/index.js";
import { formatTimings } from "../generation/index.js";
import { DEFAULT_MAX_TOKENS, loadModel } from "../llm.js";
import { normalizePrompt } from "../tokenizer/index.js";
import { MODEL_MEANING, flag, optionalString, parse, requireString, type OptionSpec } from "./args.js";
import { utf8Lines } from "./input-files.js";
import { resolveInterruptibly } from "./interrupt.js";
import { asUsageError, chatTemplateFrom, chatTemplateNameFrom, EXIT_INTERRUPTED, GENERATE_ARGS, MAX_CONTEXT, generateOptionsFrom, loadOptionsFrom, loadRefusalInFlagWords, smallerCacheFlags, startStream, withTrainedContext, writeContextFullNote } from "./generate.js";

/**
 * The longest line read as one message from a pipe: four bytes a token of the longest context a
 * model may declare (MAX_CONTEXT), more than any context holds as text. A line of /dev/zero's NULs
 * grew until readline, or the tokenizer's array of its tokens, failed with a stack trace.
 */
const MAX_MESSAGE_BYTES = 4 * MAX_CONTEXT;

export const chatHelp = `Usage: tsllm chat --model MODEL [--system TEXT] [options]

Talks with a model through its chat template. Each line you type is a user message; the reply
streams back and the conversation is kept for the next turn. Reads from a pipe too, one message
per line, as UTF-8 (at a byte that is not, the lines before it are answered, then chat stops with
an error naming the byte, exit 1). A line that ends with a backslash (\\) goes on to the next line: the message keeps the
line break, not the backslash.

Commands (typed as a message):
  /reset (or /clear)    forget the conversation (the system prompt stays)
  /exit, /quit, /bye    quit (so does end of input: Ctrl-D at an empty prompt)
  /help                 list these commands

Ctrl-C (as in llama.cpp's interactive mode):
  while a reply streams   stops it at once and gives the prompt back; the words written so far
                          stay in the conversation as the assistant's turn, so the next turn
                          sees them (/reset forgets them). With stdin from a pipe, SIGINT does
                          the same, and the next line read is the next message.
  at the prompt           clears a half-typed line; at an empty prompt (or pressed twice while
                          a reply stops) it quits with status 130

When the conversation outgrows the context (--ctx-size), the oldest exchanges are forgotten,
with a note on stderr, until the next prompt leaves room for the reply (its limit: --max-tokens,
else the model folder's generation_config.json max_new_tokens, else 256; at most half the
context); the system prompt always stays. A message too long for the context even
alone is refused with an error, and the conversation goes on without it.
A template without a system role (one that refuses or drops it) gets --system at the start of
the first user message, as llama.cpp does, with a note on stderr.

Options:
  --model MODEL         GGUF file or Hugging Face model folder (required)
  --system TEXT         system prompt
  --chat-template T     Jinja chat template to use instead of the model's own:
                        a file, or the template itself (text holding {{ or {%, as llama.cpp's own option takes it)
  --chat-template-name NAME  which of the model's own templates to use: default, tool_use, rag...
  --normalize FORM      Unicode-normalize messages first: none (default), nfc, or nfkc
  --max-tokens N        most tokens per reply (default: the model's max_new_tokens, else 256; -1 or
                        -2: no limit but the context)
  --temperature T, --top-k K, --top-p P, --min-p P, --typical-p P, --samplers LIST, --sampling-seq SEQ, --sampler-seq SEQ,
  --min-keep N, --repeat-penalty R, --repeat-last-n N, --frequency-penalty F, --presence-penalty P, --seed S, --stop STR,
  --logit-bias ID=BIAS, --ignore-eos, --no-escape, --escape, --threads N, --backend NAME, --ctx-size N|auto|0,
  --memory-margin SIZE, --quantize Q, --cache-type-k T, --cache-type-v T, --flash-attn on|off|auto, --no-warmup: as in generate
  --timings             print each reply's timings and the seed (one for the whole conversation) to stderr
  -h, --help            show this help
`;

const COMMANDS_HELP = "/reset forgets the conversation, /exit quits, a line ending in \\ goes on; Ctrl-C stops a reply, and quits at an empty prompt\n";

/** generate's options, less those that make no sense in a conversation */
const CHAT_ARGS: OptionSpec = Object.fromEntries(
  Object.entries(GENERATE_ARGS).filter(([k]) => !["prompt", "json", "logprobs", "chat"].includes(k)),
);

/** chat's options: generate's conversation-worthy ones and --timings */
export const CHAT_OPTIONS: OptionSpec = { ...CHAT_ARGS, timings: { type: "boolean" } };

type InputEvent = { kind: "line"; text: string } | { kind: "end" } | { kind: "interrupt" };

/**
 * What the prompt waits for: lines read, the end of input, Ctrl-C. Lines typed (or piped) while
 * a reply streams wait here in order; an interrupt at the prompt goes to the front.
 */
class Input {
  private readonly queue: InputEvent[] = [];
  private waiter: ((e: InputEvent) => void) | undefined;

  constructor(rl: Interface) {
    rl.on("line", (text) => this.push({ kind: "line", text }));
    rl.on("close", () => this.push({ kind: "end" }));
  }

  push(e: InputEvent, front = false): void {
    const w = this.waiter;
    if (w) { this.waiter = undefined; w(e); return; }
    if (front) this.queue.unshift(e);
    else this.queue.push(e);
  }

  next(): Promise<InputEvent> {
    const e = this.queue.shift();
    if (e) return Promise.resolve(e);
    return new Promise((resolve) => { this.waiter = resolve; });
  }
}

export async function runChat(argv: string[]): Promise<number | undefined> {
  const values = parse(argv, CHAT_OPTIONS);
  if (flag(values, "help")) { process.stdout.write(chatHelp); return; }
  const modelPath = requireString(values, "model", MODEL_MEANING);
  const options = generateOptionsFrom(values);
  const system = optionalString(values, "system");
  const chatTemplate = chatTemplateFrom(values);
  const chatTemplateName = chatTemplateNameFrom(values);
  // a hub reference is downloaded here, where Ctrl-C stops it as it stops tsllm download
  const { path, options: loadOptions } = await withTrainedContext(await resolveInterruptibly("chat", modelPath), loadOptionsFrom(values));
  // its refusals in chat's flags (--ctx-size, --cache-type-k / --cache-type-v), as generate and serve word them
  const model = await loadModel(path, loadOptions).catch(loadRefusalInFlagWords);
  const remedies = { smallerCache: smallerCacheFlags(model) };
  const interactive = process.stdin.isTTY === true;
  let rl: Interface | undefined;
  let input: Input | undefined;
  let piped: ReturnType<typeof utf8Lines> | undefined;
  /** the reply streaming now */
  let reply: AbortController | undefined;
  let pending: string[] = []; // the lines of a message that goes on (a trailing backslash)
  const prompt = () => {
    if (!interactive || !rl) return;
    rl.setPrompt(pending.length > 0 ? "... " : "> ");
    rl.prompt();
  };
  const onInterrupt = () => {
    if (reply && !reply.signal.aborted) { reply.abort(); return; }
    if (reply) {
      // Ctrl-C again while the reply is stopping (a long prompt pass still running): quit now
      process.stdout.write("\n");
      process.exit(EXIT_INTERRUPTED);
    }
    if (interactive && rl && (rl.line !== "" || pending.length > 0)) {
      // a half-typed message: Ctrl-C clears it, now, before readline reads the keys after it
      pending = [];
      rl.write(null, { ctrl: true, name: "e" });
      rl.write(null, { ctrl: true, name: "u" });
      prompt();
      return;
    }
    input?.push({ kind: "interrupt" }, true);
  };
  try {
    const formatter = model.chatFormatter(chatTemplate, { name: chatTemplateName }); // no template: fail now, before the first message
    // a template without a system role: --system goes before the first user message (llama.cpp's polyfill)
    let mergeSystem = false;
    if (system !== undefined) {
      const probe = formatter.systemRole();
      if (!probe.ok) {
        mergeSystem = true;
        process.stderr.write(`tsllm: note: the chat template has no system role (${probe.why}): --system goes at the start of the first user message\n`);
      }
    }
    /** the messages the template gets for `history` */
    const conversation = (history: readonly ChatMessage[]): ChatMessage[] => {
      if (system === undefined) return [...history];
      if (!mergeSystem) return withSystem(history, system);
      const [first, ...rest] = history;
      return first ? [{ ...first, content: `${system}\n${first.content}` }, ...rest] : [];
    };
    const promptTokens = (history: readonly ChatMessage[]) =>
      formatter.encode(conversation(history).map((m) => ({ ...m, content: normalizePrompt(m.content, options.normalize) }))).length;

    // a terminal's keys go to readline as they are; a pipe's bytes must be UTF-8, as --file's
    piped = interactive ? undefined : utf8Lines(process.stdin, "stdin", MAX_MESSAGE_BYTES);
    rl = createInterface({ input: piped?.text ?? process.stdin, output: interactive ? process.stdout : undefined, terminal: interactive });
    input = new Input(rl);
    // a terminal's Ctrl-C reaches readline as a key (raw mode); a pipe's SIGINT is a signal
    rl.on("SIGINT", onInterrupt);
    process.on("SIGINT", onInterrupt);
    const history: ChatMessage[] = [];
    // what the reply is limited to: --max-tokens, else the model's generation_config.json max_new_tokens
    // (streamChat applies it, as every generation's default), else the library's default
    const replyLimit = options.maxTokens ?? model.generationDefaults.maxTokens ?? DEFAULT_MAX_TOKENS;
    if (interactive) process.stdout.write(`Type a message; ${COMMANDS_HELP}`);
    rl.setPrompt("> ");
    prompt();
    for (;;) {
      const e = await input.next();
      if (e.kind === "interrupt") {
        // Ctrl-C at an empty prompt
        if (interactive) process.stdout.write("\n");
        return EXIT_INTERRUPTED;
      }
      let line: string;
      if (e.kind === "end") {
        // the pipe held a byte that is not UTF-8: the lines before it were answered, the rest is refused
        const failure = piped?.failure();
        if (failure) throw failure;
        if (interactive) process.stdout.write("\n");
        if (pending.length === 0) return;
        line = pending.join("\n"); // the input ended inside a continued message: send what there is
        pending = [];
      } else if (e.text.endsWith("\\")) {
        pending.push(e.text.slice(0, -1));
        prompt();
        continue;
      } else {
        line = [...pending, e.text].join("\n");
        const continued = pending.length > 0;
        pending = [];
        const text = line.trim();
        if (!continued) {
          if (text === "/exit" || text === "/quit" || text === "/bye") return;
          if (text === "/reset" || text === "/clear") {
            history.length = 0;
            process.stdout.write("[conversation reset]\n");
            prompt();
            continue;
          }
          if (text === "/help" || text === "/?") { process.stdout.write(COMMANDS_HELP); prompt(); continue; }
          if (/^\/[A-Za-z]+$/.test(text)) {
            process.stderr.write(`tsllm: unknown command ${text}; ${COMMANDS_HELP}`);
            prompt();
            continue;
          }
        }
      }
      if (line.trim() === "") { prompt(); continue; }
      history.push({ role: "user", content: line });
      if (!fitContext(history, promptTokens, model.contextSize, replyLimit)) {
        history.pop();
        if (e.kind === "end") return;
        prompt();
        continue;
      }
      const controller = new AbortController();
      reply = controller;
      let result;
      try {
        // the conversation as the template takes it; the system prompt already in it when merged
        const it = startStream(() => model.streamChat(conversation(history), { ...options, chatTemplate, chatTemplateName, signal: controller.signal }), remedies);
        for (;;) {
          const r = await it.next().catch((e: unknown) => asUsageError(e, remedies));
          if (r.done) { result = r.value; break; }
          process.stdout.write(r.value.text);
        }
      } finally {
        reply = undefined;
      }
      process.stdout.write("\n");
      // an interrupted reply stays as the assistant's turn (llama.cpp keeps it, closed by an end-of-turn token)
      history.push({ role: "assistant", content: result.completion });
      if (result.finishReason === "abort") process.stderr.write("[reply interrupted; Ctrl-C at an empty prompt quits]\n");
      if (flag(values, "timings")) process.stderr.write(`[${result.finishReason}] ${formatTimings(result.timings)} | seed ${options.seed}\n`);
      writeContextFullNote(result);
      if (e.kind === "end") return;
      prompt();
    }
  } finally {
    process.off("SIGINT", onInterrupt);
    rl?.close();
    piped?.stop();
    model.dispose();
  }
}

/**
 * Forgets the oldest exchanges (a user message and its reply) until the prompt leaves room for
 * the reply (`maxTokens`, what the reply is limited to; at most half the context); the newest message is never dropped. Says on
 * stderr what it forgot; false (with an error on stderr) when the newest message does not fit even
 * alone.
 */
function fitContext(history: ChatMessage[], promptTokens: (h: readonly ChatMessage[]) => number, contextSize: number, maxTokens: number): boolean {
  const room = Math.max(1, Math.min(maxTokens, Math.floor(contextSize / 2)));
  const before = promptTokens(history);
  let tokens = before;
  let dropped = 0; // exchanges: history alternates user, assistant and ends with the new user message
  while (tokens + room > contextSize && 2 * dropped + 1 < history.length) {
    dropped++;
    tokens = promptTokens(history.slice(2 * dropped));
  }
  if (tokens >= contextSize) {
    process.stderr.write(`tsllm: error: the message makes a prompt of ${tokens} tokens (with the template and the system prompt) but the context holds ${contextSize}; not sent: write a shorter one, or start with a larger --ctx-size\n`);
    return false;
  }
  if (dropped > 0) {
    history.splice(0, 2 * dropped);
    process.stderr.write(`tsllm: note: the conversation (${before} tokens) outgrew the context (--ctx-size ${contextSize}): forgot the oldest ${dropped === 1 ? "exchange" : `${dropped} exchanges`} (the system prompt stays)\n`);
  }
  return true;
}
