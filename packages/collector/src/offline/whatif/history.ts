// Recorded history: the query that reads the replayable series from Prometheus,
// and the pure step that turns its matrix answer into one sample per VM per step.
import type { TraceHostReading } from "../../loop/trace.js";
import type { ReportReadings } from "../../model/readings.js";
import { ACTIVITY_SIGNALS, type ActivitySignal } from "../../engine/signals.js";

/** The series `whatif` reads, by metric name without the `workstation_` prefix. */
export const HISTORY_METRICS = [
  "agent_connected",
  "gpus",
  "gpu_utilization_ratio",
  "gpu_processes",
  "cpu_busy_ratio",
  "user_process_cpu_cores",
  "network_bytes_per_second",
  "disk_io_bytes_per_second",
  "jupyter_busy_kernels",
  "jupyter_connected_kernels",
  "idle_inhibitors",
  "signal_last_activity_timestamp_seconds",
  "lease_expiry_timestamp_seconds",
  "remote_forward_jupyter_port",
  "remote_cadence_seconds",
] as const;

/** A metric that is exported with every report: its presence at a step means a report was there to replay. */
const REPORT_MARKER = "jupyter_busy_kernels";

/** A VM the recording has series of, by its namespace and name (label `name`, or `vm` in older recordings). */
export interface RecordedVm {
  namespace: string;
  name: string;
}

/** The VMs whose series a /api/v1/series answer lists, once each, in historyFromSeries's order. */
export function recordedVms(labelSets: readonly Record<string, string>[], filter: { vm?: string }): RecordedVm[] {
  const vms = new Map<string, RecordedVm>();
  for (const labels of labelSets) {
    const name = labels.name ?? labels.vm;
    const { namespace } = labels;
    if (namespace === undefined || name === undefined || (filter.vm !== undefined && name !== filter.vm)) continue;
    vms.set(`${namespace}/${name}`, { namespace, name });
  }
  return [...vms.values()].sort(byVm);
}

/** The order whatif lists VMs in: by namespace/name. */
function byVm(a: { namespace: string; name: string }, b: { namespace: string; name: string }): number {
  return `${a.namespace}/${a.name}`.localeCompare(`${b.namespace}/${b.name}`);
}

/** The step a point at `seconds` falls on (rounded to the nearest). */
export function stepIndex(grid: StepGrid, seconds: number): number {
  return Math.round((seconds * 1000 - grid.startMs) / grid.stepMs);
}

/** Points one range query may return: about 100 MB of JSON, well under Prometheus's default --query.max-samples (50 M). */
export const POINTS_PER_QUERY = 4_000_000;
/** The most points Prometheus returns per series in one range query (it refuses more than 11,000). */
export const POINTS_PER_SERIES = 10_000;
/** The series one VM's history has, counted generously: the metrics above, plus one per GPU and per activity signal. */
const SERIES_PER_VM = 32;

/** How many VMs one history query reads: as many as keep its answer under POINTS_PER_QUERY. */
export function defaultVmsPerQuery(grid: StepGrid): number {
  return Math.max(1, Math.floor(POINTS_PER_QUERY / (SERIES_PER_VM * Math.min(grid.count, POINTS_PER_SERIES))));
}

/** VMs read by one query: of one namespace, at most `perQuery`, in the order given. */
export interface VmBatch {
  namespace: string;
  names: string[];
}

export function vmBatches(vms: readonly RecordedVm[], perQuery: number): VmBatch[] {
  const batches: VmBatch[] = [];
  for (const vm of vms) {
    const last = batches.at(-1);
    if (last && last.namespace === vm.namespace && last.names.length < perQuery) last.names.push(vm.name);
    else batches.push({ namespace: vm.namespace, names: [vm.name] });
  }
  return batches;
}

/** A label value as a PromQL string literal (JSON's escapes are PromQL's). */
export function promString(value: string): string {
  return JSON.stringify(value);
}

/** A regex matching exactly these values (Prometheus anchors label regexes). */
function exactAlternation(values: readonly string[]): string {
  return values.map((value) => value.replace(/[\\^$.*+?()[\]{}|]/g, "\\$&")).join("|");
}

/**
 * The range query of one batch: its VMs' replayed series from the leader, whether the recording names
 * them by `name` or, before that label, by `vm`.
 */
export function batchHistoryQuery(batch: VmBatch): string {
  const metrics = `__name__=~"workstation_(${HISTORY_METRICS.join("|")})"`;
  const namespace = `namespace=${promString(batch.namespace)}`;
  const names = promString(exactAlternation(batch.names));
  return `({${metrics},${namespace},name=~${names}} or {${metrics},${namespace},vm=~${names}}) and on (job, instance) (workstation_collector_leader == 1)`;
}

export interface MatrixSeries {
  metric: Record<string, string>;
  values: Array<[number, string]>;
}

export class HistoryError extends Error {
  override name = "HistoryError";
}

