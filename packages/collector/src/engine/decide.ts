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
import { clocksForgotten, clocksRestartedAt, clocksShiftedBy, idleSecondsAt } from "./activity.js";
import { activeSignalNames, EMPTY_MEMORY, extractEvidence } from "./evidence.js";
import { advanceHostClock, explainHost, hostActivityAfter, hostSchedule, judgeWithoutAgent } from "./host.js";
import type { Decision, EngineState, Evidence, Explanation, Observation, Policy, VmRecord } from "./types.js";
import {
  duration,
  stopRetryDelayMs,
  transition,
  event,
  clearNotice,
  idleMs,
  nextOf,
  lastSeen,
  blindNote,
  unattendedNote,
  enterActive,
  noteGoodbye,
  notePolicyErrors,
  observe,
  notRunning,
  agentLostFor,
  lostStopAtMs,
  idleTimeoutReached,
  heldBy,
  graceOver,
  activitySince,
  type Draft,
  type Outcome,
  vetoEnds,
  waiting,
} from "./draft.js";
import {
  stopWord,
  sendNotice,
  repeatNoticeWhenDue,
  withdrawObserveNotice,
  graceOverStop,
  startNotice,
  startStopByNotice,
  cancelPendingStop,
  requestStop,
  recordWouldStop,
  leaveForStopped,
  activeTiming,
  stoppingTiming,
  pendingTiming,
} from "./pending-stop.js";

export { noticeId } from "./draft.js";

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
  noteStopBy(draft);
  let arrivedBecause: string | undefined;
  let outcome = STATES[draft.rec.state](draft);
  while (outcome.handOver) {
    arrivedBecause = outcome.reason;
    outcome = STATES[draft.rec.state](draft);
  }
  const reason = outcome.waiting && arrivedBecause ? arrivedBecause : outcome.reason;
  return finish(draft, { ...outcome, reason });
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

/**
 * The schedule's stop-by (issue 36): the record keeps the instant the running VM waits for. A VM
 * without one keeps no such field (its decisions are as before). Only an Active VM acts on a due
 * stop-by; in any other state (already stopping, stopped, not seen) a passed one is spent.
 */
function noteStopBy(d: Draft): void {
  const { rec, nowMs, observation } = d;
  const next = observation.nextStopByMs;
  if (next === undefined) {
    if (rec.stopByAtMs !== undefined) delete rec.stopByAtMs;
    return;
  }
  const due = rec.stopByAtMs !== undefined && rec.stopByAtMs <= nowMs;
  if (!due || rec.state !== "Active") rec.stopByAtMs = next;
}

const stopByDue = (d: Draft): boolean => d.rec.stopByAtMs !== undefined && d.rec.stopByAtMs <= d.nowMs;

// --- one function per state -----------------------------------------------------------------

function decideActive(d: Draft): Outcome {
  if (notRunning(d)) return leaveForStopped(d, "the VM is not running (stopped outside ws)");
  observe(d);
  const lostFor = agentLostFor(d);
  if (lostFor !== undefined) return loseAgent(d, lostFor);
  const { rec, policy } = d;
  const idle = idleMs(d) ?? 0;
  const wait = (reason: string): Outcome => waiting(activeTiming(d, reason));
  if (!policy.autostopEnabled) return wait(`autostop is disabled: tracked, never stopped (idle ${duration(idle)})`);
  if (rec.awaitingFreshReport)
    return wait("restored after a collector restart: waiting for a fresh report before deciding");
  if (stopByDue(d)) {
    // A lease (or any veto) holds the stop-by as it holds any stop: it stays due until the veto ends.
    const held = heldBy(d);
    if (held !== undefined) return wait(`the schedule's stop-by time is reached, but held: ${held}`);
    return startStopByNotice(d, d.observation.nextStopByMs);
  }
  if (!idleTimeoutReached(d))
    return wait(
      `idle ${duration(idle)} of ${formatDuration(policy.idleTimeoutSeconds)}; last activity: ${lastSeen(d)}`,
    );
  const held = heldBy(d);
  if (held !== undefined) return wait(`idle ${duration(idle)} ≥ idle-timeout, but held: ${held}`);
  return startNotice(d);
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
  const byStopBy = notice.cause === "stop-by";
  if (!byStopBy && !idleTimeoutReached(d))
    return cancelPendingStop(
      d,
      `idle ${duration(idle)} is below idle-timeout ${formatDuration(policy.idleTimeoutSeconds)} now`,
    );
  const held = heldBy(d);
  if (held !== undefined) return cancelPendingStop(d, held, { reason: `pending stop cancelled, held: ${held}` });
  // A notice that promised nothing would happen cannot turn into a stop: warn again, for real.
  // A stop-by notice is sent again as what it was (its stop-by already spent: the record keeps the next).
  if (withdrawObserveNotice(d))
    return byStopBy ? startStopByNotice(d, rec.stopByAtMs, notice.sentAtMs) : startNotice(d);
  const wait = (reason: string): Outcome => waiting(pendingTiming(d, reason));
  if (rec.awaitingFreshReport)
    return wait("restored after a collector restart: waiting for a fresh report before the pending stop can go ahead");
  if (graceOver(notice, nowMs) && byStopBy) {
    const why = `the schedule's stop-by time was reached and the grace period of the notice ${notice.id} is over with no activity, lease or other veto; last activity: ${lastSeen(d)}${blindNote(d)}`;
    return graceOverStop(
      d,
      notice,
      "idle",
      why,
      (reason, waiting) => ({ ...pendingTiming(d, reason), waiting }),
      "no activity since the stop-by notice",
    );
  }
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
  // A Report from a boot that began after the stop was decided: someone (a schedule, a person)
  // started the VM again while the stop was still being asked for; stopping it now would stop them.
  if (isNewReport && d.received && bootedAfter(d.evidence, d.received.report.system?.uptimeSeconds, stop.decidedAtMs)) {
    const why = "the VM booted again after the stop was decided";
    return cancelPendingStop(d, why, {
      reason: `stop cancelled: ${why}; the idle clock starts afresh`,
      freshClockFromMs: d.received.receivedAtMs,
    });
  }
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
  const { rec, prev, received, isNewReport, evidence } = d;
  // Only a VM that was lost before this decision comes back: one just found lost goes on below.
  if (prev.state === "AgentLost" && isNewReport && received && prev.lastReportAtMs !== undefined) {
    // A guest that powered itself off (or rebooted) and was started again is a new boot, as after
    // ws's own stop: its idle clock starts afresh, not from where the old boot's left off.
    if (bootedAfter(evidence, received.report.system?.uptimeSeconds, prev.lastReportAtMs)) {
      Object.assign(rec, clocksForgotten(rec, "the VM booted again"));
      clearNotice(d, "the agent reports again");
      enterActive(d, received.receivedAtMs);
      const reason = "the agent reports from a new boot: the idle clock starts afresh";
      event(d, "Normal", "AgentBack", reason);
      return { reason, handOver: true };
    }
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
  const wait = (reason: string): Outcome => waiting(unseenTiming(d, reason));
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
