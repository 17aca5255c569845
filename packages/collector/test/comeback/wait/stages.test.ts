import { describe, expect, it } from "vitest";
import type { Stage } from "../../../src/comeback/start/progress.js";
import { StartTracker } from "../../../src/comeback/start/tracker.js";
import { splitWait, waitTriggerOf, ZERO_WAIT } from "../../../src/comeback/wait/stages.js";

const T0 = Date.UTC(2026, 11, 7, 8, 45);
const vm = { namespace: "lab", name: "h36w-ada" };

function stages(times: Partial<Record<Stage["name"], number>>): Stage[] {
  return (["requested", "scheduled", "running", "agent", "ready"] as const).map((name) => ({
    name,
    label: name,
    state: times[name] !== undefined ? "done" : "waiting",
    ...(times[name] !== undefined ? { atMs: times[name] } : {}),
  }));
}

describe("a return's wait, split by stage", () => {
  it("gives each stage its own seconds, adding up to the total", () => {
    const split = splitWait(
      stages({ requested: T0, scheduled: T0 + 90_000, running: T0 + 100_000, agent: T0 + 130_000 }),
      T0,
      T0 + 131_500,
    );
    expect(split).toEqual({ placement: 90, boot: 10, guest: 30, report: 1.5, total: 131.5 });
  });

  it("a stage the platform skipped takes the next one's time: no gap, nothing negative", () => {
    // No Scheduled time (an inventory that saw the VMI first when running), and an agent stream
    // opened before the request (clamped to it).
    const split = splitWait(stages({ running: T0 + 20_000, agent: T0 - 5_000 }), T0, T0 + 25_000);
    expect(split).toEqual({ placement: 20, boot: 0, guest: 0, report: 5, total: 25 });
    expect(Object.values(splitWait([], T0, T0 - 1)).every((seconds) => seconds === 0)).toBe(true);
  });

  it("labels the workstation's own address as the wake path and anything unknown as standalone", () => {
    expect(["link", "address", "ssh", "schedule", "warm", "standalone", "cron"].map(waitTriggerOf)).toEqual([
      "link",
      "wake",
      "ssh",
      "schedule",
      "warm",
      "standalone",
      "standalone",
    ]);
  });

  it("the tracker records a return's split when it becomes ready, and a VM found ready as a zero wait", async () => {
    const tracker = new StartTracker();
    const accepted = async () => ({ ok: true as const, already: false, message: "accepted" });
    await tracker.request(vm, { by: "alice", trigger: "address" }, T0, { running: false }, accepted);
    tracker.markReady(vm, T0 + 60_000, stages({ scheduled: T0 + 5_000, running: T0 + 15_000, agent: T0 + 59_000 }));
    expect(tracker.drainWaits()).toEqual([
      { trigger: "wake", split: { placement: 5, boot: 10, guest: 44, report: 1, total: 60 } },
    ]);
    // Later the VM is up: the next request finds it ready, waits for nothing and is not pending.
    const already = async () => ({ ok: true as const, already: true, message: "already running" });
    const later = T0 + 3600_000;
    await tracker.request(vm, { by: "alice", trigger: "ssh" }, later, { running: true }, already, true);
    expect(tracker.drainWaits()).toEqual([{ trigger: "ssh", split: ZERO_WAIT }]);
    expect(tracker.drainReadySeconds()).toEqual([60, 0]);
    expect(tracker.pending(later + 1000)).toEqual([]);
    expect(tracker.drainWaits()).toEqual([]);
  });
});
