// Reports on change (docs/protocol.md, "Reports on change"), the collector's side: after each
// decision, what the agent must send next and by when. Pure: the decision, the policy and the
// time in, the plan out. The engine itself is unchanged: the plan only ever lets the agent stay
// quiet while nothing it would send could change a decision before the deadline.
//
// The deadline comes from the decision's own next moment (wakeAtMs: the idle deadline, a veto's
// end, agent-lost-after after the last Report) less a margin, capped by the heartbeat. The
// idle clock needs no Report in between: a Report at the deadline carries the ages of every
// activity since the last one, so the collector learns the last activity before it matters.
// Levels (GPU, CPU, network, disk, a busy kernel, a connected browser) carry no age: while
// one counts, the collector hears every sample, as it does whenever a notice is shown or a
// stop is near.
import { ReportChange } from "@ws/protocol";
import { SIGNALS } from "../engine/signals.js";
import type { Decision, Policy } from "../engine/types.js";

/** How long a VM with nothing new to say may stay quiet, at most (KEP-589's NodeStatus: 5 minutes). */
export const DEFAULT_REPORT_HEARTBEAT_MS = 5 * 60_000;

/** The margin before a decision's next moment: a sample interval (the agent sends on its samples) and this much for the trip. */
export const REPORT_DEADLINE_SLACK_MS = 15_000;

/** The kinds of change an agent sends at once while it may otherwise stay quiet. */
export const REPORT_AT_ONCE: readonly ReportChange[] = [
  ReportChange.VETO,
  ReportChange.LEASE,
  ReportChange.SOURCE,
  ReportChange.SESSION,
  ReportChange.DISK,
];

export type ReportPlan =
  /** Every sample, as an agent without a ReportWhen sends. */
  | { kind: "every-sample"; why: string }
  /** At the latest by reportByMs (the collector's clock), and at once on atOnce's kinds. */
  | { kind: "by"; reportByMs: number; atOnce: readonly ReportChange[] };

/** What the agent must send after `decision` (decided at nowMs under policy). */
export function reportPlan(decision: Decision, policy: Policy, nowMs: number, heartbeatMs: number): ReportPlan {
  const record = decision.next;
  if (record.state !== "Active") return { kind: "every-sample", why: `state ${record.state}` };
  if (record.awaitingFreshReport) return { kind: "every-sample", why: "awaiting a fresh report" };
  const level = decision.explanation.readings.find((reading) => SIGNALS[reading.signal].recorded === "level");
  if (level) return { kind: "every-sample", why: `level ${level.signal} counts` };
  const intervalMs = policy.reportIntervalSeconds * 1000;
  const marginMs = intervalMs + REPORT_DEADLINE_SLACK_MS;
  let reportByMs = nowMs + heartbeatMs;
  if (decision.wakeAtMs !== undefined) reportByMs = Math.min(reportByMs, decision.wakeAtMs - marginMs);
  // The next decision is near: hear every sample until it is made, as without a ReportWhen.
  if (reportByMs - nowMs < 2 * intervalMs) return { kind: "every-sample", why: "the next decision is near" };
  return { kind: "by", reportByMs, atOnce: REPORT_AT_ONCE };
}

/** The ReportWhen message of a plan, sent at nowMs. */
export function reportWhenFields(plan: ReportPlan, nowMs: number) {
  return plan.kind === "every-sample"
    ? { reportAtOnce: [] }
    : { nextReportWithinSeconds: (plan.reportByMs - nowMs) / 1000, reportAtOnce: [...plan.atOnce] };
}

/**
 * Whether a plan must be sent now although the decision has nothing else for the agent: the
 * plan in force (undefined: every sample, as a stream starts) lets the agent stay quiet longer,
 * or about fewer kinds, than the new one. A looser plan waits for the next Report's answer.
 */
export function tighterThan(next: ReportPlan, inForce: ReportPlan | undefined): boolean {
  if (!inForce || inForce.kind === "every-sample") return false;
  if (next.kind === "every-sample") return true;
  if (next.reportByMs < inForce.reportByMs - REPORT_DEADLINE_SLACK_MS) return true;
  return next.atOnce.some((kind) => !inForce.atOnce.includes(kind));
}
