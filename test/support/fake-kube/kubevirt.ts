/**
 * KubeVirt as the collector sees it: the `start` and `stop` subresources with virt-api's
 * semantics per run strategy (run-strategy.ts), a stand-in for virt-controller that finishes a
 * stop (the VMI and its virt-launcher pod go away, printableStatus becomes Stopped) and carries a
 * start through its stages (VMI Pending → Scheduling → Scheduled on a node → Running, or held
 * Unschedulable with the scheduler's message), and helpers that seed workstation VMs with their
 * PVCs, VMI and launcher pod.
 */
import { randomUUID } from "node:crypto";
import { ApiError, conflict, notFound, type KubeObject, type ObjectStore } from "./store.js";
import { resourceByKind } from "./resources.js";
import { controllerCreatesInstance, startOutcome, stopOutcome, type StrategyOutcome } from "./run-strategy.js";

const VM = resourceByKind("VirtualMachine");
const VMI = resourceByKind("VirtualMachineInstance");
const POD = resourceByKind("Pod");
const PVC = resourceByKind("PersistentVolumeClaim");

type Spec = Record<string, unknown>;

function specOf(obj: KubeObject): Spec {
  return (obj["spec"] ?? {}) as Spec;
}

function statusOf(obj: KubeObject): Spec {
  return (obj["status"] ?? {}) as Spec;
}

/** virt's `vm.RunStrategy()`: spec.running wins when set, absent both means Halted. */
export function runStrategyOf(vm: KubeObject): string {
  const spec = specOf(vm);
  const running = spec["running"];
  const runStrategy = spec["runStrategy"];
  if (typeof running === "boolean" && typeof runStrategy === "string") {
    throw new ApiError(500, "InternalError", "running and runStrategy are mutually exclusive");
  }
  if (typeof running === "boolean") return running ? "Always" : "Halted";
  if (typeof runStrategy === "string") return runStrategy;
  return "Halted";
}

function isFinal(vmi: KubeObject): boolean {
  const phase = statusOf(vmi)["phase"];
  return phase === "Succeeded" || phase === "Failed";
}

export interface StopOptionsBody {
  gracePeriod?: number;
  dryRun?: string[];
}

export function parseStopBody(raw: string): StopOptionsBody {
  if (raw.trim() === "") return {};
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch {
    throw new ApiError(400, "BadRequest", "Can not unmarshal Request body to struct");
  }
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) {
    throw new ApiError(400, "BadRequest", "Can not unmarshal Request body to struct");
  }
  const body = parsed as Record<string, unknown>;
  if (body["gracePeriod"] !== undefined && !Number.isInteger(body["gracePeriod"])) {
    throw new ApiError(400, "BadRequest", "Can not unmarshal Request body to struct: gracePeriod must be an integer");
  }
  return body as StopOptionsBody;
}

/** KubeVirt's default VMI terminationGracePeriodSeconds (v1.DefaultGracePeriodSeconds) when the spec has none. */
export const DEFAULT_VMI_GRACE_SECONDS = 30;

/** One VMI torn down by a stop, with the grace its guest was given. */
export interface VmiTermination {
  namespace: string;
  name: string;
  /** The VMI's spec.terminationGracePeriodSeconds when the teardown began (after the stop's own patch). */
  gracePeriodSeconds: number;
  /** Date.now() when the teardown began and when the VMI was gone (undefined while terminating). */
  beganAtMs: number;
  goneAtMs?: number;
}

export interface KubevirtController {
  /** Handles PUT .../virtualmachines/{name}/stop. Throws ApiError like virt-api does. */
  stop(namespace: string, name: string, body: StopOptionsBody): void;
  /** Handles PUT .../virtualmachines/{name}/start. Throws ApiError like virt-api does. */
  start(namespace: string, name: string, body: StopOptionsBody): void;
  /**
   * The scheduler cannot place this VM's launcher pod (a GPU taken, a node full): its VMIs stay
   * Scheduling with PodScheduled=False, reason Unschedulable, and this message, until released.
   */
  holdScheduling(namespace: string, name: string, message: string): void;
  releaseScheduling(namespace: string, name: string): void;
  /** Every start virt-api accepted, in order. */
  readonly starts: Array<{ namespace: string; name: string; runStrategy: string; atMs: number }>;
  /** Every VMI teardown so far, in order. */
  readonly terminations: VmiTermination[];
  /** Stops pending controller work (timers). */
  close(): void;
}

