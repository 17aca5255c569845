// /metrics: one prom-client Registry whose values are built at scrape time
// from the fleet's views, so series vanish with their VM. docs/metrics.md
// lists every metric; test/metrics.test.ts keeps the two in step.
import { Counter, Gauge, Histogram, Registry, type LabelValues } from "prom-client";
import type { StopOutcome } from "./engine/types.js";
import type { CollectorStats } from "./stats.js";
import type { FleetReader, VmView } from "./view.js";
import { ACTIVITY_SIGNALS, type ReportReadings } from "./whatif/readings.js";

export const STATES = ["Unknown", "Active", "StoppingPending", "Stopping", "Stopped", "AgentLost"];
/** The StopResult outcomes (engine/types.ts StopOutcome). */
export const STOP_OUTCOMES = ["accepted", "refused", "failed"] as const satisfies readonly StopOutcome[];

export interface MetricsOptions {
  /** Whether this replica holds the leader lease (standalone: always). */
  leader?: () => boolean;
}

const DECISION_BUCKETS = [0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.05, 0.1];
const SCRAPE_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5];

type VmLabel = "namespace" | "vm";

export function createMetrics(
  fleet: FleetReader,
  stats: CollectorStats,
  nowMs: () => number,
  streams: () => number,
  options: MetricsOptions = {},
): Registry {
  const registry = new Registry();
  const vmLabels = ["namespace", "vm"] as const;
  const leader = options.leader ?? (() => true);

  // One views() per scrape: every gauge of a scrape describes the same moment.
  let scrapeViews: VmView[] | undefined;
  let cachedAt = -1;
  let cachedViews: VmView[] = [];
  // A standby exports no per-VM series: with every replica scraped, each VM has one series set
  // (the leader's), and the documented joins stay one-to-one.
  const views = (): VmView[] => {
    if (scrapeViews) return scrapeViews;
    if (!leader()) return [];
    const now = nowMs();
    if (now !== cachedAt) {
      cachedAt = now;
      cachedViews = fleet.views(now);
    }
    return cachedViews;
  };
  const vmOf = (v: VmView) => ({ namespace: v.namespace, vm: v.name });

  const perVm = <L extends string>(
    name: string,
    help: string,
    extra: readonly L[],
    fill: (set: (labels: LabelValues<VmLabel | L>, value: number) => void) => void,
  ) =>
    new Gauge({
      name,
      help,
      labelNames: [...vmLabels, ...extra],
      registers: [registry],
      collect() {
        this.reset();
        fill((labels, value) => this.set(labels, value));
      },
    });

  /** A gauge of one value from the latest Report, exported only while the agent is connected. */
  const reading = (name: string, help: string, pick: (r: ReportReadings) => number | undefined) =>
    perVm(name, help, [], (set) => {
      for (const v of views()) {
        const value = v.readings ? pick(v.readings) : undefined;
        if (value !== undefined) set(vmOf(v), value);
      }
    });

  // --- the decision, per VM
  perVm("workstation_idle_seconds", "Seconds since the last strong evidence of use (the idle clock).", [], (set) => {
    for (const v of views()) if (v.idleSeconds !== undefined) set(vmOf(v), v.idleSeconds);
  });
  perVm("workstation_idle_timeout_seconds", "The idle timeout in force for the VM.", [], (set) => {
    for (const v of views()) set(vmOf(v), v.idleTimeoutSeconds);
  });
  perVm("workstation_last_activity_timestamp_seconds", "Unix time of the last strong evidence of use.", [], (set) => {
    for (const v of views()) if (v.lastActivityAtMs !== undefined) set(vmOf(v), v.lastActivityAtMs / 1000);
  });
  perVm("workstation_last_report_timestamp_seconds", "Unix time the collector received the VM's latest report.", [], (set) => {
    for (const v of views()) if (v.lastReportAtMs !== undefined) set(vmOf(v), v.lastReportAtMs / 1000);
  });
  perVm("workstation_state", "Current state of the VM (1 for the current state, 0 for the others).", ["state"], (set) => {
    for (const v of views()) for (const state of STATES) set({ ...vmOf(v), state }, v.state === state ? 1 : 0);
  });
  perVm("workstation_autostop_enabled", "1 when autostop applies to the VM; label mode is the policy mode in force (enforce or observe).", ["mode"], (set) => {
    for (const v of views()) set({ ...vmOf(v), mode: v.mode }, v.autostop ? 1 : 0);
  });
  perVm("workstation_stop_deadline_timestamp_seconds", "Unix time the VM will be stopped if nothing changes (absent when no stop is scheduled).", [], (set) => {
    for (const v of views()) if (v.stopDeadlineMs !== undefined) set(vmOf(v), v.stopDeadlineMs / 1000);
  });
  perVm("workstation_policy_invalid_settings", "Invalid policy settings on the VM (it runs under its previous valid policy meanwhile).", [], (set) => {
    for (const v of views()) set(vmOf(v), v.policyErrors.length);
  });
  perVm("workstation_agent_connected", "1 while the VM's agent stream is open.", [], (set) => {
    for (const v of views()) set(vmOf(v), v.connected ? 1 : 0);
  });
  perVm("workstation_signal_active", "1 when the signal family currently shows use.", ["signal"], (set) => {
    for (const v of views()) for (const [signal, active] of Object.entries(v.signals)) set({ ...vmOf(v), signal }, active ? 1 : 0);
  });
  perVm("workstation_lease_expiry_timestamp_seconds", "Unix time the latest keep-running lease ends (clamped to max-keep-running).", [], (set) => {
    for (const v of views()) if (v.leases.length > 0) set(vmOf(v), Math.max(...v.leases.map((l) => l.expiresAtMs)) / 1000);
  });
  perVm("workstation_disk_used_ratio", "Used share of a guest filesystem (0..1).", ["mount"], (set) => {
    for (const v of views()) for (const d of v.disks) set({ ...vmOf(v), mount: d.mount }, d.usedRatio);
  });
  // Issue 20: the one per-VM series with an owner label; its value is always 1, one series per VM.
  perVm("workstation_vm_info", "1 for every VM; label owner is the VM's owner label value (empty when it has none).", ["owner"], (set) => {
    for (const v of views()) set({ ...vmOf(v), owner: v.owner ?? "" }, 1);
  });
  perVm("workstation_gpus", "GPUs of the VM: those its domain declares (Kubernetes), else those its agent last reported.", [], (set) => {
    for (const v of views()) if (v.gpuCount !== undefined) set(vmOf(v), v.gpuCount);
  });

  // --- raw readings of the latest report (while connected): what whatif replays
  perVm("workstation_gpu_utilization_ratio", "GPU utilization reported by the agent (0..1); absent for a GPU that cannot say ([N/A]).", ["gpu"], (set) => {
    for (const v of views()) for (const [gpu, ratio] of Object.entries(v.readings?.gpuUtilization ?? {})) set({ ...vmOf(v), gpu }, ratio);
  });
  reading("workstation_gpu_processes", "Processes holding a GPU.", (r) => r.gpuProcesses);
  reading("workstation_cpu_busy_ratio", "Share of all CPUs busy over the agent's last interval (0..1).", (r) => r.cpuBusyRatio);
  reading("workstation_user_process_cpu_cores", "CPU used by non-system users' processes over the agent's last interval, in cores.", (r) => r.userProcessCpuCores);
  reading("workstation_network_bytes_per_second", "Network receive plus transmit, loopback excluded.", (r) => r.networkBytesPerSecond);
  reading("workstation_disk_io_bytes_per_second", "Disk read plus write.", (r) => r.diskBytesPerSecond);
  reading("workstation_jupyter_busy_kernels", "Jupyter kernels executing code.", (r) => r.jupyterBusyKernels);
  reading("workstation_jupyter_connected_kernels", "Jupyter kernels with a browser connected.", (r) => r.jupyterConnectedKernels);
  reading("workstation_idle_inhibitors", "logind idle inhibitor locks held in the VM.", (r) => r.idleInhibitors);
  perVm(
    "workstation_signal_last_activity_timestamp_seconds",
    `Unix time of the youngest activity the latest report shows, by kind (${ACTIVITY_SIGNALS.join(", ")}).`,
    ["signal"],
    (set) => {
      for (const v of views()) {
        for (const [signal, atMs] of Object.entries(v.readings?.lastActivityAtMs ?? {})) if (atMs !== undefined) set({ ...vmOf(v), signal }, atMs / 1000);
      }
    },
  );

  // --- counters
  const counterFrom = <L extends string>(name: string, help: string, labelNames: readonly L[], fill: (inc: (labels: LabelValues<L>, value: number) => void) => void) =>
    new Counter({
      name,
      help,
      labelNames: [...labelNames],
      registers: [registry],
      collect() {
        this.reset();
        fill((labels, value) => this.inc(labels, value));
      },
    });

  counterFrom("workstation_stops_total", "VM stops decided, by trigger (idle, agent-lost) and mode (observe: would have stopped).", ["reason", "mode"], (inc) => {
    for (const [key, value] of fleet.counters().stops) {
      const [reason = "", mode = ""] = key.split("|");
      inc({ reason, mode }, value);
    }
  });
  // Every outcome from 0 on, for every VM: increase() then sees the first refusal too.
  counterFrom("workstation_stop_outcomes_total", "Stops carried out per VM, by outcome (accepted, refused, failed).", ["namespace", "vm", "outcome"], (inc) => {
    for (const v of views()) {
      const counts = stats.stopOutcomes.get(`${v.namespace}/${v.name}`);
      for (const outcome of STOP_OUTCOMES) inc({ ...vmOf(v), outcome }, counts?.get(outcome) ?? 0);
    }
  });
  counterFrom("workstation_notices_total", "Stop notices sent to VMs.", [], (inc) => inc({}, fleet.counters().notices));
  counterFrom("workstation_stop_cancelled_total", "Pending stops cancelled by activity or a lease.", [], (inc) => inc({}, fleet.counters().stopsCancelled));
  counterFrom("workstation_leases_granted_total", "Keep-running leases accepted.", [], (inc) => inc({}, fleet.counters().leasesGranted));
  counterFrom("workstation_policy_errors_total", "Invalid policy values seen (the VM kept its previous valid policy).", [], (inc) => inc({}, fleet.counters().policyErrors));

  // --- the collector itself
  counterFrom("workstation_reports_received_total", "Reports received from agents.", [], (inc) => inc({}, stats.reportsReceived));
  counterFrom("workstation_report_decode_failures_total", "Agent messages that failed to decode (kind=decode) or validate (kind=validation).", ["kind"], (inc) => {
    inc({ kind: "decode" }, stats.reportDecodeFailures);
    inc({ kind: "validation" }, stats.reportValidationFailures);
  });
  counterFrom("workstation_auth_failures_total", "Agent streams refused, by reason.", ["reason"], (inc) => {
    for (const [reason, value] of stats.authFailures) inc({ reason }, value);
  });
  counterFrom("workstation_kube_requests_total", "Kubernetes API requests by verb and response code.", ["verb", "code"], (inc) => {
    for (const [key, value] of stats.kubeRequests) {
      const [verb = "", code = ""] = key.split("|");
      inc({ verb, code }, value);
    }
  });
  counterFrom("workstation_agent_streams_opened_total", "Agent streams accepted after authentication, reconnections included.", [], (inc) => inc({}, stats.streamsOpened));
  new Gauge({
    name: "workstation_agent_streams",
    help: "Open agent streams.",
    registers: [registry],
    collect() {
      this.set(streams());
    },
  });
  new Gauge({
    name: "workstation_collector_leader",
    help: "1 when this collector replica holds the leader lease and acts; 0 while it waits.",
    registers: [registry],
    collect() {
      this.set(leader() ? 1 : 0);
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

  const render = registry.metrics.bind(registry);
  registry.metrics = async () => {
    const began = performance.now();
    scrapeViews = leader() ? fleet.views(nowMs()) : [];
    try {
      return await render();
    } finally {
      scrapeViews = undefined;
      scrapeDuration.observe((performance.now() - began) / 1000);
    }
  };
  return registry;
}
