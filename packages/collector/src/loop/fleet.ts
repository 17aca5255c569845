// The Fleet: every VM's loop, composed from its parts. The VM table and policy resolution
// (loop/fleet-entries.ts), the agent side that sends Directives (loop/fleet-agents.ts), the
// reader side the pages and /metrics see (loop/fleet-views.ts), the deadlines that wake a VM
// (loop/deadlines.ts), the actions a decision carries out (loop/actions.ts) and the outreach
// (loop/outreach-view.ts). What stays here is the one path every input takes: evaluate().
import * as grpc from "@grpc/grpc-js";
import type { Directive, Report, Schedule } from "@ws/protocol";
import type { AgentSession, AgentSink, AuthResult, Logger } from "../agents/server.js";
import { type VmKey, vmId } from "../model/vm-key.js";
import type { PolicySource } from "../model/policy-source.js";
import type { Policy, StopResult, VmRecord } from "../engine/types.js";
import { quietMinutePoints } from "../model/quiet-minutes.js";
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
import { type ActionTarget, ActionRunner, type Actuator } from "./actions.js";
import { DeadlineQueue, type DeadlineTimers } from "./deadlines.js";
import { OutreachView } from "./outreach-view.js";
import { directiveFields } from "./directive.js";
import { DEFAULT_REPORT_HEARTBEAT_MS } from "./report-when.js";
import { applyInput, step, type StepInput, type VmLoopState } from "./step.js";
import { readingFor, type HostBatch } from "./hostside/queries.js";
import { policyInput, VmEntries, type VmEntry } from "./fleet-entries.js";
import { type Greeting, greetAgent, tellAgent } from "./fleet-agents.js";
import { FleetViews } from "./fleet-views.js";

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
  /** What the engine runs the VM under instead of its resolved policy (a waiting learned warm start: its window as idle-timeout); absent: as resolved. */
  runsUnder?: (vm: VmKey, policy: Policy) => Policy;
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
  greeting?: Greeting;
  /**
   * The longest an agent that announces "report-on-change" may stay quiet (loop/report-when.ts;
   * default DEFAULT_REPORT_HEARTBEAT_MS); 0: every agent reports every sample, as before.
   */
  reportHeartbeatMs?: number;
  /**
   * Why the VM's agent must send every sample whatever its decision, or undefined: a start
   * waiting for the entry service, whose readiness a Report held to the heartbeat would delay.
   */
  hearEverySample?: (vm: VmKey, nowMs: number) => string | undefined;
}

export type { TraceInput };

