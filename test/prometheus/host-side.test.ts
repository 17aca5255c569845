// Host-side evidence against a real Prometheus: it scrapes a stand-in for KubeVirt's metric
// endpoints (test/support/virt-handler.ts, KubeVirt's names and labels, values the test drives)
// and the collector's host-side source queries it through the HTTP API, as it does live.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { HostReading } from "../../packages/collector/src/engine/types.js";
import { prometheusClient } from "../../packages/collector/src/loop/hostside/prometheus.js";
import { hostQueries, readingFor, type HostBatch } from "../../packages/collector/src/loop/hostside/queries.js";
import { HostSource } from "../../packages/collector/src/loop/hostside/source.js";
import { eventually } from "../support/process.js";
import { selfSignedCertificate, startPrometheus, type RunningPrometheus } from "../support/prometheus.js";
import { startVirtHandler, type VirtHandlerStandIn } from "../support/virt-handler.js";

const WINDOW_S = 5;
let kubevirt: VirtHandlerStandIn;
let prometheus: RunningPrometheus;

function source(
  url: string,
  options: { timeoutMs?: number; maxResponseBytes?: number; caFile?: string; bearerTokenFile?: string } = {},
): HostSource {
  return new HostSource({
    client: prometheusClient({
      url,
      timeoutMs: options.timeoutMs ?? 5000,
      maxResponseBytes: options.maxResponseBytes ?? 1024 * 1024,
      ...(options.caFile ? { caFile: options.caFile } : {}),
      ...(options.bearerTokenFile ? { bearerTokenFile: options.bearerTokenFile } : {}),
    }),
    sink: { hostBatch: () => {} },
    log: () => {},
    nowMs: Date.now,
    intervalSeconds: 2,
    windowSeconds: WINDOW_S,
  });
}

/** Rounds until the reading of `vm` passes `accept` (Prometheus needs a few scrapes for a rate). */
async function readingUntil(vm: string, accept: (reading: HostReading) => boolean): Promise<HostReading> {
  const host = source(prometheus.url);
  let last: HostReading | undefined;
  return eventually(
    async () => {
      last = readingFor(await host.round(Date.now()), vm);
      return accept(last) ? last : undefined;
    },
    60_000,
    `a reading of ${vm} that passes (last: ${JSON.stringify(last)})`,
  );
}

beforeAll(async () => {
  kubevirt = await startVirtHandler();
  kubevirt.set({ namespace: "users", name: "quiet" });
  kubevirt.set({
    namespace: "users",
    name: "busy",
    vcpus: 4,
    vcpuBusyRatio: 0.75,
    receiveBytesPerSecond: 3_000_000,
    writeBytesPerSecond: 8_000_000,
  });
  kubevirt.set({ namespace: "users", name: "watched", vncConnections: 1, portForwardTunnels: 2 });
  prometheus = await startPrometheus({ targets: [kubevirt.target], scrapeIntervalSeconds: 1 });
});

afterAll(async () => {
  await prometheus?.stop();
  await kubevirt?.close();
});

