// The grow planner (pure) and the discovery of disk, partition and LVM through /sys, on /sys
// trees laid out as the kernel lays them out for virtio (vda), NVMe, SCSI (sda), loop and dm.
import { mkdir, mkdtemp, rm, symlink, writeFile } from "node:fs/promises";
import { readFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { CommandRunner } from "../../src/grow/exec.js";
import { growCommand } from "../../src/grow/command.js";
import { gatherGrowFacts, type DeviceFacts, type GrowFacts, type TargetFacts } from "../../src/grow/facts.js";
import { parseLvsJson, parsePvsJson } from "../../src/grow/lvm.js";
import type { MountEntry } from "../../src/grow/mountinfo.js";
import type { PartitionTable } from "../../src/grow/partition-table.js";
import { MIN_GROWTH_BYTES, planGrow, planTarget, type MountPlan } from "../../src/grow/plan.js";
import type { DiskNode } from "../../src/grow/sysblock.js";
import { GROW_TOOLS, type ToolPaths } from "../../src/grow/tools.js";

const MiB = 1024 * 1024;
const GiB = 1024 * MiB;
const fixtures = path.join(path.dirname(fileURLToPath(import.meta.url)), "../fixtures/grow");
const fixture = (name: string) => readFileSync(path.join(fixtures, name), "utf8");

const allTools = Object.fromEntries(Object.keys(GROW_TOOLS).map((tool) => [tool, `/usr/sbin/${tool}`])) as ToolPaths;
const fullRoot = { sysAdmin: true, sysResource: true };

function mount(fsType: string, mountPoint = "/", source = "/dev/vda2"): MountEntry {
  return { mountId: 1, parentId: 0, major: 254, minor: 2, root: "/", mountPoint, fsType, source };
}

function disk(name: string, sizeBytes: number, partitions: Array<[number, number, number]>): DiskNode {
  const sep = /\d$/.test(name) ? "p" : "";
  return {
    name,
    devPath: `/dev/${name}`,
    sizeBytes,
    partitions: partitions.map(([number, startBytes, size]) => ({
      name: `${name}${sep}${number}`,
      devPath: `/dev/${name}${sep}${number}`,
      number,
      startBytes,
      sizeBytes: size,
    })),
  };
}

function table(
  label: string,
  d: DiskNode,
  overrides: Partial<Record<number, { sizeBytes?: number; type?: string }>> = {},
): PartitionTable {
  return {
    label,
    sectorSize: 512,
    partitions: d.partitions.map((p) => ({
      node: p.devPath,
      number: p.number,
      startBytes: p.startBytes,
      sizeBytes: overrides[p.number]?.sizeBytes ?? p.sizeBytes,
      type: overrides[p.number]?.type ?? "83",
    })),
  };
}

function onPartition(
  d: DiskNode,
  number: number,
  label = "gpt",
  overrides: Parameters<typeof table>[2] = {},
): DeviceFacts {
  return {
    kind: "partition",
    partition: d.partitions.find((p) => p.number === number)!,
    disk: d,
    table: table(label, d, overrides),
    tableError: null,
  };
}

function target(
  fsType: string,
  device: DeviceFacts,
  occupiedBytes: number | null,
  extra: Partial<TargetFacts> = {},
): TargetFacts {
  return {
    requested: "/",
    mount: mount(fsType),
    device,
    btrfsDevices: fsType === "btrfs" ? [{ devid: 1, sizeBytes: occupiedBytes ?? 0, path: "/dev/vda2" }] : null,
    btrfsError: null,
    filesystemBytes: occupiedBytes,
    filesystemOnDeviceBytes: occupiedBytes,
    filesystemSizeError: occupiedBytes === null ? "dumpe2fs: Operation not permitted" : null,
    problem: null,
    ...extra,
  };
}

function plan(t: TargetFacts, tools: Partial<ToolPaths> = {}, capabilities = fullRoot): MountPlan {
  const facts: GrowFacts = { targets: [t], tools: { ...allTools, ...tools }, capabilities };
  return planTarget(facts, t);
}

const argvs = (p: MountPlan) => p.steps.flatMap((s) => s.commands.map((c) => c.argv.join(" ")));

// A 20 GiB virtio disk that was 10 GiB: BIOS boot partition, then root up to the old end.
const grownVda = disk("vda", 20 * GiB, [
  [1, 1 * MiB, 1 * MiB],
  [2, 2 * MiB, 10 * GiB - 2 * MiB - 17 * 1024],
]);
const rootOf = (d: DiskNode, n = 2) => d.partitions.find((p) => p.number === n)!;

describe("planGrow: partitions", () => {
  it("grows the last partition with growpart, then the filesystem", () => {
    const p = plan(target("ext4", onPartition(grownVda, 2), rootOf(grownVda).sizeBytes));
    expect(p).toMatchObject({ mountPoint: "/", fsType: "ext4", device: "/dev/vda2", refusals: [] });
    expect(p.steps.map((s) => s.step.kind)).toEqual(["grow-partition", "grow-filesystem"]);
    expect(argvs(p)).toEqual(["/usr/sbin/growpart /dev/vda 2", "/usr/sbin/resize2fs /dev/vda2"]);
    expect(p.steps[0]!.description).toBe("grow partition 2 of /dev/vda into 10.0 GiB of free space");
  });

  it("uses each filesystem's own tool: xfs_growfs on the mount point, btrfs on its device id", () => {
    expect(argvs(plan(target("xfs", onPartition(grownVda, 2), rootOf(grownVda).sizeBytes)))[1]).toBe(
      "/usr/sbin/xfs_growfs /",
    );
    expect(argvs(plan(target("btrfs", onPartition(grownVda, 2), rootOf(grownVda).sizeBytes)))[1]).toBe(
      "/usr/sbin/btrfs filesystem resize 1:max /",
    );
  });

  it("does nothing when the partition reaches the end and the filesystem fills it", () => {
    const full = disk("vda", 10 * GiB, [
      [1, 1 * MiB, 1 * MiB],
      [2, 2 * MiB, 10 * GiB - 2 * MiB - 17 * 1024],
    ]);
    const p = plan(target("ext4", onPartition(full, 2), rootOf(full).sizeBytes - 4096));
    expect(p.steps).toEqual([]);
    expect(p.refusals).toEqual([]);
    expect(p.notes).toEqual([
      "partition 2 of /dev/vda already reaches the end of the disk",
      "the ext4 filesystem at / already fills /dev/vda2",
    ]);
  });

  it("grows a filesystem that does not fill its partition even when the partition cannot grow", () => {
    const full = disk("vda", 10 * GiB, [[1, 1 * MiB, 10 * GiB - 1 * MiB - 17 * 1024]]);
    const p = plan(target("xfs", onPartition(full, 1), 5 * GiB));
    expect(argvs(p)).toEqual(["/usr/sbin/xfs_growfs /"]);
  });

  it("ignores free space smaller than alignment slack", () => {
    const slack = disk("vda", 10 * GiB, [[1, 1 * MiB, 10 * GiB - 1 * MiB - 17 * 1024 - (MIN_GROWTH_BYTES - 4096)]]);
    expect(plan(target("ext4", onPartition(slack, 1), rootOf(slack, 1).sizeBytes)).steps).toEqual([]);
  });

  it("refuses a partition that is not the last one when the disk has free space at its end", () => {
    const swapAfter = disk("vda", 20 * GiB, [
      [1, 1 * MiB, 9 * GiB],
      [2, 9 * GiB + 1 * MiB, 1 * GiB],
    ]);
    const p = plan(target("ext4", onPartition(swapAfter, 1), 9 * GiB));
    expect(p.steps).toEqual([]);
    expect(p.refusals).toEqual([
      "partition 1 of /dev/vda is not the last partition (partition 2 comes after it): the 10.0 GiB free at the end of the disk is left alone; grow never moves or touches other partitions",
    ]);
  });

  it("a partition that is not last, on a disk with no free space, is simply nothing to do", () => {
    const noFree = disk("vda", 10 * GiB, [
      [1, 1 * MiB, 9 * GiB],
      [2, 9 * GiB + 1 * MiB, 1 * GiB - 1 * MiB - 17 * 1024],
    ]);
    const p = plan(target("ext4", onPartition(noFree, 1), 9 * GiB));
    expect(p.refusals).toEqual([]);
    expect(p.steps).toEqual([]);
    expect(p.notes[0]).toBe("partition 1 of /dev/vda is not the last partition, and there is no free space after it");
  });

  it("refuses logical partitions and tables it does not know", () => {
    const dos = disk("sda", 20 * GiB, [
      [1, 1 * MiB, 1 * GiB],
      [2, 1 * GiB + 1 * MiB, 9 * GiB],
      [5, 1 * GiB + 2 * MiB, 9 * GiB - 1 * MiB],
    ]);
    const logical = plan(target("ext4", onPartition(dos, 5, "dos", { 2: { type: "5" } }), 9 * GiB - 1 * MiB));
    expect(logical.refusals).toEqual([
      "partition 5 of /dev/sda is a logical partition inside an extended one; grow does not resize extended partitions",
    ]);
    const beforeExtended = plan(target("ext4", onPartition(dos, 1, "dos", { 2: { type: "5" } }), 1 * GiB));
    expect(beforeExtended.refusals[0]).toMatch(
      /^partition 1 of \/dev\/sda is not the last partition \(partition 2 \(extended\), 5 comes after it\)/,
    );
    expect(plan(target("ext4", onPartition(grownVda, 2, "sun"), 1 * GiB)).refusals).toEqual([
      "/dev/vda has a sun partition table; grow understands gpt and dos",
    ]);
  });

  it("refuses when the table and the kernel disagree, or the table cannot be read", () => {
    const device = onPartition(grownVda, 2);
    if (device.kind !== "partition") throw new Error("unreachable");
    const moved = {
      ...device,
      table: {
        ...device.table!,
        partitions: device.table!.partitions.map((p) =>
          p.number === 2 ? { ...p, startBytes: p.startBytes + MiB } : p,
        ),
      },
    };
    expect(plan(target("ext4", moved, 1 * GiB)).refusals[0]).toMatch(/does not match what the kernel shows/);
    const unreadable = { ...device, table: null, tableError: "sfdisk --json /dev/vda: exit status 1: cannot open" };
    expect(plan(target("ext4", unreadable, 1 * GiB)).refusals).toEqual([
      "cannot read the partition table of /dev/vda: sfdisk --json /dev/vda: exit status 1: cannot open",
    ]);
  });

  it("tells the kernel when the table is already larger than the partition it uses", () => {
    const full = disk("vda", 20 * GiB, [[1, 1 * MiB, 10 * GiB]]);
    const p = plan(
      target("ext4", onPartition(full, 1, "gpt", { 1: { sizeBytes: 20 * GiB - 1 * MiB - 17 * 1024 } }), 10 * GiB),
    );
    expect(argvs(p)).toEqual(["/usr/sbin/partx --update --nr 1 /dev/vda", "/usr/sbin/resize2fs /dev/vda1"]);
  });

  it("falls back to sfdisk and partx without growpart, relocating the GPT backup header first", () => {
    const p = plan(target("ext4", onPartition(grownVda, 2), 1 * GiB), { growpart: null });
    expect(p.steps[0]!.commands).toEqual([
      { argv: ["/usr/sbin/sfdisk", "--no-reread", "--no-tell-kernel", "--relocate", "gpt-bak-std", "/dev/vda"] },
      { argv: ["/usr/sbin/sfdisk", "--no-reread", "--no-tell-kernel", "-N", "2", "/dev/vda"], input: ", +\n" },
      { argv: ["/usr/sbin/partx", "--update", "--nr", "2", "/dev/vda"] },
    ]);
    const dos = plan(target("ext4", onPartition(grownVda, 2, "dos"), 1 * GiB), { growpart: null });
    expect(dos.steps[0]!.commands.map((c) => c.argv.slice(1, 4).join(" "))).toEqual([
      "--no-reread --no-tell-kernel -N",
      "--update --nr 2",
    ]);
  });

  it("names the Debian package of a missing tool", () => {
    const none = Object.fromEntries(Object.keys(GROW_TOOLS).map((t) => [t, null])) as Partial<ToolPaths>;
    const p = plan(target("xfs", onPartition(grownVda, 2), 1 * GiB), none);
    expect(p.steps).toEqual([]);
    expect(p.refusals).toEqual([
      "growing partition 2 of /dev/vda needs growpart (Debian package cloud-guest-utils) or sfdisk and partx (fdisk, util-linux)",
      "xfs_growfs is not installed (Debian package xfsprogs)",
    ]);
  });

  it("says which capability is missing instead of failing halfway", () => {
    const noResource = plan(
      target("ext4", onPartition(grownVda, 2), 1 * GiB),
      {},
      { sysAdmin: true, sysResource: false },
    );
    expect(noResource.steps.map((s) => s.step.kind)).toEqual(["grow-partition"]);
    expect(noResource.refusals[0]).toMatch(/mounted ext4 filesystem at \/ needs CAP_SYS_RESOURCE/);
    // Nothing to grow needs no capability at all.
    const full = disk("vda", 10 * GiB, [[1, 1 * MiB, 10 * GiB - 1 * MiB - 17 * 1024]]);
    expect(
      plan(target("ext4", onPartition(full, 1), rootOf(full, 1).sizeBytes), {}, { sysAdmin: false, sysResource: false })
        .refusals,
    ).toEqual([]);
    const noAdmin = plan(target("xfs", onPartition(grownVda, 2), 1 * GiB), {}, { sysAdmin: false, sysResource: false });
    expect(noAdmin.refusals).toEqual([
      "growing partition 2 of /dev/vda needs CAP_SYS_ADMIN to tell the kernel the new size, and this process lacks it",
      "xfs_growfs needs CAP_SYS_ADMIN, and this process lacks it",
    ]);
  });

  it("grows the filesystem anyway when its size cannot be read (a no-op if it fills the device), and says so", () => {
    const full = disk("vda", 10 * GiB, [[1, 1 * MiB, 10 * GiB - 1 * MiB - 17 * 1024]]);
    const p = plan(target("ext4", onPartition(full, 1), null));
    expect(argvs(p)).toEqual(["/usr/sbin/resize2fs /dev/vda1"]);
    expect(p.notes.join("\n")).toMatch(
      /cannot tell how much of \/dev\/vda1 the filesystem fills \(dumpe2fs: Operation not permitted\)/,
    );
  });
});

describe("planGrow: whole disks, odd filesystems, problems", () => {
  it("a filesystem on a whole disk grows without a partition step", () => {
    const whole: DeviceFacts = { kind: "disk", disk: disk("vdb", 20 * GiB, []) };
    const p = plan(target("xfs", whole, 10 * GiB));
    expect(argvs(p)).toEqual(["/usr/sbin/xfs_growfs /"]);
    expect(p.notes).toEqual(["/dev/vdb is a whole disk, not a partition: no partition to grow"]);
  });

  it("refuses filesystems it does not grow, and devices it does not understand", () => {
    expect(plan(target("vfat", onPartition(grownVda, 2), 1 * GiB)).refusals).toEqual([
      "/ is vfat; grow understands ext2, ext3, ext4, xfs, btrfs",
    ]);
    const crypt: DeviceFacts = {
      kind: "unsupported",
      name: "dm-0",
      reason: "device-mapper device luks-root is not LVM (uuid prefix CRYPT); grow understands LVM only",
    };
    expect(plan(target("ext4", crypt, 1 * GiB)).refusals).toEqual([crypt.reason]);
    expect(
      plan(
        target("btrfs", onPartition(grownVda, 2), 1 * GiB, {
          btrfsDevices: [
            { devid: 1, sizeBytes: 1, path: "/dev/vda2" },
            { devid: 2, sizeBytes: 1, path: "/dev/vdb" },
          ],
        }),
      ).refusals,
    ).toEqual(["the btrfs filesystem at / spans 2 devices; grow resizes single-device btrfs only"]);
  });

  it("a target whose facts could not be found is refused with the reason", () => {
    const missing: TargetFacts = {
      ...target("ext4", onPartition(grownVda, 2), null),
      mount: null,
      device: null,
      problem: "/srv: ENOENT",
    };
    expect(plan(missing)).toMatchObject({ mountPoint: null, steps: [], refusals: ["/srv: ENOENT"] });
  });
});

describe("planGrow: LVM", () => {
  const lv = parseLvsJson(fixture("lvs-segments.json"))[0]!;
  const pv = parsePvsJson(fixture("pvs.json"))[0]!;
  const pvDisk = disk("vda", 20 * GiB, [
    [1, 1 * MiB, 1 * MiB],
    [2, 2 * MiB, pv.deviceBytes],
  ]);
  const lvm = (overrides: Partial<Extract<DeviceFacts, { kind: "lvm" }>> = {}, pvOverride = pv): DeviceFacts => ({
    kind: "lvm",
    node: { name: "dm-0", devPath: lv.dmPath, sizeBytes: lv.sizeBytes },
    dmName: "wsfixturevg-root",
    lv,
    lvError: null,
    physicalVolumes: [{ device: onPartition(pvDisk, 2), pv: pvOverride, pvError: null }],
    ...overrides,
  });

  it("grows the partition, the physical volume, the logical volume and the filesystem, in that order", () => {
    const p = plan(target("ext4", lvm(), lv.sizeBytes));
    expect(argvs(p)).toEqual([
      "/usr/sbin/growpart /dev/vda 2",
      "/usr/sbin/pvresize /dev/vda2",
      "/usr/sbin/lvextend -l +100%FREE wsfixturevg/root",
      "/usr/sbin/resize2fs /dev/mapper/wsfixturevg-root",
    ]);
  });

  it("extends into free space the volume group already has, without touching the disk", () => {
    const fullDisk = disk("vda", pv.deviceBytes + 2 * MiB + 17 * 1024, [
      [1, 1 * MiB, 1 * MiB],
      [2, 2 * MiB, pv.deviceBytes],
    ]);
    const p = plan(
      target("xfs", lvm({ physicalVolumes: [{ device: onPartition(fullDisk, 2), pv, pvError: null }] }), lv.sizeBytes),
    );
    expect(argvs(p)).toEqual(["/usr/sbin/lvextend -l +100%FREE wsfixturevg/root", "/usr/sbin/xfs_growfs /"]);
  });

  it("nothing to do when the group has no free extents and nothing grew", () => {
    const fullDisk = disk("vda", pv.deviceBytes + 2 * MiB + 17 * 1024, [
      [1, 1 * MiB, 1 * MiB],
      [2, 2 * MiB, pv.deviceBytes],
    ]);
    const p = plan(
      target(
        "xfs",
        lvm({
          lv: { ...lv, vgFreeBytes: 0 },
          physicalVolumes: [{ device: onPartition(fullDisk, 2), pv, pvError: null }],
        }),
        lv.sizeBytes,
      ),
    );
    expect(p.steps).toEqual([]);
    expect(p.notes).toContain("volume group wsfixturevg has no free extents");
  });

  it("refuses volumes that are not linear, and volumes lvs does not know", () => {
    expect(plan(target("ext4", lvm({ lv: { ...lv, segmentTypes: ["linear", "raid1"] } }), 1)).refusals).toEqual([
      "logical volume wsfixturevg/root has raid1 segments; grow extends linear volumes only",
    ]);
    expect(
      plan(target("ext4", lvm({ lv: null, lvError: "lvs lists no logical volume at /dev/mapper/x" }), 1)).refusals,
    ).toEqual(["lvs lists no logical volume at /dev/mapper/x"]);
  });
});

describe("discovery through /sys", () => {
  let root: string;
  const status = "Name:\tnode\nCapEff:\t000001ffffffffff\n";

  async function file(relative: string, content: string) {
    await mkdir(path.dirname(path.join(root, relative)), { recursive: true });
    await writeFile(path.join(root, relative), content);
  }

  async function link(relative: string, target: string) {
    await mkdir(path.dirname(path.join(root, relative)), { recursive: true });
    await symlink(target, path.join(root, relative));
  }

  /** A disk directory as the kernel makes it, with partitions inside and /sys/dev/block and /sys/class/block links. */
  async function sysDisk(
    devicesPath: string,
    name: string,
    sectors: number,
    majorMinor: string,
    partitions: Array<[string, number, number, number, string]>,
  ) {
    const dir = `sys/devices/${devicesPath}/${name}`;
    await file(`${dir}/size`, `${sectors}\n`);
    await file(`${dir}/dev`, `${majorMinor}\n`);
    await link(`sys/class/block/${name}`, `../../devices/${devicesPath}/${name}`);
    for (const [part, number, start, size, devNumber] of partitions) {
      await file(`${dir}/${part}/partition`, `${number}\n`);
      await file(`${dir}/${part}/start`, `${start}\n`);
      await file(`${dir}/${part}/size`, `${size}\n`);
      await file(`${dir}/${part}/dev`, `${devNumber}\n`);
      await link(`sys/dev/block/${devNumber}`, `../../devices/${devicesPath}/${name}/${part}`);
      await link(`sys/class/block/${part}`, `../../devices/${devicesPath}/${name}/${part}`);
    }
  }

  function sfdiskFor(node: (n: number) => string, parts: Array<[number, number, number]>) {
    return JSON.stringify({
      partitiontable: {
        label: "gpt",
        device: "x",
        unit: "sectors",
        sectorsize: 512,
        partitions: parts.map(([n, start, size]) => ({
          node: node(n),
          start,
          size,
          type: "0FC63DAF-8483-4772-8E79-3D69D8477DE4",
        })),
      },
    });
  }

  /** Answers with output captured from the real tools; an unexpected command is a test failure. */
  function replay(answers: Record<string, string>): CommandRunner {
    return async (argv) => {
      const key = argv.map((a, i) => (i === 0 ? path.basename(a) : a)).join(" ");
      const stdout = answers[key];
      if (stdout === undefined) throw new Error(`unexpected command: ${key}`);
      return { exitCode: 0, stdout, stderr: "" };
    };
  }

  beforeAll(async () => {
    root = await mkdtemp(path.join(os.tmpdir(), "ws-grow-sys-"));
    await file("proc/self/status", status);
    // virtio: 20 GiB disk, 2 partitions, root the last one, 10 GiB.
    await sysDisk("pci0000:00/0000:00:02.0/virtio1/block", "vda", 41943040, "254:0", [
      ["vda1", 1, 2048, 2048, "254:1"],
      ["vda2", 2, 4096, 20967424, "254:2"],
    ]);
    await sysDisk("pci0000:00/0000:00:04.0/nvme/nvme0", "nvme0n1", 41943040, "259:0", [
      ["nvme0n1p1", 1, 2048, 20969472, "259:1"],
    ]);
    await sysDisk("pci0000:00/0000:00:05.0/virtio2/host0/target0:0:0/0:0:0:0/block", "sda", 41943040, "8:0", [
      ["sda1", 1, 2048, 20969472, "8:1"],
    ]);
    await sysDisk("virtual/block", "loop0", 262144, "7:0", [
      ["loop0p1", 1, 2048, 16384, "259:7"],
      ["loop0p2", 2, 18432, 110592, "259:8"],
    ]);
    // LVM: dm-0 over vdb1.
    await sysDisk("pci0000:00/0000:00:06.0/virtio3/block", "vdb", 41943040, "254:16", [
      ["vdb1", 1, 2048, 20969472, "254:17"],
    ]);
    await file("sys/devices/virtual/block/dm-0/size", "49152\n");
    await file("sys/devices/virtual/block/dm-0/dm/name", "wsfixturevg-root\n");
    await file(
      "sys/devices/virtual/block/dm-0/dm/uuid",
      "LVM-abcdefabcdefabcdefabcdefabcdefabcdefabcdefabcdefabcdefabcdefabcd\n",
    );
    await link(
      "sys/devices/virtual/block/dm-0/slaves/vdb1",
      "../../../../pci0000:00/0000:00:06.0/virtio3/block/vdb/vdb1",
    );
    await link("sys/dev/block/253:0", "../../devices/virtual/block/dm-0");
    await link("sys/class/block/dm-0", "../../devices/virtual/block/dm-0");
    // dm-1: a LUKS mapping.
    await file("sys/devices/virtual/block/dm-1/size", "49152\n");
    await file("sys/devices/virtual/block/dm-1/dm/name", "luks-data\n");
    await file("sys/devices/virtual/block/dm-1/dm/uuid", "CRYPT-LUKS2-0123456789abcdef-luks-data\n");
    await link("sys/dev/block/253:1", "../../devices/virtual/block/dm-1");
    await file(
      "proc/self/mountinfo",
      [
        "1 0 254:2 / / rw,relatime - ext4 /dev/vda2 rw",
        "2 1 259:1 / /srv/nvme rw,relatime - xfs /dev/nvme0n1p1 rw",
        "3 1 8:1 / /srv/scsi rw,relatime - ext4 /dev/sda1 rw",
        "4 1 0:44 / /srv/loop rw,relatime - btrfs /dev/loop0p2 rw,subvol=/",
        "5 1 253:0 / /srv/lvm rw,relatime - ext4 /dev/mapper/wsfixturevg-root rw",
        "6 1 253:1 / /srv/crypt rw,relatime - ext4 /dev/mapper/luks-data rw",
        "7 1 0:30 / /srv/tmp rw - tmpfs tmpfs rw",
      ].join("\n"),
    );
    // /dev for the btrfs source lookup: a plain file stands in for the node.
    await file("dev/loop0p2", "");
    for (const dir of ["srv/nvme", "srv/scsi", "srv/loop", "srv/lvm", "srv/crypt", "srv/tmp"])
      await mkdir(path.join(root, dir), { recursive: true });
  });

  afterAll(async () => {
    if (root) await rm(root, { recursive: true, force: true });
  });

  /** Mount points in the fake mountinfo are real paths under `root`, except "/". */
  async function discover(answers: Record<string, string>, requested: string[]): Promise<GrowFacts> {
    const lines = readFileSync(path.join(root, "proc/self/mountinfo"), "utf8").replaceAll(" /srv/", ` ${root}/srv/`);
    await writeFile(path.join(root, "proc/self/mountinfo"), lines);
    return gatherGrowFacts(
      {
        procRoot: path.join(root, "proc"),
        sysRoot: path.join(root, "sys"),
        devRoot: path.join(root, "dev"),
        tools: allTools,
        run: replay(answers),
      },
      requested,
    );
  }

  it("finds disk, partition and table for vda, nvme0n1p1, sda1 and a loop partition under btrfs", async () => {
    const dumpe2fs = "Block count:              2620928\nBlock size:               4096\n";
    const facts = await discover(
      {
        "sfdisk --json /dev/vda": sfdiskFor(
          (n) => `/dev/vda${n}`,
          [
            [1, 2048, 2048],
            [2, 4096, 20967424],
          ],
        ),
        "sfdisk --json /dev/nvme0n1": sfdiskFor((n) => `/dev/nvme0n1p${n}`, [[1, 2048, 20969472]]),
        "sfdisk --json /dev/sda": sfdiskFor((n) => `/dev/sda${n}`, [[1, 2048, 20969472]]),
        "sfdisk --json /dev/loop0": fixture("sfdisk-gpt.json"),
        "dumpe2fs -h /dev/vda2": dumpe2fs,
        "dumpe2fs -h /dev/sda1": dumpe2fs,
        [`xfs_info ${root}/srv/nvme`]: fixture("xfs_info.txt"),
        [`btrfs filesystem show --raw ${root}/srv/loop`]: fixture("btrfs-show.txt").replace(
          "/dev/loop1p2",
          "/dev/loop0p2",
        ),
      },
      ["/", `${root}/srv/nvme`, `${root}/srv/scsi`, `${root}/srv/loop`],
    );
    const where = facts.targets.map((t) => {
      const d = t.device!;
      return d.kind === "partition"
        ? [t.mount!.fsType, d.disk.devPath, d.partition.devPath, d.partition.number, d.disk.partitions.length]
        : [d.kind];
    });
    expect(where).toEqual([
      ["ext4", "/dev/vda", "/dev/vda2", 2, 2],
      ["xfs", "/dev/nvme0n1", "/dev/nvme0n1p1", 1, 1],
      ["ext4", "/dev/sda", "/dev/sda1", 1, 1],
      ["btrfs", "/dev/loop0", "/dev/loop0p2", 2, 2],
    ]);
    expect(facts.capabilities).toEqual(fullRoot);
    expect(facts.targets[0]!.filesystemOnDeviceBytes).toBe(2620928 * 4096);
    const plans = planGrow(facts);
    expect(plans.map((p) => argvs(p)[0])).toEqual([
      "/usr/sbin/growpart /dev/vda 2",
      "/usr/sbin/growpart /dev/nvme0n1 1",
      "/usr/sbin/growpart /dev/sda 1",
      "/usr/sbin/growpart /dev/loop0 2",
    ]);
  });

  it("follows a device-mapper node to LVM and its physical volume; refuses LUKS and tmpfs", async () => {
    const facts = await discover(
      {
        "lvs --reportformat json --units b --nosuffix --segments -o lv_name,vg_name,lv_dm_path,lv_size,segtype,vg_free,vg_extent_size":
          fixture("lvs-segments.json"),
        "pvs --reportformat json --units b --nosuffix -o pv_name,vg_name,pv_size,dev_size,pe_start /dev/vdb1": fixture(
          "pvs.json",
        ).replace("/dev/vda2", "/dev/vdb1"),
        "sfdisk --json /dev/vdb": sfdiskFor((n) => `/dev/vdb${n}`, [[1, 2048, 20969472]]),
        "dumpe2fs -h /dev/mapper/wsfixturevg-root": "Block count:              24576\nBlock size:               1024\n",
      },
      [`${root}/srv/lvm`, `${root}/srv/crypt`, `${root}/srv/tmp`],
    );
    const [lvm, crypt, tmp] = facts.targets;
    expect(lvm!.device).toMatchObject({
      kind: "lvm",
      dmName: "wsfixturevg-root",
      node: { devPath: "/dev/mapper/wsfixturevg-root" },
      lv: { vg: "wsfixturevg", lv: "root" },
    });
    const plans = planGrow(facts);
    expect(argvs(plans[0]!)).toEqual([
      "/usr/sbin/growpart /dev/vdb 1",
      "/usr/sbin/pvresize /dev/vdb1",
      "/usr/sbin/lvextend -l +100%FREE wsfixturevg/root",
      "/usr/sbin/resize2fs /dev/mapper/wsfixturevg-root",
    ]);
    expect(crypt!.device).toMatchObject({ kind: "unsupported" });
    expect(plans[1]!.refusals).toEqual([
      "device-mapper device luks-data is not LVM (uuid prefix CRYPT); grow understands LVM only",
    ]);
    expect(tmp!.problem).toBe(`${root}/srv/tmp (tmpfs from tmpfs) is not on a block device`);
    expect(plans[2]!.refusals).toEqual([tmp!.problem]);
  });

  it("a path that does not exist is reported, and two paths on one filesystem are grown once", async () => {
    const facts = await discover(
      {
        "sfdisk --json /dev/vda": sfdiskFor((n) => `/dev/vda${n}`, [[2, 4096, 20967424]]),
        "dumpe2fs -h /dev/vda2": "",
      },
      ["/nonexistent-ws-grow", "/", "/usr"],
    );
    expect(facts.targets.map((t) => t.requested)).toEqual(["/nonexistent-ws-grow", "/"]);
    expect(facts.targets[0]!.problem).toMatch(/^\/nonexistent-ws-grow: ENOENT/);
    expect(facts.targets[1]!.filesystemSizeError).toBe("dumpe2fs -h: no Block count / Block size lines");
  });
});

describe("ws-agent grow usage", () => {
  function capture() {
    let stdout = "";
    let stderr = "";
    const stream = (append: (text: string) => void) =>
      ({
        write: (chunk: string) => {
          append(chunk);
          return true;
        },
      }) as unknown as NodeJS.WritableStream;
    return {
      io: { stdout: stream((t) => (stdout += t)), stderr: stream((t) => (stderr += t)), env: process.env },
      stdout: () => stdout,
      stderr: () => stderr,
    };
  }

  it.each([
    [["--bogus"], /unknown option --bogus/],
    [["--mount"], /--mount needs a value/],
    [["--mount", "relative/path"], /--mount needs an absolute path, got "relative\/path"/],
    [["extra"], /unexpected argument "extra"/],
  ])("%j is a usage error (exit 2)", async (args, message) => {
    const out = capture();
    expect(await growCommand(args, out.io)).toBe(2);
    expect(out.stderr()).toMatch(message);
    expect(out.stdout()).toBe("");
  });

  it("--help explains every option", async () => {
    const out = capture();
    expect(await growCommand(["--help"], out.io)).toBe(0);
    for (const option of ["--mount PATH", "--dry-run", "--json"]) expect(out.stdout()).toContain(option);
  });

  it("a mount that does not exist is refused with the reason (exit 1), also as JSON", async () => {
    const out = capture();
    expect(await growCommand(["--mount", "/nonexistent-ws-grow", "--json"], out.io)).toBe(1);
    const report = JSON.parse(out.stdout());
    expect(report).toMatchObject({ dryRun: false, ok: false });
    expect(report.mounts[0]).toMatchObject({ requested: "/nonexistent-ws-grow", status: "refused", steps: [] });
    expect(report.mounts[0].refusals[0]).toMatch(/^\/nonexistent-ws-grow: ENOENT/);
  });
});
