// decide(now, policy, observation, previous) → what the VM's record becomes and
// what should be done about it. Pure: no clock (now is an argument), no I/O,
// no environment. Calling it again with the same Report is harmless, so the
// caller may run it on every Report and on a timer.
//
// Unknown ──first report──▶ Active ◀──────────── activity / lease ───────────┐
// Active ──idle ≥ idle-timeout──▶ StoppingPending (Notice, grace-period) ────┤
// StoppingPending ──grace over, no veto──▶ Stopping ──stop accepted──▶ Stopped
// Active/StoppingPending ──no report for agent-lost-after──▶ AgentLost

import { formatDuration } from "@ws/protocol";
import { advanceClocks, clockOf, countedReading, type CountedReading, unattendedUntilMs } from "./activity.js";
import { activeSignalNames, EMPTY_MEMORY, extractEvidence, vetoesAt } from "./evidence.js";
import { leaseDecision, leaseDecisionsKey } from "./leases.js";
import type { EventReason } from "./events.js";
import { describeErrors, describeFallback } from "./policy.js";
import { isBackgroundVeto } from "./strength.js";
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

/** One decision in the making: what decide() was given and what it has built so far. */
interface Step {
  nowMs: number;
  policy: Policy;
  observation: Observation;
  prev: VmRecord;
  from: EngineState;
  rec: VmRecord;
  actions: Action[];
  received: Observation["latestReport"];
  isNewReport: boolean;
  evidence: Evidence | undefined;
  reason: string;
  counted: CountedReading[];
  /** Vetoes in force, background work bounded by unattended-max (set once the clocks ran). */
  vetoes: Veto[];
  /** unattended-max is over: the background work that no longer holds the VM. */
  unattended: Veto[] | undefined;
}

export function decide(nowMs: number, policy: Policy, observation: Observation, previous?: VmRecord): Decision {
  const prev = previous ?? initialRecord(nowMs);
  const received = observation.latestReport;
  const step: Step = {
    nowMs,
    policy,
    observation,
    prev,
    from: prev.state,
    rec: { ...prev, agentConnected: observation.agentConnected },
    actions: [],
    received,
    isNewReport:
      received !== undefined && (prev.lastReportAtMs === undefined || received.receivedAtMs > prev.lastReportAtMs),
    // The caller (vm/step.ts) may pass the evidence it extracted once when the Report arrived.
    evidence: observation.evidence ?? (received ? extractEvidence(received, policy, prev.memory) : undefined),
    reason: "",
    counted: [],
    vetoes: [],
    unattended: undefined,
  };
  notePolicyErrors(step);
  if (step.isNewReport && step.evidence && received) {
    step.rec.lastReportAtMs = received.receivedAtMs;
    step.rec.memory = step.evidence.memory;
    step.rec.awaitingFreshReport = false;
  }
  if (applyStopResult(step) === "stopped" || noteNotRunning(step) || !comeBack(step)) return finish(step);
  runClocks(step);
  sendLeaseDecisions(step);
  noticeLostAgent(step);
  switch (step.rec.state) {
    case "Active":
      decideActive(step);
      break;
    case "StoppingPending":
      decidePending(step);
      break;
    case "Stopping":
      decideStopping(step);
      break;
    case "AgentLost":
    case "Unknown":
      decideUnseen(step);
      break;
    case "Stopped":
      break;
  }
  return finish(step);
}

// --- the parts every state shares -----------------------------------------------------

function transition(step: Step, to: EngineState): void {
  if (step.rec.state !== to) {
    step.rec.state = to;
    step.rec.sinceMs = step.nowMs;
  }
}

function event(step: Step, type: "Normal" | "Warning", reason: EventReason, message: string): void {
  step.actions.push({ kind: "event", type, reason, message });
}

function clearNotice(step: Step, why: string): void {
  if (!step.rec.notice) return;
  step.actions.push({ kind: "notice-cleared", id: step.rec.notice.id, reason: why });
  step.rec.notice = undefined;
}

