/**
 * Cross-origin isolation for a page whose host sends no COOP/COEP headers (GitHub Pages, a plain
 * static server), so that the wasm backend gets its Web Worker threads there too. Bundled to
 * dist-browser/tsllm-isolate.js as a classic script, which is two things at once:
 *
 * - on the page (`<script src="tsllm-isolate.js"></script>` before the page's module script, the
 *   file beside the page: a service worker controls only the folder its script is in and below),
 *   it registers itself as the page's service worker and reloads the page once so that the worker
 *   serves it; `globalThis.tsllmIsolation` is a promise of the outcome, settled once the page is
 *   isolated or will not be (never, when the page is about to reload);
 * - as that service worker, it answers every request of the pages and workers it controls with the
 *   network's response plus `Cross-Origin-Opener-Policy: same-origin` and
 *   `Cross-Origin-Embedder-Policy: require-corp` (or `credentialless`, when the script is loaded as
 *   `tsllm-isolate.js?coep=credentialless`: the worker reads it from its own URL), which is what
 *   makes them cross-origin isolated.
 *
 * `globalThis.tsllmUnregisterIsolation()` unregisters that worker; loaded as
 * `tsllm-isolate.js?unregister`, the script does that itself instead of registering, and reloads
 * a page the worker served once, so that the page runs as its host serves it (how a site takes
 * the worker back from its visitors: a worker, once installed, serves its pages until unregistered).
 *
 * Where that cannot work (no service workers: a private window, http:// from another machine; a
 * page still not isolated after its one reload) the page stays as it is and the wasm backend runs
 * on one thread with its usual note: the reload happens at most once per tab session while the
 * worker serves the tab, never in a loop.
 */

/** what `globalThis.tsllmIsolation` resolves to */
export interface IsolationOutcome {
  isolated: boolean;
  /** why the page is not isolated */
  why?: string;
}

/** the Web APIs used here, which the project's compile (no DOM library) does not declare */
interface ServiceWorkerLike {
  readonly state: string;
  readonly scriptURL: string;
  addEventListener(type: "statechange", listener: () => void): void;
}
interface Registration {
  readonly installing: ServiceWorkerLike | null;
  readonly waiting: ServiceWorkerLike | null;
  readonly active: ServiceWorkerLike | null;
  unregister(): Promise<boolean>;
}
interface ServiceWorkerContainer {
  controller: { scriptURL: string } | null;
  register(url: string): Promise<Registration>;
  getRegistrations(): Promise<readonly Registration[]>;
}
interface PageGlobals {
  crossOriginIsolated?: boolean;
  isSecureContext?: boolean;
  document: { currentScript: { src?: string } | null };
  navigator: { serviceWorker?: ServiceWorkerContainer };
  sessionStorage: { getItem(key: string): string | null; setItem(key: string, value: string): void; removeItem(key: string): void };
  location: { reload(): void };
  performance?: { timeOrigin: number; getEntriesByType?(type: "navigation"): readonly { type?: string }[] };
  tsllmIsolation?: Promise<IsolationOutcome>;
  tsllmUnregisterIsolation?: () => Promise<boolean>;
}
interface FetchEvent {
  readonly request: Request & { readonly mode: string; readonly url: string };
  respondWith(response: Promise<Response>): void;
}
interface WaitEvent {
  waitUntil(p: Promise<unknown>): void;
}
interface WorkerGlobals {
  location: { href: string; origin: string };
  skipWaiting(): Promise<void>;
  clients: { claim(): Promise<void> };
  addEventListener(type: "install" | "activate", listener: (e: WaitEvent) => void): void;
  addEventListener(type: "fetch", listener: (e: FetchEvent) => void): void;
}

/** set in the tab's sessionStorage just before the reload (to Date.now()): a page that finds it in force and is not isolated gives up */
const RELOADED = "tsllm-isolate: reloaded";

/** ms between setting the guard and the start of the reload's navigation (performance.timeOrigin) that make this load that reload */
const RELOAD_WINDOW_MS = 10_000;

/**
 * Whether the reload guard `value` holds for this load: the page is served by this script's
 * worker (reloaded under it, and still not isolated: this tab gives up for good), or this load is
 * the reload the guard was set for (a reload whose navigation began just after). A guard that is
 * neither is left over: in Chromium a tab that leaves its isolated (COOP) page gets back the
 * sessionStorage from before the isolating reload, guard included, which the isolated page had
 * removed from its own; a page there after the worker was unregistered (or a hard reload that
 * bypassed it) gave up without trying ("still not cross-origin isolated") until the tab was closed.
 */
