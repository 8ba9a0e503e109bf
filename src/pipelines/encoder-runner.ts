import { createBackend, type Backend, type BackendName } from "../kernels/index.js";
import { openEncoder, type EncoderModel, type EncoderOutput, type OpenedEncoder } from "../models/index.js";
import { encodeModelInput, truncateModelInput, type ModelInput, type Tokenizer, type TruncationStrategy } from "../tokenizer/index.js";
import { DisposedError, OptionError, shownValue } from "../units/index.js";

/** Options every encoder pipeline takes when it is created. */
export interface EncoderLoadOptions {
  /** compute backend (default "wasm") */
  readonly backend?: BackendName;
  /** worker threads of the wasm backend */
  readonly threads?: number;
  /** sequences per forward pass (default 32): a list of inputs runs in batches of this many */
  readonly batchSize?: number;
  /**
   * tokens per input, special tokens included (default: the smaller of the model's positions and the
   * tokenizer's model_max_length); longer inputs are truncated. Past the model's positions it is refused
   * (transformers' model would fail there); above model_max_length it is used, as tokenizer(max_length=...)
   */
  readonly maxLength?: number;
  /** where a load warning goes (the wasm backend unavailable, the reference kernels used), one line; default process.emitWarning */
  readonly onWarning?: (message: string) => void;
}

interface TokenizerLimits {
  readonly modelMaxLength?: number;
}

/**
 * A loaded encoder with its tokenizer: tokenizes (pairs, truncation) and runs lists of inputs
 * in batches of ragged sequences. Shared by the encoder pipelines and embed().
 */
export class EncoderRunner {
  readonly maxLength: number;
  /** the maxLength the runner was opened with, if any (maxLength is otherwise the model's and tokenizer's) */
  readonly givenMaxLength: number | undefined;
  private disposed = false;

  private constructor(
    readonly opened: OpenedEncoder,
    readonly model: EncoderModel,
    readonly backend: Backend,
    readonly batchSize: number,
    maxLength: number | undefined,
  ) {
    const positions = model.info.maxTokens;
    // a window past the position embeddings cannot be read: capping it quietly gave the caller less than asked
    if (maxLength !== undefined && maxLength > positions) throw new OptionError(`maxLength: expected at most ${positions}, the tokens ${model.info.hfArchitecture} reads (its position embeddings), got ${maxLength}`, "maxLength");
    this.givenMaxLength = maxLength;
    this.maxLength = maxLength ?? Math.min(positions, (opened.tokenizer as Tokenizer & TokenizerLimits).modelMaxLength ?? Infinity);
  }

  static async open(folder: string, options: EncoderLoadOptions = {}): Promise<EncoderRunner> {
    const batchSize = options.batchSize ?? 32;
    if (!Number.isInteger(batchSize) || batchSize < 1) throw new OptionError(`batchSize must be a positive integer, got ${shownValue(batchSize)}`, "batchSize");
    if (options.maxLength !== undefined && (!Number.isInteger(options.maxLength) || options.maxLength < 2)) throw new OptionError(`maxLength must be an integer >= 2, got ${options.maxLength}`, "maxLength");
    const opened = openEncoder(folder);
    // a handler that is not a function would throw only at the first warning
    if (options.onWarning !== undefined && typeof options.onWarning !== "function") throw new OptionError(`onWarning: expected a function (message: string) => void, got ${shownValue(options.onWarning)}`, "onWarning");
    const backend = await createBackend(options.backend, { threads: options.threads, onWarning: options.onWarning });
    try {
      const model = opened.build(backend);
      return new EncoderRunner(opened, model, backend, batchSize, options.maxLength);
    } catch (e) {
      backend.dispose();
      throw e;
    }
  }

  get tokenizer(): Tokenizer {
    return this.opened.tokenizer;
  }

