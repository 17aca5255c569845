// The schedule's next start, for any zone, days, time and moment (issue 36): strictly later, on a
// scheduled weekday, never a skipped date, and at the wall-clock time asked for — except in the
// hour skipped when clocks go forward, where it is as far past the change as asked. And any text
// is parsed or refused, never a crash; what parses formats to a line that parses back the same.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { formatSchedule, localParts, nextStart, parseSchedule, type Schedule } from "../src/schedule.js";

const ZONES = [
  "UTC",
  "Europe/Berlin",
  "America/New_York",
  "Australia/Lord_Howe", // half-hour DST
  "Asia/Kathmandu", // +05:45
  "America/Santiago",
  "Pacific/Chatham",
  "Asia/Tokyo",
];

const schedule: fc.Arbitrary<Schedule> = fc.record({
  days: fc.uniqueArray(fc.integer({ min: 0, max: 6 }), { minLength: 1, maxLength: 7 }).map((d) => d.sort()),
  startMinute: fc.integer({ min: 0, max: 1439 }),
  timeZone: fc.constantFrom(...ZONES),
  skip: fc.constant([] as string[]),
});
// 2020 … 2035: every DST change of those years is in reach.
const moment = fc.integer({ min: Date.UTC(2020, 0, 1), max: Date.UTC(2035, 11, 31) });

describe("nextStart (property)", () => {
  it("is later, on a scheduled day, at the asked wall-clock time or just past a skipped hour", () => {
    fc.assert(
      fc.property(schedule, moment, (s, after) => {
        const next = nextStart(s, after);
        expect(next).toBeDefined();
        const at = next as number;
        expect(at).toBeGreaterThan(after);
        // Within a week and a day.
        expect(at - after).toBeLessThanOrEqual(8 * 86_400_000 + 3 * 3_600_000);
        const local = localParts(at, s.timeZone);
        const weekday = new Date(Date.UTC(local.year, local.month - 1, local.day)).getUTCDay();
        const minute = local.hour * 60 + local.minute;
        if (minute === s.startMinute) {
          expect(s.days).toContain(weekday);
        } else {
          // The asked time did not exist that day: it is later by at most the size of the gap (≤ 1h here).
          const shift = (minute - s.startMinute + 1440) % 1440;
          expect(shift).toBeGreaterThan(0);
          expect(shift).toBeLessThanOrEqual(60);
        }
      }),
      { numRuns: 500 },
    );
  });

  it("never lands on a skipped date", () => {
    fc.assert(
      fc.property(schedule, moment, fc.integer({ min: 1, max: 3 }), (s, after, count) => {
        const skip: string[] = [];
        let cursor = after;
        for (let i = 0; i < count; i++) {
          const next = nextStart({ ...s, skip }, cursor) as number;
          const p = localParts(next, s.timeZone);
          skip.push(`${p.year}-${String(p.month).padStart(2, "0")}-${String(p.day).padStart(2, "0")}`);
          cursor = after;
        }
        const next = nextStart({ ...s, skip }, after) as number;
        const p = localParts(next, s.timeZone);
        expect(skip).not.toContain(`${p.year}-${String(p.month).padStart(2, "0")}-${String(p.day).padStart(2, "0")}`);
      }),
      { numRuns: 200 },
    );
  });
});

describe("parseSchedule (property)", () => {
  const word = fc.oneof(
    fc.constantFrom("weekdays", "weekends", "daily", "mon-fri", "sat,sun", "fri-mon", "tue", "start", "stop", "by"),
    fc.constantFrom(
      "stop-by",
      "tz",
      "skip",
      "08:45",
      "23:59",
      "24:00",
      "7:5",
      "Europe/Berlin",
      "2026-02-29",
      "2028-02-29",
    ),
    fc.string({ maxLength: 12 }),
  );
  it("parses or refuses any text; what parses round-trips through its canonical line", () => {
    fc.assert(
      fc.property(fc.array(word, { maxLength: 8 }), (words) => {
        const result = parseSchedule(words.join(" "), "Europe/Berlin");
        if (!result.ok) {
          expect(result.error.length).toBeGreaterThan(0);
          return;
        }
        const again = parseSchedule(formatSchedule(result.schedule));
        expect(again).toEqual({ ok: true, schedule: result.schedule });
      }),
      { numRuns: 1000 },
    );
  });
});
