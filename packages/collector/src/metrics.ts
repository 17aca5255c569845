// /metrics. Two parts:
//   - the per-VM series, written as Prometheus text straight from each VM's view and cached per
//     VM: a VM's lines are rebuilt only when the VM changed (its version), so a scrape of 10k VMs
//     concatenates cached text instead of rebuilding 400k series. Only workstation_idle_seconds,
//     which moves with the clock, is computed at each scrape (one line per VM).
//   - the collector's own metrics (fleet counters, health, histograms) through prom-client.
// A standby replica (not the leader) exports no per-VM series and no fleet figures: only its own
// health (workstation_collector_leader), workstation_build_info and prom-client's default process
// metrics. docs/metrics.md lists every metric; test/metrics.test.ts keeps the two in step.
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from "prom-client";
import type { StopOutcome } from "./engine/types.js";
import type { CollectorStats } from "./stats.js";
import type { GivenBackRow } from "./adoption/given-back.js";
import { registerAdoptionMetrics } from "./adoption-metrics.js";
import { COLLECTOR_VERSION } from "./version.js";
import type { FleetReader, VmSeriesSource, VmView } from "./model/vm-view.js";
import { ACTIVITY_SIGNALS } from "./model/readings.js";

export const STATES = ["Unknown", "Active", "StoppingPending", "Stopping", "Stopped", "AgentLost"];
/** The StopResult outcomes (engine/types.ts StopOutcome). */
export const STOP_OUTCOMES = ["accepted", "refused", "failed"] as const satisfies readonly StopOutcome[];

