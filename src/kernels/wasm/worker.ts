/**
 * A kernel worker on Node's worker_threads: the loop of worker-loop.ts, linked to the main
 * thread by the MessagePort in workerData (host.ts has its supervisor thread, supervisor.ts, start it).
 *
 * Once started, the loop holds this thread and the main thread's jobs hold that one: the main
 * thread hears none of this worker's events ('exit', 'error') while it waits on a job. A loop
 * that stops for good — it threw, or the thread ended (process.exit here) — says so itself, as
 * the browser's kernel worker does: why on the port, then the shared word (markStopped), which
 * the pool's waits and every job look at. A thread ended from outside (worker.terminate(), its
 * heap out of memory) runs none of this: the supervisor, which hears its 'exit', says so for it.
 */
import { fileURLToPath } from "node:url";
import { receiveMessageOnPort, workerData } from "node:worker_threads";
import type { SpaceAnnouncement, WorkerInit } from "./protocol.js";
import { markStopped } from "./control.js";
import { describeError, runKernelWorker } from "./worker-loop.js";


const init = workerData as WorkerInit;
const { port } = init;
const script = fileURLToPath(import.meta.url);
/** the loop has said ready: the main thread no longer listens to this thread's events */
let started = false;
/** the loop has ended: on STOP, a failed start, or stopped for good */
let ended = false;

function stop(why: string): void {
  if (ended) return;
  ended = true;
  // the message is on the main thread's end of the port before the word that makes it look
  port.postMessage({ error: `${script}: ${why}${started ? " after its start" : ""}` });
  markStopped(init);
}

// the thread ends while the loop runs: process.exit in this thread (JavaScript runs no more
// after this handler; a thread killed outright, by its resourceLimits, runs none of it)
process.once("exit", (code) => stop(`its thread exited (code ${code})`));

runKernelWorker(init, {
  ready: () => {
    started = true;
    port.postMessage({ ready: true });
  },
  startFailed: (message) => {
    ended = true;
    port.postMessage({ error: message });
    port.close();
  },
  kernelFailed: (message) => port.postMessage({ error: message }),
  // this loop never returns to the event loop, so nothing else reads the port
  nextAnnouncement: () => receiveMessageOnPort(port)?.message as SpaceAnnouncement | undefined,
  close: () => {
    ended = true;
    port.close();
  },
}).catch((e: unknown) => stop(`its loop threw ${describeError(e)}`));
