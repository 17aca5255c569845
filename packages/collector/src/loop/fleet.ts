import * as grpc from "@grpc/grpc-js";
import { create } from "@bufbuild/protobuf";
import { DirectiveSchema, type Directive, REPORT_ON_CHANGE_CAPABILITY, type Report } from "@ws/protocol";
import type { AgentSession, AgentSink, AuthResult, Logger } from "../agents/server.js";
import { type VmKey, vmId } from "../model/vm-key.js";
import { resolveVmPolicy, type PolicySource } from "../model/policy-source.js";
import { quietMinutePoints } from "../model/quiet-minutes.js";
import type { Policy, PolicyError, PolicyFallback, StopResult, VmRecord } from "../engine/types.js";
import type { TraceInput } from "./recorder.js";
import type { CollectorStats } from "../lib/stats.js";
import type { GrantOutcome, KeepContext, KeepGranter, LinkGrant } from "./keep-grant.js";
import type { FleetObserver } from "./fleet-observer.js";
import type {
  FleetCounters,
  FleetReader,
  VmDetail,
  VmPlatformDetails,
  VmSeriesSource,
  VmView,
} from "../model/vm-view.js";
import { type ActionTarget, ActionRunner, type Actuator, newVmActing, type VmActing } from "./actions.js";
import { DeadlineQueue, type DeadlineTimers } from "./deadlines.js";
import { type OutreachVm, OutreachView } from "./outreach-view.js";
import {
  type DirectiveFields,
  directiveFields,
  directiveWithStatus,
  hasAgentContent,
  helloDirective,
} from "./directive.js";
import {
  DEFAULT_REPORT_HEARTBEAT_MS,
  type ReportPlan,
  reportPlan,
  reportWhenFields,
  tighterThan,
} from "./report-when.js";
import { applyInput, newVmLoopState, step, type StepInput, type VmLoopState } from "./step.js";
import { vmView } from "./view.js";
import { readingFor, type HostBatch } from "./hostside/queries.js";
import type { Schedule } from "@ws/protocol";

export type { Actuator, StopEvidence } from "./actions.js";

export interface FleetOptions {
  log: Logger;
  nowMs: () => number;
  actuator: Actuator;
  authenticate: (vm: VmKey, token: string, peer: string) => Promise<AuthResult> | AuthResult;
  /** Labels and annotations that select each VM's policy (standalone: from the config file). */
  policySource: PolicySource;
  /** The VM's valid start schedule (comeback/schedule/), whose "stop by" the engine enforces; absent: none. */
  scheduleOf?: (vm: VmKey) => Schedule | undefined;
  stats?: CollectorStats;
  /** The record a restarted collector resumes from (Kubernetes: the VM's annotations). */
  restore?: (vm: VmKey, nowMs: number) => VmRecord | undefined;
  /** Whether the VM is running, when the platform can tell (Kubernetes); undefined in standalone. */
  vmRunning?: (vm: VmKey) => boolean | undefined;
  /** False while this replica must not act (not the leader): decisions wait, nothing is executed. */
  acting?: () => boolean;
  /** Called with every input the engine sees, for --record-trace. */
  record?: (event: TraceInput) => void;
  /** Timers for the deadlines (tests inject a virtual clock's). */
  timers?: DeadlineTimers;
  /** Owner, what a stop frees, declared GPUs: what the platform knows of the VM (Kubernetes). */
  vmDetails?: (vm: VmKey) => VmPlatformDetails | undefined;
  /** Outreach (docs/notifications.md): history, webhooks, keep-running links, who is warned. Absent: none of them. */
  observer?: FleetObserver;
  /** What the first Directive of a new stream adds to the policy: the welcome back after a start (comeback/start/welcome.ts). */
  greeting?: (vm: VmKey, bootId: string) => DirectiveFields["welcome"] | undefined;
  /**
   * The longest an agent that announces "report-on-change" may stay quiet (loop/report-when.ts;
   * default DEFAULT_REPORT_HEARTBEAT_MS); 0: every agent reports every sample, as before.
   */
  reportHeartbeatMs?: number;
}

export type { TraceInput };

