// The chart's quiet minutes: one per minute since the previous Report sent, from the samples held back.
import { describe, expect, it } from "vitest";
import { MAX_QUIET_MINUTES, quietMinutes } from "../src/agent/quiet-minutes.js";

const MIN = 60_000;
const plain = (minutes: ReturnType<typeof quietMinutes>) =>
  minutes.map((m) => ({ before: m.endedSecondsBefore, idle: m.idleSeconds, active: m.active }));

describe("quietMinutes", () => {
  it("one minute per minute since the Report sent, the last one the Report's own", () => {
    const since = { takenAtMs: 0, activityAtMs: -30_000 };
    const held = [15, 30, 45, 60, 75, 90, 105, 120, 135, 150, 165].map((s) => ({
      takenAtMs: s * 1000,
      // A keystroke at 70 s, seen from the sample at 75 s on.
      activityAtMs: s >= 75 ? 70_000 : -30_000,
    }));
    expect(plain(quietMinutes(since, held, 180_000))).toEqual([
      { before: 120, idle: 90, active: false },
      { before: 60, idle: 50, active: true },
    ]);
  });

  it("activity a later sample names counts in its minute; no activity known: no idle clock", () => {
    const since = { takenAtMs: 0, activityAtMs: undefined };
    const held = [{ takenAtMs: 90_000, activityAtMs: 50_000 }];
    expect(plain(quietMinutes(since, held, 150_000))).toEqual([
      { before: 90, idle: undefined, active: true },
      { before: 30, idle: 70, active: false },
    ]);
  });

  it("nothing within the minute of the Report sent; at most an hour, the newest", () => {
    expect(quietMinutes({ takenAtMs: 0, activityAtMs: 0 }, [], 60_000)).toEqual([]);
    const long = quietMinutes({ takenAtMs: 0, activityAtMs: 0 }, [], 3 * 60 * MIN);
    expect(long).toHaveLength(MAX_QUIET_MINUTES);
    expect(long.at(-1)?.endedSecondsBefore).toBe(60);
    expect(long.at(-1)?.idleSeconds).toBe(179 * 60);
  });
});
