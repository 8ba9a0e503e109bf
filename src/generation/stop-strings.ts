export interface StopPushResult {
  /** text that is now safe to show: it can no longer turn into the start of a stop string */
  emit: string;
  /** true once a stop string has appeared; `emit` then ends right before it */
  stopped: boolean;
  /** the stop string that matched, when stopped */
  matched?: string;
}

export interface StopMatcher {
  /** feeds the next piece of generated text (any chunking; stops may straddle pieces) */
  push(text: string): StopPushResult;
  /** at the end of generation: releases the text held back as a possible stop prefix */
  flush(): string;
}

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

function isHighSurrogate(code: number): boolean {
  return code >= 0xd800 && code <= 0xdbff;
}

/**
 * Streams text while watching for stop strings. Text is emitted as soon as it cannot be
 * part of a stop string; the longest tail that is a prefix of some stop string is held back.
 * When a stop string completes, the text before it is emitted and the matcher is stopped
 * (further pushes emit nothing); the outcome does not depend on the chunking. Matching is on
 * exact UTF-16 code units; a trailing unpaired high surrogate is also held back so a chunk
 * never ends in half a character.
 */
export function createStopMatcher(stops: readonly string[]): StopMatcher {
  validateStopStrings(stops);
  const list = [...new Set(stops)];
  const longest = list.reduce((m, s) => Math.max(m, s.length), 0);

  let held = "";
  let stopped = false;

  /** length of the longest proper suffix of `text` that begins some stop string */
  function heldLength(text: string): number {
    for (let len = Math.min(text.length, longest - 1); len > 0; len--) {
      const tail = text.slice(text.length - len);
      if (list.some((s) => s.startsWith(tail))) return len;
    }
    return 0;
  }

  return {
    push(text: string): StopPushResult {
      if (typeof text !== "string") throw new TypeError(`push(): expected a string, got ${typeof text}`);
      if (stopped) return { emit: "", stopped: true };
      const buf = held + text;
      // earlier pushes found no complete match, so any match here ends inside `text`.
      // The stop that completes first wins, as if text arrived one character at a time,
      // so the result never depends on how the text was chunked; on a tie (one stop is a
      // suffix of the other) the one starting earlier wins.
      let at = -1;
      let end = Infinity;
      let matched = "";
      for (const s of list) {
        const i = buf.indexOf(s, Math.max(0, held.length - s.length + 1));
        if (i >= 0 && (i + s.length < end || (i + s.length === end && i < at))) {
          at = i;
          end = i + s.length;
          matched = s;
        }
      }
      if (at >= 0) {
        stopped = true;
        held = "";
        return { emit: buf.slice(0, at), stopped: true, matched };
      }
      let keep = heldLength(buf);
      if (keep === 0 && buf.length > 0 && isHighSurrogate(buf.charCodeAt(buf.length - 1))) keep = 1;
      held = buf.slice(buf.length - keep);
      return { emit: buf.slice(0, buf.length - keep), stopped: false };
    },
    flush(): string {
      const out = held;
      held = "";
      return out;
    },
  };
}

/** throws naming the first stop string a matcher cannot take (not a string, empty, an unpaired surrogate) */
export function validateStopStrings(stops: readonly string[]): void {
  if (!Array.isArray(stops)) throw new TypeError("stop strings: expected an array of strings");
  stops.forEach((s, i) => {
    if (typeof s !== "string") {
      throw new TypeError(`stop strings[${i}]: expected a string, got ${typeof s}`);
    }
    if (s.length === 0) {
      throw new RangeError(`stop strings[${i}]: a stop string must not be empty`);
    }
    if (LONE_SURROGATE.test(s)) {
      throw new RangeError(`stop strings[${i}]: contains an unpaired UTF-16 surrogate`);
    }
  });
}