function idleMs(step: Step): number | undefined {
  return step.rec.lastActivityAtMs === undefined ? undefined : Math.max(0, step.nowMs - step.rec.lastActivityAtMs);
}

/** The idle clock's last mover, in words; weak evidence says that nobody used it. */
function lastSeen(step: Step): string {
  const { rec, nowMs, policy } = step;
  if (!rec.lastActivityDetail) return "none seen";
  const ago = `${rec.lastActivityDetail}, ${duration(idleMs(step) ?? 0)} ago`;
  if (!rec.lastActivityWeak || rec.lastStrongAtMs === undefined) return ago;
  return `${ago}: connected, but nobody has used it for ${duration(nowMs - rec.lastStrongAtMs)}; weak evidence counts for at most ${formatDuration(policy.weakActivityMaxSeconds)}`;
}

function blindNote(step: Step): string {
  const blind = step.evidence?.blind ?? [];
  return blind.length > 0 ? `; cannot read: ${blind.map((entry) => entry.source).join(", ")}` : "";
}

/** Why background work no longer holds the VM, for notices and stops. */
function unattendedNote(step: Step): string {
  if (!step.unattended || step.rec.lastHumanAtMs === undefined || step.policy.unattendedMaxSeconds === null) return "";
  const work = step.unattended.length > 0 ? ` (${describeVetoes(step.unattended)})` : "";
  return `; no human evidence for ${duration(step.nowMs - step.rec.lastHumanAtMs)} (unattended-max ${formatDuration(step.policy.unattendedMaxSeconds)}): background work${work} no longer holds the VM; ws-lease keeps it running`;
}

/** Sets the clocks to start from `baselineMs` (or later), as a VM that just became Active. */
function enterActive(step: Step, baselineMs: number): void {
  const { rec } = step;
  transition(step, "Active");
  rec.lastActivityAtMs = Math.max(rec.lastActivityAtMs ?? baselineMs, baselineMs);
  rec.lastStrongAtMs = Math.max(rec.lastStrongAtMs ?? baselineMs, baselineMs);
  rec.lastActivityDetail ??= "the collector started watching";
  rec.lastHumanAtMs = Math.max(rec.lastHumanAtMs ?? baselineMs, baselineMs);
  const attended = rec.attended ?? clockOf(rec);
  rec.attended = {
    ...attended,
    lastActivityAtMs: Math.max(attended.lastActivityAtMs ?? baselineMs, baselineMs),
    lastStrongAtMs: Math.max(attended.lastStrongAtMs ?? baselineMs, baselineMs),
    lastActivityDetail: attended.lastActivityDetail ?? rec.lastActivityDetail,
  };
  rec.notice = undefined;
  rec.stop = undefined;
  rec.agentLostWouldStopRecorded = false;
}

/** Every clock restarts now (a refused stop): the refusal repeats at most once per idle-timeout. */
function restartClocks(step: Step, detail: string): void {
  const { rec, nowMs } = step;
  rec.lastActivityAtMs = nowMs;
  rec.lastStrongAtMs = nowMs;
  rec.lastActivityDetail = detail;
  rec.lastActivityWeak = false;
  rec.attended = clockOf(rec);
}

// --- before the state machine ------------------------------------------------------------

/** Policy errors are reported when they change, not on every decision (no policyStatus: no errors). */
function notePolicyErrors(step: Step): void {
  const { errors, fallback } = step.observation.policyStatus ?? { errors: [], fallback: "none" as const };
  const key = errors.length > 0 ? `${fallback}|${describeErrors(errors)}` : "";
  if (key === step.prev.policyErrorsKey) return;
  if (errors.length > 0) {
    step.actions.push({ kind: "policy-error", errors: [...errors], fallback });
    event(step, "Warning", "PolicyInvalid", `${describeErrors(errors)}. The VM keeps ${describeFallback(fallback)}.`);
  } else {
    event(step, "Normal", "PolicyValid", "the policy annotations are valid again and in force");
  }
  step.rec.policyErrorsKey = key;
}

