/**
 * What happens between `kubectl apply` of a DataVolume and a VM and the VMI existing: CDI imports
 * (or clones) the DataVolume into a PVC of the same name and marks it Ready, and virt-controller
 * creates the VMI only once every DataVolume the VM uses is Ready (until then the VM reads
 * Provisioning and there is no VMI to wait for). Opt-in (FakeKubeOptions.provisioning): tests
 * that seed VMs directly keep full control of their VMIs.
 */
import { runStrategyOf, type WorkstationSeeder } from "./kubevirt.js";
import { resourceByKind } from "./resources.js";
import type { KubeObject, ObjectStore, StoredEvent } from "./store.js";

const VM = resourceByKind("VirtualMachine");
const VMI = resourceByKind("VirtualMachineInstance");
const DV = resourceByKind("DataVolume");
const PVC = resourceByKind("PersistentVolumeClaim");

/** Run strategies under which virt-controller starts a VM on creation (Manual and Halted wait for `start`). */
const STARTS_ON_CREATION = ["Always", "RerunOnFailure", "Once"];

export interface ProvisioningOptions {
  /** How long CDI takes to import or clone a DataVolume. */
  importDelayMs: number;
}

type Obj = Record<string, any>; // KubeVirt and CDI objects as stored

function isReady(dv: KubeObject | undefined): boolean {
  const conditions = ((dv?.["status"] as Obj | undefined)?.["conditions"] ?? []) as Obj[];
  return conditions.some((c) => c["type"] === "Ready" && c["status"] === "True");
}

function dataVolumesOf(vm: KubeObject): string[] {
  const volumes = ((vm["spec"] as Obj | undefined)?.["template"]?.["spec"]?.["volumes"] ?? []) as Obj[];
  return volumes.map((v) => v["dataVolume"]?.["name"]).filter((n): n is string => typeof n === "string");
}

/** The Ready condition KubeVirt keeps on the VM (from its VMI) and on the VMI, which `kubectl wait --for=condition=Ready` reads. */
export function markReady(store: ObjectStore, namespace: string, name: string, ready: boolean): void {
  const condition = { type: "Ready", status: ready ? "True" : "False" };
  const vm = store.get(VM, namespace, name);
  if (vm) store.update(VM, { ...vm, status: { ...((vm["status"] ?? {}) as Obj), conditions: [condition] } });
  const vmi = store.get(VMI, namespace, name);
  if (vmi) store.update(VMI, { ...vmi, status: { ...((vmi["status"] ?? {}) as Obj), conditions: [condition] } });
}

export function startProvisioning(
  store: ObjectStore,
  seeder: WorkstationSeeder,
  options: ProvisioningOptions,
): { close(): void } {
  const timers = new Set<NodeJS.Timeout>();
  const later = (ms: number, work: () => void) => {
    const timer = setTimeout(() => {
      timers.delete(timer);
      work();
    }, ms);
    timers.add(timer);
  };

  function finishImport(namespace: string, name: string): void {
    const dv = store.get(DV, namespace, name);
    if (!dv || isReady(dv)) return;
    const source = ((dv["spec"] as Obj | undefined)?.["source"] ?? {}) as Obj;
    const clone = source["pvc"] as Obj | undefined;
    if (clone && !store.get(PVC, clone["namespace"] ?? namespace, clone["name"] ?? "")) {
      // CDI waits for the clone source to exist.
      store.update(DV, {
        ...dv,
        status: { phase: "CloneScheduled", conditions: [{ type: "Ready", status: "False" }] },
      });
      return;
    }
    const size = (dv["spec"] as Obj | undefined)?.["storage"]?.["resources"]?.["requests"]?.["storage"] ?? "10Gi";
    if (!store.get(PVC, namespace, name)) {
      store.create(PVC, {
        metadata: {
          name,
          namespace,
          ownerReferences: [
            { apiVersion: "cdi.kubevirt.io/v1beta1", kind: "DataVolume", name, uid: dv.metadata.uid, controller: true },
          ],
        },
        spec: {
          accessModes: ["ReadWriteOnce"],
          resources: { requests: { storage: size } },
          volumeName: `pvc-${dv.metadata.uid}`,
        },
        status: { phase: "Bound", capacity: { storage: size } },
      });
    }
    store.update(DV, {
      ...(store.get(DV, namespace, name) ?? dv),
      status: {
        phase: "Succeeded",
        progress: "100.0%",
        conditions: [
          { type: "Bound", status: "True" },
          { type: "Running", status: "False", reason: "Completed" },
          { type: "Ready", status: "True" },
        ],
      },
    });
  }

  function reconcileVm(vm: KubeObject): void {
    const namespace = vm.metadata.namespace ?? "";
    const name = vm.metadata.name ?? "";
    if (!STARTS_ON_CREATION.includes(runStrategyOf(vm))) return;
    if (store.get(VMI, namespace, name)) return;
    if ((vm["status"] as Obj | undefined)?.["created"] === true) return; // ran before: not a creation
    const pending = dataVolumesOf(vm).filter((dv) => !isReady(store.get(DV, namespace, dv)));
    if (pending.length > 0) {
      const status = (vm["status"] ?? {}) as Obj;
      if (status["printableStatus"] !== "Provisioning") {
        store.update(VM, { ...vm, status: { ...status, printableStatus: "Provisioning", ready: false } });
      }
      return;
    }
    seeder.start(namespace, name);
    markReady(store, namespace, name, true);
  }

  function onEvent(event: StoredEvent): void {
    if (event.type === "DELETED") return;
    const { namespace = "", name = "" } = event.object.metadata;
    if (event.resource === DV && event.type === "ADDED")
      later(options.importDelayMs, () => finishImport(namespace, name));
    if (event.resource === PVC && event.type === "ADDED") {
      for (const dv of store.list(DV)) {
        const clone = ((dv["spec"] as Obj | undefined)?.["source"]?.["pvc"] ?? null) as Obj | null;
        if (clone && clone["name"] === name && (clone["namespace"] ?? dv.metadata.namespace) === namespace) {
          later(options.importDelayMs, () => finishImport(dv.metadata.namespace ?? "", dv.metadata.name ?? ""));
        }
      }
    }
    if (event.resource === VM && event.type === "ADDED")
      later(0, () => {
        const vm = store.get(VM, namespace, name);
        if (vm) reconcileVm(vm);
      });
    if (event.resource === DV && isReady(event.object)) {
      later(0, () => {
        for (const vm of store.list(VM, namespace)) if (dataVolumesOf(vm).includes(name)) reconcileVm(vm);
      });
    }
  }

  const unsubscribe = store.subscribe(onEvent);
  return {
    close() {
      unsubscribe();
      for (const t of timers) clearTimeout(t);
      timers.clear();
    },
  };
}
