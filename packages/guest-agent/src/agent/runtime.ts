// The long-running agent: samples every interval, keeps the newest sample,
// sends it when the collector stream is up and the collector wants it (every
// sample, or on change and by a deadline: report-gate.ts), and hands
// Directives to the lease/notice service.
import { readFileSync } from "node:fs";
import os from "node:os";
import { create } from "@bufbuild/protobuf";
import {
  PROTOCOL_VERSION,
  REPORT_ON_CHANGE_CAPABILITY,
  ReportSchema,
  ScheduleRequestSchema,
  SOURCE_NAMES,
  type Directive,
  type Thresholds,
  type UnhandledErrorCounts,
  errorMessage,
} from "@ws/protocol";
import type { Clock } from "../clock.js";
import type { AgentConfig } from "../config.js";
import { LeaseService } from "../lease/service.js";
import { takeSample, type Sample } from "../sampler.js";
import { createSignals } from "../signals/index.js";
import { ok, type Signal } from "../signals/types.js";
import { createUsersCache, type UsersCache } from "../users.js";
import { AGENT_VERSION } from "../version.js";
import { AgentConnection, type LogFn } from "./connection.js";
import { type ChartSample, MAX_HELD_SAMPLES, quietMinutes } from "./quiet-minutes.js";
import { contractFrom, digestOf, type ReportContract, type SampleDigest, sendReason } from "./report-gate.js";

/** Every signal source, then what else this agent does with a Directive. */
export const CAPABILITIES = [...SOURCE_NAMES, "notices", "report-interval", REPORT_ON_CHANGE_CAPABILITY];

/** The shortest interval a collector may ask for; protects the guest from a runaway collector. */
const MIN_INTERVAL_SECONDS = 1;

export class AgentRuntime {
  private latest: Sample | undefined;
  /** What of `latest` the collector may need at once (report-gate.ts). */
  private latestDigest: SampleDigest | undefined;
  /** The digest of the last Report sent on this stream; undefined until one was. */
  private sentDigest: SampleDigest | undefined;
  /** The sample of the last Report sent on this stream, and those taken since: the chart's quiet minutes (quiet-minutes.ts). */
  private sentSample: ChartSample | undefined;
  private heldSamples: ChartSample[] = [];
  /** The collector's ReportWhen on this stream; undefined: every sample. */
  private contract: ReportContract | undefined;
  /** The collector's thresholds (from its policy), which say when a level is a veto. */
  private thresholds: Thresholds | undefined;
  private intervalSeconds: number;
  private sampleTimer: NodeJS.Timeout | undefined;
  private sampling = false;
  private stopped = false;
  private connection!: AgentConnection;
  private leases!: LeaseService;
  private signals: Array<Signal<unknown>> = [];
  private readonly users: UsersCache;

  constructor(
    private readonly config: AgentConfig,
    private readonly clock: Clock,
    private readonly log: LogFn,
    /** Errors nobody handled in this process (cli.ts installs the policy that counts them). */
    private readonly unhandled: UnhandledErrorCounts = { rejection: 0, exception: 0 },
  ) {
    this.intervalSeconds = config.reportIntervalSeconds;
    this.users = createUsersCache(config.roots);
  }

  async start(): Promise<void> {
    const users = this.users.current();
    this.leases = await LeaseService.open({
      stateDir: this.config.roots.state,
      socketPath: this.config.socketPath,
      clock: this.clock,
      users,
      roots: this.config.roots,
      log: (line: string) => this.log("info", line),
      // A new or cancelled lease is reported at once, so ws-lease can show the collector's answer.
      onLeasesChanged: () => void this.sampleOnce().then(() => this.sendLatest()),
    });
    const leaseSignal: Signal<unknown> = { name: "leases", collect: async () => ok(this.leases.reportLeases()) };
    this.signals = [...createSignals(this.config), leaseSignal];
    this.connection = new AgentConnection({
      config: this.config,
      hello: {
        vm: { namespace: this.config.vm.namespace, name: this.config.vm.name },
        agentVersion: AGENT_VERSION,
        capabilities: CAPABILITIES,
        bootId: readBootId(this.config.roots.proc),
        token: this.config.token,
        hostname: os.hostname(),
        protocolVersion: PROTOCOL_VERSION,
      },
      log: this.log,
      onDirective: (directive) => this.onDirective(directive),
      onConnectedChange: (connected) => {
        this.leases.setCollectorConnected(connected, this.connection.address);
        // A new stream starts without a ReportWhen: every sample until the collector says otherwise,
        // and the newest sample at once (a restarted agent or a new collector hears from it now).
        this.contract = undefined;
        this.sentDigest = undefined;
        this.sentSample = undefined;
        this.heldSamples = [];
        if (connected) this.sendLatest();
      },
    });
    await this.sampleOnce();
    this.scheduleSampling();
    void this.connection.run();
    this.log("info", "agent started", {
      vm: `${this.config.vm.namespace}/${this.config.vm.name}`,
      collector: this.config.collector.addresses.join(","),
      interval: this.intervalSeconds,
    });
  }

