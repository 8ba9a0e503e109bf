import { formatBytes } from "../units/index.js";

/** What the downloader reports, per file. */
export interface DownloadProgress {
  readonly file: string;
  readonly repo: string;
  /**
   * start: about to transfer; bytes: `downloaded` changed; done: verified and in the cache; cached:
   * already there; wait: another process holds the file's lock (`holder`, `lock`), and this
   * download waits for it to let go (said once per file); `file` is "" for the repo's own lock (an
   * rm of the repo at work, or another download starting)
   */
  readonly phase: "start" | "bytes" | "done" | "cached" | "wait";
  readonly downloaded: number;
  readonly total: number;
  /** with wait: `process <pid>[ on <host>]` */
  readonly holder?: string;
  /** with wait: the lock file it holds */
  readonly lock?: string;
}

export type ProgressListener = (p: DownloadProgress) => void;

/**
 * The line a download or an rm prints once when it starts waiting on a lock a live process holds,
 * as huggingface_hub logs "Still waiting to acquire lock on ..." (the wait goes on)
 */
export function waitingLine(holder: string | undefined, lock: string | undefined, what: string): string {
  return `waiting for ${holder ?? "another process"}, which holds ${lock ?? "its lock"}, to let go of ${what}`;
}

function formatSeconds(s: number): string {
  if (!Number.isFinite(s)) return "--";
  if (s >= 3600) return `${Math.floor(s / 3600)}h${String(Math.floor((s % 3600) / 60)).padStart(2, "0")}m`;
  if (s >= 60) return `${Math.floor(s / 60)}m${String(Math.floor(s % 60)).padStart(2, "0")}s`;
  return `${Math.ceil(s)}s`;
}

interface Active { file: string; downloaded: number; total: number; startedAt: number; startBytes: number }

/**
 * A progress display on a stream (stderr): on a TTY one redrawn bar per file being transferred
 * (bytes, speed, ETA); otherwise plain lines when a file starts and ends. `now` is injectable
 * for tests.
 */
/** bytes per second in words: a small file's rate is a fraction of a byte count, said whole (25 B/s, not 25.111979940212567 B/s) */
function rate(bytesPerSecond: number): string {
  return `${formatBytes(Math.round(bytesPerSecond))}/s`;
}

export function progressReporter(stream: NodeJS.WriteStream, options: { tty?: boolean; now?: () => number } = {}): ProgressListener {
  const tty = options.tty ?? stream.isTTY === true;
  const now = options.now ?? (() => performance.now());
  const active = new Map<string, Active>();
  let drawn = 0;
  let lastDraw = 0;

  const bar = (a: Active): string => {
    const frac = a.total > 0 ? Math.min(1, a.downloaded / a.total) : 1;
    const width = 24;
    const filled = Math.round(frac * width);
    const secs = (now() - a.startedAt) / 1000;
    const speed = secs > 0 ? (a.downloaded - a.startBytes) / secs : 0;
    const eta = speed > 0 ? (a.total - a.downloaded) / speed : Infinity;
    const name = a.file.length > 32 ? `…${a.file.slice(-31)}` : a.file.padEnd(32);
    return `${name} [${"#".repeat(filled)}${"-".repeat(width - filled)}] ${(frac * 100).toFixed(0).padStart(3)}% ${formatBytes(a.downloaded)}/${formatBytes(a.total)} ${rate(speed)} ETA ${formatSeconds(eta)}`;
  };
  /** rewrites the bar lines (the last `drawn` lines above the cursor), with `permanent` lines first */
  const paint = (permanent: string[]) => {
    lastDraw = now();
    const lines = [...permanent, ...[...active.values()].map(bar)];
    let out = drawn > 0 ? `\x1b[${drawn}A` : "";
    for (const l of lines) out += `\x1b[2K${l}\n`;
    const extra = drawn - lines.length;
    if (extra > 0) out += `${"\x1b[2K\n".repeat(extra)}\x1b[${extra}A`;
    drawn = active.size;
    stream.write(out);
  };
  const println = (line: string) => {
    if (tty) paint([line]);
    else stream.write(`${line}\n`);
  };

  return (p) => {
    const key = `${p.repo}/${p.file}`;
    switch (p.phase) {
      case "start":
        active.set(key, { file: p.file, downloaded: p.downloaded, total: p.total, startedAt: now(), startBytes: p.downloaded });
        if (tty) paint([]);
        else stream.write(`downloading ${p.repo}/${p.file} (${formatBytes(p.total)}${p.downloaded > 0 ? `, resuming at ${formatBytes(p.downloaded)}` : ""})\n`);
        break;
      case "bytes": {
        const a = active.get(key);
        if (a) { a.downloaded = p.downloaded; if (tty && now() - lastDraw >= 100) paint([]); }
        break;
      }
      case "done": {
        const a = active.get(key);
        active.delete(key);
        const secs = a ? (now() - a.startedAt) / 1000 : 0;
        const speed = a && secs > 0 ? ` at ${rate((p.total - a.startBytes) / secs)}` : "";
        println(`downloaded ${p.repo}/${p.file} (${formatBytes(p.total)} in ${secs.toFixed(1)}s${speed})`);
        break;
      }
      case "wait":
        println(waitingLine(p.holder, p.lock, p.file ? `${p.repo}/${p.file}` : p.repo));
        break;
      case "cached":
        break;
    }
  };
}