/** The `data` of a Prometheus API answer, or a HistoryError that says what came instead. */
function answerData(body: unknown): unknown {
  const answer = body as { status?: unknown; error?: unknown; errorType?: unknown; data?: unknown };
  if (!answer || typeof answer !== "object")
    throw new HistoryError("Prometheus answered something that is not a JSON object");
  if (answer.status !== "success") {
    throw new HistoryError(
      `Prometheus refused the query: ${String(answer.errorType ?? "error")}: ${String(answer.error ?? "no message")}`,
    );
  }
  return answer.data;
}

/** Checks the shape of a /api/v1/series answer and returns its label sets. */
export function parseLabelSets(body: unknown): Record<string, string>[] {
  const data = answerData(body);
  if (!Array.isArray(data)) throw new HistoryError("Prometheus answered a series list that is not a list");
  for (const labels of data as unknown[])
    if (!labels || typeof labels !== "object" || Object.values(labels).some((value) => typeof value !== "string"))
      throw new HistoryError("Prometheus answered a series list with something that is not a label set");
  return data as Record<string, string>[];
}

/** Checks the shape of a /api/v1/query_range answer and returns its series. */
export function parseMatrix(body: unknown): MatrixSeries[] {
  const data = answerData(body) as { resultType?: unknown; result?: unknown } | undefined;
  if (data?.resultType !== "matrix" || !Array.isArray(data.result)) {
    throw new HistoryError(`Prometheus answered a ${String(data?.resultType)} where a range query returns a matrix`);
  }
  const series: MatrixSeries[] = [];
  for (const entry of data.result as unknown[]) {
    const item = entry as { metric?: unknown; values?: unknown };
    if (!item || typeof item.metric !== "object" || item.metric === null || !Array.isArray(item.values)) {
      throw new HistoryError("Prometheus answered a series without metric labels or values");
    }
    // Checked in place, not copied: a week of a batch is millions of points.
    for (const point of item.values as unknown[])
      if (!Array.isArray(point) || typeof point[0] !== "number" || typeof point[1] !== "string")
        throw new HistoryError("Prometheus answered a malformed sample");
    series.push({ metric: item.metric as Record<string, string>, values: item.values as Array<[number, string]> });
  }
  return series;
}

export interface StepSample {
  connected: boolean;
  /** Present when the agent had reported (the raw readings were exported at that step). */
  readings?: ReportReadings;
  leaseExpiresAtMs?: number;
  /** GPUs known for the VM at that step, even while its agent was away. */
  gpuCount?: number;
  /** The host-side reading at that step (whatif --host-window): KubeVirt's metrics, as the live source reads them. */
  host?: TraceHostReading;
}

export interface VmHistory {
  namespace: string;
  name: string;
  /**
   * One entry per step, undefined where nothing was recorded (a trace's, a test's); or, read from
   * Prometheus, the recorded series on the grid, which stepSamples makes into a sample a step at a
   * time: a week of a VM is a few typed arrays (about 1 MB, not 20), and a worker thread gets it in one copy.
   */
  samples: Array<StepSample | undefined> | RecordedSteps;
}

/** A VM's recorded series on the grid (historyFromSeries). */
export interface RecordedSteps {
  columns: Column[];
  /** Each step's host-side reading (whatif --host-window). */
  host?: TraceHostReading[];
}

/** The history's sample at each step (a replay asks for each step once, in order; make one per replay). */
export function stepSamples(history: VmHistory): (index: number) => StepSample | undefined {
  const { samples } = history;
  if (Array.isArray(samples)) return (index) => samples[index];
  const { columns, host } = samples;
  const sampleAt = sampler(columns);
  return (index) => {
    const recorded = columns.some((column) => !Number.isNaN(column.values[index]!)) ? sampleAt(index) : undefined;
    return host ? { connected: false, ...recorded, host: host[index]! } : recorded;
  };
}

export interface StepGrid {
  startMs: number;
  stepMs: number;
  count: number;
}

export function stepGrid(fromMs: number, toMs: number, stepSeconds: number): StepGrid {
  const stepMs = stepSeconds * 1000;
  return { startMs: fromMs, stepMs, count: Math.floor((toMs - fromMs) / stepMs) + 1 };
}

/** One recorded series of a VM on the grid: its value at each step, NaN where it has none. */
export interface Column {
  metric: string;
  /** The `gpu` or `signal` label, for the series that carry one. */
  label: string;
  values: Float64Array;
}

/** The ReportReadings fields read from one series each, by metric. */
const OPTIONAL_READINGS = [
  ["cpu_busy_ratio", "cpuBusyRatio"],
  ["user_process_cpu_cores", "userProcessCpuCores"],
  ["network_bytes_per_second", "networkBytesPerSecond"],
  ["disk_io_bytes_per_second", "diskBytesPerSecond"],
  ["remote_forward_jupyter_port", "remoteForwardJupyterPort"],
  ["remote_cadence_seconds", "remoteCadenceSeconds"],
] as const;

/**
 * Folds the series of one or more range queries over the same grid into per-VM timelines. Each
 * series becomes a column of numbers on the grid (a later point on the same step wins); a step with
 * any value is a sample (stepSamples makes it when the replay reaches it).
 */
