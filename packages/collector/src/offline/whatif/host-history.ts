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
import { type MatrixSeries, type StepGrid, stepIndex, type VmHistory } from "./history.js";

export const HOST_QUERY_NAMES = Object.keys(hostQueries(60)) as HostQueryName[];

/** The range queries to run, by name. */
export function hostHistoryQueries(windowSeconds: number): Record<HostQueryName, string> {
  return hostQueries(windowSeconds);
}

/** Each step's host-side round, as the live source would have read it then: computed once for every batch of VMs. */
export type HostSteps = ReturnType<typeof readingsFromAnswers>[];

export function hostSteps(
  answers: Partial<Record<HostQueryName, MatrixSeries[]>>,
  grid: StepGrid,
  windowSeconds: number,
): HostSteps {
  // Each series' points by step index, so a step finds its point without scanning the series.
  const indexed = HOST_QUERY_NAMES.map((name) => ({
    name,
    series: (answers[name] ?? []).map((series) => {
      const byStep = new Map<number, string>();
      for (const [seconds, value] of series.values) {
        const index = stepIndex(grid, seconds);
        // Only a point on the step itself, as the live source reads at that instant.
        if (Math.abs(grid.startMs + index * grid.stepMs - seconds * 1000) < 1 && !byStep.has(index))
          byStep.set(index, value);
      }
      return { metric: series.metric, byStep };
    }),
  }));
  const at = (index: number): HostAnswers => {
    const out = {} as Record<HostQueryName, HostAnswers[HostQueryName]>;
    for (const { name, series } of indexed) {
      const samples: NonNullable<HostAnswers[HostQueryName]> = [];
      for (const { metric, byStep } of series) {
        const value = byStep.get(index);
        // No point at this step: no series (absent). A point that is NaN, ±Inf or below zero is
        // kept: readingsFromAnswers makes it a failed reading, as the live source does.
        if (value !== undefined) samples.push({ metric, value: promNumber(value) });
      }
      out[name] = samples;
    }
    return out as HostAnswers;
  };
  return Array.from({ length: grid.count }, (_, index) =>
    readingsFromAnswers(at(index), grid.startMs + index * grid.stepMs, windowSeconds),
  );
}

/** Attaches each step's host-side reading to the histories (VMs the collector does not track are left out). */
export function withHostSteps(histories: readonly VmHistory[], steps: HostSteps): VmHistory[] {
  return histories.map((history) => {
    const vm = `${history.namespace}/${history.name}`;
    const hostAt = (index: number): TraceHostReading => {
      const { atMs: _at, ...host } = readingFor(steps[index]!, vm);
      return host;
    };
    const { samples } = history;
    return {
      ...history,
      samples: Array.isArray(samples)
        ? samples.map((sample, index) => ({ connected: false, ...sample, host: hostAt(index) }))
        : { ...samples, host: steps.map((_, index) => hostAt(index)) },
    };
  });
}
