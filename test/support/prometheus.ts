// A real Prometheus (Debian package `prometheus`) on loopback, with a generated
// config and a throw-away storage directory; and promtool.
import { spawn, spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import https from "node:https";
import os from "node:os";
import path from "node:path";
import { eventually, freePort } from "./process.js";

const MISSING = "install the Debian package prometheus (scripts/install-test-deps.sh does)";

function binary(name: "prometheus" | "promtool"): string {
  for (const dir of (process.env.PATH ?? "/usr/bin").split(":")) {
    const candidate = path.join(dir, name);
    if (existsSync(candidate)) return candidate;
  }
  throw new Error(`${name} is not installed: ${MISSING}`);
}

export function promtool(args: string[], cwd?: string, input?: string): { status: number | null; output: string } {
  const result = spawnSync(binary("promtool"), args, {
    encoding: "utf8",
    ...(cwd ? { cwd } : {}),
    ...(input !== undefined ? { input } : {}),
  });
  if (result.error) throw new Error(`promtool failed to run (${result.error.message}): ${MISSING}`);
  return { status: result.status, output: `${result.stdout}${result.stderr}` };
}

export interface PromSample {
  metric: Record<string, string>;
  value: [number, string];
}

export interface RunningPrometheus {
  url: string;
  /** Everything Prometheus printed so far. */
  output(): string;
  /** Instant query; throws on an API error. */
  query(expr: string): Promise<PromSample[]>;
  /** Polls an instant query until `accept` returns something truthy for its result. */
  until<T>(expr: string, accept: (samples: PromSample[]) => T | undefined | false, timeoutMs?: number): Promise<T>;
  stop(): Promise<void>;
}

export interface PrometheusOptions {
  /** host:port targets scraped at /metrics. */
  targets: string[];
  scrapeIntervalSeconds?: number;
  ruleFiles?: string[];
  /** More command-line flags (e.g. --query.max-samples=1 for a Prometheus that answers every query with an error). */
  extraArgs?: string[];
  /** Serve the API over HTTPS with this PEM certificate and key (Prometheus' web config); query() is then unavailable. */
  tls?: { certFile: string; keyFile: string };
}

export async function startPrometheus(options: PrometheusOptions): Promise<RunningPrometheus> {
  const exe = binary("prometheus");
  const dir = mkdtempSync(path.join(os.tmpdir(), "ws-prometheus-"));
  const port = await freePort();
  const interval = `${options.scrapeIntervalSeconds ?? 1}s`;
  const config = {
    global: { scrape_interval: interval, evaluation_interval: interval, scrape_timeout: interval },
    ...(options.ruleFiles ? { rule_files: options.ruleFiles } : {}),
    scrape_configs: [{ job_name: "ws-collector", honor_labels: true, static_configs: [{ targets: options.targets }] }],
  };
  const configFile = path.join(dir, "prometheus.yml");
  writeFileSync(configFile, JSON.stringify(config, null, 2));
  const webConfig = path.join(dir, "web.yml");
  if (options.tls)
    writeFileSync(
      webConfig,
      JSON.stringify({ tls_server_config: { cert_file: options.tls.certFile, key_file: options.tls.keyFile } }),
    );
  const child = spawn(
    exe,
    [
      `--config.file=${configFile}`,
      `--storage.tsdb.path=${path.join(dir, "data")}`,
      `--web.listen-address=127.0.0.1:${port}`,
      "--storage.tsdb.retention.time=1d",
      "--log.level=warn",
      ...(options.extraArgs ?? []),
      ...(options.tls ? [`--web.config.file=${webConfig}`] : []),
    ],
    { stdio: ["ignore", "pipe", "pipe"] },
  );
  let printed = "";
  child.stdout.on("data", (chunk: Buffer) => (printed += chunk.toString()));
  child.stderr.on("data", (chunk: Buffer) => (printed += chunk.toString()));
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const url = `${options.tls ? "https" : "http"}://127.0.0.1:${port}`;

  const query = async (expr: string): Promise<PromSample[]> => {
    if (options.tls) throw new Error("query() speaks plain HTTP; this Prometheus serves HTTPS");
    const response = await fetch(`${url}/api/v1/query?${new URLSearchParams({ query: expr })}`);
    const body = (await response.json()) as { status: string; error?: string; data: { result: PromSample[] } };
    if (body.status !== "success") throw new Error(`query ${expr}: ${body.error}`);
    return body.data.result;
  };
  const running: RunningPrometheus = {
    url,
    output: () => printed,
    query,
    until: (expr, accept, timeoutMs = 60_000) =>
      eventually(async () => accept(await query(expr)), timeoutMs, `Prometheus: ${expr}`),
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM");
      const killer = setTimeout(() => child.kill("SIGKILL"), 10_000);
      await exited;
      clearTimeout(killer);
      rmSync(dir, { recursive: true, force: true });
    },
  };
  try {
    await eventually(
      async () => {
        if (child.exitCode !== null)
          throw new Error(`Prometheus exited with ${child.exitCode}:\n${printed.slice(-2000)}`);
        return options.tls ? await readyOverTls(url, options.tls.certFile) : (await fetch(`${url}/-/ready`)).ok;
      },
      60_000,
      `Prometheus ready on ${url}`,
    );
  } catch (error) {
    await running.stop();
    throw error;
  }
  return running;
}

/** /-/ready of a Prometheus serving HTTPS with a self-signed certificate (trusted as its own CA). */
function readyOverTls(url: string, certFile: string): Promise<boolean> {
  return new Promise((resolve) => {
    const request = https.get(`${url}/-/ready`, { ca: readFileSync(certFile) }, (response) => {
      response.resume();
      resolve(response.statusCode === 200);
    });
    request.on("error", () => resolve(false));
  });
}

/** A self-signed certificate for 127.0.0.1 (openssl, from the Debian package), in `dir`. */
export function selfSignedCertificate(dir: string): { certFile: string; keyFile: string } {
  const certFile = path.join(dir, "tls.crt");
  const keyFile = path.join(dir, "tls.key");
  const result = spawnSync(
    "openssl",
    [
      "req",
      "-x509",
      "-newkey",
      "rsa:2048",
      "-nodes",
      "-days",
      "1",
      "-keyout",
      keyFile,
      "-out",
      certFile,
      "-subj",
      "/CN=127.0.0.1",
      "-addext",
      "subjectAltName=IP:127.0.0.1",
    ],
    { encoding: "utf8" },
  );
  if (result.error || result.status !== 0)
    throw new Error(`openssl failed (${result.error?.message ?? result.stderr}): install the Debian package openssl`);
  return { certFile, keyFile };
}
