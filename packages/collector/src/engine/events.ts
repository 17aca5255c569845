/**
 * The one list of Event reasons the collector can emit, with their type, their `action` and
 * what each means. The engine's event actions and the Kubernetes edge take reasons from here
 * (typed), the Events are written with the action named here, and docs/kubernetes.md's table of
 * Events is tested against this list (packages/collector/test/engine/events.test.ts): every reason here is in
 * the docs, and no other.
 *
 * Events expire (the apiserver keeps them about an hour by default): they are for `kubectl
 * describe vm` now, not history. History is in Prometheus (workstation_stops_total and friends)
 * and `ws-collector whatif`.
 */
import type { EventType } from "./types.js";

export interface EventReasonInfo {
  /** The Event types this reason is sent with. */
  types: readonly EventType[];
  /** The Event's `action`: what the collector did or tried. */
  action: string;
  /** One line for people: docs/kubernetes.md's table says the same. */
  meaning: string;
  /** Who sends it: the engine's decide(), or an edge (the Kubernetes actuator, admission, the keep link). */
  sentBy: "engine" | "edge";
}

export const EVENT_REASONS = {
  IdleStopPending: {
    sentBy: "engine",
    types: ["Normal"],
    action: "Notify",
    meaning: "idle: the notice went to the VM, with when the stop will happen and how to keep it running",
  },
  IdleStopCancelled: {
    sentBy: "engine",
    types: ["Normal"],
    action: "CancelStop",
    meaning: "activity, a lease or a policy change cancelled the pending stop",
  },
  IdleStop: {
    sentBy: "engine",
    types: ["Normal", "Warning"],
    action: "Stop",
    meaning:
      "the grace period is over: the stop is asked for, with the signals that decided (Warning when the trigger is a lost agent)",
  },
  Stopped: {
    sentBy: "edge",
    types: ["Normal"],
    action: "Stop",
    meaning: "the KubeVirt stop subresource accepted the stop (Kubernetes mode)",
  },
  IdleWouldStop: {
    sentBy: "engine",
    types: ["Normal"],
    action: "ObserveStop",
    meaning: "observe mode: the same decision as IdleStop, nothing stopped",
  },
  IdleStopRefused: {
    sentBy: "engine",
    types: ["Warning"],
    action: "Stop",
    meaning: "the safety check refused the stop (which volume, why); the idle clock restarts",
  },
  IdleStopFailed: {
    sentBy: "engine",
    types: ["Warning"],
    action: "Stop",
    meaning: "the stop request failed; it is asked again after 1, 2, 4… (≤ 10) minutes",
  },
  PolicyInvalid: {
    sentBy: "engine",
    types: ["Warning"],
    action: "ReadPolicy",
    meaning: "a policy annotation did not parse; the last valid policy stays in force",
  },
  PolicyValid: {
    sentBy: "engine",
    types: ["Normal"],
    action: "ReadPolicy",
    meaning: "the policy annotations are valid again",
  },
  AgentLost: {
    sentBy: "engine",
    types: ["Warning"],
    action: "Observe",
    meaning: "no Report for agent-lost-after; the VM is not stopped for it (by default)",
  },
  AgentStoppedOnPurpose: {
    sentBy: "engine",
    types: ["Warning"],
    action: "Observe",
    meaning:
      "the agent said goodbye (systemctl stop, package removal): the VM is unmanaged; with host-side evidence it is judged on the host alone",
  },
  AgentBack: {
    sentBy: "engine",
    types: ["Normal"],
    action: "Observe",
    meaning: "the agent reports again after AgentLost",
  },
  KeepRunningLink: {
    sentBy: "edge",
    types: ["Normal"],
    action: "GrantLease",
    meaning:
      "someone pressed a keep-running button of a notice's signed link: a lease went to the agent (who, for how long)",
  },
  Started: {
    sentBy: "edge",
    types: ["Normal"],
    action: "Start",
    meaning:
      "someone asked for a start and KubeVirt's start subresource took it: who asked and through which path (link, address, ssh, schedule, warm)",
  },
  StartUnschedulable: {
    sentBy: "edge",
    types: ["Warning"],
    action: "Start",
    meaning:
      "a start the scheduler cannot place (no node with the GPU or resources it needs): the scheduler's message and how long it has waited, once per start",
  },
  StartPlaced: {
    sentBy: "edge",
    types: ["Normal"],
    action: "Start",
    meaning: "a start that could not be placed was placed at last: how long it waited, on which node",
  },
  StopDisputed: {
    sentBy: "edge",
    types: ["Warning"],
    action: "Dispute",
    meaning:
      "the VM's user reported its last stop as a mistake (what they were doing, and the policy setting that would have kept it)",
  },
  ScheduleSet: {
    sentBy: "edge",
    types: ["Normal"],
    action: "Schedule",
    meaning:
      "the VM's start schedule was set, changed, skipped a date or cleared (by whom: ws-lease in the VM, the VM page)",
  },
  ScheduleInvalid: {
    sentBy: "edge",
    types: ["Warning"],
    action: "Schedule",
    meaning:
      "the VM's schedule annotation does not parse: it is not applied, nothing is started or stopped for it (why, with a did-you-mean)",
  },
  ScheduledStartUnplaced: {
    sentBy: "edge",
    types: ["Warning"],
    action: "Start",
    meaning: "a scheduled start was accepted but the scheduler cannot place the VM (its message); it stays asked for",
  },
  ScheduledStartFailed: {
    sentBy: "edge",
    types: ["Warning"],
    action: "Start",
    meaning: "a scheduled start was refused, retried every minute, and given up an hour after its time",
  },
  WarmStartUsed: {
    sentBy: "edge",
    types: ["Normal"],
    action: "Start",
    meaning: "a learned warm start was used: its person came (a start request, or their first activity) while it ran",
  },
  WarmStartWasted: {
    sentBy: "edge",
    types: ["Normal"],
    action: "Start",
    meaning: "a learned warm start was not used: nobody came within its window and it was stopped again",
  },
  WarmStartFailed: {
    sentBy: "edge",
    types: ["Warning"],
    action: "Start",
    meaning: "a learned warm start was refused by the platform; a later pass may try again before the usual arrival",
  },
  IdentityRejected: {
    sentBy: "edge",
    types: ["Warning"],
    action: "Authenticate",
    meaning: "an agent stream came from another address than the pod of the VM it claimed (Kubernetes mode)",
  },
} as const satisfies Record<string, EventReasonInfo>;

export type EventReason = keyof typeof EVENT_REASONS;

export function isEventReason(reason: string): reason is EventReason {
  return Object.hasOwn(EVENT_REASONS, reason);
}

/** docs/kubernetes.md's table of Events, as this list has it (a test keeps the docs equal to it). */
export function eventReasonsTable(): string {
  const rows = Object.entries(EVENT_REASONS).map(
    ([reason, info]) => `| \`${reason}\` | ${info.types.join(", ")} | \`${info.action}\` | ${info.meaning} |`,
  );
  return ["| reason | type | action | when |", "|---|---|---|---|", ...rows].join("\n");
}
