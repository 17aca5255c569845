// The memory guard: cgroup v2 files parsed (fixtures in the kernel's format of
// Documentation/admin-guide/cgroup-v2.rst: memory.max, memory.current, memory.stat of a
// container at 394 MiB of a 512 MiB limit, and one without a limit), the pressure decision with
// its hysteresis, and the guard shedding the chart points and the detail series and saying so.
import path from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { History } from "../../../src/outreach/history.js";
import { cgroupMemory, parseMemoryMax, readCgroupMemory } from "../../../src/lib/memory/cgroup.js";
import { MemoryGuard, memoryPressure, type MemorySample } from "../../../src/lib/memory/guard.js";
import { createMetrics } from "../../../src/metrics/metrics.js";
import { CollectorStats } from "../../../src/lib/stats.js";

const fixtures = path.join(path.dirname(fileURLToPath(import.meta.url)), "fixtures");
const MiB = 1024 * 1024;

describe("cgroup v2 memory files", () => {
  it("reads the working set (memory.current less inactive_file) and the limit of a limited container", () => {
    expect(readCgroupMemory(path.join(fixtures, "limited"))).toEqual({
      workingSetBytes: 412_876_800 - 20_971_520,
      limitBytes: 512 * MiB,
    });
  });

  it('reads no limit from memory.max "max", and counts memory.current whole without memory.stat', () => {
    expect(readCgroupMemory(path.join(fixtures, "unlimited"))).toEqual({
      workingSetBytes: 95_420_416,
      limitBytes: undefined,
    });
  });

  it("is absent where there is no cgroup v2 memory controller", () => {
    expect(readCgroupMemory(path.join(fixtures, "no-such-cgroup"))).toBeUndefined();
  });

  it("refuses text that is not a byte count, with the text in the message", () => {
    expect(() => parseMemoryMax("lots\n")).toThrow(/memory.max: expected a byte count or "max", not "lots"/);
    expect(() => cgroupMemory("-5\n", "max\n", undefined)).toThrow(/memory.current/);
  });
});

const sample = (workingSetMiB: number, heapUsedMiB = 50): MemorySample => ({
  cgroup: { workingSetBytes: workingSetMiB * MiB, limitBytes: 512 * MiB },
  heapUsedBytes: heapUsedMiB * MiB,
  heapLimitBytes: 2048 * MiB,
});

describe("memoryPressure", () => {
  it("sheds from the threshold on and stops only 10 points below it", () => {
    expect(memoryPressure(sample(400), 0.85, false)).toMatchObject({ shedding: false, bound: "cgroup" });
    expect(memoryPressure(sample(440), 0.85, false).shedding).toBe(true);
    // Just below the line while shedding: still shedding (no flapping at the threshold).
    expect(memoryPressure(sample(420), 0.85, true).shedding).toBe(true);
    expect(memoryPressure(sample(380), 0.85, true).shedding).toBe(false);
  });

  it("weighs V8's heap limit too, and uses it alone without a cgroup limit", () => {
    const heapBound = memoryPressure(
      {
        cgroup: { workingSetBytes: 100 * MiB, limitBytes: undefined },
        heapUsedBytes: 1900 * MiB,
        heapLimitBytes: 2048 * MiB,
      },
      0.85,
      false,
    );
    expect(heapBound).toMatchObject({ bound: "heap", shedding: true });
    expect(memoryPressure({ cgroup: undefined, heapUsedBytes: 0, heapLimitBytes: 0 }, 0.85, false)).toEqual({
      ratio: 0,
      bound: "cgroup",
      shedding: false,
    });
  });
});

describe("MemoryGuard", () => {
  it("near the limit drops the chart points, records none until the pressure is over, and logs both changes", () => {
    const history = new History({ pointSpacingMs: 1000, pointsPerVm: 10, transitionsPerVm: 5 });
    const vm = { namespace: "lab", name: "ada" };
    const point = (atMs: number) => ({ atMs, idleSeconds: 1, activeSignals: 0, state: "Active" as const });
    history.point(vm, point(1000));
    history.transition(vm, { atMs: 1000, what: "Unknown → Active", reason: "first report" });
    let current = sample(300);
    const logs: Array<[string, string, Record<string, unknown>]> = [];
    const guard = new MemoryGuard({
      sample: () => current,
      shedRatio: 0.85,
      log: (level, message, fields) => logs.push([level, message, fields]),
      sheddable: [history],
    });
    expect(guard.check().shedding).toBe(false);
    expect(history.points(vm, 0)).toHaveLength(1);

    current = sample(460);
    expect(guard.check().shedding).toBe(true);
    expect(history.points(vm, 0)).toEqual([]);
    history.point(vm, point(5000));
    expect(history.points(vm, 0)).toEqual([]);
    // Transitions are what the VM page explains a stop with: they stay.
    expect(history.transitions(vm)).toHaveLength(1);
    expect(logs).toHaveLength(1);
    expect(logs[0]![0]).toBe("warn");
    expect(logs[0]![1]).toMatch(/memory near the limit: shedding/);
    expect(logs[0]![2]).toMatchObject({ usedPercent: 89.8, of: "cgroup", shedAtPercent: 85, limitBytes: 512 * MiB });

    current = sample(350);
    expect(guard.check().shedding).toBe(false);
    history.point(vm, point(9000));
    expect(history.points(vm, 0)).toHaveLength(1);
    expect(logs.map(([level, message]) => `${level}: ${message}`)[1]).toMatch(/^info: memory back below the limit/);
    expect(guard.shedEpisodes).toBe(1);
  });

  it("exports the working set, the limit and whether it sheds on every replica's /metrics", async () => {
    let shedding = false;
    const registry = createMetrics(
      {
        views: () => [],
        counters: () => ({ stops: new Map(), notices: 0, stopsCancelled: 0, leasesGranted: 0, policyErrors: 0 }),
      },
      new CollectorStats(),
      () => 0,
      () => 0,
      {
        processMetrics: false,
        leader: () => false,
        memory: () => ({ workingSetBytes: 392 * MiB, limitBytes: 512 * MiB, shedding }),
      },
    );
    const standby = await registry.metrics();
    expect(standby).toContain(`workstation_collector_memory_bytes ${392 * MiB}`);
    expect(standby).toContain(`workstation_collector_memory_limit_bytes ${512 * MiB}`);
    expect(standby).toContain("workstation_collector_shedding 0");
    shedding = true;
    expect(await registry.metrics()).toContain("workstation_collector_shedding 1");
  });

  it("exports the limit as +Inf where the cgroup has none (the ratio alert then never fires)", async () => {
    const registry = createMetrics(
      {
        views: () => [],
        counters: () => ({ stops: new Map(), notices: 0, stopsCancelled: 0, leasesGranted: 0, policyErrors: 0 }),
      },
      new CollectorStats(),
      () => 0,
      () => 0,
      { processMetrics: false, memory: () => ({ workingSetBytes: 95 * MiB, shedding: false }) },
    );
    const text = await registry.metrics();
    expect(text).toContain(`workstation_collector_memory_bytes ${95 * MiB}`);
    expect(text).toMatch(/^workstation_collector_memory_limit_bytes \+Inf$/m);
  });
});
