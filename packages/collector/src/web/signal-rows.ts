// The measured values of the last report beside their thresholds, and each
// source's state, for the VM page's "Signals" table: what the engine saw
// even when nothing counted. Pure.
import type { Thresholds } from "../engine/types.js";
import type { ReportReadings } from "../model/readings.js";

export interface MeasuredRow {
  signal: string;
  reading: string;
  counted: boolean;
  why: string;
}

const percent = (ratio: number) => `${(ratio * 100).toFixed(ratio < 0.1 ? 1 : 0)}%`;
const rate = (bytes: number) =>
  bytes >= 1e6 ? `${(bytes / 1e6).toFixed(1)} MB/s` : `${(bytes / 1e3).toFixed(1)} kB/s`;

function compare(
  signal: string,
  label: string,
  value: number | undefined,
  threshold: number,
  show: (n: number) => string,
): MeasuredRow {
  if (value === undefined)
    return {
      signal,
      reading: `${label}: not measured yet`,
      counted: false,
      why: "no value in this report (the first sample has no rate)",
    };
  if (!Number.isFinite(threshold))
    return {
      signal,
      reading: `${label} ${show(value)}`,
      counted: false,
      why: "this signal is turned off in the policy",
    };
  const counted = value >= threshold;
  return {
    signal,
    reading: `${label} ${show(value)} (threshold ${show(threshold)})`,
    counted,
    why: counted ? "at or above the threshold: background work" : "below the threshold",
  };
}

/** One row per measured signal; `shown` lists the signals the engine's explanation already has rows for. */
export function measuredRows(
  readings: ReportReadings,
  thresholds: Thresholds,
  shown: ReadonlySet<string>,
): MeasuredRow[] {
  const rows: MeasuredRow[] = [
    compare("cpu", "whole-machine CPU", readings.cpuBusyRatio, thresholds.cpuBusyRatio, percent),
    compare(
      "user-cpu",
      "users' processes",
      readings.userProcessCpuCores,
      thresholds.userProcessCpuCores,
      (n) => `${n.toFixed(2)} cores`,
    ),
    compare("network", "network", readings.networkBytesPerSecond, thresholds.networkBytesPerSecond, rate),
    compare("disk", "disk I/O", readings.diskBytesPerSecond, thresholds.diskBytesPerSecond, rate),
  ];
  const gpus = Object.entries(readings.gpuUtilization);
  if (readings.gpuCount > 0) {
    const busiest = gpus.length ? Math.max(...gpus.map(([, v]) => v)) : undefined;
    rows.push(compare("gpu", `${readings.gpuCount} GPU(s), busiest`, busiest, thresholds.gpuUtilizationRatio, percent));
  } else {
    rows.push({ signal: "gpu", reading: "no GPU", counted: false, why: "nothing to measure" });
  }
  rows.push({
    signal: "jupyter-busy",
    reading: `${readings.jupyterBusyKernels} busy kernel(s), ${readings.jupyterConnectedKernels} with a browser connected`,
    counted: readings.jupyterBusyKernels > 0,
    why: readings.jupyterBusyKernels > 0 ? "a busy kernel is work" : "no kernel is running a cell",
  });
  rows.push({
    signal: "inhibitor",
    reading: `${readings.idleInhibitors} idle inhibitor lock(s)`,
    counted: readings.idleInhibitors > 0,
    why: readings.idleInhibitors > 0 ? "a held lock acts like a lease (capped by max-keep-running)" : "none held",
  });
  return rows.filter((row) => !shown.has(row.signal));
}
