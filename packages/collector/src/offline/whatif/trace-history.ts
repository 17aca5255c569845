// A trace (docs/replay.md) as whatif's recorded history: each step takes the last Report the VM
// sent in it, read into the same readings /metrics exports and Prometheus keeps, so a trace and a
// Prometheus recording are replayed by the one simulateVm. Pure.
import type { Report } from "@ws/protocol";
import { readingsFromReport } from "../../model/readings.js";
import type { TraceEvent } from "../../loop/trace.js";
import { type StepGrid, type StepSample, stepGrid, type VmHistory } from "./history.js";

/** The end of the longest lease in force in a report received at `atMs`, or undefined. */
function leaseEndMs(report: Report, atMs: number): number | undefined {
  let end: number | undefined;
  for (const lease of report.leases?.leases ?? []) {
    const endsAt = atMs + (lease.requestedSeconds - lease.ageSeconds) * 1000;
    if (endsAt > atMs && (end === undefined || endsAt > end)) end = endsAt;
  }
  return end;
}

export interface TraceHistory {
  grid: StepGrid;
  histories: VmHistory[];
}

/**
 * One sample per step per VM from a trace whose time 0 is `originMs`: the VM's last Report in
 * (previous step, this step], its agent connected from a Report or agent-connected until
 * agent-disconnected, its host-side reading likewise. Policy lines are not replayed: whatif
 * applies its own policy to every VM.
 */
export function historiesFromTrace(events: readonly TraceEvent[], originMs: number, stepSeconds: number): TraceHistory {
  const lastT = Math.max(0, ...events.map((event) => event.t));
  const grid = stepGrid(originMs, originMs + lastT * 1000, stepSeconds);
  const byVm = new Map<string, TraceEvent[]>();
  for (const event of events) {
    if (event.kind === "policy") continue;
    const list = byVm.get(event.vm) ?? [];
    list.push(event);
    byVm.set(event.vm, list);
  }
  const histories: VmHistory[] = [];
  for (const [vm, list] of [...byVm].sort(([a], [b]) => a.localeCompare(b))) {
    const [namespace = "", name = ""] = vm.split("/");
    const ordered = [...list].sort((a, b) => a.t - b.t);
    const samples: Array<StepSample | undefined> = new Array(grid.count).fill(undefined);
    let connected = false;
    let gpuCount: number | undefined;
    let next = 0;
    for (let index = 0; index < grid.count; index++) {
      const stepMs = grid.startMs + index * grid.stepMs;
      let sample: StepSample | undefined;
      for (; next < ordered.length && originMs + ordered[next]!.t * 1000 <= stepMs; next++) {
        const event = ordered[next]!;
        const atMs = originMs + event.t * 1000;
        if (event.kind === "agent-connected") connected = true;
        else if (event.kind === "agent-disconnected") {
          connected = false;
          sample = { connected };
        } else if (event.kind === "host") {
          sample = { ...(sample ?? { connected }), host: event.host };
        } else if (event.kind === "report") {
          connected = true;
          const readings = readingsFromReport(event.report, atMs);
          gpuCount = readings.gpuCount;
          const leaseEnd = leaseEndMs(event.report, atMs);
          sample = {
            connected,
            readings,
            gpuCount,
            ...(leaseEnd !== undefined ? { leaseExpiresAtMs: leaseEnd } : {}),
            ...(sample?.host ? { host: sample.host } : {}),
          };
        }
      }
      // Between reports the VM is still there (connected or not); a step without a report replays as a wake.
      samples[index] =
        sample ?? (connected ? { connected, ...(gpuCount !== undefined ? { gpuCount } : {}) } : undefined);
      if (sample && !sample.readings && !sample.connected) samples[index] = { connected: false };
    }
    histories.push({ namespace, name, samples });
  }
  return { grid, histories };
}
