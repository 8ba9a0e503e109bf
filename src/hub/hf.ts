import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { expandPath, hfHome } from "./cache.js";
import { HubError } from "./errors.js";
import { hubRequest, normalizeEtag, readText, retryAfterMs, timeoutFromEnv } from "./http.js";
import { checkCacheName } from "./reference.js";
import { trimEndpoint, type Checksum, type FileLocation, type HubSource, type RemoteFile, type RepoListing, type SourceOptions } from "./source.js";

/** HF_TOKEN, else the legacy HUGGING_FACE_HUB_TOKEN, else the file `huggingface-cli login` writes */
export function hfTokenFromEnv(env: NodeJS.ProcessEnv = process.env): string | undefined {
  const t = env.HF_TOKEN || env.HUGGING_FACE_HUB_TOKEN;
  if (t) return t.trim();
  const file = env.HF_TOKEN_PATH ? expandPath(env.HF_TOKEN_PATH, env) : join(hfHome(env), "token");
  if (existsSync(file)) return readFileSync(file, "utf8").trim() || undefined;
  return undefined;
}

/**
 * What an ETag says about the bytes: an LFS file (X-Linked-Etag) is named by its sha256, a file
 * stored in git by its git blob id (40 hex digits). huggingface_hub checks only the size while it
 * downloads (its `hf cache verify` checks both hashes); checking the hash here keeps a truncated or
 * corrupted config.json or tokenizer.json of the right size out of the cache. Any other ETag (a
 * mirror's own) is not checked.
 */
function fileChecksum(etag: string, linked: boolean): Checksum | undefined {
  if (/^[0-9a-f]{64}$/.test(etag)) return { algorithm: "sha256", hex: etag };
  if (!linked && /^[0-9a-f]{40}$/.test(etag)) return { algorithm: "git-sha1", hex: etag };
  return undefined;
}

/** the X-Error-Message of a 401 for a bad token (huggingface_hub tells it apart the same way) */
const INVALID_CREDENTIALS = "Invalid credentials in Authorization header";

const enc = (s: string) => s.split("/").map(encodeURIComponent).join("/");

