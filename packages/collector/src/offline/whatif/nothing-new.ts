// Which recorded steps can change a replay (docs/metrics.md, "Steps whatif skips"). Most of a week
// says the same thing step after step: no new activity time, every level on the same side of its
// threshold. Two questions about two steps of one VM's recording, under one policy's thresholds:
// - nothingNewSince: a VM the replay stopped, which found no one in the earlier step, finds no one
//   in the later one. An activity time equal to the earlier step's was not later than the stop then,
//   nor is it now; a level below its threshold makes no reading and no veto (evidence.ts), on
//   whichever side, so only the side is compared; a count, lease or inhibitor that holds would
//   have been use in the earlier step, and a veto that had ended (a lease or inhibitor past its end)
//   has not started again.
// - quietlyFollows: the later step says what the earlier said, save activity that may have come since
//   (simulate.ts skips such steps of a plainly Active VM between two decisions).
import { thresholdsKey } from "../../engine/evidence.js";
import { type SignalName, thresholdOf } from "../../engine/signals.js";
import type { Thresholds } from "../../engine/types.js";
import type { ReportReadings } from "../../model/readings.js";
import type { StepSample } from "./history.js";

/** The readings whose levels count only at or above a threshold, and the signal whose threshold it is. */
type LevelField = "cpuBusyRatio" | "userProcessCpuCores" | "networkBytesPerSecond" | "diskBytesPerSecond";
const LEVELS: ReadonlyArray<readonly [LevelField, SignalName]> = [
  ["cpuBusyRatio", "cpu"],
  ["userProcessCpuCores", "user-cpu"],
  ["networkBytesPerSecond", "network"],
  ["diskBytesPerSecond", "disk"],
];

/** Which side of its threshold a level is on; undefined where the reading has none (evidence.ts reads none then). */
function side(value: number | undefined, threshold: number): boolean | undefined {
  return value === undefined || !Number.isFinite(value) ? undefined : value >= threshold;
}

/**
 * The same kinds of activity in both, each at the same time (or, with `later`, at the same time or
 * later in `b`).
 */
function activityKept(
  a: ReportReadings["lastActivityAtMs"],
  b: ReportReadings["lastActivityAtMs"],
  later: boolean,
): boolean {
  let count = 0;
  for (const key in a) {
    count++;
    const before = a[key as keyof typeof a]!;
    const after = b[key as keyof typeof b];
    if (after === undefined || (later ? after < before : after !== before)) return false;
  }
  for (const _ in b) count--;
  return count === 0;
}

/**
 * The GPUs of a step as the comparison needs them: each one's label and side of the threshold (a
 * GPU without a reading is one whose utilization is unreadable: it counts through its processes).
 * Made once per step and kept: enumerating the index-named keys is slow, and each step is compared
 * with the one before and the one after, by every value of a sweep.
 */
function gpuSides(threshold: number): (gpus: ReportReadings["gpuUtilization"]) => string {
  const made = new WeakMap<ReportReadings["gpuUtilization"], string>();
  return (gpus) => {
    let key = made.get(gpus);
    if (key === undefined) {
      key = "";
      // Length-prefixed: no label can make two different sets of GPUs read the same.
      for (const label in gpus) key += `${label.length}:${label}${side(gpus[label], threshold)}`;
      made.set(gpus, key);
    }
    return key;
  };
}

/** The levels' thresholds under one policy, looked up once. */
function levelThresholds(thresholds: Thresholds): Array<readonly [LevelField, number]> {
  return LEVELS.map(([field, signal]) => [field, thresholdOf(signal, thresholds)] as const);
}

/** How two steps of one VM's recording compare under one policy's thresholds. */
export interface StepComparison {
  /**
   * `next` shows nothing of use that `earlier` did not (both after a stop): a stopped replay that
   * found no one in `earlier` finds no one in `next`. The host-side reading is not compared: a
   * stopped replay does not read it.
   */
  nothingNewSince(earlier: StepSample, next: StepSample | undefined): boolean;
  /**
   * `next` says what `previous` said, but that activity may have come since: the same sources, counts,
   * leases and inhibitors, every level on the same side of its threshold, activity times the same or
   * later. Neither has a host-side reading (it moves at every step).
   */
  quietlyFollows(previous: StepSample | undefined, next: StepSample | undefined): boolean;
}

