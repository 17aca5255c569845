// The fleet's spend wired to what the collector knows: a VM's facts from its loop state, ticks
// that integrate the fleet, the counters /metrics exports per namespace, owner and profile, and
// the pages' section. A clock is passed in.
import { Registry } from "prom-client";
import { describe, expect, it } from "vitest";
import {
  FleetSpend,
  guestCapacity,
  spendFactsOf,
  usageOfReport,
  type VmSpendFacts,
} from "../../../src/outreach/money/fleet-spend.js";
import { registerSpendMetrics } from "../../../src/metrics/spend-metrics.js";
import type { VmView } from "../../../src/model/vm-view.js";
import { spendSection, vmSpendBox } from "../../../src/web/spend-section.js";
import type { Prices } from "../../../src/outreach/money/prices.js";
import { vmView } from "../../fixtures/vm-view.js";

const GiB = 2 ** 30;
const H = 3_600_000;

function view(name: string, state: string, owner = "alice"): VmView {
  return vmView(name, { owner, state, mode: "observe" });
}

const prices: Prices = {
  currency: "EUR",
  cpuCoreHour: 0.1,
  memoryGiBHour: 0.01,
  gpuHour: { default: 2 },
  diskGiBMonth: {},
};

function fleet(states: Record<string, { state: string; facts: VmSpendFacts }>, withPrices?: Prices) {
  return new FleetSpend(
    {
      views: () => Object.entries(states).map(([name, s]) => view(name, s.state)),
      facts: (vm) => states[vm.name]?.facts,
      stoppedByWs: () => false,
      ...(withPrices ? { prices: withPrices } : {}),
    },
    0,
  );
}

const gpuBox = { cpuCores: 8, memoryBytes: 32 * GiB, gpus: 1 };

