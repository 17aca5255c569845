// A start schedule a person sets for their VM (docs/coming-back.md, "A schedule the user sets"):
// "start weekdays 08:45 [stop by 20:00]" in their own time zone, with dates they skip ("not
// tomorrow"). One line of text is the whole schedule (the VM's `schedule` annotation, what
// `ws-lease schedule` sends, the pages' form), so every writer and reader shares this parser and
// the collector, the CLI and the pages agree on what a line means. Pure: the clock is an argument;
// time zones come from Intl (no tz database of our own), so daylight saving time is whatever the
// runtime's ICU says it is.
import { closestName } from "./suggest.js";

export const WEEKDAY_NAMES = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"] as const;
const DAY_WORDS: Record<string, readonly number[]> = {
  weekdays: [1, 2, 3, 4, 5],
  weekends: [0, 6],
  daily: [0, 1, 2, 3, 4, 5, 6],
};
const KEYWORDS = ["start", "stop-by", "stop", "by", "tz", "skip"];

export interface Schedule {
  /** Weekdays the VM starts (0 = Sunday … 6 = Saturday), sorted, distinct. */
  days: number[];
  /** Minutes after local midnight of the start. */
  startMinute: number;
  /** Minutes after local midnight by which it stops (notice and grace as any stop; never over a lease). */
  stopByMinute?: number;
  /** IANA time zone the times are in. */
  timeZone: string;
  /** Local dates (YYYY-MM-DD) on which it does not start. */
  skip: string[];
}

export type ScheduleParse = { ok: true; schedule: Schedule } | { ok: false; error: string };

/** Whether Intl knows the zone (the runtime's ICU decides). */
export function validTimeZone(zone: string): boolean {
  try {
    new Intl.DateTimeFormat("en-US", { timeZone: zone });
    return true;
  } catch {
    return false;
  }
}

function zoneSuggestion(zone: string): string {
  const known = typeof Intl.supportedValuesOf === "function" ? Intl.supportedValuesOf("timeZone") : [];
  const match = closestName(zone, known);
  return match ? `; did you mean ${match}?` : "";
}

function parseClock(word: string): number | undefined {
  const match = /^(\d{1,2}):(\d{2})$/.exec(word);
  if (!match) return undefined;
  const hours = Number(match[1]);
  const minutes = Number(match[2]);
  if (hours > 23 || minutes > 59) return undefined;
  return hours * 60 + minutes;
}

function parseDate(word: string): string | undefined {
  const match = /^(\d{4})-(\d{2})-(\d{2})$/.exec(word);
  if (!match) return undefined;
  const [year, month, day] = [Number(match[1]), Number(match[2]), Number(match[3])];
  const probe = new Date(Date.UTC(year, month - 1, day));
  return probe.getUTCMonth() === month - 1 && probe.getUTCDate() === day ? word : undefined;
}

/** "weekdays", "mon,wed,fri", "mon-thu", "fri-mon" (wraps), "daily" → weekday numbers; or an error. */
export function parseDays(text: string): { days: number[] } | { error: string } {
  const days = new Set<number>();
  const dayNames = WEEKDAY_NAMES as readonly string[];
  const dayOf = (name: string): number | { error: string } => {
    const index = dayNames.indexOf(name.slice(0, 3));
    if (index >= 0 && (name.length === 3 || dayFull(index).startsWith(name))) return index;
    const hint = closestName(name, [...Object.keys(DAY_WORDS), ...dayNames]);
    return {
      error: `"${name}" is not a day${hint ? `; did you mean ${hint}?` : ""} (days: weekdays, weekends, daily, mon…sun, ranges like mon-thu)`,
    };
  };
  for (const part of text.toLowerCase().split(",")) {
    if (part === "") return { error: `"${text}": an empty day between commas` };
    // Own keys only: "__proto__" or "constructor" typed as a day is a typo, not Object's.
    const named = Object.hasOwn(DAY_WORDS, part) ? DAY_WORDS[part] : undefined;
    if (named) {
      for (const day of named) days.add(day);
      continue;
    }
    const range = part.split("-");
    if (range.length > 2) return { error: `"${part}" is not a day range (write mon-fri)` };
    const ends = range.map(dayOf);
    for (const end of ends) if (typeof end !== "number") return end;
    const [from, to] = ends as number[];
    if (to === undefined) days.add(from as number);
    else
      for (let day = from as number; ; day = (day + 1) % 7) {
        days.add(day);
        if (day === to) break;
      }
  }
  return { days: [...days].sort((a, b) => a - b) };
}

