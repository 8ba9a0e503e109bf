import { OptionError, shownValue } from "../units/index.js";
import type { FinishDetail } from "./generate.js";

/** limits on a completion's lines, as llama-server's n_indent and t_max_predict_ms set them */
export interface LineLimits {
  /** a new line indented by fewer spaces and tabs than this ends the completion; 0: none */
  readonly minIndent: number;
  /** once this many ms have passed since the first token, a token with a new line ends the completion; 0: none */
  readonly newLineAfterMs: number;
}

/** a limit reached: why, and where the completion's text is cut (undefined: kept whole) */
export interface LineLimitHit {
  readonly detail: FinishDetail;
  readonly cutAt?: number;
}

/**
 * Watches a completion's text token by token as llama-server's process_token does
 * (tools/server/server.cpp, read for this):
 * - n_indent: from the token after the first one whose text holds a new line, each token looks
 *   at the line that starts after the last new line found so far; where that line has a
 *   character other than a space or tab after fewer than n_indent of them (an empty line
 *   included: its "\n" is such a character), the completion ends there and the text from that
 *   character on is cut (the line's indentation is kept). Each token then moves the line start
 *   past the next new line (one a token, as llama-server's find from last_nl_pos does).
 * - t_max_predict_ms: a token whose text holds a new line ends the completion when more than
 *   t_max_predict_ms have passed since the first token; its text is kept.
 * Both end it as llama-server's STOP_TYPE_LIMIT (finish reason "length").
 */
export class LineWatch {
  private sawNewLine = false;
  /** where the line under watch starts (0: none yet) */
  private lineStart = 0;

  constructor(private readonly limits: LineLimits) {}

  /** after a token: `text` is the completion so far, `emitted` this token's text, `elapsedMs` the time since the first token */
  check(text: string, emitted: string, elapsedMs: number): LineLimitHit | undefined {
    const { minIndent, newLineAfterMs } = this.limits;
    let hit: LineLimitHit | undefined;
    if (this.sawNewLine && minIndent > 0) {
      if (this.lineStart > 0) {
        let pos = this.lineStart;
        while (pos < text.length && (text[pos] === " " || text[pos] === "\t")) pos++;
        if (pos < text.length && pos - this.lineStart < minIndent) hit = { detail: `line indented less than ${minIndent}`, cutAt: pos };
      }
      const next = text.indexOf("\n", this.lineStart);
      if (next >= 0) this.lineStart = next + 1;
    }
    if (emitted.includes("\n")) {
      this.sawNewLine = true;
      if (hit === undefined && newLineAfterMs > 0 && elapsedMs > newLineAfterMs) hit = { detail: `new line after ${newLineAfterMs} ms` };
    }
    return hit;
  }
}

/** the options' line limits (undefined: none), their values checked: integers >= 0 */
export function lineLimitsOf(options: { readonly minLineIndent?: number; readonly newLineAfterMs?: number }): LineLimits | undefined {
  const minIndent = options.minLineIndent ?? 0;
  const newLineAfterMs = options.newLineAfterMs ?? 0;
  if (!Number.isSafeInteger(minIndent) || minIndent < 0) throw new OptionError(`minLineIndent must be an integer >= 0 (0: none), got ${shownValue(options.minLineIndent)}`, "minLineIndent");
  if (typeof newLineAfterMs !== "number" || !(newLineAfterMs >= 0) || !Number.isFinite(newLineAfterMs)) throw new OptionError(`newLineAfterMs must be a number of milliseconds >= 0 (0: none), got ${shownValue(options.newLineAfterMs)}`, "newLineAfterMs");
  return minIndent === 0 && newLineAfterMs === 0 ? undefined : { minIndent, newLineAfterMs };
}
