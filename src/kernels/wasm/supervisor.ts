/**
 * The Node host's supervisor: a thread that starts the kernel workers and hears their ends.
 *
 * A kernel worker's thread can end with none of its JavaScript running (worker.terminate(), or
 * its heap out of memory: ERR_WORKER_OUT_OF_MEMORY), so it cannot say so itself as it does when
 * its loop throws or it calls process.exit (worker.ts). Only the thread that started a Worker
 * hears its 'exit' event, and the main thread hears nothing while it waits on a job (its event
 * loop is blocked there, which is when a dead worker holds it). This thread starts them instead
 * and has nothing else to do: on an unexpected end it leaves why on the worker's report port and
 * then marks the worker stopped in shared memory (markStopped), which the pool's waits read.
 */
import { Worker, parentPort, workerData, type MessagePort } from "node:worker_threads";
import { endTold, markStopped } from "./control.js";
import type { SupervisorInit, SupervisorRequest, WorkerInit } from "./protocol.js";

const { kernelWorkerSource } = workerData as SupervisorInit;
const children = new Map<number, Worker>();

function spawn(id: number, init: WorkerInit, reports: MessagePort): void {
  let error: string | undefined;
  const child = new Worker(kernelWorkerSource, { eval: true, workerData: init, transferList: [init.port] });
  children.set(id, child);
  child.on("error", (e) => (error = `${e.name}: ${e.message}`));
  child.once("exit", (code) => {
    children.delete(id);
    // (a thread that ends with code 0 ended its own way and said why: a failed start, process.exit(0))
    if ((code !== 0 || error) && !endTold(init)) {
      // the message is on the main thread's end of the port before the word that makes it look
      reports.postMessage({ error: error ? `its thread ended (exit code ${code}): ${error}` : `its thread was ended from outside (exit code ${code})` });
      markStopped(init);
    }
    // (the port is left open: closing it here could drop the message before the main thread reads it; its end there closes both)
  });
}

parentPort!.on("message", (m: SupervisorRequest) => {
  if ("spawn" in m) spawn(m.spawn.id, m.spawn.init, m.spawn.reports);
  else void children.get(m.terminate)?.terminate();
});
