// Leases as the collector sees them: the agent sends each lease's age and the
// duration asked for; the collector turns the age into a time on its own
// clock and clamps the duration to max-keep-running.

import type { Lease } from "@ws/protocol";
import { formatDuration } from "@ws/protocol";
import type { LeaseDecisionView, TrackedLease, Policy } from "./types.js";

export function leaseView(lease: Lease, sampledAtMs: number, policy: Policy): TrackedLease {
  const age = Number.isFinite(lease.ageSeconds) && lease.ageSeconds > 0 ? lease.ageSeconds : 0;
  const takenAtMs = sampledAtMs - age * 1000;
  return clampLease(
    {
      id: lease.id,
      user: lease.user,
      uid: lease.uid,
      reason: lease.reason,
      requestedSeconds: lease.requestedSeconds,
      takenAtMs,
      expiresAtMs: takenAtMs,
      clamped: false,
      accepted: false,
      message: "",
    },
    policy,
  );
}

/** Recomputes expiry, clamp and acceptance under `policy` (max-keep-running may have changed). */
export function clampLease(view: TrackedLease, policy: Policy): TrackedLease {
  const requested = view.requestedSeconds;
  if (!Number.isFinite(requested) || requested <= 0) {
    return {
      ...view,
      accepted: false,
      clamped: false,
      expiresAtMs: view.takenAtMs,
      message: "refused: the requested duration must be positive",
    };
  }
  const clamped = requested > policy.maxKeepRunningSeconds;
  const effective = Math.min(requested, policy.maxKeepRunningSeconds);
  const message = clamped
    ? `clamped to max-keep-running ${formatDuration(policy.maxKeepRunningSeconds)} (asked ${formatDuration(requested)}); ask again later for more`
    : `accepted for ${formatDuration(effective)}`;
  return { ...view, accepted: true, clamped, expiresAtMs: view.takenAtMs + effective * 1000, message };
}

export function leaseDecision(view: TrackedLease, policy: Policy, nowMs: number): LeaseDecisionView {
  const remaining = Math.max(0, (view.expiresAtMs - nowMs) / 1000);
  return {
    id: view.id,
    accepted: view.accepted,
    clamped: view.clamped,
    effectiveExpiryMs: view.expiresAtMs,
    effectiveRemainingSeconds: remaining,
    maxKeepRunningSeconds: policy.maxKeepRunningSeconds,
    message: view.accepted && remaining === 0 ? "expired" : view.message,
  };
}

/**
 * A key that changes when the agent must hear about leases again: a lease
 * came or went, or its acceptance, clamp or expiry (to the second) changed.
 */
export function leaseDecisionsKey(views: readonly TrackedLease[]): string {
  return views
    .map((view) => `${view.id}:${view.accepted ? 1 : 0}:${view.clamped ? 1 : 0}:${Math.round(view.expiresAtMs / 1000)}`)
    .sort()
    .join(",");
}

export function describeLease(view: TrackedLease): string {
  const who = view.user || `uid ${view.uid}`;
  return `lease ${view.id} by ${who}${view.reason ? ` ("${view.reason}")` : ""}`;
}
