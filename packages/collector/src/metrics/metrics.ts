// /metrics. Two parts:
//   - the per-VM series, written as Prometheus text straight from each VM's view and cached per
//     VM: a VM's lines are rebuilt only when the VM changed (its version), so a scrape of 10k VMs
//     concatenates cached text instead of rebuilding 400k series. Nothing moves with the clock
//     alone: times are exported as Unix timestamps (the idle clock as
//     workstation_last_activity_timestamp_seconds; `time() - x` is the age), as Prometheus'
//     instrumentation guidelines say, so a scrape of an unchanged fleet only copies text.
//   - the collector's own metrics (fleet counters, health, histograms) through prom-client.
// A standby replica (not the leader) exports no per-VM series and no fleet figures: only its own
// health (workstation_collector_leader), workstation_build_info and prom-client's default process
// metrics. docs/metrics.md lists every metric; test/docs-check.test.ts keeps the two in step.
import { registerDormantMetrics } from "../outreach/dormant/metrics.js";
import type { DormantVm } from "../outreach/dormant/report.js";
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from "prom-client";
import type { StopOutcome } from "../engine/types.js";
import type { CollectorStats } from "../lib/stats.js";
import type { GivenBackRow } from "../outreach/adoption/given-back.js";
import { registerAdoptionMetrics } from "./adoption-metrics.js";
import { COLLECTOR_VERSION } from "../lib/version.js";
import type { FleetReader, VmSeriesSource, VmView } from "../model/vm-view.js";
import { ACTIVITY_SIGNALS } from "../engine/signals.js";

/** The StopResult outcomes (engine/types.ts StopOutcome). */
export const STOP_OUTCOMES = ["accepted", "refused", "failed"] as const satisfies readonly StopOutcome[];

export interface MetricsOptions {
  /** Whether this replica holds the leader lease (standalone: always). */
  leader?: () => boolean;
  /** Collector mode for workstation_build_info (default "standalone"). */
  mode?: string;
  /** prom-client's default process metrics (default on; tests turn them off for exact listings). */
  processMetrics?: boolean;
  /** What ws's own stops gave back (outreach/adoption/given-back.ts), for workstation_freed_*. */
  givenBack?: (nowMs: number) => GivenBackRow[];
  /** Dormant VMs as of the last look (Kubernetes mode; outreach/dormant/metrics.ts): totals per namespace and StorageClass. */
  dormant?: () => DormantVm[];
  /**
   * Which per-VM series each scrape carries (`metrics.vmSeries`, default "default"). A function:
   * the memory guard drops the detail set near the collector's memory limit.
   */
  vmSeries?: () => VmSeriesSet;
  /** The memory guard's latest look (lib/memory/guard.ts); absent: no memory metrics. */
  memory?: () => CollectorMemory | undefined;
  /** Agent connections on the gRPC port and their cap (agents/connection-cap.ts); absent: no connection metrics. */
  agentConnections?: () => { open: number; limit: number | undefined };
  /** The certificates this replica serves (`cert`: which one, "grpc"), with the expiry of the one new connections get; absent: none. */
  certificates?: () => ReadonlyArray<{ cert: string; expiryMs: number }>;
}

/** What the memory guard saw at its latest check. */
export interface CollectorMemory {
  /** The cgroup's working set; without a cgroup v2 memory controller, the process's RSS. */
  workingSetBytes: number;
  /** memory.max (absent without a limit). */
  limitBytes?: number;
  shedding: boolean;
}

/** prom-client default metrics that `promtool check metrics` rejects (gauges ending in _total). */
const LINT_FAILING_DEFAULTS = [
  "nodejs_active_handles_total",
  "nodejs_active_requests_total",
  "nodejs_active_resources_total",
];

const DECISION_BUCKETS = [0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.05, 0.1];
const SCRAPE_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5];

// --- per-VM families, written by hand ---------------------------------------------------------
//
// The series budget (docs/metrics.md, "Series per VM"). Every per-VM family is one entry below
// and says which set it belongs to:
//   - "default": what a Prometheus operator pays for every workstation. A default family writes
//     no always-zero series (a state that is not the VM's, a signal not showing use, a count of
//     nothing) and at most one series per VM unless its label values are few and fixed; together
//     they stay within VM_SERIES_BUDGET for a typical VM.
//   - "detail": per mount, per GPU, per reading of the latest Report; exported only with
//     `metrics.vmSeries: detailed` (what `ws-collector whatif` replays), and dropped first when
//     the collector nears its memory limit (lib/memory/guard.ts).
// Adding a per-VM family is one entry here: pick its set; the docs check and the budget test
// (packages/collector/test/metrics/metrics.test.ts) hold it to the rules.

/** Which per-VM series a scrape carries: the budgeted default set, or that plus the detail families. */
export type VmSeriesSet = "default" | "detailed";
export type SeriesTier = "default" | "detail";

/** Series per VM the default set is designed to stay within for a typical VM (docs/metrics.md). */
export const VM_SERIES_BUDGET = 12;

