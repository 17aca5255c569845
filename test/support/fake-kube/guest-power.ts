/**
 * A guest that powers itself off (`poweroff`, `ws-agent seal --poweroff`), and what KubeVirt does
 * next by the VM's run strategy (kubevirt.io/user-guide/compute/run_strategies, KubeVirt 1.4):
 * Always respawns a new VMI whatever way the old one ended; RerunOnFailure, Once and Manual leave
 * the finished VMI (phase Succeeded) and the VM reads Stopped. Kept apart from the stop/start
 * subresources: this is the guest's own doing, not an API call.
 */
import { runStrategyOf, type WorkstationSeeder } from "./kubevirt.js";
import { markReady } from "./provisioning.js";
import { resourceByKind } from "./resources.js";
import type { KubeObject, ObjectStore } from "./store.js";

const VM = resourceByKind("VirtualMachine");
const VMI = resourceByKind("VirtualMachineInstance");
const POD = resourceByKind("Pod");

/** Run strategies under which virt-controller creates a new VMI after the guest shut down cleanly. */
export const RESPAWNS_AFTER_GUEST_SHUTDOWN: readonly string[] = ["Always"];

export interface GuestPowerOff {
  /** The run strategy the VM had when its guest powered off. */
  runStrategy: string;
  /** The VMI that ended, and the one virt-controller made in its place (null: none). */
  endedUid: string | undefined;
  respawned: KubeObject | null;
}

function launcherPods(store: ObjectStore, namespace: string, name: string): KubeObject[] {
  return store
    .list(POD, namespace)
    .filter(
      (p) =>
        p.metadata.labels?.["kubevirt.io"] === "virt-launcher" && p.metadata.labels["vm.kubevirt.io/name"] === name,
    );
}

export function guestPowerOff(
  store: ObjectStore,
  seeder: WorkstationSeeder,
  namespace: string,
  name: string,
): GuestPowerOff {
  const vm = store.get(VM, namespace, name);
  const vmi = store.get(VMI, namespace, name);
  if (!vm || !vmi) throw new Error(`fake-kube: ${namespace}/${name} has no running guest to power off`);
  const runStrategy = runStrategyOf(vm);
  const endedUid = vmi.metadata.uid;
  const status = (vmi["status"] ?? {}) as Record<string, unknown>;
  store.update(VMI, { ...vmi, status: { ...status, phase: "Succeeded" } });
  for (const pod of launcherPods(store, namespace, name)) {
    store.update(POD, { ...pod, status: { ...((pod["status"] ?? {}) as object), phase: "Succeeded" } });
  }
  if (RESPAWNS_AFTER_GUEST_SHUTDOWN.includes(runStrategy)) {
    for (const pod of launcherPods(store, namespace, name)) store.delete(POD, namespace, pod.metadata.name ?? "");
    store.delete(VMI, namespace, name);
    seeder.start(namespace, name);
    markReady(store, namespace, name, true);
    return { runStrategy, endedUid, respawned: store.get(VMI, namespace, name) ?? null };
  }
  const current = store.get(VM, namespace, name) ?? vm;
  const vmStatus = (current["status"] ?? {}) as Record<string, unknown>;
  store.update(VM, { ...current, status: { ...vmStatus, printableStatus: "Stopped", ready: false } });
  markReady(store, namespace, name, false);
  return { runStrategy, endedUid, respawned: null };
}
