/**
 * Retrying HTTP writes (the Kubernetes API, webhooks): which statuses are worth another try, a
 * server's Retry-After in milliseconds (the unit of @ws/protocol's backoffDelayMs, the one
 * backoff), and a small semaphore that bounds how many requests run at once. The randomness and
 * the sleeping are passed in, so tests drive them.
 */

export { backoffDelayMs, type BackoffPolicy } from "@ws/protocol";
import type { BackoffPolicy } from "@ws/protocol";

export const DEFAULT_BACKOFF: BackoffPolicy = { initialMs: 500, maxMs: 30_000, factor: 2 };

/** An HTTP Retry-After in seconds (the delay form) as milliseconds; 0 when absent or unreadable. */
export function parseRetryAfterMs(value: string | null | undefined): number {
  if (value === undefined || value === null) return 0;
  const seconds = Number(value.trim());
  return Number.isFinite(seconds) && seconds >= 0 ? seconds * 1000 : 0;
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
