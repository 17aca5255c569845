// What one agent may cost the collector, over real gRPC: a Report of 100,000 GPU processes or
// thousands of new sources is cut to the documented limits (counted, named in the explanation), a
// message over MAX_AGENT_MESSAGE_BYTES is refused before it is decoded,
// the VM's remembered evidence stays bounded, and a Hello burst past the admission rate is told
// to come back later (RESOURCE_EXHAUSTED with a retry hint) instead of being served late, and
// connections past the gRPC port's cap are closed right after accept (counted) while the held
// ones are served on.
import * as grpc from "@grpc/grpc-js";
import { create } from "@bufbuild/protobuf";
import { MAX_AGENT_MESSAGE_BYTES, ReportSchema, SourceState, type Directive, type Report } from "@ws/protocol";
import { afterEach, describe, expect, it } from "vitest";
import { openAgentStream, type AgentStream } from "../../../../bench/lib/agent-stream.js";
import { AgentServer } from "../../src/agents/server.js";
import { MAX_STRING, REPORT_LIMITS, validateReport } from "../../src/agents/validate.js";
import { BUILTIN_DEFAULT_POLICY } from "../../src/engine/policy.js";
import { Fleet } from "../../src/loop/fleet.js";
import { createMetrics } from "../../src/metrics/metrics.js";
import { staticPolicySource } from "../../src/model/policy-source.js";
import { CollectorStats } from "../../src/lib/stats.js";
import { MAX_REMEMBERED_SOURCES } from "../../src/loop/step.js";

interface Running {
  fleet: Fleet;
  server: AgentServer;
  stats: CollectorStats;
  address: string;
  streams: AgentStream[];
}

let running: Running | undefined;

async function startCollector(
  options: {
    hellosPerSecond?: number;
    helloBurst?: number;
    reportsPerSecond?: number;
    reportBurst?: number;
    reportBytesPerSecond?: number;
    /** The cap on agent connections the gRPC port holds (agents/connection-cap.ts). */
    maxConnections?: number;
    /** The admission's clock (default: the real one). */
    nowMs?: () => number;
  } = {},
): Promise<Running> {
  const { maxConnections, ...serverOptions } = options;
  const stats = new CollectorStats();
  const fleet = new Fleet({
    log: () => {},
    nowMs: () => Date.now(),
    authenticate: () => ({ ok: true }),
    policySource: staticPolicySource(
      { ...BUILTIN_DEFAULT_POLICY, autostopEnabled: true },
      {},
      "workstation.aik8s.run/",
      {},
    ),
    actuator: { stop: async () => ({ outcome: "accepted", message: "test" }), event: () => {}, persist: () => {} },
    stats,
  });
  fleet.start();
  const server = new AgentServer({ sink: fleet, stats, log: () => {}, nowMs: () => Date.now(), ...serverOptions });
  const port = await server.listen(
    { host: "127.0.0.1", port: 0, ...(maxConnections !== undefined ? { maxConnections } : {}) },
    grpc.ServerCredentials.createInsecure(),
  );
  running = { fleet, server, stats, address: `127.0.0.1:${port}`, streams: [] };
  return running;
}

afterEach(async () => {
  if (!running) return;
  for (const stream of running.streams) stream.close();
  running.fleet.stopTicking();
  await running.server.close();
  running = undefined;
});

/** Opens a stream and resolves with it once the Hello is answered; Directives land in `directives`. */
function connect(collector: Running, name: string, directives: Directive[] = []): Promise<AgentStream> {
  return new Promise((resolve, reject) => {
    let answered = false;
    const stream = openAgentStream(collector.address, { namespace: "lab", name }, "t", {
      onDirective(directive) {
        directives.push(directive);
        if (!answered) {
          answered = true;
          resolve(stream);
        }
      },
      onEnd: (reason) => reject(new Error(`stream ended: ${reason}`)),
    });
    collector.streams.push(stream);
  });
}

