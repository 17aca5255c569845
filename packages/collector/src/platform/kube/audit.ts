/**
 * What the collector leaves on a VM for people and for its own restarts: Kubernetes Events
 * (events.k8s.io/v1, `regarding` the VM, shown by `kubectl describe vm`) for notices, cancels,
 * stops, refused stops and bad policy; and annotations written by merge patch, only on
 * transitions: `<prefix>last-stop` (when, why, which signals, by whom), and the engine's `<prefix>state`/`last-active`/`notice-id`/`stop-deadline` (engine/persist.ts) and
 * `<prefix>last-active`, from which a restarted collector resumes its timers. The collector never
 * writes a VM's spec. Repeats of the same Event within a few minutes update the first one's
 * `series` count instead of piling up new objects, as client-go's recorder does.
 */
import { randomBytes } from "node:crypto";
import { PatchStrategy, V1MicroTime, setHeaderOptions } from "@kubernetes/client-node";
import {
  DEFAULT_BACKOFF,
  realSleep,
  retrying,
  type BackoffPolicy,
  type RetryLoop,
  type Sleep,
} from "../../lib/retry.js";
import { describeError, httpStatusOf, retryAfterMsOf, type KubeClients } from "./client.js";
import { EVENT_REASONS, type EventReason } from "../../engine/events.js";
import { DEFAULT_ANNOTATION_PREFIX } from "./safety.js";
import { formatLastStop, lastStopKey, type LastStop } from "../../loop/last-stop.js";

/** The VM an Event is about. */
export interface AuditTarget {
  namespace: string;
  name: string;
  uid: string;
}

export type AuditEventType = "Normal" | "Warning";

export interface AuditEvent {
  type: AuditEventType;
  /** One of engine/events.ts's EVENT_REASONS, e.g. IdleStopPending. */
  reason: EventReason;
  /** What the collector did or tried, e.g. Stop. */
  action: string;
  /** The explanation; cut to the API's 1 kB limit. */
  note: string;
}

/** The reasons the collector uses, with their Event types and action: the one list, engine/events.ts. */
export const AUDIT_REASONS = EVENT_REASONS;

export type AuditReason = EventReason;

/** An AuditEvent for one of AUDIT_REASONS (its first type unless `type` says which). */
export function auditEvent(reason: AuditReason, note: string, type?: AuditEventType): AuditEvent {
  const info = AUDIT_REASONS[reason];
  return { type: type ?? info.types[0], reason, action: info.action, note };
}

export interface AuditWriteResult {
  ok: boolean;
  /** Last HTTP status; null when no answer came. */
  status: number | null;
  attempts: number;
  message: string;
}

export const EVENT_NOTE_LIMIT_BYTES = 1024;

/** Cuts text to `maxBytes` of UTF-8 without splitting a character, marking the cut with "…". */
export function truncateUtf8(text: string, maxBytes: number = EVENT_NOTE_LIMIT_BYTES): string {
  if (Buffer.byteLength(text, "utf8") <= maxBytes) return text;
  const ellipsis = "…";
  const budget = maxBytes - Buffer.byteLength(ellipsis, "utf8");
  let out = "";
  let used = 0;
  for (const ch of text) {
    const size = Buffer.byteLength(ch, "utf8");
    if (used + size > budget) break;
    out += ch;
    used += size;
  }
  return out + ellipsis;
}

/** `<prefix>last-stop` as JSON (loop/last-stop.ts: the record's one shape). */
export function lastStopAnnotations(prefix: string, stop: LastStop): Record<string, string> {
  return { [lastStopKey(prefix)]: formatLastStop(stop) };
}

export interface KubeAuditOptions {
  /** The collector's pod name: Events' reportingInstance and last-stop's "by". */
  reportingInstance: string;
  reportingController?: string;
  annotationPrefix?: string;
  /** Wall clock (ms since the epoch) for event times and series. */
  nowMs: () => number;
  /** Repeats of one Event within this window update its series count (default 6 min). */
  seriesWindowMs?: number;
  maxAttempts?: number;
  backoff?: BackoffPolicy;
  random?: () => number;
  sleep?: Sleep;
}

interface SeriesEntry {
  eventName: string;
  count: number;
  lastMs: number;
}

const MAX_SERIES_ENTRIES = 4096;

export class KubeAudit {
  readonly prefix: string;
  private readonly controller: string;
  private readonly seriesWindowMs: number;
  /**
   * A 409 is final: a create's name is taken (the name carries time and randomness, so it is
   * not this write's to take), and a merge patch carries no resourceVersion to conflict on.
   */
  private readonly loop: RetryLoop;
  private readonly series = new Map<string, SeriesEntry>();

