// /metrics: one prom-client Registry whose values are built at scrape time
// from the fleet's views, so series vanish with their VM.
import { Counter, Gauge, Registry, type LabelValues } from "prom-client";
import type { CollectorStats } from "./stats.js";
import type { FleetReader } from "./view.js";

export const STATES = ["Unknown", "Active", "StoppingPending", "Stopping", "Stopped", "AgentLost"];

export function createMetrics(fleet: FleetReader, stats: CollectorStats, nowMs: () => number, streams: () => number): Registry {
  const registry = new Registry();
  const vmLabels = ["namespace", "vm"] as const;

  // Each collect() resets and refills its gauge from one views() call per scrape.
  let scrapeViews: ReturnType<FleetReader["views"]> = [];
  let scrapeAt = -1;
  const views = () => {
    const now = nowMs();
    if (now !== scrapeAt) {
      scrapeAt = now;
      scrapeViews = fleet.views(now);
    }
    return scrapeViews;
  };

  const perVm = <L extends string>(
    name: string,
    help: string,
    extra: readonly L[],
    fill: (set: (labels: LabelValues<"namespace" | "vm" | L>, value: number) => void) => void,
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

  perVm("workstation_idle_seconds", "Seconds since the last strong evidence of use.", [], (set) => {
    for (const v of views()) if (v.idleSeconds !== undefined) set({ namespace: v.namespace, vm: v.name }, v.idleSeconds);
  });
  perVm("workstation_idle_timeout_seconds", "The idle timeout in force for the VM.", [], (set) => {
    for (const v of views()) set({ namespace: v.namespace, vm: v.name }, v.idleTimeoutSeconds);
  });
  perVm("workstation_last_activity_timestamp_seconds", "Unix time of the last strong evidence of use.", [], (set) => {
    for (const v of views()) if (v.lastActivityAtMs !== undefined) set({ namespace: v.namespace, vm: v.name }, v.lastActivityAtMs / 1000);
  });
  perVm("workstation_state", "Current state of the VM (1 for the current state).", ["state"], (set) => {
    for (const v of views()) for (const state of STATES) set({ namespace: v.namespace, vm: v.name, state }, v.state === state ? 1 : 0);
  });
  perVm("workstation_signal_active", "1 when the signal family currently shows use.", ["signal"], (set) => {
    for (const v of views()) for (const [signal, active] of Object.entries(v.signals)) set({ namespace: v.namespace, vm: v.name, signal }, active ? 1 : 0);
  });
  perVm("workstation_gpu_utilization_ratio", "GPU utilization reported by the agent (0..1).", ["gpu"], (set) => {
    for (const v of views()) for (const g of v.gpus) set({ namespace: v.namespace, vm: v.name, gpu: g.gpu }, g.utilizationRatio);
  });
  perVm("workstation_lease_expiry_timestamp_seconds", "Unix time when the latest keep-running lease ends.", [], (set) => {
    for (const v of views()) {
      if (v.leases.length > 0) set({ namespace: v.namespace, vm: v.name }, Math.max(...v.leases.map((l) => l.expiresAtMs)) / 1000);
    }
  });
  perVm("workstation_disk_used_ratio", "Used share of a guest filesystem (0..1).", ["mount"], (set) => {
    for (const v of views()) for (const d of v.disks) set({ namespace: v.namespace, vm: v.name, mount: d.mount }, d.usedRatio);
  });
  perVm("workstation_agent_connected", "1 while the VM's agent stream is open.", [], (set) => {
    for (const v of views()) set({ namespace: v.namespace, vm: v.name }, v.connected ? 1 : 0);
  });
  perVm("workstation_stop_deadline_timestamp_seconds", "Unix time the VM will be stopped if nothing changes.", [], (set) => {
    for (const v of views()) if (v.stopDeadlineMs !== undefined) set({ namespace: v.namespace, vm: v.name }, v.stopDeadlineMs / 1000);
  });
  perVm("workstation_policy_errors", "Number of invalid policy settings on the VM (the previous valid policy is kept).", [], (set) => {
    for (const v of views()) set({ namespace: v.namespace, vm: v.name }, v.policyErrors.length);
  });

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

  counterFrom("workstation_stops_total", "VM stops decided (mode=observe: would have stopped).", ["reason", "mode"], (inc) => {
    for (const [key, value] of fleet.counters().stops) {
      const [reason = "", mode = ""] = key.split("|");
      inc({ reason, mode }, value);
    }
  });
  counterFrom("workstation_notices_total", "Stop notices sent to VMs.", [], (inc) => inc({}, fleet.counters().notices));
  counterFrom("workstation_stop_cancelled_total", "Pending stops cancelled by activity or a lease.", [], (inc) => inc({}, fleet.counters().stopsCancelled));
  counterFrom("workstation_leases_granted_total", "Keep-running leases accepted.", [], (inc) => inc({}, fleet.counters().leasesGranted));
  counterFrom("workstation_policy_errors_total", "Invalid policy values seen (kept the previous valid policy).", [], (inc) => inc({}, fleet.counters().policyErrors));
  counterFrom("workstation_reports_received_total", "Reports received from agents.", [], (inc) => inc({}, stats.reportsReceived));
  counterFrom("workstation_report_decode_failures_total", "Agent messages that failed to decode or validate.", ["kind"], (inc) => {
    inc({ kind: "decode" }, stats.reportDecodeFailures);
    inc({ kind: "validation" }, stats.reportValidationFailures);
  });
  counterFrom("workstation_auth_failures_total", "Agent streams refused.", ["reason"], (inc) => {
    for (const [reason, value] of stats.authFailures) inc({ reason }, value);
  });
  counterFrom("workstation_kube_requests_total", "Kubernetes API requests by verb and response code.", ["verb", "code"], (inc) => {
    for (const [key, value] of stats.kubeRequests) {
      const [verb = "", code = ""] = key.split("|");
      inc({ verb, code }, value);
    }
  });
  new Gauge({
    name: "workstation_agent_streams",
    help: "Open agent streams.",
    registers: [registry],
    collect() {
      this.set(streams());
    },
  });
  return registry;
}
