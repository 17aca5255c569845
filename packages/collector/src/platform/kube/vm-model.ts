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
  /**
   * How the domain attaches it (spec.template.spec.domain.devices): as a `disk`, a `cdrom`, a
   * `lun`, a virtiofs `filesystem`, or `none` when no device names it.
   */
  attachment: VmAttachment;
  /**
   * True only when the guest cannot write it: a cdrom (KubeVirt's cdrom `readonly` defaults to
   * true), or a disk or lun marked `readonly: true`. Anything else, unknown included, is writable.
   */
  readOnly: boolean;
}

export type VmAttachment = "disk" | "cdrom" | "lun" | "filesystem" | "none";

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
  /** Names of spec.dataVolumeTemplates: DataVolumes (and their PVCs) the VM owns. */
  dataVolumeTemplates: string[];
  /**
   * spec.template.spec.terminationGracePeriodSeconds: how long the guest gets to shut down on a
   * stop. Null when the VM does not say (KubeVirt then applies its own default to the VMI).
   */
  terminationGracePeriodSeconds: number | null;
  /** What a running instance of this VM holds and a stop gives back (CPU, memory, GPUs). */
  resources: VmResources;
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
  if (typeof s["running"] === "boolean")
    return { runStrategy: s["running"] ? "Always" : "Halted", running: s["running"] };
  const rs = asString(s["runStrategy"]);
  return { runStrategy: rs ?? "Halted", running: null };
}

/** Volume sources that only feed configuration into the guest (a stop loses nothing on them: safety.ts). */
export const CONFIGURATION_SOURCE_KEYS = [
  "cloudInitNoCloud",
  "cloudInitConfigDrive",
  "configMap",
  "secret",
  "serviceAccount",
  "downwardAPI",
  "downwardMetrics",
  "sysprep",
] as const;

/** Every volume source KubeVirt names, in the order a volume's source is looked for. */
const SOURCE_KEYS = [
  "dataVolume",
  "persistentVolumeClaim",
  "ephemeral",
  "containerDisk",
  "emptyDisk",
  "hostDisk",
  ...CONFIGURATION_SOURCE_KEYS,
  "memoryDump",
] as const;

/** The VMI template's spec (spec.template.spec), or {} when absent or malformed. */
function templateSpecOf(vmSpec: unknown): Obj {
  return asObj(asObj(asObj(vmSpec)["template"])["spec"]);
}

function devicesOf(vmSpec: unknown): Obj {
  return asObj(asObj(templateSpecOf(vmSpec)["domain"])["devices"]);
}

function arrayOf(v: unknown): unknown[] {
  return Array.isArray(v) ? v : [];
}

/**
 * Each volume's device: KubeVirt names a volume's disk after it (disk.name == volume.name), as a
 * disk, cdrom or lun target; a virtiofs filesystem names it too. KubeVirt rejects two devices for
 * one volume; should a spec have them anyway, a writable one wins, so nothing is called read-only
 * that the guest can write.
 */
function attachmentsOf(vmSpec: unknown): Map<string, { attachment: VmAttachment; readOnly: boolean }> {
  const devices = devicesOf(vmSpec);
  const out = new Map<string, { attachment: VmAttachment; readOnly: boolean }>();
  const add = (name: string | null, attachment: VmAttachment, readOnly: boolean) => {
    if (!name) return;
    const seen = out.get(name);
    if (!seen || (seen.readOnly && !readOnly)) out.set(name, { attachment, readOnly });
  };
  for (const raw of arrayOf(devices["disks"])) {
    const disk = asObj(raw);
    const name = asString(disk["name"]);
    // KubeVirt's cdrom `readonly` defaults to true (CDRomTarget); disk and lun default to writable.
    if ("cdrom" in disk) add(name, "cdrom", asObj(disk["cdrom"])["readonly"] !== false);
    else if ("lun" in disk) add(name, "lun", asObj(disk["lun"])["readonly"] === true);
    // A disk entry with no target is a virtio disk (KubeVirt's default).
    else add(name, "disk", asObj(disk["disk"])["readonly"] === true);
  }
  for (const raw of arrayOf(devices["filesystems"])) add(asString(asObj(raw)["name"]), "filesystem", false);
  return out;
}

