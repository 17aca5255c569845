// The last-stop record: why and when ws stopped a VM, what the engine saw, what the stop gave
// back, and a dispute kept beside it. Kubernetes mode keeps it as JSON in the VM's
// `<prefix>last-stop` annotation (platform/kube/audit.ts writes it, platform/kube/start.ts reads it back for the
// starting page and the dispute writer); standalone mode keeps the same record in memory; the
// welcome back, the dispute form and `whatif --disputes` read it. Written and read here only, so
// the modes and the offline tools agree on one shape without depending on each other. Pure.
import type { StopEvidence } from "./actions.js";

/** What a mode writes when ws stopped a VM. */
export interface LastStop {
  whenMs: number;
  reason: string;
  /** The signals that decided, as the engine explains them (any JSON): lastStopSignals. */
  signals: unknown;
  /** Which collector instance stopped it. */
  by: string;
  /** What the stop gave back (CPU, memory, GPUs by device name). */
  frees?: Record<string, unknown>;
  /** The VM's owner label value. */
  owner?: string;
  /** The start link: how to bring it back. */
  startUrl?: string;
  /** The boot that was stopped: an agent of another boot is the VM started again (the welcome back). */
  bootId?: string;
}

/** Why and when ws (or someone) last stopped the VM, as the starting page and the welcome back read it. */
export interface LastStopFacts {
  /** The record as stored, to keep a dispute beside it. */
  raw?: Record<string, unknown>;
  /** Already disputed: when. */
  disputedAtMs?: number;
  atMs: number;
  reason: string;
  /** Idle for this long when it was stopped, when the record says. */
  idleSeconds?: number;
  /** The last activity ws saw before the stop. */
  lastActivity?: { atMs: number; what: string };
  /** The boot id of the agent that was stopped, when one was connected. */
  bootId?: string;
}

/** The annotation that holds the record in Kubernetes mode. */
export function lastStopKey(prefix: string): string {
  return `${prefix}last-stop`;
}

/** Readings kept in the record: the latest ones; a VM with hundreds of kernels must not bloat its object. */
const LAST_STOP_READINGS = 20;

/** A record larger than this is not read: an annotation anyone with write access could have grown. */
const MAX_RECORD_CHARS = 64 * 1024;

function isoSeconds(ms: number): string {
  return new Date(ms).toISOString().replace(/\.\d{3}Z$/, "Z");
}

/** The record's "signals": what the engine saw when it decided the stop. */
export function lastStopSignals(evidence: StopEvidence | undefined): Record<string, unknown> {
  if (!evidence) return {};
  const iso = (ms: number | undefined) =>
    ms === undefined || !Number.isFinite(ms) ? undefined : new Date(ms).toISOString();
  const explanation = evidence.explanation;
  if (!explanation) return { trigger: evidence.trigger };
  return {
    trigger: evidence.trigger,
    idleSeconds: explanation.idleSeconds === undefined ? undefined : Math.round(explanation.idleSeconds),
    idleTimeoutSeconds: explanation.idleTimeoutSeconds,
    lastActivity:
      explanation.lastActivityAtMs === undefined
        ? undefined
        : { at: iso(explanation.lastActivityAtMs), what: explanation.lastActivity },
    readings: [...explanation.readings]
      .sort((a, b) => b.atMs - a.atMs)
      .slice(0, LAST_STOP_READINGS)
      .map((reading) => ({
        signal: reading.signal,
        strength: reading.strength,
        at: iso(reading.atMs),
        detail: reading.detail,
      })),
    vetoes: explanation.vetoes.map((veto) => veto.kind),
    blind: explanation.blind.map((source) => source.source),
    // What KubeVirt saw from the host (hostSide configured): the evidence of a VM stopped without its agent.
    ...(explanation.host ? { host: { state: explanation.host.state, reading: explanation.host.summary } } : {}),
  };
}

/** The record as stored: {"when":"…Z","reason":…,"signals":…,"by":…}, `when` to the second. */
export function formatLastStop(stop: LastStop): string {
  return JSON.stringify({
    when: isoSeconds(stop.whenMs),
    reason: stop.reason,
    signals: stop.signals,
    ...(stop.frees !== undefined ? { frees: stop.frees } : {}),
    ...(stop.owner !== undefined ? { owner: stop.owner } : {}),
    ...(stop.startUrl !== undefined ? { startUrl: stop.startUrl } : {}),
    ...(stop.bootId !== undefined ? { bootId: stop.bootId } : {}),
    by: stop.by,
  });
}

/** The record with a dispute kept beside it (the dispute form's answer, as JSON). */
export function withDispute(raw: Record<string, unknown>, dispute: Record<string, unknown>): Record<string, unknown> {
  return { ...raw, dispute };
}

/** What the pages read of a stored record (already parsed); null when it has no time or reason. */
export function lastStopFactsOf(raw: Record<string, unknown>): LastStopFacts | null {
  const atMs = typeof raw.when === "string" ? Date.parse(raw.when) : Number.NaN;
  if (!Number.isFinite(atMs) || typeof raw.reason !== "string") return null;
  const signals = (typeof raw.signals === "object" && raw.signals !== null ? raw.signals : {}) as Record<
    string,
    unknown
  >;
  const activity = (signals.lastActivity ?? null) as { at?: unknown; what?: unknown } | null;
  const activityAt = typeof activity?.at === "string" ? Date.parse(activity.at) : Number.NaN;
  const dispute = raw.dispute as { at?: unknown } | undefined;
  const disputedAtMs = typeof dispute?.at === "string" ? Date.parse(dispute.at) : Number.NaN;
  return {
    raw,
    ...(Number.isFinite(disputedAtMs) ? { disputedAtMs } : {}),
    atMs,
    reason: raw.reason.slice(0, 1024),
    ...(typeof signals.idleSeconds === "number" ? { idleSeconds: signals.idleSeconds } : {}),
    ...(Number.isFinite(activityAt) && typeof activity?.what === "string"
      ? { lastActivity: { atMs: activityAt, what: activity.what.slice(0, 256) } }
      : {}),
    ...(typeof raw.bootId === "string" && raw.bootId.length <= 64 ? { bootId: raw.bootId } : {}),
  };
}

/** A stored record (the annotation's text) as the pages read it; null when absent or unreadable. */
export function parseLastStop(text: string | undefined): LastStopFacts | null {
  if (!text || text.length > MAX_RECORD_CHARS) return null;
  try {
    return lastStopFactsOf(JSON.parse(text) as Record<string, unknown>);
  } catch {
    return null;
  }
}

/** The record among a VM's annotations (the live object, or one item of a VirtualMachineList). */
export function lastStopIn(annotations: Record<string, string> | undefined, prefix: string): LastStopFacts | null {
  return parseLastStop(annotations?.[lastStopKey(prefix)]);
}