function guardHolds(value: string, servedByThis: boolean, performance: PageGlobals["performance"]): boolean {
  if (servedByThis) return true;
  // (a browser that cannot tell: held, as before, rather than risk a second reload)
  const navigation = performance?.getEntriesByType?.("navigation")[0]?.type;
  if (performance === undefined || navigation === undefined) return true;
  const since = performance.timeOrigin - Number(value);
  return navigation === "reload" && (Number.isNaN(since) || Math.abs(since) <= RELOAD_WINDOW_MS);
}

/**
 * The Cross-Origin-Embedder-Policy the worker sends: `require-corp` (the default) loads a
 * cross-origin resource without CORS only when it sends Cross-Origin-Resource-Policy;
 * `credentialless` loads it without cookies instead (Chromium 96+, Firefox 119+; Safari has none,
 * and a page there stays not isolated)
 */
export type EmbedderPolicy = "require-corp" | "credentialless";

/** the policy a script URL's `coep` parameter asks for, or a sentence saying what is wrong with it */
export function embedderPolicyOf(scriptURL: string): EmbedderPolicy | { why: string } {
  const coep = new URL(scriptURL).searchParams.get("coep");
  if (coep === null || coep === "require-corp") return "require-corp";
  if (coep === "credentialless") return coep;
  return { why: `tsllm-isolate.js?coep=${coep}: expected require-corp or credentialless` };
}

/** `response` with the two headers that isolate a page and its workers */
export function isolatedResponse(response: Response, coep: EmbedderPolicy = "require-corp"): Response {
  // an opaque response (a cross-origin no-cors request) can be neither read nor rebuilt: as it is
  if (response.status === 0) return response;
  const headers = new Headers(response.headers);
  headers.set("Cross-Origin-Opener-Policy", "same-origin");
  headers.set("Cross-Origin-Embedder-Policy", coep);
  return new Response(response.body, { status: response.status, statusText: response.statusText, headers });
}

function serveIsolated(scope: WorkerGlobals): void {
  // the page registered the script under the URL it was loaded by; a bad coep never gets this far
  const asked = embedderPolicyOf(scope.location.href);
  const coep = typeof asked === "string" ? asked : "require-corp";
  // the page waits for this worker to control it: take over at once, not on the next visit
  scope.addEventListener("install", (e) => e.waitUntil(scope.skipWaiting()));
  scope.addEventListener("activate", (e) => e.waitUntil(scope.clients.claim()));
  scope.addEventListener("fetch", (e) => {
    // fetch() refuses to replay this one (DevTools sends it): left to the browser
    if (e.request.cache === "only-if-cached" && e.request.mode !== "same-origin") return;
    // credentialless sends a cross-origin no-cors request (an <img> of another site) without
    // cookies, which is what lets its response in without Cross-Origin-Resource-Policy; fetched
    // here as the page asked, with them, Chromium blocked it as require-corp would
    const request = coep === "credentialless" && e.request.mode === "no-cors" && new URL(e.request.url).origin !== scope.location.origin ? new Request(e.request, { credentials: "omit" }) : e.request;
    e.respondWith(fetch(request).then((r) => isolatedResponse(r, coep)));
  });
}

/** the registration's worker once it is activated (true), or false when it fails to install */
function activated(reg: Registration | undefined): Promise<boolean> {
  // (a stubbed register(), as test tools and some extensions install, resolves to nothing)
  const worker = reg ? (reg.installing ?? reg.waiting ?? reg.active) : null;
  if (!worker) return Promise.resolve(false);
  return new Promise((resolve) => {
    const check = (): void => {
      if (worker.state === "activated") resolve(true);
      else if (worker.state === "redundant") resolve(false);
    };
    worker.addEventListener("statechange", check);
    check();
  });
}

