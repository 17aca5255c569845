// decide(now, policy, observation, previous) → what the VM's record becomes and
// what should be done about it. Pure: no clock (now is an argument), no I/O,
// no environment. Calling it again with the same Report is harmless, so the
// caller may run it on every Report and on a timer.
//
// Unknown ──first report──▶ Active ◀──────────── activity / lease ───────────┐
// Active ──idle ≥ idle-timeout──▶ StoppingPending (Notice, grace-period) ────┤
// StoppingPending ──grace over, no veto──▶ Stopping ──stop accepted──▶ Stopped
// Active/StoppingPending ──no report for agent-lost-after──▶ AgentLost
//
// One function per state (STATES below) decides everything about that state: when it is left,
// why (the reason), and when it must be looked at again (wakeAtMs) or would stop (stopAtMs).
// A state may hand the VM over to another in the same decision (a stopped VM that runs again
// continues as Active); the reason is that of the last state that acted, and a state that only
// waits says why it waits only when the VM did not just arrive in it.

import { formatDuration } from "@ws/protocol";
import {
  advanceClocks,
  backgroundHold,
  clocksForgotten,
  clocksNoEarlierThan,
  clocksRestartedAt,
  clocksShiftedBy,
  countedReading,
  type CountedReading,
  idleMsOf,
  idleSecondsAt,
} from "./activity.js";
import { activeSignalNames, EMPTY_MEMORY, extractEvidence, vetoesAt } from "./evidence.js";
import { advanceHostClock, explainHost, hostActivityAfter, hostSchedule, judgeWithoutAgent } from "./host.js";
import { leaseDecision, leaseDecisionsKey } from "./leases.js";
import type { EventReason } from "./events.js";
import { describeErrors, describeFallback } from "./policy.js";
import { isBackgroundVeto } from "./signals.js";
import type {
  Action,
  Decision,
  EngineState,
  Evidence,
  Explanation,
  Observation,
  PendingNotice,
  Policy,
  StopTrigger,
  Veto,
  VmRecord,
} from "./types.js";

/** Seconds before asking the executor again after it reported a failed stop (it retries on its own first). */
const STOP_RETRY_BASE_SECONDS = 60;
const STOP_RETRY_MAX_SECONDS = 10 * 60;

export function initialRecord(nowMs: number): VmRecord {
  return {
    state: "Unknown",
    sinceMs: nowMs,
    firstSeenMs: nowMs,
    clock: {},
    agentConnected: false,
    memory: EMPTY_MEMORY,
    leaseDecisionsKey: "",
    policyErrorsKey: "",
    activeSignals: [],
    summary: "waiting for the first report",
  };
}

const duration = (ms: number): string => formatDuration(Math.max(0, ms) / 1000);

/** "n-…" for an enforce notice, "o-…" for an observe one: the id alone tells a restarted collector which it was. */
export function noticeId(sentAtMs: number, mode: Policy["mode"]): string {
  return `${mode === "observe" ? "o" : "n"}-${Math.round(sentAtMs / 1000).toString(36)}`;
}

function describeVetoes(vetoes: readonly Veto[]): string {
  return vetoes.map((veto) => veto.detail).join("; ");
}

function stopRetryDelayMs(attempts: number): number {
  return Math.min(STOP_RETRY_MAX_SECONDS, STOP_RETRY_BASE_SECONDS * 2 ** Math.max(0, attempts - 1)) * 1000;
}

/**
 * A Report after a stop means the VM runs again only if the machine booted
 * after the stop (uptime is an age, so this needs no guest clock): the agent
 * of a VM being shut down may still send a last Report or two.
 */
function bootedAfter(evidence: Evidence | undefined, uptimeSeconds: number | undefined, stoppedAtMs: number): boolean {
  if (!evidence || uptimeSeconds === undefined || !Number.isFinite(uptimeSeconds) || uptimeSeconds <= 0) return false;
  return evidence.sampledAtMs - uptimeSeconds * 1000 > stoppedAtMs;
}

/** What the readings of this decision showed: read once, by the first state that looks (`observe`). */
interface Seen {
  counted: CountedReading[];
  /** Vetoes in force, background work bounded by unattended-max. */
  vetoes: Veto[];
  /** unattended-max is over: the background work that no longer holds the VM. */
  unattended: Veto[] | undefined;
}

