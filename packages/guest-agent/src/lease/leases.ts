// The lease model, pure: what a lease is, how old it is, when it stops holding
// the VM, and what a collector's decision does to it. No I/O, no clock reads:
// every function takes the moment it runs at.
//
// Ages, not clocks: a lease's life is measured as its age (seconds since it
// was taken). In memory the age runs on the monotonic clock from an anchor, so
// a wall-clock step (NTP at boot, a restored snapshot) neither expires a lease
// early nor keeps it forever. The wall time it was taken is kept only to carry
// the age across an agent restart.

import type { MessageInitShape } from "@bufbuild/protobuf";
import type { LeaseDecision, LeaseSchema } from "@ws/protocol";
import { formatLeaseDuration } from "./format.js";

/** A reading of both clocks at one moment. */
export interface Instant {
  wallMs: number;
  monoMs: number;
}

export interface LeaseRecord {
  id: string;
  /** The uid the operating system reported for the requesting process. */
  uid: number;
  user: string;
  reason: string;
  /** What the user asked for. */
  requestedSeconds: number;
  /**
   * Until which age the lease holds the VM: the request, or less when a
   * collector clamped it to its max-keep-running.
   */
  holdSeconds: number;
  /** Wall time it was taken, rebased on every save; for restarts and display only. */
  takenAtMs: number;
  /** A collector has answered for it in a Directive. */
  confirmed: boolean;
  /** The collector shortened it to its max-keep-running. */
  clamped: boolean;
  /** The collector answered accepted=false: the lease does not hold the VM. */
  refused: boolean;
  /** The cap the collector applied, when it said. */
  maxKeepRunningSeconds?: number;
  /** The collector's message for this lease, if any. */
  collectorMessage?: string;
  /** Granted by the collector on a keep-running link (Directive.lease_grants), not taken with ws-lease. */
  via?: "link";
  /** Age `ageAtAnchorSeconds` at monotonic time `anchorMonoMs`. Never persisted. */
  anchorMonoMs: number;
  ageAtAnchorSeconds: number;
}

export const DEFAULT_MAX_KEEP_RUNNING_SECONDS = 24 * 3600;
export const MAX_REASON_LENGTH = 200;
export const MAX_LEASES_PER_USER = 16;
export const MAX_LEASES_TOTAL = 256;

export function leaseAgeSeconds(lease: LeaseRecord, now: Instant): number {
  return Math.max(0, lease.ageAtAnchorSeconds + (now.monoMs - lease.anchorMonoMs) / 1000);
}

export function remainingSeconds(lease: LeaseRecord, now: Instant): number {
  return Math.max(0, lease.holdSeconds - leaseAgeSeconds(lease, now));
}

export function isExpired(lease: LeaseRecord, now: Instant): boolean {
  return leaseAgeSeconds(lease, now) >= lease.holdSeconds;
}

/** Whether the lease keeps the VM running now. */
export function isHolding(lease: LeaseRecord, now: Instant): boolean {
  return !lease.refused && !isExpired(lease, now);
}

export function newLease(
  fields: { id: string; uid: number; user: string; reason: string; requestedSeconds: number },
  now: Instant,
): LeaseRecord {
  return {
    ...fields,
    holdSeconds: fields.requestedSeconds,
    takenAtMs: now.wallMs,
    confirmed: false,
    clamped: false,
    refused: false,
    anchorMonoMs: now.monoMs,
    ageAtAnchorSeconds: 0,
  };
}

/** A lease read back from disk: its age comes from the wall clock, once, then runs on the monotonic one. */
export function restoredLease(stored: StoredLease, now: Instant): LeaseRecord {
  return {
    ...stored,
    anchorMonoMs: now.monoMs,
    ageAtAnchorSeconds: Math.max(0, (now.wallMs - stored.takenAtMs) / 1000),
  };
}

export type StoredLease = Omit<LeaseRecord, "anchorMonoMs" | "ageAtAnchorSeconds">;

/** What goes to disk: the wall time taken is recomputed from the monotonic age, absorbing wall-clock steps. */
export function storedLease(lease: LeaseRecord, now: Instant): StoredLease {
  const { anchorMonoMs: _anchor, ageAtAnchorSeconds: _age, ...rest } = lease;
  return { ...rest, takenAtMs: Math.round(now.wallMs - leaseAgeSeconds(lease, now) * 1000) };
}

/** The lease as a Report carries it: an age, never a clock. */
export function leaseOnWire(lease: LeaseRecord, now: Instant): MessageInitShape<typeof LeaseSchema> {
  return {
    id: lease.id,
    uid: lease.uid,
    user: lease.user,
    reason: lease.reason,
    requestedSeconds: lease.requestedSeconds,
    ageSeconds: leaseAgeSeconds(lease, now),
    confirmed: lease.confirmed,
    via: lease.via ?? "",
  };
}

export type AuditAction = "granted" | "cancelled" | "expired" | "clamped" | "confirmed" | "refused";

