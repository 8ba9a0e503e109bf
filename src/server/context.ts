import type { ServerResponse } from "node:http";
import type { ChatFormatter } from "../chat/index.js";
import type { Model } from "../llm.js";
import type { ApiError } from "./errors.js";
import type { Metrics } from "./metrics.js";
import type { TokenTexts } from "./openai.js";
import type { SettingNames } from "./setting-names.js";
import type { SseWriter } from "./sse.js";

/** What a request handler needs from the running server. */
export interface ServeContext {
  readonly model: Model;
  /** the id /v1/models lists */
  readonly modelId: string;
  /** names a request's `model` may give */
  readonly modelNames: ReadonlySet<string>;
  readonly metrics: Metrics;
  readonly texts: TokenTexts;
  /** what refusals call the operator's settings */
  readonly settings: SettingNames;
  /** chat templates' extra variables for every request (ServeOptions.chatTemplateKwargs), under each request's chat_template_kwargs */
  readonly templateKwargs: Readonly<Record<string, unknown>>;
  /** the draft model the requests that can draft with (ServeOptions.draftModel), and the most tokens it proposes a round (draftTokens or the engine's default), which its KV pool is planned for */
  readonly draft?: { readonly model: Model; readonly tokens: number };
  /** the chat template, the model's "tool_use" one for a request with tools where it has one (throws a 400 when the model has none to use) */
  formatter(tools?: boolean): ChatFormatter;
  /** throws a 429 (queue full) when generations of these widths (n choices count n) would make more than maxQueue wait for a free sequence */
  admit(widths: readonly number[]): void;
  /** throws a 400 naming the prompt parameter when `prompts` prompts of n choices each could never be taken, even by an idle server (checked before they are tokenized) */
  admissible(prompts: number, n: number, param: string): void;
  /** the request's body has been made into its prompts: its bytes leave the bodies budget now, not once it is answered */
  bodyRead(res: ServerResponse): void;
  /**
   * registers an in-flight request: a shutdown aborts it at once while `queued()` (none of it
   * started: it would only wait out the grace period), else when the grace period ends; returns its release
   */
  track(controller: AbortController, queued: () => boolean): () => void;
  /** an SSE writer on the response (with the server's CORS headers) */
  sse(res: ServerResponse): SseWriter;
  /** a 200 JSON answer, cut off if its client takes none of it for the server's write timeout */
  send(res: ServerResponse, value: unknown): Promise<void>;
  /** a failure reported inside the stream of `res`, already answered 200 */
  failed(res: ServerResponse, e: ApiError): void;
}
