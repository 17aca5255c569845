import { SourceState } from "@ws/protocol";
import { describe, expect, it } from "vitest";
import { decide, initialRecord } from "../../src/engine/decide.js";
import { blindHoldSeconds } from "../../src/engine/evidence.js";
import { statusFor } from "../../src/engine/status.js";
import {
  HOUR,
  MINUTE,
  SECOND,
  Sim,
  T0,
  actionsOf,
  report,
  sources,
  testPolicy,
  transitions,
  ttySession,
} from "./sim.js";

const typing = () => report({ sessions: { sessions: [ttySession(0)] } });
const idle = () => report({ sessions: { sessions: [ttySession(99_999)] } });

/** A VM that was used at T0 and then left alone. */
function activeSim(policy = testPolicy()): Sim {
  const sim = new Sim(policy);
  sim.send(typing());
  return sim;
}

describe("decide: transitions", () => {
  it("Unknown → Active on the first report, persisting the state", () => {
    const decision = decide(T0, testPolicy(), {
      agentConnected: true,
      latestReport: { report: idle(), receivedAtMs: T0 },
    });
    expect(decision.explanation.from).toBe("Unknown");
    expect(decision.next.state).toBe("Active");
    expect(decision.next.clock.lastActivityAtMs).toBe(T0); // a VM first seen gets a full idle timeout
    expect(actionsOf(decision, "persist")).toEqual([
      {
        kind: "persist",
        values: { state: "Active", lastActiveMs: T0, noticeId: undefined, stopDeadlineMs: undefined },
      },
    ]);
  });

  it("stays Unknown without a report, and is never stopped", () => {
    const sim = new Sim();
    const decisions = sim.advance(3 * HOUR, { tickMs: MINUTE });
    expect(sim.state).toBe("Unknown");
    expect(actionsOf(decisions, "stop")).toEqual([]);
  });

  it("Active → StoppingPending when idle reaches idle-timeout, with a notice and an event", () => {
    const sim = activeSim();
    const decisions = sim.idleFor(HOUR);
    expect(transitions(decisions)).toEqual(["Active→StoppingPending"]);
    const [notice] = actionsOf(decisions, "notice");
    expect(notice).toMatchObject({ repeat: false, mode: "enforce", stopInSeconds: 600 });
    expect(notice?.deadlineMs).toBe(T0 + HOUR + 10 * MINUTE);
    expect(notice?.reason).toMatch(/idle for 1h.*input on pts\/0 \(alice from 10\.0\.0\.9\)/);
    expect(notice?.hint).toMatch(/ws-lease 2h/);
    expect(actionsOf(decisions, "event").map((e) => e.reason)).toEqual(["IdleStopPending"]);
    const persist = actionsOf(decisions, "persist")[0]!;
    expect(persist.values).toMatchObject({
      state: "StoppingPending",
      noticeId: notice!.id,
      stopDeadlineMs: notice!.deadlineMs,
    });
    expect(persist.values.lastActiveMs).toBe(T0);
  });

  it("StoppingPending → Active on terminal input, clearing the notice", () => {
    const sim = activeSim();
    sim.idleFor(HOUR);
    expect(sim.state).toBe("StoppingPending");
    const noticeId = sim.record!.notice!.id;
    sim.now += 2 * MINUTE;
    const decision = sim.send(report({ sessions: { sessions: [ttySession(3, { tty: "pts/1" })] } }));
    expect(decision.next.state).toBe("Active");
    expect(actionsOf(decision, "notice-cleared")).toEqual([
      { kind: "notice-cleared", id: noticeId, reason: expect.stringMatching(/input on pts\/1/) },
    ]);
    expect(actionsOf(decision, "event")[0]).toMatchObject({ reason: "IdleStopCancelled", type: "Normal" });
    expect(actionsOf(decision, "persist")[0]?.values).toMatchObject({ state: "Active", noticeId: undefined });
  });

  it("does not take the jitter of a re-based age for new activity (found by the stop-overshoot benchmark)", () => {
    // One keystroke, reported again and again: its age grows with the clock, but as the machine
    // gets busier each report is sampled a little earlier before it is sent, so the rebuilt time
    // creeps later by a few milliseconds per report (1.4 s over the run).
    const sim = activeSim();
    const keystrokeAt = sim.now;
    let n = 0;
    const decisions = sim.advance(HOUR + 11 * MINUTE, {
      reportEveryMs: 15 * SECOND,
      makeReport: () => report({ sessions: { sessions: [ttySession((sim.now - keystrokeAt) / 1000 - 0.005 * n++)] } }),
    });
    expect(actionsOf(decisions, "notice-cleared")).toEqual([]);
    expect(transitions(decisions)).toEqual(["Active→StoppingPending", "StoppingPending→Stopping"]);
  });

  it("StoppingPending → Stopping when the grace period ends, then Stopped when the stop is accepted", () => {
    const sim = activeSim();
    sim.idleFor(HOUR);
    const decisions = sim.idleFor(10 * MINUTE + 15 * SECOND);
    expect(transitions(decisions)).toEqual(["StoppingPending→Stopping"]);
    const [stop] = actionsOf(decisions, "stop");
    expect(stop).toMatchObject({ trigger: "idle", attempt: 1 });
    expect(stop?.reason).toMatch(
      /grace period of the notice n-\w+ is over with no activity, lease or other veto; last activity: input on pts\/0/,
    );
    const accepted = sim.stopResult({ outcome: "accepted", message: "runStrategy Halted" });
    expect(accepted.next.state).toBe("Stopped");
    expect(actionsOf(accepted, "persist")[0]?.values.state).toBe("Stopped");
  });

  it("repeats the notice with the same id and re-sends it when the agent reconnects", () => {
    const sim = activeSim();
    sim.idleFor(HOUR);
    const id = sim.record!.notice!.id;
    const repeats = actionsOf(sim.idleFor(5 * MINUTE), "notice");
    expect(repeats).toHaveLength(1);
    expect(repeats[0]).toMatchObject({ id, repeat: true });
    sim.connected = false;
    sim.now += 10 * SECOND;
    sim.step();
    sim.connected = true;
    sim.now += 10 * SECOND;
    expect(actionsOf(sim.send(idle()), "notice")).toEqual([expect.objectContaining({ id, repeat: true })]);
  });

  it("Stopping → Active with cancel-stop when activity arrives before the stop is carried out", () => {
    const sim = activeSim();
    sim.idleFor(HOUR + 10 * MINUTE + 15 * SECOND);
    expect(sim.state).toBe("Stopping");
    sim.now += 5 * SECOND;
    const decision = sim.send(typing());
    expect(decision.next.state).toBe("Active");
    expect(actionsOf(decision, "cancel-stop")).toHaveLength(1);
  });

  it("a refused stop goes back to Active with a Warning and restarts the idle clock", () => {
    const sim = activeSim();
    sim.idleFor(HOUR + 10 * MINUTE + 15 * SECOND);
    const decision = sim.stopResult({ outcome: "refused", message: "volume scratch is an emptyDisk" });
    expect(decision.next.state).toBe("Active");
    expect(decision.next.clock.lastActivityAtMs).toBe(sim.now);
    expect(actionsOf(decision, "event")).toEqual([
      expect.objectContaining({ type: "Warning", reason: "IdleStopRefused" }),
    ]);
  });

  it("a stop still being asked for is cancelled by a Report from a boot after it was decided (started again meanwhile)", () => {
    const sim = activeSim();
    sim.idleFor(HOUR + 10 * MINUTE + 15 * SECOND);
    expect(sim.stopResult({ outcome: "failed", message: "the guest is not there" }).next.state).toBe("Stopping");
    sim.now += MINUTE;
    // The dying boot's last Report (uptime a day) changes nothing; a new boot's does.
    expect(sim.send(idle()).next.state).toBe("Stopping");
    sim.now += 10 * SECOND;
    const booted = sim.send(report({ system: { cpuCount: 4, uptimeSeconds: 30 } }));
    expect(booted.next.state).toBe("Active");
    expect(booted.next.clock.lastActivityAtMs).toBe(sim.now);
    expect(actionsOf(booted, "cancel-stop")).toHaveLength(1);
    expect(actionsOf(sim.advance(2 * MINUTE, { tickMs: 15 * SECOND }), "stop")).toEqual([]);
  });

  it("a failed stop is asked for again after a back-off, never dropped", () => {
    const sim = activeSim();
    sim.idleFor(HOUR + 10 * MINUTE + 15 * SECOND);
    const failed = sim.stopResult({ outcome: "failed", message: "HTTP 503 after 5 attempts" });
    expect(failed.next.state).toBe("Stopping");
    expect(actionsOf(failed, "stop")).toEqual([]);
    const later = sim.advance(2 * MINUTE, { tickMs: 15 * SECOND });
    expect(actionsOf(later, "stop")).toEqual([expect.objectContaining({ attempt: 2 })]);
  });

  it("a VM seen not running is Stopped; a report from before the shutdown does not revive it; a boot after does", () => {
    const sim = activeSim();
    sim.vmRunning = false;
    sim.now += MINUTE;
    expect(sim.step().next.state).toBe("Stopped");
    sim.vmRunning = undefined; // standalone: the collector cannot see the VM itself
    sim.now += 10 * SECOND;
    // Uptime a day: this machine booted long before the stop (the agent's last gasp).
    expect(sim.send(idle()).next.state).toBe("Stopped");
    sim.now += HOUR;
    const booted = sim.send(report({ system: { cpuCount: 4, uptimeSeconds: 30 } }));
    expect(booted.next.state).toBe("Active");
    expect(booted.next.clock.lastActivityAtMs).toBe(sim.now);
  });
});

