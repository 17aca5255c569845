/**
 * Leader election on a coordination.k8s.io/v1 Lease (client-node has none), after client-go's
 * leaderelection package: a candidate takes the Lease when it is absent, released, or not renewed
 * for its leaseDuration *as observed on this replica's own clock* (no cross-node clock
 * comparison); every write carries the resourceVersion it read, so two candidates can never
 * both win (the loser gets 409 and reads again). The leader renews every renewInterval and steps
 * down the moment it has gone renewDeadline without a successful renew, or sees another holder.
 * Since renewDeadline < leaseDuration, a new leader can only start after the old one stopped.
 */
import { V1MicroTime, type V1Lease } from "@kubernetes/client-node";
import { describeError, httpStatusOf, type KubeClients } from "./client.js";

export interface ElectionTimers {
  setTimeout(callback: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

const systemTimers: ElectionTimers = {
  setTimeout: (callback, ms) => {
    const handle = setTimeout(callback, ms);
    handle.unref?.();
    return handle;
  },
  clearTimeout: (handle) => clearTimeout(handle as NodeJS.Timeout),
};

export interface LeaderElectorOptions {
  namespace: string;
  leaseName: string;
  /** This replica's name (its pod name): the Lease's holderIdentity. */
  identity: string;
  /** How long a Lease stays valid without renewal (default 15 s). */
  leaseDurationMs?: number;
  /** A leader that has not renewed for this long stops leading (default 10 s; < leaseDurationMs). */
  renewDeadlineMs?: number;
  /** Time between renewals while leading (default renewDeadlineMs / 2). */
  renewIntervalMs?: number;
  /** Time between tries while not leading, and after a failed renewal (default 2 s, jittered up to +20 %). */
  retryPeriodMs?: number;
  /** Wall clock, ms since the epoch. */
  nowMs: () => number;
  timers?: ElectionTimers;
  random?: () => number;
  onStartedLeading?: () => void;
  /** Called once when leadership ends, with why. Stop acting on the cluster at once. */
  onStoppedLeading?: (reason: string) => void;
  /** The observed leader changed (null: nobody). */
  onNewLeader?: (identity: string | null) => void;
  /** Every successful take or renewal, with the time its round started (what the renew deadline counts from). */
  onRenewed?: (atMs: number) => void;
  onError?: (message: string) => void;
}

interface Observed {
  holder: string;
  renewTime: string;
  resourceVersion: string;
}

function timeText(value: unknown): string {
  if (value instanceof Date) return value.toISOString();
  return typeof value === "string" ? value : "";
}

export class LeaderElector {
  private readonly leaseDurationMs: number;
  private readonly renewDeadlineMs: number;
  private readonly renewIntervalMs: number;
  private readonly retryPeriodMs: number;
  private readonly timers: ElectionTimers;
  private readonly random: () => number;
  private leading = false;
  private lastRenewMs = 0;
  private observed: Observed | null = null;
  private observedAtMs = 0;
  private leader: string | null = null;
  private running = false;
  private loopHandle: unknown = null;
  private deadlineHandle: unknown = null;
  private current: Promise<number> | null = null;
  /** The Lease as this replica last wrote or read it while holding it: what a direct renewal replaces. */
  private ownLease: { resourceVersion: string; acquireTime: string; leaseTransitions: number } | null = null;

  constructor(
    private readonly clients: KubeClients,
    private readonly options: LeaderElectorOptions,
  ) {
    this.leaseDurationMs = options.leaseDurationMs ?? 15_000;
    this.renewDeadlineMs = options.renewDeadlineMs ?? 10_000;
    this.renewIntervalMs = options.renewIntervalMs ?? Math.floor(this.renewDeadlineMs / 2);
    this.retryPeriodMs = options.retryPeriodMs ?? 2_000;
    this.timers = options.timers ?? systemTimers;
    this.random = options.random ?? Math.random;
    if (!options.identity) throw new Error("leader election needs an identity (the pod name)");
    if (!(this.renewDeadlineMs < this.leaseDurationMs))
      throw new Error("renewDeadline must be shorter than leaseDuration");
    if (!(this.renewIntervalMs < this.renewDeadlineMs))
      throw new Error("renewInterval must be shorter than renewDeadline");
    if (!(this.retryPeriodMs < this.renewDeadlineMs)) throw new Error("retryPeriod must be shorter than renewDeadline");
  }

  /** Leading right now: false as soon as the renew deadline has passed, even mid-request. */
  isLeader(): boolean {
    this.enforceDeadline();
    return this.leading;
  }

  /** The holder this replica last saw (itself when leading). */
  currentLeader(): string | null {
    return this.leader;
  }

  start(): void {
    if (this.running) return;
    this.running = true;
    this.schedule(0);
  }

  /** Stops campaigning; with `release`, a leader hands the Lease back so another replica takes over at once. */
  async stop(options: { release?: boolean } = {}): Promise<void> {
    this.running = false;
    if (this.loopHandle !== null) this.timers.clearTimeout(this.loopHandle);
    this.loopHandle = null;
    await this.current?.catch(() => 0);
    if (this.leading && options.release) await this.release();
    this.stepDown("elector stopped");
  }

  /**
   * One round: read the Lease, then take or renew it if allowed. Returns the ms until the next
   * round. Never rejects. start() runs this on timers; tests may call it directly.
   */
  step(): Promise<number> {
    const run = this.round().catch((err: unknown) => {
      this.report(`election round failed: ${describeError(err)}`);
      return this.retryDelay();
    });
    this.current = run;
    return run;
  }

  private async round(): Promise<number> {
    const startedMs = this.options.nowMs();
    const won = await this.tryAcquireOrRenew(startedMs);
    if (won) {
      this.lastRenewMs = startedMs;
      this.safely(() => this.options.onRenewed?.(startedMs));
      if (!this.leading) {
        this.leading = true;
        this.setLeader(this.options.identity);
        this.safely(() => this.options.onStartedLeading?.());
      }
      this.armDeadline();
      return this.renewIntervalMs;
    }
    if (this.leading) {
      if (this.leader !== null && this.leader !== this.options.identity) {
        this.stepDown(`lease ${this.options.namespace}/${this.options.leaseName} is now held by ${this.leader}`);
      } else {
        this.enforceDeadline();
      }
      if (this.leading) return this.retryPeriodMs;
    }
    return this.retryDelay();
  }

  private retryDelay(): number {
    return Math.round(this.retryPeriodMs * (1 + 0.2 * Math.min(1, Math.max(0, this.random()))));
  }

  /**
   * A leader renews with one request: a replace guarded by the resourceVersion of its own last
   * write. Under a loaded event loop every request is another wait in the queue, so the usual
   * read-then-replace costs the renewal twice the turns. Any failure (409: someone else wrote)
   * falls back to the full read in the same round.
   */
  private async renewDirectly(nowMs: number): Promise<boolean | undefined> {
    const { namespace, leaseName: name, identity } = this.options;
    const own = this.ownLease;
    if (
      !this.leading ||
      !own ||
      this.observed?.holder !== identity ||
      this.observed.resourceVersion !== own.resourceVersion
    )
      return undefined;
    try {
      const updated = await this.clients.coordination.replaceNamespacedLease({
        namespace,
        name,
        body: {
          metadata: { name, namespace, resourceVersion: own.resourceVersion },
          spec: {
            holderIdentity: identity,
            leaseDurationSeconds: Math.ceil(this.leaseDurationMs / 1000),
            acquireTime: new V1MicroTime(own.acquireTime),
            renewTime: new V1MicroTime(nowMs),
            leaseTransitions: own.leaseTransitions,
          },
        },
      });
      this.observe(updated, nowMs);
      return true;
    } catch (err) {
      if (httpStatusOf(err) !== 409) this.report(`renewing lease ${namespace}/${name}: ${describeError(err)}`);
      return undefined;
    }
  }

  private async tryAcquireOrRenew(nowMs: number): Promise<boolean> {
    const direct = await this.renewDirectly(nowMs);
    if (direct !== undefined) return direct;
    const { namespace, leaseName: name, identity } = this.options;
    const durationSeconds = Math.ceil(this.leaseDurationMs / 1000);
    let lease: V1Lease;
    try {
      lease = await this.clients.coordination.readNamespacedLease({ namespace, name });
    } catch (err) {
      if (httpStatusOf(err) !== 404) {
        this.report(`reading lease ${namespace}/${name}: ${describeError(err)}`);
        return false;
      }
      try {
        const created = await this.clients.coordination.createNamespacedLease({
          namespace,
          body: {
            metadata: { name, namespace },
            spec: {
              holderIdentity: identity,
              leaseDurationSeconds: durationSeconds,
              acquireTime: new V1MicroTime(nowMs),
              renewTime: new V1MicroTime(nowMs),
              leaseTransitions: 0,
            },
          },
        });
        this.observe(created, nowMs);
        return true;
      } catch (createErr) {
        if (httpStatusOf(createErr) !== 409)
          this.report(`creating lease ${namespace}/${name}: ${describeError(createErr)}`);
        return false;
      }
    }
    this.observe(lease, nowMs);
    const spec = lease.spec ?? {};
    const holder = spec.holderIdentity ?? "";
    const heldFor = (spec.leaseDurationSeconds ?? durationSeconds) * 1000;
    if (holder !== "" && holder !== identity && this.observedAtMs + heldFor > nowMs) return false;
    const keepsIt = holder === identity;
    try {
      const updated = await this.clients.coordination.replaceNamespacedLease({
        namespace,
        name,
        body: {
          metadata: { name, namespace, resourceVersion: lease.metadata?.resourceVersion ?? "" },
          spec: {
            holderIdentity: identity,
            leaseDurationSeconds: durationSeconds,
            acquireTime:
              keepsIt && spec.acquireTime ? new V1MicroTime(timeText(spec.acquireTime)) : new V1MicroTime(nowMs),
            renewTime: new V1MicroTime(nowMs),
            leaseTransitions: (spec.leaseTransitions ?? 0) + (keepsIt ? 0 : 1),
          },
        },
      });
      this.observe(updated, nowMs);
      return true;
    } catch (err) {
      // 409: another replica wrote in between; the next round reads its record.
      if (httpStatusOf(err) !== 409) this.report(`updating lease ${namespace}/${name}: ${describeError(err)}`);
      return false;
    }
  }

  private observe(lease: V1Lease, nowMs: number): void {
    const spec = lease.spec ?? {};
    this.ownLease =
      spec.holderIdentity === this.options.identity && lease.metadata?.resourceVersion
        ? {
            resourceVersion: lease.metadata.resourceVersion,
            acquireTime: timeText(spec.acquireTime) || new Date(nowMs).toISOString(),
            leaseTransitions: spec.leaseTransitions ?? 0,
          }
        : null;
    const next: Observed = {
      holder: lease.spec?.holderIdentity ?? "",
      renewTime: timeText(lease.spec?.renewTime),
      resourceVersion: lease.metadata?.resourceVersion ?? "",
    };
    const o = this.observed;
    if (
      !o ||
      o.holder !== next.holder ||
      o.renewTime !== next.renewTime ||
      o.resourceVersion !== next.resourceVersion
    ) {
      this.observed = next;
      this.observedAtMs = nowMs;
    }
    this.setLeader(next.holder === "" ? null : next.holder);
  }

  private setLeader(identity: string | null): void {
    if (identity === this.leader) return;
    this.leader = identity;
    this.safely(() => this.options.onNewLeader?.(identity));
  }

  private armDeadline(): void {
    if (this.deadlineHandle !== null) this.timers.clearTimeout(this.deadlineHandle);
    const remaining = Math.max(0, this.lastRenewMs + this.renewDeadlineMs - this.options.nowMs());
    this.deadlineHandle = this.timers.setTimeout(() => {
      this.deadlineHandle = null;
      this.enforceDeadline();
    }, remaining);
  }

  private enforceDeadline(): void {
    if (this.leading && this.options.nowMs() - this.lastRenewMs >= this.renewDeadlineMs) {
      this.stepDown(`no successful renewal within ${this.renewDeadlineMs} ms`);
    }
  }

  private stepDown(reason: string): void {
    if (this.deadlineHandle !== null) this.timers.clearTimeout(this.deadlineHandle);
    this.deadlineHandle = null;
    if (!this.leading) return;
    this.leading = false;
    if (this.leader === this.options.identity) this.setLeader(null);
    this.safely(() => this.options.onStoppedLeading?.(reason));
  }

  private async release(): Promise<void> {
    const { namespace, leaseName: name, identity } = this.options;
    try {
      const lease = await this.clients.coordination.readNamespacedLease({ namespace, name });
      if (lease.spec?.holderIdentity !== identity) return;
      const now = new V1MicroTime(this.options.nowMs());
      await this.clients.coordination.replaceNamespacedLease({
        namespace,
        name,
        body: {
          metadata: { name, namespace, resourceVersion: lease.metadata?.resourceVersion ?? "" },
          spec: {
            leaseDurationSeconds: 1,
            acquireTime: now,
            renewTime: now,
            leaseTransitions: lease.spec?.leaseTransitions ?? 0,
          },
        },
      });
    } catch (err) {
      this.report(`releasing lease ${namespace}/${name}: ${describeError(err)}`);
    }
  }

  private schedule(ms: number): void {
    this.loopHandle = this.timers.setTimeout(() => {
      this.loopHandle = null;
      if (!this.running) return;
      void this.step().then((next) => {
        if (this.running) this.schedule(next);
      });
    }, ms);
  }

  private report(message: string): void {
    reportElectionError(this.options.onError, message);
  }

  private safely(callback: () => void): void {
    runElectionCallback(this.options.onError, callback);
  }
}

/** Tells the election's error hook; a broken logger must not break the election. */
export function reportElectionError(onError: ((message: string) => void) | undefined, message: string): void {
  try {
    onError?.(message);
  } catch {
    // nothing more to tell
  }
}

/** Runs one of the election's callbacks; its failure is reported, never thrown into the election. */
export function runElectionCallback(onError: ((message: string) => void) | undefined, callback: () => void): void {
  try {
    callback();
  } catch (err) {
    reportElectionError(onError, `election callback failed: ${describeError(err)}`);
  }
}
