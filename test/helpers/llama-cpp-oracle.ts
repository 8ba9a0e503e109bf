/**
 * llama.cpp as the test oracle, through node-llama-cpp's prebuilt CPU binary.
 *
 * Settings that make llama.cpp comparable to a float64 reference (~1e-6 on logits): F32 KV
 * cache (the default F16 cache rounds K and V), no flash attention (its online softmax sums
 * in a different order and, on CPU, in F16), temperature 1 and every truncating sampler
 * disabled so the returned distribution is the plain softmax of the logits.
 *
 * Precision: node-llama-cpp hands back the probabilities as float32 values. log(p) of a
 * float32 p carries an absolute error of about 6e-8 (half an ulp relative, i.e. 2^-24), so
 * log-prob differences between tokens are good to ~1e-7 as long as p is a normal float32
 * (p > 1.2e-38); a probability that underflowed to 0 comes back as -Infinity. Tokens
 * missing from the returned map are -Infinity too.
 */
import { existsSync, readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { getLlama, LlamaLogLevel, type Llama, type LlamaModel, type Token } from "node-llama-cpp";
import { readGGUFHeader } from "../../src/formats/gguf-reader.js";

/**
 * The prebuilt binary carries one CPU backend per x86 generation and ggml loads the best the CPU
 * takes. On a CPU with AMX that is the sapphirerapids variant, whose AMX int8 kernels multiply
 * Q8_0 weights in another order than the AVX2 / AVX-512 one tsllm's kernels reproduce: measured on
 * a Xeon with amx_int8, SmolLM-shape Q8_0 logprobs 2.8e-2 from tsllm's (one flipped activation
 * rounding, amplified), ~1e-6 with that variant set aside. So the Q8_0 comparisons need it set
 * aside (.ci/run renames it); where it would load, this says why in the skip message.
 */
const AMX_VARIANT = fileURLToPath(new URL("../../node_modules/@node-llama-cpp/linux-x64/bins/linux-x64/libggml-cpu-sapphirerapids.so", import.meta.url));
const cpuInfo = existsSync("/proc/cpuinfo") ? readFileSync("/proc/cpuinfo", "utf8") : "";
const cpuHasAmx = /\bamx_int8\b/.test(cpuInfo);
export const llamaCppRunsAmx: string | false = cpuHasAmx && existsSync(AMX_VARIANT)
  ? `llama.cpp would run its AMX int8 kernels on this CPU (${AMX_VARIANT}), which add Q8_0 products in another order than the AVX-512 one tsllm reproduces: rename that file (e.g. to *.amx-off, as .ci/run does) to compare Q8_0 with llama.cpp here`
  : false;

/**
 * On an x86 CPU without AVX-512 ggml loads its AVX2 backend (haswell), and some of its kernels add
 * in another order than the AVX-512 backends' that tsllm reproduces: the f32 dot products and
 * softmax sums of the attention go 8 lanes at a time instead of 16, the repacked Q4_K gemm has
 * its own AVX2 loop, and the IQ4_XS prompt products land elsewhere too. Each is the same number
 * to an ulp or two, but a case whose random layers amplify one flipped activation rounding lands
 * ~1e-2 away (measured on a Zen 3 EPYC: SmolLM-shape Q8_0 1.4e-2 .. 2.5e-2 per step, tiny-Llama
 * IQ4_XS 1.0e-2 .. 1.4e-2, one step of a q4_k quantized model 3.5e-2; the same greedy tokens).
 * Those comparisons take a flipped rounding's bound there (FLIPPED_ROUNDING_BOUND), and say why.
 */
export const llamaCppRunsAvx2: string | false = process.arch === "x64" && /\bavx2\b/.test(cpuInfo) && !/\bavx512f\b/.test(cpuInfo)
  ? "llama.cpp runs its AVX2 backend on this CPU (no AVX-512), whose attention sums, Q4_K gemm and IQ4_XS prompt kernel add in another order than the AVX-512 one tsllm reproduces"
  : false;

/** the bound of one flipped activation rounding, amplified: for the comparisons llamaCppRunsAvx2 names */
export const FLIPPED_ROUNDING_BOUND = 5e-2;

/** a token id as node-llama-cpp takes it: its Token is a number with a type-level brand only */
export const llamaToken = (id: number): Token => id as Token;

export interface LlamaCppRunResult {
  /** log-probabilities over the whole vocabulary for the token after the prompt */
  readonly promptLogprobs: Float64Array;
  /** log-probabilities after each greedily chosen decode token (stepLogprobs[i] follows greedyTokens[i]) */
  readonly stepLogprobs: Float64Array[];
  /** greedy (argmax) tokens: greedyTokens[0] is chosen from promptLogprobs, greedyTokens[i] from stepLogprobs[i-1] */
  readonly greedyTokens: number[];
}

export interface LlamaCppRunOptions {
  /** number of greedy tokens to generate (0: only promptLogprobs) */
  readonly decodeSteps: number;
  readonly threads?: number;
  /** KV cache types (default F32 both) */
  readonly cacheTypes?: { readonly k: "F32" | "F16" | "Q8_0" | "Q4_0"; readonly v: "F32" | "F16" | "Q8_0" | "Q4_0" };
  /** llama.cpp's flash attention (default: on where a side is a block format, as tsllm's own default; a quantized V cache needs it) */
  readonly flashAttention?: boolean;
}

let llamaPromise: Promise<Llama> | undefined;

/** the one shared llama.cpp instance (CPU only; never builds or downloads anything) */
export function sharedLlama(): Promise<Llama> {
  llamaPromise ??= getLlama({ gpu: false, build: "never", logLevel: LlamaLogLevel.error, progressLogs: false });
  return llamaPromise;
}

/** disposes the shared instance (call from test.after so the process exits promptly) */
export async function disposeSharedLlama(): Promise<void> {
  const p = llamaPromise;
  llamaPromise = undefined;
  if (p) await (await p).dispose();
}

function toLogprobs(probs: Map<number, number> | undefined, vocabSize: number, where: string): Float64Array {
  if (!probs) throw new Error(`llama.cpp returned no probabilities ${where}`);
  const out = new Float64Array(vocabSize).fill(-Infinity);
  for (const [tok, p] of probs) {
    if (tok < 0 || tok >= vocabSize) throw new Error(`llama.cpp returned token ${tok} outside the vocabulary (${vocabSize}) ${where}`);
    out[tok] = Math.log(p);
  }
  return out;
}

/** the first token with the highest log-prob (lowest id wins ties, like an argmax) */
function argmax(lp: Float64Array): number {
  let best = 0;
  for (let i = 1; i < lp.length; i++) if (lp[i]! > lp[best]!) best = i;
  return best;
}

/**
 * Runs the prompt, then `decodeSteps` greedy steps, returning llama.cpp's full next-token
 * distribution after the prompt and after each step. `promptTokens` are fed as is (add BOS
 * yourself when the model expects it).
 */
export async function llamaCppRun(modelPath: string, promptTokens: number[], opts: LlamaCppRunOptions): Promise<LlamaCppRunResult> {
  if (promptTokens.length === 0) throw new Error("llamaCppRun: promptTokens is empty");
  const llama = await sharedLlama();
  let model: LlamaModel | undefined;
  try {
    model = await llama.loadModel({ modelPath, gpuLayers: 0 });
    const vocabSize = vocabSizeOf(modelPath);
    const contextSize = promptTokens.length + opts.decodeSteps;
    const context = await model.createContext({
      contextSize,
      batchSize: Math.max(promptTokens.length, 1),
      sequences: 1,
      threads: opts.threads ?? 2,
      flashAttention: opts.flashAttention ?? [opts.cacheTypes?.k, opts.cacheTypes?.v].some((t) => t === "Q8_0" || t === "Q4_0"),
      experimentalKvCacheKeyType: opts.cacheTypes?.k ?? "F32",
      experimentalKvCacheValueType: opts.cacheTypes?.v ?? "F32",
    });
    try {
      const sequence = context.getSequence();
      const next = { probabilities: true, options: { temperature: 1, topK: 0, topP: 1, minP: 0 } } as const;
      const evalLast = async (tokens: number[], where: string) => {
        const input = tokens.map((t, i) => (i === tokens.length - 1 ? ([t, { generateNext: next }] as const) : t));
        const res = await sequence.controlledEvaluate(input as Parameters<typeof sequence.controlledEvaluate>[0]);
        return toLogprobs(res[tokens.length - 1]?.next.probabilities, vocabSize, where);
      };
      const promptLogprobs = await evalLast(promptTokens, "after the prompt");
      const greedyTokens: number[] = [];
      const stepLogprobs: Float64Array[] = [];
      let last = promptLogprobs;
      for (let step = 0; step < opts.decodeSteps; step++) {
        const tok = argmax(last);
        greedyTokens.push(tok);
        last = await evalLast([tok], `after decode step ${step}`);
        stepLogprobs.push(last);
      }
      return { promptLogprobs, stepLogprobs, greedyTokens };
    } finally {
      await context.dispose();
    }
  } finally {
    await model?.dispose();
  }
}

/**
 * n_vocab: node-llama-cpp exposes no vocabulary size, so it is taken from the GGUF's token
 * list (llama.cpp requires token_embd to have exactly that many rows).
 */
function vocabSizeOf(modelPath: string): number {
  const tokens = readGGUFHeader(modelPath).metadata.get("tokenizer.ggml.tokens")?.value;
  if (!Array.isArray(tokens)) throw new Error(`${modelPath}: tokenizer.ggml.tokens: missing, cannot size the vocabulary`);
  return tokens.length;
}
