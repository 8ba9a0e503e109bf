import { byteLevelCharToByte } from "../byte-level.js";
import { isObject, type JsonObject } from "./json-files.js";

/*
 * tokenizer.json's decoder run by tsllm instead of @huggingface/tokenizers, with the library's
 * text: the library is the reference for these files (test/tokenizer-hf-decode.test.ts compares
 * them), so each step does what its code does, quirks included — ByteLevel turns characters
 * outside its alphabet into byte 0 and keeps every added token's text whole, ByteFallback reads
 * "<0x4G>" as byte 4 (parseInt) and drops a leading BOM (a default TextDecoder), Metaspace drops
 * the first token's leading space whatever prepend_scheme says, WordPiece cleans each token up on
 * its own, a tokenizer.json without a decoder joins tokens with spaces. The library spends its time
 * looking every token up in its list of added and special tokens (per token, a scan of hundreds
 * of entries in Llama 3 / Qwen); here they are sets. Decoders it has that are rare in real models
 * (CTC, a Replace by regex, BPEDecoder's end-of-word suffix) stay with the library: ownDecoderFor
 * answers undefined.
 */

/** one decoder step: tokens in, tokens out (the library's decode_chain) */
type Step = (tokens: string[]) => string[];

/** transformers' clean_up_tokenization: the spaces an English word-level decode leaves before punctuation and contractions */
export function cleanUpTokenization(text: string): string {
  // every pattern is a space and one of these: most tokens have none (one test instead of ten replaces)
  if (!CLEANUP_AT.test(text)) return text;
  return text.replaceAll(" .", ".").replaceAll(" ?", "?").replaceAll(" !", "!").replaceAll(" ,", ",").replaceAll(" ' ", "'")
    .replaceAll(" n't", "n't").replaceAll(" 'm", "'m").replaceAll(" 's", "'s").replaceAll(" 've", "'ve").replaceAll(" 're", "'re");
}