function dayFull(index: number): string {
  return ["sunday", "monday", "tuesday", "wednesday", "thursday", "friday", "saturday"][index] as string;
}

/**
 * Parses a schedule line: `[start] DAYS HH:MM [stop by HH:MM | stop-by HH:MM] [tz ZONE]
 * [skip YYYY-MM-DD[,YYYY-MM-DD…]]`. `defaultZone` is used without `tz` (the owner's or the site's).
 * Every mistake is an error that says what was expected; nothing is guessed.
 */
export function parseSchedule(text: string, defaultZone?: string): ScheduleParse {
  const words = text.trim().split(/\s+/).filter(Boolean);
  if (words[0]?.toLowerCase() === "start") words.shift();
  const fail = (error: string): ScheduleParse => ({ ok: false, error });
  const daysWord = words.shift();
  if (!daysWord) return fail('a schedule needs days and a time, e.g. "weekdays 08:45"');
  const days = parseDays(daysWord);
  if ("error" in days) return fail(days.error);
  const timeWord = words.shift();
  const startMinute = timeWord === undefined ? undefined : parseClock(timeWord);
  if (startMinute === undefined)
    return fail(
      `${timeWord === undefined ? "no start time" : `"${timeWord}" is not a time`}: write HH:MM, 24-hour, e.g. 08:45`,
    );
  let stopByMinute: number | undefined;
  let timeZone = defaultZone;
  const skip = new Set<string>();
  while (words.length > 0) {
    const keyword = (words.shift() as string).toLowerCase();
    if (keyword === "stop" || keyword === "stop-by") {
      if (keyword === "stop" && words[0]?.toLowerCase() === "by") words.shift();
      const word = words.shift();
      const minute = word === undefined ? undefined : parseClock(word);
      if (minute === undefined) return fail(`"stop by" needs a time HH:MM${word ? `, not "${word}"` : ""}`);
      stopByMinute = minute;
    } else if (keyword === "tz") {
      const zone = words.shift();
      if (!zone) return fail("tz needs an IANA time zone, e.g. Europe/Berlin");
      if (!validTimeZone(zone)) return fail(`"${zone}" is not a time zone${zoneSuggestion(zone)}`);
      timeZone = zone;
    } else if (keyword === "skip") {
      const list = words.shift();
      if (!list) return fail("skip needs dates YYYY-MM-DD");
      for (const date of list.split(",")) {
        if (!parseDate(date)) return fail(`"${date}" is not a date: write YYYY-MM-DD`);
        skip.add(date);
      }
    } else {
      const hint = closestName(keyword, KEYWORDS);
      return fail(
        `"${keyword}" is not understood${hint ? `; did you mean ${hint}?` : ""} (after the time: stop by HH:MM, tz ZONE, skip YYYY-MM-DD)`,
      );
    }
  }
  if (timeZone === undefined || timeZone === "") timeZone = "UTC";
  else if (!validTimeZone(timeZone))
    return fail(`the default time zone "${timeZone}" is not a time zone${zoneSuggestion(timeZone)}`);
  return {
    ok: true,
    schedule: {
      days: days.days,
      startMinute,
      ...(stopByMinute !== undefined ? { stopByMinute } : {}),
      timeZone,
      skip: [...skip].sort(),
    },
  };
}

/** The schedule as its canonical line (what is stored; parses back to the same schedule). */
export function formatSchedule(schedule: Schedule): string {
  const parts = [describeDays(schedule.days), clock(schedule.startMinute)];
  if (schedule.stopByMinute !== undefined) parts.push("stop-by", clock(schedule.stopByMinute));
  parts.push("tz", schedule.timeZone);
  if (schedule.skip.length > 0) parts.push("skip", schedule.skip.join(","));
  return parts.join(" ");
}