export function historyFromSeries(series: readonly MatrixSeries[], grid: StepGrid): VmHistory[] {
  const vms = new Map<string, { namespace: string; name: string; columns: Map<string, Column> }>();
  for (const { metric, values } of series) {
    const name = metric.__name__?.replace(/^workstation_/, "");
    const namespace = metric.namespace;
    // `name` since the series join KubeVirt's; recordings from before then carry `vm`.
    const vm = metric.name ?? metric.vm;
    if (!name || namespace === undefined || vm === undefined) continue;
    const key = `${namespace}/${vm}`;
    let entry = vms.get(key);
    if (!entry) {
      entry = { namespace, name: vm, columns: new Map() };
      vms.set(key, entry);
    }
    const label =
      name === "gpu_utilization_ratio"
        ? (metric.gpu ?? "")
        : name === "signal_last_activity_timestamp_seconds"
          ? (metric.signal ?? "")
          : "";
    const field = `${name}|${label}`;
    let column = entry.columns.get(field);
    if (!column) {
      column = { metric: name, label, values: new Float64Array(grid.count).fill(Number.NaN) };
      entry.columns.set(field, column);
    }
    for (const [seconds, text] of values) {
      const value = Number(text);
      if (!Number.isFinite(value)) continue;
      const index = stepIndex(grid, seconds);
      if (index < 0 || index >= grid.count) continue;
      column.values[index] = value;
    }
  }

  const histories: VmHistory[] = [];
  for (const entry of [...vms.values()].sort(byVm)) {
    histories.push({ namespace: entry.namespace, name: entry.name, samples: { columns: [...entry.columns.values()] } });
  }
  return histories;
}

/** The sample of a step from a VM's columns (the named ones looked up once per VM). */
function sampler(columns: readonly Column[]): (index: number) => StepSample {
  const named = (metric: string) => columns.find((column) => column.metric === metric)?.values;
  const connected = named("agent_connected");
  const gpus = named("gpus");
  const lease = named("lease_expiry_timestamp_seconds");
  const marker = named(REPORT_MARKER);
  const counts = {
    gpuProcesses: named("gpu_processes"),
    jupyterBusyKernels: named("jupyter_busy_kernels"),
    jupyterConnectedKernels: named("jupyter_connected_kernels"),
    idleInhibitors: named("idle_inhibitors"),
  };
  const optional = OPTIONAL_READINGS.map(([metric, key]) => [key, named(metric)] as const);
  const gpuColumns = columns.filter((column) => column.metric === "gpu_utilization_ratio");
  const signalColumns = columns.filter(
    (column) =>
      column.metric === "signal_last_activity_timestamp_seconds" &&
      (ACTIVITY_SIGNALS as readonly string[]).includes(column.label),
  );
  const at = (values: Float64Array | undefined, index: number): number | undefined => {
    const value = values?.[index];
    return value === undefined || Number.isNaN(value) ? undefined : value;
  };

  return (index) => {
    const sample: StepSample = { connected: at(connected, index) === 1 };
    const gpuCount = at(gpus, index);
    if (gpuCount !== undefined) sample.gpuCount = gpuCount;
    const leaseSeconds = at(lease, index);
    if (leaseSeconds !== undefined) sample.leaseExpiresAtMs = leaseSeconds * 1000;
    if (!sample.connected || at(marker, index) === undefined) return sample;

    const readings: ReportReadings = {
      gpuCount: gpuCount ?? 0,
      gpuUtilization: {},
      gpuProcesses: at(counts.gpuProcesses, index) ?? 0,
      jupyterBusyKernels: at(counts.jupyterBusyKernels, index) ?? 0,
      jupyterConnectedKernels: at(counts.jupyterConnectedKernels, index) ?? 0,
      idleInhibitors: at(counts.idleInhibitors, index) ?? 0,
      lastActivityAtMs: {},
    };
    for (const [key, values] of optional) {
      const value = at(values, index);
      if (value !== undefined) readings[key] = value;
    }
    // A GPU with a utilization series is a GPU, even if the count was scraped a moment apart.
    let highestIndex = -1;
    for (const column of gpuColumns) {
      const value = at(column.values, index);
      if (value === undefined) continue;
      readings.gpuUtilization[column.label] = value;
      const gpu = Number(column.label);
      if (Number.isInteger(gpu)) highestIndex = Math.max(highestIndex, gpu);
    }
    for (const column of signalColumns) {
      const value = at(column.values, index);
      if (value !== undefined) readings.lastActivityAtMs[column.label as ActivitySignal] = value * 1000;
    }
    readings.gpuCount = Math.max(readings.gpuCount, highestIndex + 1);
    sample.readings = readings;
    return sample;
  };
}

/** Splits a range into chunks Prometheus accepts (it refuses more than 11,000 points per series). */
export function rangeChunks(grid: StepGrid, maxPoints = POINTS_PER_SERIES): Array<{ startMs: number; endMs: number }> {
  const chunks: Array<{ startMs: number; endMs: number }> = [];
  for (let first = 0; first < grid.count; first += maxPoints) {
    const last = Math.min(grid.count - 1, first + maxPoints - 1);
    chunks.push({ startMs: grid.startMs + first * grid.stepMs, endMs: grid.startMs + last * grid.stepMs });
  }
  return chunks;
}
