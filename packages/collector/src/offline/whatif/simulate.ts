// The counterfactual: replay a VM's recorded history through the real engine
// under another policy. A stop the engine decides is taken as carried out; the
// VM then stays off (saving its VM- and GPU-hours) until the recording shows
// someone using it again — they would have started it — or the VM going away,
// or the end of the range. Activity soon after a stop marks it a likely false stop.
import { shareReportEvidence, useEvidence } from "../../engine/evidence.js";
import type { Decision, Policy, ReceivedReport, StopTrigger, VmRecord } from "../../engine/types.js";
import { newVmLoopState, step, type StepInput } from "../../loop/step.js";
import { type StepGrid, type StepSample, stepSamples, type VmHistory } from "./history.js";
import { uncountedConnections } from "../replay/connected.js";
import { reportFromReadings } from "../../model/readings.js";
import { stepSkipping } from "./skip-steps.js";

export type StopEnd = "activity" | "vm-gone" | "end-of-range";

export interface SimulatedStop {
  atMs: number;
  trigger: StopTrigger;
  reason: string;
  /** What was connected and not counted (a forward judged by its kernel, a page reloading itself). */
  notCounted: string[];
  /** When the VM would have been needed again (or the range/recording ended). */
  untilMs: number;
  endedBy: StopEnd;
  /** What brought the user back, for stops that ended by activity. */
  resumedBy?: string;
  gpus: number;
  savedSeconds: number;
  likelyFalse: boolean;
  /** How long before the stop the person was first told (the notice that ended in it); 0 when none came first. */
  noticeSeconds: number;
}

export interface VmOutcome {
  namespace: string;
  name: string;
  stops: SimulatedStop[];
  vmHoursSaved: number;
  gpuHoursSaved: number;
  likelyFalseStops: number;
  /** Steps at which the VM had a report to replay. */
  reportedSteps: number;
}

export interface SimulationOptions {
  policy: Policy;
  grid: StepGrid;
  falseStopWindowSeconds: number;
  /** Every decision of the replay, in order (the test that holds live, replay and whatif to one loop reads them). */
  onDecision?: (decision: Decision) => void;
  /** Decide at every step, skipping none (docs/metrics.md, "Steps whatif skips"): the tests hold the skipping replay to this one. */
  everyStep?: boolean;
}

/** The most engine calls between two steps (timers that fire between reports). */
const MAX_WAKES_PER_STEP = 16;

interface Stopped {
  atMs: number;
  trigger: StopTrigger;
  reason: string;
  notCounted: string[];
  gpus: number;
  record: VmRecord;
  noticeSeconds: number;
}

/** What the recording shows after `sinceMs` that means someone uses the VM again, or undefined. */
function activityAfter(
  received: ReceivedReport,
  policy: Policy,
  record: VmRecord,
  sinceMs: number,
): { atMs: number; what: string } | undefined {
  // A blind source's hold is no one coming back: the evidence without them (useEvidence) is enough.
  const evidence = useEvidence(received, policy, record.memory);
  let earliest: { atMs: number; what: string } | undefined;
  for (const reading of evidence.readings) {
    if (reading.strength !== "strong" || reading.atMs <= sinceMs) continue;
    const atMs = Math.min(reading.atMs, received.receivedAtMs);
    if (!earliest || atMs < earliest.atMs) earliest = { atMs, what: reading.signal };
  }
  if (earliest) return earliest;
  const nowMs = received.receivedAtMs;
  const veto = evidence.vetoes.find((v) => v.kind !== "blind-source" && (v.untilMs === undefined || v.untilMs > nowMs));
  return veto ? { atMs: nowMs, what: veto.kind } : undefined;
}

/**
 * The Report the collector received at a step, as the agent sent it (undefined where none was), from
 * that step's sample, asked in step order (a lease is known from the step it was first seen). They
 * depend on the recording only, not on the policy: a sweep builds each once and hands it to every
 * replay of the VM at that step, so it dies young instead of a week of them being held (and copied by the GC).
 */
