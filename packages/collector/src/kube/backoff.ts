/**
 * Retry timing for Kubernetes writes: exponential backoff with full jitter, which statuses are
 * worth another try, and a small semaphore that bounds how many requests run at once. The
 * randomness and the sleeping are passed in, so tests drive them.
 */

export interface BackoffPolicy {
  /** Delay cap for the first retry (ms). */
  initialMs: number;
  /** No delay exceeds this (ms). */
  maxMs: number;
  /** Growth per attempt. */
  factor: number;
}

export const DEFAULT_BACKOFF: BackoffPolicy = { initialMs: 500, maxMs: 30_000, factor: 2 };

/**
 * Delay before retry number `retry` (1 = the first retry): uniformly random in
 * [ceiling/2, ceiling], ceiling = min(maxMs, initialMs * factor^(retry-1)). Half the ceiling is
 * kept so the delays still grow; the random half spreads replicas and VMs apart.
 * A server's Retry-After, when longer, wins (still capped by maxMs).
 */
export function backoffDelayMs(
  retry: number,
  policy: BackoffPolicy,
  random: () => number,
  retryAfterSeconds: number | null = null,
): number {
  const exponent = Math.max(0, retry - 1);
  const ceiling = Math.min(policy.maxMs, policy.initialMs * policy.factor ** exponent);
  const r = Math.min(1, Math.max(0, random()));
  const jittered = ceiling / 2 + (ceiling / 2) * r;
  const serverAsked = retryAfterSeconds !== null ? Math.min(policy.maxMs, retryAfterSeconds * 1000) : 0;
  return Math.round(Math.max(jittered, serverAsked));
}

/** Conflicts, throttling, server errors and no answer at all (null) are worth retrying. */
export function isRetryableStatus(status: number | null): boolean {
  if (status === null) return true;
  return status === 409 || status === 429 || status >= 500;
}

export type Sleep = (ms: number) => Promise<void>;

export const realSleep: Sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** A counting semaphore: at most `limit` holders at once, waiters served in arrival order. */
export class Semaphore {
  private holders = 0;
  private readonly waiters: Array<() => void> = [];

  constructor(private readonly limit: number) {
    if (!Number.isInteger(limit) || limit < 1)
      throw new Error(`semaphore limit must be a positive integer, got ${limit}`);
  }

  get inUse(): number {
    return this.holders;
  }

  async acquire(): Promise<() => void> {
    if (this.holders < this.limit) {
      this.holders++;
    } else {
      await new Promise<void>((resolve) => this.waiters.push(resolve));
    }
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const next = this.waiters.shift();
      if (next) next();
      else this.holders--;
    };
  }

  async run<T>(work: () => Promise<T>): Promise<T> {
    const release = await this.acquire();
    try {
      return await work();
    } finally {
      release();
    }
  }
}
