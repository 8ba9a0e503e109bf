/**
 * Node-only: the default action of SIGINT / SIGTERM kept through handlers that come and go.
 *
 * Removing a signal's last listener closes Node's signal handle, and a signal that handle had
 * caught but not yet delivered to JavaScript is then dropped: neither handled nor the default (a
 * Ctrl-C that comes as a download ends is lost, and the run goes on). A listener that stays keeps
 * the handle open; it stands in for the default action, ending the process by the signal, when no
 * other listener has the signal.
 */

const STOP_SIGNALS = ["SIGINT", "SIGTERM"] as const;
let installed = false;

function defaultAction(signal: NodeJS.Signals): void {
  if (process.listenerCount(signal) > 1) return; // another listener has it: it decides
  // the handle closed, the default disposition is back: the signal again ends the process by it
  process.off(signal, defaultAction);
  process.kill(process.pid, signal);
}

/**
 * Installs the stand-in for SIGINT's and SIGTERM's default action (once per process). Call it
 * before adding a listener that will be removed while the process runs on.
 */
export function keepDefaultSignalAction(): void {
  if (installed) return;
  installed = true;
  for (const signal of STOP_SIGNALS) process.on(signal, defaultAction);
}

/** whether a listener other than the stand-in has `signal` (without one, the default action is due) */
export function signalHandledElsewhere(signal: NodeJS.Signals): boolean {
  return process.listeners(signal).some((listener) => listener !== defaultAction);
}