/** The outcome of a stop the engine asked for. */
function applyStopResult(step: Step): "stopped" | undefined {
  const { rec, observation, nowMs } = step;
  if (rec.state !== "Stopping" || !rec.stop || !observation.stopResult) return undefined;
  const result = observation.stopResult;
  if (result.outcome === "accepted") {
    step.reason = `the stop was accepted${result.message ? ` (${result.message})` : ""}`;
    rec.stop = undefined;
    transition(step, "Stopped");
    return "stopped";
  }
  if (result.outcome === "refused") {
    step.reason = `the stop was refused: ${result.message}; the idle clock restarts so the refusal repeats at most once per idle-timeout`;
    event(step, "Warning", "IdleStopRefused", `stop refused: ${result.message}`);
    rec.stop = undefined;
    restartClocks(step, "a refused stop");
    transition(step, "Active");
  } else {
    rec.stop = { ...rec.stop, lastFailure: { atMs: nowMs, message: result.message } };
    event(
      step,
      "Warning",
      "IdleStopFailed",
      `stop failed: ${result.message}; asking again in ${duration(stopRetryDelayMs(rec.stop.attempts))}`,
    );
  }
  return undefined;
}

/** The VM is not running: whatever we thought, it is stopped now. True when that decides. */
function noteNotRunning(step: Step): boolean {
  const { rec } = step;
  if (step.observation.vmRunning !== false) return false;
  if (rec.state !== "Stopped") {
    step.reason =
      rec.state === "Stopping"
        ? "the stop was carried out: the VM is not running"
        : "the VM is not running (stopped outside ws)";
    // Not a cancellation: the stop happened (nobody is left to tell).
    rec.notice = undefined;
    rec.stop = undefined;
    transition(step, "Stopped");
  } else {
    step.reason = "the VM is stopped";
  }
  return true;
}

/** Coming back after a stop, a first report or a lost agent. False when the VM stays stopped. */
function comeBack(step: Step): boolean {
  const { rec, prev, received, isNewReport, evidence, observation } = step;
  if (rec.state === "Stopped") {
    const uptime = received?.report.system?.uptimeSeconds;
    const runningAgain = observation.vmRunning === true || (isNewReport && bootedAfter(evidence, uptime, prev.sinceMs));
    if (!runningAgain) {
      step.reason = "the VM is stopped";
      return false;
    }
    rec.lastActivityAtMs = undefined;
    rec.lastStrongAtMs = undefined;
    rec.lastHumanAtMs = undefined;
    rec.attended = undefined;
    rec.lastActivityWeak = false;
    rec.lastActivityDetail = "the VM was started again";
    if (isNewReport && received) enterActive(step, received.receivedAtMs);
    else transition(step, "Unknown");
    step.reason = "the VM runs again: the idle clock starts afresh";
  }
  if (rec.state === "Unknown" && isNewReport && received) {
    enterActive(step, received.receivedAtMs);
    step.reason ||= "first report from the agent: the idle clock starts";
  }
  if (rec.state === "AgentLost" && isNewReport && received && prev.lastReportAtMs !== undefined) {
    // The lost time is missing data, not idleness: no clock ran meanwhile.
    const gapMs = received.receivedAtMs - prev.lastReportAtMs;
    const shift = (atMs: number | undefined) => (atMs === undefined ? undefined : atMs + gapMs);
    rec.lastActivityAtMs = shift(rec.lastActivityAtMs);
    rec.lastStrongAtMs = shift(rec.lastStrongAtMs);
    rec.lastHumanAtMs = shift(rec.lastHumanAtMs);
    if (rec.attended)
      rec.attended = {
        ...rec.attended,
        lastActivityAtMs: shift(rec.attended.lastActivityAtMs),
        lastStrongAtMs: shift(rec.attended.lastStrongAtMs),
      };
    enterActive(step, received.receivedAtMs - gapMs);
    step.reason = `reports resumed after ${duration(gapMs)}; the idle clock did not run while the agent was lost`;
    event(step, "Normal", "AgentBack", step.reason);
  }
  return true;
}

