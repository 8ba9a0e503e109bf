/**
 * One "abort" listener per signal, however many callers wait on it. A signal shared by many
 * concurrent calls (a request's AbortSignal.timeout given to each of a dozen generate calls)
 * would otherwise collect a listener per call, and Node warns of a leak past 10
 * (MaxListenersExceededWarning) although each is removed when its call ends.
 */
interface Watch {
  readonly callbacks: Set<{ readonly fn: () => void }>;
  readonly listener: () => void;
}

const watches = new WeakMap<AbortSignal, Watch>();

/**
 * Calls `fn` when `signal` aborts, until the returned function is called (more than once: a
 * no-op). The same `fn` given twice is called twice. A signal already aborted never calls it: its
 * caller checks `aborted` first. The signal's one listener leaves with its last callback.
 */
export function onAbort(signal: AbortSignal, fn: () => void): () => void {
  if (signal.aborted) return () => undefined;
  let watch = watches.get(signal);
  if (!watch) {
    const callbacks = new Set<{ readonly fn: () => void }>();
    const listener = () => {
      watches.delete(signal);
      for (const c of [...callbacks]) c.fn();
    };
    watches.set(signal, (watch = { callbacks, listener }));
    signal.addEventListener("abort", listener, { once: true });
  }
  const entry = { fn };
  const w = watch;
  w.callbacks.add(entry);
  return () => {
    if (!w.callbacks.delete(entry) || w.callbacks.size > 0) return;
    if (watches.get(signal) === w) watches.delete(signal);
    signal.removeEventListener("abort", w.listener);
  };
}
