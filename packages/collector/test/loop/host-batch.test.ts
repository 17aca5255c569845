// Fleet.hostBatch: every VM gets its reading, and an agent/host disagreement's onset is counted once.
import { describe, expect, it } from "vitest";
import { BUILTIN_DEFAULT_POLICY } from "../../src/engine/policy.js";
import type { HostReading } from "../../src/engine/types.js";
import { reportFromReadings } from "../../src/model/readings.js";
import { startFleet } from "./fleet-harness.js";

const START = Date.parse("2026-12-01T09:00:00Z");
const policy = { ...BUILTIN_DEFAULT_POLICY, autostopEnabled: true };
const busy = (atMs: number): HostReading => ({
  atMs,
  windowSeconds: 120,
  state: "ok",
  vcpus: 2,
  vcpuBusyRatio: 0.9,
  networkBytesPerSecond: 100,
  diskBytesPerSecond: 0,
  vncConnections: 0,
  consoleConnections: 0,
  portForwardTunnels: 0,
});
const idleReport = (atMs: number) =>
  reportFromReadings(
    {
      cpuBusyRatio: 0.01,
      userProcessCpuCores: 0,
      networkBytesPerSecond: 100,
      diskBytesPerSecond: 0,
      gpuCount: 0,
      gpuUtilization: {},
      gpuProcesses: 0,
      jupyterBusyKernels: 0,
      jupyterConnectedKernels: 0,
      idleInhibitors: 0,
      lastActivityAtMs: {},
    },
    atMs,
    { intervalSeconds: 15 },
  );

describe("Fleet.hostBatch", () => {
  it("shows the host beside the agent and counts a disagreement's onset once", async () => {
    const live = startFleet(policy, START);
    const session = live.connect({ namespace: "lab", name: "ws" });
    for (let i = 0; i < 3; i++) {
      const atMs = START + i * 60_000;
      await live.clock.advanceTo(atMs);
      live.report(session, idleReport(atMs));
      live.fleet.hostBatch({ ok: true, atMs, windowSeconds: 120, readings: new Map([["lab/ws", busy(atMs)]]) });
    }
    const view = live.fleet.view({ namespace: "lab", name: "ws" }, START + 120_000);
    expect(view?.host).toMatchObject({ state: "ok", disagreements: ["vcpu"] });
    expect(view?.host?.summary).toMatch(/^vCPU 90 %/);
    expect(live.fleet.counters().hostDisagreements).toEqual(new Map([["vcpu", 1]]));
    // A VM the round says nothing about is absent, and says why.
    live.fleet.hostBatch({ ok: true, atMs: START + 180_000, windowSeconds: 120, readings: new Map() });
    expect(live.fleet.view({ namespace: "lab", name: "ws" }, START + 180_000)?.host).toMatchObject({
      state: "absent",
      disagreements: [],
    });
  });

  it("a VM the platform gives passthrough GPUs is read with them: the host alone never calls it idle (issue 39)", async () => {
    const live = startFleet(policy, START, undefined, { vmDetails: () => ({ gpuCount: 1 }), vmRunning: () => true });
    const vm = { namespace: "lab", name: "gpu" };
    live.fleet.track(vm);
    const quiet = { ...busy(START), vcpuBusyRatio: 0.19 };
    for (let i = 0; i < 4 * 60; i++) {
      const atMs = START + i * 60_000;
      await live.clock.advanceTo(atMs);
      live.fleet.hostBatch({
        ok: true,
        atMs,
        windowSeconds: 120,
        readings: new Map([["lab/gpu", { ...quiet, atMs }]]),
      });
    }
    // Four quiet hours on the host (a GPU job's feeder at 19 % is under cpu-busy-threshold): no stop.
    expect(live.stops).toEqual([]);
    const view = live.fleet.view(vm, START + 4 * 3_600_000);
    expect(view?.host?.summary).toContain("1 passthrough GPU (not read: the host cannot see their work)");
  });
});