/** The idle clock, the attended clock and the last human evidence; then the vetoes in force. */
function runClocks(step: Step): void {
  const { rec, evidence, received, policy, nowMs } = step;
  if (evidence && received && (rec.state === "Active" || rec.state === "StoppingPending" || rec.state === "Stopping")) {
    const update = advanceClocks(
      { ...rec, lastHumanAtMs: rec.lastHumanAtMs ?? rec.firstSeenMs },
      evidence.readings,
      policy,
      rec.state,
      nowMs,
    );
    rec.lastStrongAtMs = update.clock.lastStrongAtMs;
    rec.lastWeakAtMs = update.clock.lastWeakAtMs;
    rec.lastActivityAtMs = update.clock.lastActivityAtMs;
    rec.lastActivityDetail = update.clock.lastActivityDetail;
    rec.lastActivityWeak = update.clock.lastActivityWeak;
    rec.attended = clockOf(update.attended);
    rec.lastHumanAtMs = update.lastHumanAtMs;
    step.counted = update.clock.readings;
  } else if (evidence) {
    step.counted = evidence.readings.map((reading) => countedReading(reading, false));
  }
  step.vetoes = heldVetoes(step);
}

/** Vetoes that hold now; background work only until unattended-max after the last human evidence. */
function heldVetoes(step: Step): Veto[] {
  const { rec, evidence, policy, nowMs } = step;
  if (rec.state === "Stopped" || !evidence) return [];
  const until = unattendedUntilMs(rec.lastHumanAtMs, policy);
  const bounded = evidence.vetoes.map((veto) =>
    until !== undefined && isBackgroundVeto(veto.kind)
      ? { ...veto, untilMs: Math.min(veto.untilMs ?? Infinity, until) }
      : veto,
  );
  const ended = bounded.filter(
    (veto) =>
      isBackgroundVeto(veto.kind) &&
      veto.untilMs !== undefined &&
      veto.untilMs <= nowMs &&
      until !== undefined &&
      nowMs >= until,
  );
  step.unattended = until !== undefined && nowMs >= until ? ended : undefined;
  return vetoesAt({ ...evidence, vetoes: bounded }, nowMs);
}

/** Lease decisions: whenever a lease is new, unanswered, or its answer changed. */
function sendLeaseDecisions(step: Step): void {
  const { evidence, received, isNewReport, prev, rec, policy, nowMs } = step;
  if (!evidence || !received || !isNewReport) return;
  const key = leaseDecisionsKey(evidence.leases);
  const unconfirmed = (received.report.leases?.leases ?? []).some((lease) => !lease.confirmed);
  if (key === prev.leaseDecisionsKey && !unconfirmed) return;
  if (evidence.leases.length > 0 || prev.leaseDecisionsKey !== "") {
    step.actions.push({
      kind: "lease-decisions",
      decisions: evidence.leases.map((view) => leaseDecision(view, policy, nowMs)),
    });
  }
  rec.leaseDecisionsKey = key;
}

/** A silent agent is lost, never idle. */
function noticeLostAgent(step: Step): void {
  const { rec, policy, nowMs } = step;
  if ((rec.state !== "Active" && rec.state !== "StoppingPending") || rec.lastReportAtMs === undefined) return;
  const silentMs = nowMs - rec.lastReportAtMs;
  if (silentMs < policy.agentLostAfterSeconds * 1000) return;
  clearNotice(step, "the agent is lost: nothing is stopped while the collector cannot see the VM");
  transition(step, "AgentLost");
  step.reason = `no report for ${duration(silentMs)} (agent-lost-after ${formatDuration(policy.agentLostAfterSeconds)}): a VM the collector cannot see is never stopped`;
  if (policy.stopWhenAgentLostAfterSeconds !== null)
    step.reason += ` unless it stays lost for stop-when-agent-lost-after ${formatDuration(policy.stopWhenAgentLostAfterSeconds)}`;
  event(step, "Warning", "AgentLost", step.reason);
}

