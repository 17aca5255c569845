/** Time as logic sees it: passed in, never read from the environment inside decisions. */
export interface Clock {
  /** Wall clock, milliseconds since the epoch (used only to turn file times into ages). */
  nowMs(): number;
  /** Monotonic milliseconds, for intervals and rates. */
  monotonicMs(): number;
}

export const systemClock: Clock = {
  nowMs: () => Date.now(),
  monotonicMs: () => performance.now(),
};

/** A clock tests move by hand. */
export function manualClock(startMs = 1_700_000_000_000): Clock & { advance(ms: number): void } {
  let wall = startMs;
  let mono = 0;
  return {
    nowMs: () => wall,
    monotonicMs: () => mono,
    advance(ms: number) {
      wall += ms;
      mono += ms;
    },
  };
}

/** Seconds between a past wall-clock time (ms) and now; never negative (clock skew, future mtimes). */
export function ageSeconds(clock: Clock, pastMs: number): number {
  return Math.max(0, (clock.nowMs() - pastMs) / 1000);
}
