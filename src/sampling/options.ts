import type { LogitBias } from "./logit-processors.js";
import { OptionError } from "../units/index.js";
import { penaltiesActive } from "./logit-processors.js";
import { randomSeed } from "./rng.js";

export interface SamplingOptions {
  /** default 0.8 as llama.cpp; 0 = greedy (argmax, the lowest id wins ties) */
  temperature?: number;
  /** default 40; 0 = disabled */
  topK?: number;
  /** default 0.95; 1 = disabled */
  topP?: number;
  /** default 0.05; 0 = disabled */
  minP?: number;
  /** locally typical sampling; default 1 = disabled (applied after top-k, before top-p, as llama.cpp) */
  typicalP?: number;
  /**
   * epsilon sampling, transformers' EpsilonLogitsWarper: drops the tokens whose probability is
   * below it (the best stays); default 0, and anything outside (0, 1), = disabled. samplerOrder
   * "transformers" only (after its typical-p): llama.cpp has no such sampler
   */
  epsilonCutoff?: number;
  /** eta sampling, transformers' EtaLogitsWarper: as epsilonCutoff with the cutoff min(eta, sqrt(eta) * exp(-entropy)); default 0 = disabled; samplerOrder "transformers" only */
  etaCutoff?: number;
  /** default 1 (off); logit > 0 ? logit / p : logit * p for tokens in the last repeatLastN */
  repeatPenalty?: number;
  /** default 64; -1 = the whole history; 0 = no penalties */
  repeatLastN?: number;
  /** default 0; subtracted once per occurrence in the last repeatLastN tokens */
  frequencyPenalty?: number;
  /** default 0; subtracted once from every token occurring in the last repeatLastN tokens */
  presencePenalty?: number;
  /** token id -> added to its logit; -Infinity bans the token */
  logitBias?: ReadonlyMap<number, number> | Readonly<Record<number, number>>;
  /** any safe integer, used modulo 2^32; -1 or none: a random one (-1 as llama.cpp's LLAMA_DEFAULT_SEED). The same seed gives the same tokens. */
  seed?: number;
  /** top-p, min-p and typical-p keep at least this many candidates, as llama.cpp's min_keep; default 0 (= 1: the best) */
  minKeep?: number;
  /**
   * the order of temperature and the filters: a preset (see SAMPLER_ORDERS; default "llama.cpp"),
   * or the chain itself as llama.cpp's --samplers sets it: the steps run in the order listed, a
   * step left out does not run (without "temperature" the logits are not scaled, a temperature of
   * 0 included), and "penalties", where listed, must come first (as llama.cpp's default chain
   * places them); samplerStepsFromLlamaCpp reads llama.cpp's names and letters
   */
  samplerOrder?: SamplerOrder | readonly SamplerStep[];
}

/**
 * one step of a sampler chain after logit bias and penalties, named by its option; "infill" is
 * llama.cpp's infill sampler (see infill.ts), which needs the model's vocabulary (createSampler's
 * second argument)
 */
export type SamplerStep = "penalties" | "temperature" | "topK" | "topP" | "minP" | "typicalP" | "infill";

const STEP_NAMES: readonly SamplerStep[] = ["penalties", "temperature", "topK", "topP", "minP", "typicalP", "infill"];

/**
 * The orders a sampler applies temperature and the filters in (logit bias and penalties come
 * first in both). Each filter reads the softmax of the logits it is given, so where temperature
 * stands decides which distribution top-p, min-p and typical-p cut (top-k is the same either way).
 * - "llama.cpp": common/sampling.cpp's default sampler sequence (top-k, typical-p, top-p, min-p,
 *   then temperature): the filters see the untempered distribution. The Model API's order.
 * - "transformers": GenerationMixin._get_logits_processor's warpers (temperature, top-k, top-p,
 *   min-p, typical-p): every filter sees the temperature-scaled distribution, and top-k keeps the
 *   ties of the k-th logit as TopKLogitsWarper does. The text-generation pipeline's order.
 */
export const SAMPLER_ORDERS = {
  "llama.cpp": ["topK", "typicalP", "topP", "minP", "temperature"],
  transformers: ["temperature", "topK", "topP", "minP", "typicalP"],
} as const satisfies Record<string, readonly SamplerStep[]>;