export function volumesOf(vmSpec: unknown): VmVolume[] {
  const volumes = templateSpecOf(vmSpec)["volumes"];
  if (!Array.isArray(volumes)) return [];
  const attachments = attachmentsOf(vmSpec);
  return volumes.map((raw) => {
    const v = asObj(raw);
    const name = asString(v["name"]) ?? "";
    const source = SOURCE_KEYS.find((k) => k in v) ?? Object.keys(v).find((k) => k !== "name") ?? "unknown";
    let claimName: string | null = null;
    if (source === "dataVolume") claimName = asString(asObj(v["dataVolume"])["name"]);
    else if (source === "persistentVolumeClaim" || source === "memoryDump")
      claimName = asString(asObj(v[source])["claimName"]);
    else if (source === "ephemeral")
      claimName = asString(asObj(asObj(v["ephemeral"])["persistentVolumeClaim"])["claimName"]);
    const attached = attachments.get(name) ?? { attachment: "none" as const, readOnly: false };
    return { name, source, claimName, ...attached };
  });
}

/** spec.dataVolumeTemplates[].metadata.name. */
export function dataVolumeTemplatesOf(vmSpec: unknown): string[] {
  return arrayOf(asObj(vmSpec)["dataVolumeTemplates"])
    .map((t) => asString(asObj(asObj(t)["metadata"])["name"]))
    .filter((n): n is string => n !== null && n !== "");
}

export function terminationGracePeriodOf(vmSpec: unknown): number | null {
  const grace = templateSpecOf(vmSpec)["terminationGracePeriodSeconds"];
  return typeof grace === "number" && Number.isInteger(grace) && grace >= 0 ? grace : null;
}

/** A Kubernetes quantity as the object wrote it ("8", "64Gi", 2), or null. */
function quantity(v: unknown): string | null {
  if (typeof v === "number" && Number.isFinite(v) && v >= 0) return String(v);
  if (typeof v === "string" && /^[0-9.]+[a-zA-Z]{0,2}$/.test(v.trim()) && v.length <= 32) return v.trim();
  return null;
}

function positiveInt(v: unknown): number {
  return typeof v === "number" && Number.isInteger(v) && v > 0 ? v : 1;
}

/** A device kind a stop gives back: its resource name and how many. */
export interface DeviceCount {
  deviceName: string;
  count: number;
}

export interface VmResources {
  /**
   * CPU as the VM asks for it: the domain's resources.requests.cpu (then limits.cpu) as written
   * ("8"), or "N vCPU" from domain.cpu sockets × cores × threads; null when the VM does not say.
   */
  cpu: string | null;
  /** resources.requests.memory, then domain.memory.guest, then resources.limits.memory; or null. */
  memory: string | null;
  /** domain.devices.gpus by deviceName, in the VM's order. */
  gpus: DeviceCount[];
  /** domain.devices.hostDevices by deviceName (PCI or mediated devices other than `gpus`). */
  hostDevices: DeviceCount[];
}

/** At most this many device kinds are kept: a VM spec is not a place for hundreds. */
const MAX_DEVICE_KINDS = 8;

function countDevices(list: unknown): DeviceCount[] {
  const counts = new Map<string, number>();
  for (const raw of arrayOf(list)) {
    const deviceName = asString(asObj(raw)["deviceName"]);
    if (!deviceName || deviceName.length > 253) continue;
    if (!counts.has(deviceName) && counts.size >= MAX_DEVICE_KINDS) continue;
    counts.set(deviceName, (counts.get(deviceName) ?? 0) + 1);
  }
  return [...counts].map(([deviceName, count]) => ({ deviceName, count }));
}