function describeDays(days: readonly number[]): string {
  const key = days.join(",");
  for (const [word, set] of Object.entries(DAY_WORDS)) if (set.join(",") === key) return word;
  return days.map((day) => WEEKDAY_NAMES[day]).join(",");
}

export function clock(minute: number): string {
  return `${String(Math.floor(minute / 60)).padStart(2, "0")}:${String(minute % 60).padStart(2, "0")}`;
}

interface LocalParts {
  year: number;
  month: number;
  day: number;
  hour: number;
  minute: number;
}

const formatters = new Map<string, Intl.DateTimeFormat>();
function formatterOf(zone: string): Intl.DateTimeFormat {
  let formatter = formatters.get(zone);
  if (!formatter) {
    formatter = new Intl.DateTimeFormat("en-US", {
      timeZone: zone,
      hourCycle: "h23",
      year: "numeric",
      month: "numeric",
      day: "numeric",
      hour: "numeric",
      minute: "numeric",
      second: "numeric",
    });
    formatters.set(zone, formatter);
  }
  return formatter;
}

/** The wall clock in `zone` at instant `ms`. */
export function localParts(ms: number, zone: string): LocalParts & { second: number } {
  const out: Record<string, number> = {};
  for (const part of formatterOf(zone).formatToParts(new Date(ms)))
    if (part.type !== "literal") out[part.type] = Number(part.value);
  return {
    year: out.year as number,
    month: out.month as number,
    day: out.day as number,
    hour: (out.hour as number) % 24,
    minute: out.minute as number,
    second: out.second as number,
  };
}

/** The zone's offset from UTC at instant `ms`, in ms (Berlin in winter: +3,600,000). */
function offsetAt(ms: number, zone: string): number {
  const p = localParts(ms, zone);
  const wall = Date.UTC(p.year, p.month - 1, p.day, p.hour, p.minute, p.second);
  return wall - Math.floor(ms / 1000) * 1000;
}

/**
 * The instant the wall clock in `zone` reads `minute` on the local date. A time that does not
 * exist (the hour skipped when clocks go forward) is read with the offset before the change, so
 * it lands as far after the change as it was meant to be after its start (02:30 → 03:30); a time
 * that happens twice (the hour repeated when clocks go back) is its first occurrence.
 */
export function instantOf(date: { year: number; month: number; day: number }, minute: number, zone: string): number {
  const wall = Date.UTC(date.year, date.month - 1, date.day, Math.floor(minute / 60), minute % 60);
  const before = offsetAt(wall - 36 * 3600_000, zone);
  const after = offsetAt(wall + 36 * 3600_000, zone);
  const reads = (candidate: number): boolean => {
    const p = localParts(candidate, zone);
    return p.year === date.year && p.month === date.month && p.day === date.day && p.hour * 60 + p.minute === minute;
  };
  const candidates = [wall - before, wall - after].filter(reads);
  return candidates.length > 0 ? Math.min(...candidates) : wall - before;
}

function dateKey(date: { year: number; month: number; day: number }): string {
  return `${date.year}-${String(date.month).padStart(2, "0")}-${String(date.day).padStart(2, "0")}`;
}

/** The local dates from the one `fromMs` falls on, day by day (calendar arithmetic in UTC: no DST). */
function* localDates(fromMs: number, zone: string, count: number) {
  const start = localParts(fromMs, zone);
  for (let i = 0; i < count; i++) {
    const probe = new Date(Date.UTC(start.year, start.month - 1, start.day + i));
    yield {
      year: probe.getUTCFullYear(),
      month: probe.getUTCMonth() + 1,
      day: probe.getUTCDate(),
      weekday: probe.getUTCDay(),
    };
  }
}

/** The next instant strictly after `afterMs` at which the schedule starts the VM (skipped dates skipped). */
export function nextStart(schedule: Schedule, afterMs: number): number | undefined {
  return nextAt(schedule, schedule.startMinute, afterMs, true);
}

