/**
 * A kernel worker on Node's worker_threads: the loop of worker-loop.ts, linked to the main
 * thread by the MessagePort in workerData (host.ts spawns it).
 */
import { receiveMessageOnPort, workerData } from "node:worker_threads";
import type { SpaceAnnouncement, WorkerInit } from "./protocol.js";
import { runKernelWorker } from "./worker-loop.js";


const init = workerData as WorkerInit;
const { port } = init;

void runKernelWorker(init, {
  ready: () => port.postMessage({ ready: true }),
  startFailed: (message) => {
    port.postMessage({ error: message });
    port.close();
  },
  kernelFailed: (message) => port.postMessage({ error: message }),
  // this loop never returns to the event loop, so nothing else reads the port
  nextAnnouncement: () => receiveMessageOnPort(port)?.message as SpaceAnnouncement | undefined,
  close: () => port.close(),
});
