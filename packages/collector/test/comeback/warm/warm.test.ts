import { describe, expect, it } from "vitest";
import { replayWarmStarts } from "../../../src/comeback/warm/replay.js";
import {
  appendReturn,
  encodeReturns,
  MAX_RETURNS,
  parseReturns,
  type ReturnRecord,
} from "../../../src/comeback/warm/returns.js";
import {
  bootP90Seconds,
  DEFAULT_WARM_LIMITS,
  decideWarmStart,
  localTimeIn,
  usualArrival,
  type WarmInput,
  warmStartOutcome,
} from "../../../src/comeback/warm/rule.js";
import { berlinAt, weekdayPattern } from "../../fixtures/berlin-returns.js";

const berlin = localTimeIn("Europe/Berlin");
const DAY = 24 * 3600_000;

const base = (nowMs: number, records: ReturnRecord[]): WarmInput => ({
  nowMs,
  records,
  local: berlin,
  optedIn: true,
  ownerOff: false,
  running: false,
  warmStartsMs: [],
  resourceShort: false,
  limits: DEFAULT_WARM_LIMITS,
});

describe("returns, recorded compactly on the VM", () => {
  it("round-trips, skips what does not parse, and stays bounded", () => {
    const records = weekdayPattern();
    const text = encodeReturns(records);
    expect(parseReturns(text)).toEqual(records.map((r) => ({ ...r, atMs: Math.floor(r.atMs / 1000) * 1000 })));
    expect(parseReturns(`${encodeReturns(records.slice(0, 1))} bogus 12x4`)).toHaveLength(1);
    let kept: ReturnRecord[] = [];
    const t0 = berlinAt(2026, 3, 2, 9, 0);
    for (let i = 0; i < 200; i++)
      kept = appendReturn(kept, { atMs: t0 + i * 3600_000, trigger: "ssh", waitSeconds: 0 }, t0 + i * 3600_000);
    expect(kept).toHaveLength(MAX_RETURNS);
    expect(encodeReturns(kept).length).toBeLessThan(1024);
    // Older than the weeks kept: dropped.
    expect(appendReturn(kept, { atMs: t0 + 60 * DAY, trigger: "wake", waitSeconds: 1 }, t0 + 60 * DAY)).toHaveLength(1);
  });
});

describe("a warm start learned from the weekday pattern (fake clock, Europe/Berlin)", () => {
  const records = weekdayPattern();

  it("learns the usual arrival per weekday, across the daylight saving change", () => {
    // Mondays 9, 16, 23 March: 08:45 + (day % 3) * 4 → 08:45, 08:49, 08:53: median 08:49.
    const monday = berlinAt(2026, 3, 30, 6, 0);
    expect(usualArrival(records, 1, monday, berlin, DEFAULT_WARM_LIMITS)).toBe(8 * 60 + 49);
    // No Sunday returns: nothing learned.
    expect(usualArrival(records, 0, monday, berlin, DEFAULT_WARM_LIMITS)).toBeUndefined();
    expect(bootP90Seconds(records, 180)).toBe(126);
    expect(bootP90Seconds(records.slice(0, 2), 180)).toBe(180);
  });

  it("starts early enough to be ready by the usual arrival (boot p90 + margin), local time after DST", () => {
    // Lead: ceil((126 + 120) / 60) = 5 min → from 08:44 Berlin (CEST) on Monday 30 March.
    expect(decideWarmStart(base(berlinAt(2026, 3, 30, 8, 43), records))).toMatchObject({
      start: false,
      reason: "not yet: usual arrival 08:49, start from 08:44",
    });
    expect(decideWarmStart(base(berlinAt(2026, 3, 30, 8, 44), records))).toEqual({
      start: true,
      arrivalMinute: 8 * 60 + 49,
      reason: "usual arrival 08:49, ready 5 min ahead",
    });
  });

  it("never when off, running, already used today, over the weekly bound or short of GPUs", () => {
    const at = berlinAt(2026, 3, 30, 8, 45);
    const reasons = [
      { optedIn: false },
      { ownerOff: true },
      { running: true },
      { warmStartsMs: [berlinAt(2026, 3, 30, 7, 0)] },
      { warmStartsMs: [1, 2, 3, 4, 5].map((d) => berlinAt(2026, 3, 24 + d - 1, 8, 40)) },
      { resourceShort: true },
    ].map((change) => decideWarmStart({ ...base(at, records), ...change }));
    expect(reasons.map((d) => [d.start, d.reason])).toEqual([
      [false, "the profile has no warm starts"],
      [false, "the owner turned warm starts off"],
      [false, "the VM runs"],
      [false, "already warm-started today"],
      [false, "5 warm starts in 7 days (at most 5)"],
      [false, "the fleet is short of the resources this VM needs"],
    ]);
    const cameBack = [...records, { atMs: berlinAt(2026, 3, 30, 7, 30), trigger: "ssh" as const, waitSeconds: 90 }];
    expect(decideWarmStart(base(at, cameBack)).reason).toBe("the person already came back today");
  });

  it("a warm start nobody uses within the window is waste", () => {
    const t = berlinAt(2026, 3, 30, 8, 44);
    expect(warmStartOutcome(t, t + 5 * 60_000, t + 6 * 60_000, 30 * 60_000)).toBe("used");
    expect(warmStartOutcome(t, undefined, t + 10 * 60_000, 30 * 60_000)).toBe("waiting");
    expect(warmStartOutcome(t, t + 40 * 60_000, t + 41 * 60_000, 30 * 60_000)).toBe("wasted");
  });

  it("replays on recorded history: what warm starts would have saved and cost", () => {
    // Week 4 (30 March – 3 April) arrives as usual, except Wednesday: nobody came.
    const week4: ReturnRecord[] = [30, 31, 2, 3].map((day) => ({
      atMs: berlinAt(2026, day > 10 ? 3 : 4, day, 8, 50),
      trigger: "wake",
      waitSeconds: 120,
    }));
    const replay = replayWarmStarts([...records, ...week4], berlin, DEFAULT_WARM_LIMITS, 30 * 60_000);
    // Weeks 1–3 teach it (3 days per weekday needed), so only week 4 has warm starts: Mon, Tue, Wed, Thu, Fri.
    expect(replay).toEqual({
      warmStarts: 5,
      used: 4,
      wasted: 1,
      savedSeconds: expect.any(Number),
      costSeconds: expect.any(Number),
    });
    // Each used one spared its return the 120 s boot it recorded.
    expect(replay.savedSeconds).toBe(4 * 120);
    expect(replay.costSeconds).toBeGreaterThanOrEqual(30 * 60);
  });
});
