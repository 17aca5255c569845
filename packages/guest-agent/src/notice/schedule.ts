// When to repeat a stop notice, and the timers that do it. The reminder plan
// is pure; the scheduler is injected so tests move time by hand.

/** Repeat the notice this many seconds before the stop. */
export const REMINDER_OFFSETS_SECONDS = [600, 300, 60];
/** A reminder this close to the first announcement would only repeat it. */
const MIN_GAP_AFTER_ANNOUNCEMENT_SECONDS = 30;

export interface Reminder {
  /** Seconds before the stop. */
  offsetSeconds: number;
  /** Milliseconds from the notice's arrival. */
  delayMs: number;
}

/** The reminders still ahead for a stop `stopInSeconds` after arrival, soonest first. */
export function planReminders(stopInSeconds: number, offsets: number[] = REMINDER_OFFSETS_SECONDS): Reminder[] {
  if (!Number.isFinite(stopInSeconds) || stopInSeconds <= 0) return [];
  return offsets
    .filter((offset) => offset > 0 && stopInSeconds - offset >= MIN_GAP_AFTER_ANNOUNCEMENT_SECONDS)
    .map((offset) => ({ offsetSeconds: offset, delayMs: (stopInSeconds - offset) * 1000 }))
    .sort((a, b) => a.delayMs - b.delayMs);
}

export interface TimerHandle {
  cancel(): void;
}

export interface Scheduler {
  after(delayMs: number, run: () => void): TimerHandle;
}

/** Real timers; they never keep the process alive on their own. */
export const systemScheduler: Scheduler = {
  after(delayMs, run) {
    const timer = setTimeout(run, Math.max(0, delayMs));
    timer.unref?.();
    return { cancel: () => clearTimeout(timer) };
  },
};
