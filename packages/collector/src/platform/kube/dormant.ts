// Dormant workstations, the Kubernetes edge (issue 38 item 4): every `dormant.scanEvery` it looks
// at the tracked VMs the inventory holds, reads the PVCs of the stopped ones (GET only: the RBAC
// stays read-only on PVCs), keeps the `<prefix>dormant` annotation (dormant/report.ts) and hands
// a due reminder to `notify`. Only the leader writes and notifies; every replica keeps the
// report the pages and /metrics show. It never deletes, resizes or snapshots anything.
import { errorMessage } from "@ws/protocol";
import type { DormantConfig } from "../../outreach/dormant/config.js";
import { type DormantDisk, type DormantVm, planDormant } from "../../outreach/dormant/report.js";
import { quantityBytes } from "../../outreach/adoption/given-back.js";
import { httpStatusOf, type KubeClients } from "./client.js";
import type { InventoryVm } from "./inventory.js";
import { isStopInEffect } from "./vm-model.js";

export interface DormantWatchOptions {
  clients: Pick<KubeClients, "core">;
  list: () => InventoryVm[];
  tracked: (vm: InventoryVm) => boolean;
  prefix: string;
  config: DormantConfig;
  nowMs: () => number;
  isLeader: () => boolean;
  ownerOf: (vm: InventoryVm) => string | null;
  profileOf: (vm: InventoryVm) => string;
  patch: (
    vm: { namespace: string; name: string },
    annotations: Record<string, string | null>,
  ) => Promise<{ ok: boolean; message: string }>;
  /** A reminder is due (its time is already on the VM). */
  notify: (vm: DormantVm, facts: InventoryVm) => void;
  log: (level: "info" | "warn", message: string) => void;
}

/** A PVC's size and class, read with one GET; an unreadable one is listed with what is unknown left null. */
export async function readDisk(
  clients: Pick<KubeClients, "core">,
  namespace: string,
  claim: string,
): Promise<DormantDisk> {
  try {
    const pvc = await clients.core.readNamespacedPersistentVolumeClaim({ namespace, name: claim });
    const size = pvc.status?.capacity?.["storage"] ?? pvc.spec?.resources?.requests?.["storage"];
    return {
      claim,
      bytes: size === undefined ? null : quantityBytes(String(size)),
      storageClass: pvc.spec?.storageClassName ?? null,
      snapshots: null,
    };
  } catch (error) {
    if (httpStatusOf(error) === 404) return { claim, bytes: 0, storageClass: null, snapshots: null };
    throw error;
  }
}

/** The PVCs a VM's volumes name (a DataVolume's PVC has its name), each once. */
export function claimsOf(vm: Pick<InventoryVm, "volumes">): string[] {
  return [...new Set(vm.volumes.map((volume) => volume.claimName).filter((claim): claim is string => !!claim))];
}

export class DormantWatch {
  private latest: DormantVm[] = [];
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  /** VMs this collector saw running: when one stops, its stop is now, not ws's older last-stop record. */
  private readonly seenRunning = new Set<string>();

  constructor(private readonly options: DormantWatchOptions) {}

  /** The dormant VMs as of the last look, longest stopped first. */
  report(): DormantVm[] {
    return this.latest;
  }

  start(): void {
    void this.scan();
    this.timer = setInterval(() => void this.scan(), this.options.config.scanEverySeconds * 1000);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    await this.running;
  }

  /** One look (one at a time: a slow API server delays the next look instead of stacking them). */
  scan(): Promise<void> {
    this.running ??= this.look().finally(() => {
      this.running = undefined;
    });
    return this.running;
  }

  private async look(): Promise<void> {
    const o = this.options;
    const found: DormantVm[] = [];
    for (const facts of o.list()) {
      if (!o.tracked(facts)) continue;
      const now = o.nowMs();
      const stopped = isStopInEffect(facts, facts.vmi) && facts.vmi === null;
      const id = `${facts.namespace}/${facts.name}`;
      if (!stopped) this.seenRunning.add(id);
      const ranSinceLastStop = this.seenRunning.has(id);
      const plan = planDormant({ annotations: facts.annotations, stopped, ranSinceLastStop }, o.prefix, o.config, now);
      const vm = { namespace: facts.namespace, name: facts.name };
      try {
        let written = true;
        if (plan.write !== undefined && o.isLeader()) {
          const result = await o.patch(vm, { [`${o.prefix}dormant`]: plan.write });
          written = result.ok;
          if (!result.ok) o.log("warn", `dormant: ${facts.namespace}/${facts.name}: ${result.message}`);
        }
        // Once its stop is on the VM, the record counts: forget the sighting (the set stays bounded).
        if (stopped && written && plan.write !== undefined && o.isLeader()) this.seenRunning.delete(id);
        if (!plan.dormant || !plan.state) continue;
        const disks: DormantDisk[] = [];
        for (const claim of claimsOf(facts)) disks.push(await readDisk(o.clients, facts.namespace, claim));
        const dormant: DormantVm = {
          ...vm,
          owner: o.ownerOf(facts),
          profile: o.profileOf(facts),
          stoppedSinceMs: plan.state.sinceMs,
          stoppedSeconds: Math.max(0, Math.floor((now - plan.state.sinceMs) / 1000)),
          disks,
          bytes: disks.reduce((sum, disk) => sum + (disk.bytes ?? 0), 0),
          notifiedMs: plan.state.notifiedMs ?? null,
        };
        found.push(dormant);
        // Remembered on the VM first: a reminder whose record could not be written is not sent (no resend after a restart).
        if (plan.notify && o.isLeader() && written) o.notify(dormant, facts);
      } catch (error) {
        o.log("warn", `dormant: ${facts.namespace}/${facts.name}: ${errorMessage(error)}`);
      }
    }
    this.latest = found.sort((a, b) => a.stoppedSinceMs - b.stoppedSinceMs);
  }
}
