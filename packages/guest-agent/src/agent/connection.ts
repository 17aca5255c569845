// The agent's one outer loop: connect, Hello, Reports; on any end, back off
// with jitter and connect again. Only the newest sample is kept while
// disconnected (a Report is a snapshot: older ones are worth nothing), so
// memory stays bounded however long the collector is away.
import { readFileSync } from "node:fs";
import * as grpc from "@grpc/grpc-js";
import { create, type MessageInitShape } from "@bufbuild/protobuf";
import {
  AgentMessageSchema,
  AgentService,
  clientChannelOptions,
  type CollectorMessage,
  type Directive,
  type HelloSchema,
  type Logger,
  type Report,
  retryAfterMs,
  errorMessage,
  backoffDelayMs,
  type BackoffPolicy,
} from "@ws/protocol";
import { clientConstructor, openBidi } from "@ws/protocol/grpc";

/** Reconnects: 1 s doubling to a minute, each delay in [ceiling/2, ceiling]. */
export const RECONNECT_BACKOFF: BackoffPolicy = { initialMs: 1_000, maxMs: 60_000, factor: 2, jitter: 0.5 };
import type { AgentConfig } from "../config.js";

export type LogFn = Logger;

export interface ConnectionOptions {
  config: AgentConfig;
  hello: MessageInitShape<typeof HelloSchema>;
  log: LogFn;
  onDirective: (directive: Directive) => void;
  onConnectedChange: (connected: boolean) => void;
  backoff?: BackoffPolicy;
  random?: () => number;
}

/** A stream that stayed up this long resets the backoff. */
const HEALTHY_STREAM_MS = 30_000;

export class AgentConnection {
  private stopped = false;
  private attempt = 0;
  /** The collector's "come back after" of the last stream end, when it sent one. */
  private retryHintMs: number | undefined;
  private call: grpc.ClientDuplexStream<never, CollectorMessage> | undefined;
  private client: grpc.Client | undefined;
  private sequence = 0n;
  private retryTimer: NodeJS.Timeout | undefined;
  private wakeRetry: (() => void) | undefined;
  private connected = false;
  /** Which of config.collector.addresses this attempt dials; a stream that never came up moves on to the next. */
  private addressIndex = 0;
  private readonly Client = clientConstructor(AgentService);

  constructor(private readonly options: ConnectionOptions) {}

  get isConnected(): boolean {
    return this.connected;
  }

  /** The address dialled now (or last). */
  get address(): string {
    const { addresses, address } = this.options.config.collector;
    return addresses?.[this.addressIndex] ?? address;
  }

  /** Runs until stop(). Never throws. */
  async run(): Promise<void> {
    const { log } = this.options;
    while (!this.stopped) {
      const openedAt = Date.now();
      let gotDirective = false;
      let cameUp = false;
      const endReason = await new Promise<string>((resolve) => {
        try {
          this.openStream(
            resolve,
            () => (gotDirective = true),
            () => (cameUp = true),
          );
        } catch (error) {
          resolve(`cannot connect: ${errorMessage(error)}`);
        }
      });
      this.setConnected(false);
      this.closeClient();
      if (this.stopped) break;
      if (gotDirective && Date.now() - openedAt > HEALTHY_STREAM_MS) this.attempt = 0;
      const addresses = this.options.config.collector.addresses ?? [];
      const failedAddress = this.address;
      if (!cameUp && this.retryHintMs === undefined && addresses.length > 1) {
        // Never reached this one: the next address now; the backoff applies once every address failed.
        this.addressIndex = (this.addressIndex + 1) % addresses.length;
        if (this.addressIndex !== 0) {
          log("warn", `collector ${failedAddress} not reachable (${endReason}); trying ${this.address}`);
          continue;
        }
      }
      // A busy collector names when to come back (RESOURCE_EXHAUSTED + retry hint): spread ±50 % so a burst does not return as one.
      const hint = this.retryHintMs;
      this.retryHintMs = undefined;
      const delay =
        hint !== undefined
          ? Math.round(hint * (0.5 + (this.options.random ?? Math.random)()))
          : backoffDelayMs(
              this.attempt + 1,
              this.options.backoff ?? RECONNECT_BACKOFF,
              this.options.random ?? Math.random,
            );
      if (hint === undefined) this.attempt++;
      log("warn", `collector stream ended (${endReason}); reconnecting in ${(delay / 1000).toFixed(1)}s`, {
        collector: failedAddress,
        attempt: this.attempt,
      });
      await new Promise<void>((resolve) => {
        this.wakeRetry = resolve;
        this.retryTimer = setTimeout(resolve, delay);
      });
    }
  }

