// The leader election's own thread (packages/collector/src/platform/kube/leader-thread.ts), started from the
// built bundle as the collector starts it, against the fake API server (the one fake allowed):
// it takes and renews the Lease while the main thread's event loop is held busy, the main thread
// stops acting as soon as another replica holds the Lease, and a stop hands the Lease back. The
// API server runs in a process of its own, so that holding this thread's event loop does not
// hold the server too.
import { fork, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LeaderThread, type LeaderThreadOptions } from "../../packages/collector/src/platform/kube/leader-thread.js";
import { bundleNodeScript, collectorBundle, eventually, repoRoot, requireBundles } from "../support/process.js";

const NS = "ws-system";

type Ask =
  | { cmd: "lease"; name: string }
  | { cmd: "renewals"; name: string; fromMs: number; toMs: number }
  | { cmd: "take"; name: string; holder: string };

/** The fake API server in a child process, asked over IPC. */
const SERVER = `
import { resourceByKind, startFakeKube } from ${JSON.stringify(path.join(repoRoot, "test/support/fake-kube/index.ts"))};
const LEASE = resourceByKind("Lease");
const kube = await startFakeKube();
const puts = [];
const seen = new Set();
setInterval(() => {
  for (const r of kube.requests) if (!seen.has(r) && r.method === "PUT") { seen.add(r); puts.push({ path: r.path, atMs: Date.now() }); }
}, 20);
process.on("message", (ask) => {
  const path = (name) => "/apis/coordination.k8s.io/v1/namespaces/${NS}/leases/" + name;
  if (ask.cmd === "lease") process.send(kube.store.get(LEASE, "${NS}", ask.name)?.spec ?? null);
  if (ask.cmd === "renewals")
    process.send(puts.filter((p) => p.path === path(ask.name) && p.atMs >= ask.fromMs && p.atMs <= ask.toMs).length);
  if (ask.cmd === "take") {
    const lease = kube.store.get(LEASE, "${NS}", ask.name);
    kube.store.update(LEASE, { ...lease, metadata: { ...lease.metadata, resourceVersion: "" },
      spec: { ...lease.spec, holderIdentity: ask.holder, renewTime: new Date().toISOString() } });
    process.send(true);
  }
});
process.send({ kubeconfigPath: kube.kubeconfigPath });
`;

let dir: string;
let server: ChildProcess;
let kubeconfigPath: string;
const answers: Array<(value: unknown) => void> = [];

function ask<T>(question: Ask): Promise<T> {
  return new Promise<T>((resolve) => {
    answers.push((value) => resolve(value as T));
    server.send(question);
  });
}

beforeAll(async () => {
  requireBundles();
  dir = mkdtempSync(path.join(os.tmpdir(), "ws27-leader-thread-"));
  writeFileSync(path.join(dir, "server.ts"), SERVER);
  await bundleNodeScript(path.join(dir, "server.ts"), path.join(dir, "server.mjs"));
  server = fork(path.join(dir, "server.mjs"), [], { stdio: ["ignore", "ignore", "inherit", "ipc"] });
  const ready = new Promise<{ kubeconfigPath: string }>((resolve) => answers.push((v) => resolve(v as never)));
  server.on("message", (message) => answers.shift()?.(message));
  ({ kubeconfigPath } = await ready);
}, 60_000);

afterAll(() => {
  server?.kill("SIGTERM");
  if (dir) rmSync(dir, { recursive: true, force: true });
});

function thread(leaseName: string, overrides: Partial<LeaderThreadOptions> = {}) {
  const log: string[] = [];
  const requests: string[] = [];
  const elector = new LeaderThread({
    source: { kubeconfigPath },
    settings: {
      namespace: NS,
      leaseName,
      identity: "replica-a",
      leaseDurationMs: 3_000,
      renewDeadlineMs: 2_000,
      renewIntervalMs: 250,
      retryPeriodMs: 250,
    },
    script: collectorBundle,
    nowMs: Date.now,
    onStartedLeading: () => log.push("started"),
    onStoppedLeading: (reason) => log.push(`stopped: ${reason}`),
    onError: (message) => log.push(`error: ${message}`),
    onRequest: (method, status) => requests.push(`${method} ${status}`),
    ...overrides,
  });
  return { elector, log, requests };
}

const leaseSpec = (name: string) => ask<Record<string, unknown> | null>({ cmd: "lease", name });

/** Holds this thread's event loop, as a reconnect burst does. */
function holdEventLoop(ms: number): void {
  const until = Date.now() + ms;
  while (Date.now() < until) {
    // busy
  }
}

describe("leader election on its own thread", () => {
  it("takes the Lease and keeps renewing it while the main event loop is held", async () => {
    const { elector, log, requests } = thread("held-loop");
    elector.start();
    try {
      await eventually(() => elector.isLeader(), 30_000, "leadership");
      expect((await leaseSpec("held-loop"))?.["holderIdentity"]).toBe("replica-a");
      expect(log).toEqual(["started"]);
      // Twice the renew deadline: on the main thread the elector could not have renewed at all.
      const fromMs = Date.now();
      holdEventLoop(4_000);
      const toMs = Date.now();
      // Still leading on the main thread's own reading: a renewal within the last renew deadline.
      expect(elector.isLeader()).toBe(true);
      expect(await ask<number>({ cmd: "renewals", name: "held-loop", fromMs, toMs })).toBeGreaterThan(0);
      await eventually(
        () => requests.some((r) => r.startsWith("PUT 200")),
        10_000,
        "the renewals counted on the main thread",
      );
      expect(log).toEqual(["started"]);
    } finally {
      await elector.stop({ release: true });
    }
    // Released: another replica may take it at once.
    const released = await leaseSpec("held-loop");
    expect(released?.["holderIdentity"]).toBeUndefined();
    expect(released?.["leaseDurationSeconds"]).toBe(1);
    expect(elector.isLeader()).toBe(false);
    expect(log).toEqual(["started", "stopped: elector stopped"]);
  });

  it("stops acting when another replica holds the Lease", async () => {
    const { elector, log } = thread("taken-over");
    elector.start();
    try {
      await eventually(() => elector.isLeader(), 30_000, "leadership");
      await ask({ cmd: "take", name: "taken-over", holder: "replica-b" });
      await eventually(() => !elector.isLeader(), 10_000, "the step-down", 20);
      await eventually(() => log.some((line) => line.includes("held by replica-b")), 10_000, "the stopped callback");
    } finally {
      await elector.stop();
    }
  });

  it("does not lead when its thread cannot start, and says why", async () => {
    const { elector, log } = thread("no-thread", { script: "/nonexistent/ws-collector.cjs" });
    elector.start();
    try {
      await eventually(() => log.some((line) => line.startsWith("error: ")), 10_000, "the error");
      expect(elector.isLeader()).toBe(false);
      expect(await leaseSpec("no-thread")).toBeNull();
    } finally {
      await elector.stop();
    }
  });
});