export class Fleet implements AgentSink, FleetReader, KeepGranter {
  private readonly entries: VmEntries;
  private readonly runner: ActionRunner;
  private readonly outreach: OutreachView;
  private readonly reader: FleetViews;
  private readonly deadlines: DeadlineQueue<string>;
  private readonly heartbeatMs: number;

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
    this.entries = new VmEntries(
      options.policySource,
      (entry, resolved) => {
        this.runner.countPolicyErrors(resolved.errors.length);
        options.log("warn", `invalid policy for ${entry.id}; keeping ${resolved.fallback}`, {
          vm: entry.id,
          errors: resolved.errors.map((e) => `${e.key}: ${e.message}`).join("; "),
        });
      },
      options.scheduleOf,
      options.runsUnder,
    );
    this.reader = new FleetViews(this.entries, this.runner, this.outreach);
    this.deadlines = new DeadlineQueue<string>({
      nowMs: options.nowMs,
      ...(options.timers ? { timers: options.timers } : {}),
      fire: (id, now) => {
        const entry = this.entries.byId(id);
        if (entry) this.evaluate(entry, now, { kind: "wake" });
      },
    });
    this.heartbeatMs = options.reportHeartbeatMs ?? DEFAULT_REPORT_HEARTBEAT_MS;
  }

  // --- the deadline side (loop/deadlines.ts): when each VM is woken for its next decision ---

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

  /**
   * A replica that just became the leader: every record is restored again from what the
   * previous leader persisted, and every VM is decided once, in slices (the deadline queue
   * yields between them). Persisted state is written only on a transition.
   */
  resetRecords(): void {
    const now = this.options.nowMs();
    for (const entry of this.entries.values()) {
      entry.needsRestore = true;
      this.deadlines.schedule(entry.id, now);
    }
  }

  // --- the platform side: the inventory, the host-side readings ---

  /** Starts tracking a VM before its agent connects (Kubernetes inventory), or refreshes its policy and platform view. */
  track(vm: VmKey): void {
    const entry = this.entries.entryFor(vm);
    const policyChanged = this.entries.applyPolicy(entry);
    const running = this.options.vmRunning?.(entry.key);
    const runningChanged = running !== entry.loop.running;
    if (policyChanged) this.evaluate(entry, this.options.nowMs(), policyInput(entry));
    if (runningChanged || !entry.loop.record) this.evaluate(entry, this.options.nowMs(), { kind: "platform", running });
  }

  /**
   * A round of host-side readings (loop/hostside/source.ts): every VM gets its own reading, or the
   * round's failure, or "absent"; each is decided on, and a disagreement's onset is counted.
   */
  hostBatch(batch: HostBatch): void {
    const now = this.options.nowMs();
    for (const entry of this.entries.sortedEntries()) {
      // Stamped with the decision's time, as a replay of the recorded line will stamp it; with the
      // GPUs the platform passes through to the VM, which the host's figures cannot see (engine/host.ts).
      const { atMs: _at, ...read } = readingFor(batch, entry.id);
      const gpus = this.outreach.platformOf(entry.key)?.gpuCount ?? 0;
      const reading = gpus > 0 && read.state === "ok" ? { ...read, passthroughGpus: gpus } : read;
      this.options.record?.({ atMs: now, vm: entry.id, host: reading });
      this.evaluate(entry, now, { kind: "host", reading: { ...reading, atMs: now } });
      const kinds = this.reader.viewOf(entry, now).host?.disagreements ?? [];
      this.runner.countDisagreements(entry.acting, kinds);
    }
  }

  /** Forget a VM that no longer exists (its series go away with it). */
  remove(vm: VmKey): void {
    const entry = this.entries.delete(vm);
    entry?.session?.close(grpc.status.NOT_FOUND, "the VM no longer exists");
    this.deadlines.cancel(vmId(vm));
    this.options.observer?.forget(vm);
  }

  // --- the agent side (AgentSink; the Directives are sent by loop/fleet-agents.ts) ---

  /** Ends every agent stream; with retryAfterMs each agent is told when to come back (it adds jitter). */
  closeAllSessions(code: grpc.status, details: string, retryAfterMs?: number): void {
    for (const entry of this.entries.values()) entry.session?.close(code, details, retryAfterMs);
  }

  authenticate(vm: VmKey, token: string, peer: string): Promise<AuthResult> | AuthResult {
    return this.options.authenticate(vm, token, peer);
  }

  connected(session: AgentSession): void {
    const entry = this.entries.entryFor(session.vm);
    const now = this.options.nowMs();
    this.options.record?.({ atMs: now, vm: entry.id, event: "agent-connected" });
    greetAgent(entry, session, this.options.greeting);
    this.evaluate(entry, now, { kind: "connected" });
  }

  report(session: AgentSession, report: Report, receivedAtMs: number, truncated: readonly string[] = []): void {
    const entry = this.entries.entryFor(session.vm);
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
    const entry = this.entries.get(session.vm);
    if (!entry || entry.session !== session) return;
    entry.session = undefined;
    const now = this.options.nowMs();
    const said = goodbye === undefined ? {} : { goodbye };
    this.options.record?.({ atMs: now, vm: entry.id, event: "agent-disconnected", ...said });
    this.evaluate(entry, now, { kind: "disconnected", ...said });
  }

  // --- the one path every input takes ---

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
    if (fields.notice) this.outreach.addressNotice(this.reader.outreachVm(entry)!, decision.actions, fields);
    const closely = this.options.hearEverySample?.(entry.key, now);
    tellAgent(entry, decision, fields, { now, fromReport, heartbeatMs: this.heartbeatMs, everySample: closely });
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
        if (this.entries.byId(entry.id) === entry)
          this.evaluate(entry, this.options.nowMs(), { kind: "stop-result", result });
      },
    };
  }

  // --- the reader side (loop/fleet-views.ts): the pages, /metrics and tests ---

  counters(): FleetCounters {
    return this.reader.counters();
  }

  views(nowMs: number): VmView[] {
    return this.reader.views(nowMs);
  }

  /** The VM's loop state (record, latest Report, last decision), read-only: for per-VM pages and tests. */
  loopState(vm: VmKey): Readonly<VmLoopState> | undefined {
    return this.reader.loopState(vm);
  }

  /** One view by VM, for per-VM pages. */
  view(vm: VmKey, nowMs: number): VmView | undefined {
    return this.reader.view(vm, nowMs);
  }

  agents(): Iterable<Pick<VmView, "connected" | "agentVersion">> {
    return this.reader.agents();
  }

  seriesSources(): Iterable<VmSeriesSource> {
    return this.reader.seriesSources();
  }

  // --- what the people around a VM see (loop/outreach-view.ts) ---

  detail(namespace: string, name: string, nowMs: number): VmDetail | undefined {
    const vm = this.reader.outreachVm(this.entries.get({ namespace, name }));
    return vm ? this.outreach.detail(vm, nowMs) : undefined;
  }

  keepContext(vm: VmKey, _nowMs: number): KeepContext | undefined {
    const found = this.reader.outreachVm(this.entries.get(vm));
    return found ? this.outreach.keepContext(found) : undefined;
  }

  grantViaLink(vm: VmKey, grant: LinkGrant, _nowMs: number): GrantOutcome {
    return this.outreach.grantViaLink(this.reader.outreachVm(this.entries.get(vm)), grant);
  }
}

export type { Directive };
