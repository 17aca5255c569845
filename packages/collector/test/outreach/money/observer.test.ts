// The spend sampled at a VM's change of state (outreach/money/observer.ts): a change counts when
// it happens, not at the next 30 s tick.
import { describe, expect, it } from "vitest";
import type { FleetObserver } from "../../../src/loop/fleet-observer.js";
import type { VmView } from "../../../src/model/vm-view.js";
import { FleetSpend, type VmSpendFacts } from "../../../src/outreach/money/fleet-spend.js";
import { changesSpend, withSpend } from "../../../src/outreach/money/observer.js";

const vm = { namespace: "lab", name: "ws1" };
const record = (state: string, wouldStopAtMs?: number) =>
  ({ state, ...(wouldStopAtMs !== undefined ? { notice: { wouldStopAtMs } } : {}) }) as never;

describe("sampling at a change of state", () => {
  it("knows which decisions change what a VM counts under", () => {
    expect(changesSpend(undefined, record("Active"))).toBe(true);
    expect(changesSpend(record("Active"), record("Active"))).toBe(false);
    expect(changesSpend(record("Active"), record("StoppingPending"))).toBe(true);
    expect(changesSpend(record("StoppingPending"), record("StoppingPending", 5))).toBe(true);
    expect(changesSpend(record("StoppingPending", 5), record("StoppingPending", 5))).toBe(false);
  });

  it("counts the time before a change under the old state, and from it under the new one", () => {
    let state = "Active";
    const view = () => ({ namespace: "lab", name: "ws1", owner: "alice", state, connected: true }) as VmView;
    const facts: VmSpendFacts = {
      running: true,
      profile: "",
      wouldHaveStopped: false,
      capacity: { cpuCores: 2, memoryBytes: null, gpus: 0 },
    };
    const spend = new FleetSpend(
      { acting: () => true, views: () => [view()], view: () => view(), facts: () => facts, stoppedByWs: () => false },
      0,
    );
    const calls: string[] = [];
    const inner = {
      decided: () => calls.push("decided"),
      stopped: () => calls.push("stopped"),
    } as unknown as FleetObserver;
    const observer = withSpend(inner, (key, now) => spend.touch(key, now));
    spend.tick(0);
    // 10 s in: the person leaves; the decision samples at once.
    state = "StoppingPending";
    observer.decided(vm, { next: record("StoppingPending") } as never, record("Active"), {} as never, 10_000);
    // The next tick: 20 s more, none of them in use.
    spend.tick(30_000);
    const [row] = spend.rows();
    expect(row!.spend.held.vm).toBe(30);
    expect(row!.spend.inUse.vm).toBe(10);
    expect(calls).toEqual(["decided"]);
  });
});
