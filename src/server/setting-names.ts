/**
 * What the server's refusals call the settings its operator chose, in the operator's words:
 * `tsllm serve` passes its flags (--kv-memory, --ctx-size, ...); a server started from the
 * library names the options of loadModel and startServer, which its operator set
 */
export interface SettingNames {
  /** the KV cache's size (loadModel's kvCacheBytes) */
  readonly kvCacheBytes: string;
  /** the context (loadModel's contextSize) */
  readonly contextSize: string;
  /** the sequences run at once (loadModel's maxSequences) */
  readonly maxSequences: string;
  /** the requests that may wait (ServeOptions.maxQueue) */
  readonly maxQueue: string;
  /** ServeOptions.readTimeoutMs */
  readonly readTimeoutMs: string;
  /** a chat template given to the server, after "start the server with" (ServeOptions.chatTemplate) */
  readonly chatTemplate: string;
  /** one of the model's named templates chosen for the server, after "start the server with" (ServeOptions.chatTemplateName) */
  readonly chatTemplateName: string;
  /** the KV cache's types (loadModel's cacheTypeK and cacheTypeV) */
  readonly cacheTypes: string;
  /** GET /slots turned off (ServeOptions.slots false) */
  readonly slots: string;
  /** the slot files' folder (ServeOptions.slotSavePath), after "Start it with" */
  readonly slotSavePath: string;
  /** the largest request body (ServeOptions.bodyLimit) */
  readonly bodyLimit: string;
  /** the request bodies held at once, all together (ServeOptions.bodiesLimit) */
  readonly bodiesLimit: string;
  /** the origin whose browser pages may call the API (ServeOptions.cors), after "start it with" */
  readonly cors: string;
  /** the names a request's Host may carry (ServeOptions.allowedHosts), after "start it with" */
  readonly allowedHosts: string;
}

/** the library's option names, for a server started from the library */
export const LIBRARY_SETTING_NAMES: SettingNames = {
  kvCacheBytes: "kvCacheBytes", contextSize: "contextSize", maxSequences: "maxSequences", maxQueue: "maxQueue", readTimeoutMs: "readTimeoutMs", chatTemplate: "a chatTemplate", chatTemplateName: "a chatTemplateName",
  cacheTypes: "cacheTypeK / cacheTypeV", slots: "slots: false", slotSavePath: "slotSavePath (a folder for the slot files)",
  cors: "a cors option", allowedHosts: "allowedHosts naming", bodyLimit: "bodyLimit", bodiesLimit: "bodiesLimit",
};