export function reportBuilder(
  grid: StepGrid,
): (sample: StepSample | undefined, index: number) => ReceivedReport | undefined {
  const leaseFirstSeen = new Map<number, number>();
  return (sample, index) => (sample ? synthesize(sample, grid.startMs + index * grid.stepMs) : undefined);

  function synthesize(sample: StepSample, atMs: number): ReceivedReport | undefined {
    if (!sample.connected || !sample.readings) return undefined;
    let lease: { takenAtMs: number; expiresAtMs: number } | undefined;
    if (sample.leaseExpiresAtMs !== undefined && sample.leaseExpiresAtMs > atMs) {
      // The recorded end wobbles by milliseconds from report to report (it is computed from ages): one lease per second.
      const key = Math.round(sample.leaseExpiresAtMs / 1000);
      const takenAtMs = leaseFirstSeen.get(key) ?? atMs;
      leaseFirstSeen.set(key, takenAtMs);
      lease = { takenAtMs, expiresAtMs: sample.leaseExpiresAtMs };
    }
    return {
      receivedAtMs: atMs,
      report: reportFromReadings(sample.readings, atMs, {
        intervalSeconds: grid.stepMs / 1000,
        ...(lease ? { lease } : {}),
      }),
    };
  }
}

/**
 * One VM's replay under one policy, fed step by step: at every step of the grid, in order, needsReport
 * then step; then finish. `step` may be given no Report where `needsReport` said it needs none.
 */
export interface VmReplay {
  /**
   * Whether the replay reads this step (false: it is skipped, as nothing in it can change the
   * outcome). `upcoming`: the next step's sample (undefined at the last step, or where none was recorded).
   */
  needsReport(index: number, sample: StepSample | undefined, upcoming: StepSample | undefined): boolean;
  step(index: number, sample: StepSample | undefined, received: ReceivedReport | undefined): void;
  finish(): VmOutcome;
}

/**
 * Feeds every step of one VM's history to its replays (one, or a sweep's one per value). The Report
 * of a step is made only when a replay needs it (reportBuilder's are asked in step order all the same:
 * a step none needs shows nothing new since one that was made), and its evidence is shared.
 */
export function feedReplays(history: VmHistory, grid: StepGrid, replays: readonly VmReplay[]): void {
  const sampleAt = stepSamples(history);
  const reportAt = reportBuilder(grid);
  let upcoming = grid.count > 0 ? sampleAt(0) : undefined;
  for (let index = 0; index < grid.count; index++) {
    const sample = upcoming;
    upcoming = index + 1 < grid.count ? sampleAt(index + 1) : undefined;
    let needed = false;
    // Every replay is asked (each keeps its answer for step()), not only up to the first that needs it.
    for (const replay of replays) needed = replay.needsReport(index, sample, upcoming) || needed;
    const received = needed ? reportAt(sample, index) : undefined;
    // The sources' evidence of this report is read once for all the values that read the same thresholds.
    if (received) shareReportEvidence(received);
    for (const replay of replays) replay.step(index, sample, received);
  }
}

export function simulateVm(history: VmHistory, options: SimulationOptions): VmOutcome {
  const replay = replayVm(history, options);
  feedReplays(history, options.grid, [replay]);
  return replay.finish();
}