// --- notices and stops ----------------------------------------------------------------------

function startNotice(step: Step): void {
  const { rec, policy, nowMs } = step;
  const idle = idleMs(step) ?? 0;
  const notice: PendingNotice = {
    id: noticeId(nowMs, policy.mode),
    sentAtMs: nowMs,
    lastSentAtMs: nowMs,
    deadlineMs: nowMs + policy.gracePeriodSeconds * 1000,
    idleSinceMs: rec.lastActivityAtMs ?? nowMs,
    mode: policy.mode,
    reason: `idle for ${duration(idle)} (idle-timeout ${formatDuration(policy.idleTimeoutSeconds)}); last activity: ${lastSeen(step)}${unattendedNote(step)}${blindNote(step)}`,
  };
  rec.notice = notice;
  transition(step, "StoppingPending");
  pushNotice(step, notice, false);
  const what = policy.mode === "observe" ? "observe mode: would stop" : "stop";
  step.reason = `idle ${duration(idle)} ≥ idle-timeout ${formatDuration(policy.idleTimeoutSeconds)} and no veto: notice sent, ${what} in ${formatDuration(policy.gracePeriodSeconds)} unless there is activity or a lease`;
  event(
    step,
    "Normal",
    "IdleStopPending",
    `${notice.reason}; ${what} in ${formatDuration(policy.gracePeriodSeconds)} unless there is activity or a lease`,
  );
}

function pushNotice(step: Step, notice: PendingNotice, repeat: boolean): void {
  const { rec, policy, nowMs } = step;
  // The agent writes every notice to the terminals: remember when, so that output is not taken for activity.
  rec.lastNoticeSentAtMs = nowMs;
  step.actions.push({
    kind: "notice",
    id: notice.id,
    deadlineMs: notice.deadlineMs,
    stopInSeconds: Math.max(0, (notice.deadlineMs - nowMs) / 1000),
    idleSeconds: (idleMs(step) ?? 0) / 1000,
    reason: notice.reason,
    hint: `any activity cancels it; to keep the VM running without activity: ws-lease 2h (at most ${formatDuration(policy.maxKeepRunningSeconds)})`,
    mode: notice.mode,
    repeat,
  });
}

function requestStop(step: Step, trigger: StopTrigger, why: string): void {
  const { rec, nowMs } = step;
  rec.stop = {
    decidedAtMs: nowMs,
    trigger,
    reason: why,
    attempts: 1,
    lastAttemptAtMs: nowMs,
    idleSinceMs: rec.lastActivityAtMs,
  };
  // The notice ends in the stop it announced: no "cleared" to the agent, which would read as a reprieve.
  rec.notice = undefined;
  transition(step, "Stopping");
  const idle = idleMs(step);
  step.actions.push({
    kind: "stop",
    trigger,
    reason: why,
    idleSeconds: idle === undefined ? undefined : idle / 1000,
    attempt: 1,
  });
  event(step, trigger === "agent-lost" ? "Warning" : "Normal", "IdleStop", why);
}

function recordWouldStop(step: Step, trigger: StopTrigger, why: string): void {
  const idle = idleMs(step);
  step.actions.push({
    kind: "would-stop",
    trigger,
    reason: why,
    idleSeconds: idle === undefined ? undefined : idle / 1000,
  });
  event(step, "Normal", "IdleWouldStop", `observe mode, nothing stopped: ${why}`);
}

// --- one function per state -----------------------------------------------------------------

function decideActive(step: Step): void {
  const { rec, policy } = step;
  const idle = idleMs(step) ?? 0;
  if (!policy.autostopEnabled) {
    step.reason ||= `autostop is disabled: tracked, never stopped (idle ${duration(idle)})`;
  } else if (rec.awaitingFreshReport) {
    step.reason ||= "restored after a collector restart: waiting for a fresh report before deciding";
  } else if (idle < policy.idleTimeoutSeconds * 1000) {
    step.reason ||= `idle ${duration(idle)} of ${formatDuration(policy.idleTimeoutSeconds)}; last activity: ${lastSeen(step)}`;
  } else if (step.vetoes.length > 0) {
    step.reason ||= `idle ${duration(idle)} ≥ idle-timeout, but held: ${describeVetoes(step.vetoes)}`;
  } else {
    startNotice(step);
  }
}