export interface KubevirtControllerOptions {
  /** How long virt-controller takes to act on a recorded stop. */
  stopDelayMs: number;
  /**
   * Wall-clock milliseconds per second of the VMI's terminationGracePeriodSeconds: the VMI (with
   * its launcher pod) stays, terminating, for grace × this before it is gone, as virt-handler
   * waits for the guest to shut down. 0 (the default): gone at once, the grace only recorded.
   */
  graceSecondMs?: number;
  /** Wall-clock milliseconds between the stages of a start (Pending, Scheduling, Scheduled, Running). */
  startStepMs?: number;
  /** The launcher pod IP a started VM's pod gets (the seeder's, so agents keep connecting from it). */
  podIpFor?: (namespace: string, name: string) => string;
  /** The node a started VMI is scheduled to (default "node-1"). */
  nodeName?: string;
}

export function kubevirtController(store: ObjectStore, options: KubevirtControllerOptions): KubevirtController {
  const timers = new Set<NodeJS.Timeout>();
  const terminations: VmiTermination[] = [];
  const starts: KubevirtController["starts"] = [];
  const unschedulable = new Map<string, string>();
  const stamp = () => new Date().toISOString().replace(/\.\d+Z$/, "Z");

  /** spec.runStrategy (or spec.running) as a strategy outcome says. */
  function setStrategy(vm: KubeObject, outcome: Extract<StrategyOutcome, { kind: "set-strategy" }>): KubeObject {
    const spec = specOf(vm);
    const next =
      typeof spec["running"] === "boolean"
        ? { ...spec, running: outcome.runStrategy !== "Halted" }
        : { ...spec, runStrategy: outcome.runStrategy };
    return store.update(VM, { ...vm, spec: next });
  }

  /** After an accepted start: virt-controller creates the VMI when the strategy (or a queued Start) wants one. */
  function reconcileStart(namespace: string, name: string): void {
    const vm = store.get(VM, namespace, name);
    if (!vm) return;
    const old = store.get(VMI, namespace, name);
    const status = statusOf(vm);
    const queued = (Array.isArray(status["stateChangeRequests"]) ? (status["stateChangeRequests"] as Spec[]) : []).map(
      (r) => String(r["action"]),
    );
    const instance = {
      live: old !== undefined && !isFinal(old),
      phase: old ? String(statusOf(old)["phase"] ?? "") : null,
    };
    if (!controllerCreatesInstance(runStrategyOf(vm), instance, queued)) return;
    if (old) {
      for (const pod of launcherPodsOf(namespace, name)) store.delete(POD, namespace, pod.metadata.name ?? "");
      store.delete(VMI, namespace, name);
    }
    const rest: Spec = { ...status, printableStatus: "Starting", created: true, ready: false };
    delete rest["stateChangeRequests"];
    const updated = store.update(VM, { ...vm, status: rest });
    const template = (specOf(updated)["template"] ?? {}) as { spec?: Spec };
    store.create(VMI, {
      metadata: {
        name,
        namespace,
        labels: { "kubevirt.io/domain": name },
        ownerReferences: [
          { apiVersion: "kubevirt.io/v1", kind: "VirtualMachine", name, uid: updated.metadata.uid, controller: true },
        ],
      },
      spec: { ...(template.spec ?? {}) },
      status: {
        phase: "Pending",
        phaseTransitionTimestamps: [{ phase: "Pending", phaseTransitionTimestamp: stamp() }],
      },
    });
    later(options.startStepMs ?? 0, () => advance(namespace, name));
  }

  function setVmiStatus(namespace: string, name: string, change: (status: Spec) => Spec): KubeObject | undefined {
    const vmi = store.get(VMI, namespace, name);
    if (!vmi) return undefined;
    return store.update(VMI, { ...vmi, status: change({ ...statusOf(vmi) }) });
  }

  function withPhase(status: Spec, phase: string): Spec {
    const stamps = Array.isArray(status["phaseTransitionTimestamps"])
      ? [...(status["phaseTransitionTimestamps"] as Spec[])]
      : [];
    stamps.push({ phase, phaseTransitionTimestamp: stamp() });
    return { ...status, phase, phaseTransitionTimestamps: stamps };
  }

  /** One stage of a start: Pending → Scheduling → (held Unschedulable) → Scheduled → Running. */
  function advance(namespace: string, name: string): void {
    const vmi = store.get(VMI, namespace, name);
    if (!vmi || vmi.metadata.deletionTimestamp) return;
    const phase = statusOf(vmi)["phase"];
    const next = () => later(options.startStepMs ?? 0, () => advance(namespace, name));
    const podName = `virt-launcher-${name}-${(vmi.metadata.uid ?? "").replace(/-/g, "").slice(0, 5)}`;
    if (phase === "Pending") {
      store.create(POD, {
        ...launcherPod(podName, namespace, name, vmi),
        status: { phase: "Pending" },
      });
      setVmiStatus(namespace, name, (status) => withPhase(status, "Scheduling"));
      return next();
    }
    if (phase === "Scheduling") {
      const message = unschedulable.get(`${namespace}/${name}`);
      const condition = message
        ? { type: "PodScheduled", status: "False", reason: "Unschedulable", message, lastTransitionTime: stamp() }
        : undefined;
      if (condition) {
        // virt-controller copies the launcher pod's PodScheduled condition onto the VMI.
        setVmiStatus(namespace, name, (status) => ({ ...status, conditions: [condition] }));
        const pod = store.get(POD, namespace, podName);
        if (pod) store.update(POD, { ...pod, status: { ...statusOf(pod), conditions: [condition] } });
        setPrintableStatus(namespace, name, "ErrorUnschedulable");
        return; // releaseScheduling() continues
      }
      const nodeName = options.nodeName ?? "node-1";
      const ip = options.podIpFor?.(namespace, name) ?? "10.244.1.10";
      const pod = store.get(POD, namespace, podName);
      if (pod)
        store.update(POD, {
          ...pod,
          spec: { ...specOf(pod), nodeName },
          status: {
            phase: "Running",
            podIP: ip,
            podIPs: [{ ip }],
            conditions: [{ type: "PodScheduled", status: "True", lastTransitionTime: stamp() }],
          },
        });
      setVmiStatus(namespace, name, (status) => ({
        ...withPhase(status, "Scheduled"),
        nodeName,
        conditions: [{ type: "PodScheduled", status: "True", lastTransitionTime: stamp() }],
      }));
      setPrintableStatus(namespace, name, "Starting");
      return next();
    }
    if (phase === "Scheduled") {
      const ip = options.podIpFor?.(namespace, name) ?? "10.244.1.10";
      setVmiStatus(namespace, name, (status) => ({
        ...withPhase(status, "Running"),
        interfaces: [{ name: "default", ipAddress: ip, ipAddresses: [ip] }],
        conditions: [
          ...((status["conditions"] as Spec[] | undefined) ?? []),
          { type: "Ready", status: "True", lastTransitionTime: stamp() },
        ],
      }));
      setPrintableStatus(namespace, name, "Running", { ready: true });
    }
  }
  const graceSecondMs = options.graceSecondMs ?? 0;

  function later(ms: number, work: () => void): void {
    const timer = setTimeout(() => {
      timers.delete(timer);
      work();
    }, ms);
    timers.add(timer);
  }

  function launcherPodsOf(namespace: string, name: string): KubeObject[] {
    return store.list(POD, namespace).filter((pod) => {
      const labels = pod.metadata.labels ?? {};
      return labels["kubevirt.io"] === "virt-launcher" && labels["vm.kubevirt.io/name"] === name;
    });
  }

  function setPrintableStatus(namespace: string, name: string, printableStatus: string, extra: Spec = {}): void {
    const vm = store.get(VM, namespace, name);
    if (!vm) return;
    const status = { ...statusOf(vm), printableStatus, ...extra };
    store.update(VM, { ...vm, status });
  }

  /**
   * What virt-controller and virt-handler do once a stop is recorded: the VMI is deleted, the
   * guest gets the VMI's terminationGracePeriodSeconds to shut down, then the VMI and its
   * launcher pod are gone and the VM reads Stopped.
   */
  function finishStop(namespace: string, name: string): void {
    const vmi = store.get(VMI, namespace, name);
    if (!vmi) return removeInstance(namespace, name, undefined);
    if (vmi.metadata.deletionTimestamp) return; // already terminating
    const specGrace = specOf(vmi)["terminationGracePeriodSeconds"];
    const grace = typeof specGrace === "number" ? specGrace : DEFAULT_VMI_GRACE_SECONDS;
    const termination: VmiTermination = { namespace, name, gracePeriodSeconds: grace, beganAtMs: Date.now() };
    terminations.push(termination);
    const waitMs = grace * graceSecondMs;
    if (waitMs <= 0) return removeInstance(namespace, name, termination);
    const deletionTimestamp = new Date().toISOString().replace(/\.\d+Z$/, "Z");
    const terminating = (obj: KubeObject): KubeObject => ({
      ...obj,
      metadata: { ...obj.metadata, deletionTimestamp, deletionGracePeriodSeconds: grace },
    });
    store.update(VMI, terminating(vmi));
    for (const pod of launcherPodsOf(namespace, name)) store.update(POD, terminating(pod));
    later(waitMs, () => removeInstance(namespace, name, termination));
  }

  function removeInstance(namespace: string, name: string, termination: VmiTermination | undefined): void {
    for (const pod of launcherPodsOf(namespace, name)) store.delete(POD, namespace, pod.metadata.name ?? "");
    if (store.get(VMI, namespace, name)) store.delete(VMI, namespace, name);
    if (termination) termination.goneAtMs = Date.now();
    const vm = store.get(VM, namespace, name);
    if (!vm) return;
    const status: Spec = { ...statusOf(vm), printableStatus: "Stopped", ready: false };
    delete status["stateChangeRequests"];
    store.update(VM, { ...vm, status });
  }

  function scheduleFinish(namespace: string, name: string): void {
    later(options.stopDelayMs, () => finishStop(namespace, name));
  }

  function requestStopThroughStatus(vm: KubeObject, vmi: KubeObject): void {
    const status = statusOf(vm);
    const requests = Array.isArray(status["stateChangeRequests"])
      ? [...(status["stateChangeRequests"] as unknown[])]
      : [];
    requests.push({ action: "Stop", uid: vmi.metadata.uid });
    store.update(VM, { ...vm, status: { ...status, stateChangeRequests: requests, printableStatus: "Stopping" } });
  }

  return {
    terminations,
    stop(namespace, name, body) {
      const vm = store.get(VM, namespace, name);
      if (!vm) throw notFound(VM, name);
      const runStrategy = runStrategyOf(vm);
      const vmi = store.get(VMI, namespace, name);
      const hasLiveVmi = vmi !== undefined && !isFinal(vmi);
      const dryRun = Array.isArray(body.dryRun) && body.dryRun.includes("All");
      let oldGracePeriod: number | undefined;
      if (vmi && hasLiveVmi && body.gracePeriod !== undefined) {
        const vmiSpec = specOf(vmi);
        oldGracePeriod =
          typeof vmiSpec["terminationGracePeriodSeconds"] === "number"
            ? (vmiSpec["terminationGracePeriodSeconds"] as number)
            : undefined;
        if (!dryRun) {
          store.update(VMI, { ...vmi, spec: { ...vmiSpec, terminationGracePeriodSeconds: body.gracePeriod } });
        }
      }
      const outcome = stopOutcome(
        runStrategy,
        { live: hasLiveVmi, phase: vmi ? ((statusOf(vmi)["phase"] as string | undefined) ?? "") : null },
        { requested: body.gracePeriod, current: oldGracePeriod },
      );
      if (outcome.kind === "conflict") throw conflict(VM, name, outcome.message);
      if (dryRun) return;
      if (outcome.kind === "state-change") {
        requestStopThroughStatus(store.get(VM, namespace, name) ?? vm, vmi!);
        scheduleFinish(namespace, name);
        return;
      }
      // Always, Once: flip the VM's desired state; the controller tears the VMI down.
      const updated = setStrategy(vm, outcome);
      if (hasLiveVmi) {
        store.update(VM, { ...updated, status: { ...statusOf(updated), printableStatus: "Stopping" } });
        scheduleFinish(namespace, name);
      } else {
        setPrintableStatus(namespace, name, "Stopped", { ready: false });
      }
    },
    start(namespace, name, body) {
      const vm = store.get(VM, namespace, name);
      if (!vm) throw notFound(VM, name);
      const vmi = store.get(VMI, namespace, name);
      const instance = {
        live: vmi !== undefined && !isFinal(vmi) && !vmi.metadata.deletionTimestamp,
        phase: vmi ? ((statusOf(vmi)["phase"] as string | undefined) ?? "") : null,
      };
      const outcome = startOutcome(runStrategyOf(vm), instance);
      if (outcome.kind === "conflict") throw conflict(VM, name, outcome.message);
      if (Array.isArray(body.dryRun) && body.dryRun.includes("All")) return;
      starts.push({ namespace, name, runStrategy: runStrategyOf(vm), atMs: Date.now() });
      let updated = vm;
      if (outcome.kind === "set-strategy") updated = setStrategy(vm, outcome);
      else {
        const status = statusOf(vm);
        const queued = Array.isArray(status["stateChangeRequests"])
          ? [...(status["stateChangeRequests"] as unknown[])]
          : [];
        queued.push({ action: "Start" });
        updated = store.update(VM, { ...vm, status: { ...status, stateChangeRequests: queued } });
      }
      store.update(VM, { ...updated, status: { ...statusOf(updated), printableStatus: "Starting" } });
      later(options.startStepMs ?? 0, () => reconcileStart(namespace, name));
    },
    holdScheduling(namespace, name, message) {
      unschedulable.set(`${namespace}/${name}`, message);
    },
    releaseScheduling(namespace, name) {
      unschedulable.delete(`${namespace}/${name}`);
      const vmi = store.get(VMI, namespace, name);
      if (vmi && statusOf(vmi)["phase"] === "Scheduling")
        later(options.startStepMs ?? 0, () => advance(namespace, name));
    },
    starts,
    close() {
      for (const t of timers) clearTimeout(t);
      timers.clear();
    },
  };
}