  constructor(
    private readonly clients: KubeClients,
    private readonly options: KubeAuditOptions,
  ) {
    this.prefix = options.annotationPrefix ?? DEFAULT_ANNOTATION_PREFIX;
    this.controller = options.reportingController ?? "ws-collector";
    this.seriesWindowMs = options.seriesWindowMs ?? 6 * 60_000;
    this.loop = {
      maxAttempts: options.maxAttempts ?? 3,
      backoff: options.backoff ?? DEFAULT_BACKOFF,
      random: options.random ?? Math.random,
      sleep: options.sleep ?? realSleep,
      conflict: "final",
    };
  }

  /** Creates an Event on the VM, or bumps the series of an identical recent one. Never rejects. */
  async recordEvent(target: AuditTarget, event: AuditEvent): Promise<AuditWriteResult> {
    const now = this.options.nowMs();
    const note = truncateUtf8(event.note);
    const key = [target.namespace, target.name, target.uid, event.type, event.reason, event.action, note].join(
      "\u0000",
    );
    const previous = this.series.get(key);
    if (previous && now - previous.lastMs <= this.seriesWindowMs) {
      const count = previous.count + 1;
      const patched = await this.withRetries(() =>
        this.clients.events.patchNamespacedEvent(
          {
            namespace: target.namespace,
            name: previous.eventName,
            body: { series: { count, lastObservedTime: new V1MicroTime(now) } },
          },
          setHeaderOptions("Content-Type", PatchStrategy.MergePatch),
        ),
      );
      if (patched.ok) {
        this.series.set(key, { ...previous, count, lastMs: now });
        return patched;
      }
      if (patched.status !== 404) return patched;
      // The Event expired (the apiserver keeps them about an hour): start a new one.
    }
    // Time first (Events sort by name in listings), then randomness: replicas and restarts share no counter.
    const name = `${target.name}.${now.toString(16)}${randomBytes(4).toString("hex")}`;
    const created = await this.withRetries(() =>
      this.clients.events.createNamespacedEvent({
        namespace: target.namespace,
        body: {
          metadata: { name, namespace: target.namespace },
          eventTime: new V1MicroTime(now),
          reportingController: this.controller,
          reportingInstance: this.options.reportingInstance,
          action: event.action,
          reason: event.reason,
          type: event.type,
          note,
          regarding: {
            apiVersion: "kubevirt.io/v1",
            kind: "VirtualMachine",
            namespace: target.namespace,
            name: target.name,
            uid: target.uid,
          },
        },
      }),
    );
    if (created.ok) {
      if (this.series.size >= MAX_SERIES_ENTRIES) this.forgetOldestSeries();
      this.series.set(key, { eventName: name, count: 1, lastMs: now });
    }
    return created;
  }

  /** Merge-patches annotations on the VM (null removes one). Only metadata.annotations is sent. */
  async patchAnnotations(
    target: { namespace: string; name: string },
    annotations: Record<string, string | null>,
  ): Promise<AuditWriteResult> {
    return this.withRetries(() =>
      this.clients.custom.patchNamespacedCustomObject(
        {
          group: "kubevirt.io",
          version: "v1",
          namespace: target.namespace,
          plural: "virtualmachines",
          name: target.name,
          body: { metadata: { annotations } },
        },
        setHeaderOptions("Content-Type", PatchStrategy.MergePatch),
      ),
    );
  }

  recordLastStop(
    target: { namespace: string; name: string },
    stop: Omit<LastStop, "by"> & { by?: string },
  ): Promise<AuditWriteResult> {
    return this.patchAnnotations(
      target,
      lastStopAnnotations(this.prefix, { ...stop, by: stop.by ?? this.options.reportingInstance }),
    );
  }

  private forgetOldestSeries(): void {
    let oldestKey: string | undefined;
    let oldest = Infinity;
    for (const [k, v] of this.series) {
      if (v.lastMs < oldest) {
        oldest = v.lastMs;
        oldestKey = k;
      }
    }
    if (oldestKey !== undefined) this.series.delete(oldestKey);
  }

  private async withRetries(write: () => Promise<unknown>): Promise<AuditWriteResult> {
    const outcome = await retrying(this.loop, async () => {
      try {
        await write();
        return { done: true };
      } catch (err) {
        return {
          failed: { status: httpStatusOf(err), message: describeError(err), retryAfterMs: retryAfterMsOf(err) },
        };
      }
    });
    if ("done" in outcome) return { ok: true, status: 200, attempts: outcome.attempts, message: "written" };
    const { status, message } = outcome.failed;
    return {
      ok: false,
      status,
      attempts: outcome.attempts,
      message: outcome.retryable ? `gave up after ${outcome.attempts} attempts: ${message}` : message,
    };
  }
}