describe("the fleet's spend", () => {
  it("reads a VM's facts from its loop state: profile, observe would-stop, the agent's latest readings", () => {
    const facts = spendFactsOf(
      {
        running: true,
        connected: true,
        policy: { profile: "gpu" } as never,
        record: { notice: { mode: "observe", wouldStopAtMs: 5 } } as never,
        latest: {
          receivedAtMs: 0,
          report: {
            system: { cpuBusyRatio: 0.1, memoryTotalBytes: 100n, memoryAvailableBytes: 75n },
            gpu: { gpus: [{ utilizationRatio: 0.2 }, { utilizationRatio: 0.4 }] },
          } as never,
        },
      },
      { capacity: gpuBox, gpuDevices: [{ deviceName: "nvidia.com/A100", count: 1 }] },
    );
    expect(facts).toMatchObject({ running: true, profile: "gpu", wouldHaveStopped: true, capacity: gpuBox });
    expect(facts!.usage!.cpu).toBe(0.1);
    expect(facts!.usage!.memory).toBe(0.25);
    expect(facts!.usage!.gpu).toBeCloseTo(0.3, 10);
    expect(usageOfReport({})).toEqual({});
  });

  it("decodes a kept Report once for every tick that reads it, and again only when a new one arrives", () => {
    let decoded = 0;
    const kept = (cpuBusyRatio: number) => ({
      receivedAtMs: 0,
      get report() {
        decoded++;
        return { system: { cpuBusyRatio, cpuCount: 2, memoryTotalBytes: 100n, memoryAvailableBytes: 50n } } as never;
      },
    });
    const loop = (latest: ReturnType<typeof kept>) => ({
      running: true,
      connected: true,
      policy: { profile: "" } as never,
      record: undefined,
      latest,
    });
    const first = kept(0.5);
    const ticks = [1, 2, 3].map(() => spendFactsOf(loop(first), undefined));
    expect(decoded).toBe(1);
    expect(ticks.map((facts) => facts!.usage!.cpu)).toEqual([0.5, 0.5, 0.5]);
    expect(ticks[0]!.capacity).toEqual({ cpuCores: 2, memoryBytes: 100, gpus: 0 });
    expect(spendFactsOf(loop(kept(0.9)), undefined)!.usage!.cpu).toBe(0.9);
    expect(decoded).toBe(2);
  });

  it("sizes a VM with no spec to read (standalone) from what its guest reports", () => {
    expect(
      guestCapacity({ system: { cpuCount: 4, memoryTotalBytes: 8n * BigInt(GiB) }, gpu: { gpus: [{}, {}] } }),
    ).toEqual({
      cpuCores: 4,
      memoryBytes: 8 * GiB,
      gpus: 2,
    });
    expect(guestCapacity({})).toEqual({ cpuCores: null, memoryBytes: null, gpus: 0 });
    const facts = spendFactsOf(
      {
        running: undefined,
        connected: true,
        policy: { profile: "" } as never,
        record: undefined,
        latest: { receivedAtMs: 0, report: { system: { cpuCount: 2, memoryTotalBytes: 0n } } as never },
      },
      undefined,
    );
    expect(facts!.capacity).toEqual({ cpuCores: 2, memoryBytes: null, gpus: 0 });
  });

  it("takes a sample when a page reads the figures on the acting replica, not on a standby", () => {
    const states = {
      ws1: { state: "Active", facts: { running: true, profile: "", wouldHaveStopped: false, capacity: gpuBox } },
    };
    let leader = true;
    const spend = new FleetSpend(
      {
        acting: () => leader,
        views: () => [view("ws1", "Active")],
        facts: () => states.ws1.facts,
        stoppedByWs: () => false,
      },
      0,
    );
    spend.report(0);
    expect(spend.report(20_000).rows[0]!.spend.held.vm).toBe(20);
    leader = false;
    expect(spend.report(40_000).rows[0]!.spend.held.vm).toBe(20);
  });

  it("adds usage readings on the timer's ticks only, not when a page reads", () => {
    const facts = { running: true, profile: "", wouldHaveStopped: false, capacity: gpuBox, usage: { cpu: 0.9 } };
    const spend = new FleetSpend(
      { acting: () => true, views: () => [view("ws1", "Active")], facts: () => facts, stoppedByWs: () => false },
      0,
    );
    for (let t = 0; t <= 25 * H; t += 5_000) spend.report(t);
    expect(spend.report(25 * H).vms[0]!.p95).toEqual({});
    spend.tick(25 * H + 30_000);
    expect(spend.report(25 * H + 30_000).vms[0]!.p95).toEqual({ cpu: 0.95 });
  });

  it("counts an hour of a running Active VM as held and in use, and exports it per owner and profile", async () => {
    const states = {
      ws1: { state: "Active", facts: { running: true, profile: "gpu", wouldHaveStopped: false, capacity: gpuBox } },
    };
    const spend = fleet(states, prices);
    for (let t = 0; t <= H; t += 30_000) spend.tick(t);
    const [row] = spend.rows();
    expect(row!.spend.held.cpuCore).toBe(8 * 3600);
    expect(row!.spend.inUse.gpu).toBe(3600);
    // 8 × 0.1 + 32 × 0.01 + 2 = 3.12 an hour
    expect(row!.spend.held.money).toBeCloseTo(3.12, 10);
    const registry = new Registry();
    registerSpendMetrics(registry, () => spend.rows(), spend.priced);
    const text = await registry.metrics();
    expect(text).toContain(
      'workstation_resource_seconds_total{namespace="lab",owner="alice",profile="gpu",kind="held",resource="cpu_core"} 28800',
    );
    const inUse = /workstation_spend_total\{namespace="lab",owner="alice",profile="gpu",kind="in_use"\} ([\d.]+)/.exec(
      text,
    );
    expect(Number(inUse?.[1])).toBeCloseTo(3.12, 10);
    expect(text).not.toContain('kind="would_give_back"');
  });

  it("projects what enforce mode would give back from an observe-mode VM past its would-stop", () => {
    const states = {
      ws1: {
        state: "StoppingPending",
        facts: { running: true, profile: "", wouldHaveStopped: true, capacity: gpuBox },
      },
    };
    const spend = fleet(states);
    for (let t = 0; t <= 2 * H; t += 30_000) spend.tick(t);
    const [row] = spend.rows();
    expect(row!.spend.wouldGiveBack.gpu).toBe(7200);
    expect(row!.spend.inUse.vm).toBe(0);
    expect(spend.currency).toBeUndefined();
  });

  it("shows the sums in money with prices and resource-hours without, and the hint beside the size", () => {
    const states = {
      ws1: {
        state: "Active",
        facts: {
          running: true,
          profile: "gpu",
          wouldHaveStopped: false,
          capacity: gpuBox,
          usage: { cpu: 0.05, gpu: 0.9 },
        },
      },
    };
    const day = 86_400_000;
    const priced = fleet(states, prices);
    const plain = fleet(states);
    // A day of readings: the right-sizing rule needs that much.
    for (let t = 0; t <= day; t += 30_000) {
      priced.tick(t);
      plain.tick(t);
    }
    const all = () => true;
    const html = spendSection(priced.report(day), all);
    expect(html).toContain('<td data-kind="held">74.88 EUR</td>');
    expect(html).toContain("uses under 25% of its CPU (p95 10% of 8 cores: about 2 would do)");
    expect(spendSection(plain.report(day), all)).toContain(
      '<td data-kind="held">192.0 core-h · 768.0 GiB-h · 24.0 GPU-h</td>',
    );
    expect(spendSection(priced.report(day), () => false)).toBe("");
    const box = vmSpendBox(priced.vm({ namespace: "lab", name: "ws1" }, day)!, "EUR");
    expect(box).toContain(
      '<li data-kind="inUse">In use: 74.88 EUR <small class="group">(lab · alice · gpu: 74.88 EUR)</small></li>',
    );
  });
});
