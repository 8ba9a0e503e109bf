import type { OptionSpec } from "./args.js";
import { BENCH_ARGS, benchHelp, runBench } from "./bench.js";
import { CONVERT_ARGS, convertHelp, runConvert } from "./convert.js";
import { CHAT_OPTIONS, chatHelp, runChat } from "./chat.js";
import { DOWNLOAD_ARGS, downloadHelp, runDownload } from "./download.js";
import { EMBED_ARGS, embedHelp, runEmbed } from "./embed.js";
import { GENERATE_OPTIONS, generateHelp, runGenerate } from "./generate.js";
import { INSPECT_ARGS, inspectHelp, runInspect } from "./inspect.js";
import { LS_ARGS, lsHelp, runLs } from "./ls.js";
import { PERPLEXITY_ARGS, perplexityHelp, runPerplexity } from "./perplexity.js";
import { PIPELINE_ARGS, pipelineHelp, runPipeline } from "./pipeline.js";
import { QUANTIZE_ARGS, quantizeHelp, runQuantize } from "./quantize.js";
import { RM_ARGS, rmHelp, runRm } from "./rm.js";
import { runServe, SERVE_ARGS, serveHelp } from "./serve.js";
import { runTokenize, TOKENIZE_ARGS, tokenizeHelp } from "./tokenize.js";

export interface Command {
  /** resolves with the exit status when it is a number (a chat that Ctrl-C ended: 130), else 0 */
  run: (argv: string[]) => Promise<unknown>;
  /** what `--help` prints */
  help: string;
  /** the options its parser accepts (besides --help / -h) */
  options: OptionSpec;
  summary: string;
}

/** tsllm's commands; README's CLI synopsis and every --help list exactly their options (test/cli-docs.test.ts) */
export const COMMANDS: Record<string, Command> = {
  generate: { run: runGenerate, help: generateHelp, options: GENERATE_OPTIONS, summary: "stream a completion from a model (GGUF file, HF folder or Hub id)" },
  chat: { run: runChat, help: chatHelp, options: CHAT_OPTIONS, summary: "talk with a model through its chat template (keeps the conversation)" },
  pipeline: { run: runPipeline, help: pipelineHelp, options: PIPELINE_ARGS, summary: "Hugging Face-style pipelines: sentiment, NER, fill-mask, features, text generation" },
  embed: { run: runEmbed, help: embedHelp, options: EMBED_ARGS, summary: "sentence embeddings (sentence-transformers semantics)" },
  tokenize: { run: runTokenize, help: tokenizeHelp, options: TOKENIZE_ARGS, summary: "show how a text is tokenized" },
  inspect: { run: runInspect, help: inspectHelp, options: INSPECT_ARGS, summary: "describe a model (GGUF, split GGUF, HF folder or Hub id) without loading its weights" },
  perplexity: { run: runPerplexity, help: perplexityHelp, options: PERPLEXITY_ARGS, summary: "perplexity of a text (llama.cpp's method), or KL divergence vs a base model" },
  download: { run: runDownload, help: downloadHelp, options: DOWNLOAD_ARGS, summary: "fetch a model from the Hugging Face Hub (or ModelScope) into the cache" },
  ls: { run: runLs, help: lsHelp, options: LS_ARGS, summary: "list the models in the Hugging Face cache, with their sizes" },
  rm: { run: runRm, help: rmHelp, options: RM_ARGS, summary: "remove a model (or one revision of it) from the cache" },
  serve: { run: runServe, help: serveHelp, options: SERVE_ARGS, summary: "OpenAI-compatible HTTP server (streaming, metrics, a chat page) on the batching engine" },
  bench: { run: runBench, help: benchHelp, options: BENCH_ARGS, summary: "measure load, prefill, decode and peak RSS (optionally vs llama.cpp)" },
  convert: { run: runConvert, help: convertHelp, options: CONVERT_ARGS, summary: "convert a Hugging Face model folder (or a Hub repo holding one) to GGUF" },
  quantize: { run: runQuantize, help: quantizeHelp, options: QUANTIZE_ARGS, summary: "quantize a GGUF or Hugging Face folder as llama-quantize does (Q4_K_M, Q8_0, ...)" },
};

