/**
 * A fake Hugging Face Hub (and ModelScope) on 127.0.0.1 with real HTTP semantics, for the hub
 * tests: model info with siblings, HEAD/GET resolve with X-Repo-Commit / ETag / X-Linked-Etag /
 * X-Linked-Size / X-Error-Code, LFS files redirected to a second "CDN" server, byte ranges, and
 * injectable faults (a connection cut mid-file, one stalled or held at its middle, corrupted bytes
 * of the right size, a file cut short with a Content-Length to match).
 */
import { createHash } from "node:crypto";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

export interface FakeFile {
  readonly path: string;
  readonly content: Buffer;
  /** stored in LFS: served from the CDN, named by sha256 (default: names ending .gguf/.safetensors/.bin) */
  readonly lfs?: boolean;
  /** the size the hub announces (X-Linked-Size) instead of the real one */
  readonly announcedSize?: number;
}

export interface FakeRepo {
  readonly repo: string;
  readonly commit: string;
  /** branch and tag names pointing at `commit` (default ["main"]) */
  readonly refs?: readonly string[];
  readonly files: readonly FakeFile[];
  /** downloads need this token */
  readonly gatedToken?: string;
}

export interface RecordedRequest {
  readonly server: "hub" | "cdn";
  readonly method: string;
  readonly url: string;
  readonly headers: IncomingMessage["headers"];
}

export const sha256 = (b: Buffer) => createHash("sha256").update(b).digest("hex");
/** a git blob id, the ETag the Hub gives non-LFS files */
export const gitBlobSha1 = (b: Buffer) => createHash("sha1").update(`blob ${b.length}\0`).update(b).digest("hex");
export const isLfs = (f: FakeFile) => f.lfs ?? /\.(gguf|safetensors|bin)$/.test(f.path);
/** the name huggingface_hub gives the blob of a file */
export const blobName = (f: FakeFile) => (isLfs(f) ? sha256(f.content) : gitBlobSha1(f.content));

export class FakeHub {
  readonly repos = new Map<string, FakeRepo>();
  readonly requests: RecordedRequest[] = [];
  /** body bytes written for GETs of file contents (hub and CDN), faults included */
  bytesServed = 0;
  /** blobs (sha256) whose next full GET is cut after half the bytes; the count is how many times */
  readonly dropMidway = new Map<string, number>();
  /** blobs (sha256) whose next full GET stops sending after half the bytes but keeps the connection open */
  readonly stallMidway = new Map<string, number>();
  /** blobs whose next GET from before the middle sends up to the middle, then the rest only on releaseHeld() */
  readonly holdMidway = new Map<string, number>();
  private readonly held: (() => void)[] = [];
  /** blobs served with one byte flipped */
  readonly corrupt = new Set<string>();
  /** blobs served (HEAD and GET alike, Content-Length included) without their last 10 bytes, as a broken cache in front of the hub would */
  readonly truncate = new Set<string>();
  /** extra siblings the listing names that the hub does not serve (traversal names) */
  readonly extraSiblings = new Map<string, string[]>();
  /** renamed repos: old name -> new name, answered with a relative 307 as the Hub does */
  readonly renamed = new Map<string, string>();
  /** tokens the hub refuses on every request (expired or revoked), with the Hub's 401 */
  readonly invalidTokens = new Set<string>();
  /** byte servers answer every GET with the whole file (200), as a server without range support does */
  ignoreRange = false;
  /** the next N hub requests answer 503 */
  unavailable = 0;
  /** the next N hub requests are never answered (the connection stays open) */
  hang = 0;
  /** the next N hub requests answer 429 with this Retry-After (seconds); requests before it has passed get 429 again */
  rateLimited = { count: 0, retryAfterS: 1, until: 0 };
  hubUrl = "";
  cdnUrl = "";
  private hub?: Server;
  private cdn?: Server;

  add(repo: FakeRepo): this {
    this.repos.set(repo.repo, repo);
    return this;
  }

  async start(): Promise<this> {
    const listen = (s: Server) => new Promise<string>((r) => s.listen(0, "127.0.0.1", () => r(`http://127.0.0.1:${(s.address() as AddressInfo).port}`)));
    this.hub = createServer((req, res) => this.onHub(req, res));
    this.cdn = createServer((req, res) => this.onCdn(req, res));
    this.hubUrl = await listen(this.hub);
    this.cdnUrl = await listen(this.cdn);
    return this;
  }

  async close(): Promise<void> {
    for (const s of [this.hub, this.cdn]) {
      if (!s) continue;
      s.closeAllConnections();
      await new Promise((r) => s.close(r));
    }
  }

