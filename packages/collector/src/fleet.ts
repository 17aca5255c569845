// The collector's per-VM bookkeeping: feeds observations to the pure engine,
// executes the actions it returns, and answers agents with Directives.
import * as grpc from "@grpc/grpc-js";
import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { DirectiveSchema, PolicyMode, SourceState, type Directive, type Report } from "@ws/protocol";
import type { AgentSession, AgentSink, AuthResult, Logger, VmKey } from "./agents/server.js";
import { vmId } from "./agents/server.js";
import { decide } from "./engine/decide.js";
import { resolveVmPolicy, type PolicySource } from "./policy-source.js";
import { toEffectivePolicy } from "./engine/policy.js";
import { statusFor } from "./engine/status.js";
import type { Action, Decision, Explanation, Policy, PolicyError, PolicyFallback, ReceivedReport, StopResult, StopTrigger, VmRecord } from "./engine/types.js";
import type { TraceInput } from "./replay/recorder.js";
import type { CollectorStats } from "./stats.js";
import type { FleetCounters, FleetReader, VmDetail, VmView } from "./view.js";
import type { GrantOutcome, KeepContext, KeepGranter, LinkGrant } from "./keeplink/grant.js";
import type { FleetObserver } from "./notify/outreach.js";
import { randomBytes } from "node:crypto";
import { readingsFromReport } from "./whatif/readings.js";

export interface Actuator {
  /** Carries out a stop; resolves with what happened (never rejects). */
  stop(vm: VmKey, reason: string, evidence?: StopEvidence): Promise<StopResult>;
  event(vm: VmKey, type: "Normal" | "Warning", reason: string, message: string): void;
  persist(vm: VmKey, values: Extract<Action, { kind: "persist" }>["values"]): void;
}

/** What a stop was decided on (the engine's explanation of that decision), for its audit record. */
export interface StopEvidence {
  trigger: StopTrigger;
  explanation: Explanation | undefined;
}

export interface FleetOptions {
  log: Logger;
  nowMs: () => number;
  actuator: Actuator;
  authenticate: (vm: VmKey, token: string, peer: string) => Promise<AuthResult> | AuthResult;
  /** Labels and annotations that select each VM's policy (standalone: from the config file). */
  policySource: PolicySource;
  stats?: CollectorStats;
  /** The record a restarted collector resumes from (Kubernetes: the VM's annotations). */
  restore?: (vm: VmKey, nowMs: number) => VmRecord | undefined;
  /** Whether the VM is running, when the platform can tell (Kubernetes); undefined in standalone. */
  vmRunning?: (vm: VmKey) => boolean | undefined;
  /** False while this replica must not act (not the leader): decisions wait, nothing is executed. */
  acting?: () => boolean;
  /** Called with every input the engine sees, for --record-trace. */
  record?: (event: TraceInput) => void;
  /** Outreach hook (issue 17): history, webhooks, keep-running links. Absent: none of them. */
  observer?: FleetObserver;
}

export type { TraceInput };

interface VmEntry {
  key: VmKey;
  session?: AgentSession;
  latest?: ReceivedReport;
  record?: VmRecord;
  policy: Policy;
  lastValidPolicy?: Policy;
  policyErrors: PolicyError[];
  fallback: PolicyFallback;
  pendingStopResult?: StopResult;
  stopInFlight: boolean;
  agentVersion: string;
  peer: string;
  lastDecision?: Decision;
  knownLeases: Set<string>;
}

const SIGNAL_FAMILIES = ["tty", "jupyter", "code-server", "gpu", "background", "lease", "inhibitor"] as const;
function familyOf(signal: string): (typeof SIGNAL_FAMILIES)[number] | undefined {
  if (signal.startsWith("tty")) return "tty";
  if (signal.startsWith("jupyter")) return "jupyter";
  if (signal === "code-server") return "code-server";
  if (signal === "gpu") return "gpu";
  if (["cpu", "user-cpu", "network", "disk"].includes(signal)) return "background";
  if (signal === "lease") return "lease";
  if (signal === "inhibitor") return "inhibitor";
  return undefined;
}

