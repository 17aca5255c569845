// Agent and host disagreeing: the agent says idle while the host sees a busy
// vCPU or an open VNC/console/port-forward connection. Counted (metrics), so an
// image whose agent misses a kind of use is found. Pure.
import { hostConnection, hostReadingFresh } from "../engine/host.js";
import type { EngineState, HostReading, Thresholds } from "../engine/types.js";
import type { FleetCounters } from "../model/vm-view.js";

export const DISAGREEMENT_KINDS = ["vcpu", "connection"] as const;
export type DisagreementKind = (typeof DISAGREEMENT_KINDS)[number];

/** Agent signals that account for a busy vCPU. */
const COMPUTE_SIGNALS = new Set(["cpu", "user-cpu", "gpu", "jupyter-busy"]);
/** Agent signals that account for someone on the console, the screen or a tunnel. */
const PRESENCE_SIGNALS = new Set([
  "tty-input",
  "tty-output",
  "desktop-input",
  "remote-session",
  "remote-connected",
  "jupyter-connected",
  "jupyter-terminal",
  "code-server",
]);

export function disagreements(
  facts: { state: EngineState; connected: boolean; activeSignals: readonly string[] },
  reading: HostReading | undefined,
  thresholds: Thresholds,
  nowMs: number,
): DisagreementKind[] {
  if (!reading || !facts.connected || !hostReadingFresh(reading, nowMs)) return [];
  if (facts.state !== "Active" && facts.state !== "StoppingPending") return [];
  const found: DisagreementKind[] = [];
  if (
    (reading.vcpuBusyRatio ?? 0) >= thresholds.cpuBusyRatio &&
    !facts.activeSignals.some((signal) => COMPUTE_SIGNALS.has(signal))
  )
    found.push("vcpu");
  if (hostConnection(reading) && !facts.activeSignals.some((signal) => PRESENCE_SIGNALS.has(signal)))
    found.push("connection");
  return found;
}

/** Counts the kinds that start disagreeing now (a VM that goes on disagreeing counts once). */
export function countOnsets(counters: FleetCounters, before: readonly string[], now: readonly string[]): void {
  for (const kind of now) {
    if (before.includes(kind)) continue;
    counters.hostDisagreements ??= new Map();
    counters.hostDisagreements.set(kind, (counters.hostDisagreements.get(kind) ?? 0) + 1);
  }
}
