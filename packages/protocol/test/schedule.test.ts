import { describe, expect, it } from "vitest";
import {
  describeInstant,
  dueStart,
  formatSchedule,
  nextStart,
  nextStopBy,
  parseDays,
  parseSchedule,
  parseSkipDate,
  type Schedule,
  withSkip,
} from "../src/schedule.js";

function parsed(text: string, zone?: string): Schedule {
  const result = parseSchedule(text, zone);
  if (!result.ok) throw new Error(result.error);
  return result.schedule;
}

const iso = (ms: number | undefined): string | undefined => (ms === undefined ? undefined : new Date(ms).toISOString());

describe("parseSchedule", () => {
  it("reads the plain forms", () => {
    expect(parsed("weekdays 08:45", "Europe/Berlin")).toEqual({
      days: [1, 2, 3, 4, 5],
      startMinute: 525,
      timeZone: "Europe/Berlin",
      skip: [],
    });
    expect(parsed("start daily 7:05 stop by 20:00 tz America/New_York")).toMatchObject({
      days: [0, 1, 2, 3, 4, 5, 6],
      startMinute: 425,
      stopByMinute: 1200,
      timeZone: "America/New_York",
    });
    expect(parsed("mon,wed,fri 09:00 stop-by 18:30").days).toEqual([1, 3, 5]);
    expect(parsed("mon,wed,fri 09:00").timeZone).toBe("UTC");
    expect(parsed("weekends 10:00 skip 2026-12-26,2026-12-24").skip).toEqual(["2026-12-24", "2026-12-26"]);
  });

  it("reads day ranges, wrapping ones and full names", () => {
    expect(parseDays("mon-thu")).toEqual({ days: [1, 2, 3, 4] });
    expect(parseDays("fri-mon")).toEqual({ days: [0, 1, 5, 6] });
    expect(parseDays("Monday,tues")).toEqual({ days: [1, 2] });
  });

  it.each([
    ["weekdyas 08:45", /"weekdyas" is not a day; did you mean weekdays\?/],
    ["mon-fro 08:45", /"fro" is not a day; did you mean fri\?/],
    ["weekdays 8.45", /"8.45" is not a time: write HH:MM/],
    ["weekdays 24:00", /"24:00" is not a time/],
    ["weekdays", /no start time/],
    ["", /needs days and a time/],
    ["weekdays 08:45 stpo 20:00", /"stpo" is not understood; did you mean stop\?/],
    ["weekdays 08:45 stop by 8pm", /"stop by" needs a time HH:MM, not "8pm"/],
    ["weekdays 08:45 tz Europe/Berln", /"Europe\/Berln" is not a time zone; did you mean Europe\/Berlin\?/],
    ["weekdays 08:45 skip 2026-02-30", /"2026-02-30" is not a date/],
    // Found by the property test: a day named like an Object property is a typo, not a crash.
    ["__proto__ 08:45", /"__proto__" is not a day/],
    ["constructor 08:45", /"constructor" is not a day/],
  ])("%j is refused: %s", (text, error) => {
    const result = parseSchedule(text, "Europe/Berlin");
    expect(result.ok).toBe(false);
    if (!result.ok) expect(result.error).toMatch(error);
  });

  it("refuses a default zone that is not one rather than guessing", () => {
    const result = parseSchedule("weekdays 08:45", "Europe/Berln");
    expect(result).toEqual({
      ok: false,
      error: expect.stringMatching(/default time zone.*did you mean Europe\/Berlin/),
    });
  });

  it("formats to a line that parses back to the same schedule", () => {
    for (const text of [
      "weekdays 08:45",
      "mon,thu 07:00 stop by 19:15 tz Asia/Tokyo skip 2027-01-01",
      "fri-sun 23:59",
    ]) {
      const schedule = parsed(text, "Europe/Berlin");
      expect(parsed(formatSchedule(schedule))).toEqual(schedule);
    }
    expect(formatSchedule(parsed("mon-fri 08:45 stop by 20:00", "Europe/Berlin"))).toBe(
      "weekdays 08:45 stop-by 20:00 tz Europe/Berlin",
    );
  });
});

