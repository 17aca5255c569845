// A virtual clock with the timers the collector's deadline queue takes: time moves only when a
// test says so, and every timer due by then fires at its own time, in order.
import type { DeadlineTimers } from "../../src/loop/deadlines.js";

interface Timer {
  atMs: number;
  seq: number;
  callback: () => void;
}

export class VirtualClock implements DeadlineTimers {
  private timers: Timer[] = [];
  private seq = 0;
  /** setTimeout calls so far: a timer armed per VM, or a tick, would show here. */
  armed = 0;

  constructor(public nowMs: number) {}

  readonly now = (): number => this.nowMs;

  setTimeout(callback: () => void, ms: number): unknown {
    this.armed++;
    const timer = { atMs: this.nowMs + Math.max(0, ms), seq: ++this.seq, callback };
    this.timers.push(timer);
    return timer;
  }

  clearTimeout(handle: unknown): void {
    this.timers = this.timers.filter((timer) => timer !== handle);
  }

  yield(callback: () => void): void {
    this.setTimeout(callback, 0);
    this.armed--;
  }

  /** Timers pending now. */
  get pending(): number {
    return this.timers.length;
  }

  /** Moves to `targetMs`, firing every timer due on the way at its own time (promises settled after each). */
  async advanceTo(targetMs: number): Promise<void> {
    for (;;) {
      await settle();
      const next = this.timers
        .filter((timer) => timer.atMs <= targetMs)
        .sort((a, b) => a.atMs - b.atMs || a.seq - b.seq)[0];
      if (!next) break;
      this.timers = this.timers.filter((timer) => timer !== next);
      this.nowMs = Math.max(this.nowMs, next.atMs);
      next.callback();
    }
    this.nowMs = Math.max(this.nowMs, targetMs);
    await settle();
  }
}

async function settle(): Promise<void> {
  for (let i = 0; i < 5; i++) await Promise.resolve();
}