interface PerVmFamily {
  name: string;
  help: string;
  type: "gauge" | "counter";
  tier: SeriesTier;
  /** Sample lines of one VM; `vm` is the rendered `namespace="…",name="…"`; `detailed`: the detail set is on. */
  lines(view: VmView, vm: string, stats: CollectorStats, detailed: boolean): string[];
}

const one = (name: string, vm: string, value: number | undefined): string[] =>
  value === undefined ? [] : [`${name}{${vm}} ${formatValue(value)}`];
/** One sample only when it says something: absent instead of 0. */
const nonZero = (name: string, vm: string, value: number | undefined): string[] =>
  value === undefined || value === 0 ? [] : one(name, vm, value);
const labelled = (name: string, vm: string, label: string, value: string, sample: number): string =>
  `${name}{${vm},${label}="${escapeLabel(value)}"} ${formatValue(sample)}`;

/** A detail gauge of one value from the latest Report, exported only while the agent is connected. */
const reading = (
  name: string,
  help: string,
  pick: (r: NonNullable<VmView["readings"]>) => number | undefined,
): PerVmFamily => ({
  name,
  help,
  type: "gauge",
  tier: "detail",
  lines: (v, vm) => one(name, vm, v.readings ? pick(v.readings) : undefined),
});

/** States in which a stop is on its way: the VM's stop outcomes are exported from 0 on from here. */
const STOP_UNDERWAY = new Set(["StoppingPending", "Stopping"]);