/** The Hugging Face Hub (or a mirror such as hf-mirror.com via HF_ENDPOINT). */
export function huggingFaceSource(options: SourceOptions = {}): HubSource {
  const env = options.env ?? process.env;
  const endpoint = trimEndpoint(options.endpoint ?? env.HF_ENDPOINT ?? "https://huggingface.co", "HF_ENDPOINT");
  const auth = { token: options.token ?? hfTokenFromEnv(env), origin: new URL(endpoint).origin };
  const timeoutMs = options.timeoutMs ?? timeoutFromEnv(env, "HF_HUB_ETAG_TIMEOUT");

  /** the error a failed Hub response stands for, from X-Error-Code when the server sends one */
  const failure = (res: Response, repo: string, revision: string, file?: string): HubError => {
    const code = res.headers.get("x-error-code");
    const serverMsg = res.headers.get("x-error-message");
    const where = `${repo}@${revision}`;
    const said = serverMsg ? ` The Hub says: ${serverMsg.trim().replace(/\.?$/, ".")}` : "";
    // an expired or revoked token is refused on every repo, public ones included: it is not the repo's fault
    if (res.status === 401 && serverMsg === INVALID_CREDENTIALS && auth.token) {
      return new HubError("unauthorized", `the Hub refused the token sent for ${repo} (401 ${serverMsg}): it is invalid, expired or revoked; set a valid one in HF_TOKEN (or the token option, --token), or unset it for public repos`);
    }
    if (code === "GatedRepo" || ((res.status === 401 || res.status === 403) && code !== "RepoNotFound")) {
      return new HubError("unauthorized", `access to ${repo} was refused (${res.status}${code ? ` ${code}` : ""}): it is gated or private — accept its terms on the Hub and ${auth.token ? "check that the token sent has access to it" : "set HF_TOKEN (or the token option, --token)"}.${said}`);
    }
    if (code === "RepoNotFound" || (res.status === 401 && !file)) {
      return new HubError("repo-not-found", `repository ${repo} not found on ${endpoint}${auth.token ? "" : " (if it is private, set HF_TOKEN or the token option, --token)"}`);
    }
    if (code === "RevisionNotFound") return new HubError("revision-not-found", `revision "${revision}" not found in ${repo} on ${endpoint}`);
    if (code === "EntryNotFound" || (res.status === 404 && file)) return new HubError("file-not-found", `file ${file ?? "?"} not found in ${where} on ${endpoint}`);
    if (res.status === 404) return new HubError("repo-not-found", `repository ${repo} (revision ${revision}) not found on ${endpoint}`);
    const wait = retryAfterMs(res);
    return new HubError(res.status >= 500 || res.status === 429 ? "network" : "protocol", `${file ? `${file} in ` : ""}${where}: ${endpoint} answered ${res.status}${res.status === 429 ? " (rate limited)" : ""}${serverMsg ? `: ${serverMsg}` : ""}`, wait);
  };

  return {
    name: "hf",
    endpoint,
    auth,
    defaultRevision: "main",

    // GET /api/models/{repo}/revision/{revision}: { sha, siblings: [{ rfilename }] }
    async list(repo, revision, signal): Promise<RepoListing> {
      const url = `${endpoint}/api/models/${repo}/revision/${encodeURIComponent(revision)}`;
      const r = await hubRequest(url, { auth, redirects: "all", signal, timeoutMs });
      const { response } = r;
      if (!response.ok) { r.done(); await response.body?.cancel(); throw failure(response, repo, revision); }
      const text = await readText(r);
      let json: unknown;
      try { json = JSON.parse(text); } catch { throw new HubError("protocol", `${url}: the model info is not JSON: ${text.slice(0, 200)}`); }
      const body = json as { sha?: unknown; siblings?: { rfilename?: unknown; size?: unknown; lfs?: { sha256?: unknown } }[] };
      if (typeof body.sha !== "string" || !Array.isArray(body.siblings)) {
        throw new HubError("protocol", `${url}: expected {sha, siblings} in the model info, got ${JSON.stringify(body).slice(0, 200)}`);
      }
      checkCacheName(body.sha, `commit of ${repo}@${revision}`);
      const files = body.siblings.map((s) => {
        if (typeof s.rfilename !== "string") throw new HubError("protocol", `${url}: a sibling without rfilename`);
        return { path: s.rfilename, size: typeof s.size === "number" ? s.size : undefined };
      });
      return { commit: body.sha, files };
    },

    // HEAD /{repo}/resolve/{commit}/{file}: ETag or X-Linked-Etag, X-Linked-Size or Content-Length, Location for LFS
    async locate(repo, commit, file: RemoteFile, signal): Promise<FileLocation> {
      const url = `${endpoint}/${repo}/resolve/${encodeURIComponent(commit)}/${enc(file.path)}`;
      const { response, url: answered, done } = await hubRequest(url, { method: "HEAD", auth, redirects: "relative", headers: { "accept-encoding": "identity" }, signal, timeoutMs });
      done();
      await response.body?.cancel();
      if (response.status >= 400) throw failure(response, repo, commit, file.path);
      const h = response.headers;
      const etag = normalizeEtag(h.get("x-linked-etag") ?? h.get("etag"));
      const sizeText = h.get("x-linked-size") ?? h.get("content-length");
      const size = sizeText === null ? NaN : Number(sizeText);
      if (!etag) throw new HubError("protocol", `${file.path} in ${repo}@${commit}: the server sent no ETag, so the file cannot be cached`);
      if (!Number.isSafeInteger(size) || size < 0) throw new HubError("protocol", `${file.path} in ${repo}@${commit}: the server sent no usable size (X-Linked-Size / Content-Length: ${sizeText})`);
      checkCacheName(etag, `ETag of ${file.path} in ${repo}`);
      const location = h.get("location");
      return {
        etag,
        size,
        checksum: fileChecksum(etag, h.get("x-linked-etag") !== null),
        url: location ? new URL(location, answered).href : answered,
      };
    },
  };
}
