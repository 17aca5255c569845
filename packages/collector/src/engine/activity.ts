// The idle clock: which readings move it and where it stands.
//
// Strong evidence moves it to the time it happened. Weak evidence ("a browser
// is connected") moves it too, but never past the last strong evidence plus
// weak-activity-max. Terminal output (when it counts at all) never cancels a
// pending stop, and output right after a notice is the notice itself.
// Background work counts only up to unattended-max after the last human
// evidence (SIGNALS in signals.ts says which readings are which).

import { formatDuration } from "@ws/protocol";
import { isBackgroundSignal, isHumanSignal, isOutputSignal } from "./signals.js";
import type { EngineState, IdleClock, Policy, SignalReading, VmRecord } from "./types.js";

export type CountedReading = SignalReading & { counted: boolean; note?: string };

/**
 * A reading with its verdict, built as a literal: `{ ...reading, counted }` gave every such
 * object a hidden class of its own in V8 (Node 20: a spread plus a property on an object with
 * double fields), and each VM's last decision keeps a dozen of them (benchmark 2's heap snapshot).
 */
export function countedReading(reading: SignalReading, counted: boolean, note?: string): CountedReading {
  const out: CountedReading = {
    signal: reading.signal,
    strength: reading.strength,
    atMs: reading.atMs,
    detail: reading.detail,
    counted,
  };
  if (note !== undefined) out.note = note;
  return out;
}

/** A clock moved by one report's readings, and each reading's verdict. */
export interface ClockUpdate {
  clock: IdleClock;
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
  record: IdleClock,
  lastNoticeSentAtMs: number | undefined,
  readings: readonly SignalReading[],
  policy: Policy,
  state: EngineState,
  nowMs: number,
): ClockUpdate {
  const considered: Array<{ reading: SignalReading; creditedAtMs?: number; note?: string }> = [];
  let lastStrong = record.lastStrongAtMs;
  let strongDetail: { atMs: number; detail: string } | undefined;
  const echoUntil = lastNoticeSentAtMs === undefined ? undefined : lastNoticeSentAtMs + noticeEchoWindowMs(policy);

  for (const reading of readings) {
    if (reading.strength !== "strong") continue;
    const atMs = Math.min(reading.atMs, nowMs);
    if (isOutputSignal(reading.signal)) {
      if (state !== "Active") {
        considered.push({
          reading,
          note: "terminal output does not cancel a pending stop (the notice itself is output)",
        });
        continue;
      }
      if (
        echoUntil !== undefined &&
        lastNoticeSentAtMs !== undefined &&
        atMs >= lastNoticeSentAtMs &&
        atMs <= echoUntil
      ) {
        considered.push({ reading, note: "output right after a notice: the notice itself" });
        continue;
      }
    }
    considered.push({ reading, creditedAtMs: atMs });
    if (lastStrong === undefined || atMs > lastStrong) lastStrong = atMs;
    if (strongDetail === undefined || atMs > strongDetail.atMs) strongDetail = { atMs, detail: reading.detail };
  }

  lastStrong = advancedBeyondJitter(
    record.lastStrongAtMs,
    lastStrong === record.lastStrongAtMs ? undefined : lastStrong,
  );

  let lastWeak = record.lastWeakAtMs;
  let weakCredit: { atMs: number; detail: string } | undefined;
  const weakCap = lastStrong === undefined ? undefined : lastStrong + policy.weakActivityMaxSeconds * 1000;
  for (const reading of readings) {
    if (reading.strength !== "weak") continue;
    const atMs = Math.min(reading.atMs, nowMs);
    if (lastWeak === undefined || atMs > lastWeak) lastWeak = atMs;
    if (weakCap === undefined) {
      considered.push({ reading, note: "weak evidence counts only after some strong evidence" });
      continue;
    }
    const credited = Math.min(atMs, weakCap);
    considered.push(
      atMs > weakCap
        ? {
            reading,
            creditedAtMs: credited,
            note: `weak evidence is past weak-activity-max (${formatDuration(policy.weakActivityMaxSeconds)}) after the last strong evidence`,
          }
        : { reading, creditedAtMs: credited },
    );
    if (weakCredit === undefined || credited > weakCredit.atMs)
      weakCredit = { atMs: credited, detail: `${reading.detail} (weak)` };
  }

  const lastActivity = advancedBeyondJitter(record.lastActivityAtMs, maxDefined(lastStrong, weakCredit?.atMs));
  let detail = record.lastActivityDetail;
  let weak = record.lastActivityWeak ?? false;
  // A reading that reaches the clock names it, even when it only ties with a baseline ("started watching").
  if (lastActivity !== undefined) {
    if (strongDetail && strongDetail.atMs === lastActivity) {
      detail = strongDetail.detail;
      weak = false;
    } else if (weakCredit && weakCredit.atMs === lastActivity && lastActivity !== record.lastActivityAtMs) {
      detail = weakCredit.detail;
      weak = true;
    }
  }
  // "counted" means the reading moved the idle clock: it is later than where the clock stood
  // before this report (beyond the age jitter), and the clock moved.
  const moved = lastActivity !== record.lastActivityAtMs;
  const before = record.lastActivityAtMs ?? -Infinity;
  const counted: CountedReading[] = considered.map(({ reading, creditedAtMs, note }) => {
    if (creditedAtMs === undefined) return countedReading(reading, false, note || undefined);
    if (moved && creditedAtMs > before + AGE_JITTER_MS) return countedReading(reading, true, note || undefined);
    return countedReading(
      reading,
      false,
      note ?? "not newer than the idle clock: already counted, or older than what it holds",
    );
  });
  return {
    clock: {
      lastStrongAtMs: lastStrong,
      lastWeakAtMs: lastWeak,
      lastActivityAtMs: lastActivity,
      lastActivityDetail: detail,
      lastActivityWeak: weak,
    },
    readings: counted,
  };
}

