import { resolveModelReference } from "../hub/index.js";
import { keepDefaultSignalAction } from "../platform/signals.js";

/** the status of a run that Ctrl-C ended: 128 + SIGINT, as llama.cpp exits */
export const EXIT_INTERRUPTED = 130;
/** the status of a run SIGTERM ended: 128 + 15, as the signal's own */
export const EXIT_TERMINATED = 143;

/** downloads running under interruptibleDownload now: a command's own stop handling (serve's) leaves a signal to it meanwhile */
let downloading = 0;
export const downloadInProgress = (): boolean => downloading > 0;

/**
 * Runs a hub download (`download` passes the signal on) so that Ctrl-C, or a service manager's
 * SIGTERM, stops its transfers and lets go of its locks, says in one line that what was fetched
 * (a file's part included) is kept for the next run to resume, and ends the process 130 / 143.
 * A second signal quits at once. Every command that downloads goes through here, so each stops
 * a download the same way (killed by the signal, a command left its locks and said nothing).
 * A signal that comes as the download ends, too late to abort it, stops the run all the same
 * once it has finished (the run does not go on to load and generate after a Ctrl-C).
 * With `requestedStop` (serve, whose stop while loading is a requested one that process managers
 * must not count as a failure) the run ends 0 after that line, and a second signal exits 1.
 */
export async function interruptibleDownload<T>(command: string, download: (signal: AbortSignal) => Promise<T>, requestedStop?: (signal: NodeJS.Signals) => string): Promise<T> {
  // first, and for good: removing this download's listeners below then never drops a signal caught meanwhile
  keepDefaultSignalAction();
  const interrupt = new AbortController();
  let received: NodeJS.Signals | undefined;
  const statusOf = (signal: NodeJS.Signals) => requestedStop ? 0 : signal === "SIGTERM" ? EXIT_TERMINATED : EXIT_INTERRUPTED;
  const onSignal = (signal: NodeJS.Signals) => {
    if (received !== undefined) process.exit(requestedStop ? 1 : statusOf(received));
    received = signal;
    interrupt.abort();
  };
  process.on("SIGINT", onSignal);
  process.on("SIGTERM", onSignal);
  downloading++;
  try {
    let finished: { value: T } | undefined;
    try {
      finished = { value: await download(interrupt.signal) };
    } catch (e) {
      if (received === undefined) throw e;
    }
    if (received === undefined) return finished!.value;
    // a signal that came as the download was ending (too late to abort it) still stops the run:
    // the download has settled, its locks let go and its files whole (finished) or a part kept
    const kept = finished ? "the download had finished and is in the cache" : "what was downloaded is kept in the cache, and the next run resumes from there";
    const stopped = requestedStop ? `tsllm ${command}: ${requestedStop(received)}\n` : "";
    // (written before the exit: stderr on a pipe is asynchronous outside Linux)
    await new Promise<void>((done) => process.stderr.write(`tsllm ${command}: interrupted; ${kept}\n${stopped}`, () => done()));
    return process.exit(statusOf(received));
  } finally {
    downloading--;
    process.off("SIGINT", onSignal);
    process.off("SIGTERM", onSignal);
  }
}

/**
 * The line a command says when the hub could not answer and the cached snapshot serves as it is
 * (on stderr, once per reference): a snapshot the hub has moved on from is then no surprise.
 */
export function sayServedWithoutHub(command: string, failure: string, snapshotDir: string): void {
  process.stderr.write(`tsllm ${command}: the hub could not answer (${failure}); the cached snapshot ${snapshotDir} is used as it is\n`);
}

/** --model resolved (a hub reference downloaded, or found in the cache) under interruptibleDownload; a cached copy served without the hub is said */
export function resolveInterruptibly(command: string, ref: string, requestedStop?: (signal: NodeJS.Signals) => string): Promise<string> {
  const onServedWithoutHub = (failure: string, snapshotDir: string) => sayServedWithoutHub(command, failure, snapshotDir);
  return interruptibleDownload(command, (signal) => resolveModelReference(ref, { signal, onServedWithoutHub }), requestedStop);
}
