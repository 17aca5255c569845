// What the starting page needs from the platform (Kubernetes: the inventory and the `start`
// subresource; standalone: a configured command), so the page and its stages know nothing of
// KubeVirt's API.
import type { VmKey } from "../../model/vm-key.js";
import type { StageName } from "./progress.js";
import type { LastStopFacts } from "../../loop/last-stop.js";
import type { ReturnRecord } from "../warm/returns.js";

// The last-stop record's shape and parser live below both modes (loop/last-stop.ts); the port speaks of it.
export type { LastStopFacts } from "../../loop/last-stop.js";

/** The VM's running instance as the platform has it (KubeVirt's VMI). */
export interface InstanceFacts {
  phase: string | null;
  nodeName: string | null;
  createdAtMs: number | null;
  /** When each phase began (Scheduling, Scheduled, Running), ms. */
  phaseTimes: Record<string, number>;
  /** The scheduler cannot place it: its own reason and message, since when. */
  unschedulable: { reason: string; message: string; sinceMs: number | null } | null;
}

export interface StartFacts {
  owner: string | null;
  /** "Always", "Manual", … (Kubernetes); "" when the platform has none. */
  runStrategy: string;
  /** KubeVirt's printableStatus ("Stopped", "Starting", "Running", "ErrorUnschedulable"), or "". */
  status: string;
  /** What a start allocates: "8 CPU", "64Gi memory", "1 × nvidia.com/A100-PCIE-40GB". */
  allocates: string[];
  /** The devices a start needs (KubeVirt: its GPUs' and host devices' names): what a shortage is judged by. */
  needs?: string[];
  /** True when the VM is meant to run now (started, starting, or running). */
  wantsToRun: boolean;
  instance: InstanceFacts | null;
  lastStop: LastStopFacts | null;
  labels: Record<string, string>;
  annotations: Record<string, string>;
  /** The platform cannot start this VM: what to do instead (the page shows it in place of the button). */
  startHint?: string;
  /** Where the collector may probe the VM's entry service (Kubernetes: the launcher pod's IPs). */
  entryAddresses?: string[];
  /** The platform's own names for stages (standalone: the start command instead of a VMI). */
  stageLabels?: Partial<Record<StageName, string>>;
}

export type StartResult = { ok: true; already: boolean; message: string } | { ok: false; message: string };

export interface StartPlatform {
  /** Every VM the platform knows (the fixed address finds its VM among them). */
  list(): VmKey[];
  /** undefined: the platform does not know this VM. */
  facts(vm: VmKey): StartFacts | undefined;
  /** Asks for the start (KubeVirt: PUT …/start). Never rejects. */
  start(vm: VmKey): Promise<StartResult>;
  /**
   * Keeps a dispute with the last stop's record (Kubernetes: in the last-stop annotation), at most
   * one per stop: when the record (read fresh, not from a cache) already has one, or names another
   * stop than `stopAtMs`, nothing is written and the answer says so.
   */
  recordDispute?(vm: VmKey, dispute: Record<string, unknown>, stopAtMs: number): Promise<DisputeOutcome>;
  /**
   * Writes ws's durable per-VM settings (the start schedule) where the platform keeps them
   * (Kubernetes: the VM's annotations, merge-patched; null removes one). Names are after the prefix.
   */
  writeAnnotations?(vm: VmKey, annotations: Record<string, string | null>): Promise<{ ok: boolean; message: string }>;
  /**
   * Keeps a return (when, by which path, how long the person waited) on the VM, bounded
   * (Kubernetes: the `returns` annotation; comeback/warm/returns.ts). Resolves with what went
   * wrong, or undefined once kept. Never rejects.
   */
  recordReturn?(vm: VmKey, record: ReturnRecord, nowMs: number): Promise<string | undefined>;
}

/**
 * What became of a dispute: "kept" (this call wrote it: count it, audit it, send it once),
 * "already" (the stop had one: answer "already reported"), "failed" (nothing written).
 */
export type DisputeOutcome =
  | { kept: "kept"; message: string }
  | { kept: "already"; atMs: number }
  | { kept: "failed"; message: string };
