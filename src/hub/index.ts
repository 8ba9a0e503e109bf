/** Hugging Face Hub / ModelScope downloads into huggingface_hub's cache. */
export { resolveModelReference, type ResolveOptions } from "./resolve.js";
export { downloadModel, createSource, type DownloadOptions, type DownloadResult } from "./download.js";
export { parseHubReference, looksLikeHubReference, type HubReference, type HubSourceName } from "./reference.js";
export { defaultCacheDir, hfHubCacheDir, hfHome, modelScopeCacheDir, repoFolderName, hubOfflineFromEnv, RepoCache } from "./cache.js";
export { HubError, ModelNotFoundError, type HubErrorCode } from "./errors.js";
export { progressReporter, waitingLine, type DownloadProgress, type ProgressListener } from "./progress.js";
export { selectFiles, selectGguf, globToRegExp } from "./select.js";
export { hfTokenFromEnv } from "./hf.js";
export { listCachedRepos, removeCachedRepo, type CachedRepo, type CachedRevision, type RemoveOptions, type RemoveResult } from "./cache-admin.js";
