/**
 * A kernel worker on Node's worker_threads: the loop of worker-loop.ts, linked to the main
 * thread by the MessagePort in workerData (host.ts spawns it).
 */
import { receiveMessageOnPort, workerData, type MessagePort } from "node:worker_threads";
import { runKernelWorker, type SpaceAnnouncement, type WorkerStart } from "./worker-loop.js";

export type { SpaceAnnouncement } from "./worker-loop.js";

export interface WorkerInit extends WorkerStart {
  port: MessagePort;
}

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
