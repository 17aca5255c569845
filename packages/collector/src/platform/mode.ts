// What differs between standalone and Kubernetes mode: serve/serve.ts runs either, platform/kube/serve.ts builds
// the Kubernetes one. Its own file, so that neither imports the other.
import type { AuthResult } from "../agents/server.js";
import type { VmKey } from "../model/vm-key.js";
import type { VmRecord } from "../engine/types.js";
import type { Fleet } from "../loop/fleet.js";
import type { Runnable } from "../lib/runnable.js";
import type { Actuator } from "../loop/actions.js";
import type { PolicySource } from "../model/policy-source.js";
import type { StartPlatform } from "../comeback/start/platform.js";
import type { VmPlatformDetails } from "../model/vm-view.js";
import type { DormantVm } from "../outreach/dormant/report.js";

export interface CollectorMode {
  name: "standalone" | "kubernetes";
  actuator: Actuator;
  /** Extra identity checks after the token (Kubernetes: the source IP is the VM's launcher pod). */
  authenticate?: (vm: VmKey, peer: string) => Promise<AuthResult> | AuthResult;
  policySource: PolicySource;
  restore?: (vm: VmKey, nowMs: number) => VmRecord | undefined;
  vmRunning?: (vm: VmKey) => boolean | undefined;
  /** Owner, what a stop frees, declared GPUs (Kubernetes: from the VirtualMachine). */
  vmDetails?: (vm: VmKey) => VmPlatformDetails | undefined;
  /** Starting a stopped VM and what its starting page shows (Kubernetes: the `start` subresource). */
  startPlatform?: StartPlatform;
  /** True while this replica may act and should receive agents (the leader). */
  leader: () => boolean;
  /**
   * The VMs whose agents may connect, as known once the mode's runnables started (Kubernetes: the tracked VMs
   * of the synced inventory; standalone: the configured ones): serve/serve.ts warns when the cap on
   * agent connections is below it.
   */
  fleetSize: () => number;
  /**
   * The mode's runnables once the fleet exists (Kubernetes: the list-watch, the leader label, the
   * elector), registered with serve/manager.ts before the listeners: started in this order, stopped
   * in reverse.
   */
  runnables?: (fleet: Fleet) => Runnable[];
  /**
   * Dormant workstations (Kubernetes: platform/kube/dormant.ts): the VMs stopped longer than
   * dormant.after as of the last look, and where a due reminder goes (serve/serve.ts: the webhooks).
   */
  dormant?: {
    report: () => DormantVm[];
    onReminder: (
      send: (vm: DormantVm, metadata: { labels: Record<string, string>; annotations: Record<string, string> }) => void,
    ) => void;
  };
}
