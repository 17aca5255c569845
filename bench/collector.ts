// Benchmark 2: how many VMs one collector core holds.
//
//   node bench/run.mjs collector [--mode kubernetes|standalone] [--vms 1k,5k,10k] [--interval 15s] [--measure 45s]
//                                [--ceiling-vms 1k] [--ceiling-intervals 1s,0.5s,0.25s,0.1s] [--ceiling-measure 15s]
//                                [--mix realistic,worst] [--baseline REF]
//
// The built collector, pinned to one core (taskset), with autostop enabled in
// observe mode: in Kubernetes mode (the default) against the fake API server
// of test/support/fake-kube with N VirtualMachines seeded, or standalone. A
// load generator (bench/loadgen.ts, a separate Node process pinned to the
// other core) opens N agent streams, one HTTP/2 connection each, and sends a
// typical Report (benchmark 4's) per VM every interval. A fresh collector per
// N, so its memory is that N's alone. Measured: reports/s the collector
// counted (workstation_reports_received_total) and its CPU (utime+stime) over
// a window of reports alone; /metrics time, size and CPU on their own; RSS at
// each stage (no VM, VMs known, connected, reporting); decide() time from the
// collector's histogram (workstation_decision_duration_seconds); the Report →
// Directive round trip at the client (an upper bound on receive-to-decided);
// Kubernetes writes, from the fake API server's request log. Then at
// --ceiling-vms it shortens the interval step by step to find the most
// reports/s one core sustains. With --baseline REF (a branch, tag or commit, e.g. main's) every size
// also runs the worst case against REF's collector, built into bench/.cache/baseline/, in the same
// run: its figures beside this tree's, on the same machine at the same time.
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";
import { benchArgs, integers, seconds } from "./lib/args.js";
import { startCollector, type RunningCollector } from "./lib/collector.js";
import { delay, launch, pollFor, type Launched } from "./lib/launch.js";
import { describeMachine, machineLine } from "./lib/machine.js";
import { repoRoot, requireBundles } from "./lib/paths.js";
import { cpuSeconds, memory } from "./lib/procfs.js";
import { bucketDelta, histogramBuckets, histogramQuantile, sampleValue, type Bucket } from "./lib/promtext.js";
import { summarizeHeapSnapshot, type HeapRow } from "./lib/heap-summary.js";
import { summarize } from "./lib/stats.js";
import { bytes, fmt, markdownTable } from "./lib/table.js";
import { startFakeKube, type FakeKube, type RequestRecord } from "../test/support/fake-kube/index.js";
import type { LoadCommand, LoadStats } from "./loadgen.js";
import { parseOpenFileLimit } from "../packages/collector/src/agents/connection-cap.js";
import { REALISTIC_MIX_TEXT } from "./lib/fleet-mix.js";
import { baselineCollector, type BaselineCollector } from "./lib/baseline.js";

const USAGE =
  "usage: node bench/run.mjs collector [--mode kubernetes|standalone] [--vms 1k,10k,20k] [--interval 15s] [--measure 45s] [--ceiling-vms 1k] [--ceiling-intervals 1s,0.5s,0.25s,0.1s] [--ceiling-measure 15s] [--connect-rate N/10 per s]\n" +
  "       [--hostile-vms 50 (0: skip)] [--hostile-normal-vms 500] [--hostile-minutes 2] [--hostile-kind largest-allowed|gpu-flood] [--hostile-interval 15s]\n" +
  "       [--clients-per-loadgen 5000 (agents per load generator process)] [--heap-snapshot-vms N (default the smallest size; 0: none)]\n" +
  "       [--collector-node-flags='--cpu-prof --cpu-prof-dir=DIR' (Node flags for the measured collectors)] [--mix realistic,worst] [--worst-measure 45s (default --measure)]\n" +
  "       [--baseline REF (also run the worst case against REF's collector, e.g. main or 021e890)]";
const args = benchArgs(
  process.argv.slice(2),
  [
    "mode",
    "vms",
    "interval",
    "measure",
    "ceiling-vms",
    "ceiling-intervals",
    "ceiling-measure",
    "connect-rate",
    "collector-cpu",
    "loadgen-cpu",
    "hostile-vms",
    "hostile-normal-vms",
    "hostile-minutes",
    "hostile-kind",
    "hostile-interval",
    "clients-per-loadgen",
    "heap-snapshot-vms",
    "collector-node-flags",
    "mix",
    "worst-measure",
    "baseline",
  ],
  USAGE,
);
/**
 * The fleets each size is measured with (issue 35): "realistic" (lib/fleet-mix.ts: most VMs quiet,
 * agents that report on change) and "worst" (today's: every VM a full Report every interval).
 */
const mixes = (args.mix ?? "realistic,worst").split(",").map((m) => m.trim()) as Array<"realistic" | "worst">;
if (mixes.some((m) => m !== "realistic" && m !== "worst")) {
  process.stderr.write(`--mix must be realistic, worst or both\n${USAGE}\n`);
  process.exit(2);
}
/** The other commit's collector, run beside this tree's on the worst case (its agents' Reports every interval). */
let baseline: (BaselineCollector & { label: string }) | undefined;
if (args.baseline !== undefined) {
  try {
    const built = baselineCollector(args.baseline);
    baseline = {
      ...built,
      label: built.commit.startsWith(args.baseline)
        ? built.commit.slice(0, 7)
        : `${args.baseline} (${built.commit.slice(0, 7)})`,
    };
  } catch (error) {
    process.stderr.write(`${(error as Error).message}\n${USAGE}\n`);
    process.exit(2);
  }
}
const mode = args.mode ?? "kubernetes";
if (mode !== "kubernetes" && mode !== "standalone") {
  process.stderr.write(`--mode must be kubernetes or standalone\n${USAGE}\n`);
  process.exit(2);
}
const vmCounts = args.vms === "0" ? [] : integers(args.vms, [1000, 10000, 20000], "vms");
const intervalSeconds = seconds(args.interval, 15, "interval");
const measureSeconds = seconds(args.measure, 45, "measure");
/** The worst case's window: its VMs send every sample, so it needs no window that holds a heartbeat. */
const worstMeasureSeconds = seconds(args["worst-measure"], measureSeconds, "worst-measure");
const windowFor = (mix: "realistic" | "worst") => (mix === "worst" ? worstMeasureSeconds : measureSeconds);
const ceilingVms = args["ceiling-vms"] === "0" ? 0 : integers(args["ceiling-vms"], [1000], "ceiling-vms")[0]!;
const ceilingIntervals = (args["ceiling-intervals"] ?? "1s,0.5s,0.25s,0.1s")
  .split(",")
  .map((text) => seconds(text.trim(), 1, "ceiling-intervals"));
const ceilingMeasureSeconds = seconds(args["ceiling-measure"], 15, "ceiling-measure");
/** Agents opening streams per second: by default every agent within 10 s (a collector restart, a network blip). */
const connectRateFor = (count: number) => Number(args["connect-rate"] ?? Math.max(1000, count / 10));
const hostileVms = args["hostile-vms"] === "0" ? 0 : integers(args["hostile-vms"], [50], "hostile-vms")[0]!;
const hostileNormalVms = integers(args["hostile-normal-vms"], [500], "hostile-normal-vms")[0]!;
const hostileMinutes = Number(args["hostile-minutes"] ?? 2);
const hostileKind = (args["hostile-kind"] ?? "largest-allowed") as "largest-allowed" | "gpu-flood";
if (hostileKind !== "largest-allowed" && hostileKind !== "gpu-flood") {
  process.stderr.write(`--hostile-kind must be largest-allowed or gpu-flood\n${USAGE}\n`);
  process.exit(2);
}
const hostileIntervalSeconds = seconds(args["hostile-interval"], 15, "hostile-interval");
/** The fleet size whose collector's heap snapshot is summed by type (0: none; default the smallest). */
const heapSnapshotVms =
  args["heap-snapshot-vms"] === "0"
    ? 0
    : integers(args["heap-snapshot-vms"], [vmCounts[0] ?? 0], "heap-snapshot-vms")[0]!;
