// How long one full sample takes on a crowded VM: N processes, M homes, K real Jupyter Servers
// (one kernel each), measured as `ws-agent probe --json` reports it (each source's duration;
// the sources run concurrently, so the sample takes as long as the slowest).
//
//   node bench/run.mjs sample-wall [--processes 200] [--homes 20] [--jupyter-servers 5] [--probes 5]
//
// The extra processes are `sleep` children of this harness; the homes are directories of a
// home root of its own (every passwd home is scanned as well, as in a VM); each Jupyter Server
// writes its runtime file into one of those homes, where the agent discovers it.
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { mkdirSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { startJupyterServer, startKernel } from "../test/support/jupyter.js";
import { benchArgs } from "./lib/args.js";
import { runBenchmark, type Cleanup } from "./lib/main.js";
import { describeMachine, machineLine } from "./lib/machine.js";
import { agentBundle, requireBundles } from "./lib/paths.js";
import { summarize } from "./lib/stats.js";
import { fmt, markdownTable } from "./lib/table.js";

const USAGE = "usage: node bench/run.mjs sample-wall [--processes 200] [--homes 20] [--jupyter-servers 5] [--probes 5]";
const args = benchArgs(process.argv.slice(2), ["processes", "homes", "jupyter-servers", "probes"], USAGE);
const whole = (name: keyof typeof args, fallback: number): number => {
  const value = Number(args[name] ?? fallback);
  if (!Number.isInteger(value) || value < 0) {
    process.stderr.write(`--${name}: expected a whole number, got "${args[name]}"\n${USAGE}\n`);
    process.exit(2);
  }
  return value;
};
const targetProcesses = whole("processes", 200);
const homes = whole("homes", 20);
const jupyterServers = whole("jupyter-servers", 5);
const probes = Math.max(1, whole("probes", 5));

const cleanups: Cleanup[] = [];
const processCount = () => readdirSync("/proc").filter((name) => /^\d+$/.test(name)).length;

interface ProbeReport {
  sources: Array<{ source: string; state: string; durationSeconds?: number }>;
  jupyter?: { servers?: unknown[] };
}

async function main(): Promise<void> {
  requireBundles();
  const machine = describeMachine();
  const dir = mkdtempSync(path.join(os.tmpdir(), "ws-bench-sample-wall-"));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  const homeRoot = path.join(dir, "home");
  for (let i = 0; i < homes; i++)
    mkdirSync(path.join(homeRoot, `wsbench${i}`, ".local/share/jupyter/runtime"), { recursive: true });
  for (let i = 0; i < jupyterServers; i++) {
    const server = await startJupyterServer({
      runtimeDir: path.join(homeRoot, `wsbench${i % Math.max(1, homes)}`, ".local/share/jupyter/runtime"),
    });
    cleanups.push(() => server.stop());
    await startKernel(server);
  }
  const sleepers: ChildProcess[] = [];
  cleanups.push(() => {
    for (const child of sleepers) child.kill("SIGKILL");
  });
  while (processCount() < targetProcesses) sleepers.push(spawn("sleep", ["3600"], { stdio: "ignore" }));
  const processes = processCount();

  const durations = new Map<string, number[]>();
  const slowest: number[] = [];
  let serversSeen = 0;
  for (let i = 0; i < probes; i++) {
    const result = spawnSync(
      process.execPath,
      [agentBundle, "probe", "--json", "--window", "1s", "--home-root", homeRoot, "--config", "/dev/null"],
      { encoding: "utf8", timeout: 120_000 },
    );
    if (result.error || result.stdout === "")
      throw new Error(`ws-agent probe failed: ${result.error?.message ?? result.stderr}`);
    const report = JSON.parse(result.stdout) as ProbeReport;
    serversSeen = report.jupyter?.servers?.length ?? 0;
    let max = 0;
    for (const source of report.sources) {
      const ms = (source.durationSeconds ?? 0) * 1000;
      durations.set(source.source, [...(durations.get(source.source) ?? []), ms]);
      max = Math.max(max, ms);
    }
    slowest.push(max);
  }
  const rows = [...durations.entries()].map(([source, values]) => {
    const stats = summarize(values);
    return [source, `${fmt(stats.p50)} ms`, `${fmt(stats.max)} ms`];
  });
  const total = summarize(slowest);
  const out = [
    "## Wall time of one sample",
    "",
    machineLine(machine),
    "",
    `${probes} runs of \`ws-agent probe --json --window 1s\` (the second of its two samples) with ${processes} processes on the machine, ` +
      `${homes} homes in its home root besides every passwd home, and ${jupyterServers} Jupyter Servers with a kernel each (${serversSeen} found by the agent). ` +
      `Sources run concurrently: the sample takes as long as its slowest source, **${fmt(total.p50)} ms p50, ${fmt(total.max)} ms max** (target of issue 18: ≤ 50 ms).`,
    "",
    markdownTable(["source", "duration p50", "max"], rows),
    "",
  ];
  process.stdout.write(`${out.join("\n")}\n`);
}

runBenchmark(main, cleanups);