describe("host-side source against a real Prometheus", () => {
  it("reads vCPU, network, disk and connections per VM, in one query per metric", async () => {
    // The first rounds see a window only partly scraped: wait for a full one. On a busy machine a
    // late scrape skews one round's rates, so the round waited for is one where all three settled.
    const near = (value: number | undefined, expected: number) => Math.abs((value ?? 0) / expected - 1) < 0.05;
    const busy = await readingUntil(
      "users/busy",
      (r) =>
        r.state === "ok" &&
        near(r.vcpuBusyRatio, 0.75) &&
        near(r.networkBytesPerSecond, 3_000_000) &&
        near(r.diskBytesPerSecond, 8_000_000),
    );
    expect(busy.vcpus).toBe(4);
    expect(busy.vcpuBusyRatio).toBeCloseTo(0.75, 1);
    expect(busy.networkBytesPerSecond! / 3_000_000).toBeCloseTo(1, 1);
    expect(busy.diskBytesPerSecond! / 8_000_000).toBeCloseTo(1, 1);
    const quiet = await readingUntil("users/quiet", (r) => r.state === "ok");
    expect(quiet.vcpuBusyRatio).toBeLessThan(0.01);
    expect(quiet.networkBytesPerSecond).toBeLessThan(5000);
    expect(quiet).toMatchObject({ vncConnections: 0, consoleConnections: 0, portForwardTunnels: 0 });
    const watched = await readingUntil("users/watched", (r) => r.state === "ok");
    expect(watched).toMatchObject({ vncConnections: 1, consoleConnections: 0, portForwardTunnels: 2 });
    // One query per metric for the whole fleet, whatever its size.
    const client = prometheusClient({ url: prometheus.url, timeoutMs: 5000, maxResponseBytes: 1024 * 1024 });
    const asked: string[] = [];
    const counting = new HostSource({
      client: {
        endpoint: client.endpoint,
        query: (expr, atMs) => {
          asked.push(expr);
          return client.query(expr, atMs);
        },
      },
      sink: { hostBatch: () => {} },
      log: () => {},
      nowMs: Date.now,
      intervalSeconds: 2,
      windowSeconds: WINDOW_S,
    });
    const batch = await counting.round(Date.now());
    expect(batch.ok && batch.readings.size).toBe(3);
    // One query per metric: vCPU, network, disk, connections and the rest, and the packets each way (engine/host-traffic.ts).
    expect(asked).toHaveLength(Object.keys(hostQueries(WINDOW_S)).length);
  });

  it("a VM with no KubeVirt series is absent, and says so", async () => {
    const batch = await source(prometheus.url).round(Date.now());
    expect(batch.ok).toBe(true);
    const reading = readingFor(batch, "users/elsewhere");
    expect(reading.state).toBe("absent");
    expect(reading.message).toMatch(/no KubeVirt series for this VMI/);
  });

  it("an open VNC connection is seen for the whole window after it closed", async () => {
    kubevirt.set({ namespace: "users", name: "quiet", vncConnections: 1 });
    await readingUntil("users/quiet", (r) => r.vncConnections === 1);
    kubevirt.set({ namespace: "users", name: "quiet", vncConnections: 0 });
    // Still inside the window: max_over_time keeps it.
    const soon = readingFor(await source(prometheus.url).round(Date.now()), "users/quiet");
    expect(soon.vncConnections).toBe(1);
    await readingUntil("users/quiet", (r) => r.vncConnections === 0);
  });

  it("without virt-api's series no VM can be read: connections would be invisible", async () => {
    kubevirt.virtApiUp = false;
    try {
      const failed = await eventually(
        async () => {
          const batch = await source(prometheus.url).round(Date.now());
          return batch.ok ? undefined : batch;
        },
        60_000,
        "a failed round once virt-api's series are stale",
      );
      expect(readingFor(failed as HostBatch, "users/busy")).toMatchObject({
        state: "failed",
        message: expect.stringMatching(/kubevirt_virt_api_ready_status.*not in Prometheus/),
      });
    } finally {
      kubevirt.virtApiUp = true;
    }
  });

  it("a Prometheus answering errors, too large an answer, or none: failed, with why", async () => {
    const strict = await startPrometheus({
      targets: [kubevirt.target],
      scrapeIntervalSeconds: 1,
      extraArgs: ["--query.max-samples=1"],
    });
    try {
      const erring = await eventually(
        async () => {
          const batch = await source(strict.url).round(Date.now());
          return !batch.ok && /HTTP 422/.test(batch.message) ? batch : undefined;
        },
        60_000,
        "Prometheus refusing the queries",
      );
      expect(readingFor(erring, "users/busy").message).toMatch(/too many samples/);
    } finally {
      await strict.stop();
    }
    const small = await source(prometheus.url, { maxResponseBytes: 200 }).round(Date.now());
    expect(small.ok).toBe(false);
    expect(!small.ok && small.message).toMatch(/larger than 200 bytes/);
    const gone = await source(strict.url).round(Date.now());
    expect(!gone.ok && gone.message).toMatch(/ECONNREFUSED/);
  });

  it("over HTTPS with the configured CA, and a bearer token file read at each query", async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), "ws-hostside-tls-"));
    const tls = selfSignedCertificate(dir);
    const secure = await startPrometheus({ targets: [kubevirt.target], scrapeIntervalSeconds: 1, tls });
    try {
      const token = path.join(dir, "token");
      writeFileSync(token, "a-token\n");
      const trusted = source(secure.url, { caFile: tls.certFile, bearerTokenFile: token });
      const ok = await eventually(
        async () => {
          const batch = await trusted.round(Date.now());
          return batch.ok && readingFor(batch, "users/busy").state === "ok" ? batch : undefined;
        },
        60_000,
        "a reading over HTTPS",
      );
      expect(readingFor(ok, "users/busy").vcpus).toBe(4);
      const untrusted = await source(secure.url).round(Date.now());
      expect(!untrusted.ok && untrusted.message).toMatch(/self[- ]signed certificate/);
      rmSync(token);
      const tokenGone = await trusted.round(Date.now());
      expect(!tokenGone.ok && tokenGone.message).toMatch(/cannot read the bearer token file/);
    } finally {
      await secure.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
