/**
 * What a stop gives back and whose VM it is, read from the VirtualMachine alone (pure). The
 * field guides' promise for a stop is "CPU, memory and GPU are released, the disk stays": the
 * collector says which, in the notice, the Stopped Event and `workstation_gpus`. The owner is the
 * platform's own label on the VM (the guides use `platform.example.com/user`), never a claim of
 * the guest.
 */
import type { DeviceCount, VmResources } from "./vm-model.js";

/** The label the field guides put on each user's VM, DataVolume and VMI template. */
export const DEFAULT_OWNER_LABEL = "platform.example.com/user";

/** Kubernetes label values are at most 63 characters of [A-Za-z0-9._-]; anything else is not an owner. */
const LABEL_VALUE = /^(?:[A-Za-z0-9](?:[A-Za-z0-9._-]{0,61}[A-Za-z0-9])?)$/;

/** The VM's owner from its `ownerLabel` label, or null when it has none (or a malformed one). */
export function vmOwner(labels: Readonly<Record<string, string>>, ownerLabel: string): string | null {
  const value = labels[ownerLabel];
  return value !== undefined && LABEL_VALUE.test(value) ? value : null;
}

/** GPUs a running instance holds: the `gpus` devices of the VM's domain. */
export function gpuCountOf(resources: VmResources): number {
  return resources.gpus.reduce((sum, gpu) => sum + gpu.count, 0);
}

function devices(list: readonly DeviceCount[], suffix = ""): string[] {
  return list.map((d) => `${d.count} × ${d.deviceName}${suffix}`);
}

/** The parts of what a stop frees, in reading order: ["8 CPU", "64Gi memory", "1 × nvidia.com/A100-PCIE-40GB"]. */
export function freedParts(resources: VmResources): string[] {
  const parts: string[] = [];
  if (resources.cpu !== null) parts.push(resources.cpu.endsWith("vCPU") ? resources.cpu : `${resources.cpu} CPU`);
  if (resources.memory !== null) parts.push(`${resources.memory} memory`);
  parts.push(...devices(resources.gpus), ...devices(resources.hostDevices, " (host device)"));
  return parts;
}

/** "stopping frees 8 CPU, 64Gi memory, 1 × nvidia.com/A100-PCIE-40GB", or null when the VM names nothing. */
export function describeFreed(resources: VmResources, lead = "stopping frees"): string | null {
  const parts = freedParts(resources);
  return parts.length > 0 ? `${lead} ${parts.join(", ")}` : null;
}

/** The last-stop annotation's `frees` field: what the stop gave back, as data. */
export function freedRecord(resources: VmResources): Record<string, unknown> {
  return {
    ...(resources.cpu !== null ? { cpu: resources.cpu } : {}),
    ...(resources.memory !== null ? { memory: resources.memory } : {}),
    ...(resources.gpus.length > 0 ? { gpus: resources.gpus } : {}),
    ...(resources.hostDevices.length > 0 ? { hostDevices: resources.hostDevices } : {}),
  };
}
