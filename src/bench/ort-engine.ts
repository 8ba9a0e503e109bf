import type * as Ort from "onnxruntime-web";

/**
 * onnxruntime's side: onnxruntime-web's WebAssembly execution provider in Node, or onnxruntime-node's
 * native CPU provider, on an ONNX export of the same model (src/testing/onnx-export.ts).
 * onnxruntime-web is a devDependency, onnxruntime-node installed by hand; both are imported only
 * here, so tsllm itself never needs them.
 */
export type OrtModule = typeof Ort;

/** which onnxruntime: "web" (its wasm execution provider, the WebAssembly peer) or "node" (onnxruntime-node's native CPU one) */
export type OrtRuntime = "web" | "node";

/** onnxruntime-node is not a devDependency (247 MB of native builds for every platform): how to get it */
export const ORT_NODE_INSTALL = "npm i --no-save --ignore-scripts onnxruntime-node@1.23.2";

/** a loaded onnxruntime and how its sessions run on `threads` threads */
export interface OrtEngine {
  readonly ort: OrtModule;
  readonly sessionOptions: Ort.InferenceSession.SessionOptions;
}

/**
 * onnxruntime-web with `threads` wasm threads (its own worker pool; numThreads must be set before
 * the first session) or onnxruntime-node with `threads` intra-op threads (the native build
 * transformers.js uses in Node), or an Error saying why it cannot load.
 */
export async function loadOrt(threads: number, runtime: OrtRuntime = "web"): Promise<OrtEngine> {
  if (runtime === "node") {
    // a variable specifier: tsc and bundlers leave the optional package alone
    const pkg = "onnxruntime-node";
    let ort: OrtModule;
    try {
      ort = (await import(pkg)) as OrtModule;
    } catch (e) {
      throw new Error(`onnxruntime-node could not be loaded (${(e as Error).message.split("\n")[0]}): install it with ${ORT_NODE_INSTALL} (--ignore-scripts: its install script fetches GPU builds from nuget.org; the CPU build is in the package)`);
    }
    ort.env.logLevel = "error";
    return { ort, sessionOptions: { executionProviders: ["cpu"], graphOptimizationLevel: "all", intraOpNumThreads: threads, interOpNumThreads: 1 } };
  }
  const ort = (await import("onnxruntime-web")) as OrtModule;
  ort.env.wasm.numThreads = threads;
  ort.env.logLevel = "error";
  return { ort, sessionOptions: { executionProviders: ["wasm"], graphOptimizationLevel: "all" } };
}

/**
 * One sequence through a decoder-with-past ONNX model: `forward` feeds new tokens with the
 * present KV tensors of the previous call as the past, like transformers.js's generate loop.
 */
export class OrtDecoder {
  private past = new Map<string, Ort.Tensor>();
  private length = 0;

  private constructor(
    private readonly ort: OrtModule,
    readonly session: Ort.InferenceSession,
    private readonly layers: number,
    private readonly kvHeads: number,
    private readonly headDim: number,
  ) {
    this.reset();
  }

  static async create(engine: OrtEngine, model: Uint8Array, shape: { layers: number; kvHeads: number; headDim: number }): Promise<OrtDecoder> {
    const session = await engine.ort.InferenceSession.create(model, engine.sessionOptions);
    return new OrtDecoder(engine.ort, session, shape.layers, shape.kvHeads, shape.headDim);
  }

  /** back to an empty cache */
  reset(): void {
    for (const t of this.past.values()) t.dispose();
    this.past = new Map();
    const empty = new Float32Array(0);
    for (let l = 0; l < this.layers; l++) {
      for (const kv of ["key", "value"]) this.past.set(`past_key_values.${l}.${kv}`, new this.ort.Tensor("float32", empty, [1, this.kvHeads, 0, this.headDim]));
    }
    this.length = 0;
  }

  /** logits ([tokens or 1] x vocab, as the export writes them) after `tokens` */
  async forward(tokens: readonly number[]): Promise<Float32Array> {
    const T = tokens.length, total = this.length + T;
    const feeds: Record<string, Ort.Tensor> = {
      input_ids: new this.ort.Tensor("int64", BigInt64Array.from(tokens.map(BigInt)), [1, T]),
      attention_mask: new this.ort.Tensor("int64", new BigInt64Array(total).fill(1n), [1, total]),
      position_ids: new this.ort.Tensor("int64", BigInt64Array.from({ length: T }, (_, i) => BigInt(this.length + i)), [1, T]),
    };
    for (const [name, t] of this.past) feeds[name] = t;
    const out = await this.session.run(feeds);
    for (const t of this.past.values()) t.dispose();
    this.past = new Map();
    for (let l = 0; l < this.layers; l++) {
      for (const kv of ["key", "value"]) this.past.set(`past_key_values.${l}.${kv}`, out[`present.${l}.${kv}`]!);
    }
    this.length = total;
    const logits = out["logits"]!;
    return logits.data as Float32Array;
  }

  async release(): Promise<void> {
    for (const t of this.past.values()) t.dispose();
    await this.session.release();
  }
}