const collectorCpu = args["collector-cpu"] ?? "1";
/** Node flags for each fleet's collector, e.g. a CPU profile of the run (--cpu-prof writes it when the collector exits). */
const collectorNodeFlags = (args["collector-node-flags"] ?? "").split(/\s+/).filter(Boolean);
const loadgenCpu = args["loadgen-cpu"] ?? "0";
/** Agents per load generator process: a fleet larger than this is spread over several. */
const clientsPerLoadgen = integers(args["clients-per-loadgen"], [5000], "clients-per-loadgen")[0]!;
const SCRAPE_EVERY_SECONDS = 15;
/**
 * The open-file limit of the collector and the load generators: a socket per agent, so at 20k a
 * limit of 20,000 (this shell's, on the reference machine) is exhausted. 1,048,576 is what a
 * container gets from a containerd whose unit sets LimitNOFILE=infinity (Node raises its soft limit
 * to the hard one at start). Raising a hard limit needs CAP_SYS_RESOURCE: without it the processes
 * keep the harness's limit, and the tables say which one they ran under.
 */
const WANTED_OPEN_FILES = 1_048_576;
const OPEN_FILES: number | undefined =
  spawnSync("/usr/bin/prlimit", [`--nofile=${WANTED_OPEN_FILES}:${WANTED_OPEN_FILES}`, "--", "/bin/true"]).status === 0
    ? WANTED_OPEN_FILES
    : undefined;
/** The open-file limit the measured processes run under. */
const openFilesLimit = (): number =>
  OPEN_FILES ?? parseOpenFileLimit(readFileSync("/proc/self/limits", "utf8")) ?? Number.NaN;
/** The burst ends when every agent is in, or when none more got in for this long. */
const PLATEAU_MS = 45_000;
const DECISION_HISTOGRAM = "workstation_decision_duration_seconds";

const loadgenBundle = path.join(repoRoot, "bench/.cache/loadgen.mjs");

/** One load generator process (bench/loadgen.ts), driven over IPC. */
class LoadProcess {
  private waiting: Array<(value: unknown) => void> = [];
  constructor(readonly proc: Launched) {
    proc.child.on("message", (message) => this.waiting.shift()?.(message));
  }
  static start(): LoadProcess {
    if (!existsSync(loadgenBundle))
      throw new Error(`${loadgenBundle} is missing: run the benchmark through bench/run.mjs, which bundles it`);
    return new LoadProcess(
      launch(process.execPath, ["--max-old-space-size=8192", loadgenBundle], {
        cpus: loadgenCpu,
        ipc: true,
        ...(OPEN_FILES ? { openFiles: OPEN_FILES } : {}),
      }),
    );
  }
  request<T>(command: LoadCommand, timeoutMs = 600_000): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`load generator did not answer ${command.cmd}:\n${this.proc.output().slice(-2000)}`)),
        timeoutMs,
      );
      this.waiting.push((value) => {
        clearTimeout(timer);
        resolve(value as T);
      });
      this.proc.child.send(command);
    });
  }
}

/**
 * The load generator, spread over processes of at most --clients-per-loadgen agents each (one Node
 * process holding 20k gRPC clients died in issue 14's runs). VMs are numbered across the
 * processes, so each VM is opened once; stats are summed.
 */
class LoadGenerator {
  private opened = 0;
  private constructor(private readonly processes: LoadProcess[]) {}
  static start(agents: number): LoadGenerator {
    const count = Math.max(1, Math.ceil(agents / clientsPerLoadgen));
    return new LoadGenerator(Array.from({ length: count }, () => LoadProcess.start()));
  }
  get size(): number {
    return this.processes.length;
  }
  async request<T>(command: LoadCommand, timeoutMs = 600_000): Promise<T> {
    if (command.cmd === "open") {
      // Fill the processes in turn, each up to its share; a later group (hostile VMs) goes to the least loaded.
      const share = Math.ceil(command.count / this.processes.length);
      const parts = this.processes.map((_, i) => Math.max(0, Math.min(share, command.count - i * share)));
      const answers = await Promise.all(
        this.processes.map((proc, i) => {
          if (parts[i] === 0) return { ok: true };
          const firstIndex = this.opened + i * share;
          return proc.request<{ ok: boolean; error?: string }>(
            {
              ...command,
              count: parts[i]!,
              firstIndex,
              perSecond: Math.max(1, command.perSecond / this.processes.length),
            },
            timeoutMs,
          );
        }),
      );
      this.opened += command.count;
      const failed = answers.find((answer) => !answer.ok);
      return (failed ?? { ok: true }) as T;
    }
    const answers = await Promise.all(this.processes.map((proc) => proc.request<unknown>(command, timeoutMs)));
    return answers[0] as T;
  }
  async stats(): Promise<LoadStats> {
    const all = await Promise.all(this.processes.map((proc) => proc.request<LoadStats>({ cmd: "stats" })));
    const sum = (pick: (stats: LoadStats) => number) => all.reduce((total, stats) => total + pick(stats), 0);
    return {
      opened: sum((s) => s.opened),
      connected: sum((s) => s.connected),
      ended: sum((s) => s.ended),
      reconnects: sum((s) => s.reconnects),
      refusedBusy: sum((s) => s.refusedBusy),
      reportsSent: sum((s) => s.reportsSent),
      samplesTaken: sum((s) => s.samplesTaken),
      directives: sum((s) => s.directives),
      roundTripsMs: all.flatMap((s) => s.roundTripsMs),
      endReasons: all.flatMap((s) => s.endReasons),
      cpuSeconds: sum((s) => s.cpuSeconds),
      rssBytes: sum((s) => s.rssBytes),
      loopDelayMaxMs: Math.max(...all.map((s) => s.loopDelayMaxMs)),
    };
  }
  async close(): Promise<void> {
    await Promise.all(
      this.processes.map(async (proc) => {
        await proc.request({ cmd: "close" }, 30_000).catch(() => undefined);
        await proc.proc.stop("SIGTERM", 5_000);
      }),
    );
  }
}

interface Scrape {
  startedAtMs: number;
  seconds: number;
  cpuSeconds: number;
  bytes: number;
  series: number;
  body: string;
}

/** One GET /metrics, with the collector CPU it cost (the collector keeps serving reports meanwhile: an upper bound). */
async function timedScrape(collector: RunningCollector): Promise<Scrape> {
  const cpuBefore = cpuSeconds(collector.pid);
  const startedAtMs = performance.now();
  const scrape = await collector.scrape();
  const series = scrape.body.split("\n").filter((line) => line !== "" && !line.startsWith("#")).length;
  return {
    startedAtMs,
    seconds: scrape.seconds,
    cpuSeconds: cpuSeconds(collector.pid) - cpuBefore,
    bytes: scrape.bytes,
    series,
    body: scrape.body,
  };
}

