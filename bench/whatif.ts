// What `whatif --sweep` costs: a week of a fleet at whatif's default one-minute step, replayed once per
// swept value through whatif's own replay (replayVm → step → decide, what simulateVm runs), in CPU time (process.cpuUsage:
// the machine may be shared). The fleet: people who type from 9 to 17 with a lunch break, idle nights,
// one GPU each. `node bench/run.mjs whatif [--vms N] [--values N] [--jobs N] [--batch N]` (default 1000 VMs,
// 4 values, jobs = the cores available: worker threads, each replaying a slice of the VMs, as `whatif
// --jobs`; the histories made and replayed 100 VMs at a time, so a 1,000-VM week fits in memory).
// With --read, each batch is first written as Prometheus's range-query answer (JSON, 10,000 steps a
// query, as whatif asks for it; not timed) and read back as whatif reads it (JSON.parse, parseMatrix,
// historyFromSeries; timed apart, on the main thread): what whatif does besides the replay, save the
// HTTP round trips and Prometheus's own work. The rows must come out the same.
// With --pipeline, what the command does end to end, timed whole: every batch's answer is made first
// (not timed, kept as bytes), then each batch is read on the main thread while the worker threads
// replay the one before (whatif reads one batch ahead): the wall time from the first read to the last
// replay, and the CPU of every thread.
// Prints a markdown table. CPU is the whole process's, all threads.
import { parseWhatifArgs, replayPolicy } from "../packages/collector/src/offline/whatif/args.js";
import {
  historyFromSeries,
  type MatrixSeries,
  parseMatrix,
  rangeChunks,
  type StepGrid,
  stepGrid,
  type StepSample,
  stepSamples,
  type VmHistory,
} from "../packages/collector/src/offline/whatif/history.js";
import type { VmOutcome } from "../packages/collector/src/offline/whatif/simulate.js";
import { availableParallelism } from "node:os";
import { workerData } from "node:worker_threads";
import { summarizeSweep, type SweepRunInput } from "../packages/collector/src/offline/whatif/sweep.js";
import { isSweepWorker } from "../packages/collector/src/offline/whatif/sweep-role.js";
import { runSweepWorker, SweepPool } from "../packages/collector/src/offline/whatif/sweep-workers.js";

const START = Date.parse("2026-11-23T00:00:00Z");
const MIN = 60_000;
const WEEK_MINUTES = 7 * 24 * 60;

const option = (name: string, fallback: number): number => {
  const index = process.argv.indexOf(`--${name}`);
  return index >= 0 ? Number(process.argv[index + 1]) : fallback;
};
if (process.argv.includes("--help")) {
  // Without this, --help ran the defaults: a week of 1,000 VMs, minutes of a shared machine.
  console.log(
    "node bench/run.mjs whatif [--vms N (1000)] [--values N (4)] [--jobs N (the cores)] [--batch N (100)] [--read | --pipeline]",
  );
  process.exit(0);
}
const vmCount = option("vms", 1000);
const valueCount = option("values", 4);
const jobs = option("jobs", availableParallelism());
const batch = option("batch", 100);
const pipeline = process.argv.includes("--pipeline");
const read = pipeline || process.argv.includes("--read");

function person(index: number): VmHistory {
  // Each person keeps their own hours (shifted by up to two hours) and a lunch of 30 to 70 minutes.
  const shift = (index * 7) % 120;
  const lunch = 30 + ((index * 13) % 41);
  const samples: StepSample[] = [];
  let lastTypedAtMs = START - MIN;
  for (let minute = 0; minute <= WEEK_MINUTES; minute++) {
    const atMs = START + minute * MIN;
    const ofDay = (minute - shift + 24 * 60) % (24 * 60);
    const working = ofDay >= 9 * 60 && ofDay < 17 * 60 && !(ofDay >= 12 * 60 && ofDay < 12 * 60 + lunch);
    if (working) lastTypedAtMs = atMs;
    samples.push({
      connected: true,
      gpuCount: 1,
      readings: {
        cpuBusyRatio: working ? 0.3 : 0.02,
        userProcessCpuCores: working ? 0.5 : 0.01,
        networkBytesPerSecond: 800,
        diskBytesPerSecond: 1000,
        gpuCount: 1,
        gpuUtilization: { "0": 0 },
        gpuProcesses: 0,
        jupyterBusyKernels: 0,
        jupyterConnectedKernels: 0,
        idleInhibitors: 0,
        lastActivityAtMs: { "tty-input": lastTypedAtMs },
      },
    });
  }
  return { namespace: `ns-${index % 50}`, name: `vm-${index}`, samples };
}

