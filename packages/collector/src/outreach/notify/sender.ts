// Delivers webhook requests off the decision path: one queue per receiver (so
// a receiver that hangs delays only its own messages), a bound on everything
// queued, a few deliveries at a time, a timeout per attempt, retries with
// jittered backoff on 429/5xx/no answer. enqueue() returns at once and never
// throws, so no receiver can delay a notice or a stop. Logs name the target,
// never its URL.
import type { Logger } from "@ws/protocol";
import {
  parseRetryAfterMs,
  realSleep,
  retrying,
  type Attempt,
  type BackoffPolicy,
  type Sleep,
} from "../../lib/retry.js";
import type { WebhookFormat } from "./config.js";

export interface WebhookRequest {
  /** For logs and metrics (never the URL). */
  name: string;
  format: WebhookFormat;
  url: string;
  body: string;
  /** What it is about, for logs ("notice for ns/vm"). */
  about: string;
}

export type DeliveryOutcome = "sent" | "failed" | "dropped";

export interface SenderOptions {
  log: Logger;
  timeoutMs: number;
  retries: number;
  /** Messages queued in all, over every receiver. */
  queueSize: number;
  /** Deliveries in flight at once, in all (default 16). */
  concurrency?: number;
  /** Deliveries in flight at once to one receiver (default 2). */
  perReceiver?: number;
  backoff?: BackoffPolicy;
  random?: () => number;
  sleep?: Sleep;
  fetch?: typeof fetch;
  userAgent?: string;
}

export const WEBHOOK_BACKOFF: BackoffPolicy = { initialMs: 1000, maxMs: 30_000, factor: 2 };

interface ReceiverQueue {
  pending: WebhookRequest[];
  inFlight: number;
}

export class WebhookSender {
  /** By URL: the URL is a secret, kept in memory only as the key. */
  private readonly receivers = new Map<string, ReceiverQueue>();
  private queued = 0;
  private inFlight = 0;
  private closed = false;
  private readonly idleWaiters = new Set<() => void>();
  /** Deliveries by outcome and format, for workstation_notifications_total. */
  readonly counts = new Map<string, number>();
  /** Attempts that will be retried, for workstation_notification_retries_total. */
  retriesTotal = 0;

  constructor(private readonly options: SenderOptions) {}

  get queueLength(): number {
    return this.queued;
  }

  /**
   * Queues a request; when everything queued reaches queueSize, the oldest
   * message of the longest queue goes (the receiver that is behind; a newer
   * notice supersedes it). Never blocks.
   */
  enqueue(request: WebhookRequest): void {
    if (this.closed) return;
    if (this.queued >= this.options.queueSize) {
      const longest = [...this.receivers.values()].reduce((a, b) => (b.pending.length > a.pending.length ? b : a));
      const dropped = longest.pending.shift()!;
      this.queued--;
      this.count("dropped", dropped.format);
      this.options.log(
        "warn",
        `webhook ${dropped.name}: queue full (${this.options.queueSize}), dropped the ${dropped.about} message`,
        { webhook: dropped.name },
      );
    }
    let receiver = this.receivers.get(request.url);
    if (!receiver) {
      receiver = { pending: [], inFlight: 0 };
      this.receivers.set(request.url, receiver);
    }
    receiver.pending.push(request);
    this.queued++;
    this.pump();
  }

  /** Resolves when nothing is queued or in flight (tests, shutdown). */
  idle(): Promise<void> {
    if (this.queued === 0 && this.inFlight === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.add(resolve));
  }

  close(): void {
    this.closed = true;
    for (const receiver of this.receivers.values())
      for (const dropped of receiver.pending.splice(0)) this.count("dropped", dropped.format);
    this.queued = 0;
    this.wakeIdle();
  }

  private count(outcome: DeliveryOutcome, format: WebhookFormat): void {
    const key = `${outcome}|${format}`;
    this.counts.set(key, (this.counts.get(key) ?? 0) + 1);
  }

  private pump(): void {
    const limit = this.options.concurrency ?? 16;
    const perReceiver = this.options.perReceiver ?? 2;
    for (const [url, receiver] of this.receivers) {
      while (this.inFlight < limit && receiver.inFlight < perReceiver && receiver.pending.length > 0) {
        const request = receiver.pending.shift()!;
        this.queued--;
        this.inFlight++;
        receiver.inFlight++;
        void this.deliver(request).finally(() => {
          this.inFlight--;
          receiver.inFlight--;
          if (receiver.inFlight === 0 && receiver.pending.length === 0) this.receivers.delete(url);
          this.pump();
          this.wakeIdle();
        });
      }
      if (this.inFlight >= limit) return;
    }
  }

  private wakeIdle(): void {
    if (this.queued > 0 || this.inFlight > 0) return;
    for (const wake of [...this.idleWaiters]) wake();
    this.idleWaiters.clear();
  }

  private async deliver(request: WebhookRequest): Promise<void> {
    const { log, retries } = this.options;
    const outcome = await retrying(
      {
        maxAttempts: retries + 1,
        backoff: this.options.backoff ?? WEBHOOK_BACKOFF,
        random: this.options.random ?? Math.random,
        sleep: this.options.sleep ?? realSleep,
        // A receiver's 409 is as passing as its 503: the same message is welcome a moment later.
        conflict: "retry",
        keepTrying: () => !this.closed,
        onFailure: (_failure, _attempt, willRetry) => {
          if (willRetry) this.retriesTotal++;
        },
      },
      () => this.attempt(request),
    );
    if ("done" in outcome) {
      this.count("sent", request.format);
      if (outcome.attempts > 1)
        log("info", `webhook ${request.name}: ${request.about} delivered on attempt ${outcome.attempts}`, {
          webhook: request.name,
        });
      return;
    }
    this.count("failed", request.format);
    log(
      "warn",
      `webhook ${request.name}: ${request.about} not delivered after ${outcome.attempts} attempt(s): ${outcome.failed.message}`,
      { webhook: request.name },
    );
  }

  private async attempt(request: WebhookRequest): Promise<Attempt<"sent">> {
    const doFetch = this.options.fetch ?? fetch;
    const abort = new AbortController();
    const timer = setTimeout(() => abort.abort(), this.options.timeoutMs);
    timer.unref?.();
    try {
      const response = await doFetch(request.url, {
        method: "POST",
        headers: { "content-type": "application/json", "user-agent": this.options.userAgent ?? "ws-collector" },
        body: request.body,
        signal: abort.signal,
        // A receiver that redirects is misconfigured, not down: it is reported as such and not retried.
        redirect: "manual",
      });
      // The body is not needed; drain it so the connection is freed (a receiver may send a lot).
      await response.body?.cancel().catch(() => {});
      if (response.ok) return { done: "sent" };
      if (response.status >= 300 && response.status < 400)
        return {
          failed: {
            status: response.status,
            message: `the receiver redirects (HTTP ${response.status}); webhooks do not follow redirects: configure the address it redirects to`,
          },
        };
      return {
        failed: {
          status: response.status,
          message: `HTTP ${response.status}`,
          retryAfterMs: parseRetryAfterMs(response.headers.get("retry-after")),
        },
      };
    } catch (error) {
      // fetch errors can quote the URL: say what happened, not where.
      const message = abort.signal.aborted
        ? `no answer within ${this.options.timeoutMs / 1000}s`
        : `connection failed (${(error as { cause?: { code?: string } }).cause?.code ?? (error as Error).name})`;
      return { failed: { status: null, message } };
    } finally {
      clearTimeout(timer);
    }
  }
}