interface Window {
  seconds: number;
  /** Reports the collector counted between the first two scrapes, per second of the time between them. */
  reportsPerSecond: number;
  collectorCpu: number;
  rss: number;
  decisions: Bucket[];
  roundTripsMs: number[];
  loadCpu: number;
  loadSent: number;
  loadRss: number;
  /** Streams the collector ended during the window (the generator opens them again, as agents do). */
  dropped: number;
  /** Samples the simulated agents took in the window, sent or not. */
  loadSamples: number;
  scrapes: Scrape[];
  /** The scrapes inside the window, every SCRAPE_EVERY_SECONDS as Prometheus makes them: what the collector's cache sees in service. */
  cadenceScrapes: Scrape[];
}

/**
 * A window of reports with /metrics scraped every SCRAPE_EVERY_SECONDS inside it, as Prometheus
 * does (the collector builds changed VMs' series between scrapes, so the cadence matters), between
 * two scrapes that read the counters, then one more scrape.
 */
async function measure(collector: RunningCollector, load: LoadGenerator, windowSeconds: number): Promise<Window> {
  const first = await timedScrape(collector);
  const loadBefore = await load.stats();
  const cpuBefore = cpuSeconds(collector.pid);
  const began = performance.now();
  const cadenceScrapes: Scrape[] = [];
  for (let at = SCRAPE_EVERY_SECONDS; at <= windowSeconds; at += SCRAPE_EVERY_SECONDS) {
    await delay(Math.max(0, began + at * 1000 - performance.now()));
    cadenceScrapes.push(await timedScrape(collector));
  }
  await delay(Math.max(0, began + windowSeconds * 1000 - performance.now()));
  const cpuAfter = cpuSeconds(collector.pid);
  const ended = performance.now();
  const loadAfter = await load.stats();
  const second = await timedScrape(collector);
  const third = await timedScrape(collector);
  const counter = (scrape: Scrape) => sampleValue(scrape.body, "workstation_reports_received_total") ?? 0;
  return {
    seconds: (ended - began) / 1000,
    reportsPerSecond: (counter(second) - counter(first)) / ((second.startedAtMs - first.startedAtMs) / 1000),
    collectorCpu: cpuAfter - cpuBefore,
    rss: memory(collector.pid).rssBytes,
    decisions: bucketDelta(
      histogramBuckets(first.body, DECISION_HISTOGRAM),
      histogramBuckets(second.body, DECISION_HISTOGRAM),
    ),
    roundTripsMs: loadAfter.roundTripsMs,
    loadCpu: loadAfter.cpuSeconds - loadBefore.cpuSeconds,
    loadSent: loadAfter.reportsSent - loadBefore.reportsSent,
    loadSamples: loadAfter.samplesTaken - loadBefore.samplesTaken,
    loadRss: loadAfter.rssBytes,
    dropped: loadAfter.ended - loadBefore.ended,
    scrapes: [first, second, third],
    cadenceScrapes,
  };
}

interface Fleet {
  collector: RunningCollector;
  load: LoadGenerator;
  /** The fake API server in Kubernetes mode. */
  kube?: FakeKube;
  /** Collector RSS with its inventory (Kubernetes mode: N VMs known) and no agent, then with every VM connected (Hello only). */
  rssIdle: number;
  rssConnected: number;
  burst: BurstFigures;
}

/** The reconnect burst every run starts with. */
interface BurstFigures {
  /** Over how long the agents opened their streams. */
  connectSeconds: number;
  /** Until every stream was accepted, or until the last one that got in (see connected). */
  upSeconds: number;
  /** Streams accepted when the burst ended: every agent's, or fewer when none more got in for PLATEAU_MS. */
  connected: number;
  /** The collector's connection cap (workstation_agent_connections_limit; +Inf: none) and the connections it turned away at it. */
  connectionCap: number;
  refusedAtCap: number;
  /** Hellos answered RESOURCE_EXHAUSTED with a retry hint (they came back later). */
  refusedBusy: number;
  /** Stream attempts that ended otherwise (reset, timed out, a step-down) and were retried with backoff. */
  failedAttempts: number;
  cpuSeconds: number;
  /** The collector's longest event-loop stall over the burst (prom-client's nodejs_eventloop_lag_max_seconds since start). */
  maxLoopLagSeconds: number;
  leadershipLostDuringBurst: number;
}

async function withFleet<T>(
  count: number,
  interval: number,
  body: (fleet: Fleet) => Promise<T>,
  extraVms = 0,
  heapSnapshots = false,
  mix: "realistic" | "worst" = "worst",
  bundle?: string,
): Promise<T> {
  let kube: FakeKube | undefined;
  if (mode === "kubernetes") {
    kube = await startFakeKube();
    // Every VM's launcher pod at 127.0.0.1: the address the generator's connections come from.
    for (let i = 0; i < count + extraVms; i++)
      kube.seedWorkstation({ namespace: "bench", name: vmName(i), podIp: "127.0.0.1" });
  }
  let collector: RunningCollector;
  try {
    collector = await startCollector({
      reportInterval: `${interval}s`,
      tick: "5s",
      cpus: collectorCpu,
      ...(OPEN_FILES ? { openFiles: OPEN_FILES } : {}),
      policyYaml: ["  defaults:", "    autostop: enabled", "    mode: observe", "    idle-timeout: 2h"].join("\n"),
      ...(kube ? { kubeconfig: kube.kubeconfigPath } : {}),
      heapSnapshots,
      nodeFlags: collectorNodeFlags,
      ...(bundle ? { bundle } : {}),
    });
  } catch (error) {
    await kube?.close();
    throw error;
  }
  let load: LoadGenerator | undefined;
  try {
    await collector.scrape();
    await delay(2_000);
    const rssIdle = memory(collector.pid).rssBytes;
    load = LoadGenerator.start(count + extraVms);
    const keyText = readFileSync(path.join(collector.dir, "token.key"), "utf8").trim();
    const connectRate = connectRateFor(count);
    const cpuBefore = cpuSeconds(collector.pid);
    const began = performance.now();
    // The burst: every agent connects within count / rate seconds and reports from its first Directive on, as after a restart.
    const opened = await load.request<{ ok: boolean; error?: string }>({
      cmd: "open",
      address: collector.grpcAddress,
      keyText,
      namespace: "bench",
      count,
      perSecond: connectRate,
      intervalSeconds: interval,
      ...(mix === "realistic" ? { mix: "realistic" as const } : {}),
    });
    if (!opened.ok) throw new Error(`load generator: ${opened.error}`);
    const generator = load;
    // Every agent in, or no new one for PLATEAU_MS (a collector at its connection cap, a machine
    // too small for the fleet): then the run goes on with the agents that got in, and says so.
    let best = 0;
    let roseAtMs = performance.now();
    const connected = await pollFor(
      `${count} streams accepted`,
      async () => {
        const stats = await generator.stats();
        if (process.env.WS_BENCH_TRACE)
          process.stderr.write(
            `bench collector: t=${fmt((performance.now() - began) / 1000)} s connected ${stats.connected} ended ${stats.ended} generator loop max ${fmt(stats.loopDelayMaxMs)} ms collector CPU ${fmt(cpuSeconds(collector.pid) - cpuBefore)} s\n`,
          );
        if (stats.connected >= count) return stats;
        if (stats.connected > best) {
          best = stats.connected;
          roseAtMs = performance.now();
        }
        // Refusals with a retry hint are the admission control at work; other ends (a connection
        // reset or timed out in the burst, a step-down) are retried by the agents' backoff and
        // counted in the burst table.
        if (best > 0 && performance.now() - roseAtMs > PLATEAU_MS) return stats;
        return undefined;
      },
      Math.max(180_000, (count / connectRate) * 8_000),
      1_000,
    );
    const upSeconds = ((connected.connected >= count ? performance.now() : roseAtMs) - began) / 1000;
    if (connected.connected < count)
      process.stderr.write(
        `bench collector: only ${connected.connected} of ${count} streams accepted: none more for ${PLATEAU_MS / 1000} s; measuring with those\n`,
      );
    const failedAttempts = connected.ended - connected.refusedBusy;
    if (failedAttempts > 0)
      process.stderr.write(
        `bench collector: ${failedAttempts} stream attempts failed without a retry hint and were retried: ${summarizeReasons(connected.endReasons)}\n`,
      );
    const burstCpu = cpuSeconds(collector.pid) - cpuBefore;
    process.stderr.write(
      `bench collector: ${connected.connected} of ${count} streams up in ${fmt(upSeconds)} s (${connected.refusedBusy} told to retry later)\n`,
    );
    const afterBurst = await collector.scrape();
    const rssConnected = memory(collector.pid).rssBytes;
    const burst: BurstFigures = {
      connectSeconds: count / connectRate,
      upSeconds,
      connected: connected.connected,
      connectionCap: sampleValue(afterBurst.body, "workstation_agent_connections_limit") ?? Number.POSITIVE_INFINITY,
      refusedAtCap: sampleValue(afterBurst.body, "workstation_agent_connections_refused_total") ?? 0,
      refusedBusy: connected.refusedBusy,
      failedAttempts,
      cpuSeconds: burstCpu,
      maxLoopLagSeconds: sampleValue(afterBurst.body, "nodejs_eventloop_lag_max_seconds") ?? NaN,
      leadershipLostDuringBurst: leadershipLosses(collector),
    };
    return await body({ collector, load, rssIdle, rssConnected, burst, ...(kube ? { kube } : {}) });
  } finally {
    if (load) {
      const stats = await load.stats().catch(() => undefined);
      if (stats && stats.ended > 0)
        process.stderr.write(
          `bench collector: ${stats.ended} stream ends during the run: ${summarizeReasons(stats.endReasons)}\n`,
        );
    }
    if (kube) process.stderr.write(`bench collector: ${kubeDiagnostics(kube)}\n`);
    // The collector's own log, beside the results, for a look at anything odd.
    mkdirSync(path.join(repoRoot, "bench/results"), { recursive: true });
    writeFileSync(path.join(repoRoot, `bench/results/collector-${mode}-${count}-${mix}.log`), collector.proc.output());
    await load?.close();
    await collector.stop();
    await kube?.close();
  }
}

