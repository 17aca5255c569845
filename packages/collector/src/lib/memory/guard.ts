// The memory guard: the collector watches its memory against the limit it would be killed at
// (the cgroup's memory.max, or V8's heap limit, whichever is nearer) and, near it, sheds what it
// can rebuild or do without — the detail series of /metrics and the VM pages' chart points —
// rather than be OOM-killed into a reconnect burst that repeats the failure. It says so: a log
// line on each change and workstation_collector_shedding. The decision is pure (memoryPressure);
// MemoryGuard is the thin edge that samples and acts.
import type { CgroupMemory } from "./cgroup.js";

export interface MemorySample {
  cgroup: CgroupMemory | undefined;
  heapUsedBytes: number;
  heapLimitBytes: number;
}

export interface MemoryPressure {
  /** The larger of working set / memory.max and heap used / heap limit (0..1+). */
  ratio: number;
  /** What the ratio is of: "cgroup" or "heap". */
  bound: "cgroup" | "heap";
  shedding: boolean;
}

/** Shedding stops only this far below the threshold, so that it does not flap at the line. */
export const SHED_HYSTERESIS = 0.1;

export function memoryPressure(sample: MemorySample, shedRatio: number, wasShedding: boolean): MemoryPressure {
  const cgroupRatio =
    sample.cgroup?.limitBytes !== undefined && sample.cgroup.limitBytes > 0
      ? sample.cgroup.workingSetBytes / sample.cgroup.limitBytes
      : 0;
  const heapRatio = sample.heapLimitBytes > 0 ? sample.heapUsedBytes / sample.heapLimitBytes : 0;
  const bound = cgroupRatio >= heapRatio ? "cgroup" : "heap";
  const ratio = Math.max(cgroupRatio, heapRatio);
  const shedding = wasShedding ? ratio >= shedRatio - SHED_HYSTERESIS : ratio >= shedRatio;
  return { ratio, bound, shedding };
}

export interface Sheddable {
  /** Drop what can be dropped now, and keep it dropped while shedding lasts. */
  shed(): void;
  /** Pressure is over: collect again. */
  resume(): void;
}

export interface MemoryGuardOptions {
  sample: () => MemorySample;
  shedRatio: number;
  log: (level: "info" | "warn", message: string, fields: Record<string, unknown>) => void;
  /** What to shed, in order. */
  sheddable: Sheddable[];
}

export class MemoryGuard {
  private state: MemoryPressure = { ratio: 0, bound: "cgroup", shedding: false };
  private latest: MemorySample | undefined;
  /** Times shedding began since the start. */
  shedEpisodes = 0;

  constructor(private readonly options: MemoryGuardOptions) {}

  get shedding(): boolean {
    return this.state.shedding;
  }

  get pressure(): MemoryPressure {
    return this.state;
  }

  get sample(): MemorySample | undefined {
    return this.latest;
  }

  /** One look at memory; acts on a change. Called on a timer (serve.ts) and by tests. */
  check(): MemoryPressure {
    const sample = this.options.sample();
    this.latest = sample;
    const next = memoryPressure(sample, this.options.shedRatio, this.state.shedding);
    const fields = {
      usedPercent: Math.round(next.ratio * 1000) / 10,
      of: next.bound,
      shedAtPercent: Math.round(this.options.shedRatio * 1000) / 10,
      workingSetBytes: sample.cgroup?.workingSetBytes,
      limitBytes: sample.cgroup?.limitBytes,
      heapUsedBytes: sample.heapUsedBytes,
    };
    if (next.shedding && !this.state.shedding) {
      this.shedEpisodes++;
      for (const part of this.options.sheddable) part.shed();
      this.options.log(
        "warn",
        "memory near the limit: shedding the detail series and the VM pages' chart points (decisions, stops and the default series go on)",
        fields,
      );
    } else if (!next.shedding && this.state.shedding) {
      for (const part of this.options.sheddable) part.resume();
      this.options.log("info", "memory back below the limit: detail series and chart points resume", fields);
    }
    this.state = next;
    return next;
  }
}