  /** tokenizer(text, pair, truncation=True, max_length=maxLength) */
  tokenize(text: string, pair?: string, maxLength = this.maxLength): ModelInput {
    if (typeof text !== "string") throw new TypeError(`expected a string input, got ${typeof text}`);
    return encodeModelInput(this.tokenizer, text, { pair, maxLength });
  }

  /**
   * The inputs tokenized for a pass, each once, and what a call's `truncation` (truncationOf's) asks
   * of those longer than the model reads: false refuses them, as transformers (its model fails there, in its
   * position embeddings), naming the first before any pass runs; a strategy cuts them with it (one
   * it cannot cut with, "only_second" on one text or a text too short to give up enough, is refused
   * naming the input, as tokenizers raises it); left out, each is
   * cut with one warning, since transformers' tokenizer does not cut there (it warns "Token indices
   * sequence length is longer than the specified maximum sequence length for this model", then its
   * model reads the whole input or fails past its positions): an answer on a cut input must not
   * pass for the whole one's. Each input's whole encoding is counted, then cut (truncateModelInput),
   * not tokenized again. `listed`: the call was given a list (inputs are named by their place in it).
   * `check`: a task's own check of each whole encoding, before it is counted or cut (fill-mask's mask
   * token, which a cut may drop: told apart from one never in the text without tokenizing it again)
   */
  encode(task: string, inputs: readonly { readonly text: string; readonly pair?: string }[], listed: boolean, truncation: TruncationStrategy | false | undefined, warn: (message: string) => void, check?: (whole: ModelInput, i: number, which: string) => void): ModelInput[] {
    return inputs.map(({ text, pair }, i) => {
      const whole = this.tokenize(text, pair, Infinity), n = whole.ids.length;
      const which = listed ? `input ${i}` : "the input";
      check?.(whole, i, which);
      if (n <= this.maxLength) return whole;
      if (truncation === false) throw new RangeError(`${task}: ${which} has ${n} tokens, past the ${this.maxLength} the model reads (truncation: false; true or left out cuts it)`);
      if (truncation === undefined) warn(`${task}: ${which} has ${n} tokens; only its first ${this.maxLength} are read (truncation left out, where transformers does not cut; truncation: true cuts without this warning, false refuses)`);
      try {
        return truncateModelInput(this.tokenizer, whole, this.maxLength, truncation);
      } catch (e) {
        // the strategy's own refusal (truncateModelInput), named for the input it refuses
        if ((truncation === "only_first" || truncation === "only_second") && e instanceof RangeError) throw new RangeError(`${task}: ${which} has ${n} tokens, past the ${this.maxLength} the model reads, and ${e.message}`);
        throw e;
      }
    });
  }

  /** runs the inputs in batches of batchSize on any backend (the reads are awaited); outputs in input order */
  async run(inputs: readonly Pick<ModelInput, "ids" | "typeIds">[], positions?: readonly (readonly number[])[]): Promise<EncoderOutput> {
    if (this.disposed) throw new DisposedError(`${this.opened.path}: the pipeline has been disposed`);
    // no batch would reach the model below, and the outputs its head gives (logits) would be missing:
    // its own answer to no inputs has each of them, empty
    if (inputs.length === 0) return this.model.encodeAsync([]);
    const hidden: Float32Array[] = [], pooled: Float32Array[] = [], logits: Float32Array[] = [];
    for (let i = 0; i < inputs.length; i += this.batchSize) {
      const chunk = inputs.slice(i, i + this.batchSize);
      const out = await this.model.encodeAsync(chunk.map((x) => ({ ids: x.ids, typeIds: x.typeIds })), { positions: positions?.slice(i, i + this.batchSize) });
      hidden.push(...out.hidden);
      if (out.pooled) pooled.push(...out.pooled);
      if (out.logits) logits.push(...out.logits);
    }
    return { hidden, ...(pooled.length ? { pooled } : {}), ...(logits.length ? { logits } : {}) };
  }

  dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    this.backend.dispose();
  }
}
