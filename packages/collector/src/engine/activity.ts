// The idle clock: which readings move it and where it stands.
//
// Strong evidence moves it to the time it happened. Weak evidence ("a browser
// is connected") moves it too, but never past the last strong evidence plus
// weak-activity-max. Terminal output (when it counts at all) never cancels a
// pending stop, and output right after a notice is the notice itself.
// Background work counts only up to unattended-max after the last human
// evidence (strength.ts says which readings are which).

import { formatDuration } from "@ws/protocol";
import { isBackgroundSignal, isHumanSignal, isOutputSignal } from "./strength.js";
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

export interface ClockUpdate {
  lastStrongAtMs: number | undefined;
  lastWeakAtMs: number | undefined;
  lastActivityAtMs: number | undefined;
  lastActivityDetail: string | undefined;
  lastActivityWeak: boolean;
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
  record: IdleClock & Pick<VmRecord, "lastNoticeSentAtMs">,
  readings: readonly SignalReading[],
  policy: Policy,
  state: EngineState,
  nowMs: number,
): ClockUpdate {
  const considered: Array<{ reading: SignalReading; creditedAtMs?: number; note?: string }> = [];
  let lastStrong = record.lastStrongAtMs;
  let strongDetail: { atMs: number; detail: string } | undefined;
  const echoUntil =
    record.lastNoticeSentAtMs === undefined ? undefined : record.lastNoticeSentAtMs + noticeEchoWindowMs(policy);

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
        record.lastNoticeSentAtMs !== undefined &&
        atMs >= record.lastNoticeSentAtMs &&
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
    lastStrongAtMs: lastStrong,
    lastWeakAtMs: lastWeak,
    lastActivityAtMs: lastActivity,
    lastActivityDetail: detail,
    lastActivityWeak: weak,
    readings: counted,
  };
}

/** What every clock of a record becomes with one report's readings. */
export interface ClocksUpdate {
  /** The idle clock the decision uses: with unattended-max over, the attended one. */
  clock: ClockUpdate;
  /** The idle clock without background work. */
  attended: ClockUpdate;
  lastHumanAtMs: number | undefined;
  /** unattended-max is over: background work no longer holds the VM. */
  unattended: boolean;
}

/** When unattended-max ends for a record (undefined: it never does). */
export function unattendedUntilMs(lastHumanAtMs: number | undefined, policy: Policy): number | undefined {
  if (policy.unattendedMaxSeconds === null || lastHumanAtMs === undefined) return undefined;
  return lastHumanAtMs + policy.unattendedMaxSeconds * 1000;
}

/**
 * The one answer to "does background work still hold the VM, and why not": undefined while it
 * does (or unattended-max is off); once unattended-max is over since the last human evidence,
 * when it ended and the words that say so.
 */
export function unattendedOver(
  lastHumanAtMs: number | undefined,
  policy: Policy,
  nowMs: number,
): { untilMs: number; note: string } | undefined {
  const untilMs = unattendedUntilMs(lastHumanAtMs, policy);
  if (untilMs === undefined || lastHumanAtMs === undefined || nowMs < untilMs) return undefined;
  return {
    untilMs,
    note: `no human evidence for ${formatDuration(Math.max(0, nowMs - lastHumanAtMs) / 1000)} (unattended-max ${formatDuration(policy.unattendedMaxSeconds ?? 0)})`,
  };
}

/**
 * Advances the idle clock, the attended clock (the same without background work) and the
 * last human evidence. Once unattended-max has passed since the last human evidence, the
 * attended clock is the idle clock: background work no longer keeps the VM.
 */
export function advanceClocks(
  record: Pick<
    VmRecord,
    | "lastStrongAtMs"
    | "lastWeakAtMs"
    | "lastActivityAtMs"
    | "lastActivityDetail"
    | "lastActivityWeak"
    | "lastNoticeSentAtMs"
    | "lastHumanAtMs"
    | "attended"
  >,
  readings: readonly SignalReading[],
  policy: Policy,
  state: EngineState,
  nowMs: number,
): ClocksUpdate {
  const attendedBefore = record.attended ?? clockOf(record);
  const foreground = readings.filter((reading) => !isBackgroundSignal(reading.signal));
  const attended = advanceIdleClock(
    { ...attendedBefore, lastNoticeSentAtMs: record.lastNoticeSentAtMs },
    foreground,
    policy,
    state,
    nowMs,
  );
  let human: number | undefined;
  for (const reading of readings)
    if (isHumanSignal(reading.signal)) human = maxDefined(human, Math.min(reading.atMs, nowMs));
  const lastHumanAtMs = advancedBeyondJitter(record.lastHumanAtMs, human);
  const over = unattendedOver(lastHumanAtMs, policy, nowMs);
  if (!over)
    return {
      clock: advanceIdleClock(record, readings, policy, state, nowMs),
      attended,
      lastHumanAtMs,
      unattended: false,
    };
  const note = `${over.note}: background work no longer holds the VM`;
  const background = readings
    .filter((reading) => isBackgroundSignal(reading.signal))
    .map((reading) => countedReading(reading, false, note));
  return {
    clock: { ...attended, readings: [...attended.readings, ...background] },
    attended,
    lastHumanAtMs,
    unattended: true,
  };
}

/** The idle clock part of a record, as a value. */
export function clockOf(record: IdleClock): IdleClock {
  return {
    lastStrongAtMs: record.lastStrongAtMs,
    lastWeakAtMs: record.lastWeakAtMs,
    lastActivityAtMs: record.lastActivityAtMs,
    lastActivityDetail: record.lastActivityDetail,
    lastActivityWeak: record.lastActivityWeak,
  };
}

/** Sets a record's idle clock from a clock value (the record is an IdleClock: its persisted shape). */
export function setClock(record: IdleClock, clock: IdleClock): void {
  Object.assign(record, clockOf(clock));
}

/**
 * The one definition of idle seconds: how long the idle clock has run, as the status, the
 * explanation, the pages, the metrics and the outreach history show it. Undefined when the clock
 * does not run: a Stopped or Unknown VM, or no clock yet.
 */
export function idleSecondsAt(
  record: Pick<VmRecord, "state" | "lastActivityAtMs"> | undefined,
  nowMs: number,
): number | undefined {
  if (!record || record.lastActivityAtMs === undefined) return undefined;
  if (record.state === "Stopped" || record.state === "Unknown") return undefined;
  return Math.max(0, (nowMs - record.lastActivityAtMs) / 1000);
}
