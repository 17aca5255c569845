// The learned warm start (issue 36 item 2; docs/policy.md "Warm starts learned from returns").
// From the last weeks of a VM's returns, per weekday in the owner's time zone: the usual first
// arrival of the day (the median of that weekday's first returns), and a start early enough for
// the VM to be ready then (its own measured boot-to-ready, p90). Pure: the records, the local time
// and the limits in, a decision with its reason out. The clock is the caller's.
import type { ReturnRecord } from "./returns.js";

export interface LocalTime {
  /** 0 = Sunday … 6 = Saturday, in the owner's time zone. */
  weekday: number;
  /** Minutes since the local midnight. */
  minute: number;
  /** The local date, YYYY-MM-DD: which day a return belongs to. */
  day: string;
}

/** The wall clock in `timeZone` at `ms` (Intl: daylight saving time is the zone's own). */
export function localTimeIn(timeZone: string): (ms: number) => LocalTime {
  const format = new Intl.DateTimeFormat("en-US", {
    timeZone,
    hourCycle: "h23",
    weekday: "short",
    year: "numeric",
    month: "2-digit",
    day: "2-digit",
    hour: "2-digit",
    minute: "2-digit",
  });
  const WEEKDAYS = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"];
  return (ms) => {
    const parts = Object.fromEntries(format.formatToParts(ms).map((p) => [p.type, p.value]));
    return {
      weekday: WEEKDAYS.indexOf(parts["weekday"] ?? ""),
      minute: Number(parts["hour"]) * 60 + Number(parts["minute"]),
      day: `${parts["year"]}-${parts["month"]}-${parts["day"]}`,
    };
  };
}

export interface WarmLimits {
  /** How many weeks back the rule looks. */
  weeks: number;
  /** Fewest days of this weekday with a return before the rule predicts anything. */
  minDays: number;
  /** At most this many warm starts per VM in 7 days. */
  maxPerWeek: number;
  /** Ready this long before the predicted arrival. */
  marginSeconds: number;
  /** The boot-to-ready assumed until the VM has MIN_BOOTS measured boots of its own. */
  defaultBootSeconds: number;
}

export const DEFAULT_WARM_LIMITS: WarmLimits = Object.freeze({
  weeks: 4,
  minDays: 3,
  maxPerWeek: 5,
  marginSeconds: 120,
  defaultBootSeconds: 180,
});
const MIN_BOOTS = 3;
const DAY_MS = 24 * 3600_000;

/** The p90 of the VM's own waits that booted (a return that found it up waited 0 and says nothing of its boot). */
export function bootP90Seconds(records: readonly ReturnRecord[], fallback: number): number {
  const boots = records
    .filter((r) => r.waitSeconds > 0)
    .map((r) => r.waitSeconds)
    .sort((a, b) => a - b);
  if (boots.length < MIN_BOOTS) return fallback;
  return boots[Math.min(boots.length - 1, Math.ceil(0.9 * boots.length) - 1)]!;
}

/** The usual first arrival (local minute) on `weekday`, from returns within `weeks` of `nowMs`; undefined: too few days. */
export function usualArrival(
  records: readonly ReturnRecord[],
  weekday: number,
  nowMs: number,
  local: (ms: number) => LocalTime,
  limits: Pick<WarmLimits, "weeks" | "minDays">,
): number | undefined {
  const firstByDay = new Map<string, number>();
  for (const r of records) {
    if (nowMs - r.atMs > limits.weeks * 7 * DAY_MS || r.atMs > nowMs) continue;
    const t = local(r.atMs);
    if (t.weekday !== weekday) continue;
    firstByDay.set(t.day, Math.min(firstByDay.get(t.day) ?? Number.POSITIVE_INFINITY, t.minute));
  }
  const minutes = [...firstByDay.values()].sort((a, b) => a - b);
  if (minutes.length < limits.minDays) return undefined;
  return minutes[Math.floor((minutes.length - 1) / 2)]!;
}

export interface WarmInput {
  nowMs: number;
  records: readonly ReturnRecord[];
  local: (ms: number) => LocalTime;
  /** The VM's profile opted in (warm starts are off unless it did). */
  optedIn: boolean;
  /** The owner turned warm starts off for this VM. */
  ownerOff: boolean;
  /** The VM runs or is starting: nothing to warm. */
  running: boolean;
  /** When the last warm starts of this VM were made (ms). */
  warmStartsMs: readonly number[];
  /** The fleet is short of what this VM needs (its GPUs): a warm start would take one from a person. */
  resourceShort: boolean;
  limits: WarmLimits;
}

export type WarmDecision =
  | { start: true; arrivalMinute: number; reason: string }
  | { start: false; reason: string; arrivalMinute?: number };

const hhmm = (minute: number) =>
  `${String(Math.floor(minute / 60)).padStart(2, "0")}:${String(minute % 60).padStart(2, "0")}`;

/** Whether to warm-start the VM now, and why (or why not). */
export function decideWarmStart(input: WarmInput): WarmDecision {
  const { nowMs, records, local, limits } = input;
  if (!input.optedIn) return { start: false, reason: "the profile has no warm starts" };
  if (input.ownerOff) return { start: false, reason: "the owner turned warm starts off" };
  if (input.running) return { start: false, reason: "the VM runs" };
  const now = local(nowMs);
  const arrival = usualArrival(records, now.weekday, nowMs, local, limits);
  if (arrival === undefined) return { start: false, reason: "too few returns on this weekday to learn from" };
  if (records.some((r) => local(r.atMs).day === now.day))
    return { start: false, reason: "the person already came back today", arrivalMinute: arrival };
  if (input.warmStartsMs.some((ms) => local(ms).day === now.day))
    return { start: false, reason: "already warm-started today", arrivalMinute: arrival };
  const lead = Math.ceil((bootP90Seconds(records, limits.defaultBootSeconds) + limits.marginSeconds) / 60);
  const from = arrival - lead;
  if (now.minute < from || now.minute >= arrival)
    return {
      start: false,
      reason: `not yet: usual arrival ${hhmm(arrival)}, start from ${hhmm(from)}`,
      arrivalMinute: arrival,
    };
  const thisWeek = input.warmStartsMs.filter((ms) => nowMs - ms < 7 * DAY_MS).length;
  if (thisWeek >= limits.maxPerWeek)
    return {
      start: false,
      reason: `${thisWeek} warm starts in 7 days (at most ${limits.maxPerWeek})`,
      arrivalMinute: arrival,
    };
  if (input.resourceShort)
    return { start: false, reason: "the fleet is short of the resources this VM needs", arrivalMinute: arrival };
  return { start: true, arrivalMinute: arrival, reason: `usual arrival ${hhmm(arrival)}, ready ${lead} min ahead` };
}

/** A warm start is used when a return comes within `windowMs` of it; past that with none, it is waste. */
export function warmStartOutcome(
  startedAtMs: number,
  firstReturnAtMs: number | undefined,
  nowMs: number,
  windowMs: number,
): "used" | "waiting" | "wasted" {
  if (firstReturnAtMs !== undefined && firstReturnAtMs >= startedAtMs && firstReturnAtMs - startedAtMs <= windowMs)
    return "used";
  return nowMs - startedAtMs > windowMs ? "wasted" : "waiting";
}
