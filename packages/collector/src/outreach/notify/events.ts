// The one thing the notifier, the keep-running link and the history need from
// the per-VM loop: a VM transition that a person may want to hear about. The
// loop (fleet.ts today, vm/ after the restructuring) derives them with
// transitionsOf() from the engine's actions and reports stop outcomes with
// stopTransition(); nothing here reads a clock.
import type { VmKey } from "../../model/vm-key.js";
import type { Action, Decision, PolicyMode, StopResult, StopTrigger, VmRecord } from "../../engine/types.js";

export type TransitionKind =
  /** A stop is pending: the first notice of it. */
  | "notice"
  /** The same pending stop, announced again (notice-repeat). */
  | "reminder"
  /** The pending stop was cancelled (activity, a lease). */
  | "cancel"
  /** The VM was stopped (the platform accepted the stop). */
  | "stop"
  /** The stop was refused (safety check) or failed. */
  | "refused-stop"
  /** Observe mode: the VM would have been stopped now. */
  | "would-stop"
  /** The VM's user says its last stop was a mistake (docs/coming-back.md). */
  | "dispute"
  /** The VM's scheduled start could not be made or placed yet, or was placed late (docs/coming-back.md). */
  | "schedule"
  /** A start the scheduler cannot place (no node with a free GPU): its message and the wait so far. */
  | "unplaced"
  /** That start was placed at last. */
  | "placed";

export const TRANSITION_KINDS: readonly TransitionKind[] = [
  "notice",
  "reminder",
  "cancel",
  "stop",
  "refused-stop",
  "would-stop",
  "dispute",
  "schedule",
  "unplaced",
  "placed",
];

export interface VmTransition {
  kind: TransitionKind;
  vm: VmKey;
  atMs: number;
  mode: PolicyMode;
  /** Why, in a sentence (the engine's reason, the stop's outcome). */
  reason: string;
  /** The pending notice this belongs to (notice, reminder, cancel). */
  noticeId?: string;
  /** When the stop happens (notice, reminder). */
  deadlineMs?: number;
  idleSeconds?: number;
  /** How the user keeps the VM running, in the agent's words ("ws-lease 2h ..."). */
  hint?: string;
  /** The engine's one-line explanation of the decision. */
  explanation: string;
  trigger?: StopTrigger;
}

/** The transitions one decision announces; `previous` is the record the decision started from. */
export function transitionsOf(
  vm: VmKey,
  decision: Decision,
  atMs: number,
  previous: VmRecord | undefined,
): VmTransition[] {
  const out: VmTransition[] = [];
  const base = { vm, atMs, explanation: decision.summary };
  for (const action of decision.actions) {
    const transition = transitionOfAction(action, base, previous?.notice?.mode ?? "enforce");
    if (transition) out.push(transition);
  }
  return out;
}

function transitionOfAction(
  action: Action,
  base: { vm: VmKey; atMs: number; explanation: string },
  clearedMode: PolicyMode,
): VmTransition | undefined {
  switch (action.kind) {
    case "notice":
      return {
        ...base,
        kind: action.repeat ? "reminder" : "notice",
        mode: action.mode,
        reason: action.reason,
        noticeId: action.id,
        deadlineMs: action.deadlineMs,
        idleSeconds: action.idleSeconds,
        hint: action.hint,
      };
    case "notice-cleared":
      return { ...base, kind: "cancel", mode: clearedMode, reason: action.reason, noticeId: action.id };
    case "would-stop":
      return {
        ...base,
        kind: "would-stop",
        mode: "observe",
        reason: action.reason,
        trigger: action.trigger,
        ...(action.idleSeconds !== undefined ? { idleSeconds: action.idleSeconds } : {}),
      };
    default:
      return undefined;
  }
}

/** What a finished stop attempt announces: stopped, or refused/failed. */
export function stopTransition(
  vm: VmKey,
  result: StopResult,
  stop: { reason: string; trigger: StopTrigger },
  atMs: number,
): VmTransition {
  return {
    kind: result.outcome === "accepted" ? "stop" : "refused-stop",
    vm,
    atMs,
    mode: "enforce",
    reason: result.outcome === "accepted" ? stop.reason : `stop ${result.outcome}: ${result.message}`,
    explanation: stop.reason,
    trigger: stop.trigger,
  };
}

/** Whether a transition reaches people (webhooks, terminals): observe mode warns nobody unless the policy says so. */
export function warnsPeople(transition: Pick<VmTransition, "mode">, policy: { observeNotices?: boolean }): boolean {
  return transition.mode !== "observe" || policy.observeNotices === true;
}
