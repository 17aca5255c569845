/** The resource types the fake API server serves, and how each behaves. */

export interface ResourceType {
  /** "" for the core group. */
  group: string;
  version: string;
  plural: string;
  kind: string;
  listKind: string;
  /** Writes to the main resource keep the stored status, as for a resource with a status subresource. */
  hasStatusSubresource: boolean;
  /** Spec changes bump metadata.generation. */
  tracksGeneration: boolean;
}

export const RESOURCES: readonly ResourceType[] = [
  {
    group: "",
    version: "v1",
    plural: "pods",
    kind: "Pod",
    listKind: "PodList",
    hasStatusSubresource: true,
    tracksGeneration: true,
  },
  {
    group: "",
    version: "v1",
    plural: "persistentvolumeclaims",
    kind: "PersistentVolumeClaim",
    listKind: "PersistentVolumeClaimList",
    hasStatusSubresource: true,
    tracksGeneration: false,
  },
  {
    // Per-VM credential Secrets the collector creates (docs/credentials.md).
    group: "",
    version: "v1",
    plural: "secrets",
    kind: "Secret",
    listKind: "SecretList",
    hasStatusSubresource: false,
    tracksGeneration: false,
  },
  {
    group: "events.k8s.io",
    version: "v1",
    plural: "events",
    kind: "Event",
    listKind: "EventList",
    hasStatusSubresource: false,
    tracksGeneration: false,
  },
  {
    group: "coordination.k8s.io",
    version: "v1",
    plural: "leases",
    kind: "Lease",
    listKind: "LeaseList",
    hasStatusSubresource: false,
    tracksGeneration: false,
  },
  {
    group: "kubevirt.io",
    version: "v1",
    plural: "virtualmachines",
    kind: "VirtualMachine",
    listKind: "VirtualMachineList",
    hasStatusSubresource: true,
    tracksGeneration: true,
  },
  {
    group: "kubevirt.io",
    version: "v1",
    plural: "virtualmachineinstances",
    kind: "VirtualMachineInstance",
    listKind: "VirtualMachineInstanceList",
    hasStatusSubresource: true,
    tracksGeneration: true,
  },
  {
    // CDI's DataVolume: only stored and served here (the field guides' root disks); the PVC CDI
    // would make of it is seeded by the test.
    group: "cdi.kubevirt.io",
    version: "v1beta1",
    plural: "datavolumes",
    kind: "DataVolume",
    listKind: "DataVolumeList",
    hasStatusSubresource: true,
    tracksGeneration: true,
  },
];

export function findResource(group: string, version: string, plural: string): ResourceType | undefined {
  return RESOURCES.find((r) => r.group === group && r.version === version && r.plural === plural);
}

export function resourceByKind(kind: string): ResourceType {
  const found = RESOURCES.find((r) => r.kind === kind);
  if (!found) throw new Error(`fake-kube: no resource of kind ${kind}`);
  return found;
}

export function apiVersionOf(r: ResourceType): string {
  return r.group === "" ? r.version : `${r.group}/${r.version}`;
}

/** "pods", "virtualmachines.kubevirt.io": the name the apiserver uses in error messages. */
export function qualifiedResource(r: ResourceType): string {
  return r.group === "" ? r.plural : `${r.plural}.${r.group}`;
}
