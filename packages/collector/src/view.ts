// What the status page, /api/vms and /metrics read: a plain snapshot per VM.
import type { Explanation, Policy } from "./engine/types.js";
import type { ReportReadings } from "./whatif/readings.js";

export type { ReportReadings };

export interface LeaseView {
  id: string;
  user: string;
  uid: number;
  reason: string;
  expiresAtMs: number;
  clamped: boolean;
}

export interface VmView {
  namespace: string;
  name: string;
  state: string;
  mode: string;
  autostop: boolean;
  connected: boolean;
  agentVersion: string;
  peer: string;
  lastReportAtMs?: number;
  lastActivityAtMs?: number;
  idleSeconds?: number;
  idleTimeoutSeconds: number;
  stopDeadlineMs?: number;
  activeSignals: string[];
  /** Every signal family, active or not, for signal_active series. */
  signals: Record<string, boolean>;
  explanation: string;
  gpus: Array<{ gpu: string; utilizationRatio: number }>;
  disks: Array<{ mount: string; usedRatio: number }>;
  leases: LeaseView[];
  policyErrors: string[];
  /** GPUs in the agent's last Report (kept while the agent is away: it is the VM's hardware). */
  gpuCount?: number;
  /**
   * The idleness-deciding values of the latest Report, only while the agent is
   * connected (stale values of a gone agent are not exported). Prometheus keeps
   * them so `ws-collector whatif` can replay history under other thresholds.
   */
  readings?: ReportReadings;
  /** The VM's owner, from the label or annotation notifications.ownerKey names ("" when none). */
  owner?: string;
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
}

export interface FleetReader {
  views(nowMs: number): VmView[];
  counters(): FleetCounters;
  /** One VM in detail, for /vm/NAMESPACE/NAME; undefined when the collector does not know it. */
  detail?(namespace: string, name: string, nowMs: number): VmDetail | undefined;
}