export type VolumeSeed = Record<string, unknown> & { name: string };

export interface WorkstationSeed {
  namespace: string;
  name: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  /** Default "Always". Ignored when `running` is given (the older spec.running field). */
  runStrategy?: string;
  running?: boolean;
  /** KubeVirt volume entries. Default: a DataVolume root disk and a cloud-init NoCloud disk. */
  volumes?: VolumeSeed[];
  /** PVC phase for every claim the volumes name (default Bound); per claim with a map; null: no PVC. */
  pvcPhase?: string | null | Record<string, string | null>;
  /** Create the VMI and launcher pod (default: unless the run strategy is Halted). */
  started?: boolean;
  vmiPhase?: string;
  /** The virt-launcher pod's IP (default: the next of 10.244.0.x). */
  podIp?: string;
  /** Extra IPs for status.podIPs (dual stack). */
  extraPodIps?: string[];
}

export interface SeededWorkstation {
  vm: KubeObject;
  vmi: KubeObject | null;
  pod: KubeObject | null;
  pvcs: KubeObject[];
}

export function defaultVolumes(name: string): VolumeSeed[] {
  return [
    { name: "rootdisk", dataVolume: { name: `${name}-root` } },
    { name: "cloudinitdisk", cloudInitNoCloud: { userData: "#cloud-config\n" } },
  ];
}