/** Comparisons by thresholds, shared: a sweep's values mostly read the same thresholds, and ask of the same steps. */
const comparisons = new Map<string, StepComparison>();

/**
 * The comparison of steps under these thresholds. Each remembers its last answer: a replay asks of
 * (step before, step) what it asked one step earlier of (step, step after), and a sweep's values ask
 * the same pairs.
 */
export function compareStepsUnder(thresholds: Thresholds): StepComparison {
  const key = thresholdsKey(thresholds);
  let comparison = comparisons.get(key);
  if (!comparison) {
    // Bounded: a sweep of thresholds has at most a few hundred values.
    if (comparisons.size >= 1_000) comparisons.clear();
    comparison = remembering(comparisonUnder(thresholds));
    comparisons.set(key, comparison);
  }
  return comparison;
}

/** Each question with its last answer kept, by the identity of the two samples asked of. */
function remembering(comparison: StepComparison): StepComparison {
  return {
    nothingNewSince: rememberLast((earlier: StepSample, next) => comparison.nothingNewSince(earlier, next)),
    quietlyFollows: rememberLast((previous: StepSample | undefined, next) => comparison.quietlyFollows(previous, next)),
  };
}

/** `question` with its last answer kept (asked again of the same two samples, it answers from memory). */
function rememberLast<A extends StepSample | undefined>(
  question: (a: A, b: StepSample | undefined) => boolean,
): (a: A, b: StepSample | undefined) => boolean {
  let lastA: A | undefined;
  let lastB: StepSample | undefined;
  let answer = false;
  return (a, b) => {
    // Never from memory where a sample is missing: undefined is no one step.
    if (a !== lastA || b !== lastB || a === undefined || b === undefined) {
      lastA = a;
      lastB = b;
      answer = question(a, b);
    }
    return answer;
  };
}

function comparisonUnder(thresholds: Thresholds): StepComparison {
  const levels = levelThresholds(thresholds);
  const gpusOf = gpuSides(thresholdOf("gpu", thresholds));
  const sameReadings = (a: ReportReadings, b: ReportReadings, laterActivity: boolean): boolean => {
    if (
      a.gpuCount !== b.gpuCount ||
      a.gpuProcesses !== b.gpuProcesses ||
      a.jupyterBusyKernels !== b.jupyterBusyKernels ||
      a.jupyterConnectedKernels !== b.jupyterConnectedKernels ||
      a.idleInhibitors !== b.idleInhibitors ||
      a.remoteForwardJupyterPort !== b.remoteForwardJupyterPort ||
      a.remoteCadenceSeconds !== b.remoteCadenceSeconds
    )
      return false;
    for (const [field, threshold] of levels) if (side(a[field], threshold) !== side(b[field], threshold)) return false;
    if (gpusOf(a.gpuUtilization) !== gpusOf(b.gpuUtilization)) return false;
    return activityKept(a.lastActivityAtMs, b.lastActivityAtMs, laterActivity);
  };
  const sameAround = (a: StepSample, b: StepSample): boolean =>
    a.connected === b.connected && a.gpuCount === b.gpuCount && a.leaseExpiresAtMs === b.leaseExpiresAtMs;
  return {
    nothingNewSince(earlier, next) {
      if (next === earlier) return true;
      if (!next || !sameAround(earlier, next)) return false;
      if (!next.readings || !earlier.readings) return next.readings === earlier.readings;
      return sameReadings(earlier.readings, next.readings, false);
    },
    quietlyFollows(previous, next) {
      if (!previous || !next || previous.host || next.host || !sameAround(previous, next)) return false;
      if (!previous.connected || !previous.readings || !next.readings) return false;
      return sameReadings(previous.readings, next.readings, true);
    },
  };
}
