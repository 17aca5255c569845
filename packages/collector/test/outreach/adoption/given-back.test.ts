// What ws gave back: only ws's own accepted stops count, per namespace and owner, never twice
// across a restart; the observer feeds the ledger from the fleet's callbacks; the counters and the
// fleet page show it.
import { describe, expect, it } from "vitest";
import { capacityOf, cpuCores, GivenBackLedger, quantityBytes } from "../../../src/outreach/adoption/given-back.js";
import { withGivenBack } from "../../../src/outreach/adoption/observer.js";
import { createMetrics } from "../../../src/metrics/metrics.js";
import type { FleetObserver } from "../../../src/loop/fleet-observer.js";
import { CollectorStats } from "../../../src/lib/stats.js";
import type { VmView } from "../../../src/model/vm-view.js";
import { renderFleetPage } from "../../../src/web/fleet-page.js";
import { vmView } from "../../fixtures/vm-view.js";

const H = 3_600_000;
const alice = { namespace: "team-a", name: "alice-ws" };
const bob = { namespace: "team-a", name: "bob-ws" };
const gpuVm = { cpuCores: 8, memoryBytes: 64 * 2 ** 30, gpus: 1 };

describe("quantities", () => {
  it("reads memory and CPU as the VM spec writes them", () => {
    expect(quantityBytes("16Gi")).toBe(16 * 2 ** 30);
    expect(quantityBytes("500M")).toBe(500e6);
    expect(quantityBytes("1.5Gi")).toBe(1.5 * 2 ** 30);
    expect(quantityBytes("lots")).toBeNull();
    expect(cpuCores("8")).toBe(8);
    expect(cpuCores("500m")).toBe(0.5);
    expect(cpuCores("4 vCPU")).toBe(4);
    expect(cpuCores("many")).toBeNull();
    expect(capacityOf({ cpu: "8", memory: "64Gi", gpus: [{ count: 1 }, { count: 2 }] })).toEqual({
      cpuCores: 8,
      memoryBytes: 64 * 2 ** 30,
      gpus: 3,
    });
  });
});

describe("GivenBackLedger", () => {
  it("counts a ws stop's period × capacity until the VM runs again", () => {
    const ledger = new GivenBackLedger(0);
    ledger.stoppedByWs(alice, 1 * H, "alice", gpuVm);
    expect(ledger.rows(3 * H)).toEqual([
      {
        namespace: "team-a",
        owner: "alice",
        stoppedNow: 1,
        vmSeconds: 7200,
        cpuCoreSeconds: 8 * 7200,
        memoryByteSeconds: 64 * 2 ** 30 * 7200,
        gpuSeconds: 7200,
      },
    ]);
    ledger.ended(alice, 4 * H);
    const [row] = ledger.rows(10 * H);
    expect(row!.stoppedNow).toBe(0);
    expect(row!.gpuSeconds).toBe(3 * 3600); // stopped 1h..4h, nothing after
  });

  it("is monotone across reads, and a second stop of the same period is one period", () => {
    const ledger = new GivenBackLedger(0);
    ledger.stoppedByWs(bob, 0, "bob", { cpuCores: 2, memoryBytes: null, gpus: 0 });
    ledger.stoppedByWs(bob, 0.5 * H, "bob", { cpuCores: 2, memoryBytes: null, gpus: 0 });
    const first = ledger.rows(1 * H)[0]!.vmSeconds;
    const again = ledger.rows(1 * H)[0]!.vmSeconds;
    expect(first).toBe(3600);
    expect(again).toBe(3600);
    expect(ledger.rows(2 * H)[0]).toMatchObject({ vmSeconds: 7200, cpuCoreSeconds: 14400, memoryByteSeconds: 0 });
  });

  it("after a restart counts only from its own start: never twice", () => {
    const restarted = new GivenBackLedger(5 * H);
    restarted.stoppedByWs(alice, 1 * H, "alice", gpuVm);
    expect(restarted.rows(6 * H)[0]!.vmSeconds).toBe(3600);
  });
});

function innerObserver(): FleetObserver & { calls: string[] } {
  const calls: string[] = [];
  return {
    calls,
    decided: () => calls.push("decided"),
    stopped: () => calls.push("stopped"),
    deliversNotice: () => true,
    noticeLink: () => "link",
    owner: () => "from-annotation",
    forget: () => calls.push("forget"),
  };
}

const decision = (state: string) => ({ next: { state } }) as never;

