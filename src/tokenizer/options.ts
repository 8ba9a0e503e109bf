import { checkFlags, checkOptionKeys, OptionError, shownValue } from "../units/index.js";
import type { DecodeOptions, EncodeOptions, StreamDecoderOptions } from "./types.js";

// records of every option key, so that a new option fails the type check until it is listed
const ENCODE: readonly string[] = Object.keys({ addSpecialTokens: true, parseSpecial: true, literalRanges: true } satisfies Record<keyof EncodeOptions, true>);
const DECODE: readonly string[] = Object.keys({ skipSpecialTokens: true } satisfies Record<keyof DecodeOptions, true>);
const STREAM: readonly string[] = Object.keys({ skipSpecialTokens: true, context: true } satisfies Record<keyof StreamDecoderOptions, true>);

/**
 * Refuses what the typed signature would, naming the option: options that are not an object, a
 * misspelled key (`addSpecialToken: false` left the BOS on without a word) and a flag that is not
 * a boolean (`addSpecialTokens: "false"` is truthy).
 */
function check(options: unknown, known: readonly string[], what: string, flags: readonly string[]): void {
  if (typeof options !== "object" || options === null || Array.isArray(options)) {
    throw new OptionError(`${what}: options must be an object, got ${shownValue(options)}`, "options");
  }
  checkOptionKeys(options, known, what);
  checkFlags(options as Record<string, unknown>, flags, what);
}

export function checkEncodeOptions(options: EncodeOptions): void {
  check(options, ENCODE, "encode", ["addSpecialTokens", "parseSpecial"]);
}

export function checkDecodeOptions(options: DecodeOptions): void {
  check(options, DECODE, "decode", ["skipSpecialTokens"]);
}

export function checkStreamDecoderOptions(options: StreamDecoderOptions): void {
  check(options, STREAM, "createStreamDecoder", ["skipSpecialTokens"]);
}
