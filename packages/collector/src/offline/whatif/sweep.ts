// `whatif --sweep`: the plan (which knob values to replay), the sum of each replay, and the
// recommendation. Pure: the replays themselves are whatif's own (simulateVm over the same engine).
import { DurationError, formatDuration, parseDuration, UsageError } from "@ws/protocol";
import type { DisputeRecord } from "../../comeback/start/disputes.js";
import { disputeVerdicts } from "./disputes-report.js";
import type { Policy } from "../../engine/types.js";
import type { MatrixSeries, StepGrid, VmHistory } from "./history.js";
import { feedReplays, replayVm, type VmOutcome } from "./simulate.js";

/** Likely-false stops allowed per 100 stops when --false-stop-budget is not given. */
export const DEFAULT_FALSE_STOP_BUDGET = 1;
/** More replays than this is a typo in a range (30m..4h/1m), not a question anyone asked. */
const MAX_POINTS = 64;
/** The knobs where a smaller value stops sooner: the recommendation is the smallest that keeps the budget. */
const SOONER_WHEN_SMALLER = new Set(["idle-timeout", "grace-period", "unattended-max", "weak-activity-max"]);

export interface SweptKnob {
  name: string;
  values: string[];
}

export interface SweepPoint {
  /** The swept knobs' values at this point, as --KNOB VALUE takes them. */
  overrides: Record<string, string>;
}

export interface SweepPlan {
  knobs: SweptKnob[];
  points: SweepPoint[];
}

function durationOrUndefined(text: string): number | undefined {
  try {
    return parseDuration(text);
  } catch (error) {
    if (error instanceof DurationError) return undefined;
    throw error;
  }
}

function percentOrUndefined(text: string): number | undefined {
  const match = /^(\d+(?:\.\d+)?)%$/.exec(text.trim());
  return match ? Number(match[1]) : undefined;
}

/** FROM..TO/STEP as durations (30m..4h/30m) or percentages (10%..50%/10%), ends included. */
function expandRange(spec: string, knob: string): string[] {
  const match = /^([^.]+)\.\.([^/]+)\/(.+)$/.exec(spec);
  if (!match) throw new UsageError(`--sweep ${knob}=${spec}: write a range as FROM..TO/STEP (30m..4h/30m)`);
  const [, fromText, toText, stepText] = match as unknown as [string, string, string, string];
  for (const [read, show] of [
    [durationOrUndefined, formatDuration],
    [percentOrUndefined, (value: number) => `${Math.round(value * 1000) / 1000}%`],
  ] as const) {
    const from = read(fromText);
    const to = read(toText);
    const step = read(stepText);
    if (from === undefined || to === undefined || step === undefined) continue;
    if (step <= 0 || to < from)
      throw new UsageError(`--sweep ${knob}=${spec}: the range must go up from FROM to TO by a positive STEP`);
    if ((to - from) / step + 1 > MAX_POINTS)
      throw new UsageError(`--sweep ${knob}=${spec}: more than ${MAX_POINTS} values; take a larger STEP`);
    const values: string[] = [];
    // Counted in steps, not summed, so 0.1% steps do not drift past TO.
    for (let index = 0; from + index * step <= to + step * 1e-9; index++) values.push(show(from + index * step));
    return values;
  }
  throw new UsageError(
    `--sweep ${knob}=${spec}: a range needs durations (30m..4h/30m) or percentages (10%..50%/10%); list other values (a,b,c)`,
  );
}

/**
 * A listed value as the report prints it: a duration in its one spelling (90m → 1h30m), anything
 * else as typed once it is plain printable text (the knob's parser then checks it).
 */
function listValue(value: string, knob: string): string {
  if (!/^[\x21-\x7e]+$/.test(value))
    throw new UsageError(`--sweep ${knob}: a value must be plain text without spaces or control characters`);
  const seconds = /^[0-9]/.test(value) ? durationOrUndefined(value) : undefined;
  return seconds !== undefined ? formatDuration(seconds) : value;
}