interface VmEntry {
  key: VmKey;
  id: string;
  loop: VmLoopState;
  session?: AgentSession;
  lastValidPolicy?: Policy;
  policyErrors: PolicyError[];
  fallback: PolicyFallback;
  acting: VmActing;
  agentVersion: string;
  peer: string;
  /** What validation cut from the latest Report. */
  truncated: string[];
  /** Bumped on every change the view can show (/metrics rebuilds the VM's series then). */
  version: number;
  /** The record must be restored (from annotations) before the next decision: new, or a new leadership. */
  needsRestore: boolean;
  /** The ReportWhen in force on the session (loop/report-when.ts); undefined: every sample, as a stream starts. */
  reportPlan?: ReportPlan | undefined;
}

export class Fleet implements AgentSink, FleetReader, KeepGranter {
  private readonly vms = new Map<string, VmEntry>();
  private readonly runner: ActionRunner;
  private readonly outreach: OutreachView;
  private readonly deadlines: DeadlineQueue<string>;
  private sorted: VmEntry[] | undefined;

  constructor(private readonly options: FleetOptions) {
    this.outreach = new OutreachView({
      log: options.log,
      ...(options.observer ? { observer: options.observer } : {}),
      ...(options.vmDetails ? { vmDetails: options.vmDetails } : {}),
    });
    this.runner = new ActionRunner({
      log: options.log,
      nowMs: options.nowMs,
      actuator: options.actuator,
      ...(options.stats ? { stats: options.stats } : {}),
      ...(options.observer ? { observer: options.observer } : {}),
    });
    this.deadlines = new DeadlineQueue<string>({
      nowMs: options.nowMs,
      ...(options.timers ? { timers: options.timers } : {}),
      fire: (id, now) => {
        const entry = this.vms.get(id);
        if (entry) this.evaluate(entry, now, { kind: "wake" });
      },
    });
  }

  /** Starts firing deadlines (decisions before start() are scheduled and fire from then on). */
  start(): void {
    this.deadlines.start();
  }

  stopTicking(): void {
    this.deadlines.stop();
  }

  /** VMs with a deadline pending (for tests and the status page). */
  get scheduledVms(): number {
    return this.deadlines.size;
  }

  /** When the VM is due for its next timer decision, if any. */
  nextDeadline(vm: VmKey): number | undefined {
    return this.deadlines.dueAt(vmId(vm));
  }

  /** Starts tracking a VM before its agent connects (Kubernetes inventory), or refreshes its policy and platform view. */
  track(vm: VmKey): void {
    const entry = this.entryFor(vm);
    const policyChanged = this.applyPolicy(entry);
    const running = this.options.vmRunning?.(entry.key);
    const runningChanged = running !== entry.loop.running;
    if (policyChanged) this.evaluate(entry, this.options.nowMs(), this.policyInput(entry));
    if (runningChanged || !entry.loop.record) this.evaluate(entry, this.options.nowMs(), { kind: "platform", running });
  }

  /**
   * A replica that just became the leader: every record is restored again from what the
   * previous leader persisted, and every VM is decided once, in slices (the deadline queue
   * yields between them). Persisted state is written only on a transition.
   */
  resetRecords(): void {
    const now = this.options.nowMs();
    for (const entry of this.vms.values()) {
      entry.needsRestore = true;
      this.deadlines.schedule(entry.id, now);
    }
  }

  /** Ends every agent stream; with retryAfterMs each agent is told when to come back (it adds jitter). */
  closeAllSessions(code: grpc.status, details: string, retryAfterMs?: number): void {
    for (const entry of this.vms.values()) entry.session?.close(code, details, retryAfterMs);
  }

  authenticate(vm: VmKey, token: string, peer: string): Promise<AuthResult> | AuthResult {
    return this.options.authenticate(vm, token, peer);
  }

  connected(session: AgentSession): void {
    const entry = this.entryFor(session.vm);
    entry.session = session;
    entry.reportPlan = undefined;
    entry.agentVersion = session.hello.agentVersion;
    entry.peer = session.peer;
    const now = this.options.nowMs();
    this.options.record?.({ atMs: now, vm: entry.id, event: "agent-connected" });
    const hello = helloDirective(entry.loop.policy);
    const welcome = this.options.greeting?.(entry.key, session.hello.bootId);
    if (welcome) hello.welcome = welcome;
    session.send(create(DirectiveSchema, hello));
    this.evaluate(entry, now, { kind: "connected" });
  }

