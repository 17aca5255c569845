// Benchmark 1: what the agent costs a VM, next to node_exporter in the same run.
//
//   node bench/run.mjs agent [--interval 15s] [--duration 10m] [--warmup 2]
//   node bench/run.mjs agent --soak 2h [--interval 1s] [--soak-baseline 10m] [--heap-snapshots yes|no]
//   node bench/run.mjs agent --homes 100 [--interval 15s] [--duration 5m]
//
// The agent runs as packaging/systemd/ws-agent.service starts it: the unit's Node flags
// (ExecStart, --lite-mode ...) and its Environment= (NODE_OPTIONS), read from the unit file;
// --agent-node-flags replaces the flags (--agent-node-flags= for Node's defaults, what the single
// executable runs). The table names the accounts in /etc/passwd and the homes the agent looks into.
//
// --homes N creates users wsbench-001… with lived-in homes (skeleton files, .cache, .local/share;
// every third with a Jupyter runtime dir, every fifth with a code-server heartbeat, half of those
// touched each minute as a connected editor's are), and measures a fresh agent at 1, 10, 100 …
// up to N homes one after the other, node_exporter beside each: the cost curve, in one run. The
// users and homes are removed at the end (and any a crashed run left).
//
// On this machine, at the same time: the built collector (standalone, the
// agent's peer), a real sshd with one logged-in ssh session on a
// pseudo-terminal, a real Jupyter Server with two kernels, the bundled
// `ws-agent run` sampling every --interval with every signal on, and Debian's
// prometheus-node-exporter scraped by this harness at the same interval.
// CPU is utime+stime from /proc/PID/stat, memory VmRSS/VmHWM from
// /proc/PID/status. Processes the agent starts are counted by polling
// /proc/PID/task/*/children every 50 ms, or with --spawn-census strace by strace -f
// (clone/execve only, filtered in the kernel with --seccomp-bpf): exact, but it costs
// the agent about 7 ms of CPU per sample at 15 s (measured side by side), so CPU
// figures from such a run are not the agent's own.
//
// --soak DURATION runs as long, at a 1 s interval unless --interval says otherwise, and asks
// whether memory stays flat: RSS from the baseline (--soak-baseline, default 10 min, or a third
// of a shorter soak) to the end, and two V8 heap snapshots (the agent started with
// --heapsnapshot-signal=SIGUSR2, signalled at the baseline and at the end) summarized by
// constructor and compared.
import { spawnSync } from "node:child_process";
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import os from "node:os";
import path from "node:path";
import { startJupyterServer, startKernel, type RunningJupyter } from "../test/support/jupyter.js";
import { spawnPty, type PtySession } from "../test/support/pty.js";
import { SSH, startSshd, type RunningSshd } from "../test/support/sshd.js";
import { benchArgs, seconds } from "./lib/args.js";
import { runBenchmark, type Cleanup } from "./lib/main.js";
import { freePort, startCollector, type RunningCollector } from "./lib/collector.js";
import { delay, launch, pollFor, type Launched } from "./lib/launch.js";
import { describeMachine, type Machine, machineLine } from "./lib/machine.js";
import { agentBundle, requireBundles } from "./lib/paths.js";
import {
  childPids,
  commOf,
  cpuByThread,
  type CpuSplit,
  cpuSeconds,
  cpuSplit,
  isAlive,
  memory,
  processCount,
} from "./lib/procfs.js";
import { SOURCE_NAMES } from "@ws/protocol";
import { sampleValue } from "./lib/promtext.js";
import {
  accountsAndHomes,
  type BenchHome,
  ensureBenchHomes,
  removeBenchHomes,
  requireUseradd,
  touchHeartbeats,
  unitLaunch,
} from "./lib/homes.js";
import { describeSpawned, parseSpawnTrace, type SpawnedProcess } from "./lib/spawn-trace.js";
import { heapGrowth, readHeapSnapshot, type HeapSummary } from "./lib/heap-snapshot.js";
import { summarize } from "./lib/stats.js";
import { bytes, fmt, markdownTable, ratio } from "./lib/table.js";

const NODE_EXPORTER = "/usr/bin/prometheus-node-exporter";
const STRACE = "/usr/bin/strace";
const BENCH_USER = "wstestbench";

const USAGE =
  "usage: node bench/run.mjs agent [--interval 15s] [--duration 10m] [--warmup 2] [--agent-node-flags='--lite-mode ...'] [--agent-env MALLOC_ARENA_MAX=2] [--spawn-census poll|strace]\n" +
  "       node bench/run.mjs agent --soak 2h [--interval 1s] [--soak-baseline 10m] [--heap-snapshots yes|no] [same options]\n" +
  "       node bench/run.mjs agent --homes 100 [--duration 5m per point] [same options]";
