// What `whatif` prints: a table for people, JSON for scripts. Names and details come from
// Prometheus labels and recordings (what a VM's user named a process or a kernel): the table's
// text goes through terminalText, the JSON through escapedText.
import { escapedJson, formatDuration, terminalText } from "@ws/protocol";
import type { Policy } from "../../engine/types.js";
import { totals, type VmOutcome, type WhatifTotals } from "./simulate.js";

export interface WhatifResult {
  fromMs: number;
  toMs: number;
  stepSeconds: number;
  falseStopWindowSeconds: number;
  policy: Policy;
  overrides: Record<string, string>;
  vms: VmOutcome[];
}

const iso = (ms: number) => new Date(ms).toISOString().replace(/\.000Z$/, "Z");
const hours = (value: number) => value.toFixed(2);
const vmName = (vm: VmOutcome) => terminalText(`${vm.namespace}/${vm.name}`, 200);
/** A detail line's cap: long enough for an explanation, bounded against a hostile one. */
const DETAIL_MAX_CHARS = 2000;

function percent(ratio: number): string {
  return Number.isFinite(ratio) ? `${Math.round(ratio * 1000) / 10}%` : "off";
}

function bytesPerSecond(rate: number): string {
  if (!Number.isFinite(rate)) return "off";
  if (rate >= 1e6) return `${rate / 1e6}MB/s`;
  if (rate >= 1e3) return `${rate / 1e3}kB/s`;
  return `${rate}B/s`;
}

export function describePolicy(policy: Policy): string {
  const t = policy.thresholds;
  return [
    `idle-timeout ${formatDuration(policy.idleTimeoutSeconds)}`,
    `grace-period ${formatDuration(policy.gracePeriodSeconds)}`,
    `weak-activity-max ${formatDuration(policy.weakActivityMaxSeconds)}`,
    `max-keep-running ${formatDuration(policy.maxKeepRunningSeconds)}`,
    `gpu ${percent(t.gpuUtilizationRatio)}`,
    `cpu ${percent(t.cpuBusyRatio)}`,
    `user-cpu ${Number.isFinite(t.userProcessCpuCores) ? `${t.userProcessCpuCores} cores` : "off"}`,
    `network ${bytesPerSecond(t.networkBytesPerSecond)}`,
    `disk ${bytesPerSecond(t.diskBytesPerSecond)}`,
    `tty-output-counts ${t.ttyOutputCounts}`,
  ].join(", ");
}

export function formatText(result: WhatifResult): string {
  const sum = totals(result.vms);
  const lines: string[] = [];
  lines.push(
    `What-if ${iso(result.fromMs)} … ${iso(result.toMs)}, one step every ${formatDuration(result.stepSeconds)}, ${result.vms.length} VM${result.vms.length === 1 ? "" : "s"}`,
  );
  lines.push(`Policy: ${describePolicy(result.policy)}`);
  lines.push("");
  const rows: string[][] = [["VM", "stops", "likely false", "VM-hours saved", "GPU-hours saved"]];
  for (const vm of result.vms) {
    rows.push([
      vmName(vm),
      String(vm.stops.length),
      String(vm.likelyFalseStops),
      hours(vm.vmHoursSaved),
      hours(vm.gpuHoursSaved),
    ]);
  }
  rows.push([
    "total",
    String(sum.stops),
    String(sum.likelyFalseStops),
    hours(sum.vmHoursSaved),
    hours(sum.gpuHoursSaved),
  ]);
  const widths = rows[0]!.map((_, column) => Math.max(...rows.map((row) => row[column]!.length)));
  for (const row of rows)
    lines.push(
      row
        .map((cell, column) => (column === 0 ? cell.padEnd(widths[column]!) : cell.padStart(widths[column]!)))
        .join("  "),
    );

  const stops = result.vms.flatMap((vm) => vm.stops.map((stop) => ({ vm, stop })));
  if (stops.length > 0) {
    lines.push("");
    lines.push("Stops:");
    for (const { vm, stop } of stops) {
      const until =
        stop.endedBy === "activity"
          ? `used again ${formatDuration((stop.untilMs - stop.atMs) / 1000)} later (${terminalText(stop.resumedBy, DETAIL_MAX_CHARS)})${stop.likelyFalse ? ` — likely false stop (within ${formatDuration(result.falseStopWindowSeconds)})` : ""}`
          : stop.endedBy === "vm-gone"
            ? `off in the recording ${formatDuration((stop.untilMs - stop.atMs) / 1000)} later`
            : `idle until the end of the range`;
      lines.push(
        `  ${vmName(vm)}  ${iso(stop.atMs)}  ${until}; saved ${hours(stop.savedSeconds / 3600)} VM-hours${stop.gpus > 0 ? ` × ${stop.gpus} GPU` : ""}`,
      );
      for (const detail of stop.notCounted) lines.push(`      not counted: ${terminalText(detail, DETAIL_MAX_CHARS)}`);
    }
  }
  const silent = result.vms.filter((vm) => vm.reportedSteps === 0);
  if (silent.length > 0) {
    lines.push("");
    lines.push(
      `No replayable readings for: ${silent.map(vmName).join(", ")} (their agent was never connected in the range)`,
    );
  }
  return `${lines.join("\n")}\n`;
}

export function formatJson(result: WhatifResult): string {
  const sum: WhatifTotals = totals(result.vms);
  return `${escapedJson(
    {
      from: iso(result.fromMs),
      to: iso(result.toMs),
      stepSeconds: result.stepSeconds,
      falseStopWindowSeconds: result.falseStopWindowSeconds,
      overrides: result.overrides,
      policy: {
        ...result.policy,
        thresholds: Object.fromEntries(
          Object.entries(result.policy.thresholds).map(([k, v]) => [k, v === Infinity ? "off" : v]),
        ),
      },
      vms: result.vms.map((vm) => ({
        namespace: vm.namespace,
        name: vm.name,
        stops: vm.stops.length,
        likelyFalseStops: vm.likelyFalseStops,
        vmHoursSaved: vm.vmHoursSaved,
        gpuHoursSaved: vm.gpuHoursSaved,
        reportedSteps: vm.reportedSteps,
        stopList: vm.stops.map((stop) => ({
          at: iso(stop.atMs),
          until: iso(stop.untilMs),
          endedBy: stop.endedBy,
          ...(stop.resumedBy ? { resumedBy: stop.resumedBy } : {}),
          likelyFalse: stop.likelyFalse,
          savedSeconds: stop.savedSeconds,
          gpus: stop.gpus,
          trigger: stop.trigger,
          reason: stop.reason,
        })),
      })),
      total: sum,
    },
    2,
  )}\n`;
}