/** One --sweep KNOB=VALUES. */
export function parseSweptKnob(text: string, knobNames: readonly string[]): SweptKnob {
  const equals = text.indexOf("=");
  if (equals <= 0)
    throw new UsageError(`--sweep ${JSON.stringify(text)}: write it as KNOB=VALUES (idle-timeout=30m..4h/30m)`);
  const name = text.slice(0, equals).trim().replace(/^--/, "");
  const spec = text.slice(equals + 1).trim();
  if (!knobNames.includes(name))
    throw new UsageError(`--sweep ${name}: not a knob whatif replays (one of ${knobNames.join(", ")})`);
  const values = spec.includes("..")
    ? expandRange(spec, name)
    : spec
        .split(",")
        .map((value) => value.trim())
        .filter((value) => value !== "")
        .map((value) => listValue(value, name));
  if (values.length === 0) throw new UsageError(`--sweep ${name}=: give at least one value`);
  if (new Set(values).size !== values.length) throw new UsageError(`--sweep ${name}=${spec}: a value is listed twice`);
  return { name, values };
}

/** The replays a sweep asks for: every value of one knob, or every pair of two. */
export function planSweep(
  texts: readonly string[],
  given: Record<string, string>,
  knobNames: readonly string[],
): SweepPlan {
  if (texts.length > 2)
    throw new UsageError("--sweep at most two knobs at once (every pair of their values is replayed)");
  const knobs = texts.map((text) => parseSweptKnob(text, knobNames));
  if (knobs.length === 2 && knobs[0]!.name === knobs[1]!.name)
    throw new UsageError(`--sweep ${knobs[0]!.name} is given twice`);
  for (const knob of knobs)
    if (given[knob.name] !== undefined)
      throw new UsageError(`--${knob.name} and --sweep ${knob.name}=… both set it: drop one`);
  const [first, second] = knobs as [SweptKnob, SweptKnob | undefined];
  const points: SweepPoint[] = [];
  for (const a of first.values)
    for (const b of second ? second.values : [undefined])
      points.push({ overrides: { [first.name]: a, ...(second && b !== undefined ? { [second.name]: b } : {}) } });
  if (points.length > MAX_POINTS)
    throw new UsageError(`--sweep: ${points.length} replays; at most ${MAX_POINTS} (fewer values per knob)`);
  return { knobs, points };
}

/** What a VM holds while it runs, when known (KubeVirt's metrics in the same Prometheus). */
export interface VmCapacity {
  cores?: number;
  memoryGiB?: number;
}

export interface SweepRow {
  overrides: Record<string, string>;
  stops: number;
  vmHours: number;
  /** Undefined when no replayed VM's capacity is known. */
  coreHours?: number;
  memoryGiBHours?: number;
  gpuHours: number;
  likelyFalseStops: number;
  /** Likely-false stops per 100 stops (0 without stops). */
  likelyFalsePer100: number;
  /** With --disputes: how many disputed stops this value still makes. */
  disputedStillStopped?: number;
  /** The longest time from the first notice to the stop a person would have seen, in seconds. */
  longestNoticeSeconds: number;
  withinBudget: boolean;
}

export interface SweepSummaryInput {
  overrides: Record<string, string>;
  outcomes: readonly VmOutcome[];
  capacity: ReadonlyMap<string, VmCapacity>;
  disputes?: readonly DisputeRecord[];
  stepSeconds: number;
  falseStopBudget: number;
}