const args = benchArgs(
  process.argv.slice(2),
  [
    "interval",
    "duration",
    "warmup",
    "agent-node-flags",
    "agent-env",
    "soak",
    "soak-baseline",
    "heap-snapshots",
    "spawn-census",
    "homes",
  ],
  USAGE,
);
if (args["spawn-census"] !== undefined && !["poll", "strace"].includes(args["spawn-census"])) {
  process.stderr.write(`--spawn-census: "${args["spawn-census"]}" is not poll or strace\n${USAGE}\n`);
  process.exit(2);
}
/** What ships: the unit's flags and environment, unless --agent-node-flags says otherwise. */
const unit = unitLaunch(process.env.WS_REPO_ROOT ?? process.cwd());
const agentNodeFlags =
  args["agent-node-flags"] === undefined ? unit.nodeFlags : args["agent-node-flags"].split(/\s+/).filter(Boolean);
const asTheUnit = args["agent-node-flags"] === undefined;
/** Extra environment for the agent ("MALLOC_ARENA_MAX=2,NAME=VALUE"), as a unit's Environment= would set. */
const agentExtraEnv: Record<string, string> = Object.fromEntries(
  (args["agent-env"] ?? "")
    .split(",")
    .filter(Boolean)
    .map((pair) => {
      const at = pair.indexOf("=");
      if (at <= 0) {
        process.stderr.write(`--agent-env: "${pair}" is not NAME=VALUE\n${USAGE}\n`);
        process.exit(2);
      }
      return [pair.slice(0, at), pair.slice(at + 1)];
    }),
);
const soakSeconds = args.soak === undefined ? undefined : seconds(args.soak, 0, "soak");
if (soakSeconds !== undefined && args.duration !== undefined) {
  process.stderr.write(`--soak is the duration of a soak run: give --soak or --duration, not both\n${USAGE}\n`);
  process.exit(2);
}
const intervalSeconds = seconds(args.interval, soakSeconds === undefined ? 15 : 1, "interval");
const durationSeconds = soakSeconds ?? seconds(args.duration, 600, "duration");
/** When the soak's first heap snapshot and baseline RSS are taken: 10 min in, or a third of a shorter soak. */
const soakBaselineSeconds =
  soakSeconds === undefined
    ? undefined
    : Math.min(seconds(args["soak-baseline"], 600, "soak-baseline"), soakSeconds < 1800 ? soakSeconds / 3 : Infinity);
if (args["heap-snapshots"] !== undefined && !["yes", "no"].includes(args["heap-snapshots"])) {
  process.stderr.write(`--heap-snapshots: "${args["heap-snapshots"]}" is not yes or no\n${USAGE}\n`);
  process.exit(2);
}
const heapSnapshots = soakSeconds !== undefined && args["heap-snapshots"] !== "no";
const homesUpTo = args.homes === undefined ? undefined : Number(args.homes);
if (homesUpTo !== undefined && (!Number.isInteger(homesUpTo) || homesUpTo < 1 || homesUpTo > 999)) {
  process.stderr.write(`--homes: "${args.homes}" is not a number of homes from 1 to 999\n${USAGE}\n`);
  process.exit(2);
}
if (homesUpTo !== undefined && soakSeconds !== undefined) {
  process.stderr.write(`--homes and --soak are separate runs\n${USAGE}\n`);
  process.exit(2);
}
/** 1, 10, 100 … up to N, and N. */
const homePoints =
  homesUpTo === undefined
    ? []
    : [...new Set([...[1, 10, 100].filter((point) => point <= homesUpTo), homesUpTo])].sort((a, b) => a - b);
const warmupIntervals = Number(args.warmup ?? 2);

interface Tick {
  atSeconds: number;
  agentCpu: number;
  exporterCpu: number;
  agentRss: number;
  exporterRss: number;
  reports: number;
  scrapes: number;
}

const cleanups: Cleanup[] = [];

