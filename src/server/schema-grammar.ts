import { GrammarError, jsonSchemaToGbnf, type JsonSchema } from "../sampling/constraints/index.js";

/**
 * Values made from a text, remembered by it: the least recently used forgotten first once there are
 * more than `maxEntries` or their texts and values hold more than `maxChars` characters (a value
 * too large alone is made every time, never kept)
 */
export class TextCache<V> {
  private readonly entries = new Map<string, V>();
  private chars = 0;

  constructor(
    private readonly sizeOf: (v: V) => number,
    private readonly maxEntries = 256,
    private readonly maxChars = 16 * 2 ** 20,
  ) {}

  get(key: string, make: () => V): V {
    if (this.entries.has(key)) {
      const v = this.entries.get(key) as V;
      // (used again: the newest)
      this.entries.delete(key);
      this.entries.set(key, v);
      return v;
    }
    const v = make();
    const size = key.length + this.sizeOf(v);
    if (size > this.maxChars) return v;
    this.entries.set(key, v);
    this.chars += size;
    for (const [k, old] of this.entries) {
      if (this.entries.size <= this.maxEntries && this.chars <= this.maxChars) break;
      this.entries.delete(k);
      this.chars -= k.length + this.sizeOf(old);
    }
    return v;
  }
}

/** schema text -> its grammar, or the GrammarError it was refused with */
const grammars = new TextCache<string | GrammarError>((v) => (typeof v === "string" ? v.length : v.message.length));

/**
 * A JSON Schema's GBNF (jsonSchemaToGbnf), remembered by the schema's text: a strict function's
 * parameters are compiled when the request's tools are read (to refuse what no grammar holds), then
 * written into the call grammar, and an agent sends the same tools with every turn. A schema the
 * grammar cannot hold throws its GrammarError again.
 */
export function schemaGrammar(schema: JsonSchema): string {
  const v = grammars.get(JSON.stringify(schema), () => {
    try {
      return jsonSchemaToGbnf(schema);
    } catch (e) {
      if (e instanceof GrammarError) return e;
      throw e;
    }
  });
  if (typeof v !== "string") throw v;
  return v;
}