  /** Sends a Report if connected; returns false when it could not (it is then dropped). */
  send(report: Report): boolean {
    if (!this.call || !this.connected) return false;
    this.sequence++;
    const message = create(AgentMessageSchema, {
      payload: { case: "report", value: { ...report, sequence: this.sequence } },
    });
    return (this.call as unknown as grpc.ClientDuplexStream<typeof message, CollectorMessage>).write(message);
  }

  /**
   * Ends the stream. `goodbye` (the agent is stopped on purpose): said to the collector first, so
   * it can tell a stop by root from an agent that vanished (docs/policy.md, "What the host cannot see").
   */
  async stop(goodbye?: string): Promise<void> {
    this.stopped = true;
    clearTimeout(this.retryTimer);
    this.wakeRetry?.();
    if (this.call) {
      if (goodbye !== undefined && this.connected) {
        const message = create(AgentMessageSchema, { payload: { case: "goodbye", value: { reason: goodbye } } });
        (this.call as unknown as grpc.ClientDuplexStream<typeof message, CollectorMessage>).write(message);
      }
      this.call.end();
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    this.closeClient();
  }

  private openStream(done: (reason: string) => void, onDirective: () => void, onUp: () => void): void {
    const { config, log } = this.options;
    this.client = new this.Client(this.address, credentials(config), {
      ...clientChannelOptions(),
      ...(config.collector.serverName ? { "grpc.ssl_target_name_override": config.collector.serverName } : {}),
    });
    const call = openBidi(this.client, AgentService, "connect", new grpc.Metadata());
    this.call = call as unknown as grpc.ClientDuplexStream<never, CollectorMessage>;
    this.sequence = 0n;
    let finished = false;
    const finish = (reason: string) => {
      if (finished) return;
      finished = true;
      this.call = undefined;
      done(reason);
    };
    call.on("metadata", () => {
      onUp();
      this.setConnected(true);
    });
    call.on("data", (message: CollectorMessage) => {
      onUp();
      this.setConnected(true);
      if (message.payload.case === "directive") {
        onDirective();
        try {
          this.options.onDirective(message.payload.value);
        } catch (error) {
          log("error", `directive handling failed: ${errorMessage(error)}`);
        }
      }
    });
    call.on("error", (error: grpc.ServiceError) => {
      this.retryHintMs = retryAfterMs(error.metadata);
      if (error.code !== grpc.status.UNAVAILABLE && error.code !== grpc.status.DEADLINE_EXCEEDED) onUp(); // a collector answered
      if (error.code === grpc.status.UNAUTHENTICATED || error.code === grpc.status.PERMISSION_DENIED) {
        log(
          "error",
          `collector refused this agent: ${error.details} — check vm.namespace, vm.name and token in the config (ws-collector token prints the right one)`,
        );
      }
      finish(`${grpc.status[error.code] ?? error.code}: ${error.details || error.message}`);
    });
    call.on("end", () => finish("collector closed the stream"));
    call.on("close", () => finish("stream closed"));
    call.write(create(AgentMessageSchema, { payload: { case: "hello", value: this.options.hello } }));
  }

  private setConnected(connected: boolean): void {
    if (this.connected === connected) return;
    this.connected = connected;
    if (connected) {
      this.options.log("info", "connected to collector", { collector: this.address });
    }
    this.options.onConnectedChange(connected);
  }

  private closeClient(): void {
    this.client?.close();
    this.client = undefined;
  }
}

function credentials(config: AgentConfig): grpc.ChannelCredentials {
  if (config.collector.insecure) return grpc.credentials.createInsecure();
  const ca = config.collector.caFile ? readFileSync(config.collector.caFile) : undefined;
  return grpc.credentials.createSsl(ca);
}