async function main(): Promise<void> {
  requireBundles();
  if (!existsSync(NODE_EXPORTER)) {
    throw new Error(
      `${NODE_EXPORTER} is missing: install the Debian package prometheus-node-exporter (scripts/install-test-deps.sh)`,
    );
  }
  const machine = describeMachine();
  const dir = mkdtempSync(path.join(os.tmpdir(), "ws-bench-agent-"));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));

  const collector: RunningCollector = await startCollector({
    reportInterval: `${intervalSeconds}s`,
    policyYaml: ["  defaults:", "    autostop: enabled", "    mode: observe", "    idle-timeout: 2h"].join("\n"),
  });
  cleanups.push(() => collector.stop());

  // An ssh login on a pseudo-terminal: a utmp session whose tty the agent times.
  const sshd: RunningSshd = await startSshd({ users: [BENCH_USER] });
  cleanups.push(() => sshd.stop());
  const ssh: PtySession = spawnPty(SSH, sshd.sshArgs(BENCH_USER));
  cleanups.push(() => ssh.close());
  const tty = await ssh.shellTty({ timeoutMs: 60_000 });

  // A notebook server the agent discovers from its runtime file, with two kernels.
  const homeRoot = path.join(dir, "home");
  const runtimeDir = path.join(homeRoot, BENCH_USER, ".local/share/jupyter/runtime");
  mkdirSync(runtimeDir, { recursive: true });
  const jupyter: RunningJupyter = await startJupyterServer({ runtimeDir });
  cleanups.push(() => jupyter.stop());
  await startKernel(jupyter);
  await startKernel(jupyter);

  const exporterPort = await freePort();
  const exporter = launch(NODE_EXPORTER, [`--web.listen-address=127.0.0.1:${exporterPort}`]);
  cleanups.push(async () => void (await exporter.stop()));
  await exporter.waitFor(/Listening on|listening/i, 30_000);
  const exporterUrl = `http://127.0.0.1:${exporterPort}/metrics`;

  const agentConfig = path.join(dir, "agent.yaml");
  writeFileSync(agentConfig, "# everything comes from flags\n");
  const snapshotDir = path.join(dir, "heap");
  mkdirSync(snapshotDir);
  const agentArgs = [
    ...agentNodeFlags,
    ...(heapSnapshots ? ["--heapsnapshot-signal=SIGUSR2", `--diagnostic-dir=${snapshotDir}`] : []),
    agentBundle,
    "run",
    "--insecure",
    "--collector",
    collector.grpcAddress,
    "--namespace",
    "bench",
    "--name",
    "agent-cost",
    "--report-interval",
    `${intervalSeconds}s`,
    "--state-dir",
    path.join(dir, "state"),
    "--socket",
    path.join(dir, "agent.sock"),
    "--home-root",
    homeRoot,
  ];
  const agentEnv = {
    ...unit.env,
    ...agentExtraEnv,
    WS_AGENT_TOKEN: collector.tokenFor("bench", "agent-cost"),
    WS_AGENT_CONFIG: agentConfig,
  };
  if (homesUpTo !== undefined) {
    await homesCurve({
      agentArgs,
      agentEnv,
      collector,
      dir,
      exporterPid: exporter.pid,
      exporterUrl,
      homeRoot,
      machine,
      tty,
    });
    return;
  }
  const machineHomes = await accountsAndHomes(homeRoot);
  const traceFile = path.join(dir, "spawns.strace");
  const traced = args["spawn-census"] === "strace";
  if (traced && !straceWorks())
    throw new Error(
      `--spawn-census strace: ${STRACE} is missing or cannot trace here (install the Debian package strace; ptrace must be allowed)`,
    );
  const agentProc: Launched = traced
    ? launch(
        STRACE,
        [
          "-f",
          "--seccomp-bpf",
          "-qq",
          "-e",
          "trace=clone,clone3,fork,vfork,execve",
          "-e",
          "signal=none",
          "-o",
          traceFile,
          process.execPath,
          ...agentArgs,
        ],
        { env: agentEnv },
      )
    : launch(process.execPath, agentArgs, { env: agentEnv });
  let agentPid = agentProc.pid;
  // Signal the agent itself: strace, signalled, would detach and leave it running.
  const stopAgent = async () => {
    try {
      process.kill(agentPid, "SIGTERM");
    } catch {
      // Already gone.
    }
    const exited = await Promise.race([agentProc.exited.then(() => true), delay(10_000).then(() => false)]);
    if (!exited) {
      for (const pid of new Set([agentPid, agentProc.pid])) {
        try {
          process.kill(pid, "SIGKILL");
        } catch {
          // Already gone.
        }
      }
      await agentProc.exited;
    }
  };
  cleanups.push(stopAgent);
  await agentProc.waitFor(/connected to collector/, 60_000);
  if (traced) agentPid = await pollFor("the agent under strace", () => childPids(agentProc.pid)[0], 10_000);

  // Fallback census, and a cross-check when strace runs: children seen alive at 50 ms polls.
  const polledChildren = new Map<number, string>();
  const poller = setInterval(() => {
    for (const pid of childPids(agentPid)) if (!polledChildren.has(pid)) polledChildren.set(pid, commOf(pid));
  }, 50);
  cleanups.push(() => clearInterval(poller));

  const reportsReceived = async () =>
    sampleValue((await collector.scrape()).body, "workstation_reports_received_total") ?? 0;
  const scrapeSizes: number[] = [];
  const scrapeSeconds: number[] = [];
  let scrapes = 0;
  const scrapeExporter = async () => {
    const began = performance.now();
    const response = await fetch(exporterUrl);
    const body = await response.text();
    scrapeSeconds.push((performance.now() - began) / 1000);
    scrapeSizes.push(Buffer.byteLength(body));
    if (response.status !== 200) throw new Error(`node_exporter answered ${response.status}`);
    scrapes++;
  };

  const ticks: Tick[] = [];
  const began = performance.now();
  const record = async () => {
    ticks.push({
      atSeconds: (performance.now() - began) / 1000,
      agentCpu: cpuSeconds(agentPid),
      exporterCpu: cpuSeconds(exporter.pid),
      agentRss: memory(agentPid).rssBytes,
      exporterRss: memory(exporter.pid).rssBytes,
      reports: await reportsReceived(),
      scrapes,
    });
  };
  const totalIntervals = Math.max(warmupIntervals + 2, Math.round(durationSeconds / intervalSeconds));
  process.stderr.write(
    `bench agent: ${totalIntervals} intervals of ${intervalSeconds}s (${warmupIntervals} warm-up), ssh session on ${tty}, Jupyter pid ${jupyter.pid}, agent pid ${agentPid}${traced ? " (under strace)" : ""}\n`,
  );
  await record();
  let threadsBefore = cpuByThread(agentPid);
  let splitBefore = cpuSplit(agentPid);
  const baselineInterval =
    soakBaselineSeconds === undefined
      ? undefined
      : Math.max(warmupIntervals, Math.round(soakBaselineSeconds / intervalSeconds));
  let soakStart: SoakPoint | undefined;
  for (let i = 1; i <= totalIntervals; i++) {
    const target = began + i * intervalSeconds * 1000;
    await scrapeExporter();
    await delay(Math.max(0, target - performance.now()));
    if (!isAlive(agentPid)) throw new Error(`the agent exited:\n${agentProc.output().slice(-4000)}`);
    await record();
    if (i === warmupIntervals) {
      threadsBefore = cpuByThread(agentPid);
      splitBefore = cpuSplit(agentPid);
    }
    if (i === baselineInterval)
      soakStart = await soakPoint(agentPid, ticks.at(-1)!, heapSnapshots ? snapshotDir : undefined);
    if (i % Math.max(1, Math.round(60 / intervalSeconds)) === 0) {
      process.stderr.write(
        `bench agent: ${i}/${totalIntervals} intervals, agent RSS ${bytes(ticks.at(-1)!.agentRss)}\n`,
      );
    }
  }
  clearInterval(poller);
  const agentHwm = memory(agentPid).hwmBytes;
  const soakEnd =
    soakStart === undefined
      ? undefined
      : await soakPoint(agentPid, ticks.at(-1)!, heapSnapshots ? snapshotDir : undefined);
  const exporterHwm = memory(exporter.pid).hwmBytes;
  const threadsAfter = cpuByThread(agentPid);
  const splitAfter = cpuSplit(agentPid);
  const processesAtEnd = processCount();

  await stopAgent();
  let spawned: SpawnedProcess[];
  let censusMethod: string;
  if (traced) {
    spawned = parseSpawnTrace(readFileSync(traceFile, "utf8"), agentPid).processes;
    censusMethod =
      "strace -f (every clone/execve; strace costs the agent CPU of its own, about 7 ms per sample at 15 s, included in the CPU rows above)";
  } else {
    spawned = [...polledChildren.entries()].map(([pid, program]) => ({ pid, program, execOk: true }));
    censusMethod =
      "polling /proc/PID/task/*/children every 50 ms (may miss very short-lived children; `--spawn-census strace` counts every one)";
  }

  const first = ticks[warmupIntervals]!;
  const last = ticks.at(-1)!;
  const samples = last.reports - first.reports;
  const scraped = last.scrapes - first.scrapes;
  const wallSeconds = last.atSeconds - first.atSeconds;
  const agentCpu = last.agentCpu - first.agentCpu;
  const exporterCpu = last.exporterCpu - first.exporterCpu;
  const agentPerSample = agentCpu / samples;
  const exporterPerScrape = exporterCpu / scraped;
  const perInterval = (key: "agentCpu" | "exporterCpu") =>
    summarize(ticks.slice(warmupIntervals + 1).map((tick, i) => tick[key] - ticks[warmupIntervals + i]![key]));
  const agentIntervals = perInterval("agentCpu");
  const exporterIntervals = perInterval("exporterCpu");
  const minutes = last.atSeconds / 60;
  const scrapeSize = summarize(scrapeSizes);
  const scrapeTime = summarize(scrapeSeconds);

  const out: string[] = [];
  out.push("## Agent cost vs node_exporter (benchmark 1)", "", machineLine(machine), "");
  out.push(
    `One run, same machine: \`ws-agent run\` (bundled, every signal on) and \`prometheus-node-exporter\` (Debian, default collectors). ` +
      `${launchLine()} ` +
      `The machine has ${machineHomes.accounts} accounts in /etc/passwd and ${machineHomes.homes} homes the agent looks into (home root entries, passwd homes that exist, /root). ` +
      (Object.keys(agentExtraEnv).length ? `The agent's extra environment: \`${args["agent-env"]}\`. ` : "") +
      `Both sampled every ${intervalSeconds} s for ${fmt(minutes, 3)} minutes (${totalIntervals} intervals, the first ${warmupIntervals} left out as warm-up). ` +
      `Present during the run: an ssh login on ${tty} (real sshd), a Jupyter Server with 2 kernels, the built collector the agent reports to; ` +
      `${processesAtEnd} processes on the machine at the end (the agent reads every /proc/PID/stat each sample).` +
      (intervalSeconds < 15
        ? ` The interval is shorter than the 15 s default to get more samples in the time: per-sample figures here spread the agent's idle cost ` +
          `(timers, keepalive pings, GC) over ${fmt(15 / intervalSeconds, 2)}× more samples than at 15 s, so the 15 s per-sample cost is somewhat higher.`
        : ""),
    "",
  );
  out.push(
    markdownTable(
      ["", "ws-agent run", "node_exporter", "agent / node_exporter"],
      [
        ["samples (agent Reports / harness scrapes)", samples, scraped, ""],
        [
          "CPU per sample (user+sys)",
          `${fmt(agentPerSample * 1000)} ms`,
          `${fmt(exporterPerScrape * 1000)} ms`,
          ratio(agentPerSample, exporterPerScrape),
        ],
        [
          "CPU per interval p50 / max",
          `${fmt(agentIntervals.p50 * 1000)} / ${fmt(agentIntervals.max * 1000)} ms`,
          `${fmt(exporterIntervals.p50 * 1000)} / ${fmt(exporterIntervals.max * 1000)} ms`,
          "",
        ],
        [
          "  of which user / system",
          `${fmt(((splitAfter.userSeconds - splitBefore.userSeconds) / samples) * 1000)} / ${fmt(((splitAfter.systemSeconds - splitBefore.systemSeconds) / samples) * 1000)} ms`,
          "",
          "",
        ],
        ["  main thread / other threads", threadBreakdown(threadsBefore, threadsAfter, samples), "", ""],
        [
          "CPU share of one core",
          `${fmt((100 * agentCpu) / wallSeconds)} %`,
          `${fmt((100 * exporterCpu) / wallSeconds)} %`,
          ratio(agentCpu, exporterCpu),
        ],
        [
          `RSS after ${fmt(minutes, 3)} min (VmRSS)`,
          bytes(last.agentRss),
          bytes(last.exporterRss),
          ratio(last.agentRss, last.exporterRss),
        ],
        [
          "RSS at end of warm-up",
          bytes(first.agentRss),
          bytes(first.exporterRss),
          ratio(first.agentRss, first.exporterRss),
        ],
        ["peak RSS (VmHWM)", bytes(agentHwm), bytes(exporterHwm), ratio(agentHwm, exporterHwm)],
        [
          "processes spawned (whole run)",
          spawned.length === 0 ? "0" : describeSpawned(spawned).join(", "),
          "not counted",
          "",
        ],
        ["processes spawned per sample", fmt(spawned.length / Math.max(1, last.reports), 2), "", ""],
        [
          "payload per sample",
          "Report (see benchmark 4)",
          `${bytes(scrapeSize.p50)} text, scrape ${fmt(scrapeTime.p50 * 1000)} ms p50`,
          "",
        ],
      ],
    ),
    "",
  );
  out.push(
    `Spawned processes counted by ${censusMethod}. The GPU tool (nvidia-smi) runs on its own cadence (gpu.interval, default 30 s), not per sample; ` +
      `on a machine without it the attempt still forks once per cadence and fails with ENOENT. ` +
      `Targets (issue 9): RSS ≤ 60 MB → ${last.agentRss <= 60e6 ? "met" : `missed: ${fmt(last.agentRss / 1e6)} MB, ${fmt(100 * (last.agentRss / 60e6 - 1), 2)} % over`}; ` +
      `CPU per sample ≤ node_exporter's per scrape → ${agentPerSample <= exporterPerScrape ? "met" : `missed: ${ratio(agentPerSample, exporterPerScrape)} of node_exporter's`}; ` +
      `no process per sample except the GPU tool → ${
        traced
          ? spawned.every((p) => p.program === "nvidia-smi")
            ? "met"
            : "missed"
          : "not decided by polling (a child caught between fork and exec still has the agent's name; `--spawn-census strace` names every program)"
      }.`,
    "",
  );
  if (soakStart !== undefined && soakEnd !== undefined) out.push(...soakSection(ticks, soakStart, soakEnd));
  process.stdout.write(`${out.join("\n")}\n`);
}

