// The field guides' own VMs through the collector's pure model: what vmFacts reads, what
// stopSafety decides with every PVC Bound, what a stop frees and whose VM it is.
import { describe, expect, it } from "vitest";
import { describeVerdict, stopSafety, type PvcFacts } from "../../../src/platform/kube/safety.js";
import { vmFacts, type VmFacts } from "../../../src/platform/kube/vm-model.js";
import {
  DEFAULT_OWNER_LABEL,
  describeFreed,
  freedRecord,
  gpuCountOf,
  vmOwner,
} from "../../../src/platform/kube/vm-resources.js";
import { fieldGuideObject, fieldGuideObjects } from "../../../../../test/support/field-guides.js";

const PREFIX = "workstation.aik8s.run/";

function factsOf(name: string, namespace?: string): VmFacts {
  const vm = fieldGuideObject("VirtualMachine", name);
  if (namespace) vm.metadata.namespace = namespace;
  const facts = vmFacts(vm);
  if (!facts) throw new Error(`vmFacts refused ${name}`);
  return facts;
}

/** Every claim the VM names, in `phase` (what the issue asks: the guides' PVCs all Bound). */
function claims(facts: VmFacts, phase: string | null = "Bound"): Map<string, PvcFacts> {
  return new Map(facts.volumes.filter((v) => v.claimName).map((v) => [v.claimName!, { name: v.claimName!, phase }]));
}

describe("the field guides' fixtures", () => {
  it("hold every VirtualMachine and DataVolume of both guides", () => {
    const names = fieldGuideObjects().map((o) => `${o.guide}:${o.kind}/${o.metadata.name}`);
    expect(names).toEqual(
      expect.arrayContaining([
        "single-node-desktop:VirtualMachine/cirros-smoke",
        "single-node-desktop:VirtualMachine/tinycore-desktop",
        "single-node-desktop:VirtualMachine/ai-workstation",
        "single-node-desktop:DataVolume/desktop-root",
        "single-node-desktop:DataVolume/ubuntu-golden",
        "ceph-rbd-gpu:VirtualMachine/alice-gpu-workstation",
        "ceph-rbd-gpu:DataVolume/alice-rootdisk",
        "ceph-rbd-gpu:Service/alice-notebook",
        "ceph-rbd-gpu:KubeVirt/kubevirt",
        "ceph-rbd-gpu:VirtualMachineSnapshot/alice-before-cuda-upgrade",
      ]),
    );
  });
});

describe("single-node desktop guide", () => {
  it("tinycore-desktop: stoppable with its installer ISO attached as a cdrom, and the note names the disk", () => {
    const facts = factsOf("tinycore-desktop");
    expect(facts.runStrategy).toBe("Always");
    expect(facts.volumes).toEqual([
      { name: "root", source: "dataVolume", claimName: "desktop-root", attachment: "disk", readOnly: false },
      { name: "installer", source: "containerDisk", claimName: null, attachment: "cdrom", readOnly: true },
    ]);
    const verdict = stopSafety(facts, claims(facts), PREFIX);
    expect(verdict).toEqual({
      safe: true,
      persistentClaims: ["desktop-root"],
      notes: [
        'volume "installer" (containerDisk) is attached as a read-only cdrom: it holds no state, a stop loses nothing of it',
      ],
    });
    expect(describeFreed(facts.resources)).toBe("stopping frees 1 vCPU, 1Gi memory");
    expect(gpuCountOf(facts.resources)).toBe(0);
  });

  it("tinycore-desktop: refused while desktop-root still waits for its first consumer", () => {
    const facts = factsOf("tinycore-desktop");
    const verdict = stopSafety(facts, claims(facts, "Pending"), PREFIX);
    expect(verdict.safe).toBe(false);
    expect(describeVerdict(verdict)).toContain('PVC "desktop-root" is Pending, not Bound');
  });

  it("tinycore-desktop: a writable containerDisk still refuses (the ISO attached as a plain disk)", () => {
    const vm = fieldGuideObject("VirtualMachine", "tinycore-desktop");
    const disks = (
      vm.spec as { template: { spec: { domain: { devices: { disks: Array<Record<string, unknown>> } } } } }
    ).template.spec.domain.devices.disks;
    disks[1] = { name: "installer", bootOrder: 2, disk: { bus: "virtio" } };
    const facts = vmFacts(vm)!;
    const verdict = stopSafety(facts, claims(facts), PREFIX);
    expect(verdict.safe).toBe(false);
    expect(describeVerdict(verdict)).toContain(
      'volume "installer" is a containerDisk, attached as a writable disk: its writes are lost when the VM stops',
    );
  });

  it("cirros-smoke: refused, with its reason: the only disk is a writable containerDisk", () => {
    const facts = factsOf("cirros-smoke");
    const verdict = stopSafety(facts, claims(facts), PREFIX);
    expect(verdict.safe).toBe(false);
    expect(describeVerdict(verdict)).toBe(
      `volume "root" is a containerDisk, attached as a writable disk: its writes are lost when the VM stops; set annotation ${PREFIX}allow-ephemeral-stop: "true" to allow stopping anyway`,
    );
    expect(describeFreed(facts.resources)).toBe("stopping frees 256Mi memory");
  });

  it("ai-workstation: the guide's DNS fragment has no namespace; applied to one, it has no disk to keep and is refused", () => {
    expect(vmFacts(fieldGuideObject("VirtualMachine", "ai-workstation"))).toBeNull();
    const facts = factsOf("ai-workstation", "kubevirt-lab");
    expect(facts.runStrategy).toBe("Halted");
    const verdict = stopSafety(facts, claims(facts), PREFIX);
    expect(verdict.safe).toBe(false);
    expect(describeVerdict(verdict)).toContain("no volume is backed by a PVC");
  });
});

