import { describe, expect, it } from "vitest";
import { planReminders } from "../../src/notice/schedule.js";

describe("planReminders", () => {
  it("repeats at 10, 5 and 1 minutes before the stop", () => {
    expect(planReminders(1800)).toEqual([
      { offsetSeconds: 600, delayMs: 1_200_000 },
      { offsetSeconds: 300, delayMs: 1_500_000 },
      { offsetSeconds: 60, delayMs: 1_740_000 },
    ]);
  });

  it("skips a reminder that would only repeat the first announcement", () => {
    expect(planReminders(600).map((reminder) => reminder.offsetSeconds)).toEqual([300, 60]);
    expect(planReminders(620).map((reminder) => reminder.offsetSeconds)).toEqual([300, 60]);
    expect(planReminders(90).map((reminder) => reminder.offsetSeconds)).toEqual([60]);
    expect(planReminders(80)).toEqual([]);
  });

  it("plans nothing for a stop that is due or nonsense", () => {
    expect(planReminders(0)).toEqual([]);
    expect(planReminders(-5)).toEqual([]);
    expect(planReminders(Number.NaN)).toEqual([]);
  });
});
