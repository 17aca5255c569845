// The decision being drafted, and what every state of decide() shares: the Draft (decide()'s
// inputs, the record it builds, the actions so far), its small edits (transition, event, a
// cleared notice, the VM entering Active), the one reading of this decision's evidence
// (observe), and the named guards the states test. Pure, as decide() is.
import { formatDuration } from "@ws/protocol";
import {
  advanceClocks,
  backgroundHold,
  clocksNoEarlierThan,
  countedReading,
  idleMsOf,
  type CountedReading,
} from "./activity.js";
import { vetoesAt } from "./evidence.js";
import { leaseDecision, leaseDecisionsKey } from "./leases.js";
import type { EventReason } from "./events.js";
import { describeErrors, describeFallback } from "./policy.js";
import { isBackgroundVeto } from "./signals.js";
import type { Action, EngineState, Evidence, Observation, PendingNotice, Policy, Veto, VmRecord } from "./types.js";

/** Seconds before asking the executor again after it reported a failed stop (it retries on its own first). */
const STOP_RETRY_BASE_SECONDS = 60;
const STOP_RETRY_MAX_SECONDS = 10 * 60;

export const duration = (ms: number): string => formatDuration(Math.max(0, ms) / 1000);

/** "n-…" for an enforce notice, "o-…" for an observe one: the id alone tells a restarted collector which it was. */
export function noticeId(sentAtMs: number, mode: Policy["mode"]): string {
  return `${mode === "observe" ? "o" : "n"}-${Math.round(sentAtMs / 1000).toString(36)}`;
}

export function describeVetoes(vetoes: readonly Veto[]): string {
  return vetoes.map((veto) => veto.detail).join("; ");
}

export function stopRetryDelayMs(attempts: number): number {
  return Math.min(STOP_RETRY_MAX_SECONDS, STOP_RETRY_BASE_SECONDS * 2 ** Math.max(0, attempts - 1)) * 1000;
}

/** What the readings of this decision showed: read once, by the first state that looks (`observe`). */
export interface Seen {
  counted: CountedReading[];
  /** Vetoes in force, background work bounded by unattended-max. */
  vetoes: Veto[];
  /**
   * unattended-max is over (backgroundHold's answer, the one shape of "unattended"): why, and the
   * background work that no longer holds the VM. Undefined: background work still holds it, or
   * there is no evidence to judge.
   */
  unattended: Unattended | undefined;
}

/** backgroundHold said no: why, and the background vetoes it ended. */
export interface Unattended {
  why: string;
  ended: Veto[];
}

/** The decision being drafted: decide()'s inputs, the record it builds and the actions so far. */
export interface Draft {
  readonly nowMs: number;
  readonly policy: Policy;
  readonly observation: Observation;
  readonly prev: VmRecord;
  readonly received: Observation["latestReport"];
  readonly isNewReport: boolean;
  readonly evidence: Evidence | undefined;
  readonly rec: VmRecord;
  readonly actions: Action[];
  seen: Seen | undefined;
  /** Set when the host-side rule judged this decision (engine/host.ts): since when the VM has had no agent, and what it said. */
  host?: { goneSinceMs: number; role: string };
}

/** What a state function decided. */
export interface Outcome {
  reason: string;
  /** The state only waits: when the VM just arrived in it, the reason it arrived is the better one. */
  waiting?: boolean;
  /** The state the VM was handed over to decides too, in this same decision. */
  handOver?: boolean;
  wakeAtMs?: number;
  stopAtMs?: number;
}

/** An outcome of a state that only waits. The timing functions return a fresh object: marked in place, not copied (a replay decides millions of times). */
export function waiting(outcome: Outcome): Outcome {
  outcome.waiting = true;
  return outcome;
}

// --- the parts every state shares -----------------------------------------------------

export function transition(d: Draft, to: EngineState): void {
  if (d.rec.state !== to) {
    d.rec.state = to;
    d.rec.sinceMs = d.nowMs;
  }
}

export function event(d: Draft, type: "Normal" | "Warning", reason: EventReason, message: string): void {
  d.actions.push({ kind: "event", type, reason, message });
}

export function clearNotice(d: Draft, why: string): void {
  if (!d.rec.notice) return;
  d.actions.push({ kind: "notice-cleared", id: d.rec.notice.id, reason: why });
  d.rec.notice = undefined;
}

export function idleMs(d: Draft): number | undefined {
  return idleMsOf(d.rec.clock, d.nowMs);
}

