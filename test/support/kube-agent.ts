/**
 * The bundled agent as a Kubernetes-mode e2e test runs it: a frozen machine (a captured /proc,
 * no Jupyter, code-server, GPU or logind) under its own roots, reporting every second to a
 * collector on localhost, with its VM's token. Shared by the Kubernetes-mode e2e tests.
 */
import { execFile } from "node:child_process";
import { cpSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { agentBundle, collectorBundle, freePort, repoRoot, start, type Proc } from "./process.js";

const run = promisify(execFile);

export const PROC_SNAPSHOT = path.join(repoRoot, "packages/guest-agent/test/fixtures/proc/snapshot-1");
export const PASSWD = path.join(repoRoot, "packages/guest-agent/test/fixtures/proc/passwd");

/** A fresh collector token key (`ws-collector keygen`) in a temp dir; `remove()` deletes it. */
export async function collectorTokenKey(): Promise<{ file: string; remove(): void }> {
  const dir = mkdtempSync(path.join(os.tmpdir(), "ws-kube-key-"));
  const file = path.join(dir, "token.key");
  const { stdout } = await run(process.execPath, [collectorBundle, "keygen"]);
  writeFileSync(file, stdout, { mode: 0o600 });
  return { file, remove: () => rmSync(dir, { recursive: true, force: true }) };
}

/**
 * A Kubernetes-mode collector's config file in `dir`: a fresh token key beside it, two free ports
 * on loopback, the Lease, and the caller's own keys (`grpc`: more keys of the grpc map, e.g.
 * `hellosPerSecond: 100`; `extra`: top-level YAML such as `policy:`).
 */
export async function kubeCollectorConfig(
  dir: string,
  options: { grpc?: string; extra?: string } = {},
): Promise<{ file: string; keyFile: string; keyText: string; grpcPort: number; httpPort: number }> {
  const keyFile = path.join(dir, "token.key");
  const { stdout: keyText } = await run(process.execPath, [collectorBundle, "keygen"]);
  writeFileSync(keyFile, keyText, { mode: 0o600 });
  const grpcPort = await freePort();
  const httpPort = await freePort();
  const file = path.join(dir, "collector.yaml");
  writeFileSync(
    file,
    [
      "mode: kubernetes",
      `grpc: { listen: "127.0.0.1:${grpcPort}"${options.grpc ? `, ${options.grpc}` : ""} }`,
      `http: { listen: "127.0.0.1:${httpPort}" }`,
      `tokenKeyFile: ${JSON.stringify(keyFile)}`,
      "kubernetes: { leaseNamespace: ws-system, leaseName: ws-collector }",
      options.extra ?? "",
    ].join("\n"),
  );
  return { file, keyFile, keyText: keyText.trim(), grpcPort, httpPort };
}

/** `ws-collector token`: the per-VM token cloud-init would hand the agent. */
export async function collectorToken(keyFile: string, namespace: string, name: string): Promise<string> {
  const { stdout } = await run(process.execPath, [
    collectorBundle,
    "token",
    "--key-file",
    keyFile,
    "--namespace",
    namespace,
    "--name",
    name,
  ]);
  return stdout.trim();
}

/**
 * A machine tree that never changes: a captured /proc, empty /sys, /dev/pts, /run and homes, a
 * passwd, and an agent.yaml with the sources this machine has none of turned off (not failing).
 */
export function layFrozenMachine(root: string): void {
  cpSync(PROC_SNAPSHOT, path.join(root, "proc"), { recursive: true });
  for (const dir of [
    "sys/devices/virtual/net",
    "sys/devices/virtual/block",
    "sys/block",
    "dev/pts",
    "run",
    "home",
    "etc",
    "state",
  ]) {
    mkdirSync(path.join(root, dir), { recursive: true });
  }
  cpSync(PASSWD, path.join(root, "etc/passwd"));
  writeFileSync(path.join(root, "agent.yaml"), "disabledSignals: [jupyter, code_server, gpu, inhibitors]\n");
}

export interface FrozenAgent {
  proc: Proc;
  root: string;
  socket: string;
  /** `ws-agent lease ARGS --json` as a user of the VM would run it. */
  lease(...args: string[]): Promise<{ code: number; json: unknown; stderr: string }>;
}

/** Lays out the agent's roots under `root` (a frozen machine) and starts the shipped agent. */
export function startFrozenAgent(options: {
  root: string;
  namespace: string;
  name: string;
  grpcPort: number;
  token: string;
  /** Called with the laid-out root before the agent starts (e.g. to give a user a terminal). */
  prepare?: (root: string) => void;
}): FrozenAgent {
  const { root } = options;
  layFrozenMachine(root);
  options.prepare?.(root);
  const socket = path.join(root, "agent.sock");
  const proc = start(
    agentBundle,
    [
      "run",
      "--config",
      path.join(root, "agent.yaml"),
      "--insecure",
      "--collector",
      `127.0.0.1:${options.grpcPort}`,
      "--namespace",
      options.namespace,
      "--name",
      options.name,
      "--report-interval",
      "1s",
      "--state-dir",
      path.join(root, "state"),
      "--socket",
      socket,
      "--proc-root",
      path.join(root, "proc"),
      "--sys-root",
      path.join(root, "sys"),
      "--dev-root",
      path.join(root, "dev"),
      "--run-root",
      path.join(root, "run"),
      "--home-root",
      path.join(root, "home"),
      "--etc-root",
      path.join(root, "etc"),
    ],
    { WS_AGENT_TOKEN: options.token },
  );
  return {
    proc,
    root,
    socket,
    lease: async (...args) => {
      try {
        const { stdout, stderr } = await run(process.execPath, [agentBundle, "lease", ...args, "--json"], {
          env: { ...process.env, WS_AGENT_SOCKET: socket },
        });
        return { code: 0, json: JSON.parse(stdout), stderr };
      } catch (error) {
        const failed = error as { code?: number; stdout?: string; stderr?: string };
        return {
          code: failed.code ?? -1,
          json: failed.stdout ? JSON.parse(failed.stdout) : null,
          stderr: failed.stderr ?? "",
        };
      }
    },
  };
}

/** The pid the frozen machine's sshd listener gets (not one of the captured snapshot's). */
const FROZEN_SSHD_PID = 4242;
const FROZEN_SSHD_INODE = 424242;

/**
 * The guest's sshd comes up on the frozen machine: a root process named sshd holding a LISTEN
 * socket on `port` (its /proc entry, its descriptor, the socket's /proc/net/tcp line), as the
 * kernel shows a real one. The agent reports the port (remote_sessions.sshd_listening_ports).
 */
export function laySshdListening(root: string, port = 22): void {
  const pid = path.join(root, "proc", String(FROZEN_SSHD_PID));
  rmSync(pid, { recursive: true, force: true });
  mkdirSync(path.join(pid, "fd"), { recursive: true });
  writeFileSync(path.join(pid, "comm"), "sshd\n");
  // The agent finds processes by their stat (one pass over /proc per sample): a daemon, parent 1.
  writeFileSync(
    path.join(pid, "stat"),
    `${FROZEN_SSHD_PID} (sshd) S 1 ${FROZEN_SSHD_PID} ${FROZEN_SSHD_PID} 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 500 0 0 18446744073709551615 0 0 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n`,
  );
  writeFileSync(path.join(pid, "cmdline"), "sshd: /usr/sbin/sshd -D [listener] 0 of 10-100 startups\0");
  writeFileSync(path.join(pid, "status"), "Name:\tsshd\nUid:\t0\t0\t0\t0\nGid:\t0\t0\t0\t0\n");
  symlinkSync(`socket:[${FROZEN_SSHD_INODE}]`, path.join(pid, "fd", "3"));
  const hexPort = port.toString(16).toUpperCase().padStart(4, "0");
  writeFileSync(
    path.join(root, "proc", "net", "tcp"),
    "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n" +
      `   0: 00000000:${hexPort} 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 ${FROZEN_SSHD_INODE} 1 0000000000000000 100 0 0 10 0\n`,
  );
}

/** The frozen machine without its sshd (a fresh boot before sshd started, or a shut-down guest). */
export function removeSshd(root: string): void {
  rmSync(path.join(root, "proc", String(FROZEN_SSHD_PID)), { recursive: true, force: true });
  rmSync(path.join(root, "proc", "net", "tcp"), { force: true });
}
