import { Heap } from "./heap.js";

interface Bigram { score: number; left: number; right: number; size: number }

/**
 * SentencePiece-style BPE as llama.cpp runs it for `llama` vocabularies: start from single code
 * points, repeatedly merge the adjacent pair whose concatenation is the highest-scoring token
 * (leftmost on ties), then emit each final symbol as its token or, when it is not one, as byte
 * tokens via `byteToken`. Spaces must already be escaped to "▁" by the caller.
 * Symbols stay contiguous slices of `text`, so a pair's text is one slice.
 */
export function spmEncode(
  text: string,
  vocab: ReadonlyMap<string, number>,
  scores: ArrayLike<number>,
  byteToken: (byte: number, out: number[]) => void,
  out: number[],
): void {
  const starts: number[] = [];
  for (let i = 0; i < text.length; ) {
    starts.push(i);
    const c = text.charCodeAt(i);
    i += c >= 0xd800 && c <= 0xdbff && i + 1 < text.length ? 2 : 1;
  }
  const n = starts.length;
  if (n === 0) return;
  const start = Int32Array.from(starts);
  const len = new Int32Array(n);
  const next = new Int32Array(n);
  const prev = new Int32Array(n);
  for (let i = 0; i < n; i++) {
    len[i] = (i + 1 < n ? start[i + 1]! : text.length) - start[i]!;
    next[i] = i + 1 < n ? i + 1 : -1;
    prev[i] = i - 1;
  }
  const heap = new Heap<Bigram>((a, b) => a.score > b.score || (a.score === b.score && a.left < b.left));
  const tryAdd = (left: number, right: number) => {
    if (left < 0 || right < 0) return;
    const size = len[left]! + len[right]!;
    const id = vocab.get(text.substr(start[left]!, size));
    if (id === undefined) return;
    heap.push({ score: scores[id] ?? 0, left, right, size });
  };
  for (let i = 1; i < n; i++) tryAdd(i - 1, i);

  for (let b = heap.pop(); b; b = heap.pop()) {
    // skip pairs where either side has been merged into something else since
    if (len[b.left] === 0 || len[b.right] === 0 || len[b.left]! + len[b.right]! !== b.size) continue;
    len[b.left] = b.size;
    len[b.right] = 0;
    const after = next[b.right]!;
    next[b.left] = after;
    if (after >= 0) prev[after] = b.left;
    tryAdd(prev[b.left]!, b.left);
    tryAdd(b.left, after);
  }

  const utf8 = new TextEncoder();
  for (let i = 0; i >= 0; i = next[i]!) {
    const piece = text.substr(start[i]!, len[i]!);
    const id = vocab.get(piece);
    if (id !== undefined) out.push(id);
    else for (const byte of utf8.encode(piece)) byteToken(byte, out);
  }
}
