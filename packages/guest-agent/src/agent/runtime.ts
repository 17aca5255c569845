// The long-running agent: samples every interval, keeps the newest sample,
// sends it whenever the collector stream is up, and hands Directives to the
// lease/notice service.
import { readFileSync } from "node:fs";
import os from "node:os";
import { create } from "@bufbuild/protobuf";
import {
  PROTOCOL_VERSION,
  ReportSchema,
  SOURCE_NAMES,
  type Directive,
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

/** Every signal source, then what else this agent does with a Directive. */
export const CAPABILITIES = [...SOURCE_NAMES, "notices", "report-interval"];

/** The shortest interval a collector may ask for; protects the guest from a runaway collector. */
const MIN_INTERVAL_SECONDS = 1;

export class AgentRuntime {
  private latest: Sample | undefined;
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

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.sampleTimer);
    await this.connection?.stop();
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
    this.leases.applyDirective(directive);
  }

  private scheduleSampling(): void {
    clearTimeout(this.sampleTimer);
    if (this.stopped) return;
    this.sampleTimer = setTimeout(async () => {
      await this.sampleOnce();
      this.sendLatest();
      this.scheduleSampling();
    }, this.intervalSeconds * 1000);
    this.sampleTimer.unref?.();
  }

  private async sampleOnce(): Promise<void> {
    if (this.sampling) return;
    this.sampling = true;
    try {
      const users = this.users.current();
      this.latest = await takeSample(
        this.signals,
        this.config.disabledSignals,
        { roots: this.config.roots, clock: this.clock, users },
        this.config.sampleTimeoutMs,
        this.clock,
      );
    } catch (error) {
      this.log("error", `sample failed: ${errorMessage(error)}`);
    } finally {
      this.sampling = false;
    }
  }

  private sendLatest(): void {
    if (!this.latest) return;
    const report = create(ReportSchema, {
      ...this.latest.report,
      intervalSeconds: this.intervalSeconds,
      sampleAgeSeconds: Math.max(0, (this.clock.monotonicMs() - this.latest.takenAtMonotonicMs) / 1000),
      agentUnhandledErrors: BigInt(this.unhandled.rejection + this.unhandled.exception),
    });
    this.connection.send(report);
  }
}

export function readBootId(procRoot: string): string {
  try {
    return readFileSync(`${procRoot}/sys/kernel/random/boot_id`, "utf8").trim();
  } catch {
    return "";
  }
}