/** What every clock of a record becomes with one report's readings. */
export interface ClocksUpdate {
  /** The idle clock the decision uses: with unattended-max over, the attended one. */
  clock: IdleClock;
  /** The idle clock without background work. */
  attended: IdleClock;
  /** Every reading of the report, with whether it moved the idle clock. */
  readings: CountedReading[];
  lastHumanAtMs: number | undefined;
}

/** Whether background work still holds a VM, and if not, since when and why. */
export type BackgroundHold =
  /** untilMs: when unattended-max ends; undefined: it never does (off, or no human evidence yet). */
  { holds: true; untilMs: number | undefined } | { holds: false; untilMs: number; why: string };

/** When unattended-max ends after the last human evidence (undefined: never: it is off, or no human evidence yet). */
export function unattendedEndsAtMs(lastHumanAtMs: number | undefined, policy: Policy): number | undefined {
  return policy.unattendedMaxSeconds === null || lastHumanAtMs === undefined
    ? undefined
    : lastHumanAtMs + policy.unattendedMaxSeconds * 1000;
}

/**
 * The one answer to "does background work (CPU, GPU, network, disk, a busy kernel) still hold
 * the VM, and why not": it does until unattended-max after the last human evidence.
 */
export function backgroundHold(lastHumanAtMs: number | undefined, policy: Policy, nowMs: number): BackgroundHold {
  const untilMs = unattendedEndsAtMs(lastHumanAtMs, policy);
  if (untilMs === undefined || lastHumanAtMs === undefined || policy.unattendedMaxSeconds === null)
    return { holds: true, untilMs: undefined };
  if (nowMs < untilMs) return { holds: true, untilMs };
  return {
    holds: false,
    untilMs,
    why: `no human evidence for ${formatDuration(Math.max(0, nowMs - lastHumanAtMs) / 1000)} (unattended-max ${formatDuration(policy.unattendedMaxSeconds)})`,
  };
}

/**
 * Advances the idle clock, the attended clock (the same without background work) and the
 * last human evidence. Once unattended-max has passed since the last human evidence, the
 * attended clock is the idle clock: background work no longer keeps the VM.
 */
export function advanceClocks(
  record: Pick<VmRecord, "clock" | "attended" | "lastNoticeSentAtMs" | "lastHumanAtMs">,
  readings: readonly SignalReading[],
  policy: Policy,
  state: EngineState,
  nowMs: number,
): ClocksUpdate {
  const foreground = readings.filter((reading) => !isBackgroundSignal(reading.signal));
  const attended = advanceIdleClock(
    record.attended ?? record.clock,
    record.lastNoticeSentAtMs,
    foreground,
    policy,
    state,
    nowMs,
  );
  let human: number | undefined;
  for (const reading of readings)
    if (isHumanSignal(reading.signal)) human = maxDefined(human, Math.min(reading.atMs, nowMs));
  const lastHumanAtMs = advancedBeyondJitter(record.lastHumanAtMs, human);
  const hold = backgroundHold(lastHumanAtMs, policy, nowMs);
  if (hold.holds) {
    const update = advanceIdleClock(record.clock, record.lastNoticeSentAtMs, readings, policy, state, nowMs);
    return { ...update, attended: attended.clock, lastHumanAtMs };
  }
  const note = `${hold.why}: background work no longer holds the VM`;
  const background = readings
    .filter((reading) => isBackgroundSignal(reading.signal))
    .map((reading) => countedReading(reading, false, note));
  return {
    clock: attended.clock,
    attended: attended.clock,
    readings: [...attended.readings, ...background],
    lastHumanAtMs,
  };
}

