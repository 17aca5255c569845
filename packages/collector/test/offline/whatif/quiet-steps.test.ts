// whatif skips the steps that cannot change a replay (docs/whatif.md, "Steps skipped"): a stopped
// VM's steps that show nothing new, and a plainly Active VM's steps between two that say the same.
// Skipping must change nothing: every outcome and every decision that does something must be what
// deciding at every step gives. Checked on seeded random fleets that mix typing, Jupyter, SSH,
// levels crossing their thresholds, leases, inhibitors, unreadable GPUs and an agent coming and
// going, under policies that use every knob the skipping depends on.
import { isDeepStrictEqual } from "node:util";
import { describe, expect, it } from "vitest";
import type { Decision } from "../../../src/engine/types.js";
import { parseWhatifArgs, replayPolicy } from "../../../src/offline/whatif/args.js";
import { type StepSample, stepGrid, type VmHistory } from "../../../src/offline/whatif/history.js";
import { simulateVm } from "../../../src/offline/whatif/simulate.js";
import { replaySweepSlice } from "../../../src/offline/whatif/sweep.js";
import { quiet } from "../../fixtures/whatif-readings.js";

const START = Date.parse("2026-11-23T00:00:00Z");
const MIN = 60_000;
const STEPS = 2 * 24 * 60;
const grid = stepGrid(START, START + STEPS * MIN, 60);

/** A seeded generator (a linear congruential one): the same fleet on every run. */
function random(seed: number): () => number {
  let state = seed;
  return () => {
    state = (state * 1_103_515_245 + 12_345) % 2_147_483_648;
    return state / 2_147_483_648;
  };
}

/** Two days of one VM: spells of one kind of use (typing, a notebook at work, a GPU job, SSH forwards, an inhibitor) or none. */
function randomVm(index: number, next: () => number): VmHistory {
  const samples: Array<StepSample | undefined> = [];
  const last: Record<string, number> = {};
  let spell = 0;
  let connected = true;
  let leaseExpiresAtMs: number | undefined;
  for (let minute = 0; minute <= STEPS; minute++) {
    const atMs = START + minute * MIN;
    if (next() < 0.02) spell = Math.floor(next() * 6);
    if (next() < 0.005) connected = !connected;
    if (next() < 0.003) leaseExpiresAtMs = atMs + Math.floor(next() * 180) * MIN;
    if (!connected) {
      samples.push(next() < 0.5 ? undefined : { connected: false, gpuCount: 1 });
      continue;
    }
    if (spell === 1 || (spell === 2 && next() < 0.3)) last["tty-input"] = atMs - Math.floor(next() * 50_000);
    if (spell === 3 && next() < 0.5) last["jupyter-kernel"] = atMs - 10_000;
    if (spell === 4) last["remote-connected"] = atMs;
    if (spell === 5 && next() < 0.2) last["remote-session"] = atMs - 2_000;
    if (next() < 0.01) last["tty-output"] = atMs - 1_000;
    const cpuBusy = spell === 3 ? next() < 0.8 : next() < 0.05;
    samples.push({
      connected: true,
      gpuCount: 1,
      ...(leaseExpiresAtMs !== undefined ? { leaseExpiresAtMs } : {}),
      readings: {
        cpuBusyRatio: cpuBusy ? 0.7 : 0.02 + next() * 0.1,
        userProcessCpuCores: spell === 2 ? 0.6 : next() * 0.2,
        networkBytesPerSecond: next() < 0.02 ? 5e6 : 800 * next(),
        diskBytesPerSecond: 1_000,
        gpuCount: 1,
        // Now and then the GPU's utilization is unreadable ([N/A]).
        gpuUtilization: next() < 0.02 ? {} : { "0": spell === 3 && next() < 0.5 ? 0.9 : 0.01 },
        gpuProcesses: spell === 3 ? 1 : 0,
        jupyterBusyKernels: spell === 3 && next() < 0.3 ? 1 : 0,
        jupyterConnectedKernels: spell === 4 ? 1 : 0,
        idleInhibitors: spell === 5 && next() < 0.1 ? 1 : 0,
        lastActivityAtMs: { ...last },
      },
    });
  }
  return { namespace: "ns", name: `vm-${index}`, samples };
}

function fleet(seed: number, count: number): VmHistory[] {
  const next = random(seed);
  return Array.from({ length: count }, (_, index) => randomVm(index, next));
}

// The base policy as whatif builds it for a range of the two days (--from now-2d at the grid's end).
const parsed = parseWhatifArgs(
  ["--prometheus", "http://prometheus:9090", "--from", "now-2d"],
  START + STEPS * MIN,
  () => "",
);
if (parsed === "help" || "kind" in parsed) throw new Error("unexpected help");
const base = parsed.base;