export function claimNameOfVolume(volume: VolumeSeed): string | null {
  const pvc = volume["persistentVolumeClaim"] as { claimName?: string } | undefined;
  if (pvc?.claimName) return pvc.claimName;
  const dv = volume["dataVolume"] as { name?: string } | undefined;
  if (dv?.name) return dv.name;
  const ephemeral = volume["ephemeral"] as { persistentVolumeClaim?: { claimName?: string } } | undefined;
  if (ephemeral?.persistentVolumeClaim?.claimName) return ephemeral.persistentVolumeClaim.claimName;
  return null;
}

export class WorkstationSeeder {
  private nextIp = 10;
  private readonly podIps = new Map<string, string>();

  constructor(private readonly store: ObjectStore) {}

  seed(seed: WorkstationSeed): SeededWorkstation {
    const volumes = seed.volumes ?? defaultVolumes(seed.name);
    const pvcs: KubeObject[] = [];
    for (const volume of volumes) {
      const claim = claimNameOfVolume(volume);
      if (!claim || this.store.get(PVC, seed.namespace, claim)) continue;
      const phase =
        seed.pvcPhase === undefined
          ? "Bound"
          : seed.pvcPhase === null || typeof seed.pvcPhase === "string"
            ? seed.pvcPhase
            : seed.pvcPhase[claim] === undefined
              ? "Bound"
              : seed.pvcPhase[claim]!;
      if (phase === null) continue;
      pvcs.push(
        this.store.create(PVC, {
          metadata: { name: claim, namespace: seed.namespace },
          spec: {
            accessModes: ["ReadWriteOnce"],
            resources: { requests: { storage: "50Gi" } },
            storageClassName: "standard",
            volumeMode: "Block",
            ...(phase === "Bound" ? { volumeName: `pvc-${randomUUID()}` } : {}),
          },
          status: {
            phase,
            ...(phase === "Bound" ? { accessModes: ["ReadWriteOnce"], capacity: { storage: "50Gi" } } : {}),
          },
        }),
      );
    }
    const spec: Spec = {
      template: {
        metadata: { labels: { "kubevirt.io/domain": seed.name } },
        spec: {
          domain: {
            devices: { disks: volumes.map((v) => ({ name: v.name, disk: { bus: "virtio" } })) },
            resources: { requests: { memory: "4Gi" } },
          },
          volumes,
        },
      },
    };
    if (seed.running !== undefined) spec["running"] = seed.running;
    else spec["runStrategy"] = seed.runStrategy ?? "Always";
    const started =
      seed.started ?? (seed.running !== undefined ? seed.running : (seed.runStrategy ?? "Always") !== "Halted");
    const vm = this.store.create(VM, {
      metadata: {
        name: seed.name,
        namespace: seed.namespace,
        labels: seed.labels ?? { "workstation.aik8s.run/autostop": "enabled" },
        annotations: seed.annotations ?? {},
      },
      spec,
      status: { printableStatus: started ? "Running" : "Stopped", ready: started, created: started },
    });
    if (seed.podIp) this.podIps.set(`${seed.namespace}/${seed.name}`, seed.podIp);
    if (!started) return { vm, vmi: null, pod: null, pvcs };
    const { vmi, pod } = this.start(seed.namespace, seed.name, seed);
    return { vm: this.store.get(VM, seed.namespace, seed.name) ?? vm, vmi, pod, pvcs };
  }

