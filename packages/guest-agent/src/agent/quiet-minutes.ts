// The VM page's chart keeps a point a minute while the agent holds its Reports back (Reports on
// change, report-gate.ts): the Report that ends the quiet carries one QuietMinute per minute
// since the previous Report sent, built from the samples taken in between. Pure: the samples'
// monotonic times in, the minutes out; nothing here reads a clock.
import { create } from "@bufbuild/protobuf";
import { type QuietMinute, QuietMinuteSchema } from "@ws/protocol";

/** What of a sample the chart needs: when it was taken and the newest activity it named (monotonic ms). */
export interface ChartSample {
  takenAtMs: number;
  activityAtMs: number | undefined;
}

/** The most minutes one Report carries (the agent's longest deadline is an hour: report-gate.ts). */
export const MAX_QUIET_MINUTES = 60;

/** Samples kept between Reports, at most: an hour at the shortest interval the collector may set. */
export const MAX_HELD_SAMPLES = 3_600;

const MINUTE_MS = 60_000;

/**
 * The minutes between the sample of the previous Report sent (`since`) and the one about to go
 * out (taken at `reportTakenAtMs`), oldest first, from the samples held back in between. A minute
 * ends every 60 s after `since`; the minute that would end with the Report itself is the Report's.
 */
export function quietMinutes(since: ChartSample, held: readonly ChartSample[], reportTakenAtMs: number): QuietMinute[] {
  const samples = [since, ...held].sort((a, b) => a.takenAtMs - b.takenAtMs);
  const minutes: QuietMinute[] = [];
  const count = Math.floor((reportTakenAtMs - since.takenAtMs - 1) / MINUTE_MS);
  for (let k = Math.max(1, count - MAX_QUIET_MINUTES + 1); k <= count; k++) {
    const endMs = since.takenAtMs + k * MINUTE_MS;
    let newest: number | undefined;
    let active = false;
    for (const sample of samples) {
      const at = sample.activityAtMs;
      if (at === undefined) continue;
      // What was known at the minute's end: the samples taken by then.
      if (sample.takenAtMs <= endMs && (newest === undefined || at > newest)) newest = at;
      // Activity within the minute, whichever sample saw it (a later one may name it as its newest).
      if (at > endMs - MINUTE_MS && at <= endMs) active = true;
    }
    minutes.push(
      create(QuietMinuteSchema, {
        endedSecondsBefore: Math.round((reportTakenAtMs - endMs) / 1000),
        ...(newest === undefined ? {} : { idleSeconds: Math.max(0, (endMs - newest) / 1000) }),
        active,
      }),
    );
  }
  return minutes;
}