export class Fleet implements AgentSink, FleetReader, KeepGranter {
  private readonly vms = new Map<string, VmEntry>();
  private readonly counterValues: FleetCounters = { stops: new Map(), notices: 0, stopsCancelled: 0, leasesGranted: 0, policyErrors: 0 };
  private timer: NodeJS.Timeout | undefined;

  constructor(private readonly options: FleetOptions) {}

  start(tickSeconds: number): void {
    this.timer = setInterval(() => this.tick(), tickSeconds * 1000);
    this.timer.unref?.();
  }

  stopTicking(): void {
    clearInterval(this.timer);
  }

  /** Re-evaluates every VM: timers (idle timeout, grace, agent lost) fire here between reports. */
  tick(): void {
    if (this.options.acting && !this.options.acting()) return;
    const now = this.options.nowMs();
    for (const entry of this.vms.values()) this.evaluate(entry, now);
  }

  /** Starts tracking a VM before its agent connects (Kubernetes inventory), or refreshes its policy. */
  track(vm: VmKey): void {
    const known = this.vms.get(vmId(vm));
    const entry = this.entryFor(vm);
    if (known) this.applyPolicy(entry);
    if (!this.options.acting || this.options.acting()) this.evaluate(entry, this.options.nowMs());
  }

  /** Forgets every record so they are restored again (a replica that just became leader). */
  resetRecords(): void {
    for (const entry of this.vms.values()) entry.record = undefined;
  }

  closeAllSessions(code: grpc.status, details: string): void {
    for (const entry of this.vms.values()) entry.session?.close(code, details);
  }

  authenticate(vm: VmKey, token: string, peer: string): Promise<AuthResult> | AuthResult {
    return this.options.authenticate(vm, token, peer);
  }

  connected(session: AgentSession): void {
    const entry = this.entryFor(session.vm);
    entry.session = session;
    entry.agentVersion = session.hello.agentVersion;
    entry.peer = session.peer;
    const now = this.options.nowMs();
    this.options.record?.({ atMs: now, vm: vmId(session.vm), event: "agent-connected" });
    session.send(create(DirectiveSchema, { reportIntervalSeconds: entry.policy.reportIntervalSeconds, policy: toEffectivePolicy(entry.policy) }));
    this.evaluate(entry, now);
  }

  report(session: AgentSession, report: Report, receivedAtMs: number): void {
    const entry = this.entryFor(session.vm);
    if (entry.session !== session) return;
    entry.latest = { report, receivedAtMs };
    this.options.record?.({ atMs: receivedAtMs, vm: vmId(session.vm), report });
    this.evaluate(entry, receivedAtMs, true);
  }

  disconnected(session: AgentSession): void {
    const entry = this.vms.get(vmId(session.vm));
    if (!entry || entry.session !== session) return;
    entry.session = undefined;
    const now = this.options.nowMs();
    this.options.record?.({ atMs: now, vm: vmId(session.vm), event: "agent-disconnected" });
    this.evaluate(entry, now);
  }

  /** Forget a VM that no longer exists (its series go away with it). */
  remove(vm: VmKey): void {
    const entry = this.vms.get(vmId(vm));
    entry?.session?.close(grpc.status.NOT_FOUND, "the VM no longer exists");
    this.vms.delete(vmId(vm));
    this.options.observer?.forget(vm); // outreach hook
  }

  counters(): FleetCounters {
    return this.counterValues;
  }

  views(nowMs: number): VmView[] {
    return [...this.vms.values()].sort((a, b) => vmId(a.key).localeCompare(vmId(b.key))).map((entry) => this.viewOf(entry, nowMs));
  }

  private entryFor(vm: VmKey): VmEntry {
    let entry = this.vms.get(vmId(vm));
    if (!entry) {
      entry = {
        key: vm,
        policy: undefined as unknown as Policy,
        policyErrors: [],
        fallback: "none",
        stopInFlight: false,
        agentVersion: "",
        peer: "",
        knownLeases: new Set(),
      };
      this.applyPolicy(entry);
      this.vms.set(vmId(vm), entry);
    }
    return entry;
  }