/** Max RSS sampled every 2 s over `ms`, and the collector CPU spent meanwhile. */
async function watchRss(pid: number, ms: number): Promise<{ maxRss: number; cpu: number }> {
  const cpuBefore = cpuSeconds(pid);
  let maxRss = 0;
  for (const end = performance.now() + ms; performance.now() < end; ) {
    maxRss = Math.max(maxRss, memory(pid).rssBytes);
    await delay(2_000);
  }
  return { maxRss: Math.max(maxRss, memory(pid).rssBytes), cpu: cpuSeconds(pid) - cpuBefore };
}

/** The hostile-agent benchmark: ordinary VMs, then hostile ones beside them; RSS and the ordinary VMs' round trips. */
async function hostileRun(): Promise<{ rows: Array<Array<string | number>>; p99Ratio: number }> {
  return withFleet(
    hostileNormalVms,
    intervalSeconds,
    async ({ collector, load }) => {
      await delay((intervalSeconds + 10) * 1000);
      await load.stats(); // drains the round trips of the warm-up
      const phaseMs = hostileMinutes * 60_000;
      const baseline = await watchRss(collector.pid, Math.min(phaseMs, 60_000));
      const baselineRtt = summarize((await load.stats()).roundTripsMs);
      const keyText = readFileSync(path.join(collector.dir, "token.key"), "utf8").trim();
      const opened = await load.request<{ ok: boolean; error?: string }>({
        cmd: "open",
        address: collector.grpcAddress,
        keyText,
        namespace: "bench",
        count: hostileVms,
        perSecond: 1000,
        intervalSeconds,
        hostile: hostileKind,
        ownIntervalSeconds: hostileIntervalSeconds,
      });
      if (!opened.ok) throw new Error(`load generator: ${opened.error}`);
      const during = await watchRss(collector.pid, phaseMs);
      const duringRtt = summarize((await load.stats()).roundTripsMs);
      const row = (
        phase: string,
        watch: { maxRss: number; cpu: number },
        rtt: ReturnType<typeof summarize>,
        seconds: number,
      ) => [
        phase,
        bytes(watch.maxRss),
        `${fmt(rtt.p50)} / ${fmt(rtt.p99)} ms`,
        `${fmt((100 * watch.cpu) / seconds)} %`,
      ];
      return {
        rows: [
          row(`${hostileNormalVms} ordinary VMs alone`, baseline, baselineRtt, Math.min(phaseMs, 60_000) / 1000),
          row(`+ ${hostileVms} hostile VMs, ${hostileMinutes} min`, during, duringRtt, phaseMs / 1000),
        ],
        p99Ratio: duringRtt.p99 / baselineRtt.p99,
      };
    },
    hostileVms,
  );
}

/** RSS of a collector in this mode that knows no VM: the zero the per-VM figures count from. */
/** The live V8 heap a scrape reports (prom-client's nodejs_heap_size_used_bytes): RSS less GC headroom and native memory. */
const heapUsed = (body: string) => sampleValue(body, "nodejs_heap_size_used_bytes") ?? NaN;

/** An empty collector's RSS and live heap (no VM): what per-VM figures are taken over. */
async function emptyCollector(bundle?: string): Promise<{ rss: number; heap: number }> {
  const kube = mode === "kubernetes" ? await startFakeKube() : undefined;
  try {
    const collector = await startCollector({
      reportInterval: `${intervalSeconds}s`,
      tick: "5s",
      cpus: collectorCpu,
      policyYaml: ["  defaults:", "    autostop: enabled", "    mode: observe", "    idle-timeout: 2h"].join("\n"),
      ...(kube ? { kubeconfig: kube.kubeconfigPath } : {}),
      ...(bundle ? { bundle } : {}),
    });
    try {
      await collector.scrape();
      await delay(2_000);
      const heap = heapUsed((await collector.scrape()).body);
      return { rss: memory(collector.pid).rssBytes, heap };
    } finally {
      await collector.stop();
    }
  } finally {
    await kube?.close();
  }
}

function worstFigures(
  f: { cpuWithScrapes: number; scrapeSeconds: number; rttP99: number; bytesPerVm: number } | undefined,
): string {
  return f
    ? `${fmt(100 * f.cpuWithScrapes)} % / ${fmt(f.scrapeSeconds * 1000)} ms / ${fmt(f.rttP99)} ms / ${fmt(f.bytesPerVm / 1000)} KB`
    : "not run";
}

