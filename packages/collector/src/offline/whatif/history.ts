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
  return [...vms.values()].sort((a, b) => `${a.namespace}/${a.name}`.localeCompare(`${b.namespace}/${b.name}`));
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
function promString(value: string): string {
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
    const values: Array<[number, string]> = [];
    for (const point of item.values as unknown[]) {
      if (!Array.isArray(point) || typeof point[0] !== "number" || typeof point[1] !== "string")
        throw new HistoryError("Prometheus answered a malformed sample");
      values.push([point[0], point[1]]);
    }
    series.push({ metric: item.metric as Record<string, string>, values });
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
  /** One entry per step; undefined where nothing was recorded. */
  samples: Array<StepSample | undefined>;
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

function emptyReadings(): ReportReadings {
  return {
    gpuCount: 0,
    gpuUtilization: {},
    gpuProcesses: 0,
    jupyterBusyKernels: 0,
    jupyterConnectedKernels: 0,
    idleInhibitors: 0,
    lastActivityAtMs: {},
  };
}

/** Folds the series of one or more range queries over the same grid into per-VM timelines. */
export function historyFromSeries(series: readonly MatrixSeries[], grid: StepGrid): VmHistory[] {
  const byVm = new Map<string, { namespace: string; name: string; raw: Map<number, Map<string, number>> }>();
  // raw: step index → "metric[|label]" → value
  for (const { metric, values } of series) {
    const name = metric.__name__?.replace(/^workstation_/, "");
    const namespace = metric.namespace;
    // `name` since the series join KubeVirt's; recordings from before then carry `vm`.
    const vm = metric.name ?? metric.vm;
    if (!name || namespace === undefined || vm === undefined) continue;
    const key = `${namespace}/${vm}`;
    let entry = byVm.get(key);
    if (!entry) {
      entry = { namespace, name: vm, raw: new Map() };
      byVm.set(key, entry);
    }
    const field =
      name === "gpu_utilization_ratio"
        ? `${name}|${metric.gpu ?? ""}`
        : name === "signal_last_activity_timestamp_seconds"
          ? `${name}|${metric.signal ?? ""}`
          : name;
    for (const [seconds, text] of values) {
      const value = Number(text);
      if (!Number.isFinite(value)) continue;
      const index = Math.round((seconds * 1000 - grid.startMs) / grid.stepMs);
      if (index < 0 || index >= grid.count) continue;
      let fields = entry.raw.get(index);
      if (!fields) {
        fields = new Map();
        entry.raw.set(index, fields);
      }
      fields.set(field, value);
    }
  }

  const histories: VmHistory[] = [];
  for (const entry of [...byVm.values()].sort((a, b) =>
    `${a.namespace}/${a.name}`.localeCompare(`${b.namespace}/${b.name}`),
  )) {
    const samples: Array<StepSample | undefined> = new Array(grid.count).fill(undefined);
    for (const [index, fields] of entry.raw) samples[index] = sampleFrom(fields);
    histories.push({ namespace: entry.namespace, name: entry.name, samples });
  }
  return histories;
}

function sampleFrom(fields: Map<string, number>): StepSample {
  const sample: StepSample = { connected: fields.get("agent_connected") === 1 };
  const gpus = fields.get("gpus");
  if (gpus !== undefined) sample.gpuCount = gpus;
  const lease = fields.get("lease_expiry_timestamp_seconds");
  if (lease !== undefined) sample.leaseExpiresAtMs = lease * 1000;
  if (!sample.connected || !fields.has(REPORT_MARKER)) return sample;

  const readings = emptyReadings();
  readings.gpuCount = gpus ?? 0;
  readings.gpuProcesses = fields.get("gpu_processes") ?? 0;
  readings.jupyterBusyKernels = fields.get("jupyter_busy_kernels") ?? 0;
  readings.jupyterConnectedKernels = fields.get("jupyter_connected_kernels") ?? 0;
  readings.idleInhibitors = fields.get("idle_inhibitors") ?? 0;
  const optional = [
    ["cpu_busy_ratio", "cpuBusyRatio"],
    ["user_process_cpu_cores", "userProcessCpuCores"],
    ["network_bytes_per_second", "networkBytesPerSecond"],
    ["disk_io_bytes_per_second", "diskBytesPerSecond"],
    ["remote_forward_jupyter_port", "remoteForwardJupyterPort"],
    ["remote_cadence_seconds", "remoteCadenceSeconds"],
  ] as const;
  for (const [metric, key] of optional) {
    const value = fields.get(metric);
    if (value !== undefined) readings[key] = value;
  }
  for (const [field, value] of fields) {
    const [metric, label = ""] = field.split("|");
    if (metric === "gpu_utilization_ratio") readings.gpuUtilization[label] = value;
    if (
      metric === "signal_last_activity_timestamp_seconds" &&
      (ACTIVITY_SIGNALS as readonly string[]).includes(label)
    ) {
      readings.lastActivityAtMs[label as ActivitySignal] = value * 1000;
    }
  }
  // A GPU with a utilization series is a GPU, even if the count was scraped a moment apart.
  const highestIndex = Math.max(-1, ...Object.keys(readings.gpuUtilization).map(Number).filter(Number.isInteger));
  readings.gpuCount = Math.max(readings.gpuCount, highestIndex + 1);
  sample.readings = readings;
  return sample;
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
