// What the agent does with a collector's Directive (docs/protocol.md): keeps the policy and the
// VM's status it carries (shown by `ws-lease status`), takes the cap on keep-running leases from
// the policy, applies the collector's decisions and grants to the leases (decided purely in
// lease/directive.ts) and audits and logs them, delivers the stop notice, its withdrawal and the
// welcome back, and hands schedule answers to their waiting requests. The leases themselves stay
// with the lease service (lease/service.ts), which serves the ws-lease socket; it lends them
// here through a LeaseBook.
import { type Directive, type EffectivePolicy, PolicyMode, type VmStatus, VmState } from "@ws/protocol";
import type { NoticeDelivery } from "../notice/delivery.js";
import type { WelcomeDelivery } from "../notice/welcome.js";
import type { Users } from "../users.js";
import type { AuditLog } from "./audit.js";
import { directiveOnLeases } from "./directive.js";
import { formatLeaseDuration } from "./format.js";
import { DEFAULT_MAX_KEEP_RUNNING_SECONDS, type Instant, type LeaseRecord } from "./leases.js";
import type { ScheduleRequests } from "./schedule.js";
import type { CapSource, ModeName, StateName, StatusView } from "./wire.js";

/** The service's side of a Directive: its leases, and what it does when they change. */
export interface LeaseBook {
  leases(): LeaseRecord[];
  users(): Users;
  /** The leases after the Directive, adopted before anything else is told of them. */
  adopt(leases: LeaseRecord[]): void;
  /** Something leases.json keeps changed: save it (in the background). */
  persist(): void;
  /** The Directive carried lease decisions: a `ws-lease take --wait` may have its answer. */
  decisionsArrived(): void;
}

export interface DirectiveHandlerOptions {
  audit: AuditLog;
  log: (line: string) => void;
  notifier: NoticeDelivery;
  welcome: WelcomeDelivery;
  schedules: ScheduleRequests;
  /** Leases were granted on someone's behalf: a good moment to send a Report. */
  onLeasesChanged?: (() => void) | undefined;
}

interface Received<T> {
  value: T;
  receivedAtMonoMs: number;
}

export class DirectiveHandler {
  /** The keep-running cap the collector's policy set (kept in leases.json); undefined: the default. */
  capFromPolicy: number | undefined;
  private policy: Received<EffectivePolicy> | undefined;
  private vmStatus: Received<VmStatus> | undefined;

  constructor(private readonly options: DirectiveHandlerOptions) {}

  cap(): { seconds: number; source: CapSource } {
    return this.capFromPolicy !== undefined
      ? { seconds: this.capFromPolicy, source: "policy" }
      : { seconds: DEFAULT_MAX_KEEP_RUNNING_SECONDS, source: "default" };
  }

  apply(directive: Directive, now: Instant, book: LeaseBook): void {
    const { audit, log } = this.options;
    let changed = false;
    if (directive.policy) {
      this.policy = { value: directive.policy, receivedAtMonoMs: now.monoMs };
      const cap = directive.policy.maxKeepRunningSeconds;
      if (Number.isFinite(cap) && cap > 0 && cap !== this.capFromPolicy) {
        this.capFromPolicy = cap;
        changed = true;
      }
    }
    const result = directiveOnLeases(book.leases(), directive, now, this.cap().seconds, book.users());
    book.adopt(result.leases);
    changed ||= result.changed;
    audit.record(result.decided, now.wallMs);
    for (const event of result.decided)
      log(`lease ${event.lease.id} of ${event.lease.user}: ${event.action}${event.detail ? ` (${event.detail})` : ""}`);
    if (result.granted.length > 0) {
      audit.record(
        result.granted.map((lease) => ({ action: "granted", lease, detail: "via keep-running link" })),
        now.wallMs,
      );
      for (const lease of result.granted)
        log(
          `lease ${lease.id} granted via link to ${lease.user} for ${formatLeaseDuration(lease.requestedSeconds)}: ${lease.reason}`,
        );
      this.options.onLeasesChanged?.();
    }
    if (directive.status) this.vmStatus = { value: directive.status, receivedAtMonoMs: now.monoMs };
    if (directive.notice) void this.options.notifier.deliver(directive.notice, now.monoMs);
    if (directive.noticeCleared) void this.options.notifier.clear(directive.noticeCleared);
    if (directive.welcome) void this.options.welcome.offer(directive.welcome);
    if (changed) book.persist();
    if (directive.leaseDecisions.length > 0) book.decisionsArrived();
    this.options.schedules.answered(directive);
  }

  /** Adds what the collector last said (the VM's state, the policy, a pending notice) to a status view. */
  addToStatus(view: StatusView, now: Instant): void {
    if (this.vmStatus) {
      const status = this.vmStatus.value;
      const elapsed = Math.max(0, (now.monoMs - this.vmStatus.receivedAtMonoMs) / 1000);
      const idle = status.activeSignals.length > 0 ? status.idleSeconds : status.idleSeconds + elapsed;
      view.vm = {
        state: stateName(status.state),
        idleSeconds: idle,
        activeSignals: [...status.activeSignals],
        explanation: status.explanation,
        mode: modeName(status.mode),
        ageSeconds: elapsed,
      };
      if (status.stopInSeconds !== undefined) {
        const stopIn = Math.max(0, status.stopInSeconds - elapsed);
        view.vm.stopInSeconds = stopIn;
        view.vm.stopAt = new Date(now.wallMs + stopIn * 1000).toISOString();
      }
    }
    if (this.policy) {
      const policy = this.policy.value;
      view.policy = {
        autostopEnabled: policy.autostopEnabled,
        mode: modeName(policy.mode),
        profile: policy.profile,
        idleTimeoutSeconds: policy.idleTimeoutSeconds,
        gracePeriodSeconds: policy.gracePeriodSeconds,
        maxKeepRunningSeconds: policy.maxKeepRunningSeconds,
      };
    }
    const notice = this.options.notifier.pending();
    if (notice) view.notice = { ...notice, stopAt: new Date(now.wallMs + notice.stopInSeconds * 1000).toISOString() };
  }

  /** Stops the deliveries (the welcome's wait, the notice's writers). */
  async close(): Promise<void> {
    this.options.welcome.close();
    await this.options.notifier.close();
  }
}

function stateName(state: VmState): StateName {
  switch (state) {
    case VmState.ACTIVE:
      return "Active";
    case VmState.STOPPING_PENDING:
      return "StoppingPending";
    case VmState.STOPPING:
      return "Stopping";
    case VmState.STOPPED:
      return "Stopped";
    case VmState.AGENT_LOST:
      return "AgentLost";
    default:
      return "Unknown";
  }
}

function modeName(mode: PolicyMode): ModeName {
  return mode === PolicyMode.ENFORCE ? "enforce" : mode === PolicyMode.OBSERVE ? "observe" : "unknown";
}