/** The agent's memory at one moment of a soak, and the heap snapshot taken then (after the RSS was read). */
interface SoakPoint {
  atSeconds: number;
  rssBytes: number;
  /** RSS right after the snapshot: writing one costs the agent memory of its own. */
  rssAfterSnapshotBytes?: number;
  heap?: HeapSummary;
  snapshotFile?: string;
}

async function soakPoint(pid: number, tick: Tick, snapshotDir: string | undefined): Promise<SoakPoint> {
  const point: SoakPoint = { atSeconds: tick.atSeconds, rssBytes: memory(pid).rssBytes };
  if (snapshotDir === undefined) return point;
  const before = new Set(readdirSync(snapshotDir));
  process.kill(pid, "SIGUSR2");
  // Node writes the snapshot on the agent's main thread: done once the file stops growing.
  const file = await pollFor(
    "the agent's heap snapshot",
    () => readdirSync(snapshotDir).find((name) => name.endsWith(".heapsnapshot") && !before.has(name)),
    60_000,
  );
  let size = -1;
  await pollFor(
    "the heap snapshot to be complete",
    () => {
      const now = statSync(path.join(snapshotDir, file)).size;
      const done = now > 0 && now === size;
      size = now;
      return done;
    },
    120_000,
    1_000,
  );
  point.rssAfterSnapshotBytes = memory(pid).rssBytes;
  point.heap = readHeapSnapshot(path.join(snapshotDir, file));
  point.snapshotFile = file;
  return point;
}

