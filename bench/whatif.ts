// What `whatif --sweep` costs: a week of a fleet at whatif's default one-minute step, replayed once per
// swept value through whatif's own replay (replayVm → step → decide, what simulateVm runs), in CPU time (process.cpuUsage:
// the machine may be shared). The fleet: people who type from 9 to 17 with a lunch break, idle nights,
// one GPU each. `node bench/run.mjs whatif [--vms N] [--values N] [--jobs N] [--batch N]` (default 1000 VMs,
// 4 values, jobs = the cores available: worker threads, each replaying a slice of the VMs, as `whatif
// --jobs`; the histories made and replayed 100 VMs at a time, so a 1,000-VM week fits in memory).
// Prints a markdown table. CPU is the whole process's, all threads.
import { parseWhatifArgs, replayPolicy } from "../packages/collector/src/offline/whatif/args.js";
import { stepGrid, type StepSample, type VmHistory } from "../packages/collector/src/offline/whatif/history.js";
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
  console.log("node bench/run.mjs whatif [--vms N (1000)] [--values N (4)] [--jobs N (the cores)] [--batch N (100)]");
  process.exit(0);
}
const vmCount = option("vms", 1000);
const valueCount = option("values", 4);
const jobs = option("jobs", availableParallelism());
const batch = option("batch", 100);

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
  let cpuSeconds = 0;
  let wallSeconds = 0;
  const pool = new SweepPool({ policies, grid, falseStopWindowSeconds: parsed.falseStopWindowSeconds, jobs });
  for (let first = 0; first < vmCount; first += batch) {
    const histories = Array.from({ length: Math.min(batch, vmCount - first) }, (_, index) => person(first + index));
    const started = process.cpuUsage();
    const wallStart = performance.now();
    const part = await pool.replay(histories);
    const used = process.cpuUsage(started);
    cpuSeconds += (used.user + used.system) / 1e6;
    wallSeconds += (performance.now() - wallStart) / 1000;
    part.forEach((vms, index) => outcomes[index]!.push(...vms));
  }
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

// This bundle is also the workers' script (as ws-collector.cjs is whatif's).
if (isSweepWorker(workerData)) runSweepWorker(workerData);
else await bench();
