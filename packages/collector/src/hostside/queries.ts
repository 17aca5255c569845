// The PromQL the host-side source runs, and how the answers become one reading
// per VM. One query per metric for the whole fleet (never one per VM), each
// evaluated at the same instant over the same window. Pure.
//
// Metric names and labels as KubeVirt exports them (kubevirt/kubevirt
// docs/observability/metrics.md; checked against main at 008b6e6b, the
// layout since v1.1): virt-handler's per-VMI metrics carry `namespace` and
// `name` (the VMI's name, which is the VM's), plus `id`/`state` (vCPUs),
// `interface` (network) or `drive` (storage); virt-api's connection gauges
// carry `namespace` and `vmi`, one series per virt-api pod.
import type { HostReading } from "../engine/types.js";
import type { VectorSample } from "./prometheus.js";

export interface HostLabels {
  /** The VMI's namespace on virt-handler's and virt-api's series. */
  namespace: string;
  /** The VMI's name on virt-handler's series. */
  name: string;
  /** The VMI's name on virt-api's connection gauges. */
  vmi: string;
}

export const DEFAULT_HOST_LABELS: HostLabels = { namespace: "namespace", name: "name", vmi: "vmi" };

/** A series that shows virt-api is scraped: without it, no connection gauge can be trusted to be absent. */
export const DEFAULT_CONNECTIONS_WITNESS = "kubevirt_virt_api_ready_status";

export type HostQueryName =
  | "vcpuSeconds"
  | "vcpus"
  | "network"
  | "disk"
  | "vnc"
  | "console"
  | "portForward"
  | "connectionsWitness";

export function hostQueries(
  windowSeconds: number,
  labels: HostLabels = DEFAULT_HOST_LABELS,
  witness: string = DEFAULT_CONNECTIONS_WITNESS,
): Record<HostQueryName, string> {
  const w = `${Math.round(windowSeconds)}s`;
  const vm = `${labels.namespace}, ${labels.name}`;
  const byVm = (expr: string) => `sum by (${vm}) (${expr})`;
  const rate = (metric: string) => byVm(`rate(${metric}[${w}])`);
  const connections = (metric: string) =>
    `sum by (${labels.namespace}, ${labels.vmi}) (max_over_time(${metric}[${w}]))`;
  return {
    vcpuSeconds: rate("kubevirt_vmi_vcpu_seconds_total"),
    // One series per vCPU and state: count the ids.
    vcpus: `count by (${vm}) (count by (${vm}, id) (kubevirt_vmi_vcpu_seconds_total))`,
    network: `${rate("kubevirt_vmi_network_receive_bytes_total")} + ${rate("kubevirt_vmi_network_transmit_bytes_total")}`,
    disk: `${rate("kubevirt_vmi_storage_read_traffic_bytes_total")} + ${rate("kubevirt_vmi_storage_write_traffic_bytes_total")}`,
    vnc: connections("kubevirt_vnc_active_connections"),
    console: connections("kubevirt_console_active_connections"),
    portForward: connections("kubevirt_portforward_active_tunnels"),
    connectionsWitness: witness === "" ? "vector(1)" : `count(${witness})`,
  };
}

export type HostAnswers = Record<HostQueryName, VectorSample[]>;

/** What one round of queries gives: a reading per VM that has series ("ns/name"), or why there is none at all. */
export type HostBatch =
  | { ok: true; atMs: number; windowSeconds: number; readings: Map<string, HostReading> }
  | { ok: false; atMs: number; windowSeconds: number; message: string };

function byKey(samples: VectorSample[], namespaceLabel: string, nameLabel: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const sample of samples) {
    const namespace = sample.metric[namespaceLabel];
    const name = sample.metric[nameLabel];
    if (!namespace || !name) continue;
    const key = `${namespace}/${name}`;
    out.set(key, (out.get(key) ?? 0) + sample.value);
  }
  return out;
}

const MISSING: Record<"vcpu" | "network" | "disk", string> = {
  vcpu: "kubevirt_vmi_vcpu_seconds_total",
  network: "kubevirt_vmi_network_*_bytes_total",
  disk: "kubevirt_vmi_storage_*_traffic_bytes_total",
};

/** The answers of one round as per-VM readings. */
export function readingsFromAnswers(
  answers: HostAnswers,
  atMs: number,
  windowSeconds: number,
  labels: HostLabels = DEFAULT_HOST_LABELS,
  witness: string = DEFAULT_CONNECTIONS_WITNESS,
): HostBatch {
  if (answers.connectionsWitness.length === 0 || answers.connectionsWitness.every((s) => s.value <= 0))
    return {
      ok: false,
      atMs,
      windowSeconds,
      message: `virt-api's metrics (${witness}) are not in Prometheus: open VNC, console and port-forward connections cannot be seen`,
    };
  const vcpuSeconds = byKey(answers.vcpuSeconds, labels.namespace, labels.name);
  const vcpus = byKey(answers.vcpus, labels.namespace, labels.name);
  const network = byKey(answers.network, labels.namespace, labels.name);
  const disk = byKey(answers.disk, labels.namespace, labels.name);
  const vnc = byKey(answers.vnc, labels.namespace, labels.vmi);
  const console = byKey(answers.console, labels.namespace, labels.vmi);
  const portForward = byKey(answers.portForward, labels.namespace, labels.vmi);
  const readings = new Map<string, HostReading>();
  const keys = new Set([...vcpuSeconds.keys(), ...network.keys(), ...disk.keys()]);
  for (const key of keys) {
    const missing = [
      ...(vcpuSeconds.has(key) && vcpus.has(key) ? [] : [MISSING.vcpu]),
      ...(network.has(key) ? [] : [MISSING.network]),
      ...(disk.has(key) ? [] : [MISSING.disk]),
    ];
    if (missing.length > 0) {
      readings.set(key, {
        atMs,
        windowSeconds,
        state: "absent",
        message: `no ${missing.join(", ")} series for this VMI over the last ${windowSeconds}s`,
      });
      continue;
    }
    const cpus = Math.max(1, vcpus.get(key)!);
    readings.set(key, {
      atMs,
      windowSeconds,
      state: "ok",
      vcpus: cpus,
      vcpuBusyRatio: Math.min(1, Math.max(0, vcpuSeconds.get(key)! / cpus)),
      networkBytesPerSecond: Math.max(0, network.get(key)!),
      diskBytesPerSecond: Math.max(0, disk.get(key)!),
      // A gauge virt-api never set for this VMI has no series: no connection was opened.
      vncConnections: vnc.get(key) ?? 0,
      consoleConnections: console.get(key) ?? 0,
      portForwardTunnels: portForward.get(key) ?? 0,
    });
  }
  return { ok: true, atMs, windowSeconds, readings };
}

/** The reading of a VM the batch says nothing about. */
export function readingFor(batch: HostBatch, vm: string): HostReading {
  const base = { atMs: batch.atMs, windowSeconds: batch.windowSeconds };
  if (!batch.ok) return { ...base, state: "failed", message: batch.message };
  return (
    batch.readings.get(vm) ?? {
      ...base,
      state: "absent",
      message: `no KubeVirt series for this VMI in Prometheus over the last ${batch.windowSeconds}s (not running, or its node's virt-handler is not scraped)`,
    }
  );
}
