// `ws-collector whatif`: read the recorded readings from Prometheus, replay
// them through the engine under the given policy, print the outcome.
// The only I/O here: the HTTP range queries and the output streams.
import { readFileSync } from "node:fs";
import { availableParallelism } from "node:os";
import { UsageError, ConfigError, EXIT, usageLine } from "@ws/protocol";
import {
  type DisputesOnlyOptions,
  parseWhatifArgs,
  type ReturnsOnlyOptions,
  WHATIF_HELP,
  type WhatifOptions,
} from "./args.js";
import { disputesFromDocument, type DisputeRecord } from "../../comeback/start/disputes.js";
import { disputeVerdicts, formatDisputesJson, formatDisputesText } from "./disputes-report.js";
import { formatWarmReplaysText, warmReplaysFromDocument } from "./warm-report.js";
import { defaultVmsPerQuery, HistoryError, type RecordedVm, stepGrid } from "./history.js";
import type { HostSteps } from "./host-history.js";
import {
  historyBatches,
  hostHistory,
  listRecordedVms,
  type PrometheusSource,
  queryRange,
} from "./prometheus-history.js";
import { formatJson, formatText } from "./report.js";
import { simulateVm, type VmOutcome } from "./simulate.js";
import {
  capacityFromSeries,
  capacityQueries,
  recommend,
  type SweepRunInput,
  summarizeSweep,
  type VmCapacity,
} from "./sweep.js";
import { SweepPool } from "./sweep-workers.js";
import { formatSweepJson, formatSweepText } from "./sweep-report.js";
import { replayPolicy } from "./args.js";
import type { StepGrid, VmHistory } from "./history.js";
import { historiesFromTrace } from "./trace-history.js";
import { parseTrace, type TraceEvent } from "../../loop/trace.js";
import { traceOriginMs } from "../replay/replay.js";
import { errorMessage, escapedJson, terminalText } from "@ws/protocol";

export interface WhatifIo {
  stdout: NodeJS.WritableStream;
  stderr: NodeJS.WritableStream;
  fetch?: typeof fetch;
  nowMs?: () => number;
  readFile?: (path: string) => string;
  /** How many cores a sweep's worker threads may use when --jobs is not given (default: os.availableParallelism). */
  cores?: () => number;
  /** The script a sweep's worker threads run (default: the running bundle, whose main.ts starts them). */
  workerScript?: string;
}

export async function whatifCommand(argv: string[], io: WhatifIo): Promise<number> {
  const nowMs = io.nowMs ?? (() => Date.now());
  let options: WhatifOptions | DisputesOnlyOptions | ReturnsOnlyOptions | "help";
  try {
    options = parseWhatifArgs(argv, nowMs(), io.readFile ?? ((path) => readFileSync(path, "utf8")));
  } catch (error) {
    if (error instanceof UsageError) {
      io.stderr.write(
        `ws-collector whatif: ${error.message}\n${usageLine(WHATIF_HELP)}\nRun 'ws-collector whatif --help' for usage.\n`,
      );
      return EXIT.usage;
    }
    // The --config file is configuration: exit 3, as serve and replay.
    if (error instanceof ConfigError) {
      io.stderr.write(`ws-collector whatif: ${error.message}\n`);
      return EXIT.config;
    }
    throw error;
  }
  if (options === "help") {
    io.stdout.write(WHATIF_HELP);
    return 0;
  }
  if ("kind" in options && options.kind === "returns") return warmStartsCommand(options, io);
  let disputes: DisputeRecord[] | undefined;
  if (options.disputesFile !== undefined) {
    const file = options.disputesFile;
    try {
      const text = (io.readFile ?? ((path) => readFileSync(path, "utf8")))(file === "-" ? "/dev/stdin" : file);
      disputes = disputesFromDocument(text, options.annotationPrefix).filter(
        (d) =>
          (!options.namespace || d.vm.startsWith(`${options.namespace}/`)) &&
          (!options.vm || d.vm.endsWith(`/${options.vm}`)),
      );
    } catch (error) {
      // The error may quote the document (its kind): text someone else wrote.
      io.stderr.write(`ws-collector whatif: --disputes ${file}: ${terminalText(errorMessage(error), 1000)}\n`);
      return 1;
    }
  }
  if ("kind" in options) {
    io.stdout.write(options.json ? formatDisputesJson(disputes ?? []) : formatDisputesText(disputes ?? []));
    return 0;
  }

  if (options.traceFile !== undefined) {
    // A trace: the same histories as Prometheus gives, read from the file; its range is the trace's.
    let events: TraceEvent[];
    try {
      events = parseTrace((io.readFile ?? ((path) => readFileSync(path, "utf8")))(options.traceFile));
    } catch (error) {
      io.stderr.write(`ws-collector whatif: --trace ${options.traceFile}: ${errorMessage(error)}\n`);
      return 1;
    }
    const selected = events.filter(
      (event) =>
        (!options.namespace || event.vm.startsWith(`${options.namespace}/`)) &&
        (!options.vm || event.vm.endsWith(`/${options.vm}`)),
    );
    const fromTrace = historiesFromTrace(selected, traceOriginMs(events), options.stepSeconds);
    const range = {
      fromMs: fromTrace.grid.startMs,
      toMs: fromTrace.grid.startMs + (fromTrace.grid.count - 1) * fromTrace.grid.stepMs,
    };
    return replayHistories({ ...options, ...range }, oneBatch(fromTrace.histories), fromTrace.grid, disputes, io);
  }
  const source = prometheusSource(options, io);
  const grid = stepGrid(options.fromMs, options.toMs, options.stepSeconds);
  let vms: RecordedVm[];
  try {
    vms = await listRecordedVms(source, grid, options);
  } catch (error) {
    return historyFailed(error, io);
  }
  let host: HostSteps | undefined;
  // Host-side evidence, read back with the live source's own queries at every step.
  if (options.hostWindowSeconds !== undefined && vms.length > 0)
    try {
      host = await hostHistory(source, grid, options.hostWindowSeconds);
    } catch (error) {
      return historyFailed(error, io, "host-side evidence: ");
    }
  const batches = historyBatches(source, vms, grid, options.vmsPerQuery ?? defaultVmsPerQuery(grid), host);
  return replayHistories(options, batches, grid, disputes, io);
}

