// What the warm-start runner does with one VM on one pass (docs/policy.md "Warm starts learned
// from returns"), decided here, pure: the VM's returns, its warm starts so far (the `warm-starts`
// annotation), its policy, its owner's zone and the fleet's shortages in; start it, settle the
// outcome of its waiting warm start, or nothing (with the reason) out. The runner (runner.ts)
// only reads the facts and carries out the answer.
import type { Policy } from "../../engine/types.js";
import type { ReturnRecord } from "./returns.js";
import { decideWarmStart, type LocalTime, type WarmLimits } from "./rule.js";
import { boundedWarmStarts, waitingWarmStart, type WarmStartRecord } from "./starts.js";

/** A warm start the platform took but does not show running yet is not taken for stopped before this. */
export const WARM_START_LAG_MS = 2 * 60_000;
/** A start the scheduler could not place this recently means the fleet is short of what it needed. */
export const SHORTAGE_WINDOW_MS = 30 * 60_000;

export interface WarmVmInput {
  nowMs: number;
  policy: Policy;
  /** The VM's policy annotations have errors (a typo): no warm start until they are fixed. */
  policyErrors: boolean;
  /** The VM's own `warm-start` annotation says off: its owner's opt-out. */
  ownerOff: boolean;
  /** The platform means the VM to run (started, starting, running). */
  running: boolean;
  /** When ws last stopped it (the last-stop record), if ever. */
  lastStopAtMs?: number;
  /** The last human evidence the engine saw of it (a keystroke, a click), if any. */
  lastHumanAtMs?: number;
  returns: readonly ReturnRecord[];
  starts: readonly WarmStartRecord[];
  local: (ms: number) => LocalTime;
  resourceShort: boolean;
  limits: WarmLimits;
}

export type WarmPlan =
  | { kind: "none"; reason: string }
  /** Start it now; `starts` (with the new one, waiting) is written first, so a restart never fires twice. */
  | { kind: "start"; reason: string; starts: WarmStartRecord[] }
  /**
   * Its waiting warm start is settled: `used` (a person came while it ran) or `wasted` (it stopped
   * again with nobody); `starts` is the record to write. `unrecordedReturnAtMs`: the person came
   * without a start request (their first activity), so no return was recorded for it.
   */
  | { kind: "settle"; outcome: "used" | "wasted"; unrecordedReturnAtMs?: number; starts: WarmStartRecord[] };

/** The plan for one VM now. */
export function planWarmStart(input: WarmVmInput): WarmPlan {
  const waiting = waitingWarmStart(input.starts);
  if (waiting) return settle(input, waiting);
  if (input.policyErrors)
    return { kind: "none", reason: "the VM's policy annotations have errors: no warm start until they are fixed" };
  const decision = decideWarmStart({
    nowMs: input.nowMs,
    records: input.returns,
    local: input.local,
    optedIn: input.policy.warmStart === true || input.ownerOff,
    ownerOff: input.ownerOff,
    running: input.running,
    warmStartsMs: input.starts.map((s) => s.atMs),
    resourceShort: input.resourceShort,
    limits: input.limits,
  });
  if (!decision.start) return { kind: "none", reason: decision.reason };
  return {
    kind: "start",
    reason: decision.reason,
    starts: boundedWarmStarts([...input.starts, { atMs: input.nowMs, outcome: "waiting" }], input.nowMs),
  };
}

/** A waiting warm start: used when a person came before it stopped, wasted once it stopped without one. */
function settle(input: WarmVmInput, waiting: WarmStartRecord): WarmPlan {
  const after = (ms: number | undefined) => (ms !== undefined && ms >= waiting.atMs ? ms : undefined);
  const stoppedAtMs =
    after(input.lastStopAtMs) ??
    (!input.running && input.nowMs - waiting.atMs > WARM_START_LAG_MS ? input.nowMs : undefined);
  const returnAtMs = input.returns.map((r) => after(r.atMs)).find((ms) => ms !== undefined);
  const activityAtMs = after(input.lastHumanAtMs);
  const usedAtMs =
    returnAtMs !== undefined && (activityAtMs === undefined || returnAtMs <= activityAtMs) ? returnAtMs : activityAtMs;
  const outcome: "used" | "wasted" | undefined =
    usedAtMs !== undefined && (stoppedAtMs === undefined || usedAtMs <= stoppedAtMs)
      ? "used"
      : stoppedAtMs !== undefined
        ? "wasted"
        : undefined;
  if (!outcome) return { kind: "none", reason: "warm-started: waiting for its person" };
  const starts = input.starts.map((s) => (s === waiting ? { ...s, outcome } : s));
  // A person who came without asking (their first activity) left no return: the runner keeps one for them.
  const unrecorded = outcome === "used" && usedAtMs !== returnAtMs;
  return { kind: "settle", outcome, ...(unrecorded ? { unrecordedReturnAtMs: usedAtMs } : {}), starts };
}

/** Where each resource (a device name) was last seen short: a start needing it the scheduler could not place. */
export type Shortages = Map<string, number>;

/** Notes the resources of the VMs the scheduler cannot place now, and forgets sightings past the window. */
export function noteShortages(
  shortages: Shortages,
  unplaced: Iterable<{ needs: readonly string[] }>,
  nowMs: number,
): void {
  for (const vm of unplaced) for (const need of vm.needs) shortages.set(need, nowMs);
  for (const [need, atMs] of shortages) if (nowMs - atMs > SHORTAGE_WINDOW_MS) shortages.delete(need);
}

/** Whether the fleet is short of something `needs` names (seen unplaced within the window). */
export function resourceShort(shortages: Shortages, needs: readonly string[], nowMs: number): boolean {
  return needs.some((need) => {
    const atMs = shortages.get(need);
    return atMs !== undefined && nowMs - atMs <= SHORTAGE_WINDOW_MS;
  });
}

/** What the VM page and /api/vms say of a VM's learned warm starts (docs/coming-back.md). */
export interface WarmStatus {
  /** Its policy opted in (a profile, or its own annotation) and its owner did not turn it off. */
  on: boolean;
  /** What the rule says now, in words: why it would warm-start the VM now or not. */
  now: string;
  /** A warm start waiting for its person: when it was made (ms). */
  waitingSinceMs?: number;
  /** The warm starts of the last 7 days, by outcome. */
  lastWeek: { used: number; wasted: number };
  /** The returns recorded on the VM: what the rule learns from. */
  returns: number;
}

/**
 * The status of a VM's warm starts, from the same input as its plan (pure), or undefined for a VM
 * that neither opted in nor has a record: nothing to say.
 */
export function warmStatusOf(input: WarmVmInput, plan: WarmPlan): WarmStatus | undefined {
  const on = input.policy.warmStart === true && !input.ownerOff;
  if (!on && !input.ownerOff && input.starts.length === 0) return undefined;
  const week = input.starts.filter((s) => input.nowMs - s.atMs < 7 * 24 * 3600_000);
  const waiting = waitingWarmStart(input.starts);
  const now =
    plan.kind === "start"
      ? `warm-starting it now: ${plan.reason}`
      : plan.kind === "settle"
        ? `its warm start was ${plan.outcome}`
        : plan.reason;
  return {
    on,
    now,
    ...(waiting ? { waitingSinceMs: waiting.atMs } : {}),
    lastWeek: {
      used: week.filter((s) => s.outcome === "used").length,
      wasted: week.filter((s) => s.outcome === "wasted").length,
    },
    returns: input.returns.length,
  };
}