/** Every per-VM family, in output order. */
export const PER_VM_FAMILIES: readonly PerVmFamily[] = [
  {
    name: "workstation_state",
    help: "The VM's current state: one series, value 1, label state (no series for the states it is not in).",
    type: "gauge",
    tier: "default",
    lines: (v, vm) => [labelled("workstation_state", vm, "state", v.state, 1)],
  },
  {
    // The idle clock as the time it started from, not its age: the text changes only when the VM
    // does (idle seconds: `time() - workstation_last_activity_timestamp_seconds`).
    name: "workstation_last_activity_timestamp_seconds",
    help: "Unix time the idle clock runs from: the last strong evidence of use (or weak evidence within weak-activity-max); absent while the idle clock does not run.",
    type: "gauge",
    tier: "default",
    lines: (v, vm) =>
      one(
        "workstation_last_activity_timestamp_seconds",
        vm,
        v.idleSeconds !== undefined && v.lastActivityAtMs !== undefined ? v.lastActivityAtMs / 1000 : undefined,
      ),
  },
  {
    name: "workstation_idle_timeout_seconds",
    help: "The idle timeout in force for the VM.",
    type: "gauge",
    tier: "default",
    lines: (v, vm) => one("workstation_idle_timeout_seconds", vm, v.idleTimeoutSeconds),
  },
  {
    name: "workstation_stop_deadline_timestamp_seconds",
    help: "Unix time the VM will be stopped if nothing changes (absent when no stop is scheduled).",
    type: "gauge",
    tier: "default",
    lines: (v, vm) =>
      one(
        "workstation_stop_deadline_timestamp_seconds",
        vm,
        v.stopDeadlineMs === undefined ? undefined : v.stopDeadlineMs / 1000,
      ),
  },
  {
    name: "workstation_agent_connected",
    help: "1 while the VM's agent stream is open.",
    type: "gauge",
    tier: "default",
    lines: (v, vm) => one("workstation_agent_connected", vm, v.connected ? 1 : 0),
  },
  {
    name: "workstation_signal_active",
    help: "1 for each signal family that currently shows use (no series for the families that do not).",
    type: "gauge",
    tier: "default",
    lines: (v, vm) =>
      Object.entries(v.signals)
        .filter(([, active]) => active)
        .map(([signal]) => labelled("workstation_signal_active", vm, "signal", signal, 1)),
  },
  {
    // The one per-VM series with an owner label; its value is always 1, one series per VM. It also
    // says whether autostop applies and in which mode (what workstation_autostop_enabled said as a
    // series of its own: one series per VM fewer, within the budget of 12).
    name: "workstation_vm_info",
    help: "1 for every VM; label owner is the VM's owner label value (empty when it has none), label autostop the policy mode in force (enforce, observe) or off when the VM is only watched, label profile the policy profile it names (empty: the defaults).",
    type: "gauge",
    tier: "default",
    lines: (v, vm) => [
      `workstation_vm_info{${vm},owner="${escapeLabel(v.owner ?? "")}",autostop="${v.autostop ? escapeLabel(v.mode) : "off"}",profile="${escapeLabel(v.profile ?? "")}"} 1`,
    ],
  },
  {
    name: "workstation_disk_used_ratio",
    help: "Used share of a guest filesystem (0..1): the fullest one, or every one with metrics.vmSeries detailed.",
    type: "gauge",
    tier: "default",
    lines: (v, vm, _stats, detailed) => {
      const disks = detailed ? v.disks : fullest(v.disks);
      return disks.map((d) => labelled("workstation_disk_used_ratio", vm, "mount", d.mount, d.usedRatio));
    },
  },
  {
    name: "workstation_gpus",
    help: "GPUs of the VM: those its domain declares (Kubernetes), else those its agent last reported (absent: none).",
    type: "gauge",
    tier: "default",
    lines: (v, vm) => nonZero("workstation_gpus", vm, v.gpuCount),
  },
  {
    name: "workstation_lease_expiry_timestamp_seconds",
    help: "Unix time the latest keep-running lease ends (clamped to max-keep-running).",
    type: "gauge",
    tier: "default",
    lines: (v, vm) =>
      one(
        "workstation_lease_expiry_timestamp_seconds",
        vm,
        v.leases.length > 0 ? Math.max(...v.leases.map((l) => l.expiresAtMs)) / 1000 : undefined,
      ),
  },
  {
    name: "workstation_policy_invalid_settings",
    help: "Invalid policy settings on the VM (it runs under its previous valid policy meanwhile); absent when none.",
    type: "gauge",
    tier: "default",
    lines: (v, vm) => nonZero("workstation_policy_invalid_settings", vm, v.policyErrors.length),
  },
  {
    name: "workstation_report_truncated",
    help: "1 when validation cut the VM's latest Report to the per-agent limits (docs/collector-limits.md); absent otherwise.",
    type: "gauge",
    tier: "default",
    lines: (v, vm) => nonZero("workstation_report_truncated", vm, v.truncated && v.truncated.length > 0 ? 1 : 0),
  },
  // From the VM's first stop on its way (a notice, a stop under way) every outcome is exported from 0,
  // so increase() sees the first refusal too; a VM never stopped has none of these series.
  {
    name: "workstation_stop_outcomes_total",
    help: "Stops carried out per VM, by outcome (accepted, refused, failed); from the VM's first stop on.",
    type: "counter",
    tier: "default",
    lines: (v, vm, stats) => {
      const counts = stats.stopOutcomes.get(`${v.namespace}/${v.name}`);
      if (!counts && !STOP_UNDERWAY.has(v.state)) return [];
      return STOP_OUTCOMES.map((outcome) =>
        labelled("workstation_stop_outcomes_total", vm, "outcome", outcome, counts?.get(outcome) ?? 0),
      );
    },
  },
  // --- detail: metrics.vmSeries detailed
  {
    name: "workstation_last_report_timestamp_seconds",
    help: "Unix time the collector received the VM's latest report.",
    type: "gauge",
    tier: "detail",
    lines: (v, vm) =>
      one(
        "workstation_last_report_timestamp_seconds",
        vm,
        v.lastReportAtMs === undefined ? undefined : v.lastReportAtMs / 1000,
      ),
  },
  {
    name: "workstation_gpu_utilization_ratio",
    help: "GPU utilization reported by the agent (0..1); absent for a GPU that cannot say ([N/A]).",
    type: "gauge",
    tier: "detail",
    lines: (v, vm) =>
      Object.entries(v.readings?.gpuUtilization ?? {}).map(([gpu, ratio]) =>
        labelled("workstation_gpu_utilization_ratio", vm, "gpu", gpu, ratio),
      ),
  },
  reading("workstation_gpu_processes", "Processes holding a GPU.", (r) => r.gpuProcesses),
  reading(
    "workstation_cpu_busy_ratio",
    "Share of all CPUs busy over the agent's last interval (0..1).",
    (r) => r.cpuBusyRatio,
  ),
  reading(
    "workstation_user_process_cpu_cores",
    "CPU used by non-system users' processes over the agent's last interval, in cores.",
    (r) => r.userProcessCpuCores,
  ),
  reading(
    "workstation_network_bytes_per_second",
    "Network receive plus transmit, loopback excluded.",
    (r) => r.networkBytesPerSecond,
  ),
  reading("workstation_disk_io_bytes_per_second", "Disk read plus write.", (r) => r.diskBytesPerSecond),
  reading("workstation_jupyter_busy_kernels", "Jupyter kernels executing code.", (r) => r.jupyterBusyKernels),
  reading(
    "workstation_jupyter_connected_kernels",
    "Jupyter kernels with a browser connected.",
    (r) => r.jupyterConnectedKernels,
  ),
  reading("workstation_idle_inhibitors", "logind idle inhibitor locks held in the VM.", (r) => r.idleInhibitors),
  reading(
    "workstation_remote_forward_jupyter_port",
    "Destination port of an SSH forward judged by the Jupyter server it reaches (machine traffic); absent when none.",
    (r) => r.remoteForwardJupyterPort,
  ),
  reading(
    "workstation_remote_cadence_seconds",
    "Period of the shortest regular cadence of an SSH session's traffic (a page reloading itself, a poller); absent when none.",
    (r) => r.remoteCadenceSeconds,
  ),
  {
    name: "workstation_signal_last_activity_timestamp_seconds",
    help: `Unix time of the youngest activity the latest report shows, by kind (${ACTIVITY_SIGNALS.join(", ")}).`,
    type: "gauge",
    tier: "detail",
    lines: (v, vm) =>
      Object.entries(v.readings?.lastActivityAtMs ?? {})
        .filter((entry): entry is [string, number] => entry[1] !== undefined)
        .map(([signal, atMs]) =>
          labelled("workstation_signal_last_activity_timestamp_seconds", vm, "signal", signal, atMs / 1000),
        ),
  },
  {
    name: "workstation_host_disagreement",
    help: "1 while the agent says idle and the host side does not (kind: vcpu, connection); absent otherwise.",
    type: "gauge",
    tier: "default",
    lines: (v, vm) =>
      (v.host?.disagreements ?? []).map((kind) => labelled("workstation_host_disagreement", vm, "kind", kind, 1)),
  },
];