/** The VM's history as Prometheus's range-query answers would carry it, one JSON text per 10,000 steps. */
function prometheusAnswers(histories: readonly VmHistory[], grid: StepGrid): string[] {
  return rangeChunks(grid).map((chunk) => {
    const first = (chunk.startMs - grid.startMs) / grid.stepMs;
    const last = (chunk.endMs - grid.startMs) / grid.stepMs;
    const result: MatrixSeries[] = [];
    for (const history of histories) {
      const series = new Map<string, MatrixSeries>();
      const put = (metric: string, value: number | undefined, seconds: number, extra: Record<string, string> = {}) => {
        if (value === undefined) return;
        const key = `${metric}${JSON.stringify(extra)}`;
        let entry = series.get(key);
        if (!entry) {
          const labels = { __name__: `workstation_${metric}`, namespace: history.namespace, name: history.name };
          entry = { metric: { ...labels, ...extra, job: "ws-collector", instance: "10.0.0.1:9090" }, values: [] };
          series.set(key, entry);
        }
        entry.values.push([seconds, String(value)]);
      };
      const sampleAt = stepSamples(history);
      for (let index = first; index <= last; index++) {
        const sample = sampleAt(index);
        const seconds = (grid.startMs + index * grid.stepMs) / 1000;
        if (!sample) continue;
        put("agent_connected", sample.connected ? 1 : 0, seconds);
        put("gpus", sample.gpuCount, seconds);
        const readings = sample.readings;
        if (!readings) continue;
        put("cpu_busy_ratio", readings.cpuBusyRatio, seconds);
        put("user_process_cpu_cores", readings.userProcessCpuCores, seconds);
        put("network_bytes_per_second", readings.networkBytesPerSecond, seconds);
        put("disk_io_bytes_per_second", readings.diskBytesPerSecond, seconds);
        put("gpu_processes", readings.gpuProcesses, seconds);
        put("jupyter_busy_kernels", readings.jupyterBusyKernels, seconds);
        put("jupyter_connected_kernels", readings.jupyterConnectedKernels, seconds);
        put("idle_inhibitors", readings.idleInhibitors, seconds);
        for (const [gpu, value] of Object.entries(readings.gpuUtilization))
          put("gpu_utilization_ratio", value, seconds, { gpu });
        for (const [signal, atMs] of Object.entries(readings.lastActivityAtMs) as Array<[string, number]>)
          put("signal_last_activity_timestamp_seconds", atMs / 1000, seconds, { signal });
      }
      result.push(...series.values());
    }
    return JSON.stringify({ status: "success", data: { resultType: "matrix", result } });
  });
}

async function bench(): Promise<void> {
  const grid = stepGrid(START, START + WEEK_MINUTES * MIN, 60);
  const values = Array.from({ length: valueCount }, (_, index) => `${30 + index * 15}m`);
  const parsed = parseWhatifArgs(
    [
      "--prometheus",
      "http://prometheus:9090",
      "--from",
      String(START / 1000),
      "--to",
      String(grid.startMs / 1000 + WEEK_MINUTES * 60),
      "--sweep",
      `idle-timeout=${values.join(",")}`,
    ],
    START + WEEK_MINUTES * MIN,
    () => "",
  );
  if (parsed === "help" || "kind" in parsed || !parsed.sweep) throw new Error("bench: the sweep options did not parse");
  const sweep = parsed.sweep;

  const input: SweepRunInput = {
    plan: sweep,
    grid,
    falseStopWindowSeconds: parsed.falseStopWindowSeconds,
    falseStopBudget: sweep.falseStopBudget,
    policyFor: (overrides) => replayPolicy(parsed.base, overrides, parsed.stepSeconds),
    capacity: new Map(),
  };
  const policies = sweep.points.map((point) => input.policyFor(point.overrides));
  // The fleet in batches of --batch VMs (a week of one takes about 20 MB), as whatif reads it from
  // Prometheus a batch at a time: each batch's histories are made, then replayed by the same pool of
  // threads (timed: CPU of every thread, and wall), then dropped. VMs are independent, so the rows are
  // those of the whole fleet at once.
  const outcomes: VmOutcome[][] = policies.map(() => []);
  const pool = new SweepPool({ policies, grid, falseStopWindowSeconds: parsed.falseStopWindowSeconds, jobs });
  const timed = pipeline ? await timePipeline(grid, pool, outcomes) : await timeBatches(grid, pool, outcomes);
  const { cpuSeconds, wallSeconds, readCpuSeconds } = timed;
  await pool.close();
  const rows = summarizeSweep(input, outcomes);
  const steps = vmCount * grid.count * values.length;

  console.log(
    `| VMs | steps per VM (a week at 1m) | values | jobs | engine steps | CPU s | wall s | CPU s per value | µs per step |`,
  );
  console.log(`|---:|---:|---:|---:|---:|---:|---:|---:|---:|`);
  console.log(
    `| ${vmCount} | ${grid.count} | ${values.length} | ${jobs} | ${(steps / 1e6).toFixed(1)} M | ${cpuSeconds.toFixed(1)} | ${wallSeconds.toFixed(1)} | ${(cpuSeconds / values.length).toFixed(1)} | ${((cpuSeconds * 1e6) / steps).toFixed(2)} |`,
  );
  if (pipeline)
    console.log(
      `\nThe command's pipeline: each batch read from Prometheus's JSON (main thread) while the workers replay the one before; CPU s and wall s above are the whole of it, reads included`,
    );
  else if (read)
    console.log(
      `\nReading Prometheus's answers (JSON.parse, parseMatrix, historyFromSeries; main thread): ${readCpuSeconds.toFixed(1)} CPU s, ${((readCpuSeconds * 1000) / vmCount).toFixed(0)} ms per VM`,
    );
  console.log("");
  console.log(
    rows
      .map(
        (row) =>
          `- idle-timeout=${row.overrides["idle-timeout"]}: ${row.stops} stops, ${row.likelyFalseStops} likely false, ${row.vmHours.toFixed(0)} VM-hours`,
      )
      .join("\n"),
  );
}