const CLEANUP_AT = / [.?!,'n]/;
const NONE: ReadonlySet<string> = new Set();
const byteLevelText = new TextDecoder("utf-8", { fatal: false, ignoreBOM: true });
const byteFallbackText = new TextDecoder();

/** the byte-level alphabet's characters (all below U+0144) to their bytes, 0 for the rest */
const BYTE_OF = Uint8Array.from({ length: 0x144 }, (_, cp) => byteLevelCharToByte(cp) ?? 0);

/** ByteLevel: runs of tokens that are not added tokens become their bytes, read as UTF-8 */
function byteLevel(added: ReadonlySet<string>): Step {
  const bytesOf = (run: string[]): string => {
    let units = 0;
    for (const t of run) units += t.length;
    const bytes = new Uint8Array(units); // a code point is one byte here and at least one UTF-16 unit
    let n = 0;
    for (const t of run) {
      for (let i = 0; i < t.length; i++) {
        const cp = t.codePointAt(i)!;
        if (cp > 0xffff) i++;
        // the library's Uint8Array of `undefined` for a character outside the alphabet: 0
        bytes[n++] = cp < BYTE_OF.length ? BYTE_OF[cp]! : 0;
      }
    }
    return byteLevelText.decode(bytes.subarray(0, n));
  };
  return (tokens) => {
    const out: string[] = [];
    let start = 0;
    for (let i = 0; i < tokens.length; i++) {
      if (!added.has(tokens[i]!)) continue;
      if (i > start) out.push(bytesOf(tokens.slice(start, i)));
      out.push(tokens[i]!);
      start = i + 1;
    }
    if (start < tokens.length) out.push(bytesOf(start === 0 ? tokens : tokens.slice(start)));
    return out;
  };
}

/** ByteFallback: runs of "<0xNN>" tokens become the text of their bytes */
const byteFallback: Step = (tokens) => {
  const out: string[] = [];
  let bytes: number[] = [];
  for (const t of tokens) {
    // parseInt as the library: "<0x4G>" is byte 4
    const b = t.length === 6 && t.startsWith("<0x") && t.endsWith(">") ? parseInt(t.slice(3, 5), 16) : NaN;
    if (!Number.isNaN(b)) { bytes.push(b); continue; }
    if (bytes.length > 0) { out.push(byteFallbackText.decode(Uint8Array.from(bytes))); bytes = []; }
    out.push(t);
  }
  if (bytes.length > 0) out.push(byteFallbackText.decode(Uint8Array.from(bytes)));
  return out;
};

/** a String pattern as the library compiles it (escaped, flags "gu": a lone surrogate never matches half a pair) */
function stringPattern(pattern: unknown): RegExp | null | undefined {
  if (!isObject(pattern)) return undefined;
  if (pattern.Regex !== undefined) return undefined; // the library rewrites Oniguruma syntax: left to it
  if (typeof pattern.String !== "string") return null; // the library warns and replaces nothing
  return new RegExp(pattern.String.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"), "gu");
}

/** `added`: the added tokens' texts ByteLevel keeps whole; the library gives them to the top decoder only, none inside a Sequence */
function stepOf(node: unknown, added: ReadonlySet<string> = NONE): Step | undefined {
  if (!isObject(node)) return undefined;
  switch (node.type) {
    case "ByteLevel": return byteLevel(added);
    case "ByteFallback": return byteFallback;
    case "Fuse": return (tokens) => [tokens.join("")];
    case "Replace": {
      const pattern = stringPattern(node.pattern);
      if (pattern === undefined) return undefined;
      const content = typeof node.content === "string" ? node.content : node.content === undefined || node.content === null ? "" : undefined;
      if (content === undefined) return undefined;
      if (pattern === null) return (tokens) => tokens;
      const from = (node.pattern as JsonObject).String as string;
      // without surrogates in the pattern nor $ in the content, the regex is a plain string replace (faster)
      if (from !== "" && !/[\ud800-\udfff]/.test(from) && !content.includes("$")) return (tokens) => tokens.map((t) => t.includes(from) ? t.replaceAll(from, content) : t);
      return (tokens) => tokens.map((t) => t.replaceAll(pattern, content));
    }
    case "Strip": {
      const content = node.content ?? "", start = node.start ?? 0, stop = node.stop ?? 0;
      if (typeof content !== "string" || typeof start !== "number" || typeof stop !== "number") return undefined;
      return (tokens) => tokens.map((t) => {
        // compared a UTF-16 unit at a time, as the library does
        let from = 0, to = t.length;
        for (let i = 0; i < start && t[i] === content; i++) from = i + 1;
        for (let i = 0; i < stop && t[t.length - i - 1] === content; i++) to = t.length - i - 1;
        return t.slice(from, to);
      });
    }
    case "Metaspace": {
      const replacement = node.replacement ?? "\u2581";
      if (typeof replacement !== "string") return undefined;
      return (tokens) => tokens.map((t, i) => {
        const s = t.replaceAll(replacement, " ");
        return i === 0 && s.startsWith(" ") ? s.slice(1) : s;
      });
    }
    case "WordPiece": {
      const prefix = node.prefix, cleanup = Boolean(node.cleanup);
      if (prefix !== undefined && prefix !== null && typeof prefix !== "string") return undefined;
      return (tokens) => tokens.map((t, i) => {
        let s = t;
        if (i !== 0) s = prefix && s.startsWith(prefix) ? s.slice(prefix.length) : ` ${s}`;
        return cleanup ? cleanUpTokenization(s) : s;
      });
    }
    case "BPEDecoder": {
      const suffix = node.suffix ?? "";
      if (typeof suffix !== "string") return undefined;
      return (tokens) => tokens.map((t, i) => t.replaceAll(suffix, i === tokens.length - 1 ? "" : " "));
    }
    case "Sequence": {
      if (!Array.isArray(node.decoders)) return undefined;
      const steps = node.decoders.map((d) => stepOf(d));
      if (steps.some((s) => s === undefined)) return undefined;
      return (tokens) => steps.reduce((t, s) => s!(t), tokens);
    }
    default: return undefined;
  }
}

/** a decoder: ids (each one checked to be in the vocabulary) to text */
export interface OwnDecoder {
  decode(ids: readonly number[]): string;
}

/**
 * tsllm's decoder for a tokenizer.json, or undefined where the library must decode (a decoder
 * step not reproduced here, a model with an end-of-word suffix). `texts[id]` is the library's
 * token text for an id (model vocabulary with added tokens over it, the unknown token's text in
 * holes); `added` the texts of every added token, special or not.
 */
export function ownDecoderFor(tj: JsonObject, texts: readonly string[], added: ReadonlySet<string>): OwnDecoder | undefined {
  const model = tj.model;
  if (!isObject(model) || (model.end_of_word_suffix !== undefined && model.end_of_word_suffix !== null && model.end_of_word_suffix !== "")) return undefined;
  let node = tj.decoder;
  // a Sequence's leading Replace steps change each token alone: done once per vocabulary entry
  // (Llama 2's and Gemma's "▁" -> " ") instead of once per decoded token
  let table = texts;
  if (isObject(node) && node.type === "Sequence" && Array.isArray(node.decoders)) {
    let lead = 0;
    while (lead < node.decoders.length && isObject(node.decoders[lead]) && (node.decoders[lead] as JsonObject).type === "Replace") lead++;
    const replace = lead > 0 ? stepOf({ type: "Sequence", decoders: node.decoders.slice(0, lead) }) : undefined;
    if (replace) {
      table = replace([...texts]);
      node = { ...node, decoders: node.decoders.slice(lead) };
    }
  }
  let join: (tokens: string[]) => string;
  if (node === null || node === undefined) join = (tokens) => tokens.join(" ");
  else {
    const step = stepOf(node, added);
    if (!step) return undefined;
    join = (tokens) => step(tokens).join("");
  }
  return {
    decode: (ids) => {
      const tokens = new Array<string>(ids.length);
      for (let i = 0; i < ids.length; i++) tokens[i] = table[ids[i]!]!;
      return join(tokens);
    },
  };
}
