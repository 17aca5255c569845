import { describe, expect, it } from "vitest";
import { backoffDelayMs, defaultBackoff } from "../src/backoff.js";

describe("backoffDelayMs", () => {
  const noJitter = { ...defaultBackoff, jitter: 0 };

  it("doubles from the initial delay up to the cap", () => {
    expect([0, 1, 2, 3, 4, 5, 6, 7].map((n) => backoffDelayMs(n, noJitter, () => 0.5))).toEqual([
      1_000, 2_000, 4_000, 8_000, 16_000, 32_000, 60_000, 60_000,
    ]);
  });

  it("jitters downwards within the jitter share", () => {
    expect(backoffDelayMs(3, defaultBackoff, () => 0)).toBe(8_000);
    expect(backoffDelayMs(3, defaultBackoff, () => 1)).toBe(4_000);
    for (let i = 0; i < 100; i++) {
      const d = backoffDelayMs(10, defaultBackoff, Math.random);
      expect(d).toBeGreaterThanOrEqual(30_000);
      expect(d).toBeLessThanOrEqual(60_000);
    }
  });

  it("never overflows for huge attempt counts", () => {
    expect(backoffDelayMs(10_000, noJitter, () => 0)).toBe(60_000);
  });
});
