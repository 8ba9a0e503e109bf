import { HubError } from "./errors.js";
import { hubRequest, readText, timeoutFromEnv } from "./http.js";
import { checkCacheName } from "./reference.js";
import { trimEndpoint, type FileLocation, type HubSource, type RepoListing, type SourceOptions } from "./source.js";

/** $MODELSCOPE_ENDPOINT (a URL), else https://$MODELSCOPE_DOMAIN (as the modelscope package reads it), else https://www.modelscope.cn */
export function modelScopeEndpoint(env: NodeJS.ProcessEnv = process.env): string {
  if (env.MODELSCOPE_ENDPOINT) return env.MODELSCOPE_ENDPOINT;
  if (env.MODELSCOPE_DOMAIN) return /^https?:\/\//.test(env.MODELSCOPE_DOMAIN) ? env.MODELSCOPE_DOMAIN : `https://${env.MODELSCOPE_DOMAIN}`;
  return "https://www.modelscope.cn";
}

interface MsFile { Name?: unknown; Path?: unknown; Type?: unknown; Size?: unknown; Sha256?: unknown; Revision?: unknown }

/**
 * ModelScope: the listing `GET /api/v1/models/{repo}/repo/files?Revision=R&Recursive=true`
 * (`{Code, Message, Data: {Files: [{Path, Type, Size, Sha256}]}}`) carries every file's size
 * and sha256, so no HEAD is needed; files come from `/api/v1/models/{repo}/repo?Revision=R&FilePath=P`.
 * Blobs are named by their sha256. The snapshot folder is named by the revision (the listing
 * gives no repo-wide commit id).
 */
export function modelScopeSource(options: SourceOptions = {}): HubSource {
  const env = options.env ?? process.env;
  const endpoint = trimEndpoint(options.endpoint ?? modelScopeEndpoint(env), "MODELSCOPE_ENDPOINT");
  const auth = { token: options.token ?? env.MODELSCOPE_API_TOKEN, origin: new URL(endpoint).origin };
  const timeoutMs = options.timeoutMs ?? timeoutFromEnv(env, "HF_HUB_ETAG_TIMEOUT");
  return {
    name: "modelscope",
    endpoint,
    auth,
    defaultRevision: "master",

    async list(repo, revision, signal): Promise<RepoListing> {
      const url = `${endpoint}/api/v1/models/${repo}/repo/files?Revision=${encodeURIComponent(revision)}&Recursive=true`;
      const r = await hubRequest(url, { auth, redirects: "all", signal, timeoutMs });
      const { response } = r;
      const text = await readText(r);
      let body: { Code?: unknown; Message?: unknown; Data?: { Files?: MsFile[] } } = {};
      try { body = JSON.parse(text); } catch { /* reported below */ }
      const message = typeof body.Message === "string" && body.Message ? `: ${body.Message}` : "";
      if (response.status === 401 || response.status === 403) {
        throw new HubError("unauthorized", `access to modelscope:${repo} was refused (${response.status})${message}: set MODELSCOPE_API_TOKEN or pass --token`);
      }
      if (response.status === 404 || (body.Code !== undefined && body.Code !== 200 && !Array.isArray(body.Data?.Files))) {
        throw new HubError("repo-not-found", `modelscope:${repo}@${revision} not found on ${endpoint}${message}`);
      }
      if (!response.ok || !Array.isArray(body.Data?.Files)) {
        throw new HubError(response.status >= 500 ? "network" : "protocol", `${url}: ${endpoint} answered ${response.status}${message}`);
      }
      const files = body.Data.Files.filter((f) => f.Type !== "tree").map((f) => {
        const path = f.Path ?? f.Name;
        if (typeof path !== "string") throw new HubError("protocol", `${url}: a file entry without Path`);
        return { path, size: typeof f.Size === "number" ? f.Size : undefined, sha256: typeof f.Sha256 === "string" && f.Sha256 ? f.Sha256.toLowerCase() : undefined };
      });
      checkCacheName(revision, `revision of modelscope:${repo}`);
      return { commit: revision, files };
    },

    async locate(repo, commit, file): Promise<FileLocation> {
      if (file.size === undefined || !file.sha256) {
        throw new HubError("protocol", `${file.path} in modelscope:${repo}@${commit}: the listing gives no Size/Sha256 for it`);
      }
      checkCacheName(file.sha256, `Sha256 of ${file.path} in modelscope:${repo}`);
      return {
        etag: file.sha256,
        size: file.size,
        checksum: { algorithm: "sha256", hex: file.sha256 },
        url: `${endpoint}/api/v1/models/${repo}/repo?Revision=${encodeURIComponent(commit)}&FilePath=${encodeURIComponent(file.path)}`,
      };
    },
  };
}
