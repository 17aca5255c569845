// What the status page, /api/vms and /metrics read: a plain snapshot per VM.
import type { Explanation, Policy } from "../engine/types.js";
import type { ReportReadings } from "./readings.js";

export type { ReportReadings };

/** What a running instance of a VM holds (from its spec): what its stop gives back (outreach/adoption/given-back.ts). */
export interface VmCapacity {
  cpuCores: number | null;
  memoryBytes: number | null;
  gpus: number;
}

export interface LeaseRow {
  id: string;
  user: string;
  uid: number;
  reason: string;
  expiresAtMs: number;
  clamped: boolean;
}

/**
 * What the platform says about a VM beyond its policy (Kubernetes mode: read from the
 * VirtualMachine by platform/kube/vm-resources.ts; standalone: nothing): who owns it and what a stop
 * would give back, so a notice and the pages can say both.
 */
export interface VmPlatformDetails {
  /** The owner label's value (`platform.example.com/user` by default). */
  owner?: string;
  /** What a stop gives back, for the notice: "stopping frees 8 CPU, 64Gi memory, 1 × nvidia.com/A100-PCIE-40GB". */
  frees?: string;
  /** GPUs the VM's domain declares (`gpus` devices): what a stop frees, known before any agent reports. */
  gpuCount?: number;
  /** What a running instance holds, as numbers (CPU cores, memory bytes, GPUs): what ws's stops give back. */
  capacity?: VmCapacity;
  /** The spec's GPUs by device name, for a GPU-hour price per device (docs/cost.md). */
  gpuDevices?: ReadonlyArray<{ deviceName: string; count: number }>;
}

export interface VmView {
  namespace: string;
  name: string;
  /** The VM's owner as the platform labels it (the configured owner label); absent when unknown. */
  owner?: string;
  state: string;
  mode: string;
  autostop: boolean;
  connected: boolean;
  /** When the agent's stream opened, while it is connected. */
  connectedAtMs?: number;
  /**
   * How the agent went, while it is not connected and had reported: "stopped-on-purpose" (it said
   * goodbye: systemctl stop, package removal; when and why) or "vanished" (no goodbye: a crash,
   * SIGKILL, the network). The host-side rule treats them differently (docs/policy.md).
   */
  agentGone?: { how: "stopped-on-purpose"; atMs: number; reason: string } | { how: "vanished" };
  agentVersion: string;
  peer: string;
  lastReportAtMs?: number;
  lastActivityAtMs?: number;
  idleSeconds?: number;
  idleTimeoutSeconds: number;
  /** The policy profile the VM names ("" for the defaults): a label of workstation_vm_info. */
  profile?: string;
  stopDeadlineMs?: number;
  activeSignals: string[];
  /** Every signal family, active or not, for signal_active series. */
  signals: Record<string, boolean>;
  explanation: string;
  gpus: Array<{ gpu: string; utilizationRatio: number }>;
  disks: Array<{ mount: string; usedRatio: number }>;
  leases: LeaseRow[];
  policyErrors: string[];
  /**
   * GPUs of the VM: the ones its domain declares when it declares any (Kubernetes), else the ones
   * in the agent's last Report (kept while the agent is away: it is the VM's hardware).
   */
  gpuCount?: number;
  /**
   * The idleness-deciding values of the latest Report, only while the agent is
   * connected (stale values of a gone agent are not exported). Prometheus keeps
   * them so `ws-collector whatif` can replay history under other thresholds.
   */
  readings?: ReportReadings;
  /** What validation cut from the latest Report to keep it within the per-agent limits (docs/collector-limits.md). */
  truncated?: string[];
  /** The host-side reading, when host-side evidence is configured. */
  host?: HostView;
}

/** The host-side source's view of one VM (KubeVirt's metrics through Prometheus), beside the agent's. */
export interface HostView {
  state: string;
  atMs: number;
  /** "vCPU 0.3 %, network 2 kB/s, disk 0 B/s, no VNC connection", or why there is no reading. */
  summary: string;
  /** Where the agent says idle and the host does not (loop/hostside/disagree.ts). */
  disagreements: string[];
}

/** What the page of one VM shows beyond its row: the last decision's explanation and the policy. */
export interface VmDetail {
  view: VmView;
  explanation: Explanation | undefined;
  policy: Policy;
  /** The pending notice, when a stop is pending. */
  notice?: { id: string; reason: string; deadlineMs: number; mode: string; wouldStopAtMs?: number };
  /** Each signal source of the last report: ok, absent, failed (why) or disabled. */
  sources: Array<{ source: string; state: string; message: string }>;
}

export interface FleetCounters {
  stops: Map<string, number>; // key: "reason|mode"
  notices: number;
  stopsCancelled: number;
  leasesGranted: number;
  policyErrors: number;
  /** Onsets of agent/host disagreement, by kind (loop/hostside/disagree.ts); absent without host-side evidence. */
  hostDisagreements?: Map<string, number>;
}

/** One VM as /metrics reads it: its series text is rebuilt only when `version` changes. */
export interface VmSeriesSource {
  readonly id: string;
  /** Changes whenever anything the VM's view shows changes (time passing aside: idle seconds are computed at scrape time). */
  readonly version: number;
  view(nowMs: number): VmView;
}

export interface FleetReader {
  views(nowMs: number): VmView[];
  /** Every VM's connection and agent version, without building its view (workstation_agent_versions, at each scrape). */
  agents?(): Iterable<Pick<VmView, "connected" | "agentVersion">>;
  counters(): FleetCounters;
  /** Every VM with its change version (absent: /metrics rebuilds every VM's series from views() at each scrape). */
  seriesSources?(): Iterable<VmSeriesSource>;
  /** One VM in detail, for /vm/NAMESPACE/NAME; undefined when the collector does not know it. */
  detail?(namespace: string, name: string, nowMs: number): VmDetail | undefined;
}