/** One sweep point's replays, summed over the fleet. */
export function summarizePoint(input: SweepSummaryInput): SweepRow {
  let stops = 0;
  let likelyFalseStops = 0;
  let vmHours = 0;
  let gpuHours = 0;
  let coreHours: number | undefined;
  let memoryGiBHours: number | undefined;
  let longestNoticeSeconds = 0;
  for (const vm of input.outcomes) {
    stops += vm.stops.length;
    likelyFalseStops += vm.likelyFalseStops;
    vmHours += vm.vmHoursSaved;
    gpuHours += vm.gpuHoursSaved;
    const capacity = input.capacity.get(`${vm.namespace}/${vm.name}`);
    if (capacity?.cores !== undefined) coreHours = (coreHours ?? 0) + vm.vmHoursSaved * capacity.cores;
    if (capacity?.memoryGiB !== undefined)
      memoryGiBHours = (memoryGiBHours ?? 0) + vm.vmHoursSaved * capacity.memoryGiB;
    for (const stop of vm.stops) longestNoticeSeconds = Math.max(longestNoticeSeconds, stop.noticeSeconds);
  }
  const likelyFalsePer100 = stops === 0 ? 0 : (100 * likelyFalseStops) / stops;
  return {
    overrides: input.overrides,
    stops,
    vmHours,
    ...(coreHours !== undefined ? { coreHours } : {}),
    ...(memoryGiBHours !== undefined ? { memoryGiBHours } : {}),
    gpuHours,
    likelyFalseStops,
    likelyFalsePer100,
    ...(input.disputes
      ? {
          disputedStillStopped: disputeVerdicts(input.disputes, input.outcomes, input.stepSeconds).filter(
            (verdict) => verdict.replay === "still stopped",
          ).length,
        }
      : {}),
    longestNoticeSeconds,
    withinBudget: likelyFalsePer100 <= input.falseStopBudget,
  };
}

export interface Recommendation {
  /** The point recommended, or undefined when no value keeps the budget. */
  overrides?: Record<string, string>;
  /** Why this one, in a sentence. */
  why: string;
  /** What applies it: the config line (a profile's, or the defaults') and the VM annotation. */
  config?: string;
  annotate?: string;
}

export interface RecommendationContext {
  knobs: readonly SweptKnob[];
  falseStopBudget: number;
  annotationPrefix: string;
  profile?: string;
  namespace?: string;
  vm?: string;
}

/**
 * The value to use: for a knob where smaller stops sooner (idle-timeout, grace-period, unattended-max),
 * the smallest whose likely-false stops stay within the budget; otherwise (thresholds, two knobs) the
 * point within the budget that reclaims the most VM-hours, the first listed on a tie.
 */
export function recommend(rows: readonly SweepRow[], context: RecommendationContext): Recommendation {
  const budget = `${context.falseStopBudget} likely false stop${context.falseStopBudget === 1 ? "" : "s"} per 100 stops`;
  const within = rows.filter((row) => row.withinBudget && row.stops > 0);
  if (within.length === 0) {
    const any = rows.some((row) => row.stops > 0);
    return {
      why: any
        ? `no value swept stays within ${budget}: sweep larger values, or read the likely false stops (whatif without --sweep lists each)`
        : "no value swept stops anything in this range: the recording is too short or the VMs were in use",
    };
  }
  const only = context.knobs.length === 1 ? context.knobs[0]! : undefined;
  let chosen: SweepRow;
  let why: string;
  if (only && SOONER_WHEN_SMALLER.has(only.name)) {
    const order = new Map(only.values.map((value, index) => [value, index]));
    const seconds = (row: SweepRow) =>
      durationOrUndefined(row.overrides[only.name]!) ?? order.get(row.overrides[only.name]!)!;
    chosen = within.reduce((best, row) => (seconds(row) < seconds(best) ? row : best));
    why = `the smallest ${only.name} whose likely false stops stay within ${budget}`;
  } else {
    chosen = within.reduce((best, row) => (row.vmHours > best.vmHours ? row : best));
    why = `the value within ${budget} that reclaims the most VM-hours`;
  }
  const settings = Object.entries(chosen.overrides);
  const where = context.profile !== undefined ? `policy.profiles.${context.profile}` : "policy.defaults";
  const config = `${where}: { ${settings.map(([name, value]) => `${name}: ${value}`).join(", ")} }`;
  // kubectl takes a name only within one namespace: a --vm without --namespace leaves it to fill in.
  const target = context.vm !== undefined ? context.vm : "--all";
  const namespace =
    context.namespace !== undefined ? `-n ${context.namespace}` : context.vm !== undefined ? "-n NAMESPACE" : "-A";
  const annotate = `kubectl annotate vm ${target} ${namespace} --overwrite ${settings
    .map(([name, value]) => `${context.annotationPrefix}${name}=${value}`)
    .join(" ")}`;
  return { overrides: chosen.overrides, why, config, annotate };
}