/** The next of several instants that is still to come. */
export function nextOf(nowMs: number, candidates: ReadonlyArray<number | undefined>): number | undefined {
  const future = candidates.filter((at): at is number => at !== undefined && at > nowMs);
  return future.length > 0 ? Math.min(...future) : undefined;
}

/** The idle clock's last mover, in words; weak evidence says that nobody used it. */
export function lastSeen(d: Draft): string {
  const { nowMs, policy } = d;
  const { clock } = d.rec;
  if (!clock.lastActivityDetail) return "none seen";
  const ago = `${clock.lastActivityDetail}, ${duration(idleMs(d) ?? 0)} ago`;
  if (!clock.lastActivityWeak || clock.lastStrongAtMs === undefined) return ago;
  return `${ago}: connected, but nobody has used it for ${duration(nowMs - clock.lastStrongAtMs)}; weak evidence counts for at most ${formatDuration(policy.weakActivityMaxSeconds)}`;
}

export function blindNote(d: Draft): string {
  const blind = d.evidence?.blind ?? [];
  return blind.length > 0 ? `; cannot read: ${blind.map((entry) => entry.source).join(", ")}` : "";
}

/** Why background work no longer holds the VM, for notices and stops. */
export function unattendedNote(d: Draft): string {
  const unattended = d.seen?.unattended;
  if (!unattended) return "";
  const work = unattended.ended.length > 0 ? ` (${describeVetoes(unattended.ended)})` : "";
  return `; ${unattended.why}: background work${work} no longer holds the VM; ws-lease keeps it running`;
}

/** Sets the clocks to start from `baselineMs` (or later), as a VM that just became Active. */
export function enterActive(d: Draft, baselineMs: number): void {
  const { rec } = d;
  transition(d, "Active");
  Object.assign(rec, clocksNoEarlierThan(rec, baselineMs));
  rec.notice = undefined;
  rec.stop = undefined;
  rec.agentLostWouldStopRecorded = false;
}

/** An agent stopped on purpose is said once (an Event); it holds until the agent connects again. */
export function noteGoodbye(d: Draft): void {
  const { rec, observation, nowMs } = d;
  if (observation.agentConnected || observation.agentGoodbye === undefined) {
    if (rec.goodbye) rec.goodbye = undefined;
    return;
  }
  if (rec.goodbye) return;
  rec.goodbye = { atMs: nowMs, reason: observation.agentGoodbye };
  event(
    d,
    "Warning",
    "AgentStoppedOnPurpose",
    `the agent was stopped on purpose (${observation.agentGoodbye}): ws no longer sees inside the VM${observation.host ? "; it is judged on host-side readings alone, quiet counted from now" : ""}`,
  );
}

/** Policy errors are reported when they change, not on every decision (no policyStatus: no errors). */
export function notePolicyErrors(d: Draft): void {
  const { errors, fallback } = d.observation.policyStatus ?? { errors: [], fallback: "none" as const };
  const key = errors.length > 0 ? `${fallback}|${describeErrors(errors)}` : "";
  if (key === d.prev.policyErrorsKey) return;
  if (errors.length > 0) {
    d.actions.push({ kind: "policy-error", errors: [...errors], fallback });
    event(d, "Warning", "PolicyInvalid", `${describeErrors(errors)}. The VM keeps ${describeFallback(fallback)}.`);
  } else {
    event(d, "Normal", "PolicyValid", "the policy annotations are valid again and in force");
  }
  d.rec.policyErrorsKey = key;
}

/**
 * Reads this decision's evidence once (later calls return the first answer): the clocks move
 * (in Active, StoppingPending and Stopping only), the vetoes in force are bounded by
 * unattended-max, and new or changed leases are answered.
 */
export function observe(d: Draft): Seen {
  if (d.seen) return d.seen;
  const { rec, evidence, received, policy, nowMs } = d;
  let counted: CountedReading[] = [];
  if (evidence && received && (rec.state === "Active" || rec.state === "StoppingPending" || rec.state === "Stopping")) {
    const update = advanceClocks(
      {
        clock: rec.clock,
        attended: rec.attended,
        lastNoticeSentAtMs: rec.lastNoticeSentAtMs,
        lastHumanAtMs: rec.lastHumanAtMs ?? rec.firstSeenMs,
      },
      evidence.readings,
      policy,
      rec.state,
      nowMs,
    );
    rec.clock = update.clock;
    rec.attended = update.attended;
    rec.lastHumanAtMs = update.lastHumanAtMs;
    counted = update.readings;
  } else if (evidence) {
    counted = evidence.readings.map((reading) => countedReading(reading, false));
  }
  d.seen = { counted, ...vetoesInForce(d) };
  sendLeaseDecisions(d);
  return d.seen;
}

