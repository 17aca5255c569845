// Retry timing shared by both programs (the agent's reconnects, the collector's Kubernetes writes
// and webhooks): exponential growth with jitter, capped. Pure: the randomness is passed in.

export interface BackoffPolicy {
  /** Delay ceiling of the first retry (ms). */
  initialMs: number;
  /** No delay exceeds this (ms). */
  maxMs: number;
  /** Growth per retry. */
  factor: number;
  /** Share of the ceiling drawn at random (default 0.5: a delay lies in [ceiling/2, ceiling]). */
  jitter?: number;
}

/**
 * Delay before retry number `retry` (1 = the first retry): ceiling = min(maxMs, initialMs ·
 * factor^(retry−1)), of which the `jitter` share is random, so delays still grow while replicas
 * and agents spread apart. A server's Retry-After (ms), when longer, wins (still capped by maxMs).
 */
export function backoffDelayMs(retry: number, policy: BackoffPolicy, random: () => number, retryAfterMs = 0): number {
  const exponent = Math.max(0, retry - 1);
  const ceiling = Math.min(policy.maxMs, policy.initialMs * policy.factor ** exponent);
  const jitter = Math.min(1, Math.max(0, policy.jitter ?? 0.5));
  const r = Math.min(1, Math.max(0, random()));
  const jittered = ceiling * (1 - jitter) + ceiling * jitter * r;
  return Math.round(Math.max(jittered, Math.min(policy.maxMs, retryAfterMs)));
}