export interface SweepRunInput {
  plan: SweepPlan;
  grid: StepGrid;
  falseStopWindowSeconds: number;
  falseStopBudget: number;
  /** The policy of one point: whatif's own (args.ts replayPolicy), with the point's knobs. */
  policyFor: (overrides: Record<string, string>) => Policy;
  capacity: ReadonlyMap<string, VmCapacity>;
  disputes?: readonly DisputeRecord[];
}

/**
 * Every point replayed through whatif's one replay (simulateVm's replayVm → step → decide), then summed.
 * One VM at a time, its replays under every policy stepped together: each Report is built once (it
 * depends on the recording only), handed to every replay at its step, and then dropped.
 */
export function runSweep(input: SweepRunInput, histories: readonly VmHistory[]): SweepRow[] {
  const policies = input.plan.points.map((point) => input.policyFor(point.overrides));
  return summarizeSweep(input, replaySweepSlice(histories, policies, input.grid, input.falseStopWindowSeconds));
}

/**
 * The outcomes of some VMs under every policy, outcomes[policy][vm] in the order of `histories`: the
 * part of a sweep each worker thread runs on its slice of the fleet (sweep-workers.ts).
 */
export function replaySweepSlice(
  histories: readonly VmHistory[],
  policies: readonly Policy[],
  grid: StepGrid,
  falseStopWindowSeconds: number,
): VmOutcome[][] {
  const outcomes: VmOutcome[][] = policies.map(() => []);
  for (const history of histories) {
    const replays = policies.map((policy) => replayVm(history, { policy, grid, falseStopWindowSeconds }));
    feedReplays(history, grid, replays);
    replays.forEach((replay, index) => {
      outcomes[index]!.push(replay.finish());
    });
  }
  return outcomes;
}

/** Each point's outcomes (outcomes[point][vm]) summed into its row. */
export function summarizeSweep(input: SweepRunInput, outcomes: readonly (readonly VmOutcome[])[]): SweepRow[] {
  return input.plan.points.map((point, index) =>
    summarizePoint({
      overrides: point.overrides,
      outcomes: outcomes[index]!,
      capacity: input.capacity,
      ...(input.disputes ? { disputes: input.disputes } : {}),
      stepSeconds: input.grid.stepMs / 1000,
      falseStopBudget: input.falseStopBudget,
    }),
  );
}

/** The cores and GiB of memory each VM held, from a range query's last point per series (KubeVirt's metrics). */
export function capacityFromSeries(
  cores: readonly MatrixSeries[],
  memoryBytes: readonly MatrixSeries[],
): Map<string, VmCapacity> {
  const capacity = new Map<string, VmCapacity>();
  const put = (series: readonly MatrixSeries[], field: keyof VmCapacity, scale: number) => {
    for (const { metric, values } of series) {
      const value = Number(values.at(-1)?.[1]);
      if (metric.namespace === undefined || metric.name === undefined || !Number.isFinite(value) || value <= 0)
        continue;
      const key = `${metric.namespace}/${metric.name}`;
      capacity.set(key, { ...capacity.get(key), [field]: value / scale });
    }
  };
  put(cores, "cores", 1);
  put(memoryBytes, "memoryGiB", 2 ** 30);
  return capacity;
}

/** Instant-style queries (one point at the end of the range) for the capacity VMs held in it. */
export function capacityQueries(rangeSeconds: number): { cores: string; memoryBytes: string } {
  const range = `${Math.max(60, Math.round(rangeSeconds))}s`;
  return {
    cores: `count by (namespace, name) (count by (namespace, name, id) (last_over_time(kubevirt_vmi_vcpu_seconds_total[${range}])))`,
    memoryBytes: `max by (namespace, name) (max_over_time(kubevirt_vmi_memory_domain_bytes[${range}]))`,
  };
}