/** The next instant strictly after `afterMs` by which the schedule stops the VM, if it has a stop time. */
export function nextStopBy(schedule: Schedule, afterMs: number): number | undefined {
  return schedule.stopByMinute === undefined ? undefined : nextAt(schedule, schedule.stopByMinute, afterMs, false);
}

function nextAt(schedule: Schedule, minute: number, afterMs: number, honourSkips: boolean): number | undefined {
  if (schedule.days.length === 0) return undefined;
  // A week and a day covers every weekday; each skipped date can push it a week further.
  for (const date of localDates(afterMs, schedule.timeZone, 8 + 7 * schedule.skip.length)) {
    if (!schedule.days.includes(date.weekday)) continue;
    if (honourSkips && schedule.skip.includes(dateKey(date))) continue;
    const instant = instantOf(date, minute, schedule.timeZone);
    if (instant > afterMs) return instant;
  }
  return undefined;
}

/**
 * The start due in (sinceMs, nowMs], if one is: what the collector's loop asks each pass. A start
 * more than `catchUpMs` late (the collector was down at the time) is not made up for: a person
 * who wanted the VM at 08:45 does not want it started at 17:00.
 */
export function dueStart(schedule: Schedule, sinceMs: number, nowMs: number, catchUpMs: number): number | undefined {
  const next = nextStart(schedule, Math.max(sinceMs, nowMs - catchUpMs));
  return next !== undefined && next <= nowMs ? next : undefined;
}

/** The local date of `ms` in the zone, plus `days` (the "skip tomorrow" of the CLI and pages). */
export function localDate(ms: number, zone: string, days = 0): string {
  const p = localParts(ms, zone);
  const probe = new Date(Date.UTC(p.year, p.month - 1, p.day + days));
  return dateKey({ year: probe.getUTCFullYear(), month: probe.getUTCMonth() + 1, day: probe.getUTCDate() });
}

/** The schedule with one more skipped date; past dates (before `todayLocal`) are dropped. */
export function withSkip(schedule: Schedule, date: string, todayLocal: string): Schedule {
  const skip = new Set(schedule.skip.filter((day) => day >= todayLocal));
  skip.add(date);
  return { ...schedule, skip: [...skip].sort() };
}

/** "tomorrow", "today" or YYYY-MM-DD → a local date; or an error. */
export function parseSkipDate(word: string, nowMs: number, zone: string): { date: string } | { error: string } {
  if (word === "today") return { date: localDate(nowMs, zone) };
  if (word === "tomorrow") return { date: localDate(nowMs, zone, 1) };
  const date = parseDate(word);
  if (date) return { date };
  const hint = closestName(word, ["today", "tomorrow"]);
  return { error: `"${word}" is not a date${hint ? `; did you mean ${hint}?` : ""} (write tomorrow or YYYY-MM-DD)` };
}

/** "Mon 08:45 CET": an instant as the owner reads it in the schedule's zone. */
export function describeInstant(ms: number, zone: string): string {
  // The zone's own abbreviation where one locale has it: en-GB knows CET, en-US knows EST.
  const gb = instantText(ms, zone, "en-GB");
  return /GMT[+-]/.test(gb) ? gb.replace(/\S+$/, instantText(ms, zone, "en-US").split(" ").pop() as string) : gb;
}

function instantText(ms: number, zone: string, locale: string): string {
  const text = new Intl.DateTimeFormat(locale, {
    timeZone: zone,
    weekday: "short",
    day: "numeric",
    month: "short",
    hour: "2-digit",
    minute: "2-digit",
    hourCycle: "h23",
    timeZoneName: "short",
  }).format(new Date(ms));
  return text.replace(",", "");
}

/** The schedule in words: "weekdays at 08:45, stop by 20:00 (Europe/Berlin); skipping 2026-12-24". */
export function describeSchedule(schedule: Schedule): string {
  const stop = schedule.stopByMinute !== undefined ? `, stop by ${clock(schedule.stopByMinute)}` : "";
  const skip = schedule.skip.length > 0 ? `; skipping ${schedule.skip.join(", ")}` : "";
  return `${describeDays(schedule.days)} at ${clock(schedule.startMinute)}${stop} (${schedule.timeZone})${skip}`;
}
