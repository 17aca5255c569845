/**
 * List, then watch from the list's resourceVersion, forever: what client-go's reflector does,
 * on client-node's Watch. A closed watch resumes from the last resourceVersion seen (bookmarks
 * included); 410 Expired (too old, after compaction) relists; errors back off with jitter; a
 * watch that goes silent past its timeout is abandoned and restarted.
 */
import type { Watch } from "@kubernetes/client-node";
import { DEFAULT_BACKOFF, backoffDelayMs, realSleep, type BackoffPolicy, type Sleep } from "../../lib/retry.js";
import { describeError, httpStatusOf } from "./client.js";

export type WatchEventType = "ADDED" | "MODIFIED" | "DELETED";

export interface ListWatchSource {
  /** The collection's API path, e.g. /apis/kubevirt.io/v1/virtualmachines. */
  path: string;
  labelSelector?: string;
  /** A full list through the typed client; its resourceVersion starts the watch. */
  list(): Promise<{ items: unknown[]; resourceVersion: string }>;
}

export interface ListWatchHandler {
  /** The complete current set, after the first list and after every relist. */
  replace(items: unknown[]): void;
  event(type: WatchEventType, object: unknown): void;
}

export interface ListWatchOptions {
  watch: Watch;
  /** Asks the server to end each watch after this long (default 300 s); the watcher then resumes. */
  watchTimeoutSeconds?: number;
  backoff?: BackoffPolicy;
  random?: () => number;
  sleep?: Sleep;
  onError?: (message: string) => void;
}

type WatchOutcome = { kind: "closed"; events: number } | { kind: "expired" } | { kind: "failed"; message: string };

export interface ListWatchStats {
  lists: number;
  watches: number;
  expired: number;
  errors: number;
}

export class ListWatcher {
  readonly stats: ListWatchStats = { lists: 0, watches: 0, expired: 0, errors: 0 };
  private resourceVersion: string | null = null;
  private stopped = false;
  private abortCurrent: (() => void) | null = null;
  private readonly timeoutSeconds: number;
  private readonly backoff: BackoffPolicy;
  private readonly random: () => number;
  private readonly sleep: Sleep;
  private loopDone: Promise<void> | null = null;

  constructor(
    private readonly source: ListWatchSource,
    private readonly handler: ListWatchHandler,
    private readonly options: ListWatchOptions,
  ) {
    this.timeoutSeconds = options.watchTimeoutSeconds ?? 300;
    this.backoff = options.backoff ?? DEFAULT_BACKOFF;
    this.random = options.random ?? Math.random;
    this.sleep = options.sleep ?? realSleep;
  }

  /** Starts the loop; resolves after the first successful list (errors before it are retried). */
  start(): Promise<void> {
    return new Promise((resolveSynced) => {
      this.loopDone = this.loop(resolveSynced);
    });
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.abortCurrent?.();
    this.wakeUp();
    await this.loopDone;
  }

  private wakeUp: () => void = () => {};

  /** A backoff pause that stop() cuts short. */
  private pause(ms: number): Promise<void> {
    return new Promise((resolve) => {
      this.wakeUp = resolve;
      this.sleep(ms).then(resolve, resolve);
    });
  }

  private report(message: string): void {
    this.stats.errors++;
    try {
      this.options.onError?.(`${this.source.path}: ${message}`);
    } catch {
      // A failing logger must not stop the watch.
    }
  }

  private async loop(synced: () => void): Promise<void> {
    let failures = 0;
    while (!this.stopped) {
      let outcome: WatchOutcome;
      try {
        if (this.resourceVersion === null) {
          if (!(await this.relist())) break;
          synced();
        }
        outcome = await this.watchOnce();
      } catch (err) {
        outcome = { kind: "failed", message: describeError(err) };
      }
      if (this.stopped) break;
      if (outcome.kind === "expired") {
        this.stats.expired++;
        this.resourceVersion = null;
        failures = 0;
        continue;
      }
      if (outcome.kind === "closed" && outcome.events > 0) {
        failures = 0;
        continue;
      }
      // An error, or a watch that ended without delivering anything: wait before the next try,
      // so a server that closes every watch at once is not hammered.
      failures++;
      if (outcome.kind === "failed") this.report(outcome.message);
      await this.pause(backoffDelayMs(failures, this.backoff, this.random));
    }
  }

  /**
   * Lists and replaces the handler's view; false when stopped meanwhile. A method of its own so
   * that the list response (every object in full: at 10k VMs, hundreds of MiB) is garbage once
   * the handler has taken its facts: held in the loop's frame, it stayed alive across every
   * watch the loop then awaited.
   */
  private async relist(): Promise<boolean> {
    const listed = await this.source.list();
    if (this.stopped) return false;
    this.stats.lists++;
    this.handler.replace(listed.items);
    this.resourceVersion = listed.resourceVersion;
    return true;
  }

  private watchOnce(): Promise<WatchOutcome> {
    return new Promise((resolve) => {
      let events = 0;
      let expired = false;
      let errorMessage: string | null = null;
      let settled = false;
      let controller: AbortController | null = null;
      let abandoned = false;
      const silenceLimitMs = (this.timeoutSeconds + 30) * 1000;
      let watchdog: NodeJS.Timeout | undefined;
      const abort = () => {
        abandoned = true;
        controller?.abort();
      };
      const armWatchdog = () => {
        clearTimeout(watchdog);
        watchdog = setTimeout(() => {
          errorMessage = `watch silent for ${silenceLimitMs / 1000} s, restarting`;
          abort();
          finish(null);
        }, silenceLimitMs);
        watchdog.unref?.();
      };
      const finish = (err: unknown) => {
        if (settled) return;
        settled = true;
        clearTimeout(watchdog);
        this.abortCurrent = null;
        if (expired || httpStatusOf(err) === 410) resolve({ kind: "expired" });
        else if (errorMessage !== null) resolve({ kind: "failed", message: errorMessage });
        else if (err && !(abandoned || this.stopped)) resolve({ kind: "failed", message: describeError(err) });
        else resolve({ kind: "closed", events });
      };
      this.abortCurrent = () => {
        abort();
        finish(null);
      };
      const onEvent = (type: string, object: unknown) => {
        if (settled) return;
        armWatchdog();
        try {
          if (type === "ERROR") {
            const status = object as { code?: unknown; message?: unknown };
            if (status.code === 410) expired = true;
            else errorMessage = `watch error ${String(status.code)}: ${String(status.message)}`;
            return;
          }
          const rv = (object as { metadata?: { resourceVersion?: unknown } }).metadata?.resourceVersion;
          if (typeof rv === "string" && rv !== "") this.resourceVersion = rv;
          events++;
          if (type === "ADDED" || type === "MODIFIED" || type === "DELETED") this.handler.event(type, object);
        } catch (err) {
          // client-node swallows exceptions from this callback; surface them instead.
          this.report(`handling ${type}: ${describeError(err)}`);
        }
      };
      this.stats.watches++;
      armWatchdog();
      const query: Record<string, string | number | boolean> = {
        resourceVersion: this.resourceVersion ?? "",
        allowWatchBookmarks: true,
        timeoutSeconds: this.timeoutSeconds,
      };
      if (this.source.labelSelector) query["labelSelector"] = this.source.labelSelector;
      this.options.watch.watch(this.source.path, query, onEvent, finish).then(
        (c) => {
          controller = c;
          if (settled || this.stopped) c.abort();
        },
        (err: unknown) => finish(err),
      );
    });
  }
}
