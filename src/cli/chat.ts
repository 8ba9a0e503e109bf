import { createInterface } from "node:readline";
import type { ChatMessage } from "../chat/index.js";
import { formatTimings } from "../generation/index.js";
import { loadModel } from "../llm.js";
import { flag, optionalString, parse, requireString, type OptionSpec } from "./args.js";
import { asUsageError, chatTemplateFrom, GENERATE_ARGS, generateOptionsFrom, loadOptionsFrom, writeContextFullNote } from "./generate.js";

export const chatHelp = `Usage: tsllm chat --model MODEL [--system TEXT] [options]

Talks with a model through its chat template. Each line you type is a user message; the reply
streams back and the conversation is kept for the next turn. Reads from a pipe too, one message
per line.

Commands (typed as a message):
  /reset                forget the conversation (the system prompt stays)
  /exit                 quit (so does end of input, Ctrl-D)

Options:
  --model MODEL         GGUF file or Hugging Face model folder (required)
  --system TEXT         system prompt
  --chat-template FILE  Jinja chat template to use instead of the model's own
  --normalize FORM      Unicode-normalize messages first: none (default), nfc, or nfkc
  --max-tokens N        most tokens per reply (default 256)
  --temperature T, --top-k K, --top-p P, --min-p P, --typical-p P, --repeat-penalty R,
  --repeat-last-n N, --frequency-penalty F, --presence-penalty P, --seed S, --stop STR,
  --logit-bias ID=BIAS, --ignore-eos, --threads N, --backend NAME, --ctx-size N|auto,
  --quantize Q, --cache-type-k T, --cache-type-v T, --flash-attn on|off|auto, --no-warmup: as in generate
  --timings             print each reply's timings and the seed (one for the whole conversation) to stderr
  -h, --help            show this help
`;

/** generate's options, less those that make no sense in a conversation */
const CHAT_ARGS: OptionSpec = Object.fromEntries(
  Object.entries(GENERATE_ARGS).filter(([k]) => !["prompt", "json", "logprobs", "chat"].includes(k)),
);

/** chat's options: generate's conversation-worthy ones and --timings */
export const CHAT_OPTIONS: OptionSpec = { ...CHAT_ARGS, timings: { type: "boolean" } };

export async function runChat(argv: string[]): Promise<void> {
  const values = parse(argv, CHAT_OPTIONS);
  if (flag(values, "help")) { process.stdout.write(chatHelp); return; }
  const modelPath = requireString(values, "model");
  const options = generateOptionsFrom(values);
  const system = optionalString(values, "system");
  const chatTemplate = chatTemplateFrom(values);
  const model = await loadModel(modelPath, loadOptionsFrom(values));
  const interactive = process.stdin.isTTY === true;
  const rl = createInterface({ input: process.stdin, output: interactive ? process.stdout : undefined, terminal: interactive });
  try {
    model.chatFormatter(chatTemplate); // no template: fail now, before the first message
    const history: ChatMessage[] = [];
    if (interactive) process.stdout.write("Type a message; /reset starts over, /exit quits.\n");
    const prompt = () => { if (interactive) rl.prompt(); };
    rl.setPrompt("> ");
    prompt();
    for await (const line of rl) {
      const text = line.trim();
      if (text === "/exit" || text === "/quit") break;
      if (text === "/reset") {
        history.length = 0;
        process.stdout.write("[conversation reset]\n");
        prompt();
        continue;
      }
      if (text === "") { prompt(); continue; }
      history.push({ role: "user", content: line });
      const it = model.streamChat(history, { ...options, system, chatTemplate });
      let result;
      for (;;) {
        const r = await it.next().catch(asUsageError);
        if (r.done) { result = r.value; break; }
        process.stdout.write(r.value.text);
      }
      process.stdout.write("\n");
      history.push({ role: "assistant", content: result.completion });
      if (flag(values, "timings")) process.stderr.write(`[${result.finishReason}] ${formatTimings(result.timings)} | seed ${options.seed}\n`);
      writeContextFullNote(result);
      prompt();
    }
  } finally {
    rl.close();
    model.dispose();
  }
}
