// Delivers webhook requests off the decision path: a bounded queue, a few
// deliveries at a time, a timeout per attempt, retries with jittered backoff
// on 429/5xx/no answer. enqueue() returns at once and never throws, so a hung
// receiver cannot delay a notice or a stop. Logs name the target, never its URL.
import type { Logger } from "@ws/protocol";
import { backoffDelayMs, isRetryableStatus, realSleep, type BackoffPolicy, type Sleep } from "../kube/backoff.js";
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
  queueSize: number;
  /** Deliveries in flight at once. */
  concurrency?: number;
  backoff?: BackoffPolicy;
  random?: () => number;
  sleep?: Sleep;
  fetch?: typeof fetch;
  userAgent?: string;
}

export const WEBHOOK_BACKOFF: BackoffPolicy = { initialMs: 1000, maxMs: 30_000, factor: 2 };

export class WebhookSender {
  private readonly queue: WebhookRequest[] = [];
  private inFlight = 0;
  private closed = false;
  private readonly idleWaiters = new Set<() => void>();
  /** Deliveries by outcome and format, for workstation_notifications_total. */
  readonly counts = new Map<string, number>();
  /** Attempts that will be retried, for workstation_notification_retries_total. */
  retriesTotal = 0;

  constructor(private readonly options: SenderOptions) {}

  get queueLength(): number {
    return this.queue.length;
  }

  /** Queues a request; a full queue drops the oldest (a newer notice supersedes it). Never blocks. */
  enqueue(request: WebhookRequest): void {
    if (this.closed) return;
    if (this.queue.length >= this.options.queueSize) {
      const dropped = this.queue.shift()!;
      this.count("dropped", dropped.format);
      this.options.log("warn", `webhook ${dropped.name}: queue full (${this.options.queueSize}), dropped the ${dropped.about} message`, { webhook: dropped.name });
    }
    this.queue.push(request);
    this.pump();
  }

  /** Resolves when nothing is queued or in flight (tests, shutdown). */
  idle(): Promise<void> {
    if (this.queue.length === 0 && this.inFlight === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.add(resolve));
  }

  close(): void {
    this.closed = true;
    for (const dropped of this.queue.splice(0)) this.count("dropped", dropped.format);
    this.wakeIdle();
  }

  private count(outcome: DeliveryOutcome, format: WebhookFormat): void {
    const key = `${outcome}|${format}`;
    this.counts.set(key, (this.counts.get(key) ?? 0) + 1);
  }

  private pump(): void {
    const limit = this.options.concurrency ?? 4;
    while (this.inFlight < limit && this.queue.length > 0) {
      const request = this.queue.shift()!;
      this.inFlight++;
      void this.deliver(request).finally(() => {
        this.inFlight--;
        this.pump();
        this.wakeIdle();
      });
    }
  }

  private wakeIdle(): void {
    if (this.queue.length > 0 || this.inFlight > 0) return;
    for (const wake of [...this.idleWaiters]) wake();
    this.idleWaiters.clear();
  }

  private async deliver(request: WebhookRequest): Promise<void> {
    const { log, retries } = this.options;
    const sleep = this.options.sleep ?? realSleep;
    for (let attempt = 1; ; attempt++) {
      const result = await this.attempt(request);
      if (result.ok) {
        this.count("sent", request.format);
        if (attempt > 1) log("info", `webhook ${request.name}: ${request.about} delivered on attempt ${attempt}`, { webhook: request.name });
        return;
      }
      const retryable = isRetryableStatus(result.status);
      if (!retryable || attempt > retries || this.closed) {
        this.count("failed", request.format);
        log("warn", `webhook ${request.name}: ${request.about} not delivered after ${attempt} attempt(s): ${result.message}`, { webhook: request.name });
        return;
      }
      this.retriesTotal++;
      await sleep(backoffDelayMs(attempt, this.options.backoff ?? WEBHOOK_BACKOFF, this.options.random ?? Math.random, result.retryAfterSeconds));
    }
  }

  private async attempt(request: WebhookRequest): Promise<{ ok: true } | { ok: false; status: number | null; message: string; retryAfterSeconds: number | null }> {
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
        redirect: "error",
      });
      // The body is not needed; drain it so the connection is freed (a receiver may send a lot).
      await response.body?.cancel().catch(() => {});
      if (response.ok) return { ok: true };
      const retryAfter = Number(response.headers.get("retry-after"));
      return { ok: false, status: response.status, message: `HTTP ${response.status}`, retryAfterSeconds: Number.isFinite(retryAfter) && retryAfter > 0 ? retryAfter : null };
    } catch (error) {
      // fetch errors can quote the URL: say what happened, not where.
      const message = abort.signal.aborted ? `no answer within ${this.options.timeoutMs / 1000}s` : `connection failed (${(error as { cause?: { code?: string } }).cause?.code ?? (error as Error).name})`;
      return { ok: false, status: null, message, retryAfterSeconds: null };
    } finally {
      clearTimeout(timer);
    }
  }
}
