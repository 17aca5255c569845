/**
 * What the collector needs from KubeVirt objects, read out of the raw JSON (pure). The typed
 * client returns custom resources as untyped objects, so every field is checked on the way in:
 * a malformed object yields empty values, never an exception.
 */

export interface VmVolume {
  name: string;
  /** The KubeVirt volume source: "dataVolume", "persistentVolumeClaim", "containerDisk", … */
  source: string;
  /** The PVC behind it: claimName, a DataVolume's name (its PVC has the same name), an ephemeral's claim. */
  claimName: string | null;
}

/** The parts of a VirtualMachine the collector acts on. */
export interface VmFacts {
  namespace: string;
  name: string;
  uid: string;
  resourceVersion: string;
  labels: Record<string, string>;
  annotations: Record<string, string>;
  /** spec.runStrategy, or the one spec.running implies ("Always"/"Halted"); absent both: "Halted". */
  runStrategy: string;
  /** spec.running when the VM uses that older field, else null. */
  running: boolean | null;
  printableStatus: string | null;
  volumes: VmVolume[];
  /** status.stateChangeRequests actions, e.g. ["Stop"]. */
  pendingStateChanges: string[];
}

type Obj = Record<string, unknown>;

function asObj(v: unknown): Obj {
  return typeof v === "object" && v !== null && !Array.isArray(v) ? (v as Obj) : {};
}

function asString(v: unknown): string | null {
  return typeof v === "string" ? v : null;
}

function stringMap(v: unknown): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, val] of Object.entries(asObj(v))) if (typeof val === "string") out[k] = val;
  return out;
}

export function effectiveRunStrategy(spec: unknown): { runStrategy: string; running: boolean | null } {
  const s = asObj(spec);
  if (typeof s["running"] === "boolean") return { runStrategy: s["running"] ? "Always" : "Halted", running: s["running"] };
  const rs = asString(s["runStrategy"]);
  return { runStrategy: rs ?? "Halted", running: null };
}

const SOURCE_KEYS = [
  "dataVolume",
  "persistentVolumeClaim",
  "ephemeral",
  "containerDisk",
  "emptyDisk",
  "hostDisk",
  "cloudInitNoCloud",
  "cloudInitConfigDrive",
  "configMap",
  "secret",
  "serviceAccount",
  "downwardAPI",
  "downwardMetrics",
  "sysprep",
  "memoryDump",
] as const;

export function volumesOf(vmSpec: unknown): VmVolume[] {
  const template = asObj(asObj(vmSpec)["template"]);
  const volumes = asObj(template["spec"])["volumes"];
  if (!Array.isArray(volumes)) return [];
  return volumes.map((raw) => {
    const v = asObj(raw);
    const name = asString(v["name"]) ?? "";
    const source = SOURCE_KEYS.find((k) => k in v) ?? Object.keys(v).find((k) => k !== "name") ?? "unknown";
    let claimName: string | null = null;
    if (source === "dataVolume") claimName = asString(asObj(v["dataVolume"])["name"]);
    else if (source === "persistentVolumeClaim" || source === "memoryDump") claimName = asString(asObj(v[source])["claimName"]);
    else if (source === "ephemeral") claimName = asString(asObj(asObj(v["ephemeral"])["persistentVolumeClaim"])["claimName"]);
    return { name, source, claimName };
  });
}

export function vmFacts(obj: unknown): VmFacts | null {
  const o = asObj(obj);
  const meta = asObj(o["metadata"]);
  const namespace = asString(meta["namespace"]);
  const name = asString(meta["name"]);
  if (!namespace || !name) return null;
  const status = asObj(o["status"]);
  const changes = Array.isArray(status["stateChangeRequests"]) ? status["stateChangeRequests"] : [];
  return {
    namespace,
    name,
    uid: asString(meta["uid"]) ?? "",
    resourceVersion: asString(meta["resourceVersion"]) ?? "",
    labels: stringMap(meta["labels"]),
    annotations: stringMap(meta["annotations"]),
    ...effectiveRunStrategy(o["spec"]),
    printableStatus: asString(status["printableStatus"]),
    volumes: volumesOf(o["spec"]),
    pendingStateChanges: changes.map((c) => asString(asObj(c)["action"])).filter((a): a is string => a !== null),
  };
}

export interface VmiFacts {
  namespace: string;
  name: string;
  uid: string;
  phase: string | null;
}

export function vmiFacts(obj: unknown): VmiFacts | null {
  const meta = asObj(asObj(obj)["metadata"]);
  const namespace = asString(meta["namespace"]);
  const name = asString(meta["name"]);
  if (!namespace || !name) return null;
  return { namespace, name, uid: asString(meta["uid"]) ?? "", phase: asString(asObj(asObj(obj)["status"])["phase"]) };
}

export function isFinalVmiPhase(phase: string | null): boolean {
  return phase === "Succeeded" || phase === "Failed";
}

export interface LauncherPodFacts {
  namespace: string;
  name: string;
  /** The VM (= VMI) name from the pod's vm.kubevirt.io/name label. */
  vmName: string;
  phase: string | null;
  /** status.podIP first, then the rest of status.podIPs. */
  ips: string[];
  terminating: boolean;
}

export function launcherPodFacts(obj: unknown): LauncherPodFacts | null {
  const o = asObj(obj);
  const meta = asObj(o["metadata"]);
  const namespace = asString(meta["namespace"]);
  const name = asString(meta["name"]);
  const labels = stringMap(meta["labels"]);
  const vmName = labels["vm.kubevirt.io/name"];
  if (!namespace || !name || !vmName || labels["kubevirt.io"] !== "virt-launcher") return null;
  const status = asObj(o["status"]);
  const ips: string[] = [];
  const primary = asString(status["podIP"]);
  if (primary) ips.push(primary);
  if (Array.isArray(status["podIPs"])) {
    for (const entry of status["podIPs"]) {
      const ip = asString(asObj(entry)["ip"]);
      if (ip && !ips.includes(ip)) ips.push(ip);
    }
  }
  return {
    namespace,
    name,
    vmName,
    phase: asString(status["phase"]),
    ips,
    terminating: meta["deletionTimestamp"] !== undefined && meta["deletionTimestamp"] !== null,
  };
}

/**
 * Whether a stop is already recorded or done, so a 409 from the stop subresource means success:
 * Halted means virt-api took the stop (or it was never running); with Manual/RerunOnFailure a
 * stop is done when no live VMI is left or a Stop request is queued on the VM's status.
 */
export function isStopInEffect(vm: Pick<VmFacts, "runStrategy" | "pendingStateChanges">, vmi: Pick<VmiFacts, "phase"> | null): boolean {
  if (vm.runStrategy === "Halted") return true;
  if (vm.runStrategy === "Manual" || vm.runStrategy === "RerunOnFailure") {
    return vmi === null || isFinalVmiPhase(vmi.phase) || vm.pendingStateChanges.includes("Stop");
  }
  return false;
}
