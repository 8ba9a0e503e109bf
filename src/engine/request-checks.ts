/**
 * The engine's checks of a request that need neither the model's tokenizer nor its KV cache:
 * token ids against the vocabulary, a token prompt against the context, a request's width
 * against the sequences run at once (the model's limits), and a constraint's grammar, which needs
 * no model at all. Engine.submit runs them; the browser build's page runs them too, with the
 * limits the worker sent at load, so that such a request throws at the call of stream() as
 * Model.stream does, not at its first step.
 */
import { compileConstraint, type ConstraintSpec, type Grammar } from "../sampling/constraints/index.js";
import { shownValue } from "../units/index.js";
import { RequestError } from "./errors.js";

/** what an engine checks a request against */
export interface RequestLimits {
  /** positions one sequence may hold */
  contextSize: number;
  /** ids that are tokens (of both the tokenizer and the embedding) */
  tokenIds: number;
  /** rows of the logits (the embedding's, which a Hugging Face checkpoint pads past the tokenizer) */
  rows: number;
  /** sequences run at once (a request's choices or beams count each) */
  maxSequences: number;
}

/** an empty prompt, one that fills the context, a token id outside the vocabulary */
export function checkPromptTokens(promptTokens: readonly number[], limits: Pick<RequestLimits, "contextSize" | "tokenIds">): void {
  if (promptTokens.length === 0) throw new RequestError("the prompt is empty (no tokens): give some text or enable addSpecialTokens", "prompt");
  if (promptTokens.length >= limits.contextSize) {
    throw new RequestError(`the prompt has ${promptTokens.length} tokens but the context holds ${limits.contextSize}; use a larger contextSize or a shorter prompt`, "prompt", "context_length_exceeded");
  }
  const vocab = limits.tokenIds;
  for (const t of promptTokens) if (!Number.isInteger(t) || t < 0 || t >= vocab) throw new RequestError(`token id ${t} is outside the vocabulary [0, ${vocab})`, "prompt");
}

export function checkStopTokens(stopTokens: readonly number[], tokenIds: number): void {
  stopTokens.forEach((t, i) => {
    if (!Number.isInteger(t) || t < 0 || t >= tokenIds) throw new RequestError(`stopTokens[${i}]: token id ${shownValue(t)} is outside the vocabulary [0, ${tokenIds})`, "stopTokens");
  });
}

/** the biased ids against the logits' rows, as the sampler applies them (checked before the prefill, not where the first token is sampled) */
export function checkLogitBiasIds(ids: Iterable<number>, rows: number): void {
  for (const id of ids) if (id >= rows) throw new RequestError(`logitBias: token id ${id} is outside the vocabulary [0, ${rows})`, "logitBias");
}

/** a request's choices or beams (`width`) against the sequences run at once */
export function checkWidth(width: number, beams: boolean, maxSequences: number): void {
  if (width > maxSequences) {
    throw new RequestError(`${beams ? "numBeams" : "n"} = ${width} ${beams ? "beams" : "completions"} exceed the ${maxSequences} sequences the engine runs at once (maxSequences)`, beams ? "numBeams" : "n");
  }
}

/** a constraint compiled (the engine's grammar), or a RequestError naming the option whose grammar, schema, choices or regex does not compile, and where */
export function compileRequestConstraint(spec: ConstraintSpec): Grammar {
  try {
    return compileConstraint(spec);
  } catch (e) {
    const option = "grammar" in spec ? "grammar" : "jsonSchema" in spec ? "jsonSchema" : "choice" in spec ? "choice" : "regex" in spec ? "regex" : "json";
    // (a message that already names the option is not prefixed again: "choice: choice: ...")
    const message = (e as Error).message;
    throw new RequestError(message.startsWith(`${option}: `) ? message : `${option}: ${message}`, option);
  }
}