  private applyPolicy(entry: VmEntry): void {
    const resolved = resolveVmPolicy(this.options.policySource, entry.key, entry.lastValidPolicy);
    const errorsChanged = JSON.stringify(resolved.errors) !== JSON.stringify(entry.policyErrors);
    entry.policy = resolved.policy;
    entry.lastValidPolicy = resolved.lastValid ?? entry.lastValidPolicy;
    entry.policyErrors = resolved.errors;
    entry.fallback = resolved.fallback;
    if (errorsChanged && resolved.errors.length > 0) {
      this.counterValues.policyErrors += resolved.errors.length;
      this.options.log("warn", `invalid policy for ${vmId(entry.key)}; keeping ${resolved.fallback}`, {
        vm: vmId(entry.key),
        errors: resolved.errors.map((e) => `${e.key}: ${e.message}`).join("; "),
      });
    }
  }

  private evaluate(entry: VmEntry, now: number, fromReport = false): void {
    // A replica that is not (or no longer) the leader decides nothing: a stream closing as it
    // steps down, or a stop finishing after it lost the Lease, must not act on the VM.
    if (this.options.acting && !this.options.acting()) return;
    if (entry.record === undefined && this.options.restore) entry.record = this.options.restore(entry.key, now);
    const began = performance.now();
    const vmRunning = this.options.vmRunning?.(entry.key);
    const decision = decide(
      now,
      entry.policy,
      {
        ...(entry.latest ? { latestReport: entry.latest } : {}),
        agentConnected: entry.session !== undefined,
        ...(vmRunning !== undefined ? { vmRunning } : {}),
        ...(entry.pendingStopResult ? { stopResult: entry.pendingStopResult } : {}),
        ...(entry.policyErrors.length ? { policyStatus: { errors: entry.policyErrors, fallback: entry.fallback } } : {}),
      },
      entry.record,
    );
    this.options.stats?.observeDecision((performance.now() - began) / 1000);
    entry.pendingStopResult = undefined;
    const previousRecord = entry.record;
    const previousState = previousRecord?.state;
    entry.record = decision.next;
    this.options.observer?.decided(entry.key, decision, previousRecord, entry.policy, now); // outreach hook
    entry.lastDecision = decision;
    if (previousState !== decision.next.state) {
      this.options.log("info", `${vmId(entry.key)}: ${previousState ?? "new"} → ${decision.next.state}: ${decision.summary}`, { vm: vmId(entry.key) });
    }
    const directive: MessageInitShape<typeof DirectiveSchema> = {};
    for (const action of decision.actions) this.execute(entry, action, directive, now);
    if (entry.session && (fromReport || Object.keys(directive).length > 0)) {
      directive.status = statusFor(entry.record!, entry.policy, now);
      entry.session.send(create(DirectiveSchema, directive));
    }
  }