export type SamplerOrder = keyof typeof SAMPLER_ORDERS;

/** the seed that asks for a random one, as llama.cpp's LLAMA_DEFAULT_SEED (0xFFFFFFFF, -1 as its server and CLI take it) does */
export const RANDOM_SEED = -1;

export interface ResolvedSamplingOptions {
  temperature: number;
  topK: number;
  topP: number;
  minP: number;
  typicalP: number;
  epsilonCutoff: number;
  etaCutoff: number;
  repeatPenalty: number;
  repeatLastN: number;
  frequencyPenalty: number;
  presencePenalty: number;
  logitBias: LogitBias;
  /** the 32-bit seed in use (a random one when none was given) */
  seed: number;
  minKeep: number;
  /** a preset, or the chain as given (penalties only first, and only where they are on) */
  samplerOrder: SamplerOrder | readonly SamplerStep[];
}

/** llama.cpp's common_params_sampling defaults (and transformers' for epsilon and eta sampling, which llama.cpp lacks: off) */
export const DEFAULT_SAMPLING = {
  temperature: 0.8,
  topK: 40,
  topP: 0.95,
  minP: 0.05,
  typicalP: 1,
  epsilonCutoff: 0,
  etaCutoff: 0,
  repeatPenalty: 1,
  repeatLastN: 64,
  frequencyPenalty: 0,
  presencePenalty: 0,
  minKeep: 0,
} as const;

/** the name of every sampling option */
export const SAMPLING_OPTION_NAMES: readonly (keyof SamplingOptions)[] = [...(Object.keys(DEFAULT_SAMPLING) as (keyof typeof DEFAULT_SAMPLING)[]), "logitBias", "seed", "samplerOrder"];

const KNOWN = new Set<string>(SAMPLING_OPTION_NAMES);

function fail(name: string, expected: string, value: unknown, option = name): never {
  const shown = typeof value === "string" ? JSON.stringify(value) : String(value);
  throw new OptionError(`sampling option ${name} = ${shown}: expected ${expected}`, option);
}

function num(
  name: string,
  value: unknown,
  fallback: number,
  ok: (x: number) => boolean,
  expected: string,
): number {
  if (value === undefined) return fallback;
  if (typeof value !== "number" || Number.isNaN(value) || !ok(value)) fail(name, expected, value);
  return value;
}

function resolveLogitBias(bias: SamplingOptions["logitBias"]): LogitBias {
  const out = new Map<number, number>();
  if (bias === undefined) return out;
  if (typeof bias !== "object" || bias === null) {
    fail("logitBias", "a Map or an object from token id to bias", bias);
  }
  const entries: Iterable<[unknown, unknown]> =
    bias instanceof Map ? bias.entries() : Object.entries(bias);
  for (const [key, value] of entries) {
    // object keys arrive as strings: accept only the canonical decimal form of an id
    const id = typeof key === "string" && /^(0|[1-9]\d*)$/.test(key) ? Number(key) : key;
    if (typeof id !== "number" || !Number.isSafeInteger(id) || id < 0) {
      fail(`logitBias key`, "a token id (an integer >= 0)", key, "logitBias");
    }
    if (typeof value !== "number" || Number.isNaN(value) || value === Infinity) {
      fail(`logitBias[${id}]`, "a finite number, or -Infinity to ban the token", value, "logitBias");
    }
    out.set(id, (out.get(id) ?? 0) + value);
  }
  return out;
}

function resolveOrder(order: unknown, penaltiesOn: boolean): SamplerOrder | readonly SamplerStep[] {
  if (order === undefined) return "llama.cpp";
  if (typeof order === "string" && Object.hasOwn(SAMPLER_ORDERS, order)) return order as SamplerOrder;
  if (!Array.isArray(order)) {
    return fail("samplerOrder", `${Object.keys(SAMPLER_ORDERS).map((k) => JSON.stringify(k)).join(" or ")}, or a list of steps (${STEP_NAMES.join(", ")})`, order);
  }
  const bad = order.find((s) => !STEP_NAMES.includes(s as SamplerStep));
  if (bad !== undefined) fail("samplerOrder", `steps among ${STEP_NAMES.join(", ")}`, bad);
  // penalties read the logits by token id, which only the first step sees (llama.cpp's default chain puts them first)
  const late = order.indexOf("penalties", 1) > 0;
  if (late && penaltiesOn) fail("samplerOrder", `"penalties" first or left out: repeat/frequency/presence penalties apply before the other steps`, order.join(","));
  return (order as SamplerStep[]).filter((s, i) => s !== "penalties" || (i === 0 && penaltiesOn));
}