export interface MetricsOptions {
  /** Whether this replica holds the leader lease (standalone: always). */
  leader?: () => boolean;
  /** Collector mode for workstation_build_info (default "standalone"). */
  mode?: string;
  /** prom-client's default process metrics (default on; tests turn them off for exact listings). */
  processMetrics?: boolean;
  /** What ws's own stops gave back (adoption/given-back.ts), for workstation_freed_*. */
  givenBack?: (nowMs: number) => GivenBackRow[];
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

interface PerVmFamily {
  name: string;
  help: string;
  type: "gauge" | "counter";
  /** Sample lines of one VM; `vm` is the rendered `namespace="…",vm="…"`. */
  lines(view: VmView, vm: string, stats: CollectorStats): string[];
}

const one = (name: string, vm: string, value: number | undefined): string[] =>
  value === undefined ? [] : [`${name}{${vm}} ${formatValue(value)}`];
const labelled = (name: string, vm: string, label: string, value: string, sample: number): string =>
  `${name}{${vm},${label}="${escapeLabel(value)}"} ${formatValue(sample)}`;

/** A gauge of one value from the latest Report, exported only while the agent is connected. */
const reading = (
  name: string,
  help: string,
  pick: (r: NonNullable<VmView["readings"]>) => number | undefined,
): PerVmFamily => ({
  name,
  help,
  type: "gauge",
  lines: (v, vm) => one(name, vm, v.readings ? pick(v.readings) : undefined),
});

const IDLE_SECONDS = "workstation_idle_seconds";
const IDLE_HELP = "Seconds since the last strong evidence of use (the idle clock).";

/** Every per-VM family but workstation_idle_seconds (computed at scrape time), in output order. */
export const PER_VM_FAMILIES: readonly PerVmFamily[] = [
  {
    name: "workstation_idle_timeout_seconds",
    help: "The idle timeout in force for the VM.",
    type: "gauge",
    lines: (v, vm) => one("workstation_idle_timeout_seconds", vm, v.idleTimeoutSeconds),
  },
  {
    name: "workstation_last_activity_timestamp_seconds",
    help: "Unix time of the last strong evidence of use.",
    type: "gauge",
    lines: (v, vm) =>
      one(
        "workstation_last_activity_timestamp_seconds",
        vm,
        v.lastActivityAtMs === undefined ? undefined : v.lastActivityAtMs / 1000,
      ),
  },
  {
    name: "workstation_last_report_timestamp_seconds",
    help: "Unix time the collector received the VM's latest report.",
    type: "gauge",
    lines: (v, vm) =>
      one(
        "workstation_last_report_timestamp_seconds",
        vm,
        v.lastReportAtMs === undefined ? undefined : v.lastReportAtMs / 1000,
      ),
  },
  {
    name: "workstation_state",
    help: "Current state of the VM (1 for the current state, 0 for the others).",
    type: "gauge",
    lines: (v, vm) =>
      STATES.map((state) => labelled("workstation_state", vm, "state", state, v.state === state ? 1 : 0)),
  },
  {
    name: "workstation_autostop_enabled",
    help: "1 when autostop applies to the VM; label mode is the policy mode in force (enforce or observe).",
    type: "gauge",
    lines: (v, vm) => [labelled("workstation_autostop_enabled", vm, "mode", v.mode, v.autostop ? 1 : 0)],
  },
  {
    name: "workstation_stop_deadline_timestamp_seconds",
    help: "Unix time the VM will be stopped if nothing changes (absent when no stop is scheduled).",
    type: "gauge",
    lines: (v, vm) =>
      one(
        "workstation_stop_deadline_timestamp_seconds",
        vm,
        v.stopDeadlineMs === undefined ? undefined : v.stopDeadlineMs / 1000,
      ),
  },
  {
    name: "workstation_policy_invalid_settings",
    help: "Invalid policy settings on the VM (it runs under its previous valid policy meanwhile).",
    type: "gauge",
    lines: (v, vm) => one("workstation_policy_invalid_settings", vm, v.policyErrors.length),
  },
  {
    name: "workstation_agent_connected",
    help: "1 while the VM's agent stream is open.",
    type: "gauge",
    lines: (v, vm) => one("workstation_agent_connected", vm, v.connected ? 1 : 0),
  },
  {
    name: "workstation_signal_active",
    help: "1 when the signal family currently shows use.",
    type: "gauge",
    lines: (v, vm) =>
      Object.entries(v.signals).map(([signal, active]) =>
        labelled("workstation_signal_active", vm, "signal", signal, active ? 1 : 0),
      ),
  },
  {
    name: "workstation_lease_expiry_timestamp_seconds",
    help: "Unix time the latest keep-running lease ends (clamped to max-keep-running).",
    type: "gauge",
    lines: (v, vm) =>
      one(
        "workstation_lease_expiry_timestamp_seconds",
        vm,
        v.leases.length > 0 ? Math.max(...v.leases.map((l) => l.expiresAtMs)) / 1000 : undefined,
      ),
  },
  {
    name: "workstation_disk_used_ratio",
    help: "Used share of a guest filesystem (0..1).",
    type: "gauge",
    lines: (v, vm) => v.disks.map((d) => labelled("workstation_disk_used_ratio", vm, "mount", d.mount, d.usedRatio)),
  },
  {
    // The one per-VM series with an owner label; its value is always 1, one series per VM.
    name: "workstation_vm_info",
    help: "1 for every VM; label owner is the VM's owner label value (empty when it has none).",
    type: "gauge",
    lines: (v, vm) => [labelled("workstation_vm_info", vm, "owner", v.owner ?? "", 1)],
  },
  {
    name: "workstation_gpus",
    help: "GPUs of the VM: those its domain declares (Kubernetes), else those its agent last reported.",
    type: "gauge",
    lines: (v, vm) => one("workstation_gpus", vm, v.gpuCount),
  },
  {
    name: "workstation_report_truncated",
    help: "1 when validation cut the VM's latest Report to the per-agent limits (docs/collector-limits.md); the explanation names what.",
    type: "gauge",
    lines: (v, vm) => one("workstation_report_truncated", vm, v.truncated && v.truncated.length > 0 ? 1 : 0),
  },
  // --- raw readings of the latest report (while connected): what whatif replays
  {
    name: "workstation_gpu_utilization_ratio",
    help: "GPU utilization reported by the agent (0..1); absent for a GPU that cannot say ([N/A]).",
    type: "gauge",
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
    lines: (v, vm) =>
      Object.entries(v.readings?.lastActivityAtMs ?? {})
        .filter((entry): entry is [string, number] => entry[1] !== undefined)
        .map(([signal, atMs]) =>
          labelled("workstation_signal_last_activity_timestamp_seconds", vm, "signal", signal, atMs / 1000),
        ),
  },
  // Every outcome from 0 on, for every VM: increase() then sees the first refusal too.
  {
    name: "workstation_stop_outcomes_total",
    help: "Stops carried out per VM, by outcome (accepted, refused, failed).",
    type: "counter",
    lines: (v, vm, stats) => {
      const counts = stats.stopOutcomes.get(`${v.namespace}/${v.name}`);
      return STOP_OUTCOMES.map((outcome) =>
        labelled("workstation_stop_outcomes_total", vm, "outcome", outcome, counts?.get(outcome) ?? 0),
      );
    },
  },
];

/** Every per-VM metric name, for the docs check. */
export const PER_VM_METRIC_NAMES: readonly string[] = [IDLE_SECONDS, ...PER_VM_FAMILIES.map((family) => family.name)];

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

interface CachedVm {
  version: number;
  /** One text block per family of PER_VM_FAMILIES ("" when the VM has no sample of it). */
  blocks: string[];
  /** The labels, rendered. */
  vm: string;
  /** When the idle clock runs: its origin (ms); idle seconds are computed per scrape from it. */
  idleFromMs: number | undefined;
  seen: number;
}

/**
 * The per-VM text, cached per VM. A source whose version is negative (a reader without versions)
 * is rebuilt at every scrape.
 */
export class PerVmSeriesCache {
  private readonly cache = new Map<string, CachedVm>();
  private generation = 0;
  rebuilt = 0;