/** A change in bytes with its sign. */
function change(value: number): string {
  return `${value < 0 ? "−" : "+"}${bytes(Math.abs(value))}`;
}

function soakSection(ticks: Tick[], start: SoakPoint, end: SoakPoint): string[] {
  const out: string[] = [];
  const minutes = (s: number) => fmt(s / 60, 3);
  out.push(
    `### Soak: memory from ${minutes(start.atSeconds)} to ${minutes(end.atSeconds)} min`,
    "",
    `RSS growth from the baseline to the end: ${change(end.rssBytes - start.rssBytes)} (${bytes(start.rssBytes)} → ${bytes(end.rssBytes)}; target ≤ 2 MB). ` +
      (start.rssAfterSnapshotBytes !== undefined
        ? `Writing the baseline heap snapshot itself moved the agent's RSS from ${bytes(start.rssBytes)} to ${bytes(start.rssAfterSnapshotBytes)}; ` +
          `from right after it to the end: ${change(end.rssBytes - start.rssAfterSnapshotBytes)}. ` +
          "The memory the snapshot took is free inside the agent afterwards and is reused before the RSS grows again, so with snapshots " +
          "the RSS figures understate growth: take them from a run with `--heap-snapshots no`, and the snapshots for what the JavaScript heap holds."
        : ""),
    "",
  );
  const step = Math.max(1, Math.floor(ticks.length / 12));
  const timeline = ticks.filter((_, i) => i % step === 0 || i === ticks.length - 1);
  // CPU per sample over each stretch of the timeline, from the row before: whether the cost drifts as memory might.
  const perStretch = (tick: Tick, index: number, key: "agentCpu" | "exporterCpu", count: "reports" | "scrapes") => {
    const before = timeline[index - 1];
    if (before === undefined || tick[count] === before[count]) return "";
    return `${fmt(((tick[key] - before[key]) / (tick[count] - before[count])) * 1000)} ms`;
  };
  out.push(
    markdownTable(
      [
        "minute",
        "agent RSS",
        "node_exporter RSS",
        "agent Reports so far",
        "agent CPU per sample since the row before",
        "node_exporter CPU per scrape",
      ],
      timeline.map((tick, index) => [
        minutes(tick.atSeconds),
        bytes(tick.agentRss),
        bytes(tick.exporterRss),
        tick.reports,
        perStretch(tick, index, "agentCpu", "reports"),
        perStretch(tick, index, "exporterCpu", "scrapes"),
      ]),
    ),
    "",
  );
  if (start.heap && end.heap) {
    out.push(
      `Heap snapshots (\`--heapsnapshot-signal=SIGUSR2\`): ${start.heap.nodes} objects, ${bytes(start.heap.totalSelfBytes)} at the baseline; ` +
        `${end.heap.nodes} objects, ${bytes(end.heap.totalSelfBytes)} at the end (${change(end.heap.totalSelfBytes - start.heap.totalSelfBytes)}). ` +
        "The kinds of object whose total size changed most:",
      "",
      markdownTable(
        ["kind (V8 type and constructor)", "count before → after", "self size before → after", "change"],
        heapGrowth(start.heap, end.heap).map((row) => [
          row.key.replace(/\|/g, "\\|").slice(0, 60),
          `${row.countBefore} → ${row.countAfter}`,
          `${bytes(row.bytesBefore)} → ${bytes(row.bytesAfter)}`,
          change(row.bytesAfter - row.bytesBefore),
        ]),
      ),
      "",
    );
  }
  return out;
}

