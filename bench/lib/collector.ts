// The built collector (packages/collector/dist/ws-collector.cjs), started in
// standalone mode with a fresh key, for benchmarks to report to.
import { freePort } from "../../test/support/process.js";
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { generateKey, tokenFor } from "../../packages/collector/src/links/agent-token.js";
import { launch, pollFor, type Launched } from "./launch.js";
import { collectorBundle } from "./paths.js";

export interface CollectorOptions {
  reportInterval: string;
  tick?: string;
  /** reportHeartbeat (a duration, or off: every sample); unset: the collector's default, reports on change. */
  reportHeartbeat?: string;
  /** The `policy:` section, as YAML lines indented by two spaces under it. */
  policyYaml?: string;
  stopCommand?: string[];
  /** taskset CPU list for the collector. */
  cpus?: string;
  /** Extra Node flags (e.g. --max-old-space-size). */
  nodeFlags?: string[];
  /** Kubernetes mode against this kubeconfig (the fake API server's); standalone without it. */
  kubeconfig?: string;
  /** Open-file limit for the collector (see launch's openFiles). */
  openFiles?: number;
  /** Let heapSnapshot() ask for a V8 heap snapshot (SIGUSR2, written into the collector's directory). */
  heapSnapshots?: boolean;
  /** Another ws-collector.cjs to run (a baseline commit's, lib/baseline.ts); default this tree's. */
  bundle?: string;
}

export interface RunningCollector {
  proc: Launched;
  pid: number;
  dir: string;
  grpcAddress: string;
  httpUrl: string;
  tokenFor(namespace: string, name: string): string;
  /** GET /metrics: the body, its size and how long the whole answer took. */
  scrape(): Promise<{ body: string; bytes: number; seconds: number }>;
  /** Writes a heap snapshot (with heapSnapshots on) and resolves with its path once complete. */
  heapSnapshot(): Promise<string>;
  stop(): Promise<void>;
}

export { freePort };

export async function startCollector(options: CollectorOptions): Promise<RunningCollector> {
  const dir = mkdtempSync(path.join(os.tmpdir(), "ws-bench-collector-"));
  const keyText = generateKey();
  const key = Buffer.from(keyText, "utf8");
  const keyFile = path.join(dir, "token.key");
  writeFileSync(keyFile, `${keyText}\n`, { mode: 0o600 });
  const grpcPort = await freePort();
  const httpPort = await freePort();
  const configFile = path.join(dir, "collector.yaml");
  writeFileSync(
    configFile,
    [
      `mode: ${options.kubeconfig ? "kubernetes" : "standalone"}`,
      // Every simulated agent connects from 127.0.0.1 (a real fleet: one address per VM, or a NAT),
      // so the per-source share of unauthenticated connections must not pace a reconnect burst here.
      `grpc: { listen: "127.0.0.1:${grpcPort}", maxPendingConnectionsPerSource: 1048576 }`,
      `http: { listen: "127.0.0.1:${httpPort}" }`,
      `tokenKeyFile: ${JSON.stringify(keyFile)}`,
      `reportInterval: ${options.reportInterval}`,
      `tick: ${options.tick ?? "5s"}`,
      ...(options.reportHeartbeat ? [`reportHeartbeat: ${options.reportHeartbeat}`] : []),
      ...(options.kubeconfig ? ["kubernetes: { leaseNamespace: ws-system, leaseName: ws-collector }"] : []),
      ...(options.stopCommand ? ["standalone:", `  stopCommand: ${JSON.stringify(options.stopCommand)}`] : []),
      ...(options.policyYaml ? ["policy:", options.policyYaml] : []),
      "",
    ].join("\n"),
  );
  const proc = launch(
    process.execPath,
    [
      ...(options.nodeFlags ?? []),
      ...(options.heapSnapshots ? ["--heapsnapshot-signal=SIGUSR2", `--diagnostic-dir=${dir}`] : []),
      options.bundle ?? collectorBundle,
      "serve",
      "--config",
      configFile,
      ...(options.kubeconfig ? ["--kubeconfig", options.kubeconfig] : []),
    ],
    // A log line per agent and per transition: thousands of VMs need room.
    {
      ...(options.cpus !== undefined ? { cpus: options.cpus } : {}),
      ...(options.openFiles !== undefined ? { openFiles: options.openFiles } : {}),
      env: { POD_NAME: "ws-collector-bench" },
      keepBytes: 64 * 1024 * 1024,
    },
  );
  const httpUrl = `http://127.0.0.1:${httpPort}`;
  try {
    await proc.waitFor(/collector serving/, 120_000);
    // Kubernetes mode: agents are accepted by the leader only.
    if (options.kubeconfig)
      await pollFor(
        "the collector to lead (/readyz 200)",
        async () => (await fetch(`${httpUrl}/readyz`)).status === 200,
        120_000,
        250,
      );
  } catch (error) {
    await proc.stop("SIGKILL");
    rmSync(dir, { recursive: true, force: true });
    throw error;
  }
  return {
    proc,
    pid: proc.pid,
    dir,
    grpcAddress: `127.0.0.1:${grpcPort}`,
    httpUrl,
    tokenFor: (namespace, name) => tokenFor(key, namespace, name),
    async scrape() {
      const began = performance.now();
      const response = await fetch(`${httpUrl}/metrics`);
      const body = await response.text();
      const seconds = (performance.now() - began) / 1000;
      if (response.status !== 200) throw new Error(`GET /metrics answered ${response.status}: ${body.slice(0, 200)}`);
      return { body, bytes: Buffer.byteLength(body), seconds };
    },
    async heapSnapshot() {
      const before = new Set(readdirSync(dir));
      process.kill(proc.pid, "SIGUSR2");
      // V8 writes the file on the main thread while the collector stands still: once the file is
      // there, an answer to /healthz means the writing is over (a size that held for a second did
      // not, on a loaded machine: the file was read half-written).
      const file = await pollFor(
        "the heap snapshot",
        () => readdirSync(dir).find((name) => name.endsWith(".heapsnapshot") && !before.has(name)),
        300_000,
        500,
      );
      await pollFor(
        "the collector to answer after its heap snapshot",
        async () => (await fetch(`${httpUrl}/healthz`).catch(() => undefined))?.ok,
        300_000,
        1_000,
      );
      return path.join(dir, file);
    },
    async stop() {
      await proc.stop("SIGTERM", 10_000);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