function prometheusSource(options: WhatifOptions, io: WhatifIo): PrometheusSource {
  return {
    prometheusUrl: options.prometheusUrl!,
    headers: options.headers,
    stepSeconds: options.stepSeconds,
    fetch: io.fetch ?? fetch,
  };
}

/** `whatif --returns`: what learned warm starts would have cost and saved on the recorded returns. */
function warmStartsCommand(options: ReturnsOnlyOptions, io: WhatifIo): number {
  const file = options.returnsFile;
  try {
    const text = (io.readFile ?? ((path) => readFileSync(path, "utf8")))(file === "-" ? "/dev/stdin" : file);
    const replays = warmReplaysFromDocument(
      text,
      options.annotationPrefix,
      options.timeZone,
      options.warmWindowSeconds * 1000,
    );
    io.stdout.write(
      options.json
        ? `${JSON.stringify({ warmStarts: replays }, null, 2)}\n`
        : formatWarmReplaysText(replays, options.timeZone),
    );
    return 0;
  } catch (error) {
    io.stderr.write(`ws-collector whatif: --returns ${file}: ${terminalText(errorMessage(error), 1000)}\n`);
    return 1;
  }
}

/** A trace's histories: all in one batch. */
async function* oneBatch(histories: VmHistory[]): AsyncGenerator<VmHistory[]> {
  yield histories;
}

/**
 * Hands each batch of histories to `replay`, reading the next batch (from Prometheus) while this one
 * is replayed; returns how many VMs there were. A HistoryError of any batch comes out of here.
 */
async function forEachBatch(
  batches: AsyncIterable<VmHistory[]>,
  replay: (histories: VmHistory[]) => void | Promise<void>,
): Promise<number> {
  const iterator = batches[Symbol.asyncIterator]();
  let vms = 0;
  let next = iterator.next();
  for (;;) {
    const { done, value } = await next;
    if (done) return vms;
    next = iterator.next();
    // Awaited on the next turn; this only keeps a failure from going unhandled if the replay throws first.
    next.catch(() => undefined);
    vms += value.length;
    await replay(value);
  }
}

/** No VM to replay: where from, and what to check. */
function noHistories(options: WhatifOptions, io: WhatifIo): number {
  const selected = options.namespace || options.vm ? " for the VMs selected" : "";
  io.stderr.write(
    options.traceFile !== undefined
      ? `ws-collector whatif: the trace has no reports${selected}\n`
      : `ws-collector whatif: Prometheus has no workstation_* series${selected} between ${new Date(options.fromMs).toISOString()} and ${new Date(options.toMs).toISOString()}: ` +
          "is it scraping the collector (packaging/prometheus/), and is the range right?\n",
  );
  return 1;
}

/** A failed read from Prometheus: said (after `what`), exit 1; anything else is a bug and is thrown. */
function historyFailed(error: unknown, io: WhatifIo, what = ""): number {
  if (!(error instanceof HistoryError)) throw error;
  io.stderr.write(`ws-collector whatif: ${what}${terminalText(error.message, 1000)}\n`);
  return 1;
}