  private execute(entry: VmEntry, action: Action, directive: MessageInitShape<typeof DirectiveSchema>, now: number): void {
    const { log, actuator } = this.options;
    const id = vmId(entry.key);
    switch (action.kind) {
      case "notice": {
        if (!action.repeat) this.counterValues.notices++;
        // outreach hook: observe mode warns nobody unless the policy asks (observe-notices).
        if (this.options.observer && !this.options.observer.deliversNotice(action.mode, entry.policy)) return;
        const link = this.options.observer?.noticeLink(entry.key, action.id, action.deadlineMs);
        directive.notice = {
          id: action.id,
          stopInSeconds: action.stopInSeconds,
          reason: action.reason,
          keepRunningHint: link ? `${action.hint} Or open ${link}` : action.hint,
          idleSeconds: action.idleSeconds,
          mode: action.mode === "observe" ? PolicyMode.OBSERVE : PolicyMode.ENFORCE,
        };
        return;
      }
      case "notice-cleared":
        this.counterValues.stopsCancelled++;
        directive.noticeCleared = { id: action.id, reason: action.reason };
        return;
      case "lease-decisions":
        for (const d of action.decisions) {
          if (d.accepted && !entry.knownLeases.has(d.id)) {
            entry.knownLeases.add(d.id);
            this.counterValues.leasesGranted++;
          }
        }
        directive.leaseDecisions = action.decisions.map((d) => ({
          id: d.id,
          accepted: d.accepted,
          clamped: d.clamped,
          effectiveRemainingSeconds: d.effectiveRemainingSeconds,
          maxKeepRunningSeconds: d.maxKeepRunningSeconds,
          message: d.message,
        }));
        return;
      case "would-stop":
        this.countStop(action.trigger, "observe");
        log("info", `${id}: would stop now (observe mode): ${action.reason}`, { vm: id });
        return;
      case "stop":
        if (entry.stopInFlight) return;
        this.countStop(action.trigger, "enforce");
        entry.stopInFlight = true;
        log("info", `${id}: stopping: ${action.reason}`, { vm: id, attempt: action.attempt });
        void actuator.stop(entry.key, action.reason, { trigger: action.trigger, explanation: entry.lastDecision?.explanation }).then((result) => {
          entry.stopInFlight = false;
          entry.pendingStopResult = result;
          this.options.observer?.stopped(entry.key, result, { reason: action.reason, trigger: action.trigger }, entry.policy, this.options.nowMs()); // outreach hook
          this.options.stats?.countStopOutcome(entry.key, result.outcome);
          log(result.outcome === "accepted" ? "info" : "warn", `${id}: stop ${result.outcome}: ${result.message}`, { vm: id });
          this.evaluate(entry, this.options.nowMs());
        });
        return;
      case "cancel-stop":
        log("info", `${id}: stop cancelled: ${action.reason}`, { vm: id });
        return;
      case "event":
        actuator.event(entry.key, action.type, action.reason, action.message);
        return;
      case "persist":
        actuator.persist(entry.key, action.values);
        return;
      case "policy-error":
        // The engine's own PolicyInvalid event carries the audit; this is the log line (the metric counts in applyPolicy).
        log("warn", `${id}: invalid policy (${action.fallback}): ${action.errors.map((e) => `${e.key}: ${e.message}`).join("; ")}`, { vm: id });
        return;
      default: {
        const never: never = action;
        log("warn", `unknown engine action ${JSON.stringify(never)}`);
      }
    }
    void now;
  }

  // --- outreach hook (issue 17): the VM page and keep-running links -----------------

  detail(namespace: string, name: string, nowMs: number): VmDetail | undefined {
    const entry = this.vms.get(vmId({ namespace, name }));
    if (!entry) return undefined;
    const notice = entry.record?.notice;
    return {
      view: this.viewOf(entry, nowMs),
      explanation: entry.lastDecision?.explanation,
      policy: entry.policy,
      sources: (entry.latest?.report.sources ?? []).map((source) => ({
        source: source.source,
        state: SourceState[source.state]?.toLowerCase() ?? "unknown",
        message: source.message,
      })),
      ...(notice
        ? { notice: { id: notice.id, reason: notice.reason, deadlineMs: notice.deadlineMs, mode: notice.mode, ...(notice.wouldStopAtMs !== undefined ? { wouldStopAtMs: notice.wouldStopAtMs } : {}) } }
        : {}),
    };
  }

  keepContext(vm: VmKey, _nowMs: number): KeepContext | undefined {
    const entry = this.vms.get(vmId(vm));
    if (!entry) return undefined;
    const notice = entry.record?.notice;
    return {
      state: entry.record?.state ?? "Unknown",
      mode: entry.policy.mode,
      connected: entry.session !== undefined,
      owner: this.options.observer?.owner(vm) ?? "",
      maxKeepRunningSeconds: entry.policy.maxKeepRunningSeconds,
      ...(notice ? { notice: { id: notice.id, reason: notice.reason, deadlineMs: notice.deadlineMs } } : {}),
    };
  }