  report(session: AgentSession, report: Report, receivedAtMs: number, truncated: readonly string[] = []): void {
    const entry = this.entryFor(session.vm);
    if (entry.session !== session) return;
    if (truncated.join() !== entry.truncated.join()) {
      // Logged when it starts or changes, not on every Report of a misbehaving agent.
      if (truncated.length > 0)
        this.options.log("warn", `${entry.id}: report cut to the per-agent limits: ${truncated.join(", ")}`, {
          vm: entry.id,
        });
      entry.truncated = [...truncated];
    }
    this.options.record?.({ atMs: receivedAtMs, vm: entry.id, report });
    const state = entry.loop.record?.state;
    if (state && (!this.options.acting || this.options.acting())) {
      const minutes = quietMinutePoints(report, receivedAtMs, entry.loop.latest?.receivedAtMs);
      if (minutes.length > 0) this.options.observer?.quietMinutes?.(entry.key, minutes, state);
    }
    this.evaluate(entry, receivedAtMs, { kind: "report", received: { report, receivedAtMs } }, true);
  }

  /** `goodbye`: the agent said it stops on purpose (agents/server.ts); undefined: it vanished. */
  disconnected(session: AgentSession, _reason?: string, goodbye?: string): void {
    const entry = this.vms.get(vmId(session.vm));
    if (!entry || entry.session !== session) return;
    entry.session = undefined;
    const now = this.options.nowMs();
    const said = goodbye === undefined ? {} : { goodbye };
    this.options.record?.({ atMs: now, vm: entry.id, event: "agent-disconnected", ...said });
    this.evaluate(entry, now, { kind: "disconnected", ...said });
  }

  /**
   * A round of host-side readings (loop/hostside/source.ts): every VM gets its own reading, or the
   * round's failure, or "absent"; each is decided on, and a disagreement's onset is counted.
   */
  hostBatch(batch: HostBatch): void {
    const now = this.options.nowMs();
    for (const entry of this.sortedEntries()) {
      // Stamped with the decision's time, as a replay of the recorded line will stamp it; with the
      // GPUs the platform passes through to the VM, which the host's figures cannot see (engine/host.ts).
      const { atMs: _at, ...read } = readingFor(batch, entry.id);
      const gpus = this.outreach.platformOf(entry.key)?.gpuCount ?? 0;
      const reading = gpus > 0 && read.state === "ok" ? { ...read, passthroughGpus: gpus } : read;
      this.options.record?.({ atMs: now, vm: entry.id, host: reading });
      this.evaluate(entry, now, { kind: "host", reading: { ...reading, atMs: now } });
      const kinds = this.viewOf(entry, now).host?.disagreements ?? [];
      this.runner.countDisagreements(entry.acting, kinds);
    }
  }

  /** Forget a VM that no longer exists (its series go away with it). */
  remove(vm: VmKey): void {
    const entry = this.vms.get(vmId(vm));
    entry?.session?.close(grpc.status.NOT_FOUND, "the VM no longer exists");
    this.vms.delete(vmId(vm));
    this.deadlines.cancel(vmId(vm));
    this.sorted = undefined;
    this.options.observer?.forget(vm);
  }

  counters(): FleetCounters {
    return this.runner.counters;
  }

  views(nowMs: number): VmView[] {
    return this.sortedEntries().map((entry) => this.viewOf(entry, nowMs));
  }

  /** The VM's loop state (record, latest Report, last decision), read-only: for per-VM pages and tests. */
  loopState(vm: VmKey): Readonly<VmLoopState> | undefined {
    return this.vms.get(vmId(vm))?.loop;
  }

  /** One view by VM, for per-VM pages. */
  view(vm: VmKey, nowMs: number): VmView | undefined {
    const entry = this.vms.get(vmId(vm));
    return entry ? this.viewOf(entry, nowMs) : undefined;
  }

  *agents(): Iterable<Pick<VmView, "connected" | "agentVersion">> {
    // As vmView says them: connected while a session is open.
    for (const entry of this.vms.values())
      yield { connected: entry.session !== undefined, agentVersion: entry.agentVersion };
  }