/** A clock started at `atMs` by strong evidence (or a baseline standing for it). */
export function clockStartedAt(atMs: number, detail: string): IdleClock {
  return { lastStrongAtMs: atMs, lastActivityAtMs: atMs, lastActivityDetail: detail, lastActivityWeak: false };
}

/** The clock, started no earlier than `baselineMs` (a VM that just became Active gets a full idle timeout). */
export function clockNoEarlierThan(clock: IdleClock, baselineMs: number, detail: string): IdleClock {
  return {
    ...clock,
    lastActivityAtMs: Math.max(clock.lastActivityAtMs ?? baselineMs, baselineMs),
    lastStrongAtMs: Math.max(clock.lastStrongAtMs ?? baselineMs, baselineMs),
    lastActivityDetail: clock.lastActivityDetail ?? detail,
  };
}

/** The clock moved later by `gapMs`: a span of missing data (a lost agent) never counts as idle. */
export function clockShiftedBy(clock: IdleClock, gapMs: number): IdleClock {
  const shift = (atMs: number | undefined) => (atMs === undefined ? undefined : atMs + gapMs);
  return { ...clock, lastActivityAtMs: shift(clock.lastActivityAtMs), lastStrongAtMs: shift(clock.lastStrongAtMs) };
}

/** How long a clock has run at `nowMs`, in ms (undefined: it has not started). */
export function idleMsOf(clock: IdleClock, nowMs: number): number | undefined {
  return clock.lastActivityAtMs === undefined ? undefined : Math.max(0, nowMs - clock.lastActivityAtMs);
}

/**
 * The one definition of idle seconds: how long the idle clock has run, as the status, the
 * explanation, the pages, the metrics and the outreach history show it. Undefined when the clock
 * does not run: a Stopped or Unknown VM, or no clock yet.
 */
export function idleSecondsAt(
  record: Pick<VmRecord, "state" | "clock"> | undefined,
  nowMs: number,
): number | undefined {
  if (!record || record.state === "Stopped" || record.state === "Unknown") return undefined;
  const ms = idleMsOf(record.clock, nowMs);
  return ms === undefined ? undefined : ms / 1000;
}

/** A record's three clocks: the idle clock, the attended one, and the last human evidence. */
export type RecordClocks = Pick<VmRecord, "clock" | "attended" | "lastHumanAtMs">;

/** Every clock starts no earlier than `baselineMs` (a VM that just became Active gets a full idle-timeout). */
export function clocksNoEarlierThan(rec: VmRecord, baselineMs: number): RecordClocks {
  const clock = clockNoEarlierThan(rec.clock, baselineMs, "the collector started watching");
  return {
    clock,
    lastHumanAtMs: Math.max(rec.lastHumanAtMs ?? baselineMs, baselineMs),
    attended: clockNoEarlierThan(rec.attended ?? rec.clock, baselineMs, clock.lastActivityDetail ?? ""),
  };
}

/** Every clock restarts at `nowMs` (a refused stop: the refusal repeats at most once per idle-timeout). */
export function clocksRestartedAt(
  rec: VmRecord,
  nowMs: number,
  detail: string,
): Pick<RecordClocks, "clock" | "attended"> {
  const clock = { ...rec.clock, ...clockStartedAt(nowMs, detail) };
  return { clock, attended: clock };
}

/** The VM runs again after a stop: nothing seen before counts, the clocks start afresh. */
export function clocksForgotten(rec: VmRecord, detail: string): RecordClocks {
  return {
    clock: {
      ...rec.clock,
      lastActivityAtMs: undefined,
      lastStrongAtMs: undefined,
      lastActivityWeak: false,
      lastActivityDetail: detail,
    },
    lastHumanAtMs: undefined,
    attended: undefined,
  };
}

/** Every clock moved later by `gapMs`: the span a lost agent was away is missing data, never idleness. */
export function clocksShiftedBy(rec: VmRecord, gapMs: number): RecordClocks {
  return {
    clock: clockShiftedBy(rec.clock, gapMs),
    lastHumanAtMs: rec.lastHumanAtMs === undefined ? undefined : rec.lastHumanAtMs + gapMs,
    attended: rec.attended ? clockShiftedBy(rec.attended, gapMs) : undefined,
  };
}
