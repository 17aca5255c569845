// The idle clock: which readings move it and where it stands.
//
// Strong evidence moves it to the time it happened. Weak evidence ("a browser
// is connected") moves it too, but never past the last strong evidence plus
// weak-activity-max. Terminal output (when it counts at all) never cancels a
// pending stop, and output right after a notice is the notice itself.

import type { EngineState, Policy, SignalReading, VmRecord } from "./types.js";

export type CountedReading = SignalReading & { counted: boolean; note?: string };

export interface ClockUpdate {
  lastStrongAtMs: number | undefined;
  lastWeakAtMs: number | undefined;
  lastActivityAtMs: number | undefined;
  lastActivityDetail: string | undefined;
  readings: CountedReading[];
}

/**
 * Ages are re-based on the collector's receive time, so one past event (a keystroke, a kernel's
 * last activity) reads a few milliseconds apart from report to report, and seconds on a loaded
 * machine (a stalled collector stamps receive times late). A reading must be this much newer than what the clock already holds to move
 * it; otherwise that noise would look like fresh activity and cancel every pending stop.
 */
export const AGE_JITTER_MS = 5_000;

/** The later of `candidate` and `held`, where `candidate` wins only by more than the age jitter. */
function advancedBeyondJitter(held: number | undefined, candidate: number | undefined): number | undefined {
  if (candidate === undefined) return held;
  if (held === undefined) return candidate;
  return candidate > held + AGE_JITTER_MS ? candidate : held;
}

/** How long after a notice terminal output is taken for the notice's own text on the terminals. */
export function noticeEchoWindowMs(policy: Policy): number {
  return Math.max(60, 4 * policy.reportIntervalSeconds) * 1000;
}

function maxDefined(...values: Array<number | undefined>): number | undefined {
  let best: number | undefined;
  for (const value of values) if (value !== undefined && (best === undefined || value > best)) best = value;
  return best;
}

export function advanceIdleClock(
  record: Pick<VmRecord, "lastStrongAtMs" | "lastWeakAtMs" | "lastActivityAtMs" | "lastActivityDetail" | "lastNoticeSentAtMs">,
  readings: readonly SignalReading[],
  policy: Policy,
  state: EngineState,
  nowMs: number,
): ClockUpdate {
  const counted: CountedReading[] = [];
  let lastStrong = record.lastStrongAtMs;
  let strongDetail: { atMs: number; detail: string } | undefined;
  const echoUntil = record.lastNoticeSentAtMs === undefined ? undefined : record.lastNoticeSentAtMs + noticeEchoWindowMs(policy);

  for (const reading of readings) {
    if (reading.strength !== "strong") continue;
    const atMs = Math.min(reading.atMs, nowMs);
    if (reading.signal === "tty-output") {
      if (state !== "Active") {
        counted.push({ ...reading, counted: false, note: "terminal output does not cancel a pending stop (the notice itself is output)" });
        continue;
      }
      if (echoUntil !== undefined && record.lastNoticeSentAtMs !== undefined && atMs >= record.lastNoticeSentAtMs && atMs <= echoUntil) {
        counted.push({ ...reading, counted: false, note: "output right after a notice: the notice itself" });
        continue;
      }
    }
    counted.push({ ...reading, counted: true });
    if (lastStrong === undefined || atMs > lastStrong) lastStrong = atMs;
    if (strongDetail === undefined || atMs > strongDetail.atMs) strongDetail = { atMs, detail: reading.detail };
  }

  lastStrong = advancedBeyondJitter(record.lastStrongAtMs, lastStrong === record.lastStrongAtMs ? undefined : lastStrong);

  let lastWeak = record.lastWeakAtMs;
  let weakCredit: { atMs: number; detail: string } | undefined;
  const weakCap = lastStrong === undefined ? undefined : lastStrong + policy.weakActivityMaxSeconds * 1000;
  for (const reading of readings) {
    if (reading.strength !== "weak") continue;
    const atMs = Math.min(reading.atMs, nowMs);
    if (lastWeak === undefined || atMs > lastWeak) lastWeak = atMs;
    if (weakCap === undefined) {
      counted.push({ ...reading, counted: false, note: "weak evidence counts only after some strong evidence" });
      continue;
    }
    const credited = Math.min(atMs, weakCap);
    const capped = atMs > weakCap;
    counted.push(
      capped
        ? { ...reading, counted: credited > (record.lastActivityAtMs ?? -Infinity), note: "weak evidence is past weak-activity-max after the last strong evidence" }
        : { ...reading, counted: true },
    );
    if (weakCredit === undefined || credited > weakCredit.atMs) weakCredit = { atMs: credited, detail: `${reading.detail} (weak)` };
  }

  const lastActivity = advancedBeyondJitter(record.lastActivityAtMs, maxDefined(lastStrong, weakCredit?.atMs));
  let detail = record.lastActivityDetail;
  // A reading that reaches the clock names it, even when it only ties with a baseline ("started watching").
  if (lastActivity !== undefined) {
    if (strongDetail && strongDetail.atMs === lastActivity) detail = strongDetail.detail;
    else if (weakCredit && weakCredit.atMs === lastActivity && lastActivity !== record.lastActivityAtMs) detail = weakCredit.detail;
  }
  return { lastStrongAtMs: lastStrong, lastWeakAtMs: lastWeak, lastActivityAtMs: lastActivity, lastActivityDetail: detail, readings: counted };
}