/**
 * The collector's own event-loop delay over the window, from prom-client's gauges in each scrape
 * (each covers the time since the previous scrape): the stalls a Report can wait behind, on the
 * collector's side of the client's round trip.
 */
function loopStalls(scrapes: readonly { body: string }[]): string {
  const worst = (name: string) => Math.max(0, ...scrapes.map((scrape) => sampleValue(scrape.body, name) ?? 0));
  return `${fmt(worst("nodejs_eventloop_lag_max_seconds") * 1000)} / ${fmt(worst("nodejs_eventloop_lag_p99_seconds") * 1000)} ms`;
}

/** Times the collector stepped down so far (Kubernetes mode): each drops every agent stream. */
function leadershipLosses(collector: RunningCollector): number {
  return (collector.proc.output().match(/lost the leadership/g) ?? []).length;
}

/** "3× reason; 2× other" with the reasons' timestamps and addresses folded, so alike ends count together. */
function summarizeReasons(reasons: readonly string[]): string {
  const counts = new Map<string, number>();
  for (const entry of reasons) {
    const match = /^(\d+)× (.*)$/s.exec(entry);
    const n = match ? Number(match[1]) : 1;
    const reason = (match ? match[2]! : entry)
      .replace(/\(\d{4}-[^)]*\)/g, "")
      .replace(/127\.0\.0\.1:\d+/g, "127.0.0.1:PORT")
      .slice(0, 120);
    counts.set(reason, (counts.get(reason) ?? 0) + n);
  }
  return [...counts.entries()].map(([reason, n]) => `${n}× ${reason}`).join("; ");
}

/** Per-VM samples of a scrape: the lines that name a bench VM. */
function vmSeriesIn(body: string): number {
  let count = 0;
  for (let at = body.indexOf('name="vm-'); at !== -1; at = body.indexOf('name="vm-', at + 1)) count++;
  return count;
}

/** The generator names VM i the same way (bench/loadgen.ts). */
function vmName(i: number): string {
  return `vm-${String(i).padStart(5, "0")}`;
}

/** Writes to the API server (not reads, not watches); leader-election renewals counted apart, being per collector. */
function kubeWrites(kube: FakeKube, fromMs: number, toMs: number): { vmWrites: RequestRecord[]; leaseWrites: number } {
  const writes = kube.requests.filter(
    (r) => !r.watch && r.method !== "GET" && r.receivedAtMs >= fromMs && r.receivedAtMs < toMs,
  );
  const isLease = (r: RequestRecord) => r.path.includes("/coordination.k8s.io/");
  return { vmWrites: writes.filter((r) => !isLease(r)), leaseWrites: writes.filter(isLease).length };
}

/** The longest time between two Lease requests the API server received (the renewal interval is 5 s). */
function longestLeaseGapMs(kube: FakeKube): number {
  const leases = kube.requests.filter((r) => r.path.includes("/coordination.k8s.io/") && !r.watch);
  return Math.max(0, ...leases.slice(1).map((r, i) => r.receivedAtMs - leases[i]!.receivedAtMs));
}

/** Lease renewals and VM writes as the API server saw them: did a renewal wait behind the writes, or never leave? */
function kubeDiagnostics(kube: FakeKube): string {
  const leases = kube.requests.filter((r) => r.path.includes("/coordination.k8s.io/") && !r.watch);
  const gaps = leases.slice(1).map((r, i) => r.receivedAtMs - leases[i]!.receivedAtMs);
  const served = (r: RequestRecord) => (r.answeredAtMs ?? r.receivedAtMs) - r.receivedAtMs;
  const patches = kube.requests.filter((r) => r.method === "PATCH");
  const patchLatency = summarize(patches.map(served));
  const leaseLatency = summarize(leases.map(served));
  return (
    `API server view: ${leases.length} Lease requests, longest gap between two ${fmt(Math.max(0, ...gaps))} ms, ` +
    `served in p50 ${fmt(leaseLatency.p50)} / max ${fmt(leaseLatency.max)} ms; ${patches.length} PATCHes served in p50 ${fmt(patchLatency.p50)} / p99 ${fmt(patchLatency.p99)} ms`
  );
}

function describeWrites(writes: readonly RequestRecord[]): string {
  const kinds = new Map<string, number>();
  for (const write of writes) {
    const kind = `${write.method} ${write.path.includes("/events") ? "Event" : write.path.includes("/stop") ? "stop" : write.path.includes("virtualmachines") ? "VM" : write.path.split("/").slice(-2, -1)[0]}`;
    kinds.set(kind, (kinds.get(kind) ?? 0) + 1);
  }
  return [...kinds.entries()].map(([kind, n]) => `${kind} ${n}`).join(", ") || "none";
}

function quantileMs(buckets: Bucket[], q: number): string {
  const value = histogramQuantile(buckets, q);
  return value === undefined ? "n/a" : `${fmt(value * 1000)} ms`;
}

