// Timers a test fires by hand, in order, with the clock moved to their time.
import type { Clock } from "../../../src/clock.js";
import type { Scheduler, TimerHandle } from "../../../src/notice/schedule.js";

interface Entry {
  atMonoMs: number;
  run: () => void;
  cancelled: boolean;
}

export class ManualScheduler implements Scheduler {
  private entries: Entry[] = [];

  constructor(private readonly clock: Clock & { advance(ms: number): void }) {}

  after(delayMs: number, run: () => void): TimerHandle {
    const entry: Entry = { atMonoMs: this.clock.monotonicMs() + delayMs, run, cancelled: false };
    this.entries.push(entry);
    return { cancel: () => void (entry.cancelled = true) };
  }

  /** Delays (from now) of the timers still pending, soonest first. */
  pendingDelaysMs(): number[] {
    const now = this.clock.monotonicMs();
    return this.live().map((entry) => entry.atMonoMs - now);
  }

  /** Moves the clock to the next timer and runs it; false when none is left. */
  fireNext(): boolean {
    const next = this.live()[0];
    if (!next) return false;
    this.clock.advance(Math.max(0, next.atMonoMs - this.clock.monotonicMs()));
    next.cancelled = true;
    next.run();
    return true;
  }

  private live(): Entry[] {
    return this.entries.filter((entry) => !entry.cancelled).sort((a, b) => a.atMonoMs - b.atMonoMs);
  }
}