describe("decide: vetoes hold an idle VM", () => {
  const gpu = (utilizationRatio?: number, processes = 0) =>
    report({
      gpu: {
        gpus: [
          { index: 0, uuid: "GPU-1", name: "H100", ...(utilizationRatio !== undefined ? { utilizationRatio } : {}) },
        ],
        processes: Array.from({ length: processes }, (_, i) => ({
          pid: 100 + i,
          gpuUuid: "GPU-1",
          processName: "python",
          user: "alice",
        })),
      },
    });
  const system = (fields: Record<string, number>) =>
    report({ system: { cpuCount: 4, uptimeSeconds: 86_400, ...fields } });
  const cases: Array<[string, () => ReturnType<typeof report>, RegExp]> = [
    [
      "a busy Jupyter kernel",
      () =>
        report({
          jupyter: {
            servers: [
              {
                url: "http://127.0.0.1:8888/",
                reachable: true,
                user: "alice",
                kernels: [{ id: "abcdef0123", name: "python3", executionState: "busy", lastActivityAgeSeconds: 7200 }],
              },
            ],
          },
        }),
      /kernel python3 abcdef01 .* is busy/,
    ],
    ["a GPU above the threshold", () => gpu(0.9), /GPU 0 \(H100\) at 90%/],
    [
      "a GPU with unreadable utilization held by processes",
      () => gpu(undefined, 1),
      /utilization unreadable and held by python \(alice\)/,
    ],
    ["background CPU", () => system({ cpuBusyRatio: 0.8 }), /CPU 80% busy/],
    ["users' processes on the CPU", () => system({ userProcessCpuCores: 1.5 }), /users' processes use 1\.50 cores/],
    [
      "network traffic",
      () => system({ networkReceiveBytesPerSecond: 4e6, networkTransmitBytesPerSecond: 1e5 }),
      /network 4\.1 MB\/s/,
    ],
    ["disk traffic", () => system({ diskReadBytesPerSecond: 2e7 }), /disk 20\.0 MB\/s/],
    [
      "an idle inhibitor lock",
      () =>
        report({
          inhibitors: {
            locks: [{ who: "backup.sh", why: "nightly rsync", what: "sleep:idle", mode: "block", uid: 1000, pid: 77 }],
          },
        }),
      /idle inhibitor lock by backup\.sh \("nightly rsync"\)/,
    ],
    [
      "an unexpired lease",
      () =>
        report({
          leases: {
            leases: [
              {
                id: "L1",
                uid: 1000,
                user: "alice",
                reason: "training",
                requestedSeconds: 8 * 3600,
                ageSeconds: 60,
                confirmed: true,
              },
            ],
          },
        }),
      /lease L1 by alice \("training"\)/,
    ],
  ];

  it.each(cases)("%s keeps the VM Active past idle-timeout with no notice", (_, makeReport, detail) => {
    const sim = new Sim();
    sim.send(makeReport());
    const decisions = sim.advance(2 * HOUR, { reportEveryMs: 15 * SECOND, makeReport });
    expect(sim.state).toBe("Active");
    expect(actionsOf(decisions, "notice")).toEqual([]);
    const last = decisions.at(-1)!;
    expect(last.explanation.vetoes.map((veto) => veto.detail).join("\n")).toMatch(detail);
  });

  it.each(cases.filter(([name]) => /lease|inhibitor/.test(name)))(
    "%s taken during the grace period cancels the pending stop",
    (_, makeReport) => {
      const sim = activeSim();
      sim.idleFor(HOUR);
      expect(sim.state).toBe("StoppingPending");
      sim.now += MINUTE;
      const decision = sim.send(makeReport());
      expect(decision.next.state).toBe("Active");
      expect(actionsOf(decision, "notice-cleared")[0]?.reason).toMatch(/lease|inhibitor/);
    },
  );

  it("a lease is not activity: when it expires the ordinary rule applies at once, with notice and grace", () => {
    const lease = (ageSeconds: number) =>
      report({
        leases: {
          leases: [{ id: "L1", uid: 1000, user: "alice", requestedSeconds: 2 * 3600, ageSeconds, confirmed: true }],
        },
      });
    const sim = activeSim();
    let age = 0;
    const decisions = sim.advance(2 * HOUR + 30 * SECOND, {
      reportEveryMs: 15 * SECOND,
      makeReport: () => lease((age += 15)),
    });
    expect(transitions(decisions)).toEqual(["Active→StoppingPending"]);
    const noticeAt = decisions.find((d) => d.explanation.to === "StoppingPending")!.explanation.atMs;
    expect(noticeAt - T0).toBeGreaterThanOrEqual(2 * HOUR);
    expect(noticeAt - T0).toBeLessThanOrEqual(2 * HOUR + 15 * SECOND);
  });

  it("clamps a lease to max-keep-running and tells the agent", () => {
    const sim = new Sim(testPolicy({ maxKeepRunningSeconds: 24 * 3600 }));
    const ask = (ageSeconds: number, confirmed: boolean) =>
      report({
        leases: { leases: [{ id: "L2", uid: 1000, user: "bob", requestedSeconds: 72 * 3600, ageSeconds, confirmed }] },
      });
    const first = sim.send(ask(0, false));
    expect(actionsOf(first, "lease-decisions")).toEqual([
      {
        kind: "lease-decisions",
        decisions: [
          {
            id: "L2",
            accepted: true,
            clamped: true,
            effectiveExpiryMs: T0 + 24 * HOUR,
            effectiveRemainingSeconds: 24 * 3600,
            maxKeepRunningSeconds: 24 * 3600,
            message: expect.stringMatching(/clamped to max-keep-running 1d/),
          },
        ],
      },
    ]);
    // Confirmed and unchanged: not repeated.
    sim.now += 15 * SECOND;
    expect(actionsOf(sim.send(ask(15, true)), "lease-decisions")).toEqual([]);
    // Held until the clamp, then the notice.
    let age = 15;
    const decisions = sim.advance(24 * HOUR, {
      tickMs: MINUTE,
      reportEveryMs: MINUTE,
      makeReport: () => ask((age += 60), true),
    });
    const pending = decisions.find((d) => d.explanation.to === "StoppingPending");
    // Decisions run every minute from T0 + 15 s: the first one after the clamped expiry.
    expect(pending?.explanation.atMs).toBe(T0 + 24 * HOUR + 15 * SECOND);
  });

  it("refuses a lease with a non-positive duration", () => {
    const sim = new Sim();
    const decision = sim.send(
      report({ leases: { leases: [{ id: "L3", uid: 1000, user: "eve", requestedSeconds: -5, ageSeconds: 0 }] } }),
    );
    expect(actionsOf(decision, "lease-decisions")[0]?.decisions[0]).toMatchObject({
      accepted: false,
      message: expect.stringMatching(/must be positive/),
    });
    expect(decision.explanation.vetoes).toEqual([]);
  });

  it("caps an inhibitor lock at max-keep-running from the first time it was seen", () => {
    const locked = () =>
      report({
        inhibitors: { locks: [{ who: "sleep", why: "forgotten", what: "idle", mode: "block", uid: 1000, pid: 5 }] },
      });
    const sim = new Sim(testPolicy({ maxKeepRunningSeconds: 3 * 3600 }));
    sim.send(locked());
    const decisions = sim.advance(4 * HOUR, { tickMs: MINUTE, reportEveryMs: MINUTE, makeReport: locked });
    const pending = decisions.find((d) => d.explanation.to === "StoppingPending");
    expect(pending?.explanation.atMs).toBe(T0 + 3 * HOUR);
  });
});

describe("decide: weak evidence", () => {
  const codeServer = () =>
    report({
      codeServer: {
        instances: [
          {
            user: "alice",
            uid: 1000,
            heartbeatFile: "/home/alice/.local/share/code-server/heartbeat",
            heartbeatAgeSeconds: 20,
          },
        ],
      },
    });

  it("a connected browser holds the VM for at most weak-activity-max after the last strong evidence", () => {
    const sim = activeSim(testPolicy({ weakActivityMaxSeconds: 4 * 3600, idleTimeoutSeconds: 3600 }));
    const decisions = sim.advance(6 * HOUR, { tickMs: MINUTE, reportEveryMs: MINUTE, makeReport: codeServer });
    const pending = decisions.find((d) => d.explanation.to === "StoppingPending");
    // The weak clock stops at T0 (last input) + 4 h; the notice follows one idle-timeout later.
    expect(pending?.explanation.atMs).toBe(T0 + 5 * HOUR);
    expect(pending?.explanation.readings.find((r) => r.signal === "code-server")).toMatchObject({
      strength: "weak",
      note: expect.stringMatching(/past weak-activity-max/),
    });
  });

  it("Jupyter kernel connections without activity are weak too", () => {
    const jupyter = () =>
      report({
        jupyter: {
          servers: [
            {
              url: "http://127.0.0.1:8888/",
              reachable: true,
              kernels: [
                { id: "k1", name: "python3", executionState: "idle", lastActivityAgeSeconds: 99_999, connections: 2 },
              ],
            },
          ],
        },
      });
    const sim = activeSim(testPolicy({ weakActivityMaxSeconds: 3600 }));
    const decisions = sim.advance(3 * HOUR, { tickMs: MINUTE, reportEveryMs: MINUTE, makeReport: jupyter });
    expect(decisions.find((d) => d.explanation.to === "StoppingPending")?.explanation.atMs).toBe(T0 + 2 * HOUR);
  });
});

describe("decide: failed sources are never idleness", () => {
  const kernels = () =>
    report({
      jupyter: {
        servers: [
          {
            url: "http://127.0.0.1:8888/",
            reachable: true,
            kernels: [{ id: "k1", name: "python3", executionState: "idle", lastActivityAgeSeconds: 30 }],
          },
        ],
      },
    });
  const jupyterFailed = () =>
    report({ sources: sources({ jupyter: { state: SourceState.FAILED, message: "timeout after 5s" } }) });

  it("a source that fails after showing kernels holds the VM, for a bounded time", () => {
    const policy = testPolicy({ weakActivityMaxSeconds: 4 * 3600 });
    const sim = new Sim(policy);
    sim.send(kernels());
    sim.now += 15 * SECOND;
    const blind = sim.send(jupyterFailed());
    expect(blind.explanation.blind).toEqual([
      expect.objectContaining({
        source: "jupyter",
        message: "timeout after 5s",
        holdsUntilMs: sim.now + blindHoldSeconds(policy) * 1000,
      }),
    ]);
    expect(blind.explanation.vetoes[0]?.detail).toMatch(
      /jupyter cannot be read \(timeout after 5s\) and had activity to show/,
    );
    const decisions = sim.advance(5 * HOUR, { tickMs: MINUTE, reportEveryMs: MINUTE, makeReport: jupyterFailed });
    const pending = decisions.find((d) => d.explanation.to === "StoppingPending");
    expect(pending?.explanation.atMs).toBe(T0 + 15 * SECOND + 4 * HOUR);
    expect(actionsOf(pending!, "notice")[0]?.reason).toMatch(/cannot read: jupyter/);
  });

  it("a source that failed with nothing to show does not hold the VM", () => {
    const sim = new Sim();
    sim.send(jupyterFailed());
    const decisions = sim.advance(HOUR, { tickMs: MINUTE, reportEveryMs: MINUTE, makeReport: jupyterFailed });
    expect(transitions(decisions)).toEqual(["Active→StoppingPending"]);
  });

  it("an unreachable Jupyter server that had kernels holds the VM", () => {
    const unreachable = () =>
      report({ jupyter: { servers: [{ url: "http://127.0.0.1:8888/", reachable: false, error: "ECONNREFUSED" }] } });
    // A blind source holds for max(weak-activity-max, idle-timeout): 4h here, over the 2h looked at.
    const sim = new Sim(testPolicy({ weakActivityMaxSeconds: (4 * HOUR) / 1000 }));
    sim.send(kernels());
    const decisions = sim.advance(2 * HOUR, { tickMs: MINUTE, reportEveryMs: MINUTE, makeReport: unreachable });
    expect(actionsOf(decisions, "notice")).toEqual([]);
    expect(decisions.at(-1)!.explanation.vetoes[0]?.detail).toMatch(
      /jupyter http:\/\/127\.0\.0\.1:8888\/ cannot be read \(ECONNREFUSED\)/,
    );
  });

  it("leases last seen are carried forward while the lease source fails", () => {
    const lease = report({
      leases: {
        leases: [{ id: "L1", uid: 1000, user: "alice", requestedSeconds: 3 * 3600, ageSeconds: 0, confirmed: true }],
      },
    });
    const leasesFailed = () =>
      report({ sources: sources({ leases: { state: SourceState.FAILED, message: "state file unreadable" } }) });
    const sim = new Sim();
    sim.send(lease);
    const decisions = sim.advance(4 * HOUR, { tickMs: MINUTE, reportEveryMs: MINUTE, makeReport: leasesFailed });
    expect(decisions.find((d) => d.explanation.to === "StoppingPending")?.explanation.atMs).toBe(T0 + 3 * HOUR);
    expect(decisions[10]!.explanation.vetoes[0]?.detail).toMatch(/last known; leases unreadable now/);
  });
});

describe("decide: observe mode", () => {
  it("records would-stop with the same reason as enforce, stops nothing, once per idle episode", () => {
    const enforce = activeSim(testPolicy());
    const enforced = enforce.idleFor(HOUR + 10 * MINUTE + 15 * SECOND);
    const observe = activeSim(testPolicy({ mode: "observe" }));
    const observed = observe.idleFor(3 * HOUR);
    expect(actionsOf(observed, "stop")).toEqual([]);
    const wouldStop = actionsOf(observed, "would-stop");
    expect(wouldStop).toHaveLength(1);
    expect(wouldStop[0]!.reason.replace(/o-\w+/, "ID")).toBe(
      actionsOf(enforced, "stop")[0]!.reason.replace(/n-\w+/, "ID"),
    );
    expect(actionsOf(observed, "notice")[0]).toMatchObject({ mode: "observe" });
    expect(actionsOf(observed, "event").map((e) => e.reason)).toContain("IdleWouldStop");
    expect(observe.state).toBe("StoppingPending");
    expect(observe.record!.notice?.wouldStopAtMs).toBeDefined();
    // Activity ends the episode as usual.
    observe.now += MINUTE;
    expect(observe.send(typing()).next.state).toBe("Active");
  });

  it("switching from observe to enforce during a pending stop sends a fresh notice instead of stopping", () => {
    const sim = activeSim(testPolicy({ mode: "observe" }));
    sim.idleFor(HOUR + 20 * MINUTE);
    const oldId = sim.record!.notice!.id;
    sim.policy = testPolicy();
    sim.now += 15 * SECOND;
    const decision = sim.send(idle());
    expect(actionsOf(decision, "stop")).toEqual([]);
    expect(actionsOf(decision, "notice-cleared")[0]?.id).toBe(oldId);
    expect(actionsOf(decision, "notice")[0]).toMatchObject({ mode: "enforce", stopInSeconds: 600 });
  });
});

describe("decide: agent lost", () => {
  it("AgentLost after agent-lost-after without a report, never stopped, and the pending notice is withdrawn", () => {
    const sim = activeSim();
    sim.idleFor(HOUR);
    expect(sim.state).toBe("StoppingPending");
    sim.connected = false;
    const decisions = sim.advance(3 * 24 * HOUR, { tickMs: MINUTE });
    expect(transitions(decisions)).toEqual(["StoppingPending→AgentLost"]);
    expect(decisions.find((d) => d.explanation.to === "AgentLost")!.explanation.atMs - (T0 + HOUR)).toBe(5 * MINUTE);
    expect(actionsOf(decisions, "notice-cleared")).toHaveLength(1);
    expect(actionsOf(decisions, "event").map((e) => `${e.type}/${e.reason}`)).toEqual(["Warning/AgentLost"]);
    expect(actionsOf(decisions, "stop")).toEqual([]);
  });

  it("AgentLost → Active when reports resume; the lost time does not count as idle", () => {
    const sim = activeSim();
    sim.idleFor(30 * MINUTE);
    sim.advance(2 * HOUR, { tickMs: MINUTE });
    expect(sim.state).toBe("AgentLost");
    const back = sim.send(idle());
    expect(back.next.state).toBe("Active");
    expect(actionsOf(back, "event")[0]).toMatchObject({ reason: "AgentBack" });
    // 30 min of idleness before the loss; none during it.
    expect(back.explanation.idleSeconds).toBe(30 * 60);
    const decisions = sim.idleFor(30 * MINUTE);
    expect(transitions(decisions)).toEqual(["Active→StoppingPending"]);
  });

  it("AgentLost → Active from a new boot (the guest powered itself off and was started again): the idle clock starts afresh", () => {
    const sim = activeSim();
    sim.idleFor(50 * MINUTE);
    sim.advance(2 * HOUR, { tickMs: MINUTE });
    expect(sim.state).toBe("AgentLost");
    // Uptime 40 s: this machine booted after the last Report, so nothing of the old boot's idle time carries over.
    const back = sim.send(report({ system: { cpuCount: 4, uptimeSeconds: 40 } }));
    expect(back.next.state).toBe("Active");
    expect(actionsOf(back, "event")[0]).toMatchObject({
      reason: "AgentBack",
      message: expect.stringMatching(/new boot/),
    });
    expect(back.next.clock.lastActivityAtMs).toBe(sim.now);
    // Fifty idle minutes before the loss would have put it within ten minutes of a notice; now a full timeout is ahead.
    expect(transitions(sim.idleFor(50 * MINUTE))).toEqual([]);
  });

  it("stop-when-agent-lost-after stops a VM whose agent stays silent", () => {
    const sim = activeSim(testPolicy({ stopWhenAgentLostAfterSeconds: 6 * 3600 }));
    const decisions = sim.advance(7 * HOUR, { tickMs: MINUTE });
    expect(transitions(decisions)).toEqual(["Active→AgentLost", "AgentLost→Stopping"]);
    const [stop] = actionsOf(decisions, "stop");
    expect(stop).toMatchObject({ trigger: "agent-lost", reason: expect.stringMatching(/no report for 6h/) });
    expect(decisions.find((d) => d.explanation.to === "Stopping")!.explanation.atMs).toBe(T0 + 6 * HOUR);
  });

  it("stop-when-agent-lost-after in observe mode records would-stop once", () => {
    const sim = activeSim(testPolicy({ stopWhenAgentLostAfterSeconds: 3600, mode: "observe" }));
    const decisions = sim.advance(5 * HOUR, { tickMs: MINUTE });
    expect(actionsOf(decisions, "would-stop")).toEqual([expect.objectContaining({ trigger: "agent-lost" })]);
    expect(actionsOf(decisions, "stop")).toEqual([]);
    expect(sim.state).toBe("AgentLost");
  });

  it("a stop decided for a lost agent is cancelled when the agent reports again", () => {
    const sim = activeSim(testPolicy({ stopWhenAgentLostAfterSeconds: 3600 }));
    sim.advance(HOUR + MINUTE, { tickMs: MINUTE });
    expect(sim.state).toBe("Stopping");
    const back = sim.send(idle());
    expect(back.next.state).toBe("Active");
    expect(actionsOf(back, "cancel-stop")).toHaveLength(1);
  });
});

describe("decide: autostop disabled", () => {
  it("tracks the idle clock but never sends a notice", () => {
    const sim = activeSim(testPolicy({ autostopEnabled: false }));
    const decisions = sim.idleFor(5 * HOUR);
    expect(sim.state).toBe("Active");
    expect(actionsOf(decisions, "notice")).toEqual([]);
    expect(decisions.at(-1)!.explanation.idleSeconds).toBe(5 * 3600);
    expect(decisions.at(-1)!.summary).toMatch(/autostop off/);
  });

  it("disabling it during the grace period cancels the pending stop", () => {
    const sim = activeSim();
    sim.idleFor(HOUR);
    sim.policy = testPolicy({ autostopEnabled: false });
    sim.now += 15 * SECOND;
    const decision = sim.step();
    expect(decision.next.state).toBe("Active");
    expect(actionsOf(decision, "notice-cleared")[0]?.reason).toBe("autostop was disabled");
  });
});

describe("decide: terminal output", () => {
  const output = (outputAgeSeconds: number) =>
    report({ sessions: { sessions: [ttySession(99_999, { outputAgeSeconds })] } });

  it("does not count unless tty-output-counts is set", () => {
    const sim = activeSim();
    const decisions = sim.advance(HOUR, { reportEveryMs: 15 * SECOND, makeReport: () => output(2) });
    expect(transitions(decisions)).toEqual(["Active→StoppingPending"]);
  });

  it("keeps the VM Active when set, but never cancels a pending stop (the notice is output itself)", () => {
    const policy = testPolicy({ thresholds: { ttyOutputCounts: true } });
    const sim = activeSim(policy);
    expect(transitions(sim.advance(2 * HOUR, { reportEveryMs: 15 * SECOND, makeReport: () => output(2) }))).toEqual([]);
    const quiet = new Sim(policy);
    quiet.send(typing());
    quiet.idleFor(HOUR);
    expect(quiet.state).toBe("StoppingPending");
    quiet.now += 15 * SECOND;
    const decision = quiet.send(output(1));
    expect(decision.next.state).toBe("StoppingPending");
    expect(decision.explanation.readings.find((r) => r.signal === "tty-output")).toMatchObject({ counted: false });
  });
});

describe("decide: ages, not clocks", () => {
  it("subtracts the sample age of a held-back report and the signal's own age from the receive time", () => {
    const r = report({ sampleAgeSeconds: 120, sessions: { sessions: [ttySession(30)] } });
    const decision = decide(
      T0,
      testPolicy(),
      { agentConnected: true, latestReport: { report: r, receivedAtMs: T0 } },
      {
        ...initialRecord(T0 - HOUR),
        state: "Active",
        clock: { lastActivityAtMs: T0 - HOUR, lastStrongAtMs: T0 - HOUR },
      },
    );
    expect(decision.next.clock.lastActivityAtMs).toBe(T0 - 150 * SECOND);
  });

  it("passing the same report again changes nothing", () => {
    const sim = activeSim();
    const first = sim.record!;
    const again = sim.step();
    expect(again.next.clock.lastActivityAtMs).toBe(first.clock.lastActivityAtMs);
    expect(again.actions).toEqual([]);
  });
});

describe("decide: policy errors", () => {
  it("reports an error set once, as an action and a Warning event, and again only when it changes", () => {
    const sim = activeSim();
    sim.policyStatus = {
      errors: [{ key: "workstation.aik8s.run/idle-timeout", value: "2hh", message: "not a duration" }],
      fallback: "previous-valid",
    };
    sim.now += SECOND;
    const first = sim.step();
    expect(actionsOf(first, "policy-error")).toEqual([
      { kind: "policy-error", errors: sim.policyStatus.errors, fallback: "previous-valid" },
    ]);
    expect(actionsOf(first, "event")[0]).toMatchObject({
      type: "Warning",
      reason: "PolicyInvalid",
      message: expect.stringMatching(/keeps its last valid policy/),
    });
    sim.now += SECOND;
    expect(sim.step().actions).toEqual([]);
    sim.policyStatus = undefined; // the caller may simply stop passing it once the errors are fixed
    sim.now += SECOND;
    expect(actionsOf(sim.step(), "event")[0]).toMatchObject({ type: "Normal", reason: "PolicyValid" });
    sim.now += SECOND;
    expect(sim.step().actions).toEqual([]);
  });
});

describe("decide: wake-up and status", () => {
  it("says when the decision can next change without input", () => {
    const sim = activeSim();
    expect(sim.decisions[0]!.wakeAtMs).toBe(T0 + 5 * MINUTE); // agent-lost-after comes first
    sim.idleFor(HOUR);
    const notice = sim.record!.notice!;
    // Reports every 15 s keep pushing agent-lost-after; the notice repeat (5 m) comes before the deadline (10 m).
    expect(sim.decisions.at(-1)!.wakeAtMs).toBe(notice.lastSentAtMs + 5 * MINUTE);
    sim.connected = false;
    sim.now += 4 * MINUTE + 59 * SECOND;
    expect(sim.step().wakeAtMs).toBe(sim.record!.lastReportAtMs! + 5 * MINUTE);
  });

  it("statusFor gives what ws-lease status shows", () => {
    const sim = activeSim();
    sim.idleFor(HOUR);
    const status = statusFor(sim.record!, sim.policy, sim.now + MINUTE);
    expect(status).toMatchObject({
      state: 3,
      mode: 1,
      explanation: expect.stringMatching(/^StoppingPending · idle 1h/),
    });
    expect(status.stopInSeconds).toBe(9 * 60);
    expect(status.idleSeconds).toBe(3600 + 60);
  });
});