/** What the VM's running instance holds: read from its template, the same for every start. */
export function resourcesOf(vmSpec: unknown): VmResources {
  const domain = asObj(templateSpecOf(vmSpec)["domain"]);
  const resources = asObj(domain["resources"]);
  const requests = asObj(resources["requests"]);
  const limits = asObj(resources["limits"]);
  let cpu = quantity(requests["cpu"]) ?? quantity(limits["cpu"]);
  if (cpu === null && "cpu" in domain) {
    const topology = asObj(domain["cpu"]);
    cpu = `${positiveInt(topology["sockets"]) * positiveInt(topology["cores"]) * positiveInt(topology["threads"])} vCPU`;
  }
  const memory =
    quantity(requests["memory"]) ?? quantity(asObj(domain["memory"])["guest"]) ?? quantity(limits["memory"]);
  const devices = devicesOf(vmSpec);
  return { cpu, memory, gpus: countDevices(devices["gpus"]), hostDevices: countDevices(devices["hostDevices"]) };
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
    dataVolumeTemplates: dataVolumeTemplatesOf(o["spec"]),
    terminationGracePeriodSeconds: terminationGracePeriodOf(o["spec"]),
    resources: resourcesOf(o["spec"]),
    pendingStateChanges: changes.map((c) => asString(asObj(c)["action"])).filter((a): a is string => a !== null),
  };
}

export interface VmiFacts {
  namespace: string;
  name: string;
  uid: string;
  phase: string | null;
  /** status.nodeName: where the scheduler placed it; null before. */
  nodeName: string | null;
  /** metadata.creationTimestamp in ms, null when absent or malformed. */
  createdAtMs: number | null;
  /** status.phaseTransitionTimestamps: when each phase began (ms), the latest per phase. */
  phaseTimes: Record<string, number>;
  /**
   * The PodScheduled condition when it is False (the scheduler cannot place the launcher pod):
   * its reason, the scheduler's own message (cut to 1 KiB) and since when.
   */
  unschedulable: { reason: string; message: string; sinceMs: number | null } | null;
}

const timeMs = (v: unknown): number | null => {
  const ms = typeof v === "string" ? Date.parse(v) : Number.NaN;
  return Number.isFinite(ms) ? ms : null;
};

/** A scheduler's message is for people; a hostile or buggy one must not bloat the inventory. */
const MAX_CONDITION_MESSAGE = 1024;

export function vmiFacts(obj: unknown): VmiFacts | null {
  const meta = asObj(asObj(obj)["metadata"]);
  const namespace = asString(meta["namespace"]);
  const name = asString(meta["name"]);
  if (!namespace || !name) return null;
  const status = asObj(asObj(obj)["status"]);
  const phaseTimes: Record<string, number> = {};
  for (const raw of arrayOf(status["phaseTransitionTimestamps"]).slice(0, 16)) {
    const phase = asString(asObj(raw)["phase"]);
    const at = timeMs(asObj(raw)["phaseTransitionTimestamp"]);
    if (phase && phase.length <= 32 && at !== null) phaseTimes[phase] = at;
  }
  const scheduled = arrayOf(status["conditions"])
    .map(asObj)
    .find((c) => c["type"] === "PodScheduled" && c["status"] === "False");
  return {
    namespace,
    name,
    uid: asString(meta["uid"]) ?? "",
    phase: asString(status["phase"]),
    nodeName: asString(status["nodeName"]),
    createdAtMs: timeMs(meta["creationTimestamp"]),
    phaseTimes,
    unschedulable: scheduled
      ? {
          reason: (asString(scheduled["reason"]) ?? "").slice(0, 64),
          message: (asString(scheduled["message"]) ?? "").slice(0, MAX_CONDITION_MESSAGE),
          sinceMs: timeMs(scheduled["lastTransitionTime"]),
        }
      : null,
  };
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
export function isStopInEffect(
  vm: Pick<VmFacts, "runStrategy" | "pendingStateChanges">,
  vmi: Pick<VmiFacts, "phase"> | null,
): boolean {
  if (vm.runStrategy === "Halted") return true;
  if (vm.runStrategy === "Manual" || vm.runStrategy === "RerunOnFailure") {
    return vmi === null || isFinalVmiPhase(vmi.phase) || vm.pendingStateChanges.includes("Stop");
  }
  return false;
}