/** strace can trace here (ptrace may be forbidden in a container): a one-line probe. */
function straceWorks(): boolean {
  if (!existsSync(STRACE)) return false;
  const probe = spawnSync(
    STRACE,
    ["-f", "--seccomp-bpf", "-qq", "-e", "trace=execve", "-o", "/dev/null", "/bin/true"],
    { timeout: 10_000 },
  );
  return probe.status === 0;
}

function threadBreakdown(before: Map<string, CpuSplit>, after: Map<string, CpuSplit>, samples: number): string {
  const rows = [...after.entries()]
    .map(([name, split]) => {
      const earlier = before.get(name) ?? { userSeconds: 0, systemSeconds: 0 };
      return { name, seconds: split.userSeconds + split.systemSeconds - earlier.userSeconds - earlier.systemSeconds };
    })
    .filter((row) => row.seconds > 0)
    .sort((a, b) => b.seconds - a.seconds);
  const perSample = (name: string) => fmt(((rows.find((row) => row.name === name)?.seconds ?? 0) / samples) * 1000, 2);
  return `${perSample("main thread")} / ${perSample("other threads")} ms`;
}

const HOME_SIGNALS_AGENT = "agent-home-signals";

/** The measured agent's argv for a second agent: its own name, state dir and socket. */
function secondAgentArgs(agentArgs: string[], dir: string): string[] {
  const args = [...agentArgs];
  const set = (flag: string, value: string) => {
    const at = args.indexOf(flag);
    if (at < 0) throw new Error(`the agent's argv has no ${flag}`);
    args[at + 1] = value;
  };
  set("--name", HOME_SIGNALS_AGENT);
  set("--state-dir", path.join(dir, "state-home-signals"));
  set("--socket", path.join(dir, "agent-home-signals.sock"));
  return args;
}

