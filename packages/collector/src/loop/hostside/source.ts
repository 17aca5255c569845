// The host-side source: on its own cadence (never on the Report path), one round
// of batched queries for the whole fleet, handed to the sink as one batch.
// Prometheus down, slow or answering errors makes the round fail: the sink
// passes that on to every VM as a failed reading, which is missing data.
import { errorMessage, type Logger } from "@ws/protocol";
import type { PrometheusClient, VectorSample } from "./prometheus.js";
import {
  DEFAULT_CONNECTIONS_WITNESS,
  DEFAULT_HOST_LABELS,
  type HostAnswers,
  type HostBatch,
  type HostLabels,
  type HostQueryName,
  hostQueries,
  readingsFromAnswers,
} from "./queries.js";

export interface HostSink {
  hostBatch(batch: HostBatch): void;
}

export interface HostSourceOptions {
  client: PrometheusClient;
  sink: HostSink;
  log: Logger;
  nowMs: () => number;
  intervalSeconds: number;
  windowSeconds: number;
  labels?: HostLabels;
  connectionsWitness?: string;
  /** False while this replica must not act (a standby): it queries nothing. */
  acting?: () => boolean;
}

/** How the source is doing, for /metrics and the pages. */
export interface HostSourceStatus {
  endpoint: string;
  rounds: number;
  failures: number;
  lastRoundAtMs?: number;
  lastRoundOk?: boolean;
  lastError?: string;
  lastDurationSeconds?: number;
  lastVms?: number;
  /** VMs of the last successful round whose reading failed on a sample that cannot be true. */
  lastImpossibleVms?: number;
}

export class HostSource {
  private timer: NodeJS.Timeout | undefined;
  private running = false;
  private stopped = false;
  readonly status: HostSourceStatus;

  constructor(private readonly options: HostSourceOptions) {
    this.status = { endpoint: options.client.endpoint, rounds: 0, failures: 0 };
  }

  start(): void {
    this.stopped = false;
    this.schedule(0);
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
  }

  private schedule(delayMs: number): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => void this.tick(), delayMs);
    this.timer.unref?.();
  }

  private async tick(): Promise<void> {
    const started = this.options.nowMs();
    if (!this.running && (this.options.acting?.() ?? true)) {
      this.running = true;
      try {
        this.options.sink.hostBatch(await this.round(started));
      } finally {
        this.running = false;
      }
    }
    // The cadence counts from the start of the round: a slow Prometheus does not stretch it.
    const elapsed = this.options.nowMs() - started;
    this.schedule(Math.max(0, this.options.intervalSeconds * 1000 - elapsed));
  }

  /** One round of queries, evaluated at `atMs`. Never rejects. */
  async round(atMs: number): Promise<HostBatch> {
    const { client, windowSeconds } = this.options;
    const labels = this.options.labels ?? DEFAULT_HOST_LABELS;
    const witness = this.options.connectionsWitness ?? DEFAULT_CONNECTIONS_WITNESS;
    const queries = hostQueries(windowSeconds, labels, witness);
    const began = performance.now();
    let batch: HostBatch;
    try {
      const names = Object.keys(queries) as HostQueryName[];
      const results = await Promise.all(
        names.map((name) =>
          client.query(queries[name], atMs).catch((error: unknown) => {
            throw new Error(`${name} query: ${errorMessage(error)}`);
          }),
        ),
      );
      const answers = Object.fromEntries(names.map((name, i) => [name, results[i]!])) as Record<
        HostQueryName,
        VectorSample[]
      > satisfies HostAnswers;
      batch = readingsFromAnswers(answers, atMs, windowSeconds, labels, witness);
    } catch (error) {
      batch = { ok: false, atMs, windowSeconds, message: `Prometheus at ${client.endpoint}: ${errorMessage(error)}` };
    }
    this.note(batch, (performance.now() - began) / 1000);
    return batch;
  }

  private note(batch: HostBatch, seconds: number): void {
    const status = this.status;
    const wasOk = status.lastRoundOk;
    status.rounds++;
    status.lastRoundAtMs = batch.atMs;
    status.lastRoundOk = batch.ok;
    status.lastDurationSeconds = seconds;
    if (batch.ok) {
      status.lastError = undefined;
      status.lastVms = batch.readings.size;
      if (wasOk === false) this.options.log("info", "host-side evidence: Prometheus answers again");
      const impossible = [...batch.readings].filter(([, reading]) => reading.state === "failed");
      // Logged when the count changes, not every round; the VM's page has each one's message.
      if (impossible.length !== (status.lastImpossibleVms ?? 0) && impossible.length > 0)
        this.options.log(
          "warn",
          `host-side evidence: Prometheus answered what cannot be true for ${impossible.length} VM(s); they are not judged on it`,
          { first: impossible[0]![0], why: impossible[0]![1].message },
        );
      status.lastImpossibleVms = impossible.length;
    } else {
      status.failures++;
      // Logged when it starts or changes, not every round of a long outage.
      if (status.lastError !== batch.message)
        this.options.log("warn", `host-side evidence unavailable: ${batch.message}; no VM is judged on it meanwhile`);
      status.lastError = batch.message;
    }
  }
}
