// The minutes a Report was held back in (Reports on change: the agent's QuietMinute entries), as
// points on the collector's clock for the VM page's chart. Pure: the Report, its receive time and
// the previous Report's in, the points out. Like every age, a minute's time is counted back from
// the collector's receive time, never from the guest's clock; a minute outside the gap between
// the two Reports (a confused or hostile agent) is dropped, so the chart's points stay in order.
import type { Report } from "@ws/protocol";

export interface QuietMinutePoint {
  atMs: number;
  /** The idle clock at the minute's end as the agent saw it; NaN when it knew no activity. */
  idleSeconds: number;
  /** Whether any activity fell within the minute. */
  active: boolean;
}

export function quietMinutePoints(
  report: Report,
  receivedAtMs: number,
  previousReceivedAtMs: number | undefined,
): QuietMinutePoint[] {
  if (previousReceivedAtMs === undefined || report.quietMinutes.length === 0) return [];
  const sampleAtMs = receivedAtMs - report.sampleAgeSeconds * 1000;
  return report.quietMinutes
    .map((minute) => ({
      atMs: sampleAtMs - minute.endedSecondsBefore * 1000,
      idleSeconds: minute.idleSeconds ?? Number.NaN,
      active: minute.active,
    }))
    .filter((point) => point.atMs > previousReceivedAtMs && point.atMs < sampleAtMs)
    .sort((a, b) => a.atMs - b.atMs);
}
