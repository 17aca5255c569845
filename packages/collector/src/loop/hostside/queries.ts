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
//
// Missing data is not idleness, and neither is wrong data: a sample that cannot be true (every
// query here is a rate, a count or a maximum of a gauge, so never below zero; never NaN or
// infinite; never stamped after the instant it was asked for) makes that VM's reading *failed*,
// exactly like a Prometheus that does not answer. It is never clamped to 0, which read as idle
// and stopped a busy VM whose agent was gone. A counter going backwards reaches us as a negative
// rate (rate() itself takes a drop as a restart, which is Prometheus' reading, not ours).
import type { HostReading } from "../../engine/types.js";
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
  | "receivePackets"
  | "transmitPackets"
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
    // Packets, each way: a person's remote shell is small packets both ways (engine/host-traffic.ts).
    receivePackets: rate("kubevirt_vmi_network_receive_packets_total"),
    transmitPackets: rate("kubevirt_vmi_network_transmit_packets_total"),
    disk: `${rate("kubevirt_vmi_storage_read_traffic_bytes_total")} + ${rate("kubevirt_vmi_storage_write_traffic_bytes_total")}`,
    vnc: connections("kubevirt_vnc_active_connections"),
    console: connections("kubevirt_console_active_connections"),
    portForward: connections("kubevirt_portforward_active_tunnels"),
    connectionsWitness: witness === "" ? "vector(1)" : `count(${witness})`,
  };
}

/** Queries whose answer may be missing altogether (a caller that does not run them): the VMs' readings go without. */
type OptionalHostQuery = "receivePackets" | "transmitPackets";

export type HostAnswers = Record<Exclude<HostQueryName, OptionalHostQuery>, VectorSample[]> &
  Partial<Record<OptionalHostQuery, VectorSample[]>>;

/** What one round of queries gives: a reading per VM that has series ("ns/name"), or why there is none at all. */
export type HostBatch =
  | { ok: true; atMs: number; windowSeconds: number; readings: Map<string, HostReading> }
  | { ok: false; atMs: number; windowSeconds: number; message: string };

/** How far after the evaluation time a sample may be stamped: rounding of the query's time to ms, not clock skew. */
export const FUTURE_SAMPLE_SLACK_MS = 1000;

/** Why a sample cannot be true, or undefined when it can. */
export function impossibleSample(sample: VectorSample, atMs: number): string | undefined {
  if (Number.isNaN(sample.value)) return "NaN";
  if (!Number.isFinite(sample.value)) return `${sample.value > 0 ? "+" : "-"}Inf`;
  if (sample.value < 0) return `${sample.value} (below zero)`;
  const stamped = sample.timestampMs;
  if (stamped !== undefined && !(stamped <= atMs + FUTURE_SAMPLE_SLACK_MS))
    return Number.isFinite(stamped)
      ? `stamped ${new Date(stamped).toISOString()}, after the query's ${new Date(atMs).toISOString()}`
      : "stamped with no time";
  return undefined;
}

/** The most impossible samples a VM's message names (a hostile answer could hold thousands). */
const MAX_NAMED_PROBLEMS = 3;

/** Per VM: the sum of its samples, and every sample that cannot be true (under `problems`, never summed). */
function byKey(
  samples: VectorSample[],
  namespaceLabel: string,
  nameLabel: string,
  query: HostQueryName,
  atMs: number,
  problems: Map<string, string[]>,
): Map<string, number> {
  const out = new Map<string, number>();
  for (const sample of samples) {
    const namespace = sample.metric[namespaceLabel];
    const name = sample.metric[nameLabel];
    if (!namespace || !name) continue;
    const key = `${namespace}/${name}`;
    const why = impossibleSample(sample, atMs);
    if (why !== undefined) {
      const list = problems.get(key) ?? [];
      if (list.length < MAX_NAMED_PROBLEMS) list.push(`${query} ${why}`);
      problems.set(key, list);
      continue;
    }
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
  const wrongWitness = answers.connectionsWitness
    .map((sample) => impossibleSample(sample, atMs))
    .find((why) => why !== undefined);
  if (wrongWitness !== undefined)
    return {
      ok: false,
      atMs,
      windowSeconds,
      message: `Prometheus answered what cannot be true for virt-api's metrics (${witness}: ${wrongWitness}): no VM is judged on this round`,
    };
  if (answers.connectionsWitness.length === 0 || answers.connectionsWitness.every((s) => s.value <= 0))
    return {
      ok: false,
      atMs,
      windowSeconds,
      message: `virt-api's metrics (${witness}) are not in Prometheus: open VNC, console and port-forward connections cannot be seen`,
    };
  const problems = new Map<string, string[]>();
  const perVm = (query: HostQueryName, nameLabel: string) =>
    byKey(answers[query] ?? [], labels.namespace, nameLabel, query, atMs, problems);
  const vcpuSeconds = perVm("vcpuSeconds", labels.name);
  const vcpus = perVm("vcpus", labels.name);
  const network = perVm("network", labels.name);
  const receivePackets = perVm("receivePackets", labels.name);
  const transmitPackets = perVm("transmitPackets", labels.name);
  const disk = perVm("disk", labels.name);
  const vnc = perVm("vnc", labels.vmi);
  const console = perVm("console", labels.vmi);
  const portForward = perVm("portForward", labels.vmi);
  const readings = new Map<string, HostReading>();
  const keys = new Set([...vcpuSeconds.keys(), ...network.keys(), ...disk.keys(), ...problems.keys()]);
  for (const key of keys) {
    const wrong = problems.get(key);
    if (wrong) {
      readings.set(key, {
        atMs,
        windowSeconds,
        state: "failed",
        message: `Prometheus answered what cannot be true for this VMI: ${wrong.join("; ")} — a wrong reading is not idleness`,
      });
      continue;
    }
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
      // Never below zero here (those failed above); a rate's extrapolation may overshoot 1 a little.
      vcpuBusyRatio: Math.min(1, vcpuSeconds.get(key)! / cpus),
      networkBytesPerSecond: network.get(key)!,
      // Optional: without both packet series the VM is judged without interactive-traffic evidence.
      ...(receivePackets.has(key) && transmitPackets.has(key)
        ? { receivePacketsPerSecond: receivePackets.get(key)!, transmitPacketsPerSecond: transmitPackets.get(key)! }
        : {}),
      diskBytesPerSecond: disk.get(key)!,
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
