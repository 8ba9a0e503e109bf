import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { until } from "./serve.js";
import { PROJECT_ROOT } from "./shared.js";

const NGINX = "/usr/sbin/nginx";
/** the tests that run deploy/nginx.conf need Debian's nginx */
export const skipNginx = existsSync(NGINX) ? false : `${NGINX} not found: this test needs Debian's nginx (apt-get install -y nginx; .ci/run installs it)`;

/** a port nothing listens on now (the OS's pick for port 0) */
export const freePort = (): Promise<number> => new Promise((r) => {
  const srv = createServer().listen(0, "127.0.0.1", () => {
    const { port } = srv.address() as { port: number };
    srv.close(() => r(port));
  });
});

/** a replica's counter or gauge from its /metrics (the sample of `name` with `labels`; 0 when there is none) */
export async function metric(url: string, name: string, labels = ""): Promise<number> {
  const text = await (await fetch(`${url}/metrics`)).text();
  const line = text.split("\n").find((l) => l.startsWith(`${name}${labels} `));
  return Number(line?.split(" ")[1] ?? 0);
}

/** Debian's nginx running deploy/nginx.conf, its two replicas' addresses replaced by `replicas`' (it listens on a free port), `edit` applied */
export async function startNginx(replicas: readonly [string, string], edit: (conf: string) => string = (c) => c): Promise<{ url: string; stop(): Promise<void> }> {
  const dir = mkdtempSync(join(tmpdir(), "tsllm-nginx-"));
  const port = await freePort();
  const conf = readFileSync(resolve(PROJECT_ROOT, "deploy/nginx.conf"), "utf8")
    .replaceAll("127.0.0.1:8081", new URL(replicas[0]).host).replaceAll("127.0.0.1:8082", new URL(replicas[1]).host)
    .replace("listen 127.0.0.1:8080", `listen 127.0.0.1:${port}`);
  writeFileSync(join(dir, "nginx.conf"), edit(conf));
  const nginx = spawn(NGINX, ["-p", dir, "-c", join(dir, "nginx.conf"), "-g", `daemon off; pid ${join(dir, "nginx.pid")}; error_log ${join(dir, "error.log")};`], { stdio: "ignore" });
  const exited = new Promise((r) => nginx.once("exit", r));
  const url = `http://127.0.0.1:${port}`;
  await until(async () => (await fetch(`${url}/health`).then(() => true, () => false)), "nginx to start");
  return {
    url,
    stop: async () => {
      nginx.kill("SIGTERM");
      await exited;
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