/** Vetoes that hold now; background work only until unattended-max after the last human evidence. */
export function vetoesInForce(d: Draft): Pick<Seen, "vetoes" | "unattended"> {
  const { rec, evidence, policy, nowMs } = d;
  if (rec.state === "Stopped" || !evidence) return { vetoes: [], unattended: undefined };
  const hold = backgroundHold(rec.lastHumanAtMs, policy, nowMs);
  const until = hold.untilMs;
  const bounded =
    until === undefined
      ? evidence.vetoes
      : evidence.vetoes.map((veto) =>
          isBackgroundVeto(veto.kind) ? { ...veto, untilMs: Math.min(veto.untilMs ?? Infinity, until) } : veto,
        );
  const vetoes = vetoesAt({ vetoes: bounded }, nowMs);
  if (hold.holds) return { vetoes, unattended: undefined };
  const ended = bounded.filter(
    (veto) => isBackgroundVeto(veto.kind) && veto.untilMs !== undefined && veto.untilMs <= nowMs,
  );
  return { vetoes, unattended: { why: hold.why, ended } };
}

/** Lease decisions: whenever a lease is new, unanswered, or its answer changed. */
export function sendLeaseDecisions(d: Draft): void {
  const { evidence, received, isNewReport, prev, rec, policy, nowMs } = d;
  if (!evidence || !received || !isNewReport) return;
  const key = leaseDecisionsKey(evidence.leases);
  const unconfirmed = (received.report.leases?.leases ?? []).some((lease) => !lease.confirmed);
  if (key === prev.leaseDecisionsKey && !unconfirmed) return;
  if (evidence.leases.length > 0 || prev.leaseDecisionsKey !== "") {
    d.actions.push({
      kind: "lease-decisions",
      decisions: evidence.leases.map((view) => leaseDecision(view, policy, nowMs)),
    });
  }
  rec.leaseDecisionsKey = key;
}

// --- the guards, named --------------------------------------------------------------------

/** The platform says the VM is not running: whatever the engine thought, it is stopped. */
export const notRunning = (d: Draft): boolean => d.observation.vmRunning === false;

/** When a VM that reports (Active, StoppingPending) counts as lost: agent-lost-after of silence. */
export function agentLostAtMs(rec: VmRecord, policy: Policy): number | undefined {
  return rec.lastReportAtMs === undefined ? undefined : rec.lastReportAtMs + policy.agentLostAfterSeconds * 1000;
}

/** How long the agent has been silent, once that is agent-lost-after or more. */
export function agentLostFor(d: Draft): number | undefined {
  const at = agentLostAtMs(d.rec, d.policy);
  return at !== undefined && d.nowMs >= at ? d.nowMs - (d.rec.lastReportAtMs ?? d.nowMs) : undefined;
}

/** When a VM the collector cannot see, silent since `silentSinceMs`, may be stopped (stop-when-agent-lost-after). */
export function lostStopAtMs(silentSinceMs: number | undefined, policy: Policy): number | undefined {
  const limit = policy.stopWhenAgentLostAfterSeconds;
  return limit === null || silentSinceMs === undefined ? undefined : silentSinceMs + limit * 1000;
}

export const idleTimeoutReached = (d: Draft): boolean => (idleMs(d) ?? 0) >= d.policy.idleTimeoutSeconds * 1000;

/** What holds the VM now, in words; undefined when nothing does. */
export function heldBy(d: Draft): string | undefined {
  const { vetoes } = observe(d);
  return vetoes.length > 0 ? describeVetoes(vetoes) : undefined;
}

export const graceOver = (notice: PendingNotice, nowMs: number): boolean => nowMs >= notice.deadlineMs;

/** Activity since the notice (or the stop) was decided at `idleSinceMs`. */
export function activitySince(rec: VmRecord, idleSinceMs: number | undefined): boolean {
  const atMs = rec.clock.lastActivityAtMs;
  return atMs !== undefined && (idleSinceMs === undefined || atMs > idleSinceMs);
}

/** Veto ends are moments a decision can change. */
export const vetoEnds = (d: Draft): Array<number | undefined> => (d.seen?.vetoes ?? []).map((veto) => veto.untilMs);