/** The replay of the histories, from Prometheus or a trace: once, or once per sweep value. */
async function replayHistories(
  options: WhatifOptions,
  batches: AsyncIterable<VmHistory[]>,
  grid: StepGrid,
  disputes: DisputeRecord[] | undefined,
  io: WhatifIo,
): Promise<number> {
  if (options.sweep) return sweepCommand(options, options.sweep, batches, grid, disputes, io);
  const outcomes: VmOutcome[] = [];
  try {
    const vms = await forEachBatch(batches, (histories) => {
      for (const history of histories)
        outcomes.push(
          simulateVm(history, { policy: options.policy, grid, falseStopWindowSeconds: options.falseStopWindowSeconds }),
        );
    });
    if (vms === 0) return noHistories(options, io);
  } catch (error) {
    return historyFailed(error, io);
  }
  if (outcomes.every((outcome) => outcome.reportedSteps === 0)) {
    io.stderr.write(
      "ws-collector whatif: the range has VMs but none of the raw readings whatif replays (workstation_jupyter_busy_kernels and the others in docs/metrics.md): " +
        "they are exported while an agent is connected, by collectors of this version on.\n",
    );
    return 1;
  }
  const result = {
    fromMs: options.fromMs,
    toMs: options.toMs,
    stepSeconds: options.stepSeconds,
    falseStopWindowSeconds: options.falseStopWindowSeconds,
    policy: options.policy,
    overrides: options.overrides,
    vms: outcomes,
  };
  if (!disputes) {
    io.stdout.write(options.json ? formatJson(result) : formatText(result));
    return 0;
  }
  // Each dispute beside the replay: would this policy still have stopped the VM then?
  const verdicts = disputeVerdicts(disputes, outcomes, options.stepSeconds);
  if (options.json) {
    const replay = JSON.parse(formatJson(result)) as Record<string, unknown>;
    io.stdout.write(`${escapedJson({ ...replay, disputes: verdicts }, 2)}\n`);
  } else io.stdout.write(`${formatText(result)}\n${formatDisputesText(verdicts)}`);
  return 0;
}

/** --sweep: whatif's replay once per knob value, summed, and the value to use. */
async function sweepCommand(
  options: WhatifOptions,
  sweep: NonNullable<WhatifOptions["sweep"]>,
  batches: AsyncIterable<VmHistory[]>,
  grid: StepGrid,
  disputes: DisputeRecord[] | undefined,
  io: WhatifIo,
): Promise<number> {
  // What each VM held (cores, memory) from KubeVirt's metrics, when the same Prometheus has them;
  // without them (or from a trace) core- and GiB-hours are shown as unknown, nothing fails.
  let capacity = new Map<string, VmCapacity>();
  if (options.prometheusUrl)
    try {
      const queries = capacityQueries((options.toMs - options.fromMs) / 1000);
      const source = prometheusSource(options, io);
      const cores = await queryRange(source, queries.cores, options.toMs, options.toMs);
      const memory = await queryRange(source, queries.memoryBytes, options.toMs, options.toMs);
      capacity = capacityFromSeries(cores, memory);
    } catch (error) {
      if (!(error instanceof HistoryError)) throw error;
      io.stderr.write(`ws-collector whatif: core- and GiB-hours unknown: ${terminalText(error.message, 1000)}\n`);
    }
  const input: SweepRunInput = {
    plan: sweep,
    grid,
    falseStopWindowSeconds: options.falseStopWindowSeconds,
    falseStopBudget: sweep.falseStopBudget,
    policyFor: (overrides) => replayPolicy(options.base, { ...options.overrides, ...overrides }, options.stepSeconds),
    capacity,
    ...(disputes ? { disputes } : {}),
  };
  // The VMs in worker threads (--jobs, default the cores): the same rows as runSweep on this thread.
  const policies = sweep.points.map((point) => input.policyFor(point.overrides));
  const pool = new SweepPool({
    policies,
    grid,
    falseStopWindowSeconds: options.falseStopWindowSeconds,
    jobs: sweep.jobs ?? (io.cores ?? availableParallelism)(),
    ...(io.workerScript !== undefined ? { script: io.workerScript } : {}),
  });
  const outcomes: VmOutcome[][] = policies.map(() => []);
  let vms: number;
  try {
    vms = await forEachBatch(batches, async (histories) => {
      const part = await pool.replay(histories);
      for (const [index, replayed] of part.entries()) outcomes[index]!.push(...replayed);
    });
  } catch (error) {
    return historyFailed(error, io);
  } finally {
    await pool.close();
  }
  if (vms === 0) return noHistories(options, io);
  const rows = summarizeSweep(input, outcomes);
  const result = {
    fromMs: options.fromMs,
    toMs: options.toMs,
    stepSeconds: options.stepSeconds,
    falseStopWindowSeconds: options.falseStopWindowSeconds,
    falseStopBudget: sweep.falseStopBudget,
    vms,
    knobs: sweep.knobs,
    rows,
    recommendation: recommend(rows, {
      knobs: sweep.knobs,
      falseStopBudget: sweep.falseStopBudget,
      annotationPrefix: options.annotationPrefix,
      ...(options.profile !== undefined ? { profile: options.profile } : {}),
      ...(options.namespace !== undefined ? { namespace: options.namespace } : {}),
      ...(options.vm !== undefined ? { vm: options.vm } : {}),
    }),
  };
  io.stdout.write(options.json ? formatSweepJson(result) : formatSweepText(result));
  return 0;
}