/** A config that turns off every signal but the two that look into homes. */
function homeSignalsConfig(dir: string): string {
  const file = path.join(dir, "home-signals.yaml");
  const off = SOURCE_NAMES.filter((name) => !["jupyter", "code_server", "leases"].includes(name));
  writeFileSync(file, `disabledSignals: [${off.join(", ")}]\n`);
  return file;
}

/** How the agent was started, for the text above a table. */
function launchLine(): string {
  const env = { ...unit.env, ...agentExtraEnv };
  const flags = agentNodeFlags.length ? `Node flags \`${agentNodeFlags.join(" ")}\`` : "Node's default flags";
  const environment = Object.entries(env)
    .map(([name, value]) => `${name}=${value}`)
    .join(" ");
  return asTheUnit
    ? `The agent ran as packaging/systemd/ws-agent.service starts it: ${flags}, environment \`${environment}\`.`
    : `The agent ran with ${flags} (not the unit's \`${unit.nodeFlags.join(" ")}\`), environment \`${environment}\`.`;
}

interface CurveSetup {
  /** The harness's scratch directory. */
  dir: string;
  agentArgs: string[];
  agentEnv: Record<string, string>;
  collector: RunningCollector;
  exporterPid: number;
  exporterUrl: string;
  homeRoot: string;
  machine: Machine;
  tty: string;
}

interface CurvePoint {
  homes: number;
  accounts: number;
  listed: number;
  samples: number;
  scrapes: number;
  processes: number;
  /** The second agent's CPU: only the Jupyter and code-server signals on, same window. */
  homeSignalsCpu: number;
  agentCpu: number;
  exporterCpu: number;
  agentRss: number;
  exporterRss: number;
  agentHwm: number;
}

