// What a collector's Directive does to the leases, decided without I/O: the collector's
// decisions on the leases of the last Report (confirmed, clamped, refused), then the leases it
// grants on a person's behalf (a keep-running link). The lease service (lease/service.ts) records
// the policy and the VM's status, audits, logs, saves and delivers the notices. Pure.
import { type Directive, terminalText } from "@ws/protocol";
import { NOBODY_NAME, NOBODY_UID, type Users } from "../users.js";
import {
  applyDecision,
  isLeaseId,
  MAX_REASON_LENGTH,
  MAX_LEASES_TOTAL,
  newLease,
  type AuditEvent,
  type Instant,
  type LeaseRecord,
} from "./leases.js";

export interface DirectiveOnLeases {
  /** The leases after the Directive. */
  leases: LeaseRecord[];
  /** What the collector's decisions did, to audit and log in this order. */
  decided: AuditEvent[];
  /** Leases granted by the Directive, in its order. */
  granted: LeaseRecord[];
  /** Whether anything leases.json keeps changed. */
  changed: boolean;
}

/** Applies a Directive's lease decisions and grants to `leases`; `capSeconds` bounds a granted lease. */
export function directiveOnLeases(
  leases: readonly LeaseRecord[],
  directive: Pick<Directive, "leaseDecisions" | "leaseGrants">,
  now: Instant,
  capSeconds: number,
  users: Pick<Users, "byName">,
): DirectiveOnLeases {
  const next = [...leases];
  const decided: AuditEvent[] = [];
  let changed = false;
  for (const decision of directive.leaseDecisions) {
    const index = next.findIndex((lease) => lease.id === decision.id);
    const lease = next[index];
    if (!lease) continue; // cancelled or expired since the Report
    const result = applyDecision(lease, decision, now);
    next[index] = result.lease;
    decided.push(...result.events);
    changed ||= !sameDecisionState(lease, result.lease);
  }
  const granted = acceptGrants(next, directive.leaseGrants, now, capSeconds, users);
  return { leases: next, decided, granted, changed: changed || granted.length > 0 };
}

/**
 * Leases the collector grants on a person's behalf (a keep-running link), pushed onto `leases`.
 * The owner is the local account of the name the link was sent to, if there
 * is one (so that person may cancel it), else nobody's: root may cancel it.
 * A grant id already held is ignored, so a repeated Directive grants once.
 */
function acceptGrants(
  leases: LeaseRecord[],
  grants: Directive["leaseGrants"],
  now: Instant,
  capSeconds: number,
  users: Pick<Users, "byName">,
): LeaseRecord[] {
  const granted: LeaseRecord[] = [];
  for (const grant of grants) {
    if (!isLeaseId(grant.id) || leases.some((lease) => lease.id === grant.id)) continue;
    if (!Number.isFinite(grant.seconds) || grant.seconds <= 0 || leases.length >= MAX_LEASES_TOTAL) continue;
    const account = grant.user ? users.byName(grant.user) : undefined;
    // A VM without an owner: the lease is nobody's, as docs/leases.md says (root may cancel it).
    const user = account?.name ?? (grant.user ? terminalText(grant.user, 32) : NOBODY_NAME);
    const reason = terminalText(grant.reason || "kept running via link", MAX_REASON_LENGTH);
    const seconds = Math.min(grant.seconds, capSeconds);
    const lease: LeaseRecord = {
      ...newLease({ id: grant.id, uid: account?.uid ?? NOBODY_UID, user, reason, requestedSeconds: seconds }, now),
      via: "link",
    };
    leases.push(lease);
    granted.push(lease);
  }
  return granted;
}

function sameDecisionState(a: LeaseRecord, b: LeaseRecord): boolean {
  return (
    a.confirmed === b.confirmed &&
    a.clamped === b.clamped &&
    a.refused === b.refused &&
    a.maxKeepRunningSeconds === b.maxKeepRunningSeconds &&
    a.collectorMessage === b.collectorMessage &&
    // The hold is recomputed from ages every Directive; a second's jitter is not worth a disk write.
    Math.abs(a.holdSeconds - b.holdSeconds) < 1
  );
}
