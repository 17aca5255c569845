// The live collector, `replay` and `whatif` drive a VM through the same loop (loop/step.ts): on one
// trace they must make the same decisions at the same times. The trace is built from the readings
// whatif reads back from Prometheus, so all three see the same Reports.
import { describe, expect, it } from "vitest";
import { BUILTIN_DEFAULT_POLICY } from "../../src/engine/policy.js";
import type { Action, Decision, Policy } from "../../src/engine/types.js";
import { replayTrace } from "../../src/offline/replay/replay.js";
import { formatTraceLine, type TraceHostReading } from "../../src/loop/trace.js";
import type { VmHistory } from "../../src/offline/whatif/history.js";
import { reportFromReadings, type ReportReadings } from "../../src/model/readings.js";
import { simulateVm } from "../../src/offline/whatif/simulate.js";
import { startFleet } from "./fleet-harness.js";

const START = Date.parse("2026-05-04T09:00:00Z");
const STEP_MS = 60_000;
const STEPS = 30;
const LAST_INPUT_MS = START + 9 * STEP_MS - 5_000;

const policy: Policy = {
  ...BUILTIN_DEFAULT_POLICY,
  autostopEnabled: true,
  mode: "enforce",
  idleTimeoutSeconds: 600,
  gracePeriodSeconds: 120,
  noticeRepeatSeconds: 60,
  reportIntervalSeconds: 60,
  agentLostAfterSeconds: 3600,
  thresholds: { ...BUILTIN_DEFAULT_POLICY.thresholds },
};

/** Someone types until minute 9, then nobody: the VM goes idle, gets a notice, and is stopped. */
function readingsAt(atMs: number): ReportReadings {
  return {
    cpuBusyRatio: 0.02,
    userProcessCpuCores: 0.01,
    networkBytesPerSecond: 300,
    diskBytesPerSecond: 1000,
    gpuCount: 0,
    gpuUtilization: {},
    gpuProcesses: 0,
    jupyterBusyKernels: 0,
    jupyterConnectedKernels: 0,
    idleInhibitors: 0,
    lastActivityAtMs: { "tty-input": Math.min(atMs - 5_000, LAST_INPUT_MS) },
  };
}

const stepTimes = Array.from({ length: STEPS }, (_, index) => START + index * STEP_MS);
const reportAt = (atMs: number) => reportFromReadings(readingsAt(atMs), atMs, { intervalSeconds: STEP_MS / 1000 });

interface Seen {
  atMs: number;
  from: string;
  to: string;
  actions: string[];
}

const seen = (decision: Decision): Seen => ({
  atMs: decision.explanation.atMs,
  from: decision.explanation.from,
  to: decision.explanation.to,
  actions: decision.actions.map((action: Action) => action.kind),
});

/** Decisions that changed something, up to and including the one that stops the VM (whatif stops replaying there). */
function untilStop(decisions: Seen[]): Seen[] {
  const changed = decisions.filter((d) => d.from !== d.to || d.actions.length > 0);
  const stop = changed.findIndex((d) => d.actions.includes("stop"));
  return stop < 0 ? changed : changed.slice(0, stop + 1);
}

describe("one loop for the live collector, replay and whatif", () => {
  it("makes the same decisions at the same times on one trace", async () => {
    // Live: the Fleet on a virtual clock, fed each Report at its time; deadlines fire on their own.
    const live = startFleet(policy, START);
    const session = live.connect({ namespace: "lab", name: "ws" });
    for (const atMs of stepTimes) {
      await live.clock.advanceTo(atMs);
      live.report(session, reportAt(atMs));
    }
    await live.clock.advanceTo(stepTimes.at(-1)! + STEP_MS);
    const liveDecisions = untilStop(live.transitions.map((t) => seen(t.decision)));

    // Replay: the same Reports as a trace, evaluated only at events and named deadlines.
    const trace = [
      formatTraceLine(0, "lab/ws", { event: "agent-connected" }, START),
      ...stepTimes.map((atMs) => formatTraceLine((atMs - START) / 1000, "lab/ws", { report: reportAt(atMs) }, atMs)),
    ].join("\n");
    const replayed = replayTrace(trace, { defaults: policy, tickSeconds: 0 });
    const replayDecisions = untilStop(
      replayed.flatMap((entry) =>
        entry.kind === "decision"
          ? [{ atMs: entry.atMs, from: entry.from, to: entry.to, actions: entry.actions.map((a) => a.kind) }]
          : [],
      ),
    );

    // whatif: the same readings as Prometheus would return them, on a grid of the report interval.
    const history: VmHistory = {
      namespace: "lab",
      name: "ws",
      samples: stepTimes.map((atMs) => ({ connected: true, readings: readingsAt(atMs), gpuCount: 0 })),
    };
    const simulated: Seen[] = [];
    const outcome = simulateVm(history, {
      policy,
      grid: { startMs: START, stepMs: STEP_MS, count: STEPS },
      falseStopWindowSeconds: 900,
      onDecision: (d) => simulated.push(seen(d)),
    });
    const whatifDecisions = untilStop(simulated);

    // The story itself: active, notice at last input + idle-timeout, stop after the grace period.
    const transitions = liveDecisions
      .filter((d) => d.from !== d.to)
      .map((d) => `${(d.atMs - START) / 1000}s ${d.from}→${d.to}`);
    expect(transitions).toEqual([
      "0s Unknown→Active",
      "1135s Active→StoppingPending",
      "1255s StoppingPending→Stopping",
    ]);
    expect(liveDecisions.at(-1)!.actions).toContain("stop");
    expect(live.stops.map((stop) => stop.atMs - START)).toEqual([1_255_000]);
    expect(outcome.stops.map((stop) => stop.atMs - START)).toEqual([1_255_000]);

    expect(replayDecisions).toEqual(liveDecisions);
    expect(whatifDecisions).toEqual(liveDecisions);
  });
});