/** The decision being drafted: decide()'s inputs, the record it builds and the actions so far. */
interface Draft {
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
interface Outcome {
  reason: string;
  /** The state only waits: when the VM just arrived in it, the reason it arrived is the better one. */
  waiting?: boolean;
  /** The state the VM was handed over to decides too, in this same decision. */
  handOver?: boolean;
  wakeAtMs?: number;
  stopAtMs?: number;
}

export function decide(nowMs: number, policy: Policy, observation: Observation, previous?: VmRecord): Decision {
  const prev = previous ?? initialRecord(nowMs);
  const received = observation.latestReport;
  const draft: Draft = {
    nowMs,
    policy,
    observation,
    prev,
    received,
    isNewReport:
      received !== undefined && (prev.lastReportAtMs === undefined || received.receivedAtMs > prev.lastReportAtMs),
    // The caller (loop/step.ts) may pass the evidence it extracted once when the Report arrived.
    evidence: observation.evidence ?? (received ? extractEvidence(received, policy, prev.memory) : undefined),
    rec: { ...prev, agentConnected: observation.agentConnected },
    actions: [],
    seen: undefined,
  };
  notePolicyErrors(draft);
  noteGoodbye(draft);
  if (draft.isNewReport && draft.evidence && received) {
    draft.rec.lastReportAtMs = received.receivedAtMs;
    draft.rec.memory = draft.evidence.memory;
    draft.rec.awaitingFreshReport = false;
  }
  draft.rec.host = advanceHostClock(draft.rec.host, observation.host, policy);
  let arrivedBecause: string | undefined;
  let outcome = STATES[draft.rec.state](draft);
  while (outcome.handOver) {
    arrivedBecause = outcome.reason;
    outcome = STATES[draft.rec.state](draft);
  }
  const reason = outcome.waiting && arrivedBecause ? arrivedBecause : outcome.reason;
  return finish(draft, { ...outcome, reason });
}

// --- the parts every state shares -----------------------------------------------------

function transition(d: Draft, to: EngineState): void {
  if (d.rec.state !== to) {
    d.rec.state = to;
    d.rec.sinceMs = d.nowMs;
  }
}

function event(d: Draft, type: "Normal" | "Warning", reason: EventReason, message: string): void {
  d.actions.push({ kind: "event", type, reason, message });
}

function clearNotice(d: Draft, why: string): void {
  if (!d.rec.notice) return;
  d.actions.push({ kind: "notice-cleared", id: d.rec.notice.id, reason: why });
  d.rec.notice = undefined;
}

function idleMs(d: Draft): number | undefined {
  return idleMsOf(d.rec.clock, d.nowMs);
}

/** The next of several instants that is still to come. */
function nextOf(nowMs: number, candidates: ReadonlyArray<number | undefined>): number | undefined {
  const future = candidates.filter((at): at is number => at !== undefined && at > nowMs);
  return future.length > 0 ? Math.min(...future) : undefined;
}

/** The idle clock's last mover, in words; weak evidence says that nobody used it. */
function lastSeen(d: Draft): string {
  const { nowMs, policy } = d;
  const { clock } = d.rec;
  if (!clock.lastActivityDetail) return "none seen";
  const ago = `${clock.lastActivityDetail}, ${duration(idleMs(d) ?? 0)} ago`;
  if (!clock.lastActivityWeak || clock.lastStrongAtMs === undefined) return ago;
  return `${ago}: connected, but nobody has used it for ${duration(nowMs - clock.lastStrongAtMs)}; weak evidence counts for at most ${formatDuration(policy.weakActivityMaxSeconds)}`;
}

function blindNote(d: Draft): string {
  const blind = d.evidence?.blind ?? [];
  return blind.length > 0 ? `; cannot read: ${blind.map((entry) => entry.source).join(", ")}` : "";
}

/** Why background work no longer holds the VM, for notices and stops. */
function unattendedNote(d: Draft): string {
  const unattended = d.seen?.unattended;
  const hold = backgroundHold(d.rec.lastHumanAtMs, d.policy, d.nowMs);
  if (!unattended || hold.holds) return "";
  const work = unattended.length > 0 ? ` (${describeVetoes(unattended)})` : "";
  return `; ${hold.why}: background work${work} no longer holds the VM; ws-lease keeps it running`;
}

/** Sets the clocks to start from `baselineMs` (or later), as a VM that just became Active. */
function enterActive(d: Draft, baselineMs: number): void {
  const { rec } = d;
  transition(d, "Active");
  Object.assign(rec, clocksNoEarlierThan(rec, baselineMs));
  rec.notice = undefined;
  rec.stop = undefined;
  rec.agentLostWouldStopRecorded = false;
}

/** An agent stopped on purpose is said once (an Event); it holds until the agent connects again. */
function noteGoodbye(d: Draft): void {
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
function notePolicyErrors(d: Draft): void {
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
function observe(d: Draft): Seen {
  if (d.seen) return d.seen;
  const { rec, evidence, received, policy, nowMs } = d;
  let counted: CountedReading[] = [];
  if (evidence && received && (rec.state === "Active" || rec.state === "StoppingPending" || rec.state === "Stopping")) {
    const update = advanceClocks(
      { ...rec, lastHumanAtMs: rec.lastHumanAtMs ?? rec.firstSeenMs },
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
function vetoesInForce(d: Draft): Pick<Seen, "vetoes" | "unattended"> {
  const { rec, evidence, policy, nowMs } = d;
  if (rec.state === "Stopped" || !evidence) return { vetoes: [], unattended: undefined };
  const hold = backgroundHold(rec.lastHumanAtMs, policy, nowMs);
  const until = hold.untilMs;
  const over = !hold.holds;
  const bounded = evidence.vetoes.map((veto) =>
    until !== undefined && isBackgroundVeto(veto.kind)
      ? { ...veto, untilMs: Math.min(veto.untilMs ?? Infinity, until) }
      : veto,
  );
  const ended = bounded.filter(
    (veto) => isBackgroundVeto(veto.kind) && veto.untilMs !== undefined && veto.untilMs <= nowMs && over,
  );
  return { vetoes: vetoesAt({ ...evidence, vetoes: bounded }, nowMs), unattended: over ? ended : undefined };
}

/** Lease decisions: whenever a lease is new, unanswered, or its answer changed. */
function sendLeaseDecisions(d: Draft): void {
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
const notRunning = (d: Draft): boolean => d.observation.vmRunning === false;

/** When a VM that reports (Active, StoppingPending) counts as lost: agent-lost-after of silence. */
function agentLostAtMs(rec: VmRecord, policy: Policy): number | undefined {
  return rec.lastReportAtMs === undefined ? undefined : rec.lastReportAtMs + policy.agentLostAfterSeconds * 1000;
}

/** How long the agent has been silent, once that is agent-lost-after or more. */
function agentLostFor(d: Draft): number | undefined {
  const at = agentLostAtMs(d.rec, d.policy);
  return at !== undefined && d.nowMs >= at ? d.nowMs - (d.rec.lastReportAtMs ?? d.nowMs) : undefined;
}

/** When a VM the collector cannot see, silent since `silentSinceMs`, may be stopped (stop-when-agent-lost-after). */
function lostStopAtMs(silentSinceMs: number | undefined, policy: Policy): number | undefined {
  const limit = policy.stopWhenAgentLostAfterSeconds;
  return limit === null || silentSinceMs === undefined ? undefined : silentSinceMs + limit * 1000;
}

const idleTimeoutReached = (d: Draft): boolean => (idleMs(d) ?? 0) >= d.policy.idleTimeoutSeconds * 1000;

/** What holds the VM now, in words; undefined when nothing does. */
function heldBy(d: Draft): string | undefined {
  const { vetoes } = observe(d);
  return vetoes.length > 0 ? describeVetoes(vetoes) : undefined;
}

const graceOver = (notice: PendingNotice, nowMs: number): boolean => nowMs >= notice.deadlineMs;

/** Activity since the notice (or the stop) was decided at `idleSinceMs`. */
function activitySince(rec: VmRecord, idleSinceMs: number | undefined): boolean {
  const atMs = rec.clock.lastActivityAtMs;
  return atMs !== undefined && (idleSinceMs === undefined || atMs > idleSinceMs);
}

/** Veto ends are moments a decision can change. */
const vetoEnds = (d: Draft): Array<number | undefined> => (d.seen?.vetoes ?? []).map((veto) => veto.untilMs);

// --- notices and stops ----------------------------------------------------------------------

/** "stop", or in observe mode what a notice promises instead. */
const stopWord = (policy: Policy): string => (policy.mode === "observe" ? "observe mode: would stop" : "stop");

/**
 * The one way a pending stop starts, for the agent's idle clock and the host's alike: the notice
 * (its grace from now) is recorded and sent. `idleSinceMs`: what the idle time counted from.
 */
function sendNotice(d: Draft, idleSinceMs: number, idle: number, reason: string): PendingNotice {
  const { rec, policy, nowMs } = d;
  const notice: PendingNotice = {
    id: noticeId(nowMs, policy.mode),
    sentAtMs: nowMs,
    lastSentAtMs: nowMs,
    deadlineMs: nowMs + policy.gracePeriodSeconds * 1000,
    idleSinceMs,
    mode: policy.mode,
    reason,
  };
  rec.notice = notice;
  pushNotice(d, notice, false, idle);
  return notice;
}

/** The notice again, every notice-repeat (or when `also`, the agent reconnecting): it is the same notice. */
function repeatNoticeWhenDue(d: Draft, notice: PendingNotice, also: boolean, idle?: number): void {
  const { rec, policy, nowMs } = d;
  if (!also && nowMs - notice.lastSentAtMs < policy.noticeRepeatSeconds * 1000) return;
  rec.notice = { ...notice, lastSentAtMs: nowMs };
  pushNotice(d, rec.notice, true, idle);
}

/** A notice sent in observe mode promised nothing would happen: under enforce it is withdrawn, a new one follows. */
function withdrawObserveNotice(d: Draft): boolean {
  if (d.rec.notice?.mode !== "observe" || d.policy.mode !== "enforce") return false;
  clearNotice(d, "the policy changed from observe to enforce; a new notice follows");
  return true;
}

/**
 * The grace of `notice` is over: the stop (enforce), or the observe mode's would-stop once.
 * `timing` is the state's own timing; `still` says what is still true while observe mode waits.
 */
function graceOverStop(
  d: Draft,
  notice: PendingNotice,
  trigger: StopTrigger,
  why: string,
  timing: (reason: string, waiting?: boolean) => Outcome,
  still: string,
): Outcome {
  const { rec, policy, nowMs } = d;
  if (policy.mode === "enforce") return requestStop(d, trigger, why);
  if (notice.wouldStopAtMs === undefined) {
    rec.notice = { ...notice, wouldStopAtMs: nowMs };
    recordWouldStop(d, trigger, why);
    return timing(`would stop now (observe mode): ${why}`);
  }
  return timing(`observe mode: would have stopped ${duration(nowMs - notice.wouldStopAtMs)} ago; ${still}`, true);
}

function startNotice(d: Draft): Outcome {
  const { rec, policy, nowMs } = d;
  const idle = idleMs(d) ?? 0;
  transition(d, "StoppingPending");
  const notice = sendNotice(
    d,
    rec.clock.lastActivityAtMs ?? nowMs,
    idle,
    `idle for ${duration(idle)} (idle-timeout ${formatDuration(policy.idleTimeoutSeconds)}); last activity: ${lastSeen(d)}${unattendedNote(d)}${blindNote(d)}`,
  );
  const what = stopWord(policy);
  event(
    d,
    "Normal",
    "IdleStopPending",
    `${notice.reason}; ${what} in ${formatDuration(policy.gracePeriodSeconds)} unless there is activity or a lease`,
  );
  return pendingTiming(
    d,
    `idle ${duration(idle)} ≥ idle-timeout ${formatDuration(policy.idleTimeoutSeconds)} and no veto: notice sent, ${what} in ${formatDuration(policy.gracePeriodSeconds)} unless there is activity or a lease`,
  );
}

function pushNotice(d: Draft, notice: PendingNotice, repeat: boolean, idle = idleMs(d) ?? 0): void {
  const { rec, policy, nowMs } = d;
  // The agent writes every notice to the terminals: remember when, so that output is not taken for activity.
  rec.lastNoticeSentAtMs = nowMs;
  d.actions.push({
    kind: "notice",
    id: notice.id,
    deadlineMs: notice.deadlineMs,
    stopInSeconds: Math.max(0, (notice.deadlineMs - nowMs) / 1000),
    idleSeconds: idle / 1000,
    reason: notice.reason,
    hint: `any activity cancels it; to keep the VM running without activity: ws-lease 2h (at most ${formatDuration(policy.maxKeepRunningSeconds)})`,
    mode: notice.mode,
    repeat,
  });
}

/**
 * The one way a pending stop (a notice, or a stop already asked for) is called off: the agent is
 * told (notice cleared, or the executor's stop cancelled), the VM is Active again and an Event
 * says why. `noAgent` (the host-side path): there is no agent to come back to, so a stop goes
 * back to AgentLost, which judges again, and a notice leaves the VM where it is (AgentLost, or
 * Unknown), its state's timing to be given by the caller. `freshClockFromMs`: the idle clock
 * starts afresh from there.
 */
function cancelPendingStop(
  d: Draft,
  why: string,
  how: { reason?: string; freshClockFromMs?: number; noAgent?: boolean } = {},
): Outcome {
  const { rec } = d;
  const { reason, freshClockFromMs } = how;
  const wasStop = rec.state === "Stopping";
  if (wasStop) {
    d.actions.push({ kind: "cancel-stop", reason: why });
    rec.stop = undefined;
  } else {
    clearNotice(d, why);
  }
  const said = reason ?? `${wasStop ? "stop" : "pending stop"} cancelled: ${why}`;
  if (how.noAgent) {
    event(d, "Normal", "IdleStopCancelled", said);
    if (!wasStop) return { reason: said };
    transition(d, "AgentLost");
    return { reason: said, handOver: true };
  }
  if (freshClockFromMs === undefined) transition(d, "Active");
  else {
    enterActive(d, freshClockFromMs);
    // The fresh clock moved the last human evidence: unattended-max counts from there now.
    d.seen = { ...observe(d), ...vetoesInForce(d) };
  }
  event(d, "Normal", "IdleStopCancelled", said);
  return activeTiming(d, said);
}

function requestStop(d: Draft, trigger: StopTrigger, why: string): Outcome {
  const { rec, nowMs } = d;
  rec.stop = {
    decidedAtMs: nowMs,
    trigger,
    reason: why,
    attempts: 1,
    lastAttemptAtMs: nowMs,
    idleSinceMs: rec.clock.lastActivityAtMs,
  };
  // The notice ends in the stop it announced: no "cleared" to the agent, which would read as a reprieve.
  rec.notice = undefined;
  transition(d, "Stopping");
  const idle = idleMs(d);
  d.actions.push({
    kind: "stop",
    trigger,
    reason: why,
    idleSeconds: idle === undefined ? undefined : idle / 1000,
    attempt: 1,
  });
  event(d, trigger === "agent-lost" ? "Warning" : "Normal", "IdleStop", why);
  return stoppingTiming(d, `stop now: ${why}`);
}

function recordWouldStop(d: Draft, trigger: StopTrigger, why: string): void {
  const idle = idleMs(d);
  d.actions.push({
    kind: "would-stop",
    trigger,
    reason: why,
    idleSeconds: idle === undefined ? undefined : idle / 1000,
  });
  event(d, "Normal", "IdleWouldStop", `observe mode, nothing stopped: ${why}`);
}

/** The platform stopped the VM (or carried out the engine's stop): nothing is cancelled, nobody is left to tell. */
function leaveForStopped(d: Draft, reason: string): Outcome {
  d.rec.notice = undefined;
  d.rec.stop = undefined;
  transition(d, "Stopped");
  return { reason };
}

/** A VM that reports no more becomes AgentLost (never idle); AgentLost then decides too. */
function loseAgent(d: Draft, silentMs: number): Outcome {
  const { policy } = d;
  clearNotice(d, "the agent is lost: nothing is stopped while the collector cannot see the VM");
  transition(d, "AgentLost");
  let reason = `no report for ${duration(silentMs)} (agent-lost-after ${formatDuration(policy.agentLostAfterSeconds)}): a VM the collector cannot see is never stopped`;
  if (policy.stopWhenAgentLostAfterSeconds !== null)
    reason += ` unless it stays lost for stop-when-agent-lost-after ${formatDuration(policy.stopWhenAgentLostAfterSeconds)}`;
  if (d.observation.host)
    reason += ` on the agent's evidence; after agent-lost-max ${formatDuration(policy.agentLostMaxSeconds)} KubeVirt's host-side readings decide`;
  event(d, "Warning", "AgentLost", reason);
  return { reason, handOver: true };
}

// --- one function per state -----------------------------------------------------------------

function decideActive(d: Draft): Outcome {
  if (notRunning(d)) return leaveForStopped(d, "the VM is not running (stopped outside ws)");
  observe(d);
  const lostFor = agentLostFor(d);
  if (lostFor !== undefined) return loseAgent(d, lostFor);
  const { rec, policy } = d;
  const idle = idleMs(d) ?? 0;
  const wait = (reason: string): Outcome => ({ ...activeTiming(d, reason), waiting: true });
  if (!policy.autostopEnabled) return wait(`autostop is disabled: tracked, never stopped (idle ${duration(idle)})`);
  if (rec.awaitingFreshReport)
    return wait("restored after a collector restart: waiting for a fresh report before deciding");
  if (!idleTimeoutReached(d))
    return wait(
      `idle ${duration(idle)} of ${formatDuration(policy.idleTimeoutSeconds)}; last activity: ${lastSeen(d)}`,
    );
  const held = heldBy(d);
  if (held !== undefined) return wait(`idle ${duration(idle)} ≥ idle-timeout, but held: ${held}`);
  return startNotice(d);
}

function activeTiming(d: Draft, reason: string): Outcome {
  const { rec, policy, nowMs } = d;
  const origin = rec.clock.lastActivityAtMs;
  const idleAtMs = origin === undefined ? undefined : origin + policy.idleTimeoutSeconds * 1000;
  let stopAtMs: number | undefined;
  const vetoes = d.seen?.vetoes ?? [];
  if (policy.autostopEnabled && idleAtMs !== undefined && !vetoes.some((veto) => veto.untilMs === undefined)) {
    const heldUntil = Math.max(-Infinity, ...vetoes.map((veto) => veto.untilMs ?? -Infinity));
    stopAtMs = Math.max(idleAtMs, heldUntil, nowMs) + policy.gracePeriodSeconds * 1000;
  }
  const wakeAtMs = nextOf(nowMs, [
    ...vetoEnds(d),
    agentLostAtMs(rec, policy),
    policy.autostopEnabled ? idleAtMs : undefined,
  ]);
  return { reason, wakeAtMs, stopAtMs };
}

function decidePending(d: Draft): Outcome {
  if (notRunning(d)) return leaveForStopped(d, "the VM is not running (stopped outside ws)");
  observe(d);
  const lostFor = agentLostFor(d);
  if (lostFor !== undefined) return loseAgent(d, lostFor);
  const { rec, policy, nowMs, observation, prev } = d;
  const notice = rec.notice;
  const idle = idleMs(d) ?? 0;
  if (!notice) {
    // A record without its notice cannot be trusted to stop: start over.
    transition(d, "Active");
    return activeTiming(d, "pending stop without a notice: back to Active");
  }
  if (!policy.autostopEnabled)
    return cancelPendingStop(d, "autostop was disabled", {
      reason: "autostop was disabled: the pending stop is cancelled",
    });
  if (activitySince(rec, notice.idleSinceMs))
    return cancelPendingStop(d, `activity: ${rec.clock.lastActivityDetail ?? "seen"}`);
  if (!idleTimeoutReached(d))
    return cancelPendingStop(
      d,
      `idle ${duration(idle)} is below idle-timeout ${formatDuration(policy.idleTimeoutSeconds)} now`,
    );
  const held = heldBy(d);
  if (held !== undefined) return cancelPendingStop(d, held, { reason: `pending stop cancelled, held: ${held}` });
  // A notice that promised nothing would happen cannot turn into a stop: warn again, for real.
  if (withdrawObserveNotice(d)) return startNotice(d);
  const wait = (reason: string): Outcome => ({ ...pendingTiming(d, reason), waiting: true });
  if (rec.awaitingFreshReport)
    return wait("restored after a collector restart: waiting for a fresh report before the pending stop can go ahead");
  if (graceOver(notice, nowMs)) {
    const why = `idle for ${duration(idle)} (idle-timeout ${formatDuration(policy.idleTimeoutSeconds)}) and the grace period of the notice ${notice.id} is over with no activity, lease or other veto; last activity: ${lastSeen(d)}${unattendedNote(d)}${blindNote(d)}`;
    return graceOverStop(
      d,
      notice,
      "idle",
      why,
      (reason, waiting) => ({ ...pendingTiming(d, reason), waiting }),
      "still idle",
    );
  }
  repeatNoticeWhenDue(d, notice, observation.agentConnected && !prev.agentConnected);
  return wait(
    `${policy.mode === "observe" ? "would stop" : "stop"} in ${duration(notice.deadlineMs - nowMs)} unless there is activity or a lease (notice ${notice.id})`,
  );
}

function pendingTiming(d: Draft, reason: string): Outcome {
  const { rec, policy, nowMs } = d;
  const notice = rec.notice;
  return {
    reason,
    stopAtMs: policy.autostopEnabled && notice && notice.wouldStopAtMs === undefined ? notice.deadlineMs : undefined,
    wakeAtMs: nextOf(nowMs, [
      ...vetoEnds(d),
      agentLostAtMs(rec, policy),
      notice?.deadlineMs,
      notice === undefined ? undefined : notice.lastSentAtMs + policy.noticeRepeatSeconds * 1000,
    ]),
  };
}

function decideStopping(d: Draft): Outcome {
  const { rec, nowMs, isNewReport, observation } = d;
  const result = observation.stopResult;
  if (rec.stop && result) {
    if (result.outcome === "accepted")
      return leaveForStopped(d, `the stop was accepted${result.message ? ` (${result.message})` : ""}`);
    if (result.outcome === "refused") {
      event(d, "Warning", "IdleStopRefused", `stop refused: ${result.message}`);
      rec.stop = undefined;
      Object.assign(rec, clocksRestartedAt(rec, nowMs, "a refused stop"));
      transition(d, "Active");
      return {
        reason: `the stop was refused: ${result.message}; the idle clock restarts so the refusal repeats at most once per idle-timeout`,
        handOver: true,
      };
    }
    rec.stop = { ...rec.stop, lastFailure: { atMs: nowMs, message: result.message } };
    event(
      d,
      "Warning",
      "IdleStopFailed",
      `stop failed: ${result.message}; asking again in ${duration(stopRetryDelayMs(rec.stop.attempts))}`,
    );
  }
  if (notRunning(d)) return leaveForStopped(d, "the stop was carried out: the VM is not running");
  observe(d);
  const stop = rec.stop;
  if (!stop) return stoppingTiming(d, "Stopping");
  const hostActivity = stop.trigger === "agent-lost" ? hostActivityAfter(rec.host, stop.decidedAtMs) : undefined;
  if (hostActivity && !isNewReport)
    // No agent to come back to Active for: the VM stays AgentLost, judged on the host again.
    return cancelPendingStop(d, hostActivity, {
      reason: `stop cancelled: activity after the stop was decided: ${hostActivity}`,
      noAgent: true,
    });
  if (stop.trigger === "agent-lost" && isNewReport) {
    const why = "the agent reports again";
    return cancelPendingStop(d, why, {
      reason: `stop cancelled: ${why}; the idle clock starts afresh`,
      freshClockFromMs: rec.lastReportAtMs ?? nowMs,
    });
  }
  if (activitySince(rec, stop.idleSinceMs))
    return cancelPendingStop(d, `activity after the stop was decided: ${rec.clock.lastActivityDetail ?? "seen"}`);
  if (stop.lastFailure && nowMs - stop.lastFailure.atMs >= stopRetryDelayMs(stop.attempts)) {
    rec.stop = { ...stop, attempts: stop.attempts + 1, lastAttemptAtMs: nowMs, lastFailure: undefined };
    const idle = idleMs(d);
    d.actions.push({
      kind: "stop",
      trigger: stop.trigger,
      reason: stop.reason,
      idleSeconds: idle === undefined ? undefined : idle / 1000,
      attempt: rec.stop.attempts,
    });
    return stoppingTiming(
      d,
      `asking again for the stop (attempt ${rec.stop.attempts}) after: ${stop.lastFailure.message}`,
    );
  }
  return { ...stoppingTiming(d, `waiting for the stop to be carried out (${stop.reason})`), waiting: true };
}

function stoppingTiming(d: Draft, reason: string): Outcome {
  const { rec, policy, nowMs } = d;
  const failure = rec.stop?.lastFailure;
  return {
    reason,
    stopAtMs: policy.autostopEnabled ? nowMs : undefined,
    wakeAtMs: nextOf(nowMs, [
      ...vetoEnds(d),
      failure && rec.stop ? failure.atMs + stopRetryDelayMs(rec.stop.attempts) : undefined,
    ]),
  };
}

function decideStopped(d: Draft): Outcome {
  const { rec, prev, received, isNewReport, evidence, observation } = d;
  if (notRunning(d)) return { reason: "the VM is stopped" };
  const uptime = received?.report.system?.uptimeSeconds;
  const runningAgain = observation.vmRunning === true || (isNewReport && bootedAfter(evidence, uptime, prev.sinceMs));
  if (!runningAgain) return { reason: "the VM is stopped" };
  Object.assign(rec, clocksForgotten(rec, "the VM was started again"));
  if (isNewReport && received) enterActive(d, received.receivedAtMs);
  else transition(d, "Unknown");
  return { reason: "the VM runs again: the idle clock starts afresh", handOver: true };
}

/** Unknown: the collector has not heard from the VM yet. */
function decideUnknown(d: Draft): Outcome {
  if (notRunning(d)) return leaveForStopped(d, "the VM is not running (stopped outside ws)");
  if (d.isNewReport && d.received) {
    // A notice the host-side rule sent while the agent was missing ends with the agent's first report.
    clearNotice(d, "the agent reports again");
    enterActive(d, d.received.receivedAtMs);
    return { reason: "first report from the agent: the idle clock starts", handOver: true };
  }
  return decideUnseen(d);
}

/** AgentLost: the agent stopped reporting. */
function decideAgentLost(d: Draft): Outcome {
  if (notRunning(d)) return leaveForStopped(d, "the VM is not running (stopped outside ws)");
  const { rec, prev, received, isNewReport } = d;
  // Only a VM that was lost before this decision comes back: one just found lost goes on below.
  if (prev.state === "AgentLost" && isNewReport && received && prev.lastReportAtMs !== undefined) {
    // The lost time is missing data, not idleness: no clock ran meanwhile.
    const gapMs = received.receivedAtMs - prev.lastReportAtMs;
    Object.assign(rec, clocksShiftedBy(rec, gapMs));
    clearNotice(d, "the agent reports again");
    enterActive(d, received.receivedAtMs - gapMs);
    const reason = `reports resumed after ${duration(gapMs)}; the idle clock did not run while the agent was lost`;
    event(d, "Normal", "AgentBack", reason);
    return { reason, handOver: true };
  }
  return decideUnseen(d);
}

/** AgentLost and Unknown: the collector cannot see the VM; it is stopped only after stop-when-agent-lost-after. */
function decideUnseen(d: Draft): Outcome {
  observe(d);
  const onHost = decideOnHost(d);
  if (onHost) return onHost;
  const { rec, policy, nowMs, observation } = d;
  const limit = policy.stopWhenAgentLostAfterSeconds;
  const silentSince =
    rec.state === "AgentLost" ? rec.lastReportAtMs : observation.vmRunning === true ? rec.sinceMs : undefined;
  const wait = (reason: string): Outcome => ({ ...unseenTiming(d, reason), waiting: true });
  if (silentSince === undefined)
    return wait(rec.state === "Unknown" ? "waiting for the first report" : "the agent is lost: never stopped");
  const silentMs = nowMs - silentSince;
  const stopAtMs = lostStopAtMs(silentSince, policy);
  if (stopAtMs === undefined || !policy.autostopEnabled || nowMs < stopAtMs)
    return wait(
      `no report for ${duration(silentMs)}: a VM the collector cannot see is ${limit === null ? "never stopped" : `stopped only after stop-when-agent-lost-after ${formatDuration(limit)}`}`,
    );
  const why = `no report for ${duration(silentMs)} ≥ stop-when-agent-lost-after ${formatDuration(limit ?? 0)}`;
  if (policy.mode === "enforce") return requestStop(d, "agent-lost", why);
  if (!rec.agentLostWouldStopRecorded) {
    rec.agentLostWouldStopRecorded = true;
    recordWouldStop(d, "agent-lost", why);
    return unseenTiming(d, `would stop now (observe mode): ${why}`);
  }
  return wait(`observe mode: would have stopped (${why})`);
}

function unseenTiming(d: Draft, reason: string): Outcome {
  const { rec, policy, nowMs } = d;
  if (rec.state === "Unknown")
    return { reason, wakeAtMs: nextOf(nowMs, [...vetoEnds(d), lostStopAtMs(rec.sinceMs, policy)]) };
  const stopAtMs = lostStopAtMs(rec.lastReportAtMs, policy);
  return {
    reason,
    stopAtMs: policy.autostopEnabled ? stopAtMs : undefined,
    wakeAtMs: nextOf(nowMs, [...vetoEnds(d), stopAtMs]),
  };
}

/** Since when a VM has had no agent: its last report (AgentLost), or since it was seen running without one (Unknown). */
function agentGoneSinceMs(d: Draft): number | undefined {
  const { rec, observation } = d;
  if (rec.state === "AgentLost") return rec.lastReportAtMs ?? rec.sinceMs;
  if (rec.state === "Unknown" && observation.vmRunning === true) return rec.sinceMs;
  return undefined;
}

/**
 * AgentLost and Unknown with host-side evidence: engine/host.ts judges, this carries it out with
 * the usual notice and stop. Undefined: the host does not decide (not configured, autostop off,
 * or not judged yet / blind while stop-when-agent-lost-after is set, which then applies as before).
 */
function decideOnHost(d: Draft): Outcome | undefined {
  const { rec, policy, nowMs, observation } = d;
  const reading = observation.host;
  const goneSinceMs = agentGoneSinceMs(d);
  if (!reading || goneSinceMs === undefined) return undefined;
  if (!policy.autostopEnabled) {
    if (rec.notice)
      cancelPendingStop(d, "autostop was disabled", {
        reason: "autostop was disabled: the pending stop is cancelled",
        noAgent: true,
      });
    return undefined;
  }
  const verdict = judgeWithoutAgent({ nowMs, policy, record: rec, reading, agentGoneSinceMs: goneSinceMs });
  d.host = { goneSinceMs, role: verdict.reason };
  const timing = (reason: string, waiting = false): Outcome => {
    const schedule = hostSchedule(rec, policy, goneSinceMs, reading, nowMs);
    return { reason, waiting, stopAtMs: schedule.stopAtMs, wakeAtMs: nextOf(nowMs, schedule.wakeAtMs) };
  };
  if (verdict.kind !== "idle") {
    const cancelled = rec.notice !== undefined;
    const reason = cancelled ? cancelPendingStop(d, verdict.reason, { noAgent: true }).reason : verdict.reason;
    if (verdict.kind !== "active" && policy.stopWhenAgentLostAfterSeconds !== null) {
      d.host = undefined;
      return undefined;
    }
    return timing(reason, !cancelled);
  }
  const hostIdle = nowMs - verdict.idleSinceMs;
  const idle = `host idle for ${duration(hostIdle)} (idle-timeout ${formatDuration(policy.idleTimeoutSeconds)})`;
  withdrawObserveNotice(d);
  const notice = rec.notice;
  if (!notice) {
    const sent = sendNotice(d, verdict.idleSinceMs, hostIdle, `${verdict.reason}; ${idle}`);
    const reason = `${sent.reason}: notice sent (webhooks: the VM's terminals cannot be reached), ${stopWord(policy)} in ${formatDuration(policy.gracePeriodSeconds)} unless the agent reports or the host shows activity`;
    event(d, "Warning", "IdleStopPending", reason);
    return timing(reason);
  }
  if (graceOver(notice, nowMs)) {
    const why = `${verdict.reason}; ${idle} and the grace period of the notice ${notice.id} is over`;
    return graceOverStop(d, notice, "agent-lost", why, timing, "host still idle");
  }
  repeatNoticeWhenDue(d, notice, false, hostIdle);
  return timing(
    `${verdict.reason}; ${idle}: ${policy.mode === "observe" ? "would stop" : "stop"} in ${duration(notice.deadlineMs - nowMs)} unless the agent reports or the host shows activity (notice ${notice.id})`,
    true,
  );
}

const STATES: Record<EngineState, (d: Draft) => Outcome> = {
  Unknown: decideUnknown,
  Active: decideActive,
  StoppingPending: decidePending,
  Stopping: decideStopping,
  Stopped: decideStopped,
  AgentLost: decideAgentLost,
};

function finish(d: Draft, outcome: Outcome): Decision {
  const { rec, policy, nowMs, evidence, actions, prev } = d;
  const from = prev.state;
  rec.activeSignals =
    rec.state === "Stopped" ? [] : activeSignalNames(evidence, nowMs, Math.max(30, 2 * policy.reportIntervalSeconds));
  if (rec.state !== from) {
    actions.push({
      kind: "persist",
      values: {
        state: rec.state,
        lastActiveMs: rec.clock.lastActivityAtMs,
        noticeId: rec.notice?.id,
        stopDeadlineMs: rec.notice?.deadlineMs,
      },
    });
  }
  const idleSeconds = idleSecondsAt(rec, nowMs);
  const seen = d.seen;
  const explanation: Explanation = {
    atMs: nowMs,
    from,
    to: rec.state,
    idleSeconds,
    idleTimeoutSeconds: policy.idleTimeoutSeconds,
    lastActivityAtMs: rec.clock.lastActivityAtMs,
    lastActivity: rec.clock.lastActivityDetail,
    ...(rec.lastHumanAtMs === undefined ? {} : { lastHumanAtMs: rec.lastHumanAtMs }),
    ...(seen?.unattended ? { unattended: true } : {}),
    readings: seen?.counted ?? [],
    // Judged on the host side, the gone agent's last vetoes are stale: the host's readings stand for them.
    vetoes: d.host ? [] : (seen?.vetoes ?? []),
    blind: evidence?.blind ?? [],
    stopAtMs: outcome.stopAtMs,
    reason: outcome.reason || `${rec.state}`,
    ...(d.observation.host ? { host: explainHost(d.observation.host, rec, policy, d.host?.role) } : {}),
  };
  const summary = summarize(rec.state, explanation, policy);
  rec.summary = summary;
  rec.scheduledStopAtMs = outcome.stopAtMs;
  return { next: rec, actions, explanation, summary, wakeAtMs: outcome.wakeAtMs };
}

function summarize(state: EngineState, explanation: Explanation, policy: Policy): string {
  const parts: string[] = [state];
  if (policy.mode === "observe") parts.push("observe mode");
  if (!policy.autostopEnabled) parts.push("autostop off");
  if (explanation.idleSeconds !== undefined)
    parts.push(`idle ${formatDuration(explanation.idleSeconds)} of ${formatDuration(policy.idleTimeoutSeconds)}`);
  if (explanation.stopAtMs !== undefined && (state === "Active" || state === "AgentLost")) {
    parts.push(
      `stop in ${formatDuration(Math.max(0, explanation.stopAtMs - explanation.atMs) / 1000)} if nothing changes`,
    );
  }
  if (explanation.vetoes.length > 0) parts.push(`held by ${explanation.vetoes.map((veto) => veto.kind).join(", ")}`);
  parts.push(explanation.reason);
  return parts.join(" · ");
}
