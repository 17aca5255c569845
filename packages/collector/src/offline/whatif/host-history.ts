// Host-side history for whatif: the host-side source's own queries (loop/hostside/queries.ts) as range
// queries over the replayed range, folded into one reading per VM per step, exactly as a round
// of the live source would have read them at that instant. Pure.
import {
  type HostAnswers,
  type HostQueryName,
  hostQueries,
  readingFor,
  readingsFromAnswers,
} from "../../loop/hostside/queries.js";
import { promNumber } from "../../loop/hostside/prometheus.js";
import type { TraceHostReading } from "../../loop/trace.js";
import type { MatrixSeries, StepGrid, VmHistory } from "./history.js";

export const HOST_QUERY_NAMES = Object.keys(hostQueries(60)) as HostQueryName[];

/** The range queries to run, by name. */
export function hostHistoryQueries(windowSeconds: number): Record<HostQueryName, string> {
  return hostQueries(windowSeconds);
}

/** Attaches each step's host-side reading to the histories (VMs the collector does not track are left out). */
export function withHostHistory(
  histories: readonly VmHistory[],
  answers: Partial<Record<HostQueryName, MatrixSeries[]>>,
  grid: StepGrid,
  windowSeconds: number,
): VmHistory[] {
  const at = (index: number): HostAnswers => {
    const t = (grid.startMs + index * grid.stepMs) / 1000;
    const out = {} as Record<HostQueryName, HostAnswers[HostQueryName]>;
    for (const name of HOST_QUERY_NAMES) {
      const samples: NonNullable<HostAnswers[HostQueryName]> = [];
      for (const series of answers[name] ?? []) {
        const point = series.values.find(([seconds]) => Math.abs(seconds - t) < 0.001);
        // No point at this step: no series (absent). A point that is NaN, ±Inf or below zero is
        // kept: readingsFromAnswers makes it a failed reading, as the live source does.
        if (point) samples.push({ metric: series.metric, value: promNumber(point[1]) });
      }
      out[name] = samples;
    }
    return out as HostAnswers;
  };
  const steps = Array.from({ length: grid.count }, (_, index) =>
    readingsFromAnswers(at(index), grid.startMs + index * grid.stepMs, windowSeconds),
  );
  return histories.map((history) => ({
    ...history,
    samples: history.samples.map((sample, index) => {
      const { atMs: _at, ...host } = readingFor(steps[index]!, `${history.namespace}/${history.name}`);
      return { connected: false, ...sample, host: host satisfies TraceHostReading };
    }),
  }));
}
