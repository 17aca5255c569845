/**
 * Is it safe to stop this VM? (pure) Stopping must never lose a user's work: every volume that
 * holds data must live on a PersistentVolumeClaim that is Bound. A containerDisk, emptyDisk or
 * `ephemeral` volume the guest can write is thrown away with the VMI, so such a VM is refused
 * unless its owner says otherwise with the `<prefix>allow-ephemeral-stop: "true"` annotation.
 * Volumes that only carry configuration in (cloud-init, ConfigMaps, Secrets, service account,
 * downward API) hold no state, and neither does a volume the guest cannot write: one attached as a
 * `cdrom` (an installer ISO, as in the single-node desktop guide) or as a disk marked
 * `readonly: true`. The safety reads the domain's devices, not only the volume list.
 */
import { CONFIGURATION_SOURCE_KEYS, type VmVolume } from "./vm-model.js";

export { DEFAULT_ANNOTATION_PREFIX } from "../../engine/policy.js";
import { DEFAULT_ANNOTATION_PREFIX } from "../../engine/policy.js";

/** What the API said about one PVC; `phase: null` means it does not exist. */
export interface PvcFacts {
  name: string;
  phase: string | null;
}

export interface SafetyInput {
  annotations: Record<string, string>;
  volumes: readonly VmVolume[];
  /** Names of the VM's dataVolumeTemplates (DataVolumes the VM owns); absent: none. */
  dataVolumeTemplates?: readonly string[];
}

export type SafetyVerdict =
  | { safe: true; persistentClaims: string[]; notes: string[] }
  | { safe: false; reasons: string[] };

/** Volume sources that only feed configuration into the guest. */
const CONFIGURATION_SOURCES: ReadonlySet<string> = new Set(CONFIGURATION_SOURCE_KEYS);

/** Volume sources whose data lives on a PVC of their own. */
const CLAIM_SOURCES = new Set(["persistentVolumeClaim", "dataVolume", "memoryDump"]);

/** What each ephemeral source is, and what a stop does to what the guest wrote on it. */
const WHY_EPHEMERAL: Record<string, { what: string; loss: string }> = {
  containerDisk: { what: "a containerDisk", loss: "its writes are lost when the VM stops" },
  emptyDisk: { what: "an emptyDisk", loss: "it is created empty on every start" },
  ephemeral: { what: "an ephemeral overlay on a PVC", loss: "its writes are lost when the VM stops" },
};

/** "a read-only cdrom", "a disk marked readonly: true", "a writable disk", "no device". */
function describeAttachment(volume: VmVolume): string {
  if (volume.attachment === "none") return "no disk device (it cannot be proven read-only)";
  if (volume.attachment === "cdrom")
    return volume.readOnly ? "a read-only cdrom" : "a cdrom with readonly: false (writable)";
  if (volume.attachment === "filesystem") return "a shared filesystem (writable)";
  return volume.readOnly ? `a ${volume.attachment} marked readonly: true` : `a writable ${volume.attachment}`;
}

/** The PVCs a safety check must read: every claim-backed volume's claim, once. */
export function claimsToCheck(volumes: readonly VmVolume[]): string[] {
  const names = volumes.filter((v) => CLAIM_SOURCES.has(v.source) && v.claimName).map((v) => v.claimName!);
  return [...new Set(names)];
}

export function allowsEphemeralStop(annotations: Record<string, string>, prefix: string): boolean {
  return annotations[`${prefix}allow-ephemeral-stop`]?.trim().toLowerCase() === "true";
}

export function stopSafety(
  vm: SafetyInput,
  pvcs: ReadonlyMap<string, PvcFacts>,
  prefix: string = DEFAULT_ANNOTATION_PREFIX,
): SafetyVerdict {
  const reasons: string[] = [];
  const notes: string[] = [];
  const allowEphemeral = allowsEphemeralStop(vm.annotations, prefix);
  const persistentClaims: string[] = [];
  const templates = new Set(vm.dataVolumeTemplates ?? []);
  for (const volume of vm.volumes) {
    // KubeVirt names a volume's disk after the volume, so this names the disk too.
    const label = `volume ${JSON.stringify(volume.name)}`;
    if (CONFIGURATION_SOURCES.has(volume.source)) continue;
    if (CLAIM_SOURCES.has(volume.source)) {
      if (!volume.claimName) {
        reasons.push(`${label} (${volume.source}) names no claim`);
        continue;
      }
      const pvc = pvcs.get(volume.claimName);
      if (!pvc) reasons.push(`${label}: PVC ${JSON.stringify(volume.claimName)} was not checked`);
      else if (pvc.phase === null) reasons.push(`${label}: PVC ${JSON.stringify(volume.claimName)} does not exist`);
      else if (pvc.phase !== "Bound")
        reasons.push(`${label}: PVC ${JSON.stringify(volume.claimName)} is ${pvc.phase}, not Bound`);
      else {
        persistentClaims.push(volume.claimName);
        if (volume.source === "dataVolume" && templates.has(volume.claimName)) {
          notes.push(
            `${label}: DataVolume ${JSON.stringify(volume.claimName)} comes from the VM's dataVolumeTemplates (a stop keeps it; deleting the VM would delete it)`,
          );
        }
      }
      continue;
    }
    if (volume.readOnly) {
      // The guest cannot write it, so a stop loses nothing of it: the medium comes back on the next start.
      notes.push(
        `${label} (${volume.source}) is attached as ${describeAttachment(volume)}: it holds no state, a stop loses nothing of it`,
      );
      continue;
    }
    const known = WHY_EPHEMERAL[volume.source];
    const attached = `attached as ${describeAttachment(volume)}`;
    const why = known
      ? `is ${known.what}, ${attached}: ${known.loss}`
      : `is a ${volume.source} volume, which the collector cannot prove persistent (${attached})`;
    if (allowEphemeral) notes.push(`${label} ${why} (allowed by ${prefix}allow-ephemeral-stop)`);
    else reasons.push(`${label} ${why}; set annotation ${prefix}allow-ephemeral-stop: "true" to allow stopping anyway`);
  }
  if (persistentClaims.length === 0 && reasons.length === 0 && !allowEphemeral) {
    reasons.push(
      `no volume is backed by a PVC, so nothing the user did would survive a stop; set annotation ${prefix}allow-ephemeral-stop: "true" to allow it`,
    );
  }
  if (reasons.length > 0) return { safe: false, reasons };
  return { safe: true, persistentClaims: [...new Set(persistentClaims)], notes };
}

/** One line for an Event or a log: "refused: reason; reason". */
export function describeVerdict(verdict: SafetyVerdict): string {
  if (verdict.safe) {
    const claims =
      verdict.persistentClaims.length > 0
        ? `persistent volumes Bound: ${verdict.persistentClaims.join(", ")}`
        : "no persistent volume";
    return verdict.notes.length > 0 ? `${claims}; ${verdict.notes.join("; ")}` : claims;
  }
  return verdict.reasons.join("; ");
}