describe("one loop with host-side readings", () => {
  // The agent reports for three steps, then is gone; the host's vCPUs stay busy until minute 15,
  // then the host is quiet: notice at minute 25 (15 + idle-timeout), stop after the grace period.
  const hostPolicy: Policy = {
    ...policy,
    agentLostAfterSeconds: 120,
    agentLostMaxSeconds: 600,
    thresholds: { ...BUILTIN_DEFAULT_POLICY.thresholds },
  };
  const WINDOW_S = 120;
  const LAST_REPORT = 2;
  const steps = Array.from({ length: 40 }, (_, index) => START + index * STEP_MS);
  const hostAt = (atMs: number): TraceHostReading => ({
    state: "ok",
    windowSeconds: WINDOW_S,
    vcpus: 2,
    vcpuBusyRatio: atMs <= START + 15 * STEP_MS ? 0.8 : 0.004,
    networkBytesPerSecond: 1500,
    diskBytesPerSecond: 0,
    vncConnections: 0,
    consoleConnections: 0,
    portForwardTunnels: 0,
  });

  it("makes the same decisions at the same times: live, replay and whatif", async () => {
    const live = startFleet(hostPolicy, START);
    const session = live.connect({ namespace: "lab", name: "ws" });
    for (const [index, atMs] of steps.entries()) {
      await live.clock.advanceTo(atMs);
      if (index === LAST_REPORT + 1) live.fleet.disconnected(session);
      live.fleet.hostBatch({
        ok: true,
        atMs,
        windowSeconds: WINDOW_S,
        readings: new Map([["lab/ws", { ...hostAt(atMs), atMs }]]),
      });
      if (index <= LAST_REPORT) live.report(session, reportAt(atMs));
    }
    await live.clock.advanceTo(steps.at(-1)! + STEP_MS);
    const liveDecisions = untilStop(live.transitions.map((t) => seen(t.decision)));

    const trace = [
      formatTraceLine(0, "lab/ws", { event: "agent-connected" }, START),
      ...steps.flatMap((atMs, index) => [
        ...(index === LAST_REPORT + 1
          ? [formatTraceLine((atMs - START) / 1000, "lab/ws", { event: "agent-disconnected" }, atMs)]
          : []),
        formatTraceLine((atMs - START) / 1000, "lab/ws", { host: hostAt(atMs) }, atMs),
        ...(index <= LAST_REPORT
          ? [formatTraceLine((atMs - START) / 1000, "lab/ws", { report: reportAt(atMs) }, atMs)]
          : []),
      ]),
    ].join("\n");
    const replayDecisions = untilStop(
      replayTrace(trace, { defaults: hostPolicy, tickSeconds: 0 }).flatMap((entry) =>
        entry.kind === "decision"
          ? [{ atMs: entry.atMs, from: entry.from, to: entry.to, actions: entry.actions.map((a) => a.kind) }]
          : [],
      ),
    );

    const history: VmHistory = {
      namespace: "lab",
      name: "ws",
      samples: steps.map((atMs, index) => ({
        connected: index <= LAST_REPORT,
        ...(index <= LAST_REPORT ? { readings: readingsAt(atMs) } : {}),
        gpuCount: 0,
        host: hostAt(atMs),
      })),
    };
    const simulated: Seen[] = [];
    const outcome = simulateVm(history, {
      policy: hostPolicy,
      grid: { startMs: START, stepMs: STEP_MS, count: steps.length },
      falseStopWindowSeconds: 900,
      onDecision: (d) => simulated.push(seen(d)),
    });
    const whatifDecisions = untilStop(simulated);

    const transitions = liveDecisions
      .filter((d) => d.from !== d.to || d.actions.includes("notice"))
      .map((d) => `${(d.atMs - START) / 1000}s ${d.from}→${d.to}${d.actions.includes("notice") ? " notice" : ""}`);
    expect(transitions).toEqual([
      "0s Unknown→Active",
      "240s Active→AgentLost",
      "1500s AgentLost→AgentLost notice",
      // notice-repeat 60s: the reminder.
      "1560s AgentLost→AgentLost notice",
      "1620s AgentLost→Stopping",
    ]);
    expect(live.stops.map((stop) => stop.atMs - START)).toEqual([1_620_000]);
    expect(outcome.stops.map((stop) => ({ at: stop.atMs - START, trigger: stop.trigger }))).toEqual([
      { at: 1_620_000, trigger: "agent-lost" },
    ]);
    expect(replayDecisions).toEqual(liveDecisions);
    expect(whatifDecisions).toEqual(liveDecisions);
  });
});
