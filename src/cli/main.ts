#!/usr/bin/env node
import { readFileSync } from "node:fs";
import { printable } from "../units/index.js";
import { UsageError } from "./args.js";
import { benchHelp, runBench } from "./bench.js";
import { convertHelp, runConvert } from "./convert.js";
import { chatHelp, runChat } from "./chat.js";
import { downloadHelp, runDownload } from "./download.js";
import { embedHelp, runEmbed } from "./embed.js";
import { generateHelp, runGenerate } from "./generate.js";
import { inspectHelp, runInspect } from "./inspect.js";
import { lsHelp, runLs } from "./ls.js";
import { perplexityHelp, runPerplexity } from "./perplexity.js";
import { pipelineHelp, runPipeline } from "./pipeline.js";
import { rmHelp, runRm } from "./rm.js";
import { runServe, serveHelp } from "./serve.js";
import { runTokenize, tokenizeHelp } from "./tokenize.js";

const COMMANDS: Record<string, { run: (argv: string[]) => Promise<void>; help: string; summary: string }> = {
  generate: { run: runGenerate, help: generateHelp, summary: "stream a completion from a model (GGUF file, HF folder or Hub id)" },
  chat: { run: runChat, help: chatHelp, summary: "talk with a model through its chat template (keeps the conversation)" },
  pipeline: { run: runPipeline, help: pipelineHelp, summary: "Hugging Face-style pipelines: sentiment, NER, fill-mask, features, text generation" },
  embed: { run: runEmbed, help: embedHelp, summary: "sentence embeddings (sentence-transformers semantics)" },
  tokenize: { run: runTokenize, help: tokenizeHelp, summary: "show how a text is tokenized" },
  inspect: { run: runInspect, help: inspectHelp, summary: "describe a model (GGUF, split GGUF, HF folder or Hub id) without loading its weights" },
  perplexity: { run: runPerplexity, help: perplexityHelp, summary: "perplexity of a text (llama.cpp's method), or KL divergence vs a base model" },
  download: { run: runDownload, help: downloadHelp, summary: "fetch a model from the Hugging Face Hub (or ModelScope) into the cache" },
  ls: { run: runLs, help: lsHelp, summary: "list the models in the Hugging Face cache, with their sizes" },
  rm: { run: runRm, help: rmHelp, summary: "remove a model (or one revision of it) from the cache" },
  serve: { run: runServe, help: serveHelp, summary: "OpenAI-compatible HTTP server (streaming, metrics, a chat page) on the batching engine" },
  bench: { run: runBench, help: benchHelp, summary: "measure load, prefill, decode and peak RSS (optionally vs llama.cpp)" },
  convert: { run: runConvert, help: convertHelp, summary: "convert a Hugging Face model folder (or a Hub repo holding one) to GGUF" },
};

const usage = `Usage: tsllm <command> [options]   (tsllm --version)

Commands:
${Object.entries(COMMANDS).map(([name, c]) => `  ${name.padEnd(10)} ${c.summary}`).join("\n")}

Run "tsllm <command> --help" for a command's options.
`;

async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  if (command === undefined || command === "--help" || command === "-h" || command === "help") {
    process.stdout.write(usage);
    return command === undefined ? 2 : 0;
  }
  if (command === "--version" || command === "-V") {
    // package.json is two folders up from both src/cli/ and dist/cli/
    const pkg = JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as { version: string };
    process.stdout.write(`tsllm ${pkg.version}\n`);
    return 0;
  }
  const cmd = Object.hasOwn(COMMANDS, command) ? COMMANDS[command] : undefined;
  if (!cmd) throw new UsageError(`unknown command "${command}" (commands: ${Object.keys(COMMANDS).join(", ")})`);
  await cmd.run(rest);
  return 0;
}

main(process.argv.slice(2)).then(
  (code) => { process.exitCode = code; },
  (err: unknown) => {
    const message = err instanceof Error ? err.message : String(err);
    process.stderr.write(`tsllm: error: ${printable(message)}\n`);
    process.exitCode = err instanceof UsageError ? 2 : 1;
  },
);