describe("withGivenBack", () => {
  it("opens on an accepted ws stop only, closes when the VM is neither Stopping nor Stopped, forwards everything", () => {
    const ledger = new GivenBackLedger(0);
    const inner = innerObserver();
    let now = 0;
    const observer = withGivenBack(
      inner,
      ledger,
      (vm) => (vm.name === "alice-ws" ? { owner: "alice", capacity: gpuVm } : undefined),
      () => now,
    );
    observer.stopped(
      bob,
      { outcome: "refused", message: "not persistent" },
      { reason: "idle", trigger: "idle" } as never,
      {} as never,
      0,
    );
    expect(ledger.isOpen(bob)).toBe(false);
    observer.stopped(
      alice,
      { outcome: "accepted", message: "" },
      { reason: "idle", trigger: "idle" } as never,
      {} as never,
      0,
    );
    expect(ledger.isOpen(alice)).toBe(true);
    observer.decided(alice, decision("Stopping"), undefined, {} as never, 0.1 * H);
    observer.decided(alice, decision("Stopped"), undefined, {} as never, 1 * H);
    expect(ledger.isOpen(alice)).toBe(true);
    observer.decided(alice, decision("Active"), undefined, {} as never, 2 * H);
    expect(ledger.isOpen(alice)).toBe(false);
    observer.stopped(
      bob,
      { outcome: "accepted", message: "" },
      { reason: "idle", trigger: "idle" } as never,
      {} as never,
      2 * H,
    );
    now = 3 * H;
    observer.forget(bob);
    expect(ledger.rows(10 * H)).toEqual([
      expect.objectContaining({ namespace: "team-a", owner: "alice", vmSeconds: 7200, gpuSeconds: 7200 }),
      expect.objectContaining({ namespace: "team-a", owner: "from-annotation", vmSeconds: 3600, gpuSeconds: 0 }),
    ]);
    expect(inner.calls).toEqual(["stopped", "stopped", "decided", "decided", "decided", "stopped", "forget"]);
    expect(observer.noticeLink(alice, "n", 0)).toBe("link");
    expect(observer.deliversNotice("enforce", {} as never)).toBe(true);
  });
});

function view(name: string, overrides: Partial<VmView> = {}): VmView {
  return vmView(name, { namespace: "team-a", state: "Stopped", connected: false, agentVersion: "", ...overrides });
}

describe("where it shows", () => {
  const ledger = new GivenBackLedger(0);
  ledger.stoppedByWs(alice, 0, "alice", gpuVm);

  it("as counters per namespace and owner", async () => {
    const registry = createMetrics(
      {
        views: () => [],
        counters: () => ({ stops: new Map(), notices: 0, stopsCancelled: 0, leasesGranted: 0, policyErrors: 0 }),
      },
      new CollectorStats(),
      () => 2 * H,
      () => 0,
      { processMetrics: false, givenBack: (now) => ledger.rows(now) },
    );
    const text = await registry.metrics();
    expect(text).toContain('workstation_freed_vm_seconds_total{namespace="team-a",owner="alice"} 7200');
    expect(text).toContain('workstation_freed_gpu_seconds_total{namespace="team-a",owner="alice"} 7200');
    expect(text).toContain('workstation_freed_cpu_core_seconds_total{namespace="team-a",owner="alice"} 57600');
    expect(text).toContain(
      `workstation_freed_memory_byte_seconds_total{namespace="team-a",owner="alice"} ${64 * 2 ** 30 * 7200}`,
    );
  });

  it("on the fleet page, with the GPUs configured and the agents' versions", () => {
    const views = [
      view("alice-ws", { owner: "alice", gpuCount: 1 }),
      view("bob-ws", { owner: "bob", state: "Active", connected: true, agentVersion: "0.1.0" }),
      view("carol-ws", { owner: "carol", state: "Active", connected: true, agentVersion: "0.2.0" }),
    ];
    const html = renderFleetPage(
      views,
      2 * H,
      { version: "0.2.0", mode: "kubernetes", leader: true },
      { sort: "vm", descending: false },
      undefined,
      ledger.rows(2 * H),
    );
    expect(html).toContain("<h2>Given back by ws's stops</h2>");
    expect(html).toMatch(
      /<tr><td>team-a<\/td><td>alice<\/td><td>1<\/td><td>2\.0<\/td><td>16\.0<\/td><td>128\.0<\/td><td>2\.0<\/td><td>1<\/td><\/tr>/,
    );
    expect(html).toContain(
      '<p id="agent-versions">Agents: 0.1.0 × 1, 0.2.0 × 1 — more than one version: finish the agents\' upgrade</p>',
    );
    const filtered = renderFleetPage(
      views,
      2 * H,
      { version: "0.2.0", mode: "kubernetes", leader: true },
      { sort: "vm", descending: false, namespace: "team-b" },
      undefined,
      ledger.rows(2 * H),
    );
    expect(filtered).not.toContain("Given back by ws's stops");
  });
});
