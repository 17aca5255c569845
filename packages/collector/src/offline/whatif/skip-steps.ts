// Which recorded steps one VM's replay may skip (docs/metrics.md, "Steps whatif skips"): the replay
// decides only where the recording can change its outcome, as the live collector hears a quiet
// agent only by a deadline (issue 35). The replay tells the rule what it did (a decision, a stop
// that found no one, a stop that ended, each step it was given) and asks it of every step.
import { unattendedEndsAtMs } from "../../engine/activity.js";
import type { Decision, Policy, VmRecord } from "../../engine/types.js";
import type { StepGrid, StepSample } from "./history.js";
import { compareStepsUnder } from "./nothing-new.js";

export interface StepSkipping {
  /**
   * Whether the step at `index` can be skipped. `record`: the VM's record (undefined before its first
   * decision); `stopped`: whether the replay has stopped the VM; `upcoming`: the next step's sample.
   */
  skips(
    index: number,
    sample: StepSample | undefined,
    upcoming: StepSample | undefined,
    vm: { record: VmRecord | undefined; stopped: boolean },
  ): boolean;
  /** The replay was given this step's sample (read or skipped). */
  given(sample: StepSample | undefined): void;
  /** The replay decided at `nowMs`. */
  decided(decision: Decision, nowMs: number): void;
  /** A stopped VM's replay found no one back in this step. */
  foundNoOne(sample: StepSample | undefined): void;
  /** The stop ended: the VM boots afresh. */
  stopEnded(): void;
}

export function stepSkipping(policy: Policy, grid: StepGrid): StepSkipping {
  const compare = compareStepsUnder(policy.thresholds);
  // The latest step that showed no one back since the stop; the step before this one; the last decision.
  let quietSince: StepSample | undefined;
  let previous: StepSample | undefined;
  let nextDecisionAtMs: number | undefined;
  let lastDecisionAtMs = -Infinity;

  /**
   * A step of a plainly Active VM whose recording says what the step before it said and what the step
   * after it will say (activity may come, levels stay on their side), with the next decision not
   * before the step after: deciding here would change nothing that the next decision does not see.
   * The step before a change is read, so a level that ends is credited to its last sample.
   */
  const quietWhileActive = (
    index: number,
    sample: StepSample | undefined,
    upcoming: StepSample | undefined,
    record: VmRecord | undefined,
  ): boolean => {
    if (record?.state !== "Active" || record.notice || record.awaitingFreshReport) return false;
    const nextStepMs = grid.startMs + (index + 1) * grid.stepMs;
    if (nextDecisionAtMs !== undefined && nextDecisionAtMs <= nextStepMs) return false;
    // unattended-max ending is no decision's wake, yet from then the idle clock leaves out background work.
    const unattendedEnd = unattendedEndsAtMs(record.lastHumanAtMs ?? record.firstSeenMs, policy);
    if (unattendedEnd !== undefined && unattendedEnd > lastDecisionAtMs && unattendedEnd <= nextStepMs) return false;
    return compare.quietlyFollows(previous, sample) && compare.quietlyFollows(sample, upcoming);
  };

  return {
    skips(index, sample, upcoming, vm) {
      if (vm.stopped) return quietSince !== undefined && compare.nothingNewSince(quietSince, sample);
      return quietWhileActive(index, sample, upcoming, vm.record);
    },
    given(sample) {
      previous = sample;
    },
    decided(decision, nowMs) {
      nextDecisionAtMs = decision.wakeAtMs;
      lastDecisionAtMs = nowMs;
    },
    foundNoOne(sample) {
      quietSince = sample;
    },
    stopEnded() {
      quietSince = undefined;
    },
  };
}