  /** The launcher pod IP the VM was seeded with (a start through the API keeps it). */
  podIpOf(namespace: string, name: string): string {
    const key = `${namespace}/${name}`;
    if (!this.podIps.has(key)) this.podIps.set(key, `10.244.0.${this.nextIp++}`);
    return this.podIps.get(key)!;
  }

  /** Brings a VM up: run strategy Always, a VMI, a virt-launcher pod with an IP. */
  start(
    namespace: string,
    name: string,
    options: { podIp?: string; extraPodIps?: string[]; vmiPhase?: string } = {},
  ): { vmi: KubeObject; pod: KubeObject } {
    const vm = this.store.get(VM, namespace, name);
    if (!vm) throw new Error(`fake-kube: no VirtualMachine ${namespace}/${name}`);
    const spec = specOf(vm);
    if (typeof spec["running"] === "boolean") spec["running"] = true;
    else if (spec["runStrategy"] === "Halted") spec["runStrategy"] = "Always";
    const updated = this.store.update(VM, {
      ...vm,
      spec,
      status: { ...statusOf(vm), printableStatus: "Running", ready: true, created: true },
    });
    const podIp = options.podIp ?? this.podIps.get(`${namespace}/${name}`) ?? `10.244.0.${this.nextIp++}`;
    this.podIps.set(`${namespace}/${name}`, podIp);
    const template = (spec["template"] ?? {}) as { spec?: Spec };
    const vmi = this.store.create(VMI, {
      metadata: {
        name,
        namespace,
        labels: { "kubevirt.io/domain": name },
        ownerReferences: [
          { apiVersion: "kubevirt.io/v1", kind: "VirtualMachine", name, uid: updated.metadata.uid, controller: true },
        ],
      },
      spec: { ...(template.spec ?? {}) },
      status: {
        phase: options.vmiPhase ?? "Running",
        interfaces: [{ name: "default", ipAddress: podIp, ipAddresses: [podIp] }],
      },
    });
    const ips = [podIp, ...(options.extraPodIps ?? [])];
    const pod = this.store.create(POD, {
      ...launcherPod(`virt-launcher-${name}-${randomUUID().replace(/-/g, "").slice(0, 5)}`, namespace, name, vmi),
      status: { phase: "Running", podIP: podIp, podIPs: ips.map((ip) => ({ ip })) },
    });
    return { vmi, pod };
  }
}

/** A virt-launcher pod's metadata and spec as KubeVirt makes them: owned by the VMI, labelled with its VM. */
function launcherPod(podName: string, namespace: string, name: string, vmi: { metadata: { uid?: string } }) {
  return {
    metadata: {
      name: podName,
      namespace,
      labels: {
        "kubevirt.io": "virt-launcher",
        "kubevirt.io/created-by": vmi.metadata.uid ?? "",
        "vm.kubevirt.io/name": name,
        "kubevirt.io/domain": name,
      },
      ownerReferences: [
        { apiVersion: "kubevirt.io/v1", kind: "VirtualMachineInstance", name, uid: vmi.metadata.uid, controller: true },
      ],
    },
    spec: { containers: [{ name: "compute", image: "quay.io/kubevirt/virt-launcher" }] },
  };
}