  /** `goodbye`: why the agent stops on purpose, told to the collector before the stream closes. */
  async stop(goodbye?: string): Promise<void> {
    this.stopped = true;
    clearTimeout(this.sampleTimer);
    await this.connection?.stop(goodbye);
    await this.leases?.close();
  }

  private onDirective(directive: Directive): void {
    const interval = directive.reportIntervalSeconds;
    if (interval !== undefined && Number.isFinite(interval) && interval !== this.intervalSeconds) {
      const next = Math.min(3_600, Math.max(MIN_INTERVAL_SECONDS, interval));
      this.log("info", `collector set the report interval to ${next}s`);
      this.intervalSeconds = next;
      this.scheduleSampling();
    }
    if (directive.policy?.thresholds) this.thresholds = directive.policy.thresholds;
    if (directive.reportWhen) this.contract = contractFrom(directive.reportWhen, this.clock.monotonicMs());
    this.leases.applyDirective(directive);
  }

  private scheduleSampling(): void {
    clearTimeout(this.sampleTimer);
    if (this.stopped) return;
    this.sampleTimer = setTimeout(async () => {
      await this.sampleOnce();
      this.sendIfWanted();
      this.scheduleSampling();
    }, this.intervalSeconds * 1000);
    this.sampleTimer.unref?.();
  }

  private async sampleOnce(): Promise<void> {
    if (this.sampling) return;
    this.sampling = true;
    try {
      const users = this.users.current();
      const sample = await takeSample(
        this.signals,
        this.config.disabledSignals,
        { roots: this.config.roots, clock: this.clock, users },
        this.config.sampleTimeoutMs,
        this.clock,
      );
      this.latest = sample;
      this.latestDigest = digestOf(sample.report, sample.takenAtMonotonicMs, this.thresholds);
      if (this.sentSample) {
        this.heldSamples.push({ takenAtMs: sample.takenAtMonotonicMs, activityAtMs: this.latestDigest.activityAtMs });
        if (this.heldSamples.length > MAX_HELD_SAMPLES) this.heldSamples.shift();
      }
    } catch (error) {
      this.log("error", `sample failed: ${errorMessage(error)}`);
    } finally {
      this.sampling = false;
    }
  }

  /** The sample just taken goes out when the collector wants it (report-gate.ts); otherwise it is kept back. */
  private sendIfWanted(): void {
    if (!this.latestDigest) return;
    const why = sendReason(
      this.contract,
      this.sentDigest,
      this.latestDigest,
      this.clock.monotonicMs(),
      this.intervalSeconds * 1000,
    );
    if (why !== undefined) this.sendLatest();
  }

  /** Sends the newest sample now (a new stream, a lease change, or the gate said so). */
  private sendLatest(): void {
    if (!this.latest) return;
    const takenAtMs = this.latest.takenAtMonotonicMs;
    const report = create(ReportSchema, {
      ...this.latest.report,
      // Only while the collector lets the agent stay quiet are there minutes to summarise.
      quietMinutes: this.contract && this.sentSample ? quietMinutes(this.sentSample, this.heldSamples, takenAtMs) : [],
      intervalSeconds: this.intervalSeconds,
      sampleAgeSeconds: Math.max(0, (this.clock.monotonicMs() - this.latest.takenAtMonotonicMs) / 1000),
      agentUnhandledErrors: BigInt(this.unhandled.rejection + this.unhandled.exception),
      scheduleRequests: this.leases.schedules.inReport().map((request) => create(ScheduleRequestSchema, request)),
    });
    if (this.connection.isConnected) {
      this.connection.send(report);
      this.sentDigest = this.latestDigest;
      this.sentSample = { takenAtMs, activityAtMs: this.latestDigest?.activityAtMs };
      this.heldSamples = [];
    }
  }
}

export function readBootId(procRoot: string): string {
  try {
    return readFileSync(`${procRoot}/sys/kernel/random/boot_id`, "utf8").trim();
  } catch {
    return "";
  }
}
