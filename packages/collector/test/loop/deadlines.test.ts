// Timers fire at the deadline a decision named, with no tick and no scan of every VM.
import { describe, expect, it } from "vitest";
import { BUILTIN_DEFAULT_POLICY } from "../../src/engine/policy.js";
import type { Policy } from "../../src/engine/types.js";
import { DeadlineQueue } from "../../src/loop/deadlines.js";
import { reportFromReadings } from "../../src/model/readings.js";
import { startFleet } from "./fleet-harness.js";
import { VirtualClock } from "./virtual-clock.js";

const START = Date.parse("2026-05-04T09:00:00Z");

const policy: Policy = {
  ...BUILTIN_DEFAULT_POLICY,
  autostopEnabled: true,
  idleTimeoutSeconds: 600,
  gracePeriodSeconds: 120,
  noticeRepeatSeconds: 300,
  agentLostAfterSeconds: 1800,
  thresholds: { ...BUILTIN_DEFAULT_POLICY.thresholds },
};

const typedAgo = (atMs: number, seconds: number) =>
  reportFromReadings(
    {
      gpuCount: 0,
      gpuUtilization: {},
      gpuProcesses: 0,
      jupyterBusyKernels: 0,
      jupyterConnectedKernels: 0,
      idleInhibitors: 0,
      lastActivityAtMs: { "tty-input": atMs - seconds * 1000 },
    },
    atMs,
    { intervalSeconds: 15 },
  );

describe("VM deadlines", () => {
  it("stops an idle VM at its deadlines, one timer armed at a time, with no report and no tick", async () => {
    const { clock, fleet, transitions, stops, connect, report } = startFleet(policy, START);
    const session = connect({ namespace: "lab", name: "ws" });
    report(session, typedAgo(START, 0));
    const firstDeadline = fleet.nextDeadline(session.vm);
    // The idle timeout is the nearest thing that can change the decision.
    expect(firstDeadline).toBe(START + 600_000);
    const armedBefore = clock.armed;

    // Three hours pass without a Report (the agent keeps its stream open but says nothing new).
    await clock.advanceTo(START + 3 * 3_600_000);
    const changes = transitions
      .filter((t) => t.from !== t.to)
      .map((t) => `${(t.atMs - START) / 1000}s ${t.from}→${t.to}`);
    expect(changes).toEqual([
      "0s Unknown→Active",
      "600s Active→StoppingPending",
      "720s StoppingPending→Stopping",
      "720s Stopping→Stopped",
    ]);
    expect(stops.map((stop) => stop.atMs - START)).toEqual([720_000]);
    // Every decision after the Report happened exactly at a time the previous decision named.
    const timed = transitions.slice(transitions.findIndex((t) => t.to === "Active") + 1);
    for (const [index, transition] of timed.entries()) {
      const previous = index === 0 ? transitions[transitions.findIndex((t) => t.to === "Active")]! : timed[index - 1]!;
      if (transition.decision.actions.some((a) => a.kind === "persist" && a.values.state === "Stopped")) continue; // the stop's outcome, not a timer
      expect([previous.decision.wakeAtMs, previous.atMs]).toContain(transition.atMs);
    }
    // One timer per deadline, not one per tick: 3 h of 5 s ticks would be 2,160.
    expect(clock.armed - armedBefore).toBeLessThan(10);
    // A stopped VM has nothing left to wait for.
    expect(fleet.nextDeadline(session.vm)).toBeUndefined();
    const view = fleet.view(session.vm, clock.nowMs)!;
    expect(view.state).toBe("Stopped");
    // The idle clock does not run while the VM is stopped.
    expect(view.idleSeconds).toBeUndefined();
  });

  it("marks a silent agent lost at agent-lost-after, and a Report moves the deadline", async () => {
    const { clock, fleet, transitions, connect, report } = startFleet({ ...policy, autostopEnabled: false }, START);
    const session = connect({ namespace: "lab", name: "ws" });
    report(session, typedAgo(START, 0));
    expect(fleet.nextDeadline(session.vm)).toBe(START + 1_800_000);
    await clock.advanceTo(START + 900_000);
    report(session, typedAgo(clock.nowMs, 0));
    expect(fleet.nextDeadline(session.vm)).toBe(START + 900_000 + 1_800_000);
    await clock.advanceTo(START + 4 * 3_600_000);
    const lost = transitions.filter((t) => t.to === "AgentLost" && t.from !== "AgentLost");
    expect(lost.map((t) => (t.atMs - START) / 1000)).toEqual([2700]);
  });
});

describe("DeadlineQueue", () => {
  it("fires each key once at its latest deadline, earliest first", async () => {
    const clock = new VirtualClock(0);
    const fired: Array<[string, number]> = [];
    const queue = new DeadlineQueue<string>({
      nowMs: clock.now,
      timers: clock,
      fire: (key, now) => fired.push([key, now]),
    });
    queue.start();
    queue.schedule("a", 5_000);
    queue.schedule("b", 2_000);
    queue.schedule("a", 1_000); // supersedes 5_000
    queue.schedule("c", 3_000);
    queue.cancel("c");
    await clock.advanceTo(10_000);
    expect(fired).toEqual([
      ["a", 1_000],
      ["b", 2_000],
    ]);
    expect(queue.size).toBe(0);
  });

  it("hands out many deadlines of one instant in slices, yielding between them", async () => {
    const clock = new VirtualClock(0);
    const order: string[] = [];
    const queue = new DeadlineQueue<number>({
      nowMs: clock.now,
      timers: clock,
      sliceSize: 100,
      fire: (key) => order.push(`vm${key}`),
    });
    queue.start();
    for (let vm = 0; vm < 350; vm++) queue.schedule(vm, 1_000);
    // Something else due at the same instant (a Lease renewal) gets its turn between slices.
    clock.setTimeout(() => order.push("other"), 1_000);
    await clock.advanceTo(1_000);
    expect(order.filter((entry) => entry.startsWith("vm"))).toHaveLength(350);
    const other = order.indexOf("other");
    expect(other).toBeGreaterThan(0);
    expect(other).toBeLessThan(350);
  });
});