function decidePending(step: Step): void {
  const { rec, policy, nowMs, observation, prev } = step;
  const notice = rec.notice;
  const idle = idleMs(step) ?? 0;
  if (!notice) {
    // A record without its notice cannot be trusted to stop: start over.
    transition(step, "Active");
    step.reason = "pending stop without a notice: back to Active";
    return;
  }
  if (!policy.autostopEnabled) {
    clearNotice(step, "autostop was disabled");
    transition(step, "Active");
    step.reason = "autostop was disabled: the pending stop is cancelled";
    event(step, "Normal", "IdleStopCancelled", step.reason);
    return;
  }
  const activityAfterNotice = rec.lastActivityAtMs !== undefined && rec.lastActivityAtMs > notice.idleSinceMs;
  if (activityAfterNotice || idle < policy.idleTimeoutSeconds * 1000) {
    const why = activityAfterNotice
      ? `activity: ${rec.lastActivityDetail ?? "seen"}`
      : `idle ${duration(idle)} is below idle-timeout ${formatDuration(policy.idleTimeoutSeconds)} now`;
    clearNotice(step, why);
    transition(step, "Active");
    step.reason = `pending stop cancelled: ${why}`;
    event(step, "Normal", "IdleStopCancelled", step.reason);
    return;
  }
  if (step.vetoes.length > 0) {
    const why = describeVetoes(step.vetoes);
    clearNotice(step, why);
    transition(step, "Active");
    step.reason = `pending stop cancelled, held: ${why}`;
    event(step, "Normal", "IdleStopCancelled", step.reason);
    return;
  }
  if (notice.mode === "observe" && policy.mode === "enforce") {
    // A notice that promised nothing would happen cannot turn into a stop: warn again, for real.
    clearNotice(step, "the policy changed from observe to enforce; a new notice follows");
    startNotice(step);
    return;
  }
  if (rec.awaitingFreshReport) {
    step.reason = "restored after a collector restart: waiting for a fresh report before the pending stop can go ahead";
    return;
  }
  if (nowMs >= notice.deadlineMs) {
    const why = `idle for ${duration(idle)} (idle-timeout ${formatDuration(policy.idleTimeoutSeconds)}) and the grace period of the notice ${notice.id} is over with no activity, lease or other veto; last activity: ${lastSeen(step)}${unattendedNote(step)}${blindNote(step)}`;
    if (policy.mode === "enforce") {
      requestStop(step, "idle", why);
      step.reason = `stop now: ${why}`;
    } else if (notice.wouldStopAtMs === undefined) {
      rec.notice = { ...notice, wouldStopAtMs: nowMs };
      recordWouldStop(step, "idle", why);
      step.reason = `would stop now (observe mode): ${why}`;
    } else {
      step.reason = `observe mode: would have stopped ${duration(nowMs - notice.wouldStopAtMs)} ago; still idle`;
    }
    return;
  }
  const repeatDue = nowMs - notice.lastSentAtMs >= policy.noticeRepeatSeconds * 1000;
  const reconnected = observation.agentConnected && !prev.agentConnected;
  if (repeatDue || reconnected) {
    rec.notice = { ...notice, lastSentAtMs: nowMs };
    pushNotice(step, rec.notice, true);
  }
  step.reason = `${policy.mode === "observe" ? "would stop" : "stop"} in ${duration(notice.deadlineMs - nowMs)} unless there is activity or a lease (notice ${notice.id})`;
}