  *seriesSources(): Iterable<VmSeriesSource> {
    for (const entry of this.sortedEntries()) {
      yield { id: entry.id, version: entry.version, view: (nowMs: number) => this.viewOf(entry, nowMs) };
    }
  }

  private sortedEntries(): VmEntry[] {
    this.sorted ??= [...this.vms.values()].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
    return this.sorted;
  }

  private viewOf(entry: VmEntry, nowMs: number): VmView {
    return vmView(
      {
        key: entry.key,
        loop: entry.loop,
        connectedAtMs: entry.session?.connectedAtMs,
        agentVersion: entry.agentVersion,
        peer: entry.peer,
        policyErrors: entry.policyErrors.map((e) => `${e.key}: ${e.message}`),
        truncated: entry.truncated,
        platform: this.outreach.platformOf(entry.key),
      },
      nowMs,
    );
  }

  private entryFor(vm: VmKey): VmEntry {
    const id = vmId(vm);
    let entry = this.vms.get(id);
    if (!entry) {
      const key = { namespace: vm.namespace, name: vm.name };
      // A new VM has no last valid policy: its loop starts with what its policy resolves to now.
      const resolved = resolveVmPolicy(this.options.policySource, key, undefined);
      entry = {
        key,
        id,
        loop: newVmLoopState(resolved.policy),
        policyErrors: [],
        fallback: "none",
        acting: newVmActing(),
        agentVersion: "",
        peer: "",
        truncated: [],
        version: 0,
        needsRestore: true,
      };
      this.applyPolicy(entry, resolved);
      entry.loop.policyStatus = this.policyInput(entry).status;
      this.vms.set(id, entry);
      this.sorted = undefined;
    }
    return entry;
  }

  private policyInput(entry: VmEntry): Extract<StepInput, { kind: "policy" }> {
    return {
      kind: "policy",
      policy: entry.loop.policy,
      status: entry.policyErrors.length ? { errors: entry.policyErrors, fallback: entry.fallback } : undefined,
    };
  }

  /** Resolves the VM's policy from its metadata; true when it (or its errors) changed. */
  private applyPolicy(
    entry: VmEntry,
    resolved = resolveVmPolicy(this.options.policySource, entry.key, entry.lastValidPolicy),
  ): boolean {
    const stopByChanged = this.applyStopBy(entry);
    const errorsChanged = JSON.stringify(resolved.errors) !== JSON.stringify(entry.policyErrors);
    const policyChanged = JSON.stringify(resolved.policy) !== JSON.stringify(entry.loop.policy);
    // The same policy keeps its object: the evidence kept for the latest Report stays valid.
    if (policyChanged) entry.loop.policy = resolved.policy;
    entry.lastValidPolicy = resolved.lastValid ?? entry.lastValidPolicy;
    entry.policyErrors = resolved.errors;
    entry.fallback = resolved.fallback;
    if (errorsChanged && resolved.errors.length > 0) {
      this.runner.countPolicyErrors(resolved.errors.length);
      this.options.log("warn", `invalid policy for ${entry.id}; keeping ${resolved.fallback}`, {
        vm: entry.id,
        errors: resolved.errors.map((e) => `${e.key}: ${e.message}`).join("; "),
      });
    }
    return policyChanged || errorsChanged || stopByChanged;
  }

  /** The schedule's stop-by travels with the VM's loop state (only a schedule with one: nothing changes for the rest). */
  private applyStopBy(entry: VmEntry): boolean {
    const schedule = this.options.scheduleOf?.(entry.key);
    const stopBy = schedule?.stopByMinute === undefined ? undefined : schedule;
    const changed = JSON.stringify(stopBy) !== JSON.stringify(entry.loop.stopBy);
    if (!changed) return false;
    if (stopBy) entry.loop.stopBy = stopBy;
    else delete entry.loop.stopBy;
    return true;
  }

