import { describe, expect, it } from "vitest";
import { DurationError, formatDuration, parseDuration } from "../src/duration.js";

describe("parseDuration", () => {
  it.each([
    ["8h", 28_800],
    ["90m", 5_400],
    ["1h30m", 5_400],
    ["2d", 172_800],
    ["1w", 604_800],
    ["45s", 45],
    ["1.5h", 5_400],
    [" 10M ", 600],
  ])("%s → %d s", (text, seconds) => {
    expect(parseDuration(text)).toBe(seconds);
  });

  it.each([
    ["", /empty/],
    ["8", /no unit/],
    ["8x", /not a duration/],
    ["30m1h", /largest to smallest/],
    ["1h1h", /largest to smallest/],
    ["1.5h30m", /single-unit/],
    ["0h", /zero/],
    ["-1h", /not a duration/],
    ["999999d", /longer than a year/],
    ["1e400s", /not a duration/],
    ["8 h", /not a duration/],
  ])("rejects %j", (text, message) => {
    expect(() => parseDuration(text)).toThrow(DurationError);
    expect(() => parseDuration(text)).toThrow(message);
  });

  it("accepts bare seconds only when asked", () => {
    expect(parseDuration("15", { allowBareSeconds: true })).toBe(15);
    expect(parseDuration("0s", { allowZero: true })).toBe(0);
  });
});

describe("formatDuration", () => {
  it.each([
    [0, "0s"],
    [45, "45s"],
    [5_400, "1h30m"],
    [86_400 + 61, "1d1m1s"],
    [-5, "0s"],
  ])("%d → %s", (seconds, text) => {
    expect(formatDuration(seconds)).toBe(text);
  });

  it("round-trips through parseDuration", () => {
    for (const seconds of [1, 59, 3_600, 5_401, 200_000]) {
      expect(parseDuration(formatDuration(seconds))).toBe(seconds);
    }
  });
});