  grantViaLink(vm: VmKey, grant: LinkGrant, _nowMs: number): GrantOutcome {
    const entry = this.vms.get(vmId(vm));
    if (!entry?.session) return { ok: false, message: "the VM's agent is not connected right now, so it cannot be told; nothing was changed" };
    if (entry.record?.notice?.id !== grant.noticeId) return { ok: false, message: "this notice is no longer pending (the stop was cancelled or has happened); nothing was changed" };
    const leaseId = randomBytes(4).toString("hex");
    const seconds = Math.min(grant.seconds, entry.policy.maxKeepRunningSeconds);
    entry.session.send(create(DirectiveSchema, { leaseGrants: [{ id: leaseId, seconds, user: grant.user, reason: grant.reason, via: "link", noticeId: grant.noticeId }] }));
    this.options.log("info", `${vmId(vm)}: keep-running link used: lease ${leaseId} for ${seconds}s sent to the agent`, { vm: vmId(vm), notice: grant.noticeId });
    return { ok: true, leaseId };
  }

  // --- end of outreach hook ------------------------------------------------------------

  private countStop(trigger: string, mode: string): void {
    const key = `${trigger}|${mode}`;
    this.counterValues.stops.set(key, (this.counterValues.stops.get(key) ?? 0) + 1);
  }

  private viewOf(entry: VmEntry, now: number): VmView {
    const record = entry.record;
    const report = entry.latest?.report;
    const explanation = entry.lastDecision?.explanation;
    const active = new Set(record?.activeSignals ?? []);
    const signals: Record<string, boolean> = Object.fromEntries(SIGNAL_FAMILIES.map((f) => [f, false]));
    for (const signal of active) {
      const family = familyOf(signal);
      if (family) signals[family] = true;
    }
    const leases = record?.memory.leases ?? [];
    return {
      namespace: entry.key.namespace,
      name: entry.key.name,
      state: record?.state ?? "Unknown",
      mode: entry.policy.mode,
      autostop: entry.policy.autostopEnabled,
      connected: entry.session !== undefined,
      agentVersion: entry.agentVersion,
      peer: entry.peer,
      ...(record?.lastReportAtMs !== undefined ? { lastReportAtMs: record.lastReportAtMs } : {}),
      ...(record?.lastActivityAtMs !== undefined ? { lastActivityAtMs: record.lastActivityAtMs, idleSeconds: Math.max(0, (now - record.lastActivityAtMs) / 1000) } : {}),
      idleTimeoutSeconds: entry.policy.idleTimeoutSeconds,
      ...(explanation?.stopAtMs !== undefined ? { stopDeadlineMs: explanation.stopAtMs } : {}),
      activeSignals: [...active],
      signals,
      explanation: record?.summary ?? "",
      gpus: (report?.gpu?.gpus ?? [])
        .filter((g) => g.utilizationRatio !== undefined)
        .map((g) => ({ gpu: String(g.index), utilizationRatio: g.utilizationRatio! })),
      disks: (report?.disk?.mounts ?? [])
        .filter((m) => m.sizeBytes > 0n)
        .map((m) => ({ mount: m.mountPoint, usedRatio: Number(m.usedBytes) / Number(m.sizeBytes) })),
      leases: leases.filter((l) => l.expiresAtMs > now).map((l) => ({ id: l.id, user: l.user, uid: l.uid, reason: l.reason, expiresAtMs: l.expiresAtMs, clamped: l.clamped })),
      policyErrors: entry.policyErrors.map((e) => `${e.key}: ${e.message}`),
      ...(this.options.observer ? { owner: this.options.observer.owner(entry.key) } : {}),
      ...(report?.gpu ? { gpuCount: report.gpu.gpus.length } : {}),
      // Only a report of the current stream: after a reconnect the previous one is stale.
      ...(entry.session && entry.latest && entry.latest.receivedAtMs >= entry.session.connectedAtMs
        ? { readings: readingsFromReport(entry.latest.report, entry.latest.receivedAtMs) }
        : {}),
    };
  }
}

export type { Directive };