  private evaluate(entry: VmEntry, now: number, input: StepInput, fromReport = false): void {
    // A replica that is not (or no longer) the leader decides nothing: a stream closing as it
    // steps down, or a stop finishing after it lost the Lease, must not act on the VM. The
    // input still lands in the VM's state, so a later leadership decides on it.
    if (this.options.acting && !this.options.acting()) {
      // A standby keeps the inputs (the latest Report, the connection): the leader it becomes starts from them.
      applyInput(entry.loop, input, false);
      entry.version++;
      return;
    }
    if (entry.needsRestore) {
      entry.needsRestore = false;
      entry.loop.record = this.options.restore?.(entry.key, now);
    }
    if (input.kind !== "platform") entry.loop.running = this.options.vmRunning?.(entry.key);
    const began = performance.now();
    const previousRecord = entry.loop.record;
    const previousState = previousRecord?.state ?? "Unknown";
    const decision = step(entry.loop, now, input);
    this.options.observer?.decided(entry.key, decision, previousRecord, entry.loop.policy, now);
    this.options.stats?.observeDecision((performance.now() - began) / 1000);
    entry.version++;
    this.deadlines.schedule(entry.id, decision.wakeAtMs);
    const next = decision.next.state;
    if (previousState !== next || entry.loop.record === undefined) {
      this.options.log("info", `${entry.id}: ${previousState} → ${next}: ${decision.summary}`, { vm: entry.id });
    }
    // Most decisions (an active VM's Report) have no action and no notice: nothing is built for them.
    if (decision.actions.length > 0) {
      const target = this.actionTarget(entry);
      for (const action of decision.actions) this.runner.run(target, action);
    }
    const fields = directiveFields(decision.actions);
    if (fields.notice) this.outreach.addressNotice(this.outreachVm(entry)!, decision.actions, fields);
    const session = entry.session;
    if (!session) return;
    const plan = this.reportsOnChange(session)
      ? reportPlan(decision, entry.loop.policy, now, this.options.reportHeartbeatMs ?? DEFAULT_REPORT_HEARTBEAT_MS)
      : undefined;
    if (fromReport || hasAgentContent(fields) || (plan && tighterThan(plan, entry.reportPlan))) {
      const directive = directiveWithStatus(fields, decision.next, entry.loop.policy, now);
      if (plan) {
        directive.reportWhen = reportWhenFields(plan, now);
        entry.reportPlan = plan;
      }
      session.send(create(DirectiveSchema, directive));
    }
  }

  /** An agent that announced "report-on-change", while the heartbeat is on, is sent a ReportWhen after each decision. */
  private reportsOnChange(session: AgentSession): boolean {
    return this.options.reportHeartbeatMs !== 0 && session.hello.capabilities.includes(REPORT_ON_CHANGE_CAPABILITY);
  }

  private actionTarget(entry: VmEntry): ActionTarget {
    return {
      key: entry.key,
      id: entry.id,
      acting: entry.acting,
      policy: () => entry.loop.policy,
      explanation: entry.loop.lastDecision?.explanation,
      ...(entry.session?.hello.bootId ? { bootId: entry.session.hello.bootId } : {}),
      stopFinished: (result: StopResult) => {
        if (this.vms.get(entry.id) === entry)
          this.evaluate(entry, this.options.nowMs(), { kind: "stop-result", result });
      },
    };
  }

  // --- what the people around a VM see (loop/outreach-view.ts) ---

  detail(namespace: string, name: string, nowMs: number): VmDetail | undefined {
    const vm = this.outreachVm(this.vms.get(vmId({ namespace, name })));
    return vm ? this.outreach.detail(vm, nowMs) : undefined;
  }

  keepContext(vm: VmKey, _nowMs: number): KeepContext | undefined {
    const found = this.outreachVm(this.vms.get(vmId(vm)));
    return found ? this.outreach.keepContext(found) : undefined;
  }

  grantViaLink(vm: VmKey, grant: LinkGrant, _nowMs: number): GrantOutcome {
    return this.outreach.grantViaLink(this.outreachVm(this.vms.get(vmId(vm))), grant);
  }

  private outreachVm(entry: VmEntry | undefined): OutreachVm | undefined {
    return entry
      ? {
          id: entry.id,
          key: entry.key,
          loop: entry.loop,
          session: entry.session,
          view: (nowMs) => this.viewOf(entry, nowMs),
        }
      : undefined;
  }
}

export type { Directive };
