/**
 * Retry timing for Kubernetes writes: exponential backoff with full jitter, which statuses are
 * worth another try, and a small semaphore that bounds how many requests run at once. The
 * randomness and the sleeping are passed in, so tests drive them.
 */

export type { BackoffPolicy } from "@ws/protocol";
import { backoffDelayMs as sharedBackoffDelayMs, type BackoffPolicy } from "@ws/protocol";

export const DEFAULT_BACKOFF: BackoffPolicy = { initialMs: 500, maxMs: 30_000, factor: 2 };

/** The shared backoff with a server's Retry-After in seconds, as the Kubernetes API sends it. */
export function backoffDelayMs(
  retry: number,
  policy: BackoffPolicy,
  random: () => number,
  retryAfterSeconds: number | null = null,
): number {
  return sharedBackoffDelayMs(retry, policy, random, retryAfterSeconds === null ? 0 : retryAfterSeconds * 1000);
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