describe("nextStart", () => {
  const berlin = parsed("weekdays 08:45", "Europe/Berlin");

  it("is the next weekday at the local time, in winter and in summer", () => {
    // Friday 2026-12-04 10:00 UTC (11:00 CET): next is Monday 08:45 CET = 07:45 UTC.
    expect(iso(nextStart(berlin, Date.parse("2026-12-04T10:00:00Z")))).toBe("2026-12-07T07:45:00.000Z");
    // Before the time on a weekday: the same day. In summer CEST is UTC+2.
    expect(iso(nextStart(berlin, Date.parse("2026-07-01T05:00:00Z")))).toBe("2026-07-01T06:45:00.000Z");
    // Exactly at the time: the next one (strictly after).
    expect(iso(nextStart(berlin, Date.parse("2026-07-01T06:45:00Z")))).toBe("2026-07-02T06:45:00.000Z");
    expect(describeInstant(Date.parse("2026-12-07T07:45:00Z"), "Europe/Berlin")).toBe("Mon 7 Dec 08:45 CET");
  });

  it("keeps the local time across both DST changes (Europe/Berlin)", () => {
    const daily = parsed("daily 08:45", "Europe/Berlin");
    // Clocks go forward Sunday 2026-03-29: Saturday is UTC+1, Sunday UTC+2.
    expect(iso(nextStart(daily, Date.parse("2026-03-28T06:00:00Z")))).toBe("2026-03-28T07:45:00.000Z");
    expect(iso(nextStart(daily, Date.parse("2026-03-28T08:00:00Z")))).toBe("2026-03-29T06:45:00.000Z");
    // Clocks go back Sunday 2026-10-25: Saturday UTC+2, Sunday UTC+1.
    expect(iso(nextStart(daily, Date.parse("2026-10-24T05:00:00Z")))).toBe("2026-10-24T06:45:00.000Z");
    expect(iso(nextStart(daily, Date.parse("2026-10-24T07:00:00Z")))).toBe("2026-10-25T07:45:00.000Z");
  });

  it("keeps the local time across both DST changes (America/New_York)", () => {
    const daily = parsed("daily 08:45 tz America/New_York");
    // Forward Sunday 2026-03-08 (EST UTC-5 → EDT UTC-4), back Sunday 2026-11-01.
    expect(iso(nextStart(daily, Date.parse("2026-03-07T14:00:00Z")))).toBe("2026-03-08T12:45:00.000Z");
    expect(iso(nextStart(daily, Date.parse("2026-10-31T13:00:00Z")))).toBe("2026-11-01T13:45:00.000Z");
    expect(describeInstant(Date.parse("2026-11-01T13:45:00Z"), "America/New_York")).toBe("Sun 1 Nov 08:45 EST");
  });

  it("a time in the skipped hour starts as long after the change as it was meant to (02:30 → 03:30)", () => {
    const early = parsed("daily 02:30", "Europe/Berlin");
    // 2026-03-29 02:30 does not exist in Berlin; 03:30 CEST is 01:30 UTC.
    expect(iso(nextStart(early, Date.parse("2026-03-28T12:00:00Z")))).toBe("2026-03-29T01:30:00.000Z");
    const ny = parsed("daily 02:30 tz America/New_York");
    expect(iso(nextStart(ny, Date.parse("2026-03-07T12:00:00Z")))).toBe("2026-03-08T07:30:00.000Z");
  });

  it("a time in the repeated hour starts once, at its first occurrence", () => {
    const early = parsed("daily 02:30", "Europe/Berlin");
    // 2026-10-25 02:30 happens at 00:30 UTC (CEST) and again at 01:30 UTC (CET).
    const first = nextStart(early, Date.parse("2026-10-24T12:00:00Z"));
    expect(iso(first)).toBe("2026-10-25T00:30:00.000Z");
    // After the first, the next is Monday's, not the repeat.
    expect(iso(nextStart(early, first as number))).toBe("2026-10-26T01:30:00.000Z");
    const ny = parsed("daily 01:30 tz America/New_York");
    const nyFirst = nextStart(ny, Date.parse("2026-10-31T12:00:00Z"));
    expect(iso(nyFirst)).toBe("2026-11-01T05:30:00.000Z");
    expect(iso(nextStart(ny, nyFirst as number))).toBe("2026-11-02T06:30:00.000Z");
  });

  it("skips the dates the person skipped, but not the stop time", () => {
    const now = Date.parse("2026-12-07T10:00:00Z"); // Monday 11:00 CET
    const tomorrow = parseSkipDate("tomorrow", now, "Europe/Berlin");
    expect(tomorrow).toEqual({ date: "2026-12-08" });
    const skipped = withSkip(parsed("weekdays 08:45 stop by 20:00", "Europe/Berlin"), "2026-12-08", "2026-12-07");
    expect(iso(nextStart(skipped, now))).toBe("2026-12-09T07:45:00.000Z");
    expect(iso(nextStopBy(skipped, now))).toBe("2026-12-07T19:00:00.000Z");
    // Past skips are dropped when a new one is added.
    expect(withSkip({ ...skipped, skip: ["2026-01-01"] }, "2026-12-08", "2026-12-07").skip).toEqual(["2026-12-08"]);
    expect(parseSkipDate("tomorow", now, "Europe/Berlin")).toEqual({
      error: expect.stringMatching(/did you mean tomorrow/),
    });
  });

  it("skips far enough even when every next weekday is skipped", () => {
    const schedule = { ...parsed("mon 08:00 tz UTC"), skip: ["2026-12-07", "2026-12-14", "2026-12-21"] };
    expect(iso(nextStart(schedule, Date.parse("2026-12-05T00:00:00Z")))).toBe("2026-12-28T08:00:00.000Z");
  });
});

describe("dueStart", () => {
  const schedule = parsed("weekdays 08:45", "Europe/Berlin");
  const at = Date.parse("2026-12-07T07:45:00Z");

  it("fires once for the pass that crosses the time", () => {
    expect(dueStart(schedule, at - 10_000, at + 1_000, 15 * 60_000)).toBe(at);
    expect(dueStart(schedule, at + 1_000, at + 11_000, 15 * 60_000)).toBeUndefined();
    expect(dueStart(schedule, at - 20_000, at - 10_000, 15 * 60_000)).toBeUndefined();
  });

  it("makes up a missed start only within the catch-up window", () => {
    expect(dueStart(schedule, at - 3600_000, at + 10 * 60_000, 15 * 60_000)).toBe(at);
    expect(dueStart(schedule, at - 3600_000, at + 20 * 60_000, 15 * 60_000)).toBeUndefined();
  });
});
