import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { claimsToCheck, describeVerdict, stopSafety, type PvcFacts } from "../../../src/platform/kube/safety.js";
import { checkStopSafety } from "../../../src/platform/kube/pvcs.js";
import { volumesOf, type VmVolume } from "../../../src/platform/kube/vm-model.js";
import type { KubeClients } from "../../../src/platform/kube/client.js";
import { fakeCluster, type FakeKube } from "./helpers.js";

const PREFIX = "workstation.aik8s.run/";
const ALLOW = { [`${PREFIX}allow-ephemeral-stop`]: "true" };

function vol(
  name: string,
  source: string,
  claimName: string | null = null,
  attachment: Pick<VmVolume, "attachment" | "readOnly"> = { attachment: "disk", readOnly: false },
): VmVolume {
  return { name, source, claimName, ...attachment };
}

const CDROM = { attachment: "cdrom", readOnly: true } as const;
const READONLY_DISK = { attachment: "disk", readOnly: true } as const;

function pvcs(entries: Record<string, string | null>): Map<string, PvcFacts> {
  return new Map(Object.entries(entries).map(([name, phase]) => [name, { name, phase }]));
}

const root = vol("rootdisk", "dataVolume", "ws-root");
const cloudInit = vol("cloudinitdisk", "cloudInitNoCloud");

