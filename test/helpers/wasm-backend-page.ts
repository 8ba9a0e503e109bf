/**
 * The wasm backend for a test page: bundled by buildBrowser() with the kernel worker, the page
 * imports this and creates the backend as the browser's engine worker does (Web Worker threads,
 * the kernels fetched from beside the bundle).
 */
export { createBrowserBackend } from "../../src/browser/backends.js";
