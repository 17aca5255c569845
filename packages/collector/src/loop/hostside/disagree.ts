// Agent and host disagreeing: the agent says idle while the host sees a busy
// vCPU or an open VNC/console/port-forward connection. Counted (metrics), so an
// image whose agent misses a kind of use is found. Pure.
import { hostConnection, hostReadingFresh } from "../../engine/host.js";
import { SIGNALS, SIGNAL_NAMES, type SignalDescriptor } from "../../engine/signals.js";
import type { EngineState, HostReading, Thresholds } from "../../engine/types.js";
import type { FleetCounters } from "../../model/vm-view.js";

export const DISAGREEMENT_KINDS = ["vcpu", "connection"] as const;
export type DisagreementKind = (typeof DISAGREEMENT_KINDS)[number];

/** The agent signals that account for what the host sees: SIGNALS' hostSees. */
function signalsTheHostSees(what: "vcpu" | "connection"): ReadonlySet<string> {
  return new Set(SIGNAL_NAMES.filter((name) => (SIGNALS[name] as SignalDescriptor).hostSees === what));
}
/** Agent signals that account for a busy vCPU. */
const COMPUTE_SIGNALS = signalsTheHostSees("vcpu");
/** Agent signals that account for someone on the console, the screen or a tunnel. */
const PRESENCE_SIGNALS = signalsTheHostSees("connection");

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
