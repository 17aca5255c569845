// Agent variants side by side: several `ws-agent run` processes (other bundles, Node flags,
// disabled signals, a wrapper such as strace) report to one built collector and are measured
// over the same window, so the load of a shared machine weighs on all of them alike. This is
// how the steps of issue 18 were compared; benchmark 1 (bench/agent.ts) gives the figures
// against node_exporter.
//
//   node bench/run.mjs agent-variants --variants FILE.json [--interval 15s] [--duration 4m] [--warmup 2] [--jupyter-kernels 2]
//
// FILE.json: [{ "name": "lite mode", "bundle": "path/to/ws-agent.cjs" (default: the built one),
//   "nodeFlags": ["--lite-mode"], "disabledSignals": ["gpu"], "wrap": ["/usr/bin/strace", "-f", ...],
//   "env": { "NAME": "VALUE" } }, ...]
// Every variant reads this machine's /proc, /sys and /etc, as the agent does in a VM, and a home
// root of its own where, with --jupyter-kernels N (default 2; 0 for none), a real Jupyter Server
// with N kernels runs, found through its runtime file as in benchmark 1.
// CPU is utime+stime of the agent process (the wrapped program's, not the wrapper's), split
// main thread / other threads; memory is VmRSS, VmHWM and the anonymous / file-backed split of
// /proc/PID/smaps_rollup (file-backed: mostly the node binary's own pages).
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { startJupyterServer, startKernel } from "../test/support/jupyter.js";
import { benchArgs, seconds } from "./lib/args.js";
import { runBenchmark, type Cleanup } from "./lib/main.js";
import { startCollector } from "./lib/collector.js";
import { delay, launch, pollFor, type Launched } from "./lib/launch.js";
import { describeMachine, machineLine } from "./lib/machine.js";
import { agentBundle, requireBundles } from "./lib/paths.js";
import { childPids, cpuByThread, cpuSeconds, isAlive, memory } from "./lib/procfs.js";
import { sampleValue } from "./lib/promtext.js";
import { bytes, fmt, markdownTable } from "./lib/table.js";

const USAGE =
  "usage: node bench/run.mjs agent-variants --variants FILE.json [--interval 15s] [--duration 4m] [--warmup 2] [--jupyter-kernels 2]";
const args = benchArgs(process.argv.slice(2), ["variants", "interval", "duration", "warmup", "jupyter-kernels"], USAGE);
if (args.variants === undefined) {
  process.stderr.write(`--variants FILE.json is required\n${USAGE}\n`);
  process.exit(2);
}
const intervalSeconds = seconds(args.interval, 15, "interval");
const durationSeconds = seconds(args.duration, 240, "duration");
const warmupIntervals = Number(args.warmup ?? 2);
const jupyterKernels = Number(args["jupyter-kernels"] ?? 2);
if (!Number.isInteger(jupyterKernels) || jupyterKernels < 0) {
  process.stderr.write(`--jupyter-kernels: expected a whole number, got "${args["jupyter-kernels"]}"\n${USAGE}\n`);
  process.exit(2);
}

interface Variant {
  name: string;
  bundle?: string;
  nodeFlags?: string[];
  disabledSignals?: string[];
  wrap?: string[];
  env?: Record<string, string>;
}

function readVariants(file: string): Variant[] {
  const parsed = JSON.parse(readFileSync(file, "utf8")) as unknown;
  if (!Array.isArray(parsed) || parsed.length === 0)
    throw new Error(`${file}: expected a non-empty JSON array of variants`);
  return parsed.map((entry, index) => {
    const variant = entry as Variant;
    if (typeof variant?.name !== "string" || variant.name === "")
      throw new Error(`${file}: variant ${index + 1} has no "name"`);
    return variant;
  });
}

/** smaps_rollup fields in KiB. */
function rollup(pid: number): Record<string, number> {
  return Object.fromEntries(
    readFileSync(`/proc/${pid}/smaps_rollup`, "utf8")
      .split("\n")
      .map((line) => /^(\w+):\s+(\d+) kB/.exec(line))
      .filter((match): match is RegExpExecArray => match !== null)
      .map((match) => [match[1]!, Number(match[2])]),
  );
}

const mainThreadSeconds = (pid: number): number => {
  const main = cpuByThread(pid).get("main thread");
  return main ? main.userSeconds + main.systemSeconds : 0;
};

const cleanups: Cleanup[] = [];