/** Reads a batch's answers as whatif does ((bytes →) text → JSON → series → histories). */
function readAnswers(answers: readonly (string | Buffer)[], grid: StepGrid): VmHistory[] {
  return historyFromSeries(
    answers.flatMap((answer) => parseMatrix(JSON.parse(typeof answer === "string" ? answer : answer.toString("utf8")))),
    grid,
  );
}

interface Timed {
  cpuSeconds: number;
  wallSeconds: number;
  /** --read: the reads' CPU, timed apart (NaN where they are not). */
  readCpuSeconds: number;
}

/** Each batch made, (with --read: written and read back,) then replayed; only the read and the replay timed. */
async function timeBatches(grid: StepGrid, pool: SweepPool, outcomes: VmOutcome[][]): Promise<Timed> {
  const timed: Timed = { cpuSeconds: 0, wallSeconds: 0, readCpuSeconds: 0 };
  for (let first = 0; first < vmCount; first += batch) {
    let histories = Array.from({ length: Math.min(batch, vmCount - first) }, (_, index) => person(first + index));
    if (read) {
      const answers = prometheusAnswers(histories, grid);
      histories = [];
      // The answers' own making leaves garbage that is not whatif's to collect (node --expose-gc: bench/run.mjs).
      (globalThis as { gc?: () => void }).gc?.();
      const readStarted = process.cpuUsage();
      histories = readAnswers(answers, grid);
      const readUsed = process.cpuUsage(readStarted);
      timed.readCpuSeconds += (readUsed.user + readUsed.system) / 1e6;
    }
    const started = process.cpuUsage();
    const wallStart = performance.now();
    const part = await pool.replay(histories);
    const used = process.cpuUsage(started);
    timed.cpuSeconds += (used.user + used.system) / 1e6;
    timed.wallSeconds += (performance.now() - wallStart) / 1000;
    part.forEach((vms, index) => outcomes[index]!.push(...vms));
  }
  return timed;
}

/** --pipeline: the answers made first, then read one batch ahead of the replay, timed whole. */
async function timePipeline(grid: StepGrid, pool: SweepPool, outcomes: VmOutcome[][]): Promise<Timed> {
  const batches: Buffer[][] = [];
  for (let first = 0; first < vmCount; first += batch) {
    const histories = Array.from({ length: Math.min(batch, vmCount - first) }, (_, index) => person(first + index));
    batches.push(prometheusAnswers(histories, grid).map((text) => Buffer.from(text, "utf8")));
  }
  (globalThis as { gc?: () => void }).gc?.();
  const started = process.cpuUsage();
  const wallStart = performance.now();
  let current = readAnswers(batches[0]!, grid);
  batches[0] = [];
  for (let index = 0; index < batches.length; index++) {
    const replaying = pool.replay(current);
    // Read the next batch while the workers replay this one, as forEachBatch does.
    let next: VmHistory[] = [];
    if (index + 1 < batches.length) {
      next = readAnswers(batches[index + 1]!, grid);
      batches[index + 1] = [];
    }
    const part = await replaying;
    part.forEach((vms, policy) => outcomes[policy]!.push(...vms));
    current = next;
  }
  const used = process.cpuUsage(started);
  return {
    cpuSeconds: (used.user + used.system) / 1e6,
    wallSeconds: (performance.now() - wallStart) / 1000,
    readCpuSeconds: Number.NaN,
  };
}

// This bundle is also the workers' script (as ws-collector.cjs is whatif's).
if (isSweepWorker(workerData)) runSweepWorker(workerData);
else await bench();