/** a script URL without its parameters: this script's worker, whatever its coep */
const scriptPath = (url: string): string => url.split(/[?#]/)[0]!;

/** `tsllm-isolate.js?unregister`: the worker unregistered, and a page it served reloaded once without it */
async function unisolatePage(page: PageGlobals, scriptURL: string): Promise<IsolationOutcome> {
  const controller = page.navigator.serviceWorker?.controller;
  const served = controller != null && scriptPath(controller.scriptURL) === scriptPath(scriptURL);
  // (the next load finds nothing to unregister, so this reloads once, never in a loop)
  if ((await unregisterIsolation(page, scriptURL)) && served) {
    page.location.reload();
    return new Promise<never>(() => undefined);
  }
  return { isolated: page.crossOriginIsolated === true, ...(page.crossOriginIsolated === true ? {} : { why: "tsllm-isolate.js?unregister: its service worker is not registered" }) };
}

async function isolatePage(page: PageGlobals, scriptURL: string | undefined): Promise<IsolationOutcome> {
  if (scriptURL !== undefined && new URL(scriptURL).searchParams.has("unregister")) return unisolatePage(page, scriptURL);
  let storage: PageGlobals["sessionStorage"] | undefined;
  try {
    storage = page.sessionStorage;
  } catch {
    // storage denied (some privacy settings throw on the property itself)
  }
  const coep = scriptURL === undefined ? "require-corp" : embedderPolicyOf(scriptURL);
  if (typeof coep !== "string") return { isolated: page.crossOriginIsolated === true, ...coep };
  const sw = page.navigator.serviceWorker;
  if (page.crossOriginIsolated === true) {
    storage?.removeItem(RELOADED);
    // served by this script's worker under another coep: the one asked for now serves the next load
    // (a worker of another script, the site's own, is left alone)
    const controller = sw?.controller;
    if (scriptURL && controller && controller.scriptURL !== scriptURL && scriptPath(controller.scriptURL) === scriptPath(scriptURL)) void sw!.register(scriptURL).catch(() => undefined);
    return { isolated: true };
  }
  if (page.isSecureContext === false) return { isolated: false, why: "the page is not a secure context (https:, or localhost), where service workers run" };
  if (!sw) return { isolated: false, why: "this browser gives the page no service workers (a private window, or service workers turned off)" };
  if (!scriptURL) return { isolated: false, why: "tsllm-isolate.js must be loaded by a classic <script src> tag (it registers its own URL)" };
  // without a place to remember the reload, one more reload could be one in a loop
  if (!storage) return { isolated: false, why: "the page has no sessionStorage, which guards against reloading it more than once" };
  const guard = storage.getItem(RELOADED);
  const servedByThis = sw.controller != null && scriptPath(sw.controller.scriptURL) === scriptPath(scriptURL);
  if (guard !== null && guardHolds(guard, servedByThis, page.performance)) return { isolated: false, why: "still not cross-origin isolated after reloading under the service worker" };
  let reg: Registration | undefined;
  try {
    reg = await sw.register(scriptURL);
  } catch (e) {
    return { isolated: false, why: `the service worker did not register: ${e instanceof Error ? e.message : String(e)}` };
  }
  if (!(await activated(reg))) return { isolated: false, why: "the service worker did not install" };
  // a page not yet controlled becomes so when the worker claims it (clients.claim), or was
  // loaded bypassing it (a hard reload): either way, loaded again it is served by the worker
  storage.setItem(RELOADED, String(Date.now()));
  page.location.reload();
  return new Promise<never>(() => undefined);
}

/**
 * Unregisters the service worker of this script (whatever its parameters) in the page's origin;
 * true when there was one. The page stays isolated (its headers came with it); its next load is
 * served without the worker, and registers it again if it loads tsllm-isolate.js without `?unregister`.
 */
async function unregisterIsolation(page: PageGlobals, scriptURL: string | undefined): Promise<boolean> {
  const sw = page.navigator.serviceWorker;
  if (!sw || !scriptURL) return false;
  let removed = false;
  for (const reg of await sw.getRegistrations()) {
    const worker = reg.active ?? reg.waiting ?? reg.installing;
    if (worker && scriptPath(worker.scriptURL) === scriptPath(scriptURL) && (await reg.unregister())) removed = true;
  }
  return removed;
}

const here = globalThis as unknown as Partial<WorkerGlobals & PageGlobals> & { ServiceWorkerGlobalScope?: new () => unknown };
if (here.ServiceWorkerGlobalScope !== undefined && globalThis instanceof here.ServiceWorkerGlobalScope) serveIsolated(here as WorkerGlobals);
else if (here.document !== undefined) {
  const page = here as PageGlobals;
  const scriptURL = page.document.currentScript?.src;
  page.tsllmUnregisterIsolation = () => unregisterIsolation(page, scriptURL);
  // whatever goes wrong here, the page goes on without isolation rather than not at all
  page.tsllmIsolation = isolatePage(page, scriptURL).catch((e: unknown) => ({ isolated: false, why: `tsllm-isolate.js: ${e instanceof Error ? e.message : String(e)}` }));
}