describe("stopSafety (pure)", () => {
  const cases: Array<{
    name: string;
    volumes: VmVolume[];
    pvcs: Record<string, string | null>;
    annotations?: Record<string, string>;
    safe: boolean;
    mentions?: string[];
  }> = [
    {
      name: "DataVolume root + cloud-init, Bound",
      volumes: [root, cloudInit],
      pvcs: { "ws-root": "Bound" },
      safe: true,
    },
    {
      name: "PVC + DataVolume + every configuration source",
      volumes: [
        root,
        vol("home", "persistentVolumeClaim", "home"),
        cloudInit,
        vol("cd", "cloudInitConfigDrive"),
        vol("cm", "configMap"),
        vol("sec", "secret"),
        vol("sa", "serviceAccount"),
        vol("dapi", "downwardAPI"),
        vol("dm", "downwardMetrics"),
        vol("sp", "sysprep"),
      ],
      pvcs: { "ws-root": "Bound", home: "Bound" },
      safe: true,
    },
    {
      name: "PVC Pending",
      volumes: [root],
      pvcs: { "ws-root": "Pending" },
      safe: false,
      mentions: ['PVC "ws-root" is Pending, not Bound'],
    },
    { name: "PVC Lost", volumes: [root], pvcs: { "ws-root": "Lost" }, safe: false, mentions: ["Lost"] },
    {
      name: "PVC missing",
      volumes: [root],
      pvcs: { "ws-root": null },
      safe: false,
      mentions: ['PVC "ws-root" does not exist'],
    },
    { name: "PVC not looked up", volumes: [root], pvcs: {}, safe: false, mentions: ["was not checked"] },
    {
      name: "containerDisk root",
      volumes: [vol("rootdisk", "containerDisk"), cloudInit],
      pvcs: {},
      safe: false,
      mentions: ["containerDisk", `${PREFIX}allow-ephemeral-stop`],
    },
    {
      name: "emptyDisk scratch beside a PVC",
      volumes: [root, vol("scratch", "emptyDisk")],
      pvcs: { "ws-root": "Bound" },
      safe: false,
      mentions: ['volume "scratch" is an emptyDisk'],
    },
    {
      name: "ephemeral overlay",
      volumes: [vol("rootdisk", "ephemeral", "golden")],
      pvcs: {},
      safe: false,
      mentions: ["ephemeral overlay"],
    },
    {
      name: "hostDisk",
      volumes: [root, vol("data", "hostDisk")],
      pvcs: { "ws-root": "Bound" },
      safe: false,
      mentions: ["hostDisk", "cannot prove persistent"],
    },
    {
      name: "unknown source",
      volumes: [root, vol("x", "futureDisk")],
      pvcs: { "ws-root": "Bound" },
      safe: false,
      mentions: ["futureDisk"],
    },
    { name: "no volumes at all", volumes: [], pvcs: {}, safe: false, mentions: ["no volume is backed by a PVC"] },
    {
      name: "only cloud-init",
      volumes: [cloudInit],
      pvcs: {},
      safe: false,
      mentions: ["no volume is backed by a PVC"],
    },
    {
      name: "containerDisk allowed by annotation",
      volumes: [vol("rootdisk", "containerDisk"), cloudInit],
      pvcs: {},
      annotations: ALLOW,
      safe: true,
    },
    {
      name: "emptyDisk allowed by annotation",
      volumes: [root, vol("scratch", "emptyDisk")],
      pvcs: { "ws-root": "Bound" },
      annotations: ALLOW,
      safe: true,
    },
    {
      name: "the annotation does not excuse an unbound PVC",
      volumes: [root, vol("scratch", "emptyDisk")],
      pvcs: { "ws-root": "Pending" },
      annotations: ALLOW,
      safe: false,
      mentions: ["Pending"],
    },
    {
      name: "annotation value other than true",
      volumes: [vol("rootdisk", "containerDisk")],
      pvcs: {},
      annotations: { [`${PREFIX}allow-ephemeral-stop`]: "yes" },
      safe: false,
    },
    {
      name: "claim source without a claim",
      volumes: [vol("broken", "persistentVolumeClaim", null)],
      pvcs: {},
      safe: false,
      mentions: ["names no claim"],
    },
    {
      name: "containerDisk installer ISO as a cdrom beside a Bound root (the desktop guide)",
      volumes: [root, vol("installer", "containerDisk", null, CDROM)],
      pvcs: { "ws-root": "Bound" },
      safe: true,
      mentions: ['volume "installer" (containerDisk) is attached as a read-only cdrom: it holds no state'],
    },
    {
      name: "containerDisk as a disk marked readonly: true",
      volumes: [root, vol("tools", "containerDisk", null, READONLY_DISK)],
      pvcs: { "ws-root": "Bound" },
      safe: true,
      mentions: ['volume "tools" (containerDisk) is attached as a disk marked readonly: true'],
    },
    {
      name: "ephemeral overlay attached read-only",
      volumes: [root, vol("golden", "ephemeral", "golden", READONLY_DISK)],
      pvcs: { "ws-root": "Bound" },
      safe: true,
      mentions: ['volume "golden" (ephemeral)'],
    },
    {
      name: "a cdrom with readonly: false is writable",
      volumes: [root, vol("installer", "containerDisk", null, { attachment: "cdrom", readOnly: false })],
      pvcs: { "ws-root": "Bound" },
      safe: false,
      mentions: [
        'volume "installer" is a containerDisk, attached as a cdrom with readonly: false (writable): its writes are lost',
      ],
    },
    {
      name: "a writable containerDisk root still refuses, naming the disk (CirrOS)",
      volumes: [vol("root", "containerDisk")],
      pvcs: {},
      safe: false,
      mentions: [
        'volume "root" is a containerDisk, attached as a writable disk: its writes are lost when the VM stops',
      ],
    },
    {
      name: "a containerDisk no device names cannot be proven read-only",
      volumes: [root, vol("orphan", "containerDisk", null, { attachment: "none", readOnly: false })],
      pvcs: { "ws-root": "Bound" },
      safe: false,
      mentions: ["no disk device"],
    },
    {
      name: "only a read-only ISO: nothing the user did survives",
      volumes: [vol("installer", "containerDisk", null, CDROM)],
      pvcs: {},
      safe: false,
      mentions: ["no volume is backed by a PVC"],
    },
  ];

  for (const c of cases) {
    it(c.name, () => {
      const verdict = stopSafety({ annotations: c.annotations ?? {}, volumes: c.volumes }, pvcs(c.pvcs), PREFIX);
      expect(verdict.safe, describeVerdict(verdict)).toBe(c.safe);
      const text = describeVerdict(verdict);
      for (const m of c.mentions ?? []) expect(text).toContain(m);
    });
  }

  it("names a DataVolume that comes from the VM's dataVolumeTemplates", () => {
    const verdict = stopSafety(
      { annotations: {}, volumes: [root], dataVolumeTemplates: ["ws-root"] },
      pvcs({ "ws-root": "Bound" }),
      PREFIX,
    );
    expect(verdict).toEqual({
      safe: true,
      persistentClaims: ["ws-root"],
      notes: [
        `volume "rootdisk": DataVolume "ws-root" comes from the VM's dataVolumeTemplates (a stop keeps it; deleting the VM would delete it)`,
      ],
    });
  });

  it("a custom annotation prefix is honoured", () => {
    const v = stopSafety(
      { annotations: { "ws.example.org/allow-ephemeral-stop": "true" }, volumes: [vol("r", "containerDisk")] },
      new Map(),
      "ws.example.org/",
    );
    expect(v.safe).toBe(true);
  });

  it("claimsToCheck names each claim once, from PVC, DataVolume and memoryDump volumes only", () => {
    expect(
      claimsToCheck([
        root,
        vol("again", "dataVolume", "ws-root"),
        vol("h", "persistentVolumeClaim", "home"),
        vol("d", "memoryDump", "dump"),
        vol("e", "ephemeral", "golden"),
        cloudInit,
      ]),
    ).toEqual(["ws-root", "home", "dump"]);
  });

  it("reads volumes out of a VM spec, whatever their source", () => {
    expect(
      volumesOf({
        template: {
          spec: {
            volumes: [
              { name: "a", dataVolume: { name: "dv" } },
              { name: "b", persistentVolumeClaim: { claimName: "pvc", readOnly: false } },
              { name: "c", ephemeral: { persistentVolumeClaim: { claimName: "base" } } },
              { name: "d", containerDisk: { image: "quay.io/containerdisks/fedora" } },
              { name: "e", emptyDisk: { capacity: "2Gi" } },
              { name: "f", cloudInitNoCloud: { userData: "" } },
              { name: "g", someFutureSource: {} },
            ],
          },
        },
      }),
    ).toEqual([
      { name: "a", source: "dataVolume", claimName: "dv", attachment: "none", readOnly: false },
      { name: "b", source: "persistentVolumeClaim", claimName: "pvc", attachment: "none", readOnly: false },
      { name: "c", source: "ephemeral", claimName: "base", attachment: "none", readOnly: false },
      { name: "d", source: "containerDisk", claimName: null, attachment: "none", readOnly: false },
      { name: "e", source: "emptyDisk", claimName: null, attachment: "none", readOnly: false },
      { name: "f", source: "cloudInitNoCloud", claimName: null, attachment: "none", readOnly: false },
      { name: "g", source: "someFutureSource", claimName: null, attachment: "none", readOnly: false },
    ]);
    expect(volumesOf(null)).toEqual([]);
    // The domain's devices say how each volume is attached; cdrom is read-only unless it says otherwise.
    const attached = volumesOf({
      template: {
        spec: {
          domain: {
            devices: {
              disks: [
                { name: "a", disk: { bus: "virtio" } },
                { name: "b", disk: { bus: "virtio", readonly: true } },
                { name: "c", cdrom: { bus: "sata" } },
                { name: "d", cdrom: { bus: "sata", readonly: false } },
                { name: "e", lun: {} },
                { name: "f" },
              ],
              filesystems: [{ name: "g", virtiofs: {} }],
            },
          },
          volumes: ["a", "b", "c", "d", "e", "f", "g"].map((name) => ({ name, containerDisk: { image: "x" } })),
        },
      },
    });
    expect(attached.map((v) => [v.name, v.attachment, v.readOnly])).toEqual([
      ["a", "disk", false],
      ["b", "disk", true],
      ["c", "cdrom", true],
      ["d", "cdrom", false],
      ["e", "lun", false],
      ["f", "disk", false],
      ["g", "filesystem", false],
    ]);
    // Two devices for one volume (KubeVirt rejects it): the writable one wins.
    const twice = volumesOf({
      template: {
        spec: {
          domain: {
            devices: {
              disks: [
                { name: "iso", cdrom: {} },
                { name: "iso", disk: {} },
              ],
              filesystems: [{ name: "ro", virtiofs: {} }],
            },
          },
          volumes: [
            { name: "iso", containerDisk: { image: "x" } },
            { name: "ro", containerDisk: { image: "x" } },
          ],
        },
      },
    });
    expect(twice.map((v) => [v.name, v.attachment, v.readOnly])).toEqual([
      ["iso", "disk", false],
      ["ro", "filesystem", false],
    ]);
    expect(volumesOf({ template: { spec: { volumes: "nope" } } })).toEqual([]);
  });
});

