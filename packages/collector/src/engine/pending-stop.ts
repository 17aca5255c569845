// The one pending-stop lifecycle, whoever judged the VM idle (the agent's idle clock in Active
// and StoppingPending, or the host's readings for a VM with no agent, engine/host.ts): the
// notice is sent, repeated, withdrawn when observe turns to enforce, ends at its grace in the
// stop (or observe mode's would-stop), and is called off one way only (cancelPendingStop); and
// when each state would stop if nothing changes (its timing). Pure, as decide() is.
import { formatDuration } from "@ws/protocol";
import type { PendingNotice, Policy, StopTrigger } from "./types.js";
import {
  duration,
  noticeId,
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
  observe,
  agentLostAtMs,
  type Draft,
  type Outcome,
  vetoEnds,
  vetoesInForce,
} from "./draft.js";

// --- notices and stops ----------------------------------------------------------------------

/** "stop", or in observe mode what a notice promises instead. */
export const stopWord = (policy: Policy): string => (policy.mode === "observe" ? "observe mode: would stop" : "stop");

/**
 * The one way a pending stop starts, for the agent's idle clock and the host's alike: the notice
 * (its grace from now) is recorded and sent. `idleSinceMs`: what the idle time counted from.
 */
export function sendNotice(d: Draft, idleSinceMs: number, idle: number, reason: string): PendingNotice {
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
export function repeatNoticeWhenDue(d: Draft, notice: PendingNotice, also: boolean, idle?: number): void {
  const { rec, policy, nowMs } = d;
  if (!also && nowMs - notice.lastSentAtMs < policy.noticeRepeatSeconds * 1000) return;
  rec.notice = { ...notice, lastSentAtMs: nowMs };
  pushNotice(d, rec.notice, true, idle);
}

/** A notice sent in observe mode promised nothing would happen: under enforce it is withdrawn, a new one follows. */
export function withdrawObserveNotice(d: Draft): boolean {
  if (d.rec.notice?.mode !== "observe" || d.policy.mode !== "enforce") return false;
  clearNotice(d, "the policy changed from observe to enforce; a new notice follows");
  return true;
}

/**
 * The grace of `notice` is over: the stop (enforce), or the observe mode's would-stop once.
 * `timing` is the state's own timing; `still` says what is still true while observe mode waits.
 */
export function graceOverStop(
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

export function startNotice(d: Draft): Outcome {
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

/**
 * The schedule's stop-by time is reached (stopByDue): the same notice and grace as an idle stop,
 * counted from now, so any activity during the grace cancels it and a VM in use is never stopped.
 * The stop-by is then spent: the next one is the schedule's next.
 */
export function startStopByNotice(d: Draft, nextStopByMs: number | undefined, reachedAtMs?: number): Outcome {
  const { rec, policy, nowMs } = d;
  const idle = idleMs(d) ?? 0;
  const at = reachedAtMs ?? rec.stopByAtMs ?? nowMs;
  rec.stopByAtMs = nextStopByMs;
  transition(d, "StoppingPending");
  const notice = sendNotice(
    d,
    nowMs,
    idle,
    `the schedule's stop-by time was reached ${duration(nowMs - at)} ago; last activity: ${lastSeen(d)}`,
  );
  rec.notice = { ...notice, cause: "stop-by" };
  const what = stopWord(policy);
  const reason = `${notice.reason}; ${what} in ${formatDuration(policy.gracePeriodSeconds)} unless there is activity or a lease`;
  event(d, "Normal", "IdleStopPending", reason);
  return pendingTiming(
    d,
    `stop-by reached and no veto: notice sent, ${what} in ${formatDuration(policy.gracePeriodSeconds)} unless there is activity or a lease`,
  );
}

export function pushNotice(d: Draft, notice: PendingNotice, repeat: boolean, idle = idleMs(d) ?? 0): void {
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
export function cancelPendingStop(
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

export function requestStop(d: Draft, trigger: StopTrigger, why: string): Outcome {
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

export function recordWouldStop(d: Draft, trigger: StopTrigger, why: string): void {
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
export function leaveForStopped(d: Draft, reason: string): Outcome {
  d.rec.notice = undefined;
  d.rec.stop = undefined;
  transition(d, "Stopped");
  return { reason };
}

export function activeTiming(d: Draft, reason: string): Outcome {
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
    policy.autostopEnabled ? rec.stopByAtMs : undefined,
  ]);
  return { reason, wakeAtMs, stopAtMs };
}

export function pendingTiming(d: Draft, reason: string): Outcome {
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

export function stoppingTiming(d: Draft, reason: string): Outcome {
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