  /** sends the rest of every response holdMidway held */
  releaseHeld(): void {
    for (const send of this.held.splice(0)) send();
  }

  count(server?: "hub" | "cdn", method?: string): number {
    return this.requests.filter((r) => (!server || r.server === server) && (!method || r.method === method)).length;
  }

  private record(server: "hub" | "cdn", req: IncomingMessage): void {
    this.requests.push({ server, method: req.method ?? "", url: req.url ?? "", headers: req.headers });
  }

  private findBlob(name: string): Buffer | undefined {
    for (const r of this.repos.values()) for (const f of r.files) if (sha256(f.content) === name) return f.content;
    return undefined;
  }

  private onHub(req: IncomingMessage, res: ServerResponse): void {
    this.record("hub", req);
    if (this.hang > 0) {
      this.hang--;
      return;
    }
    if (this.rateLimited.count > 0 || Date.now() < this.rateLimited.until) {
      if (Date.now() >= this.rateLimited.until) {
        this.rateLimited.count--;
        this.rateLimited.until = Date.now() + this.rateLimited.retryAfterS * 1000;
      }
      return void res.writeHead(429, { "retry-after": String(this.rateLimited.retryAfterS) }).end("slow down");
    }
    if (this.unavailable > 0) {
      this.unavailable--;
      return void res.writeHead(503).end("busy");
    }
    const url = new URL(req.url ?? "/", this.hubUrl);
    for (const [from, to] of this.renamed) {
      for (const prefix of [`/${from}/`, `/api/models/${from}/`]) {
        if (url.pathname.startsWith(prefix)) {
          const moved = prefix.replace(from, to) + url.pathname.slice(prefix.length) + url.search;
          return void res.writeHead(307, { location: moved }).end();
        }
      }
    }
    const path = decodeURIComponent(url.pathname);
    let m: RegExpExecArray | null;
    if (this.invalidTokens.has(req.headers.authorization?.replace(/^Bearer /, "") ?? "")) {
      return void res.writeHead(401, { "X-Error-Message": "Invalid credentials in Authorization header", "content-type": "application/json" }).end('{"error":"Invalid credentials in Authorization header"}');
    }
    const error = (status: number, code?: string, body?: unknown) => {
      if (code) res.setHeader("X-Error-Code", code);
      res.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify(body ?? { error: code }));
    };
    // ModelScope
    if ((m = /^\/api\/v1\/models\/([^/]+\/[^/]+)\/repo\/files$/.exec(path))) {
      const repo = this.repos.get(m[1]!);
      const rev = url.searchParams.get("Revision") ?? "master";
      if (!repo || !(repo.refs ?? ["master"]).includes(rev)) return error(404, undefined, { Code: 10010205, Message: `model ${m[1]} not found` });
      const Files = repo.files.map((f) => ({ Name: f.path.split("/").pop(), Path: f.path, Type: "blob", Size: f.content.length, Sha256: sha256(f.content), Revision: repo.commit }));
      return void res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ Code: 200, Data: { Files }, Success: true }));
    }
    if ((m = /^\/api\/v1\/models\/([^/]+\/[^/]+)\/repo$/.exec(path))) {
      const repo = this.repos.get(m[1]!);
      const file = repo?.files.find((f) => f.path === url.searchParams.get("FilePath"));
      if (!file) return error(404, undefined, { Code: 10010205, Message: "file not found" });
      return this.serveBytes(req, res, sha256(file.content), file.content, {});
    }
    // Hugging Face
    if ((m = /^\/api\/models\/([^/]+\/[^/]+)\/revision\/(.+)$/.exec(path))) {
      const repo = this.repos.get(m[1]!);
      if (!repo) return error(401, "RepoNotFound");
      if (!this.hasRevision(repo, m[2]!)) return error(404, "RevisionNotFound");
      const siblings = [...repo.files.map((f) => ({ rfilename: f.path })), ...(this.extraSiblings.get(repo.repo) ?? []).map((rfilename) => ({ rfilename }))];
      return void res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ id: repo.repo, sha: repo.commit, siblings }));
    }
    if ((m = /^\/([^/]+\/[^/]+)\/resolve\/([^/]+)\/(.+)$/.exec(url.pathname))) {
      const repo = this.repos.get(decodeURIComponent(m[1]!));
      if (!repo) return error(401, "RepoNotFound");
      if (!this.hasRevision(repo, decodeURIComponent(m[2]!))) return error(404, "RevisionNotFound");
      if (repo.gatedToken && req.headers.authorization !== `Bearer ${repo.gatedToken}`) {
        // as the Hub answers: 401 without a token, 403 for a token without access
        const name = repo.repo;
        res.setHeader("X-Error-Message", req.headers.authorization
          ? `Access to model ${name} is restricted and you are not in the authorized list. Visit ${this.hubUrl}/${name} to ask for access.`
          : `Access to model ${name} is restricted. You must have access to it and be authenticated to access it. Please log in.`);
        return error(req.headers.authorization ? 403 : 401, "GatedRepo");
      }
      const file = repo.files.find((f) => f.path === decodeURIComponent(m![3]!));
      if (!file) return error(404, "EntryNotFound");
      res.setHeader("X-Repo-Commit", repo.commit);
      if (isLfs(file)) {
        const sha = sha256(file.content);
        res.writeHead(302, {
          location: `${this.cdnUrl}/blobs/${sha}?X-Amz-Signature=abc`,
          "x-linked-etag": `"${sha}"`,
          "x-linked-size": String(file.announcedSize ?? file.content.length),
          etag: `"${gitBlobSha1(Buffer.from(`version https://git-lfs.github.com/spec/v1\noid sha256:${sha}\n`))}"`,
          "content-length": "0",
        });
        return void res.end();
      }
      return this.serveBytes(req, res, gitBlobSha1(file.content), file.content, { etag: `"${gitBlobSha1(file.content)}"` });
    }
    error(404, undefined, { error: `no route ${path}` });
  }

  private hasRevision(repo: FakeRepo, rev: string): boolean {
    return rev === repo.commit || (repo.refs ?? ["main"]).includes(rev);
  }

  private onCdn(req: IncomingMessage, res: ServerResponse): void {
    this.record("cdn", req);
    const url = new URL(req.url ?? "/", this.cdnUrl);
    const name = /^\/blobs\/([0-9a-f]{64})$/.exec(url.pathname)?.[1];
    const content = name ? this.findBlob(name) : undefined;
    if (!name || !content) return void res.writeHead(404).end("no such blob");
    this.serveBytes(req, res, name, content, { etag: `"${name}"` });
  }

  /** 200 or 206 for `Range: bytes=a-[b]`, 416 beyond the end; faults applied to GETs */
  private serveBytes(req: IncomingMessage, res: ServerResponse, name: string, full: Buffer, headers: Record<string, string>): void {
    let content = full;
    if (this.truncate.has(name)) content = full.subarray(0, Math.max(0, full.length - 10));
    if (this.corrupt.has(name)) {
      content = Buffer.from(full);
      content[content.length >> 1]! ^= 0xff;
    }
    let start = 0;
    let end = content.length - 1;
    const range = this.ignoreRange ? null : /^bytes=(\d+)-(\d*)$/.exec(req.headers.range ?? "");
    if (range) {
      start = Number(range[1]);
      if (range[2]) end = Math.min(end, Number(range[2]));
      if (start >= content.length) return void res.writeHead(416, { "content-range": `bytes */${content.length}` }).end();
      headers = { ...headers, "content-range": `bytes ${start}-${end}/${content.length}` };
    }
    res.writeHead(range ? 206 : 200, { ...headers, "content-length": String(end - start + 1), "accept-ranges": "bytes", "content-type": "application/octet-stream" });
    if (req.method === "HEAD") return void res.end();
    const stalls = this.stallMidway.get(name) ?? 0;
    // (a download resuming from a partial file up to the middle stalls there too, sent nothing more)
    const middle = content.length >> 1;
    if (stalls > 0 && start <= middle) {
      this.stallMidway.set(name, stalls - 1);
      this.bytesServed += middle - start;
      res.write(content.subarray(start, middle)); // and nothing more, the socket left open
      return;
    }
    const holds = this.holdMidway.get(name) ?? 0;
    if (holds > 0 && start <= middle) {
      this.holdMidway.set(name, holds - 1);
      this.bytesServed += end - start + 1;
      res.write(content.subarray(start, middle));
      this.held.push(() => res.end(content.subarray(middle, end + 1)));
      return;
    }
    const drops = this.dropMidway.get(name) ?? 0;
    if (drops > 0 && start === 0) {
      this.dropMidway.set(name, drops - 1);
      this.bytesServed += content.length >> 1;
      res.write(content.subarray(0, content.length >> 1), () => res.destroy());
      return;
    }
    this.bytesServed += end - start + 1;
    res.end(content.subarray(start, end + 1));
  }
}

export function randomBytes(n: number, seed: number): Buffer {
  const b = Buffer.alloc(n);
  let x = seed >>> 0 || 1;
  for (let i = 0; i < n; i++) {
    x ^= x << 13; x >>>= 0; x ^= x >>> 17; x ^= x << 5; x >>>= 0;
    b[i] = x & 0xff;
  }
  return b;
}
