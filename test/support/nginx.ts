// Debian's nginx as a real reverse proxy in front of the collector (the site's auth proxy or
// ingress stand-in). Runs in the foreground as one process under a private prefix; the test gives
// the `http { … }` body (server blocks, maps), this adds what nginx needs to run unprivileged.
import { spawn, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import { eventually } from "./process.js";

export interface Nginx {
  url: string;
  port: number;
  output(): string;
  stop(): Promise<void>;
}

const NGINX = "/usr/sbin/nginx";

export function requireNginx(): void {
  if (!existsSync(NGINX))
    throw new Error("nginx is missing: install it with 'apt-get install nginx' (scripts/install-test-deps.sh does)");
}

/** `htpasswd` lines for basic auth (apr1 hashes from openssl, which the tests already need). */
export function htpasswd(users: Record<string, string>): string {
  return Object.entries(users)
    .map(([user, password]) => {
      const hashed = spawnSync("openssl", ["passwd", "-apr1", password], { encoding: "utf8" });
      if (hashed.status !== 0) throw new Error(`openssl passwd failed: ${hashed.stderr}`);
      return `${user}:${hashed.stdout.trim()}\n`;
    })
    .join("");
}

export async function startNginx(dir: string, port: number, httpBody: string): Promise<Nginx> {
  requireNginx();
  const prefix = path.join(dir, "nginx");
  for (const sub of ["logs", "tmp"]) mkdirSync(path.join(prefix, sub), { recursive: true });
  const config = path.join(prefix, "nginx.conf");
  writeFileSync(
    config,
    `daemon off;
master_process off;
pid ${prefix}/nginx.pid;
error_log stderr warn;
events { worker_connections 256; }
http {
  access_log off;
  client_body_temp_path ${prefix}/tmp/body;
  proxy_temp_path ${prefix}/tmp/proxy;
  fastcgi_temp_path ${prefix}/tmp/fastcgi;
  uwsgi_temp_path ${prefix}/tmp/uwsgi;
  scgi_temp_path ${prefix}/tmp/scgi;
${httpBody}
}
`,
  );
  const check = spawnSync(NGINX, ["-t", "-p", prefix, "-c", config], { encoding: "utf8" });
  if (check.status !== 0) throw new Error(`nginx -t refused the configuration:\n${check.stderr}`);
  const child = spawn(NGINX, ["-p", prefix, "-c", config], { stdio: ["ignore", "pipe", "pipe"] });
  let text = "";
  child.stdout.on("data", (chunk: Buffer) => void (text += chunk.toString()));
  child.stderr.on("data", (chunk: Buffer) => void (text += chunk.toString()));
  const url = `http://127.0.0.1:${port}`;
  await eventually(
    async () => {
      if (child.exitCode !== null) throw new Error(`nginx exited ${child.exitCode}: ${text}`);
      return (await fetch(url).catch(() => undefined)) !== undefined;
    },
    15_000,
    "nginx listening",
  );
  return {
    url,
    port,
    output: () => text,
    stop: () =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null) return resolve();
        child.once("exit", () => resolve());
        child.kill("SIGQUIT");
        setTimeout(() => child.kill("SIGKILL"), 5_000).unref();
      }),
  };
}