/** validates options, fills in the defaults and picks a seed; throws an OptionError naming the option */
export function resolveSamplingOptions(options: SamplingOptions = {}): ResolvedSamplingOptions {
  if (typeof options !== "object" || options === null) fail("options", "an object", options);
  for (const key of Object.keys(options)) {
    if (!KNOWN.has(key)) {
      throw new OptionError(`unknown sampling option ${JSON.stringify(key)}; expected one of ${[...KNOWN].join(", ")}`, key);
    }
  }
  const d = DEFAULT_SAMPLING;
  const finite = (x: number) => Number.isFinite(x);
  const seed = num("seed", options.seed, NaN, Number.isSafeInteger, "a safe integer");
  const r = {
    temperature: num("temperature", options.temperature, d.temperature, (x) => x >= 0 && finite(x), "a finite number >= 0 (0 = greedy)"),
    topK: num("topK", options.topK, d.topK, (x) => Number.isSafeInteger(x) && x >= 0, "an integer >= 0 (0 = disabled)"),
    topP: num("topP", options.topP, d.topP, (x) => x >= 0 && x <= 1, "a number in [0, 1] (1 = disabled)"),
    minP: num("minP", options.minP, d.minP, (x) => x >= 0 && x <= 1, "a number in [0, 1] (0 = disabled)"),
    typicalP: num("typicalP", options.typicalP, d.typicalP, (x) => x >= 0 && x <= 1, "a number in [0, 1] (1 = disabled)"),
    // generate() adds these warpers only for 0 < x < 1: any other number is none, as there
    epsilonCutoff: num("epsilonCutoff", options.epsilonCutoff, d.epsilonCutoff, finite, "a finite number (0 < x < 1 cuts; others: disabled)"),
    etaCutoff: num("etaCutoff", options.etaCutoff, d.etaCutoff, finite, "a finite number (0 < x < 1 cuts; others: disabled)"),
    repeatPenalty: num("repeatPenalty", options.repeatPenalty, d.repeatPenalty, (x) => x > 0 && finite(x), "a finite number > 0 (1 = disabled)"),
    repeatLastN: num("repeatLastN", options.repeatLastN, d.repeatLastN, (x) => Number.isSafeInteger(x) && x >= -1, "an integer >= -1 (-1 = whole history, 0 = disabled)"),
    frequencyPenalty: num("frequencyPenalty", options.frequencyPenalty, d.frequencyPenalty, finite, "a finite number (0 = disabled)"),
    presencePenalty: num("presencePenalty", options.presencePenalty, d.presencePenalty, finite, "a finite number (0 = disabled)"),
    logitBias: resolveLogitBias(options.logitBias),
    seed: Number.isNaN(seed) || seed === RANDOM_SEED ? randomSeed() : seed >>> 0,
    minKeep: num("minKeep", options.minKeep, d.minKeep, (x) => Number.isSafeInteger(x) && x >= 0, "an integer >= 0"),
  };
  const samplerOrder = resolveOrder(options.samplerOrder, penaltiesActive(r));
  for (const k of ["epsilonCutoff", "etaCutoff"] as const) {
    // transformers' warpers, which the "transformers" order runs after typical-p; llama.cpp's chain has no place for them
    if (r[k] > 0 && r[k] < 1 && samplerOrder !== "transformers") throw new OptionError(`sampling option ${k} = ${r[k]}: runs only with samplerOrder "transformers" (transformers' ${k === "epsilonCutoff" ? "EpsilonLogitsWarper" : "EtaLogitsWarper"}, after its typical-p); llama.cpp has no such sampler`, k);
  }
  return { ...r, samplerOrder };
}