  constructor(private readonly stats: CollectorStats) {}

  get size(): number {
    return this.cache.size;
  }

  render(sources: Iterable<VmSeriesSource>, nowMs: number): string {
    const generation = ++this.generation;
    const entries: CachedVm[] = [];
    for (const source of sources) {
      let cached = this.cache.get(source.id);
      if (!cached || cached.version !== source.version || source.version < 0) {
        cached = this.build(source.view(nowMs), source.version);
        this.cache.set(source.id, cached);
        this.rebuilt++;
      }
      cached.seen = generation;
      entries.push(cached);
    }
    // VMs that went away take their series with them.
    for (const [id, cached] of this.cache) if (cached.seen !== generation) this.cache.delete(id);

    const parts: string[] = [`# HELP ${IDLE_SECONDS} ${IDLE_HELP}`, `# TYPE ${IDLE_SECONDS} gauge`];
    for (const cached of entries) {
      if (cached.idleFromMs !== undefined)
        parts.push(`${IDLE_SECONDS}{${cached.vm}} ${formatValue(Math.max(0, (nowMs - cached.idleFromMs) / 1000))}`);
    }
    PER_VM_FAMILIES.forEach((family, index) => {
      parts.push(`# HELP ${family.name} ${family.help}`, `# TYPE ${family.name} ${family.type}`);
      for (const cached of entries) {
        const block = cached.blocks[index]!;
        if (block !== "") parts.push(block);
      }
    });
    return `${parts.join("\n")}\n`;
  }

  private build(view: VmView, version: number): CachedVm {
    const vm = `namespace="${escapeLabel(view.namespace)}",vm="${escapeLabel(view.name)}"`;
    return {
      version,
      vm,
      blocks: PER_VM_FAMILIES.map((family) => family.lines(view, vm, this.stats).join("\n")),
      idleFromMs:
        view.idleSeconds !== undefined && view.lastActivityAtMs !== undefined ? view.lastActivityAtMs : undefined,
      seen: 0,
    };
  }
}

// --- the collector's own metrics, through prom-client -----------------------------------------

const exportedNames = new WeakMap<Registry, () => string[]>();

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
  if (options.processMetrics ?? true) {
    collectDefaultMetrics({ register: health });
    // Gauges named *_total, which promtool rejects; nodejs_active_{handles,requests,resources} (by type) carry the same counts.
    for (const name of LINT_FAILING_DEFAULTS) health.removeSingleMetric(name);
  }

  const counterFrom = <L extends string>(
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
    "Reports dropped because one agent stream sent them faster than the per-stream limit (2 per second sustained, 10 at once).",
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
  const scrapeDuration = new Histogram({
    name: "workstation_scrape_duration_seconds",
    help: "Time to build the /metrics answer (a scrape's own time shows from the next scrape on).",
    buckets: SCRAPE_BUCKETS,
    registers: [registry],
  });

  registerAdoptionMetrics(registry, fleet, nowMs, options.givenBack);

  // The registry handed out: the leader's own metrics, answering metrics() with everything.
  const renderFleet = registry.metrics.bind(registry);
  const renderHealth = health.metrics.bind(health);
  exportedNames.set(registry, () =>
    [...health.getMetricsAsArray(), ...registry.getMetricsAsArray()]
      .map((metric) => metric.name)
      .concat(PER_VM_METRIC_NAMES),
  );
  registry.metrics = async () => {
    const began = performance.now();
    try {
      const own = await renderHealth();
      if (!leader()) return own;
      const now = nowMs();
      const sources =
        fleet.seriesSources?.() ??
        fleet.views(now).map((view) => ({ id: `${view.namespace}/${view.name}`, version: -1, view: () => view }));
      return `${own + (await renderFleet())}\n${perVm.render(sources, now)}`;
    } finally {
      scrapeDuration.observe((performance.now() - began) / 1000);
    }
  };
  return registry;
}
