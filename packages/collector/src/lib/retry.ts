/**
 * Retrying HTTP writes (the Kubernetes API, webhooks): the one retry loop (`retrying`), which
 * statuses are worth another try, a server's Retry-After in milliseconds (the unit of
 * @ws/protocol's backoffDelayMs, the one backoff), and a small semaphore that bounds how many
 * requests run at once. The randomness and the sleeping are passed in, so tests drive them.
 */

export { backoffDelayMs, type BackoffPolicy } from "@ws/protocol";
import { backoffDelayMs, type BackoffPolicy } from "@ws/protocol";

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

/**
 * What a 409 Conflict means to a writer. "retry": the state may settle or the write is
 * idempotent (a stop whose 409 was checked against the VM and found still running, a label, a
 * webhook, a resourceVersion conflict that a re-read answers). "final": another try would get
 * the same answer (an Event whose name is taken, a start KubeVirt refuses).
 */
export type ConflictRule = "retry" | "final";

/** A failed attempt: its status (null: no answer at all), what to say, and the server's Retry-After. */
export interface AttemptFailure {
  status: number | null;
  message: string;
  /** The server's Retry-After in ms (0 when it sent none); the next wait is at least this long. */
  retryAfterMs?: number;
}

/** One attempt's result: finished (success, or an answer the caller took as final), or failed. */
export type Attempt<T> = { done: T } | { failed: AttemptFailure };

/** How the loop ended: an attempt finished, or the retries were over (the last failure says why). */
export type RetryOutcome<T> =
  | { done: T; attempts: number }
  | { failed: AttemptFailure; attempts: number; retryable: boolean };

export interface RetryLoop {
  /** Attempts in all, the first included (Infinity: until an attempt finishes or keepTrying says no). */
  maxAttempts: number;
  backoff: BackoffPolicy;
  random: () => number;
  sleep: Sleep;
  /** What a 409 means to this writer. */
  conflict: ConflictRule;
  /** Asked after a failure that could be retried: false ends the retries (shutdown). */
  keepTrying?: () => boolean;
  /** Each failed attempt, numbered from 1, whether or not another follows (logs, metrics). */
  onFailure?: (failure: AttemptFailure, attempt: number, willRetry: boolean) => void;
}

/** Whether a failure is worth another try: conflicts by the writer's rule, then isRetryableStatus. */
export function isRetryableFailure(status: number | null, conflict: ConflictRule): boolean {
  if (status === 409) return conflict === "retry";
  return isRetryableStatus(status);
}

/**
 * The one retry loop: runs `attempt` (numbered from 1; `last` is the previous failure, null on the
 * first) until one finishes, a failure is not worth retrying, `maxAttempts` are spent or
 * `keepTrying` says no. Before attempt n+1 it waits backoffDelayMs(n), at least the last answer's
 * Retry-After. Never rejects unless `attempt` does.
 */
export async function retrying<T>(
  loop: RetryLoop,
  attempt: (n: number, last: AttemptFailure | null) => Promise<Attempt<T>>,
): Promise<RetryOutcome<T>> {
  if (!(loop.maxAttempts >= 1)) throw new Error(`maxAttempts must be at least 1, got ${loop.maxAttempts}`);
  let last: AttemptFailure | null = null;
  for (let n = 1; ; n++) {
    if (last !== null) await loop.sleep(backoffDelayMs(n - 1, loop.backoff, loop.random, last.retryAfterMs ?? 0));
    const result = await attempt(n, last);
    if ("done" in result) return { done: result.done, attempts: n };
    last = result.failed;
    const retryable = isRetryableFailure(last.status, loop.conflict);
    const willRetry = retryable && n < loop.maxAttempts && (loop.keepTrying?.() ?? true);
    loop.onFailure?.(last, n, willRetry);
    if (!willRetry) return { failed: last, attempts: n, retryable };
  }
}

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