describe("Ceph RBD GPU notebook guide", () => {
  it("alice-gpu-workstation: stoppable; the stop frees 8 CPU, 64Gi and the A100; alice owns it; the guest gets 120 s", () => {
    const facts = factsOf("alice-gpu-workstation");
    expect(facts.runStrategy).toBe("Halted");
    expect(facts.terminationGracePeriodSeconds).toBe(120);
    expect(facts.volumes.map((v) => [v.name, v.source, v.claimName, v.attachment])).toEqual([
      ["rootdisk", "persistentVolumeClaim", "alice-rootdisk", "disk"],
      ["cloudinit", "cloudInitNoCloud", null, "disk"],
    ]);
    expect(stopSafety(facts, claims(facts), PREFIX)).toEqual({
      safe: true,
      persistentClaims: ["alice-rootdisk"],
      notes: [],
    });
    expect(facts.resources).toEqual({
      cpu: "8",
      memory: "64Gi",
      gpus: [{ deviceName: "nvidia.com/A100-PCIE-40GB", count: 1 }],
      hostDevices: [],
    });
    expect(describeFreed(facts.resources)).toBe("stopping frees 8 CPU, 64Gi memory, 1 × nvidia.com/A100-PCIE-40GB");
    expect(gpuCountOf(facts.resources)).toBe(1);
    expect(freedRecord(facts.resources)).toEqual({
      cpu: "8",
      memory: "64Gi",
      gpus: [{ deviceName: "nvidia.com/A100-PCIE-40GB", count: 1 }],
    });
    expect(vmOwner(facts.labels, DEFAULT_OWNER_LABEL)).toBe("alice");
  });

  it("alice-gpu-workstation with its root disk from dataVolumeTemplates (the alternative the guide warns about)", () => {
    const vm = fieldGuideObject("VirtualMachine", "alice-gpu-workstation");
    const dv = fieldGuideObject("DataVolume", "alice-rootdisk");
    const spec = vm.spec as {
      dataVolumeTemplates?: unknown[];
      template: { spec: { volumes: Array<Record<string, unknown>> } };
    };
    spec.dataVolumeTemplates = [{ metadata: { name: dv.metadata.name, labels: dv.metadata.labels }, spec: dv.spec }];
    spec.template.spec.volumes[0] = { name: "rootdisk", dataVolume: { name: "alice-rootdisk" } };
    const facts = vmFacts(vm)!;
    expect(facts.dataVolumeTemplates).toEqual(["alice-rootdisk"]);
    const verdict = stopSafety(facts, claims(facts), PREFIX);
    expect(verdict.safe).toBe(true);
    expect(describeVerdict(verdict)).toContain(
      `DataVolume "alice-rootdisk" comes from the VM's dataVolumeTemplates (a stop keeps it; deleting the VM would delete it)`,
    );
  });

  it("the owner label is configurable and only a valid label value is an owner", () => {
    const labels = factsOf("alice-gpu-workstation").labels;
    expect(vmOwner(labels, "platform.example.com/profile")).toBe("gpu-a100-1");
    expect(vmOwner(labels, "example.org/owner")).toBeNull();
    expect(vmOwner({ [DEFAULT_OWNER_LABEL]: "" }, DEFAULT_OWNER_LABEL)).toBeNull();
    expect(vmOwner({ [DEFAULT_OWNER_LABEL]: "<script>" }, DEFAULT_OWNER_LABEL)).toBeNull();
    expect(vmOwner({ [DEFAULT_OWNER_LABEL]: "a".repeat(64) }, DEFAULT_OWNER_LABEL)).toBeNull();
  });
});
