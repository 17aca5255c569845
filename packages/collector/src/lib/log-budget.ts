// A log budget: at most so many info and warning lines per second; the rest are counted and
// summed up in one line when the budget allows again. A reconnect burst of 10k agents is 20k
// "agent connected" and transition lines within seconds; written to a pipe, which Node writes
// synchronously on Linux, they would hold the event loop whenever the reader (the container
// runtime, a test harness) falls behind — and the leader Lease's renewal waits behind it. Errors
// always pass.
import type { Logger } from "@ws/protocol";

export interface LogBudgetOptions {
  nowMs: () => number;
  infoPerSecond?: number;
  warnPerSecond?: number;
}

export function budgetedLogger(inner: Logger, options: LogBudgetOptions): Logger {
  const limits: Record<string, number> = { info: options.infoPerSecond ?? 50, warn: options.warnPerSecond ?? 100 };
  let windowStart = -Infinity;
  const used = new Map<string, number>();
  let suppressed = 0;
  return (level, message, fields) => {
    const now = options.nowMs();
    if (now - windowStart >= 1000) {
      windowStart = now;
      used.clear();
      if (suppressed > 0) {
        inner(
          "warn",
          `${suppressed} log lines left out over the last second(s): more than the log budget (${limits.info} info, ${limits.warn} warnings per second)`,
          { suppressed },
        );
        suppressed = 0;
      }
    }
    const limit = limits[level];
    if (limit !== undefined) {
      const count = (used.get(level) ?? 0) + 1;
      used.set(level, count);
      if (count > limit) {
        suppressed++;
        return;
      }
    }
    inner(level, message, fields);
  };
}
