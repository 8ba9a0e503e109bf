import { OptionError } from "../units/index.js";
import { SAMPLER_ORDERS, type SamplerOrder, type SamplerStep } from "./options.js";

/**
 * llama.cpp's sampler chain as its users name it (common/sampling.cpp): `--samplers` and the
 * server's `samplers` list take names (common_sampler_types_from_names: canonical names, their
 * kebab-case and no-underscore forms, and "nucleus", "temp", "typ"; case-insensitive),
 * `--sampling-seq` and a `samplers` string one letter each (common_sampler_types_from_chars).
 * The chain is exactly that list: a sampler left out does not run.
 */
const LLAMA_CPP_SAMPLERS: Readonly<Record<string, { readonly letter: string; readonly step?: SamplerStep; readonly lacking?: string }>> = {
  penalties: { letter: "e", step: "penalties" },
  dry: { letter: "d", lacking: "dry_multiplier" },
  top_n_sigma: { letter: "s", lacking: "top_n_sigma" },
  top_k: { letter: "k", step: "topK" },
  typ_p: { letter: "y", step: "typicalP" },
  top_p: { letter: "p", step: "topP" },
  min_p: { letter: "m", step: "minP" },
  xtc: { letter: "x", lacking: "xtc_probability" },
  temperature: { letter: "t", step: "temperature" },
  infill: { letter: "i", step: "infill" },
  adaptive_p: { letter: "a" },
};

const ALIASES: Readonly<Record<string, string>> = { nucleus: "top_p", temp: "temperature", typ: "typ_p" };

function canonicalName(name: string): string | undefined {
  const lower = name.toLowerCase();
  if (Object.hasOwn(ALIASES, lower)) return ALIASES[lower];
  return Object.keys(LLAMA_CPP_SAMPLERS).find((c) => c === lower || c.replaceAll("_", "-") === lower || (c.includes("_") && c.replaceAll("_", "") === lower));
}

/**
 * llama.cpp's default chain (common_params_sampling's samplers), by its names: dry, top_n_sigma
 * and xtc are in it but off at their defaults, as they always are here
 */
const LLAMA_CPP_DEFAULT_CHAIN = ["penalties", "dry", "top_n_sigma", "top_k", "typ_p", "top_p", "min_p", "xtc", "temperature"] as const;

/**
 * A chain (`samplerOrder`: a preset or the steps) by llama.cpp's sampler names, as llama-server
 * lists its `samplers` (GET /props): the "llama.cpp" preset (the default) is its default chain; any
 * other is penalties (which the presets apply first) and then its steps. samplerStepsFromLlamaCpp
 * reads the list back as the same chain.
 */
export function llamaCppSamplerNames(order: SamplerOrder | readonly SamplerStep[] = "llama.cpp"): string[] {
  const steps: readonly SamplerStep[] = typeof order === "string" ? ["penalties", ...SAMPLER_ORDERS[order]] : order;
  // (the default chain's steps, given by name as GET /props lists them, are that chain again)
  const asDefault = ["penalties", ...SAMPLER_ORDERS["llama.cpp"]];
  if (steps.length === asDefault.length && steps.every((s, i) => s === asDefault[i])) return [...LLAMA_CPP_DEFAULT_CHAIN];
  const nameOf = (step: SamplerStep) => Object.keys(LLAMA_CPP_SAMPLERS).find((n) => LLAMA_CPP_SAMPLERS[n]!.step === step)!;
  return steps.map(nameOf);
}

/**
 * The library's chain (`samplerOrder` steps) for llama.cpp's sampler names or letters. Samplers
 * this library lacks are left out where they are off, which they always are here (dry, xtc and
 * top-n-sigma have no option to turn them on: the server refuses their fields when on); adaptive_p
 * acts whenever listed, so it and names llama.cpp does not know (which it skips with a warning) are
 * refused with an OptionError naming `field`.
 */
export function samplerStepsFromLlamaCpp(value: string | readonly string[], field: string): SamplerStep[] {
  const letters = typeof value === "string";
  const names = letters ? [...value] : value;
  const steps: SamplerStep[] = [];
  for (const given of names) {
    const name = letters
      ? Object.keys(LLAMA_CPP_SAMPLERS).find((c) => LLAMA_CPP_SAMPLERS[c]!.letter === given)
      : canonicalName(given);
    const expected = letters
      ? `letters of ${Object.values(LLAMA_CPP_SAMPLERS).map((s) => s.letter).join("")}`
      : `llama.cpp sampler names (${Object.keys(LLAMA_CPP_SAMPLERS).join(", ")})`;
    if (name === undefined) throw new OptionError(`${field}: ${JSON.stringify(given)} names no sampler; expected ${expected}`, field);
    const sampler = LLAMA_CPP_SAMPLERS[name]!;
    if (sampler.step !== undefined) steps.push(sampler.step);
    else if (sampler.lacking === undefined) throw new OptionError(`${field}: ${JSON.stringify(given)} (${name}) is a sampler this library does not implement; leave it out`, field);
  }
  return steps;
}