/** What simulateVm does, one step at a time: a sweep steps one VM's replays under every policy together. */
export function replayVm(history: VmHistory, options: SimulationOptions): VmReplay {
  const { policy, grid } = options;
  const windowMs = options.falseStopWindowSeconds * 1000;
  const stops: SimulatedStop[] = [];
  // The VM's one loop, as the live collector keeps it (loop/step.ts).
  let loop = newVmLoopState(policy);
  let stopped: Stopped | undefined;
  let gpus = 0;
  let reportedSteps = 0;
  // When the notice now standing was first sent: cleared when the VM is active again, read at the stop.
  let noticeSinceMs: number | undefined;
  // Which steps cannot change the outcome (skip-steps.ts); needsReport's answer, which step() takes.
  const skipping = options.everyStep ? undefined : stepSkipping(policy, grid);
  let skipped = false;

  const endStop = (untilMs: number, endedBy: StopEnd, resumedBy?: string) => {
    if (!stopped) return;
    const savedSeconds = Math.max(0, (untilMs - stopped.atMs) / 1000);
    stops.push({
      atMs: stopped.atMs,
      trigger: stopped.trigger,
      reason: stopped.reason,
      notCounted: stopped.notCounted,
      untilMs,
      endedBy,
      ...(resumedBy ? { resumedBy } : {}),
      gpus: stopped.gpus,
      savedSeconds,
      likelyFalse: endedBy === "activity" && untilMs - stopped.atMs <= windowMs,
      noticeSeconds: stopped.noticeSeconds,
    });
    stopped = undefined;
    skipping?.stopEnded();
    // The VM boots afresh: a new record, as a collector sees a started VM.
    loop = newVmLoopState(policy);
    noticeSinceMs = undefined;
  };

  const run = (nowMs: number, input: StepInput): Decision => {
    const decision = step(loop, nowMs, input);
    skipping?.decided(decision, nowMs);
    options.onDecision?.(decision);
    for (const action of decision.actions) {
      if (action.kind === "notice" && noticeSinceMs === undefined) noticeSinceMs = nowMs;
      if (action.kind === "notice-cleared" || action.kind === "cancel-stop") noticeSinceMs = undefined;
    }
    const stop = decision.actions.find((action) => action.kind === "stop" || action.kind === "would-stop");
    if (stop && (stop.kind === "stop" || stop.kind === "would-stop")) {
      stopped = {
        atMs: nowMs,
        trigger: stop.trigger,
        reason: stop.reason,
        notCounted: uncountedConnections(decision.explanation),
        gpus,
        record: decision.next,
        noticeSeconds: noticeSinceMs === undefined ? 0 : (nowMs - noticeSinceMs) / 1000,
      };
    }
    return decision;
  };

  const stepAt = (index: number, sample: StepSample | undefined, received: ReceivedReport | undefined): void => {
    const atMs = grid.startMs + index * grid.stepMs;
    if (sample?.gpuCount !== undefined) gpus = sample.gpuCount;
    skipping?.given(sample);
    if (skipped) {
      // Only a sample with readings of a connected agent is skipped: it had a Report (reportBuilder's rule).
      reportedSteps++;
      return;
    }
    if (received) reportedSteps++;

    if (stopped) {
      if (received) {
        const activity = activityAfter(received, policy, stopped.record, stopped.atMs);
        if (!activity) {
          skipping?.foundNoOne(sample);
          return;
        }
        endStop(Math.max(activity.atMs, stopped.atMs), "activity", activity.what);
      } else if (!sample?.connected && stopped.trigger === "idle") {
        // The recorded VM went away (stopped for real, or its agent is gone): nothing more to save.
        endStop(atMs, "vm-gone");
        return;
      } else {
        return;
      }
    }

    loop.connected = sample?.connected === true;
    // The host-side round of this step, then the agent's report, as a trace of the live collector has them.
    if (sample?.host) run(atMs, { kind: "host", reading: { ...sample.host, atMs } });
    let decision = stopped ? undefined : run(atMs, received ? { kind: "report", received } : { kind: "wake" });
    // Timers between two steps (notice deadline, idle timeout) fire at their time, as the collector's tick would.
    const nextMs = atMs + grid.stepMs;
    for (let wake = 0; decision && wake < MAX_WAKES_PER_STEP && !stopped; wake++) {
      const wakeAt = decision.wakeAtMs;
      if (wakeAt === undefined || wakeAt >= nextMs || wakeAt <= decision.explanation.atMs) break;
      decision = run(wakeAt, { kind: "wake" });
    }
  };

  const needsReport = (index: number, sample: StepSample | undefined, upcoming: StepSample | undefined): boolean => {
    skipped =
      skipping?.skips(index, sample, upcoming, { record: loop.record, stopped: stopped !== undefined }) ?? false;
    return !skipped;
  };
  return { needsReport, step: stepAt, finish };

  function finish(): VmOutcome {
    if (stopped) endStop(grid.startMs + (grid.count - 1) * grid.stepMs, "end-of-range");
    return vmOutcome(history, stops, reportedSteps);
  }
}

function vmOutcome(history: VmHistory, stops: SimulatedStop[], reportedSteps: number): VmOutcome {
  return {
    namespace: history.namespace,
    name: history.name,
    stops,
    vmHoursSaved: stops.reduce((sum, stop) => sum + stop.savedSeconds, 0) / 3600,
    gpuHoursSaved: stops.reduce((sum, stop) => sum + stop.savedSeconds * stop.gpus, 0) / 3600,
    likelyFalseStops: stops.filter((stop) => stop.likelyFalse).length,
    reportedSteps,
  };
}

export interface WhatifTotals {
  vms: number;
  stops: number;
  likelyFalseStops: number;
  vmHoursSaved: number;
  gpuHoursSaved: number;
}

export function totals(outcomes: readonly VmOutcome[]): WhatifTotals {
  return {
    vms: outcomes.length,
    stops: outcomes.reduce((sum, vm) => sum + vm.stops.length, 0),
    likelyFalseStops: outcomes.reduce((sum, vm) => sum + vm.likelyFalseStops, 0),
    vmHoursSaved: outcomes.reduce((sum, vm) => sum + vm.vmHoursSaved, 0),
    gpuHoursSaved: outcomes.reduce((sum, vm) => sum + vm.gpuHoursSaved, 0),
  };
}
