import { backoffDelayMs } from "@ws/protocol";
import { describe, expect, it } from "vitest";
import { RECONNECT_BACKOFF } from "../src/agent/connection.js";

describe("the agent's reconnect backoff (the shared backoffDelayMs)", () => {
  const noJitter = { ...RECONNECT_BACKOFF, jitter: 0 };

  it("doubles from the initial delay up to the cap, retries counted from 1", () => {
    expect([1, 2, 3, 4, 5, 6, 7, 8].map((n) => backoffDelayMs(n, noJitter, () => 0.5))).toEqual([
      1_000, 2_000, 4_000, 8_000, 16_000, 32_000, 60_000, 60_000,
    ]);
  });

  it("draws the jitter share at random below the ceiling", () => {
    expect(backoffDelayMs(4, RECONNECT_BACKOFF, () => 1)).toBe(8_000);
    expect(backoffDelayMs(4, RECONNECT_BACKOFF, () => 0)).toBe(4_000);
    for (let i = 0; i < 100; i++) {
      const d = backoffDelayMs(11, RECONNECT_BACKOFF, Math.random);
      expect(d).toBeGreaterThanOrEqual(30_000);
      expect(d).toBeLessThanOrEqual(60_000);
    }
  });

  it("never overflows for huge retry counts", () => {
    expect(backoffDelayMs(10_000, noJitter, () => 0)).toBe(60_000);
  });
});