async function main(): Promise<void> {
  requireBundles();
  const variants = readVariants(args.variants!);
  const machine = describeMachine();
  const dir = mkdtempSync(path.join(os.tmpdir(), "ws-bench-variants-"));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  const collector = await startCollector({
    reportInterval: `${intervalSeconds}s`,
    policyYaml: ["  defaults:", "    autostop: enabled", "    mode: observe", "    idle-timeout: 2h"].join("\n"),
  });
  cleanups.push(() => collector.stop());
  const homeRoot = path.join(dir, "home");
  const runtimeDir = path.join(homeRoot, "wsbench", ".local/share/jupyter/runtime");
  mkdirSync(runtimeDir, { recursive: true });
  if (jupyterKernels > 0) {
    const jupyter = await startJupyterServer({ runtimeDir });
    cleanups.push(() => jupyter.stop());
    for (let i = 0; i < jupyterKernels; i++) await startKernel(jupyter);
  }

  const agents = variants.map((variant, index) => {
    const name = `variant-${index}`;
    const config = path.join(dir, `${name}.yaml`);
    writeFileSync(
      config,
      variant.disabledSignals?.length
        ? `disabledSignals: [${variant.disabledSignals.join(", ")}]\n`
        : "# everything comes from flags\n",
    );
    mkdirSync(path.join(dir, name));
    const agentArgs = [
      ...(variant.nodeFlags ?? []),
      variant.bundle ?? agentBundle,
      "run",
      "--insecure",
      "--collector",
      collector.grpcAddress,
      "--namespace",
      "bench",
      "--name",
      name,
      "--report-interval",
      `${intervalSeconds}s`,
      "--state-dir",
      path.join(dir, name),
      "--socket",
      path.join(dir, `${name}.sock`),
      "--home-root",
      homeRoot,
    ];
    const env = { ...(variant.env ?? {}), WS_AGENT_TOKEN: collector.tokenFor("bench", name), WS_AGENT_CONFIG: config };
    const wrap = variant.wrap ?? [];
    const proc: Launched =
      wrap.length > 0
        ? launch(wrap[0]!, [...wrap.slice(1), process.execPath, ...agentArgs], { env })
        : launch(process.execPath, agentArgs, { env });
    cleanups.push(() => proc.stop());
    return { variant, proc, pid: proc.pid };
  });
  for (const agent of agents) {
    await agent.proc.waitFor(/connected to collector/, 60_000);
    if (agent.variant.wrap?.length)
      agent.pid = await pollFor(`the agent under ${agent.variant.wrap[0]}`, () => childPids(agent.proc.pid)[0], 10_000);
  }
  await delay(warmupIntervals * intervalSeconds * 1000);
  const reports = async () => sampleValue((await collector.scrape()).body, "workstation_reports_received_total") ?? 0;
  const start = agents.map((agent) => ({
    cpu: cpuSeconds(agent.pid),
    main: mainThreadSeconds(agent.pid),
    rss: memory(agent.pid).rssBytes,
  }));
  const reportsBefore = await reports();
  const began = performance.now();
  process.stderr.write(
    `bench agent-variants: ${agents.length} agents, ${fmt(durationSeconds / 60, 3)} min at ${intervalSeconds} s\n`,
  );
  while (performance.now() - began < durationSeconds * 1000) {
    await delay(Math.min(30_000, durationSeconds * 1000 - (performance.now() - began)));
    for (const agent of agents)
      if (!isAlive(agent.pid))
        throw new Error(`${agent.variant.name}: the agent exited:\n${agent.proc.output().slice(-4000)}`);
  }
  const windowSeconds = (performance.now() - began) / 1000;
  // Every agent reports once per interval; the collector's count checks that they all did.
  const samplesEach = windowSeconds / intervalSeconds;
  const received = (await reports()) - reportsBefore;

  const rows = agents.map((agent, index) => {
    const cpu = cpuSeconds(agent.pid) - start[index]!.cpu;
    const main = mainThreadSeconds(agent.pid) - start[index]!.main;
    const mem = memory(agent.pid);
    const roll = rollup(agent.pid);
    const anon = (roll.Anonymous ?? 0) * 1024;
    return [
      agent.variant.name,
      `${fmt((cpu / samplesEach) * 1000)} ms`,
      // Threads are read a moment apart from the process total: at tick resolution the difference can dip below zero.
      `${fmt((main / samplesEach) * 1000)} / ${fmt((Math.max(0, cpu - main) / samplesEach) * 1000)} ms`,
      bytes(start[index]!.rss),
      bytes(mem.rssBytes),
      bytes(mem.hwmBytes),
      `${bytes(anon)} / ${bytes((roll.Rss ?? 0) * 1024 - anon)}`,
    ];
  });
  const out = [
    "## Agent variants side by side",
    "",
    machineLine(machine),
    "",
    `${agents.length} agents reporting every ${intervalSeconds} s to one collector, measured over the same ${fmt(windowSeconds / 60, 3)} minutes after ${warmupIntervals} warm-up intervals ` +
      `(${received} Reports received, ${fmt(samplesEach, 3)} per agent expected). CPU per sample is the agent's utime+stime over the window divided by the intervals in it; ` +
      `the kernel counts CPU in 10 ms ticks, so each figure is ±${fmt(10 / samplesEach, 2)} ms. ` +
      (jupyterKernels > 0
        ? `A Jupyter Server with ${jupyterKernels} kernels ran in the agents' home root.`
        : "No Jupyter Server ran."),
    "",
    markdownTable(
      [
        "variant",
        "CPU per sample",
        "main / other threads",
        "RSS at start of window",
        "RSS at end",
        "peak RSS (VmHWM)",
        "anonymous / file-backed at end",
      ],
      rows,
    ),
    "",
  ];
  process.stdout.write(`${out.join("\n")}\n`);
}

runBenchmark(main, cleanups);