describe("checkStopSafety reads PVCs through the API", () => {
  let fake: FakeKube;
  let clients: KubeClients;
  beforeAll(async () => {
    ({ fake, clients } = await fakeCluster({}, { requestTimeoutMs: 2_000 }));
  });
  afterAll(async () => {
    await fake.close();
  });

  it("safe when the DataVolume's PVC (same name) is Bound", async () => {
    fake.seedWorkstation({ namespace: "u", name: "good" });
    const verdict = await checkStopSafety(clients, {
      namespace: "u",
      annotations: {},
      volumes: [vol("rootdisk", "dataVolume", "good-root"), cloudInit],
    });
    expect(verdict).toEqual({ safe: true, persistentClaims: ["good-root"], notes: [] });
    expect(fake.requestsMatching("GET", "/namespaces/u/persistentvolumeclaims/good-root")).toHaveLength(1);
  });

  it("refuses a Pending PVC and a missing one", async () => {
    fake.seedWorkstation({ namespace: "u", name: "pending", pvcPhase: "Pending" });
    expect(
      (
        await checkStopSafety(clients, {
          namespace: "u",
          annotations: {},
          volumes: [vol("rootdisk", "dataVolume", "pending-root")],
        })
      ).safe,
    ).toBe(false);
    const missing = await checkStopSafety(clients, {
      namespace: "u",
      annotations: {},
      volumes: [vol("rootdisk", "persistentVolumeClaim", "nowhere")],
    });
    expect(missing).toEqual({ safe: false, reasons: ['volume "rootdisk": PVC "nowhere" does not exist'] });
  });

  it("an API failure is transient, not a refusal of the VM", async () => {
    fake.seedWorkstation({ namespace: "u", name: "flaky" });
    fake.faults.add({ method: "GET", pathPattern: "/persistentvolumeclaims/flaky-root", status: 503, times: 1 });
    const verdict = await checkStopSafety(clients, {
      namespace: "u",
      annotations: {},
      volumes: [vol("rootdisk", "dataVolume", "flaky-root")],
    });
    expect(verdict).toMatchObject({ safe: false, transient: true });
    expect(JSON.stringify(verdict)).toContain("HTTP 503");
  });
});