async function until<T>(what: string, probe: () => T | undefined): Promise<T> {
  for (let i = 0; i < 400; i++) {
    const value = probe();
    if (value !== undefined) return value;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  throw new Error(`timed out waiting for ${what}`);
}

describe("validation limits", () => {
  it("cuts over-long lists and strings in place and says what it cut", () => {
    const report = create(ReportSchema, {
      gpu: {
        gpus: [{ index: 0, utilizationRatio: 0.5, name: "x".repeat(10_000) }],
        processes: Array.from({ length: 515_000 }, () => ({})),
      },
      jupyter: {
        servers: [
          { url: "http://a", reachable: true, kernels: Array.from({ length: 200 }, (_, i) => ({ id: `k${i}` })) },
          { url: "http://b", reachable: true, kernels: Array.from({ length: 200 }, (_, i) => ({ id: `k${i}` })) },
        ],
      },
    } as never);
    const cuts = validateReport(report);
    expect(cuts).toEqual([
      { field: "jupyter.kernels", sent: 400, kept: 256 },
      { field: "gpu.processes", sent: 515_000, kept: 256 },
      { field: "strings", sent: 1, kept: 1 },
    ]);
    expect(report.gpu!.processes).toHaveLength(REPORT_LIMITS["gpu.processes"]);
    expect(report.jupyter!.servers.map((s) => s.kernels.length)).toEqual([200, 56]);
    expect(report.gpu!.gpus[0]!.name).toHaveLength(MAX_STRING);
  });

  it("still refuses a bad value outright", () => {
    expect(() =>
      validateReport(create(ReportSchema, { sessions: { sessions: [{ inputAgeSeconds: -3 }] } } as never)),
    ).toThrow(/input_age_seconds/);
  });
});

describe("one agent's cost to the collector", () => {
  it("refuses a Report over MAX_AGENT_MESSAGE_BYTES before decoding it, and serves the other VMs on", async () => {
    const collector = await startCollector();
    const ordinary: Directive[] = [];
    const other = await connect(collector, "ordinary", ordinary);
    const ended = new Promise<string>((resolve) => {
      const stream = openAgentStream(collector.address, { namespace: "lab", name: "too-big" }, "t", {
        onDirective() {
          // The Hello is answered; then comes a Report of 300 kB.
          stream.sendReport(
            create(ReportSchema, {
              sequence: 1n,
              intervalSeconds: 15,
              gpu: { gpus: [{ index: 0 }], processes: Array.from({ length: 150_000 }, () => ({})) },
            } as never),
          );
        },
        onEnd: (reason) => resolve(reason),
      });
      collector.streams.push(stream);
    });
    expect(await ended).toMatch(/RESOURCE_EXHAUSTED|larger than max/i);
    expect(MAX_AGENT_MESSAGE_BYTES).toBe(256 * 1024);
    other.sendReport(create(ReportSchema, { sequence: 1n, intervalSeconds: 15 } as never));
    await until("the ordinary VM's Directive", () => (ordinary.length >= 2 ? true : undefined));
    expect(collector.fleet.loopState({ namespace: "lab", name: "too-big" })?.latest).toBeUndefined();
  });

  it("answers a Report of 100,000 GPU processes (200 kB), keeping 256, counted and explained", async () => {
    const collector = await startCollector();
    const directives: Directive[] = [];
    const stream = await connect(collector, "hostile", directives);
    const hostile: Report = create(ReportSchema, {
      sequence: 1n,
      intervalSeconds: 15,
      gpu: { gpus: [{ index: 0, utilizationRatio: 0 }], processes: Array.from({ length: 100_000 }, () => ({})) },
    } as never);
    stream.sendReport(hostile);
    await until("the Directive answering the Report", () => (directives.length >= 2 ? true : undefined));
    const vm = { namespace: "lab", name: "hostile" };
    expect(collector.fleet.loopState(vm)!.latest!.report.gpu!.processes).toHaveLength(256);
    const view = collector.fleet.view(vm, Date.now())!;
    expect(view.truncated).toEqual(["gpu.processes 100000 → 256"]);
    expect(view.explanation).toContain("report truncated: gpu.processes 100000 → 256");
    const text = await createMetrics(
      collector.fleet,
      collector.stats,
      () => Date.now(),
      () => 1,
      { processMetrics: false },
    ).metrics();
    expect(text).toContain('workstation_report_truncations_total{field="gpu.processes"} 1');
    expect(text).toContain('workstation_report_truncated{namespace="lab",name="hostile"} 1');
  });

  it("keeps a VM's remembered sources bounded when every Report names thousands of new ones", async () => {
    // The per-stream Report rate is lifted here: every one of the 80 must reach the VM's loop.
    const collector = await startCollector({ reportsPerSecond: 1_000, reportBurst: 1_000, reportBytesPerSecond: 1e9 });
    const directives: Directive[] = [];
    const stream = await connect(collector, "flood", directives);
    for (let round = 0; round < 80; round++) {
      stream.sendReport(
        create(ReportSchema, {
          sequence: BigInt(round + 1),
          intervalSeconds: 15,
          sources: Array.from({ length: 4_096 }, (_, i) => ({
            source: `src-${round}-${i}`,
            state: SourceState.FAILED,
            message: "cannot read",
          })),
        } as never),
      );
    }
    await until("80 Reports answered", () => (directives.length >= 81 ? true : undefined));
    const loop = collector.fleet.loopState({ namespace: "lab", name: "flood" })!;
    const remembered = Object.keys(loop.record!.memory.sources);
    // The 64 sources the latest Report may name, plus at most 64 older ones.
    expect(remembered.length).toBeLessThanOrEqual(REPORT_LIMITS.sources + MAX_REMEMBERED_SOURCES);
    expect(remembered.filter((key) => key.startsWith("src-79-"))).toHaveLength(REPORT_LIMITS.sources);
    expect(collector.stats.truncations.get("sources")).toBe(80);
  });

  it("drops a stream's Reports beyond its rate, counted, without closing it", async () => {
    const collector = await startCollector();
    const directives: Directive[] = [];
    const stream = await connect(collector, "chatty", directives);
    for (let i = 0; i < 50; i++)
      stream.sendReport(create(ReportSchema, { sequence: BigInt(i + 1), intervalSeconds: 15 } as never));
    await until("the 50 Reports received", () => (collector.stats.reportsReceived >= 50 ? true : undefined));
    // The burst allowance (10) plus what the rate refilled while they arrived.
    expect(collector.stats.reportsRateLimited).toBeGreaterThanOrEqual(50 - 10 - 5);
    // Each Report let through is answered; the dropped ones are not.
    await until("the admitted Reports answered", () =>
      directives.length - 1 === 50 - collector.stats.reportsRateLimited ? true : undefined,
    );
    // The stream stays open: the next Report after a pause is answered.
    await new Promise((resolve) => setTimeout(resolve, 1_100));
    const before = directives.length;
    stream.sendReport(create(ReportSchema, { sequence: 51n, intervalSeconds: 15 } as never));
    await until("the Report after the pause answered", () => (directives.length > before ? true : undefined));
  });

  it("drops a stream's Reports beyond its byte budget, counted, and answers its small ones on", async () => {
    const collector = await startCollector({ reportBytesPerSecond: 1_000 });
    const directives: Directive[] = [];
    const stream = await connect(collector, "heavy", directives);
    const large = (sequence: bigint) =>
      create(ReportSchema, {
        sequence,
        intervalSeconds: 15,
        gpu: { gpus: [{ index: 0, utilizationRatio: 0 }], processes: Array.from({ length: 100_000 }, () => ({})) },
      } as never);
    // The bucket holds one message of the largest size: the first 200 kB Report passes, the second does not.
    stream.sendReport(large(1n));
    stream.sendReport(large(2n));
    stream.sendReport(create(ReportSchema, { sequence: 3n, intervalSeconds: 15 } as never));
    await until("the three Reports received", () => (collector.stats.reportsReceived >= 3 ? true : undefined));
    await until("two answered", () => (directives.length >= 3 ? true : undefined));
    expect(collector.stats.reportsRateLimited).toBe(1);
    expect(directives).toHaveLength(3);
    expect(collector.fleet.loopState({ namespace: "lab", name: "heavy" })!.latest!.report.sequence).toBe(3n);
  });

  it("tells agents past the admission rate to come back later, with a retry hint", async () => {
    // A frozen clock: the 20 Hellos are one instant for the admission, as a burst is, however
    // slowly a busy machine gets them through (on the real clock a loaded machine spreads them
    // over seconds and the bucket refills between them).
    const collector = await startCollector({ hellosPerSecond: 5, helloBurst: 5, nowMs: () => 1_000_000 });
    const outcomes = await Promise.all(
      Array.from(
        { length: 20 },
        (_, i) =>
          new Promise<{ admitted: boolean; retryAfterMs?: number; reason?: string }>((resolve) => {
            const stream = openAgentStream(collector.address, { namespace: "lab", name: `burst-${i}` }, "t", {
              onDirective: () => resolve({ admitted: true }),
              onEnd: (reason, retryAfterMs) =>
                resolve({ admitted: false, reason, ...(retryAfterMs !== undefined ? { retryAfterMs } : {}) }),
            });
            collector.streams.push(stream);
          }),
      ),
    );
    const refused = outcomes.filter((o) => !o.admitted);
    expect(outcomes.filter((o) => o.admitted)).toHaveLength(5);
    expect(refused).toHaveLength(15);
    for (const outcome of refused) {
      expect(outcome.reason).toMatch(/^RESOURCE_EXHAUSTED: collector busy admitting agents; retry in/);
      expect(outcome.retryAfterMs).toBeGreaterThanOrEqual(1_000);
    }
    // The later in the burst, the later the hint: the refused come back spread over the backlog.
    const hints = refused.map((o) => o.retryAfterMs!);
    expect(Math.max(...hints)).toBeGreaterThan(Math.min(...hints));
    expect(collector.stats.streamsRefusedBusy).toBe(refused.length);
  });

  it("closes connections past the port's cap right after accept, counted, and serves the held ones on", async () => {
    const collector = await startCollector({ maxConnections: 3 });
    const held: Directive[][] = [[], [], []];
    const streams = [];
    for (const [i, directives] of held.entries()) streams.push(await connect(collector, `held-${i}`, directives));
    expect(collector.server.connectionCount).toBe(3);
    expect(collector.server.connectionLimit).toBe(3);
    // Two more VMs, each on its own connection: the port refuses both before any Hello is read.
    const refused = await Promise.all(
      [0, 1].map(
        (i) =>
          new Promise<string>((resolve) => {
            const stream = openAgentStream(collector.address, { namespace: "lab", name: `over-${i}` }, "t", {
              onDirective: () => resolve("admitted"),
              onEnd: (reason) => resolve(reason),
            });
            collector.streams.push(stream);
          }),
      ),
    );
    for (const reason of refused) expect(reason).toMatch(/^UNAVAILABLE/);
    expect(collector.stats.agentConnectionsRefused).toBeGreaterThanOrEqual(2);
    expect(collector.stats.streamsOpened).toBe(3);
    expect(collector.fleet.loopState({ namespace: "lab", name: "over-0" })).toBeUndefined();
    // The held streams are answered on.
    streams[0]!.sendReport(create(ReportSchema, { sequence: 1n, intervalSeconds: 15 } as never));
    await until("the held VM's Directive", () => (held[0]!.length >= 2 ? true : undefined));
    const text = await createMetrics(
      collector.fleet,
      collector.stats,
      () => Date.now(),
      () => 3,
      {
        processMetrics: false,
        agentConnections: () => ({ open: collector.server.connectionCount, limit: collector.server.connectionLimit }),
      },
    ).metrics();
    expect(text).toContain("workstation_agent_connections 3");
    expect(text).toContain("workstation_agent_connections_limit 3");
    expect(text).toMatch(/workstation_agent_connections_refused_total [1-9]/);
    // One held connection goes: the next VM gets its place.
    streams[2]!.close();
    await until("the closed connection released", () => (collector.server.connectionCount === 2 ? true : undefined));
    await connect(collector, "next");
    expect(collector.server.connectionCount).toBe(3);
  });
});