/** --homes N: a fresh agent at 1, 10, 100 … N homes, each over the same window as node_exporter's scrapes. */
async function homesCurve(setup: CurveSetup): Promise<void> {
  requireUseradd();
  const leftover = removeBenchHomes();
  if (leftover > 0) process.stderr.write(`bench agent: removed ${leftover} wsbench users a earlier run left\n`);
  cleanups.push(() => removeBenchHomes());
  const pointSeconds = args.duration === undefined ? 300 : durationSeconds;
  const measured = Math.max(2, Math.round(pointSeconds / intervalSeconds));
  const made: BenchHome[] = [];
  const points: CurvePoint[] = [];
  const reportsReceived = async () =>
    sampleValue((await setup.collector.scrape()).body, "workstation_reports_received_total") ?? 0;
  let touchedAt = 0;
  for (const homes of homePoints) {
    ensureBenchHomes(homes, made);
    touchHeartbeats(made);
    const counted = await accountsAndHomes(setup.homeRoot);
    const agent = launch(process.execPath, setup.agentArgs, { env: setup.agentEnv });
    // Beside it, the same agent with only the signals that look into homes: what the homes cost, in the same window.
    const homesOnly = launch(process.execPath, secondAgentArgs(setup.agentArgs, setup.dir), {
      env: {
        ...setup.agentEnv,
        WS_AGENT_TOKEN: setup.collector.tokenFor("bench", HOME_SIGNALS_AGENT),
        WS_AGENT_CONFIG: homeSignalsConfig(setup.dir),
      },
    });
    const stop = async () => {
      await Promise.all([agent.stop("SIGTERM", 10_000), homesOnly.stop("SIGTERM", 10_000)]);
    };
    cleanups.push(stop);
    await Promise.all([
      agent.waitFor(/connected to collector/, 60_000),
      homesOnly.waitFor(/connected to collector/, 60_000),
    ]);
    process.stderr.write(
      `bench agent: ${homes} wsbench homes (${counted.homes} homes, ${counted.accounts} accounts), ${warmupIntervals} + ${measured} intervals of ${intervalSeconds}s, agent pid ${agent.pid}\n`,
    );
    let scrapes = 0;
    const snap = async () => ({
      agentCpu: cpuSeconds(agent.pid),
      homeSignalsCpu: cpuSeconds(homesOnly.pid),
      exporterCpu: cpuSeconds(setup.exporterPid),
      reports: await reportsReceived(),
      scrapes,
    });
    const began = performance.now();
    let first = await snap();
    for (let i = 1; i <= warmupIntervals + measured; i++) {
      const response = await fetch(setup.exporterUrl);
      await response.text();
      if (response.status !== 200) throw new Error(`node_exporter answered ${response.status}`);
      scrapes++;
      if (performance.now() - touchedAt >= 60_000) {
        touchHeartbeats(made);
        touchedAt = performance.now();
      }
      await delay(Math.max(0, began + i * intervalSeconds * 1000 - performance.now()));
      if (!isAlive(agent.pid)) throw new Error(`the agent exited:\n${agent.output().slice(-4000)}`);
      if (!isAlive(homesOnly.pid)) throw new Error(`the second agent exited:\n${homesOnly.output().slice(-4000)}`);
      if (i === warmupIntervals) first = await snap();
    }
    const last = await snap();
    const agentMemory = memory(agent.pid);
    points.push({
      homes,
      accounts: counted.accounts,
      listed: counted.homes,
      // Both agents report to the collector: its count is theirs together, and each samples once per interval.
      samples: (last.reports - first.reports) / 2,
      scrapes: last.scrapes - first.scrapes,
      processes: processCount(),
      homeSignalsCpu: last.homeSignalsCpu - first.homeSignalsCpu,
      agentCpu: last.agentCpu - first.agentCpu,
      exporterCpu: last.exporterCpu - first.exporterCpu,
      agentRss: agentMemory.rssBytes,
      agentHwm: agentMemory.hwmBytes,
      exporterRss: memory(setup.exporterPid).rssBytes,
    });
    await stop();
  }
  const jupyterHomes = made.filter((home) => home.jupyterRuntime).length;
  const codeServerHomes = made.filter((home) => home.codeServer).length;
  const out: string[] = [];
  out.push("## Agent cost by the number of homes (benchmark 1, `--homes`)", "", machineLine(setup.machine), "");
  out.push(
    `One run: for each point, users wsbench-001… with lived-in homes (at ${homesUpTo}: ${jupyterHomes} with a Jupyter runtime dir, ` +
      `${codeServerHomes} with a code-server heartbeat, half of those touched each minute), then a fresh \`ws-agent run\` ` +
      `(bundled, every signal on) measured over ${warmupIntervals} warm-up and ${measured} intervals of ${intervalSeconds} s, ` +
      `with Debian's \`prometheus-node-exporter\` scraped at the same interval in the same window. ${launchLine()} ` +
      `Present throughout: an ssh login on ${setup.tty} (real sshd), a Jupyter Server with 2 kernels, the built collector. ` +
      "Beside the measured agent, in the same window, a second one with every signal off but jupyter and code_server " +
      "(the two that look into homes): what the homes cost, apart from the signals whose cost follows the number of processes " +
      "(system, remote_sessions), which the machine's other work moves. " +
      "CPU is each process's own utime+stime (/proc/PID/stat), not wall time: the machine is shared, and the ratio of two " +
      "processes measured over the same window is what holds from run to run.",
    "",
  );
  out.push(
    markdownTable(
      [
        "wsbench homes",
        "accounts / homes the agent lists",
        "agent CPU per sample",
        "node_exporter CPU per scrape",
        "agent / node_exporter",
        "of it: an agent with only jupyter + code_server",
        "processes",
        "agent RSS (peak)",
        "node_exporter RSS",
      ],
      points.map((point) => [
        point.homes,
        `${point.accounts} / ${point.listed}`,
        `${fmt((point.agentCpu / point.samples) * 1000)} ms (${fmt(point.samples, 3)} samples)`,
        `${fmt((point.exporterCpu / point.scrapes) * 1000)} ms (${point.scrapes} scrapes)`,
        ratio(point.agentCpu / point.samples, point.exporterCpu / point.scrapes),
        `${fmt((point.homeSignalsCpu / point.samples) * 1000)} ms`,
        point.processes,
        `${bytes(point.agentRss)} (${bytes(point.agentHwm)})`,
        bytes(point.exporterRss),
      ]),
    ),
    "",
  );
  const verdict = (homes: number, target: number) => {
    const point = points.find((p) => p.homes === homes);
    if (point === undefined) return `${homes} homes: not measured`;
    const ratioNow = point.agentCpu / point.samples / (point.exporterCpu / point.scrapes);
    return `${homes} homes ≤ ${target}× → ${ratioNow <= target ? "met" : "missed"} (${fmt(ratioNow, 2)}×)`;
  };
  const rssOk = points.every((point) => point.agentRss <= 50e6);
  out.push(
    `Targets (issue 30): ${verdict(10, 1.0)}; ${verdict(100, 1.5)}; RSS ≤ 50 MB → ${rssOk ? "met" : "missed"} ` +
      `(largest ${fmt(Math.max(...points.map((p) => p.agentRss)) / 1e6)} MB).`,
    "",
  );
  process.stdout.write(`${out.join("\n")}\n`);
}

runBenchmark(main, cleanups);