/** The knobs the skipping reads: the idle timeout, unattended-max, weak-activity-max, thresholds, observe mode. */
const POLICIES = (
  [
    { "idle-timeout": "30m" },
    { "idle-timeout": "10m", "grace-period": "2m" },
    { "idle-timeout": "45m", "unattended-max": "1h" },
    { "idle-timeout": "20m", mode: "observe" },
    { "idle-timeout": "15m", "weak-activity-max": "20m", "cpu-busy-threshold": "10%" },
  ] as Array<Record<string, string>>
).map((overrides) => replayPolicy(base, overrides, 60));

/** A decision that did something: a transition or an action (those the replay's outcome follows). */
function doing(decisions: string[]): (decision: Decision) => void {
  return (decision) => {
    const actions = decision.actions.filter((action) => action.kind !== "lease-decisions");
    if (actions.length > 0 || decision.explanation.from !== decision.explanation.to)
      decisions.push(
        `${decision.explanation.atMs} ${decision.explanation.from}>${decision.explanation.to} ${actions.map((a) => a.kind)}`,
      );
  };
}

describe("whatif skips steps that cannot change the replay", () => {
  it("gives every outcome and every decision that does something as deciding at every step does", () => {
    let decisionsEveryStep = 0;
    let decisionsSkipping = 0;
    let stops = 0;
    const differing: string[] = [];
    for (const [seed, history] of fleet(7, 24).entries()) {
      for (const [which, policy] of POLICIES.entries()) {
        const every: string[] = [];
        const skipping: string[] = [];
        const onEvery = doing(every);
        const onSkipping = doing(skipping);
        const full = simulateVm(history, {
          policy,
          grid,
          falseStopWindowSeconds: 900,
          everyStep: true,
          onDecision: (decision) => {
            decisionsEveryStep++;
            onEvery(decision);
          },
        });
        const fast = simulateVm(history, {
          policy,
          grid,
          falseStopWindowSeconds: 900,
          onDecision: (decision) => {
            decisionsSkipping++;
            onSkipping(decision);
          },
        });
        stops += full.stops.length;
        if (!isDeepStrictEqual(full, fast) || !isDeepStrictEqual(every, skipping))
          differing.push(`VM ${seed} under policy ${which}`);
      }
    }
    expect(differing).toEqual([]);
    // The fleet is varied enough to mean something (it changes at most steps: little is skipped).
    expect(stops).toBeGreaterThan(150);
    expect(decisionsSkipping).toBeLessThan(decisionsEveryStep);
  });

  it("decides at a small part of the steps of a person's working days, with the same outcome", () => {
    // Typing from 9 to 17 with a lunch break, a busy CPU while typing, quiet nights (bench/whatif.ts's fleet).
    const samples: StepSample[] = [];
    let typedAtMs = START - MIN;
    for (let minute = 0; minute <= STEPS; minute++) {
      const atMs = START + minute * MIN;
      const ofDay = minute % (24 * 60);
      const working = ofDay >= 9 * 60 && ofDay < 17 * 60 && !(ofDay >= 12 * 60 && ofDay < 12 * 60 + 45);
      if (working) typedAtMs = atMs - 7_000;
      samples.push({
        connected: true,
        gpuCount: 1,
        readings: quiet({
          ...(working ? { cpuBusyRatio: 0.3, userProcessCpuCores: 0.6 } : {}),
          lastActivityAtMs: { "tty-input": typedAtMs },
        }),
      });
    }
    const history: VmHistory = { namespace: "ns", name: "person", samples };
    const policy = POLICIES[0]!;
    let every = 0;
    let skipping = 0;
    const full = simulateVm(history, {
      policy,
      grid,
      falseStopWindowSeconds: 900,
      everyStep: true,
      onDecision: () => every++,
    });
    const fast = simulateVm(history, { policy, grid, falseStopWindowSeconds: 900, onDecision: () => skipping++ });
    expect(fast).toEqual(full);
    // The first night, two lunches and two evenings: each back in the morning or after lunch, but the last.
    expect(full.stops.map((stop) => stop.endedBy)).toEqual([
      "activity",
      "activity",
      "activity",
      "activity",
      "end-of-range",
    ]);
    expect(skipping).toBeLessThan(every / 2);
  });

  it("gives a sweep's rows (the reports shared between values, made only where a value needs one) as every step does", () => {
    const histories = fleet(11, 24);
    const swept = replaySweepSlice(histories, POLICIES, grid, 900);
    POLICIES.forEach((policy, index) => {
      const everyStep = histories.map((history) =>
        simulateVm(history, { policy, grid, falseStopWindowSeconds: 900, everyStep: true }),
      );
      expect(swept[index]).toEqual(everyStep);
    });
  });
});