function decideStopping(step: Step): void {
  const { rec, nowMs, isNewReport } = step;
  const stop = rec.stop;
  if (!stop) return;
  if (stop.trigger === "agent-lost" && isNewReport) {
    const why = "the agent reports again";
    step.actions.push({ kind: "cancel-stop", reason: why });
    rec.stop = undefined;
    enterActive(step, rec.lastReportAtMs ?? nowMs);
    step.reason = `stop cancelled: ${why}; the idle clock starts afresh`;
    event(step, "Normal", "IdleStopCancelled", step.reason);
    return;
  }
  if (
    rec.lastActivityAtMs !== undefined &&
    (stop.idleSinceMs === undefined || rec.lastActivityAtMs > stop.idleSinceMs)
  ) {
    const why = `activity after the stop was decided: ${rec.lastActivityDetail ?? "seen"}`;
    step.actions.push({ kind: "cancel-stop", reason: why });
    transition(step, "Active");
    rec.stop = undefined;
    step.reason = `stop cancelled: ${why}`;
    event(step, "Normal", "IdleStopCancelled", step.reason);
    return;
  }
  if (stop.lastFailure && nowMs - stop.lastFailure.atMs >= stopRetryDelayMs(stop.attempts)) {
    rec.stop = { ...stop, attempts: stop.attempts + 1, lastAttemptAtMs: nowMs, lastFailure: undefined };
    const idle = idleMs(step);
    step.actions.push({
      kind: "stop",
      trigger: stop.trigger,
      reason: stop.reason,
      idleSeconds: idle === undefined ? undefined : idle / 1000,
      attempt: rec.stop.attempts,
    });
    step.reason = `asking again for the stop (attempt ${rec.stop.attempts}) after: ${stop.lastFailure.message}`;
  } else {
    step.reason ||= `waiting for the stop to be carried out (${stop.reason})`;
  }
}

/** AgentLost and Unknown: the collector cannot see the VM. */
function decideUnseen(step: Step): void {
  const { rec, policy, nowMs, observation } = step;
  const limit = policy.stopWhenAgentLostAfterSeconds;
  const silentSince =
    rec.state === "AgentLost" ? rec.lastReportAtMs : observation.vmRunning === true ? rec.sinceMs : undefined;
  if (silentSince === undefined) {
    step.reason ||= rec.state === "Unknown" ? "waiting for the first report" : "the agent is lost: never stopped";
    return;
  }
  const silentMs = nowMs - silentSince;
  if (limit === null || !policy.autostopEnabled || silentMs < limit * 1000) {
    step.reason ||= `no report for ${duration(silentMs)}: a VM the collector cannot see is ${limit === null ? "never stopped" : `stopped only after stop-when-agent-lost-after ${formatDuration(limit)}`}`;
    return;
  }
  const why = `no report for ${duration(silentMs)} ≥ stop-when-agent-lost-after ${formatDuration(limit)}`;
  if (policy.mode === "enforce") {
    requestStop(step, "agent-lost", why);
    step.reason = `stop now: ${why}`;
  } else if (!rec.agentLostWouldStopRecorded) {
    rec.agentLostWouldStopRecorded = true;
    recordWouldStop(step, "agent-lost", why);
    step.reason = `would stop now (observe mode): ${why}`;
  } else {
    step.reason = `observe mode: would have stopped (${why})`;
  }
}