/** The fullest filesystem (the one a disk-full alert is about), as a list of at most one. */
function fullest(disks: VmView["disks"]): VmView["disks"] {
  let top: VmView["disks"][number] | undefined;
  for (const disk of disks) if (!top || disk.usedRatio > top.usedRatio) top = disk;
  return top ? [top] : [];
}

/** Every per-VM metric name, for the docs check. */
export const PER_VM_METRIC_NAMES: readonly string[] = PER_VM_FAMILIES.map((family) => family.name);

const NEEDS_ESCAPE = /[\\\n"]/;

function escapeLabel(value: string): string {
  // Nearly every value (states, signal names, numbers) needs nothing: test once, replace rarely.
  if (!NEEDS_ESCAPE.test(value)) return value;
  return value.replace(/\\/g, "\\\\").replace(/\n/g, "\\n").replace(/"/g, '\\"');
}

function formatValue(value: number): string {
  if (Number.isNaN(value)) return "NaN";
  if (value === Infinity) return "+Inf";
  if (value === -Infinity) return "-Inf";
  return String(value);
}

/**
 * The labels that name a VM on every per-VM series: `namespace` and `name`, the labels KubeVirt's
 * own per-VMI series (kubevirt_vmi_*) carry, so the two join with `on(namespace, name)` and no
 * relabelling (docs/metrics.md, "Joins").
 */
export function vmLabels(namespace: string, name: string): string {
  return `namespace="${escapeLabel(namespace)}",name="${escapeLabel(name)}"`;
}

const NO_SAMPLES = "";

interface CachedVm {
  version: number;
  /** Whether the detail families were built into `blocks`. */
  detailed: boolean;
  /** One text block per family of PER_VM_FAMILIES (NO_SAMPLES when the VM has no sample of it). */
  blocks: string[];
  /** The labels, rendered. */
  vm: string;
  /** Samples in `blocks`. */
  series: number;
  seen: number;
  /** The scrape generation after which warm() built this entry (-1: a scrape built it). */
  warmedAfter: number;
}

/**
 * The per-VM text, cached per VM. A source whose version is negative (a reader without versions)
 * is rebuilt at every scrape.
 */
/**
 * How long a scrape rebuilds stale VMs' text before it lets the event loop go. Slices of 250 VMs
 * (tens of ms) made a 10k-VM scrape wait behind Reports 40 times: its answer took 2.8 s instead of
 * 0.7 s, and the Reports' p99 hardly moved. A tenth of a second keeps both bounded.
 */
const REFRESH_SLICE_MS = 100;

/** Lets the event loop run what waits (Reports, pings, timers) before the caller goes on. */
const letTheLoopGo = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

export class PerVmSeriesCache {
  private readonly cache = new Map<string, CachedVm>();
  private generation = 0;
  rebuilt = 0;
  /** Series per VM of the latest scrape (all its per-VM samples ÷ its VMs). */
  lastSeries = 0;

  constructor(private readonly stats: CollectorStats) {}

  get size(): number {
    return this.cache.size;
  }

  /** The whole per-VM part as one string (tests, small fleets). */
  render(sources: Iterable<VmSeriesSource>, nowMs: number, detailed = false): string {
    const refreshing = this.refresh(sources, nowMs, detailed);
    let step = refreshing.next();
    while (!step.done) step = refreshing.next();
    return [...this.familiesOf(step.value, detailed)].join("");
  }

  /**
   * The per-VM part family by family, each chunk one family's HELP, TYPE and samples of every VM:
   * a caller streaming the answer holds one family's text at a time, never the whole scrape. The
   * VMs whose text is stale are rebuilt in slices of REFRESH_SLICE_MS, with the event loop let go
   * between slices: at 20k VMs the rebuild takes seconds, and Reports, keepalive pings and the
   * API server's answers must not wait behind it.
   */
  async *families(sources: Iterable<VmSeriesSource>, nowMs: number, detailed = false): AsyncGenerator<string> {
    const refreshing = this.refresh(sources, nowMs, detailed);
    let step = refreshing.next();
    while (!step.done) {
      await letTheLoopGo();
      step = refreshing.next();
    }
    // Joining one family's lines of every VM is tens of ms at 10k: the loop goes between families too.
    for (const chunk of this.familiesOf(step.value, detailed)) {
      yield chunk;
      await letTheLoopGo();
    }
  }

  private *familiesOf(entries: CachedVm[], detailed: boolean): Generator<string> {
    let samples = 0;
    for (const cached of entries) samples += cached.series;
    for (let index = 0; index < PER_VM_FAMILIES.length; index++) {
      const family = PER_VM_FAMILIES[index]!;
      if (family.tier === "detail" && !detailed) continue;
      const parts: string[] = [`# HELP ${family.name} ${family.help}`, `# TYPE ${family.name} ${family.type}`];
      for (const cached of entries) {
        const block = cached.blocks[index]!;
        if (block !== NO_SAMPLES) parts.push(block);
      }
      yield `${parts.join("\n")}\n`;
    }
    this.lastSeries = entries.length === 0 ? 0 : samples / entries.length;
  }

  /**
   * Between scrapes: rebuilds the text of at most `limit` VMs whose state changed since their text
   * was built, so that the next scrape finds it ready and only joins cached text. A VM is warmed at
   * most once between two scrapes (a later change waits for the scrape, which rebuilds it as it
   * always did), so warming never builds more often than scraping would: the scrape's work moves
   * out of its answer time, it does not grow. Returns how many it rebuilt.
   */
  warm(sources: Iterable<VmSeriesSource>, nowMs: number, detailed: boolean, limit: number): number {
    let built = 0;
    for (const source of sources) {
      if (built >= limit) break;
      if (source.version < 0) continue;
      const cached = this.cache.get(source.id);
      if (cached && cached.version === source.version && cached.detailed === detailed) continue;
      if (cached && cached.warmedAfter === this.generation) continue;
      const fresh = this.build(source.view(nowMs), source.version, detailed);
      fresh.seen = cached?.seen ?? this.generation;
      fresh.warmedAfter = this.generation;
      this.cache.set(source.id, fresh);
      this.rebuilt++;
      built++;
    }
    return built;
  }

  /** Brings every VM's text up to date; pauses (yields) after each REFRESH_SLICE_MS of rebuilding, returns the entries in order. */
  private *refresh(
    sources: Iterable<VmSeriesSource>,
    nowMs: number,
    detailed: boolean,
  ): Generator<void, CachedVm[], void> {
    const generation = ++this.generation;
    const entries: CachedVm[] = [];
    let sliceStartedMs = performance.now();
    for (const source of sources) {
      let cached = this.cache.get(source.id);
      if (!cached || cached.version !== source.version || source.version < 0 || cached.detailed !== detailed) {
        cached = this.build(source.view(nowMs), source.version, detailed);
        this.cache.set(source.id, cached);
        this.rebuilt++;
        if (performance.now() - sliceStartedMs >= REFRESH_SLICE_MS) {
          yield;
          sliceStartedMs = performance.now();
        }
      }
      // Two scrapes can overlap now that one pauses: the later one's mark stands.
      cached.seen = Math.max(cached.seen, generation);
      entries.push(cached);
    }
    // VMs that went away take their series with them (not those a later, overlapping scrape saw).
    for (const [id, cached] of this.cache) if (cached.seen < generation) this.cache.delete(id);
    return entries;
  }

  private build(view: VmView, version: number, detailed: boolean): CachedVm {
    const vm = vmLabels(view.namespace, view.name);
    let series = 0;
    const blocks = PER_VM_FAMILIES.map((family) => {
      if (family.tier === "detail" && !detailed) return NO_SAMPLES;
      const lines = family.lines(view, vm, this.stats, detailed);
      series += lines.length;
      return lines.length === 0 ? NO_SAMPLES : lines.join("\n");
    });
    return {
      version,
      detailed,
      vm,
      blocks,
      series,
      seen: 0,
      warmedAfter: -1,
    };
  }
}

// --- the collector's own metrics, through prom-client -----------------------------------------

const exportedNames = new WeakMap<Registry, () => string[]>();
const metricChunks = new WeakMap<Registry, () => AsyncGenerator<string>>();
const perVmWarmers = new WeakMap<Registry, (limit: number) => number>();

/**
 * Builds the per-VM text of up to `limit` VMs that changed since the last scrape (PerVmSeriesCache.warm),
 * for a registry from createMetrics; the caller runs it on a timer between scrapes. Returns how many.
 */
export function warmPerVmSeries(registry: Registry, limit: number): number {
  return perVmWarmers.get(registry)?.(limit) ?? 0;
}

/**
 * The /metrics answer of a registry from createMetrics, family by family (any other registry: its
 * text in one piece). The HTTP side writes each chunk as it comes, so a scrape of 10k VMs never
 * holds its whole text, and the per-VM part is joined from each VM's cached lines.
 */
export function metricsChunks(registry: Registry): AsyncIterable<string> {
  const chunks = metricChunks.get(registry);
  if (chunks) return chunks();
  return (async function* () {
    yield await registry.metrics();
  })();
}

/** Every metric name a leader's /metrics of this registry can carry (the docs check reads it). */
export function metricNames(registry: Registry): string[] {
  return exportedNames.get(registry)?.() ?? registry.getMetricsAsArray().map((metric) => metric.name);
}

export function createMetrics(
  fleet: FleetReader,
  stats: CollectorStats,
  nowMs: () => number,
  streams: () => number,
  options: MetricsOptions = {},
): Registry {
  const leader = options.leader ?? (() => true);
  // What every replica exports: its own health.
  const health = new Registry();
  // What only the leader exports: the fleet's figures and the collector's work on it.
  const registry = new Registry();
  const perVm = new PerVmSeriesCache(stats);

  registerHealthMetrics(health, stats, leader, options);
  const counterFrom = counterMaker(registry);
  registerFleetCounters(counterFrom, fleet);
  registerReportAndRequestCounters(counterFrom, stats);
  registerWorkMetrics(registry, stats, streams);
  const scrapeDuration = new Histogram({
    name: "workstation_scrape_duration_seconds",
    help: "Time to build the /metrics answer (a scrape's own time shows from the next scrape on).",
    buckets: SCRAPE_BUCKETS,
    registers: [registry],
  });

  registerAdoptionMetrics(registry, fleet, nowMs, options.givenBack);

  registerDormantMetrics(registry, options.dormant ?? (() => []));

  // The registry handed out: the leader's own metrics, answering metrics() with everything.
  const renderFleet = registry.metrics.bind(registry);
  const renderHealth = health.metrics.bind(health);
  const vmSeries = options.vmSeries ?? (() => "default" as const);
  exportedNames.set(registry, () =>
    [...health.getMetricsAsArray(), ...registry.getMetricsAsArray()]
      .map((metric) => metric.name)
      .concat(PER_VM_METRIC_NAMES),
  );
  async function* chunks(): AsyncGenerator<string> {
    const began = performance.now();
    try {
      yield await renderHealth();
      if (!leader()) return;
      const now = nowMs();
      const sources =
        fleet.seriesSources?.() ??
        fleet.views(now).map((view) => ({ id: `${view.namespace}/${view.name}`, version: -1, view: () => view }));
      yield `${await renderFleet()}\n`;
      yield* perVm.families(sources, now, vmSeries() === "detailed");
    } finally {
      scrapeDuration.observe((performance.now() - began) / 1000);
    }
  }
  metricChunks.set(registry, chunks);
  perVmWarmers.set(registry, (limit) => {
    const sources = fleet.seriesSources?.();
    if (!sources || !leader()) return 0;
    return perVm.warm(sources, nowMs(), vmSeries() === "detailed", limit);
  });
  registry.metrics = async () => {
    let text = "";
    for await (const chunk of chunks()) text += chunk;
    return text;
  };
  return registry;
}

/** What every replica exports, leader or not: whether it leads, its build, memory, connections, certificates. */
function registerHealthMetrics(
  health: Registry,
  stats: CollectorStats,
  leader: () => boolean,
  options: MetricsOptions,
): void {
  new Gauge({
    name: "workstation_collector_leader",
    help: "1 when this collector replica holds the leader lease and acts; 0 while it waits.",
    registers: [health],
    collect() {
      this.set(leader() ? 1 : 0);
    },
  });
  new Gauge({
    name: "workstation_build_info",
    help: "The collector's version and mode (always 1).",
    labelNames: ["version", "mode"],
    registers: [health],
  }).set({ version: COLLECTOR_VERSION, mode: options.mode ?? "standalone" }, 1);
  registerMemoryMetrics(health, options.memory);
  if (options.agentConnections) registerConnectionMetrics(health, stats, options.agentConnections);
  registerCertificateAndProcessMetrics(health, options);
}

/** The leader's work on the fleet: open agent streams, and how long each decision took. */
function registerWorkMetrics(registry: Registry, stats: CollectorStats, streams: () => number): void {
  new Gauge({
    name: "workstation_agent_streams",
    help: "Open agent streams.",
    registers: [registry],
    collect() {
      this.set(streams());
    },
  });
  new Histogram({
    name: "workstation_decision_duration_seconds",
    help: "Time the decision engine took per decision.",
    buckets: DECISION_BUCKETS,
    registers: [registry],
    collect() {
      const pending = stats.pendingDecisionSeconds.splice(0);
      for (const seconds of pending) this.observe(seconds);
    },
  });
}

/** The collector's memory as its cgroup counts it, its limit, and whether it sheds (every replica's). */
function registerMemoryMetrics(health: Registry, memory: MetricsOptions["memory"]): void {
  if (memory) {
    new Gauge({
      name: "workstation_collector_memory_bytes",
      help: "The collector's memory as its cgroup counts it: memory.current less inactive file cache (the working set the OOM killer weighs); its RSS without cgroup v2.",
      registers: [health],
      collect() {
        this.set(memory()?.workingSetBytes ?? process.memoryUsage.rss());
      },
    });
    new Gauge({
      name: "workstation_collector_memory_limit_bytes",
      help: "The collector's cgroup memory limit (memory.max); +Inf when it has none.",
      registers: [health],
      collect() {
        this.set(memory()?.limitBytes ?? Number.POSITIVE_INFINITY);
      },
    });
    new Gauge({
      name: "workstation_collector_shedding",
      help: "1 while the collector is near its memory limit and sheds the detail series and chart points; 0 otherwise.",
      registers: [health],
      collect() {
        this.set(memory()?.shedding ? 1 : 0);
      },
    });
  }
}

/** The agents' port: connections open, the cap, and the connections refused, closed or evicted (every replica's). */
function registerConnectionMetrics(
  health: Registry,
  stats: CollectorStats,
  connections: NonNullable<MetricsOptions["agentConnections"]>,
): void {
  if (connections) {
    // Every replica's: the cap protects the process's descriptors whether it leads or not.
    new Gauge({
      name: "workstation_agent_connections",
      help: "Agent TCP connections open on the gRPC port (authenticated or not).",
      registers: [health],
      collect() {
        this.set(connections().open);
      },
    });
    new Gauge({
      name: "workstation_agent_connections_limit",
      help: "The most agent connections the gRPC port holds at once (grpc.maxConnections, else the open-file limit less a reserve); +Inf without a cap.",
      registers: [health],
      collect() {
        this.set(connections().limit ?? Number.POSITIVE_INFINITY);
      },
    });
    new Counter({
      name: "workstation_agent_connections_refused_total",
      help: "Agent connections closed right after accept because the gRPC port held its cap (the agent backs off and retries).",
      registers: [health],
      collect() {
        this.reset();
        this.inc(stats.agentConnectionsRefused);
      },
    });
    new Counter({
      name: "workstation_agent_connections_per_source_refused_total",
      help: "Agent connections closed right after accept because their source address held its share of unauthenticated connections (grpc.maxPendingConnectionsPerSource).",
      registers: [health],
      collect() {
        this.reset();
        this.inc(stats.agentConnectionsRefusedPerSource);
      },
    });
    new Counter({
      name: "workstation_agent_connections_deadline_closed_total",
      help: "Agent connections closed because no Hello authenticated on them within grpc.handshakeTimeout of accept (TLS, the HTTP/2 preface and the Hello included).",
      registers: [health],
      collect() {
        this.reset();
        this.inc(stats.agentConnectionsDeadlineClosed);
      },
    });
    new Counter({
      name: "workstation_agent_connections_evicted_total",
      help: "Agent connections closed to make room, by reason: cap (the oldest unauthenticated one, so a new connection gets in at the cap), same-vm (a newer connection authenticated as the same VM).",
      labelNames: ["reason"],
      registers: [health],
      collect() {
        this.reset();
        for (const reason of ["cap", "same-vm"] as const)
          this.inc({ reason }, stats.agentConnectionsEvicted.get(reason) ?? 0);
      },
    });
  }
}

/** The TLS certificates' expiry and Node's process metrics (every replica's). */
function registerCertificateAndProcessMetrics(health: Registry, options: MetricsOptions): void {
  const certificates = options.certificates;
  if (certificates) {
    // Every replica's: a standby serves agents the moment it leads.
    new Gauge({
      name: "workstation_collector_cert_expiry_timestamp_seconds",
      help: "When the TLS certificate this replica serves expires (Unix seconds), by cert (grpc: the agents' port); follows the files as they are renewed.",
      labelNames: ["cert"],
      registers: [health],
      collect() {
        this.reset();
        for (const { cert, expiryMs } of certificates()) this.set({ cert }, Math.floor(expiryMs / 1000));
      },
    });
  }
  if (options.processMetrics ?? true) {
    collectDefaultMetrics({ register: health });
    // Gauges named *_total, which promtool rejects; nodejs_active_{handles,requests,resources} (by type) carry the same counts.
    for (const name of LINT_FAILING_DEFAULTS) health.removeSingleMetric(name);
  }
}

type CounterFrom = <L extends string>(
  name: string,
  help: string,
  labelNames: readonly L[],
  fill: (inc: (labels: Partial<Record<L, string>>, value: number) => void) => void,
) => Counter<L>;

/** A counter of `registry` set at each scrape from a running total kept elsewhere. */
function counterMaker(registry: Registry): CounterFrom {
  return <L extends string>(
    name: string,
    help: string,
    labelNames: readonly L[],
    fill: (inc: (labels: Partial<Record<L, string>>, value: number) => void) => void,
  ) =>
    new Counter({
      name,
      help,
      labelNames: [...labelNames],
      registers: [registry],
      collect() {
        this.reset();
        fill((labels, value) => this.inc(labels as never, value));
      },
    });
}

/** The fleet's decisions: stops, notices, cancellations, leases, policy errors, host disagreements. */
function registerFleetCounters(counterFrom: CounterFrom, fleet: FleetReader): void {
  counterFrom(
    "workstation_stops_total",
    "VM stops decided, by trigger (idle, agent-lost) and mode (observe: would have stopped).",
    ["reason", "mode"],
    (inc) => {
      for (const [key, value] of fleet.counters().stops) {
        const [reason = "", mode = ""] = key.split("|");
        inc({ reason, mode }, value);
      }
    },
  );
  counterFrom("workstation_notices_total", "Stop notices sent to VMs.", [], (inc) => inc({}, fleet.counters().notices));
  counterFrom(
    "workstation_stop_cancelled_total",
    "Stop notices withdrawn: activity, a lease or other veto, a policy change, or the agent lost.",
    [],
    (inc) => inc({}, fleet.counters().stopsCancelled),
  );
  counterFrom("workstation_leases_granted_total", "Keep-running leases accepted.", [], (inc) =>
    inc({}, fleet.counters().leasesGranted),
  );
  counterFrom(
    "workstation_policy_errors_total",
    "Invalid policy values seen (the VM kept its previous valid policy).",
    [],
    (inc) => inc({}, fleet.counters().policyErrors),
  );
  counterFrom(
    "workstation_host_disagreements_total",
    "Times the agent said idle while the host side saw use (kind: vcpu, connection); absent without host-side evidence.",
    ["kind"],
    (inc) => {
      for (const [kind, value] of fleet.counters().hostDisagreements ?? []) inc({ kind }, value);
    },
  );
}

/** The agents' Reports and streams, the Kubernetes and HTTP requests, unhandled errors. */
function registerReportAndRequestCounters(counterFrom: CounterFrom, stats: CollectorStats): void {
  counterFrom("workstation_reports_received_total", "Reports received from agents.", [], (inc) =>
    inc({}, stats.reportsReceived),
  );
  counterFrom(
    "workstation_report_decode_failures_total",
    "Agent messages that failed to decode (kind=decode) or validate (kind=validation).",
    ["kind"],
    (inc) => {
      inc({ kind: "decode" }, stats.reportDecodeFailures);
      inc({ kind: "validation" }, stats.reportValidationFailures);
    },
  );
  counterFrom(
    "workstation_report_truncations_total",
    "Report fields cut to the per-agent limits, by field (docs/collector-limits.md).",
    ["field"],
    (inc) => {
      for (const [field, value] of stats.truncations) inc({ field }, value);
    },
  );
  counterFrom(
    "workstation_reports_rate_limited_total",
    "Reports dropped because one agent stream sent them faster than the per-stream limits (2 per second sustained, 10 at once; 4 KiB of Reports per second, one largest Report at once).",
    [],
    (inc) => inc({}, stats.reportsRateLimited),
  );
  counterFrom("workstation_auth_failures_total", "Agent streams refused, by reason.", ["reason"], (inc) => {
    for (const [reason, value] of stats.authFailures) inc({ reason }, value);
  });
  counterFrom(
    "workstation_agent_streams_refused_busy_total",
    "Agent streams told to come back later (RESOURCE_EXHAUSTED with a retry hint) because the collector was admitting Hellos at its limit.",
    [],
    (inc) => inc({}, stats.streamsRefusedBusy),
  );
  counterFrom(
    "workstation_kube_requests_total",
    "Kubernetes API requests by verb and response code.",
    ["verb", "code"],
    (inc) => {
      for (const [key, value] of stats.kubeRequests) {
        const [verb = "", code = ""] = key.split("|");
        inc({ verb, code }, value);
      }
    },
  );
  counterFrom(
    "workstation_http_requests_refused_total",
    "HTTP requests answered with an error before or outside their route (malformed request line, header or target; a form over the size limit; a route that failed), by reason.",
    ["reason"],
    (inc) => {
      for (const [reason, value] of stats.httpRefused) inc({ reason }, value);
    },
  );
  counterFrom(
    "workstation_unhandled_errors_total",
    "Errors nobody handled in this collector process, by kind (rejection: logged, kept serving; exception: logged, exited 70 for a restart). Any increase is a bug.",
    ["kind"],
    (inc) => {
      inc({ kind: "rejection" }, stats.unhandledErrors.rejection);
      inc({ kind: "exception" }, stats.unhandledErrors.exception);
    },
  );
  counterFrom(
    "workstation_agent_unhandled_errors_total",
    "Errors nobody handled in agents (each agent logged it and kept reporting), as their Reports count them. Any increase is a bug; the agents' journals say which.",
    [],
    (inc) => inc({}, stats.agentUnhandledErrors),
  );
  counterFrom(
    "workstation_agent_streams_opened_total",
    "Agent streams accepted after authentication, reconnections included.",
    [],
    (inc) => inc({}, stats.streamsOpened),
  );
}