export interface AuditEvent {
  action: AuditAction;
  lease: LeaseRecord;
  /** Who did it, when not the owner or the agent itself (root cancelling someone's lease). */
  byUid?: number;
  byUser?: string;
  detail?: string;
}

/**
 * A collector's answer for one lease. effective_remaining_seconds counts from
 * the Directive's arrival, so it becomes an age limit: age now + remaining.
 * A collector may shorten a lease, never lengthen it past the request.
 */
export function applyDecision(
  lease: LeaseRecord,
  decision: LeaseDecision,
  now: Instant,
): { lease: LeaseRecord; events: AuditEvent[] } {
  const events: AuditEvent[] = [];
  const next: LeaseRecord = { ...lease, confirmed: true };
  if (decision.message) next.collectorMessage = decision.message;
  else delete next.collectorMessage;
  if (decision.maxKeepRunningSeconds > 0) next.maxKeepRunningSeconds = decision.maxKeepRunningSeconds;
  if (!decision.accepted) {
    next.refused = true;
    if (!lease.refused)
      events.push({ action: "refused", lease: next, detail: decision.message || "refused by the collector" });
    return { lease: next, events };
  }
  next.refused = false;
  const remaining = Number.isFinite(decision.effectiveRemainingSeconds)
    ? Math.max(0, decision.effectiveRemainingSeconds)
    : lease.requestedSeconds;
  next.holdSeconds = Math.min(lease.requestedSeconds, leaseAgeSeconds(lease, now) + remaining);
  next.clamped = decision.clamped;
  if (decision.clamped && !lease.clamped) {
    const cap = next.maxKeepRunningSeconds;
    events.push({
      action: "clamped",
      lease: next,
      detail: cap !== undefined ? `max-keep-running ${formatLeaseDuration(cap)}` : "max-keep-running",
    });
  } else if (!lease.confirmed || lease.refused) {
    events.push({ action: "confirmed", lease: next });
  }
  return { lease: next, events };
}

/** Splits leases into those still alive and those whose time is up. */
export function partitionExpired(
  leases: LeaseRecord[],
  now: Instant,
): { alive: LeaseRecord[]; expired: LeaseRecord[] } {
  const alive: LeaseRecord[] = [];
  const expired: LeaseRecord[] = [];
  for (const lease of leases) (isExpired(lease, now) ? expired : alive).push(lease);
  return { alive, expired };
}

export type TakeRefusal =
  | { code: "bad_duration"; message: string }
  | { code: "over_cap"; message: string; capSeconds: number }
  | { code: "bad_reason"; message: string }
  | { code: "too_many"; message: string };

/** Whether a lease of `seconds` for `uid` may be taken, given the cap and what is already held. */
/** Shorter than a report interval's resolution means nothing; below a second it is a mistake. */
export const MIN_LEASE_SECONDS = 1;

export function checkTake(
  request: { seconds: number; reason: string },
  uid: number,
  capSeconds: number,
  existing: LeaseRecord[],
): TakeRefusal | undefined {
  if (!Number.isFinite(request.seconds) || request.seconds <= 0) {
    return { code: "bad_duration", message: "the duration must be a positive number of seconds" };
  }
  if (request.seconds < MIN_LEASE_SECONDS) {
    return {
      code: "bad_duration",
      message: `a lease shorter than ${MIN_LEASE_SECONDS}s keeps nothing running; ask for at least ${MIN_LEASE_SECONDS}s (such as 30m)`,
    };
  }
  if (request.seconds > capSeconds) {
    return { code: "over_cap", message: `longer than the keep-running cap of ${capSeconds}s`, capSeconds };
  }
  if (request.reason.length > MAX_REASON_LENGTH) {
    return {
      code: "bad_reason",
      message: `the reason is ${request.reason.length} characters long; keep it under ${MAX_REASON_LENGTH}`,
    };
  }
  if (existing.filter((lease) => lease.uid === uid).length >= MAX_LEASES_PER_USER) {
    return {
      code: "too_many",
      message: `you already hold ${MAX_LEASES_PER_USER} leases; cancel some first (ws-lease list, ws-lease cancel ID)`,
    };
  }
  if (existing.length >= MAX_LEASES_TOTAL) {
    return { code: "too_many", message: `this VM already has ${MAX_LEASES_TOTAL} leases` };
  }
  return undefined;
}

/** Who may cancel a lease: its owner, or root. */
export function mayCancel(lease: LeaseRecord, callerUid: number): boolean {
  return callerUid === 0 || callerUid === lease.uid;
}

/** Why a caller may not cancel `lease`, as ws-lease prints it (root's own lease names root once). */
export function cancelRefusal(lease: Pick<LeaseRecord, "id" | "user" | "uid">): string {
  return lease.uid === 0
    ? `lease ${lease.id} belongs to root: only root may cancel it`
    : `lease ${lease.id} belongs to ${lease.user} (uid ${lease.uid}): only ${lease.user} or root may cancel it`;
}

/** Lease ids are typed by people: short lowercase hex. */
export function isLeaseId(text: string): boolean {
  return /^[0-9a-f]{8}$/.test(text);
}