function finish(step: Step): Decision {
  const { rec, policy, nowMs, evidence, actions, from } = step;
  rec.activeSignals =
    rec.state === "Stopped" ? [] : activeSignalNames(evidence, nowMs, Math.max(30, 2 * policy.reportIntervalSeconds));
  if (rec.state !== from) {
    actions.push({
      kind: "persist",
      values: {
        state: rec.state,
        lastActiveMs: rec.lastActivityAtMs,
        noticeId: rec.notice?.id,
        stopDeadlineMs: rec.notice?.deadlineMs,
      },
    });
  }
  const idle =
    rec.lastActivityAtMs === undefined || rec.state === "Stopped" || rec.state === "Unknown"
      ? undefined
      : Math.max(0, nowMs - rec.lastActivityAtMs);
  const activeVetoes = heldVetoes(step);
  const stopAtMs = scheduledStopAt(rec, policy, activeVetoes, nowMs);
  const explanation: Explanation = {
    atMs: nowMs,
    from,
    to: rec.state,
    idleSeconds: idle === undefined ? undefined : idle / 1000,
    idleTimeoutSeconds: policy.idleTimeoutSeconds,
    lastActivityAtMs: rec.lastActivityAtMs,
    lastActivity: rec.lastActivityDetail,
    ...(rec.lastHumanAtMs === undefined ? {} : { lastHumanAtMs: rec.lastHumanAtMs }),
    ...(step.unattended ? { unattended: true } : {}),
    readings: step.counted,
    vetoes: activeVetoes,
    blind: evidence?.blind ?? [],
    stopAtMs,
    reason: step.reason || `${rec.state}`,
  };
  const summary = summarize(rec.state, explanation, policy);
  rec.summary = summary;
  rec.scheduledStopAtMs = stopAtMs;
  return { next: rec, actions, explanation, summary, wakeAtMs: wakeAt(rec, policy, activeVetoes, nowMs) };
}

/** When the VM would be stopped if nothing changes; undefined when no stop is scheduled. */
function scheduledStopAt(rec: VmRecord, policy: Policy, vetoes: readonly Veto[], nowMs: number): number | undefined {
  if (!policy.autostopEnabled) return undefined;
  switch (rec.state) {
    case "StoppingPending":
      return rec.notice && rec.notice.wouldStopAtMs === undefined ? rec.notice.deadlineMs : undefined;
    case "Stopping":
      return nowMs;
    case "Active": {
      if (rec.lastActivityAtMs === undefined) return undefined;
      const idleAt = rec.lastActivityAtMs + policy.idleTimeoutSeconds * 1000;
      if (vetoes.some((veto) => veto.untilMs === undefined)) return undefined;
      const heldUntil = Math.max(-Infinity, ...vetoes.map((veto) => veto.untilMs ?? -Infinity));
      return Math.max(idleAt, heldUntil, nowMs) + policy.gracePeriodSeconds * 1000;
    }
    case "AgentLost":
      return policy.stopWhenAgentLostAfterSeconds !== null && rec.lastReportAtMs !== undefined
        ? rec.lastReportAtMs + policy.stopWhenAgentLostAfterSeconds * 1000
        : undefined;
    default:
      return undefined;
  }
}

/** The next time this decision can change with no new input. */
function wakeAt(rec: VmRecord, policy: Policy, vetoes: readonly Veto[], nowMs: number): number | undefined {
  const candidates: number[] = [];
  for (const veto of vetoes) if (veto.untilMs !== undefined) candidates.push(veto.untilMs);
  if ((rec.state === "Active" || rec.state === "StoppingPending") && rec.lastReportAtMs !== undefined) {
    candidates.push(rec.lastReportAtMs + policy.agentLostAfterSeconds * 1000);
  }
  if (rec.state === "Active" && policy.autostopEnabled && rec.lastActivityAtMs !== undefined) {
    candidates.push(rec.lastActivityAtMs + policy.idleTimeoutSeconds * 1000);
  }
  if (rec.state === "StoppingPending" && rec.notice) {
    candidates.push(rec.notice.deadlineMs, rec.notice.lastSentAtMs + policy.noticeRepeatSeconds * 1000);
  }
  if (rec.state === "Stopping" && rec.stop?.lastFailure)
    candidates.push(rec.stop.lastFailure.atMs + stopRetryDelayMs(rec.stop.attempts));
  if (rec.state === "AgentLost" && policy.stopWhenAgentLostAfterSeconds !== null && rec.lastReportAtMs !== undefined) {
    candidates.push(rec.lastReportAtMs + policy.stopWhenAgentLostAfterSeconds * 1000);
  }
  if (rec.state === "Unknown" && policy.stopWhenAgentLostAfterSeconds !== null) {
    candidates.push(rec.sinceMs + policy.stopWhenAgentLostAfterSeconds * 1000);
  }
  const future = candidates.filter((at) => at > nowMs);
  return future.length > 0 ? Math.min(...future) : undefined;
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