async function main(): Promise<void> {
  requireBundles();
  const machine = describeMachine();
  const scaleRows: Array<Array<string | number>> = [];
  const scrapeRows: Array<Array<string | number>> = [];
  const memoryRows: Array<Array<string | number>> = [];
  const writeRows: Array<Array<string | number>> = [];
  const findings: Array<{
    vms: number;
    mix: "realistic" | "worst";
    /** Run against the --baseline commit's collector. */
    baseline: boolean;
    samplesPerSecond: number;
    reportsPerSecond: number;
    cpuShare: number;
    cpuWithScrapes: number;
    scrapeSeconds: number;
    bytesPerVm: number;
    heapPerVm: number;
    receivedShare: number;
    leadershipLost: number;
    steadyWritesPerVmHour: number | undefined;
    rttP99: number;
    seriesPerVm: number;
    scrapeBytes: number;
    upSeconds: number;
    connectSeconds: number;
    connected: number;
    connectionCap: number;
  }> = [];
  let heap: { vms: number; rows: HeapRow[]; totalBytes: number } | undefined;
  const burstRows: Array<Array<string | number>> = [];
  const empty = await emptyCollector();
  const emptyBaseline = baseline ? await emptyCollector(baseline.bundle) : undefined;
  const failures: string[] = [];
  const runs = [
    ...mixes.map((mix) => ({ mix, baseline: false })),
    ...(baseline ? [{ mix: "worst" as const, baseline: true }] : []),
  ];
  for (const count of vmCounts)
    for (const { mix, baseline: onBaseline } of runs) {
      const started = performance.now();
      const label = onBaseline ? `${count} worst, ${baseline!.label}` : `${count} ${mix}`;
      const { rss: rssEmpty, heap: heapEmpty } = onBaseline ? emptyBaseline! : empty;
      try {
        await withFleet(
          count,
          intervalSeconds,
          async ({ collector, load, rssIdle, rssConnected, kube, burst }) => {
            const fleetStartMs = performance.now();
            // Every VM has reported at least once and the first-report work is behind.
            await delay((intervalSeconds + 10) * 1000);
            const windowStartMs = performance.now();
            process.stderr.write(`bench collector: ${new Date().toISOString()} window starts\n`);
            const window = await measure(collector, load, windowFor(mix));
            if (kube) {
              const warmup = kubeWrites(kube, 0, windowStartMs);
              const steady = kubeWrites(kube, windowStartMs, performance.now());
              const hours = (performance.now() - windowStartMs) / 3_600_000;
              writeRows.push([
                label,
                `${fmt(warmup.vmWrites.length / count)} (${describeWrites(warmup.vmWrites)})`,
                `${fmt(steady.vmWrites.length / count / hours)} (${describeWrites(steady.vmWrites)})`,
                fmt((warmup.leaseWrites + steady.leaseWrites) / ((performance.now() - fleetStartMs) / 3_600_000)),
              ]);
            }
            const rtt = summarize(window.roundTripsMs);
            // Measured with the scrapes in the window; "reports alone" takes their CPU out again.
            const timed = window.cadenceScrapes.length > 0 ? window.cadenceScrapes : window.scrapes;
            const scrapeWall = summarize(timed.map((scrape) => scrape.seconds));
            const scrapeCpu = summarize(timed.map((scrape) => scrape.cpuSeconds));
            const cadenceCpu = window.cadenceScrapes.reduce((sum, scrape) => sum + scrape.cpuSeconds, 0);
            const cpuShare = (window.collectorCpu - cadenceCpu) / window.seconds;
            const cpuWithScrapes =
              window.cadenceScrapes.length > 0
                ? window.collectorCpu / window.seconds
                : cpuShare + scrapeCpu.p50 / SCRAPE_EVERY_SECONDS;
            // Per reporting VM: when fewer agents got in than VMs are known, the cost is theirs (conservative).
            const reporting = Math.min(count, burst.connected);
            const perVm = (window.rss - rssEmpty) / reporting;
            const heapPerVm = (heapUsed(window.scrapes.at(-1)!.body) - heapEmpty) / reporting;
            const leadershipLost = leadershipLosses(collector);
            const steadyWrites = kube
              ? kubeWrites(kube, windowStartMs, performance.now()).vmWrites.length /
                count /
                ((performance.now() - windowStartMs) / 3_600_000)
              : undefined;
            findings.push({
              vms: count,
              mix,
              baseline: onBaseline,
              samplesPerSecond: window.loadSamples / window.seconds,
              reportsPerSecond: window.reportsPerSecond,
              cpuShare,
              cpuWithScrapes,
              scrapeSeconds: scrapeWall.p50,
              bytesPerVm: perVm,
              heapPerVm,
              receivedShare: window.reportsPerSecond / (count / intervalSeconds),
              leadershipLost,
              steadyWritesPerVmHour: steadyWrites,
              rttP99: rtt.p99,
              seriesPerVm: vmSeriesIn(window.scrapes.at(-1)!.body) / count,
              scrapeBytes: window.scrapes.at(-1)!.bytes,
              upSeconds: burst.upSeconds,
              connectSeconds: burst.connectSeconds,
              connected: burst.connected,
              connectionCap: burst.connectionCap,
            });
            burstRows.push([
              label,
              `${fmt(burst.connectSeconds)} s`,
              `${fmt(burst.upSeconds)} s`,
              burst.refusedBusy,
              burst.failedAttempts,
              `${fmt(burst.cpuSeconds)} s`,
              `${fmt(burst.maxLoopLagSeconds * 1000)} ms`,
              kube ? `${fmt(longestLeaseGapMs(kube))} ms` : "n/a (standalone)",
              `${burst.leadershipLostDuringBurst} / ${leadershipLost}`,
              Number.isFinite(burst.connectionCap)
                ? `${burst.connectionCap} / ${burst.refusedAtCap}`
                : `none / ${burst.refusedAtCap}`,
            ]);
            scaleRows.push([
              label,
              fmt(window.loadSamples / window.seconds),
              fmt(window.reportsPerSecond),
              `${fmt(100 * cpuShare)} %`,
              `${fmt(100 * cpuWithScrapes)} %`,
              `${fmt((100 * cpuWithScrapes * 1000) / count)} %`,
              `${quantileMs(window.decisions, 0.5)} / ${quantileMs(window.decisions, 0.99)}`,
              `${fmt(rtt.p50)} / ${fmt(rtt.p99)} ms`,
              `${window.dropped} / ${leadershipLosses(collector)}`,
              loopStalls([...window.cadenceScrapes, window.scrapes[1]!]),
            ]);
            const last = window.scrapes.at(-1)!;
            scrapeRows.push([
              label,
              bytes(last.bytes),
              last.series,
              fmt(vmSeriesIn(last.body) / count),
              `${fmt(scrapeWall.p50 * 1000)} ms (max ${fmt(scrapeWall.max * 1000)})`,
              `${fmt(scrapeCpu.p50 * 1000)} ms`,
            ]);
            memoryRows.push([
              label,
              bytes(rssEmpty),
              bytes(rssIdle),
              bytes(rssConnected),
              bytes(window.rss),
              bytes((rssIdle - rssEmpty) / count),
              bytes((rssConnected - rssIdle) / count),
              bytes((window.rss - rssConnected) / count),
              bytes(perVm),
              bytes(heapPerVm),
              `${fmt((100 * window.loadCpu) / window.seconds)} %`,
              bytes(window.loadRss),
            ]);
            // Last, after the figures are kept: writing a snapshot stops the collector for as long as it
            // takes (at 10k VMs long enough for the agents' keepalives to give up and reconnect).
            if (count === heapSnapshotVms && mix === mixes[0] && !onBaseline) {
              try {
                const file = await collector.heapSnapshot();
                heap = { vms: count, ...summarizeHeapSnapshot(file) };
                // WS_BENCH_KEEP_HEAP_SNAPSHOT=PATH keeps it for a closer look (e.g. in Chrome's DevTools).
                if (process.env.WS_BENCH_KEEP_HEAP_SNAPSHOT) renameSync(file, process.env.WS_BENCH_KEEP_HEAP_SNAPSHOT);
                else rmSync(file, { force: true });
              } catch (error) {
                failures.push(
                  `${label} VMs, heap snapshot (the figures stand): ${(error as Error).message.slice(0, 300)}`,
                );
              }
            }
          },
          0,
          count === heapSnapshotVms && mix === mixes[0] && !onBaseline,
          mix,
          onBaseline ? baseline!.bundle : undefined,
        );
      } catch (error) {
        // One size failing (the machine too busy for the burst) leaves the others' figures standing.
        failures.push(`${label} VMs: ${(error as Error).message.slice(0, 400)}`);
        process.stderr.write(`bench collector: ${label} VMs FAILED: ${(error as Error).message.slice(0, 400)}\n`);
        continue;
      }
      const f = findings.at(-1)!;
      process.stderr.write(
        `bench collector: ${label} VMs done in ${fmt((performance.now() - started) / 1000)} s: ${fmt(f.bytesPerVm / 1000)} KB/VM, ` +
          `${fmt(f.seriesPerVm)} series/VM, /metrics p50 ${fmt(f.scrapeSeconds * 1000)} ms, CPU ${fmt(100 * f.cpuWithScrapes)} %, ` +
          `p99 ${fmt(f.rttP99)} ms, leadership lost ${f.leadershipLost}, all up after ${fmt(f.upSeconds)} s\n`,
      );
    }

  const hostile = hostileVms > 0 ? await hostileRun() : undefined;
  const hostileRows = hostile?.rows ?? [];
  const ceilingRows: Array<Array<string | number>> = [];
  if (ceilingVms > 0) {
    await withFleet(ceilingVms, intervalSeconds, async ({ collector, load }) => {
      await delay((intervalSeconds + 5) * 1000);
      for (const interval of ceilingIntervals) {
        await load.request({ cmd: "interval", seconds: interval });
        await delay(Math.max(5, interval * 3) * 1000);
        const window = await measure(collector, load, ceilingMeasureSeconds);
        const rtt = summarize(window.roundTripsMs);
        ceilingRows.push([
          `${ceilingVms} × every ${interval} s`,
          fmt(ceilingVms / interval),
          fmt(window.loadSent / window.seconds),
          fmt(window.reportsPerSecond),
          `${fmt((100 * window.collectorCpu) / window.seconds)} %`,
          `${fmt((window.collectorCpu / window.seconds / Math.max(1, window.reportsPerSecond)) * 1000)} ms`,
          `${fmt(rtt.p50)} / ${fmt(rtt.p99)} ms`,
          `${fmt((100 * window.loadCpu) / window.seconds)} %`,
          `${window.dropped} / ${leadershipLosses(collector)}`,
        ]);
        process.stderr.write(`bench collector: ceiling step ${interval}s done\n`);
      }
    });
  }

  const out: string[] = [];
  out.push(
    "## Collector scale (benchmark 2)",
    "",
    machineLine(machine),
    "",
    `Open files: the collector and the load generators run with a limit of ${openFilesLimit().toLocaleString("en-US")} (soft = hard)${OPEN_FILES ? "" : ", this harness's own: raising it needs CAP_SYS_RESOURCE"}; the collector holds one socket per agent.`,
    "",
  );
  out.push(
    (mode === "kubernetes"
      ? `The built collector in **Kubernetes mode** against the fake API server (test/support/fake-kube, in the harness process), ` +
        `N VirtualMachines seeded with their launcher pods at 127.0.0.1 (the identity check passes for loopback connections), leader election on; `
      : `The built collector in **standalone mode**, `) +
      `pinned to CPU ${collectorCpu} with taskset; ` +
      `the load generator (Node, @grpc/grpc-js through @ws/protocol's adapter, one HTTP/2 connection per VM) pinned to CPU ${loadgenCpu}. ` +
      `Two fleets per size: "worst", today's worst case, where each VM sends a typical Report (benchmark 4: 3 sessions, 1 Jupyter server with 2 kernels, 1 GPU, 2 mounts; 1.3 kB) every ${intervalSeconds} s at a random phase, as agents before reports on change; ` +
      `"realistic", where each VM samples every ${intervalSeconds} s and sends what the collector's ReportWhen asks for (the agent's own gate): ${REALISTIC_MIX_TEXT}; ` +
      `policy: autostop enabled, observe mode, idle-timeout 2h; VMs are decided on their Reports and at the deadlines their decisions name (no tick). Each N gets a fresh collector. ` +
      `Every run starts with a reconnect burst: all N agents open their streams within ${args["connect-rate"] ? `N / ${args["connect-rate"]} s` : "10 s (at least 1,000 per second)"}, as after a collector restart, and report from their first Directive on. ` +
      `CPU and reports/s over a ${measureSeconds} s window (${worstMeasureSeconds === measureSeconds ? "both mixes" : `the worst case: ${worstMeasureSeconds} s`}) after ${intervalSeconds + 10} s of warm-up, with /metrics scraped every ${SCRAPE_EVERY_SECONDS} s inside it as Prometheus does ` +
      `(the scrape times are those scrapes'; "reports + deadlines" is the window's CPU less theirs). ` +
      `The orchestrating harness and other processes on this 2-core machine share the cores.`,
    "",
  );
  out.push(
    markdownTable(
      [
        "VMs, mix",
        "offered samples/s",
        "received reports/s",
        "collector CPU, reports + deadlines",
        `+ /metrics every ${SCRAPE_EVERY_SECONDS} s`,
        "CPU per 1k VMs (all)",
        "decide() p50 / p99 (histogram)",
        "Report→Directive p50 / p99 (client)",
        "streams dropped in window / leadership lost (so far)",
        "collector event-loop delay in window: longest / p99 (worst scrape)",
      ],
      scaleRows,
    ),
    "",
  );
  out.push(
    "decide() is the engine's pure decision as the collector's own histogram times it (per report and per deadline; bucket-interpolated); it leaves out receiving, " +
      "decoding, validation and the Directive. The client round trip covers all of that plus the generator's own queueing and loopback: an upper bound " +
      "on receive-to-decided.",
    "",
  );
  out.push(
    markdownTable(
      [
        "VMs",
        "/metrics size",
        "series (all)",
        "per-VM series per VM",
        "scrape time p50 (max), every 15 s",
        "collector CPU per scrape",
      ],
      scrapeRows,
    ),
    "",
  );
  out.push(
    markdownTable(
      [
        "VMs",
        "RSS, no VM",
        "RSS, VMs known, no agent",
        "RSS, after the burst (all connected and reporting)",
        "RSS, steady window",
        "per VM: inventory",
        "per VM: connection and first reports",
        "per VM: steady reports and state",
        "per VM: all",
        "per VM: live heap",
        "load generator CPU",
        "load generator RSS",
      ],
      memoryRows,
    ),
    "",
  );
  out.push(
    "RSS is what the kernel charges the process: V8 heap including garbage not yet collected and its headroom, plus native memory " +
      "(HTTP/2 sessions, socket buffers). The collector keeps each VM's latest decoded Report (its heap size is in benchmark 4). " +
      "Live heap is nodejs_heap_size_used_bytes at the last scrape less an empty collector's, per VM: what the collector's own objects take.",
    "",
  );
  out.push("### Reconnect burst", "");
  out.push(
    markdownTable(
      [
        "VMs",
        "agents connect over",
        "all streams accepted after",
        "Hellos told to retry later (RESOURCE_EXHAUSTED + hint)",
        "attempts failed otherwise, retried",
        "collector CPU over the burst",
        "longest event-loop stall (burst)",
        "longest gap between Lease requests (whole run)",
        "leadership lost: burst / whole run",
        "agent connection cap / connections refused at it",
      ],
      burstRows,
    ),
    "",
  );
  out.push(
    "The collector admits 400 Hellos per second (a token bucket, agents/server.ts); the others are answered RESOURCE_EXHAUSTED with a " +
      "retry hint that grows with the backlog, and come back after it, ±50 % (the agent's connection.ts; the load generator does the same). " +
      "The Lease is renewed every 5 s; a gap near 10 s would be a step-down.",
    "",
  );
  if (writeRows.length) {
    out.push(
      markdownTable(
        [
          "VMs",
          "API writes per VM until the window (connect, first reports)",
          "API writes per VM per hour, steady window",
          "leader-lease writes per hour (whole collector)",
        ],
        writeRows,
      ),
      "",
    );
  }
  if (ceilingRows.length) {
    out.push(`### Ceiling: shorter intervals at ${ceilingVms} VMs`, "");
    out.push(
      markdownTable(
        [
          "load",
          "offered reports/s",
          "sent reports/s",
          "received reports/s",
          "collector CPU",
          "CPU per report",
          "Report→Directive p50 / p99",
          "load generator CPU",
          "streams dropped in window / leadership lost (so far)",
        ],
        ceilingRows,
      ),
      "",
    );
    out.push(
      "Where sent falls short of offered the generator (one core) is the limit, not the collector; where received falls short of sent, " +
        "or the round trip grows without bound, the collector is.",
      "",
    );
  }
  if (hostileRows.length) {
    out.push(
      `### Hostile agents: ${hostileVms} VMs sending the ${hostileKind === "largest-allowed" ? "largest Report validation keeps" : "1 MB Report of 515,000 GPU processes"}`,
      "",
    );
    out.push(
      markdownTable(
        ["phase", "collector RSS (max)", "other VMs' Report→Directive p50 / p99", "collector CPU"],
        hostileRows,
      ),
      "",
    );
    out.push(
      `${hostileNormalVms} ordinary VMs report every ${intervalSeconds} s throughout; then ${hostileVms} more VMs send the hostile Report every ${hostileIntervalSeconds} s for ${hostileMinutes} min. ` +
        "RSS is sampled every 2 s (its maximum shown); the round trips are the ordinary VMs' only.",
      "",
    );
  }
  if (heap) {
    out.push(`### Where the heap goes: a heap snapshot at ${heap.vms} VMs, by type`, "");
    out.push(
      markdownTable(
        ["type (V8 kind and constructor)", "objects", "self size", "per VM", "share"],
        heap.rows
          .slice(0, 18)
          .map((row) => [
            row.kind,
            row.count,
            bytes(row.bytes),
            bytes(row.bytes / heap!.vms),
            `${fmt((100 * row.bytes) / heap!.totalBytes)} %`,
          ]),
      ),
      "",
      `Live heap in the snapshot: ${bytes(heap.totalBytes)} (${bytes(heap.totalBytes / heap.vms)} per VM, the collector's fixed heap included). ` +
        "A snapshot holds only live objects (V8 collects first), so this is the floor RSS cannot go under; RSS adds native memory " +
        "(HTTP/2 sessions and socket buffers in Node's C++), the heap's free space and code.",
      "",
    );
  }
  if (failures.length) out.push("### Sizes that failed", "", ...failures.map((failure) => `- ${failure}`), "");
  if (findings.length) {
    out.push("### Issue 27 figures", "");
    out.push(
      markdownTable(
        [
          "VMs",
          "memory per VM (RSS)",
          "live heap per VM",
          "per-VM series per VM",
          "/metrics p50 / size",
          "CPU, /metrics every 15 s",
          "Report→Directive p99",
          "hostile p99 ratio",
          "leadership lost",
          "every agent connected after",
        ],
        findings.map((f) => [
          f.baseline ? `${f.vms} worst, ${baseline!.label}` : `${f.vms} ${f.mix}`,
          `${fmt(f.bytesPerVm / 1000)} KB`,
          `${fmt(f.heapPerVm / 1000)} KB`,
          fmt(f.seriesPerVm),
          `${fmt(f.scrapeSeconds * 1000)} ms / ${bytes(f.scrapeBytes)}`,
          `${fmt(100 * f.cpuWithScrapes)} %`,
          `${fmt(f.rttP99)} ms`,
          hostile ? `${fmt(hostile.p99Ratio)}× (${hostileNormalVms} + ${hostileVms} VMs)` : "not run",
          f.leadershipLost,
          f.connected >= f.vms
            ? `${fmt(f.upSeconds)} s (connecting over ${fmt(f.connectSeconds)} s)`
            : `no: ${f.connected} of ${f.vms}, the last after ${fmt(f.upSeconds)} s, none more in ${PLATEAU_MS / 1000} s` +
              (Number.isFinite(f.connectionCap) ? ` (the collector's connection cap: ${f.connectionCap})` : ""),
        ]),
      ),
      "",
      "Targets: memory ≤ 40 KB per VM, ≤ 12 series per VM, /metrics p50 ≤ 0.5 s and CPU ≤ 20 % of a core at 10k VMs, " +
        "Report→Directive p99 ≤ 50 ms, hostile p99 ratio ≤ 2×, 0 leadership lost at 20k. The hostile ratio is measured once, " +
        "on its own fleet (the ordinary VMs' p99 with the hostile VMs beside them over their p99 alone).",
      "",
    );
  }
  // Issue 14's targets are today's worst case: every VM a full Report every interval.
  const at = (vms: number) => findings.find((f) => f.vms === vms && f.mix === "worst" && !f.baseline);
  const baselineAt = (vms: number) => findings.find((f) => f.vms === vms && f.baseline);
  const lost = (vms: number) => (at(vms) ? String(at(vms)!.leadershipLost) : "not run");
  const realistic = findings.filter((f) => f.mix === "realistic");
  if (realistic.length > 0) {
    out.push("### Targets (issue 35): the realistic mix, beside the worst case", "");
    const worstOf = (vms: number) => at(vms);
    out.push(
      markdownTable(
        [
          "VMs",
          "collector CPU, /metrics every 15 s (≤ 10 %)",
          "offered samples / received Reports (≥ 5×)",
          "/metrics p50 (≤ 250 ms)",
          "Report→Directive p99 (≤ 50 ms)",
          "RSS per VM (≤ 80 KB)",
          "leadership lost (0)",
          "worst case: CPU / /metrics p50 / p99 / RSS per VM",
          ...(baseline ? [`${baseline.label}, worst case: CPU / /metrics p50 / p99 / RSS per VM`] : []),
        ],
        realistic.map((f) => {
          const worst = worstOf(f.vms);
          return [
            f.vms,
            `${fmt(100 * f.cpuWithScrapes)} %`,
            `${fmt(f.samplesPerSecond / Math.max(1e-9, f.reportsPerSecond))}× (${fmt(f.samplesPerSecond)} / ${fmt(f.reportsPerSecond)} per s)`,
            `${fmt(f.scrapeSeconds * 1000)} ms`,
            `${fmt(f.rttP99)} ms`,
            `${fmt(f.bytesPerVm / 1000)} KB`,
            f.leadershipLost,
            worstFigures(worst),
            ...(baseline ? [worstFigures(baselineAt(f.vms))] : []),
          ];
        }),
      ),
      "",
      `The realistic mix: ${REALISTIC_MIX_TEXT}.`,
      "",
    );
  }
  const tenK = at(10_000) ?? findings.filter((f) => f.mix === "worst" && !f.baseline).at(-1);
  if (tenK) {
    out.push("### Targets (issue 14)", "");
    const figure = (value: number | undefined, format: (v: number) => string) =>
      value === undefined ? "not measured" : format(value);
    out.push(
      markdownTable(
        ["figure", "target", `measured (${tenK.vms} VMs unless named)`],
        [
          [
            "leadership lost during a 10k / 20k reconnect burst and the window after it",
            "0 / 0",
            `${lost(10_000)} / ${lost(20_000)}`,
          ],
          ["reports received / offered at 10k VMs every 15 s", "≥ 0.99", fmt(tenK.receivedShare)],
          [
            "collector CPU at 10k VMs every 15 s, /metrics every 15 s included",
            "≤ 25 % of a core",
            `${fmt(100 * tenK.cpuWithScrapes)} %`,
          ],
          ["/metrics at 10k VMs, p50", "≤ 0.5 s", `${fmt(tenK.scrapeSeconds * 1000)} ms`],
          [
            "memory per VM while reporting",
            "≤ 40 KB",
            `${fmt(tenK.bytesPerVm / 1000)} KB RSS (${fmt(tenK.heapPerVm / 1000)} KB of it live V8 heap)`,
          ],
          ["API writes per VM per hour, steady state", "0", figure(tenK.steadyWritesPerVmHour, fmt)],
        ],
      ),
      "",
    );
  }
  process.stdout.write(`${out.join("\n")}\n`);
}

main().catch((error) => {
  process.stderr.write(`${(error as Error).stack ?? String(error)}\n`);
  process.exitCode = 1;
});
