// decide(now, policy, observation, previous) → what the VM's record becomes and
// what should be done about it. Pure: no clock (now is an argument), no I/O,
// no environment. Calling it again with the same Report is harmless, so the
// caller may run it on every Report and on a timer.
//
// Unknown ──first report──▶ Active ◀──────────── activity / lease ───────────┐
// Active ──idle ≥ idle-timeout──▶ StoppingPending (Notice, grace-period) ────┤
// StoppingPending ──grace over, no veto──▶ Stopping ──stop accepted──▶ Stopped
// Active/StoppingPending ──no report for agent-lost-after──▶ AgentLost

import { formatDuration, SourceState } from "@ws/protocol";
import { advanceIdleClock, type CountedReading } from "./activity.js";
import { activeSignalNames, EMPTY_MEMORY, extractEvidence, vetoesAt } from "./evidence.js";
import { leaseDecision, leaseDecisionsKey } from "./leases.js";
import { describeErrors, describeFallback } from "./policy.js";
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

export function decide(nowMs: number, policy: Policy, observation: Observation, previous?: VmRecord): Decision {
  const prev = previous ?? initialRecord(nowMs);
  const from = prev.state;
  const actions: Action[] = [];
  const rec: VmRecord = { ...prev, agentConnected: observation.agentConnected };
  let reason = "";
  let counted: CountedReading[] = [];
  const transition = (to: EngineState) => {
    if (rec.state !== to) {
      rec.state = to;
      rec.sinceMs = nowMs;
    }
  };
  const event = (type: "Normal" | "Warning", eventReason: string, message: string) =>
    actions.push({ kind: "event", type, reason: eventReason, message });
  const clearNotice = (why: string) => {
    if (!rec.notice) return;
    actions.push({ kind: "notice-cleared", id: rec.notice.id, reason: why });
    rec.notice = undefined;
  };

  // --- policy errors: reported when they change, not on every decision (no policyStatus: no errors)
  {
    const { errors, fallback } = observation.policyStatus ?? { errors: [], fallback: "none" as const };
    const key = errors.length > 0 ? `${fallback}|${describeErrors(errors)}` : "";
    if (key !== prev.policyErrorsKey) {
      if (errors.length > 0) {
        actions.push({ kind: "policy-error", errors: [...errors], fallback });
        event("Warning", "PolicyInvalid", `${describeErrors(errors)}. The VM keeps ${describeFallback(fallback)}.`);
      } else {
        event("Normal", "PolicyValid", "the policy annotations are valid again and in force");
      }
      rec.policyErrorsKey = key;
    }
  }

  // --- the latest report
  const received = observation.latestReport;
  const isNewReport = received !== undefined && (prev.lastReportAtMs === undefined || received.receivedAtMs > prev.lastReportAtMs);
  // The caller (vm/step.ts) passes the evidence it extracted once when the Report arrived.
  const evidence = observation.evidence ?? (received ? extractEvidence(received, policy, prev.memory) : undefined);
  if (isNewReport && evidence && received) {
    rec.lastReportAtMs = received.receivedAtMs;
    rec.memory = evidence.memory;
    rec.awaitingFreshReport = false;
  }
  const enterActive = (baselineMs: number) => {
    transition("Active");
    rec.lastActivityAtMs = Math.max(rec.lastActivityAtMs ?? baselineMs, baselineMs);
    rec.lastStrongAtMs = Math.max(rec.lastStrongAtMs ?? baselineMs, baselineMs);
    rec.lastActivityDetail ??= "the collector started watching";
    rec.notice = undefined;
    rec.stop = undefined;
    rec.agentLostWouldStopRecorded = false;
  };

  // --- the outcome of a stop the engine asked for
  if (rec.state === "Stopping" && rec.stop && observation.stopResult) {
    const result = observation.stopResult;
    if (result.outcome === "accepted") {
      reason = `the stop was accepted${result.message ? ` (${result.message})` : ""}`;
      rec.stop = undefined;
      transition("Stopped");
      return finish();
    }
    if (result.outcome === "refused") {
      reason = `the stop was refused: ${result.message}; the idle clock restarts so the refusal repeats at most once per idle-timeout`;
      event("Warning", "IdleStopRefused", `stop refused: ${result.message}`);
      rec.stop = undefined;
      rec.lastActivityAtMs = nowMs;
      rec.lastStrongAtMs = nowMs;
      rec.lastActivityDetail = "a refused stop";
      transition("Active");
    } else {
      rec.stop = { ...rec.stop, lastFailure: { atMs: nowMs, message: result.message } };
      event("Warning", "IdleStopFailed", `stop failed: ${result.message}; asking again in ${duration(stopRetryDelayMs(rec.stop.attempts))}`);
    }
  }

  // --- the VM is not running: whatever we thought, it is stopped now
  if (observation.vmRunning === false) {
    if (rec.state !== "Stopped") {
      if (rec.state === "Stopping") reason = "the stop was carried out: the VM is not running";
      else reason = "the VM is not running (stopped outside ws)";
      // Not a cancellation: the stop happened (nobody is left to tell).
      rec.notice = undefined;
      rec.stop = undefined;
      transition("Stopped");
    } else {
      reason = "the VM is stopped";
    }
    return finish();
  }

  // --- coming back: after a stop, a first report, or a lost agent
  if (rec.state === "Stopped") {
    const uptime = received?.report.system?.uptimeSeconds;
    const runningAgain = observation.vmRunning === true || (isNewReport && bootedAfter(evidence, uptime, prev.sinceMs));
    if (!runningAgain) {
      reason = "the VM is stopped";
      return finish();
    }
    rec.lastActivityAtMs = undefined;
    rec.lastStrongAtMs = undefined;
    rec.lastActivityDetail = "the VM was started again";
    if (isNewReport && received) enterActive(received.receivedAtMs);
    else transition("Unknown");
    reason = "the VM runs again: the idle clock starts afresh";
  }
  if (rec.state === "Unknown" && isNewReport && received) {
    enterActive(received.receivedAtMs);
    reason ||= "first report from the agent: the idle clock starts";
  }
  if (rec.state === "AgentLost" && isNewReport && received && prev.lastReportAtMs !== undefined) {
    // The lost time is missing data, not idleness: the idle clock did not run meanwhile.
    const gapMs = received.receivedAtMs - prev.lastReportAtMs;
    if (rec.lastActivityAtMs !== undefined) rec.lastActivityAtMs += gapMs;
    if (rec.lastStrongAtMs !== undefined) rec.lastStrongAtMs += gapMs;
    enterActive(received.receivedAtMs - gapMs);
    reason = `reports resumed after ${duration(gapMs)}; the idle clock did not run while the agent was lost`;
    event("Normal", "AgentBack", reason);
  }

  // --- the idle clock
  if (evidence && received && (rec.state === "Active" || rec.state === "StoppingPending" || rec.state === "Stopping")) {
    const update = advanceIdleClock(rec, evidence.readings, policy, rec.state, nowMs);
    rec.lastStrongAtMs = update.lastStrongAtMs;
    rec.lastWeakAtMs = update.lastWeakAtMs;
    rec.lastActivityAtMs = update.lastActivityAtMs;
    rec.lastActivityDetail = update.lastActivityDetail;
    counted = update.readings;
  } else if (evidence) {
    counted = evidence.readings.map((reading) => ({ ...reading, counted: false }));
  }
  const idleMs = (): number | undefined => (rec.lastActivityAtMs === undefined ? undefined : Math.max(0, nowMs - rec.lastActivityAtMs));
  const timeoutMs = policy.idleTimeoutSeconds * 1000;
  const vetoes = rec.state === "Stopped" ? [] : vetoesAt(evidence, nowMs);
  const lastSeen = () => (rec.lastActivityDetail ? `${rec.lastActivityDetail}, ${duration(idleMs() ?? 0)} ago` : "none seen");

  // --- lease decisions: whenever a lease is new, unanswered, or its answer changed
  if (evidence && received && isNewReport) {
    const key = leaseDecisionsKey(evidence.leases);
    const unconfirmed = (received.report.leases?.leases ?? []).some((lease) => !lease.confirmed);
    if (key !== prev.leaseDecisionsKey || unconfirmed) {
      if (evidence.leases.length > 0 || prev.leaseDecisionsKey !== "") {
        actions.push({ kind: "lease-decisions", decisions: evidence.leases.map((view) => leaseDecision(view, policy, nowMs)) });
      }
      rec.leaseDecisionsKey = key;
    }
  }

  // --- a silent agent is lost, never idle
  if ((rec.state === "Active" || rec.state === "StoppingPending") && rec.lastReportAtMs !== undefined) {
    const silentMs = nowMs - rec.lastReportAtMs;
    if (silentMs >= policy.agentLostAfterSeconds * 1000) {
      clearNotice("the agent is lost: nothing is stopped while the collector cannot see the VM");
      transition("AgentLost");
      reason = `no report for ${duration(silentMs)} (agent-lost-after ${formatDuration(policy.agentLostAfterSeconds)}): a VM the collector cannot see is never stopped`;
      if (policy.stopWhenAgentLostAfterSeconds !== null) reason += ` unless it stays lost for stop-when-agent-lost-after ${formatDuration(policy.stopWhenAgentLostAfterSeconds)}`;
      event("Warning", "AgentLost", reason);
    }
  }

  const startNotice = () => {
    const idle = idleMs() ?? 0;
    const deadlineMs = nowMs + policy.gracePeriodSeconds * 1000;
    const notice: PendingNotice = {
      id: noticeId(nowMs, policy.mode),
      sentAtMs: nowMs,
      lastSentAtMs: nowMs,
      deadlineMs,
      idleSinceMs: rec.lastActivityAtMs ?? nowMs,
      mode: policy.mode,
      reason: `idle for ${duration(idle)} (idle-timeout ${formatDuration(policy.idleTimeoutSeconds)}); last activity: ${lastSeen()}${blindNote()}`,
    };
    rec.notice = notice;
    transition("StoppingPending");
    pushNotice(notice, false);
    const what = policy.mode === "observe" ? "observe mode: would stop" : "stop";
    reason = `idle ${duration(idle)} ≥ idle-timeout ${formatDuration(policy.idleTimeoutSeconds)} and no veto: notice sent, ${what} in ${formatDuration(policy.gracePeriodSeconds)} unless there is activity or a lease`;
    event("Normal", "IdleStopPending", `${notice.reason}; ${what} in ${formatDuration(policy.gracePeriodSeconds)} unless there is activity or a lease`);
  };
  const pushNotice = (notice: PendingNotice, repeat: boolean) => {
    // The agent writes every notice to the terminals: remember when, so that output is not taken for activity.
    rec.lastNoticeSentAtMs = nowMs;
    actions.push({
      kind: "notice",
      id: notice.id,
      deadlineMs: notice.deadlineMs,
      stopInSeconds: Math.max(0, (notice.deadlineMs - nowMs) / 1000),
      idleSeconds: (idleMs() ?? 0) / 1000,
      reason: notice.reason,
      hint: `any activity cancels it; to keep the VM running without activity: ws-lease 2h (at most ${formatDuration(policy.maxKeepRunningSeconds)})`,
      mode: notice.mode,
      repeat,
    });
  };
  const blindNote = () => {
    const blind = evidence?.blind ?? [];
    return blind.length > 0 ? `; cannot read: ${blind.map((entry) => entry.source).join(", ")}` : "";
  };
  const requestStop = (trigger: StopTrigger, why: string) => {
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
    transition("Stopping");
    const idle = idleMs();
    actions.push({ kind: "stop", trigger, reason: why, idleSeconds: idle === undefined ? undefined : idle / 1000, attempt: 1 });
    event(trigger === "agent-lost" ? "Warning" : "Normal", "IdleStop", why);
  };
  const recordWouldStop = (trigger: StopTrigger, why: string) => {
    const idle = idleMs();
    actions.push({ kind: "would-stop", trigger, reason: why, idleSeconds: idle === undefined ? undefined : idle / 1000 });
    event("Normal", "IdleWouldStop", `observe mode, nothing stopped: ${why}`);
  };

  // --- the state machine
  switch (rec.state) {
    case "Active": {
      const idle = idleMs() ?? 0;
      if (!policy.autostopEnabled) {
        reason ||= `autostop is disabled: tracked, never stopped (idle ${duration(idle)})`;
      } else if (rec.awaitingFreshReport) {
        reason ||= "restored after a collector restart: waiting for a fresh report before deciding";
      } else if (idle < timeoutMs) {
        reason ||= `idle ${duration(idle)} of ${formatDuration(policy.idleTimeoutSeconds)}; last activity: ${lastSeen()}`;
      } else if (vetoes.length > 0) {
        reason ||= `idle ${duration(idle)} ≥ idle-timeout, but held: ${describeVetoes(vetoes)}`;
      } else {
        startNotice();
      }
      break;
    }
    case "StoppingPending": {
      const notice = rec.notice;
      const idle = idleMs() ?? 0;
      if (!notice) {
        // A record without its notice cannot be trusted to stop: start over.
        transition("Active");
        reason = "pending stop without a notice: back to Active";
        break;
      }
      if (!policy.autostopEnabled) {
        clearNotice("autostop was disabled");
        transition("Active");
        reason = "autostop was disabled: the pending stop is cancelled";
        event("Normal", "IdleStopCancelled", reason);
        break;
      }
      const activityAfterNotice = rec.lastActivityAtMs !== undefined && rec.lastActivityAtMs > notice.idleSinceMs;
      if (activityAfterNotice || idle < timeoutMs) {
        const why = activityAfterNotice ? `activity: ${rec.lastActivityDetail ?? "seen"}` : `idle ${duration(idle)} is below idle-timeout ${formatDuration(policy.idleTimeoutSeconds)} now`;
        clearNotice(why);
        transition("Active");
        reason = `pending stop cancelled: ${why}`;
        event("Normal", "IdleStopCancelled", reason);
        break;
      }
      if (vetoes.length > 0) {
        const why = describeVetoes(vetoes);
        clearNotice(why);
        transition("Active");
        reason = `pending stop cancelled, held: ${why}`;
        event("Normal", "IdleStopCancelled", reason);
        break;
      }
      if (notice.mode === "observe" && policy.mode === "enforce") {
        // A notice that promised nothing would happen cannot turn into a stop: warn again, for real.
        clearNotice("the policy changed from observe to enforce; a new notice follows");
        startNotice();
        break;
      }
      if (rec.awaitingFreshReport) {
        reason = "restored after a collector restart: waiting for a fresh report before the pending stop can go ahead";
        break;
      }
      if (nowMs >= notice.deadlineMs) {
        const why = `idle for ${duration(idle)} (idle-timeout ${formatDuration(policy.idleTimeoutSeconds)}) and the grace period of the notice ${notice.id} is over with no activity, lease or other veto; last activity: ${lastSeen()}${blindNote()}`;
        if (policy.mode === "enforce") {
          requestStop("idle", why);
          reason = `stop now: ${why}`;
        } else if (notice.wouldStopAtMs === undefined) {
          rec.notice = { ...notice, wouldStopAtMs: nowMs };
          recordWouldStop("idle", why);
          reason = `would stop now (observe mode): ${why}`;
        } else {
          reason = `observe mode: would have stopped ${duration(nowMs - notice.wouldStopAtMs)} ago; still idle`;
        }
        break;
      }
      const repeatDue = nowMs - notice.lastSentAtMs >= policy.noticeRepeatSeconds * 1000;
      const reconnected = observation.agentConnected && !prev.agentConnected;
      if (repeatDue || reconnected) {
        rec.notice = { ...notice, lastSentAtMs: nowMs };
        pushNotice(rec.notice, true);
      }
      reason = `${policy.mode === "observe" ? "would stop" : "stop"} in ${duration(notice.deadlineMs - nowMs)} unless there is activity or a lease (notice ${notice.id})`;
      break;
    }
    case "Stopping": {
      const stop = rec.stop;
      if (!stop) break;
      if (stop.trigger === "agent-lost" && isNewReport) {
        const why = "the agent reports again";
        actions.push({ kind: "cancel-stop", reason: why });
        rec.stop = undefined;
        enterActive(rec.lastReportAtMs ?? nowMs);
        reason = `stop cancelled: ${why}; the idle clock starts afresh`;
        event("Normal", "IdleStopCancelled", reason);
        break;
      }
      if (rec.lastActivityAtMs !== undefined && (stop.idleSinceMs === undefined || rec.lastActivityAtMs > stop.idleSinceMs)) {
        const why = `activity after the stop was decided: ${rec.lastActivityDetail ?? "seen"}`;
        actions.push({ kind: "cancel-stop", reason: why });
        transition("Active");
        rec.stop = undefined;
        reason = `stop cancelled: ${why}`;
        event("Normal", "IdleStopCancelled", reason);
        break;
      }
      if (stop.lastFailure && nowMs - stop.lastFailure.atMs >= stopRetryDelayMs(stop.attempts)) {
        rec.stop = { ...stop, attempts: stop.attempts + 1, lastAttemptAtMs: nowMs, lastFailure: undefined };
        const idle = idleMs();
        actions.push({ kind: "stop", trigger: stop.trigger, reason: stop.reason, idleSeconds: idle === undefined ? undefined : idle / 1000, attempt: rec.stop.attempts });
        reason = `asking again for the stop (attempt ${rec.stop.attempts}) after: ${stop.lastFailure.message}`;
      } else {
        reason ||= `waiting for the stop to be carried out (${stop.reason})`;
      }
      break;
    }
    case "AgentLost":
    case "Unknown": {
      const limit = policy.stopWhenAgentLostAfterSeconds;
      const silentSince = rec.state === "AgentLost" ? rec.lastReportAtMs : observation.vmRunning === true ? rec.sinceMs : undefined;
      if (silentSince === undefined) {
        reason ||= rec.state === "Unknown" ? "waiting for the first report" : "the agent is lost: never stopped";
        break;
      }
      const silentMs = nowMs - silentSince;
      if (limit === null || !policy.autostopEnabled || silentMs < limit * 1000) {
        reason ||= `no report for ${duration(silentMs)}: a VM the collector cannot see is ${limit === null ? "never stopped" : `stopped only after stop-when-agent-lost-after ${formatDuration(limit)}`}`;
        break;
      }
      const why = `no report for ${duration(silentMs)} ≥ stop-when-agent-lost-after ${formatDuration(limit)}`;
      if (policy.mode === "enforce") {
        requestStop("agent-lost", why);
        reason = `stop now: ${why}`;
      } else if (!rec.agentLostWouldStopRecorded) {
        rec.agentLostWouldStopRecorded = true;
        recordWouldStop("agent-lost", why);
        reason = `would stop now (observe mode): ${why}`;
      } else {
        reason = `observe mode: would have stopped (${why})`;
      }
      break;
    }
    case "Stopped":
      break;
  }

  return finish();

  function finish(): Decision {
    rec.activeSignals = rec.state === "Stopped" ? [] : activeSignalNames(evidence, nowMs, Math.max(30, 2 * policy.reportIntervalSeconds));
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
    const idle = rec.lastActivityAtMs === undefined || rec.state === "Stopped" || rec.state === "Unknown" ? undefined : Math.max(0, nowMs - rec.lastActivityAtMs);
    const activeVetoes = rec.state === "Stopped" ? [] : vetoesAt(evidence, nowMs);
    const stopAtMs = scheduledStopAt(rec, policy, activeVetoes, nowMs);
    const explanation: Explanation = {
      atMs: nowMs,
      from,
      to: rec.state,
      idleSeconds: idle === undefined ? undefined : idle / 1000,
      idleTimeoutSeconds: policy.idleTimeoutSeconds,
      lastActivityAtMs: rec.lastActivityAtMs,
      lastActivity: rec.lastActivityDetail,
      readings: counted,
      vetoes: activeVetoes,
      blind: evidence?.blind ?? [],
      stopAtMs,
      reason: reason || `${rec.state}`,
    };
    const summary = summarize(rec.state, explanation, policy);
    rec.summary = summary;
    rec.scheduledStopAtMs = stopAtMs;
    return { next: rec, actions, explanation, summary, wakeAtMs: wakeAt(rec, policy, activeVetoes, nowMs) };
  }
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
  if (rec.state === "Stopping" && rec.stop?.lastFailure) candidates.push(rec.stop.lastFailure.atMs + stopRetryDelayMs(rec.stop.attempts));
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
  if (explanation.idleSeconds !== undefined) parts.push(`idle ${formatDuration(explanation.idleSeconds)} of ${formatDuration(policy.idleTimeoutSeconds)}`);
  if (explanation.stopAtMs !== undefined && (state === "Active" || state === "AgentLost")) {
    parts.push(`stop in ${formatDuration(Math.max(0, explanation.stopAtMs - explanation.atMs) / 1000)} if nothing changes`);
  }
  if (explanation.vetoes.length > 0) parts.push(`held by ${explanation.vetoes.map((veto) => veto.kind).join(", ")}`);
  parts.push(explanation.reason);
  return parts.join(" · ");
}

/** The sources whose state the latest report lists as failed (for metrics). */
export function failedSources(observation: Observation): string[] {
  return (observation.latestReport?.report.sources ?? []).filter((status) => status.state === SourceState.FAILED).map((status) => status.source);
}
