// The view model of one VM: what the status page, /api/vms and /metrics show.
// Pure: built from the VM's loop state and its connection facts.
import type { VmKey } from "../model/vm-key.js";
import type { VmPlatformDetails, VmView } from "../model/vm-view.js";
import { idleSecondsAt } from "../engine/activity.js";
import { describeHostReading } from "../engine/host.js";
import { familyOf, SIGNAL_FAMILIES } from "../engine/signals.js";
import { disagreements } from "./hostside/disagree.js";
import { reportSummary } from "../model/compact-report.js";
import type { VmLoopState } from "./step.js";

export { SIGNAL_FAMILIES };

/** What the view needs beyond the loop state: the connection and the policy's errors. */
export interface VmViewFacts {
  key: VmKey;
  loop: VmLoopState;
  /** Set while the agent's stream is open: when it opened. */
  connectedAtMs: number | undefined;
  agentVersion: string;
  peer: string;
  policyErrors: readonly string[];
  /** What validation cut from the latest Report ("gpu.processes: 515000 → 256"). */
  truncated: readonly string[];
  /** What the platform knows of the VM (Kubernetes: owner, declared GPUs). */
  platform?: VmPlatformDetails | undefined;
}

export function vmView(facts: VmViewFacts, nowMs: number): VmView {
  const { loop } = facts;
  const record = loop.record;
  // The summary a compact Report keeps (compact-report.ts): no decoding per view.
  const report = loop.latest ? reportSummary(loop.latest) : undefined;
  const explanation = loop.lastDecision?.explanation;
  const active = new Set(record?.activeSignals ?? []);
  const signals: Record<string, boolean> = Object.fromEntries(SIGNAL_FAMILIES.map((f) => [f, false]));
  for (const signal of active) {
    const family = familyOf(signal);
    if (family) signals[family] = true;
  }
  const leases = record?.memory.leases ?? [];
  const idleSeconds = idleSecondsAt(record, nowMs);
  const connected = facts.connectedAtMs !== undefined;
  const summary = record?.summary ?? "";
  const declaredGpus =
    facts.platform?.gpuCount !== undefined && facts.platform.gpuCount > 0 ? facts.platform.gpuCount : undefined;
  return {
    namespace: facts.key.namespace,
    name: facts.key.name,
    ...(facts.platform?.owner !== undefined ? { owner: facts.platform.owner } : {}),
    state: record?.state ?? "Unknown",
    mode: loop.policy.mode,
    autostop: loop.policy.autostopEnabled,
    connected,
    ...(facts.connectedAtMs !== undefined ? { connectedAtMs: facts.connectedAtMs } : {}),
    ...(connected || record?.lastReportAtMs === undefined
      ? {}
      : {
          agentGone: record.goodbye
            ? { how: "stopped-on-purpose" as const, atMs: record.goodbye.atMs, reason: record.goodbye.reason }
            : { how: "vanished" as const },
        }),
    agentVersion: facts.agentVersion,
    peer: facts.peer,
    ...(record?.lastReportAtMs !== undefined ? { lastReportAtMs: record.lastReportAtMs } : {}),
    ...(record?.clock.lastActivityAtMs !== undefined ? { lastActivityAtMs: record.clock.lastActivityAtMs } : {}),
    ...(idleSeconds !== undefined ? { idleSeconds } : {}),
    idleTimeoutSeconds: loop.policy.idleTimeoutSeconds,
    profile: loop.policy.profile,
    ...(explanation?.stopAtMs !== undefined ? { stopDeadlineMs: explanation.stopAtMs } : {}),
    activeSignals: [...active],
    signals,
    explanation: facts.truncated.length > 0 ? `${summary} · report truncated: ${facts.truncated.join(", ")}` : summary,
    gpus: report?.gpus ?? [],
    disks: report?.disks ?? [],
    leases: leases
      .filter((l) => l.expiresAtMs > nowMs)
      .map((l) => ({
        id: l.id,
        user: l.user,
        uid: l.uid,
        reason: l.reason,
        expiresAtMs: l.expiresAtMs,
        clamped: l.clamped,
      })),
    policyErrors: [...facts.policyErrors],
    // The domain's declared GPUs are what a stop frees; the agent's count stands in where none are declared.
    ...(declaredGpus !== undefined
      ? { gpuCount: declaredGpus }
      : report?.gpuCount !== undefined
        ? { gpuCount: report.gpuCount }
        : {}),
    // Only a report of the current stream: after a reconnect the previous one is stale.
    ...(connected && loop.latest && loop.latest.receivedAtMs >= facts.connectedAtMs!
      ? { readings: report!.readings }
      : {}),
    ...(facts.truncated.length > 0 ? { truncated: [...facts.truncated] } : {}),
    ...(loop.host
      ? {
          host: {
            state: loop.host.state,
            atMs: loop.host.atMs,
            summary: describeHostReading(loop.host),
            disagreements: disagreements(
              { state: record?.state ?? "Unknown", connected, activeSignals: [...active] },
              loop.host,
              loop.policy.thresholds,
              nowMs,
            ),
          },
        }
      : {}),
  };
}
