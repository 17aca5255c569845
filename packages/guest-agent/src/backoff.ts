/** Reconnect delays: exponential growth with full jitter, capped. Pure: randomness is passed in. */
export interface BackoffPolicy {
  initialMs: number;
  maxMs: number;
  multiplier: number;
  /** 0 = no jitter; 1 = delay drawn uniformly from [0, base]. */
  jitter: number;
}

export const defaultBackoff: BackoffPolicy = { initialMs: 1_000, maxMs: 60_000, multiplier: 2, jitter: 0.5 };

/** Delay before reconnect attempt number `attempt` (0 for the first retry). */
export function backoffDelayMs(attempt: number, policy: BackoffPolicy, random: () => number): number {
  const base = Math.min(policy.maxMs, policy.initialMs * policy.multiplier ** Math.max(0, attempt));
  const jitter = Math.min(1, Math.max(0, policy.jitter));
  return Math.round(base * (1 - jitter * random()));
}
