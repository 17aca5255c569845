import {
  deviceNodePath,
  type DeviceFacts,
  type GrowFacts,
  type PhysicalVolumeFacts,
  type TargetFacts,
} from "./facts.js";
import { physicalVolumeHasRoom } from "./lvm.js";
import { isExtendedPartition, type PartitionTable } from "./partition-table.js";
import type { DiskNode, PartitionNode } from "./sysblock.js";
import { missingToolMessage, type GrowTool } from "./tools.js";

/** Less free space than this is alignment slack, not a resized disk. */
export const MIN_GROWTH_BYTES = 1024 * 1024;

export const GROWABLE_FILESYSTEMS = ["ext2", "ext3", "ext4", "xfs", "btrfs"] as const;

export type GrowStep =
  | {
      kind: "grow-partition";
      via: "growpart" | "sfdisk";
      disk: string;
      partition: number;
      partitionPath: string;
      freeBytes: number;
    }
  | {
      kind: "tell-kernel";
      disk: string;
      partition: number;
      partitionPath: string;
      tableBytes: number;
      kernelBytes: number;
    }
  | { kind: "pvresize"; pv: string; vg: string }
  | { kind: "lvextend"; vg: string; lv: string; device: string }
  | { kind: "grow-filesystem"; fsType: string; device: string; mountPoint: string };

export interface PlannedCommand {
  argv: string[];
  /** Fed on stdin (sfdisk reads the new partition size there). */
  input?: string;
}

export interface PlannedStep {
  step: GrowStep;
  /** The exact commands, in order. */
  commands: PlannedCommand[];
  description: string;
}

export interface MountPlan {
  requested: string;
  mountPoint: string | null;
  fsType: string | null;
  device: string | null;
  steps: PlannedStep[];
  /** What would be needed and is refused, each with its reason. A refusal fails the run. */
  refusals: string[];
  /** Why nothing is done where that is fine (the partition already fills the disk...). */
  notes: string[];
}

export function formatBytes(bytes: number): string {
  const units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
  let value = bytes;
  let unit = 0;
  while (Math.abs(value) >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return unit === 0 ? `${bytes} B` : `${value.toFixed(1)} ${units[unit]}`;
}

/** Bytes at the end of the disk the table itself needs: GPT keeps its backup header and entries there. */
function tableReserveBytes(table: PartitionTable): number {
  return table.label === "gpt" ? 16384 + table.sectorSize : 0;
}

/**
 * sfdisk's "+" takes all the space up to the end of the disk; for GPT the backup header must
 * first move to the new end, or the old end would still bound the partition.
 */
export function sfdiskGrowCommands(
  sfdisk: string,
  partx: string,
  disk: string,
  partition: number,
  label: string,
): PlannedCommand[] {
  const commands: PlannedCommand[] = [];
  if (label === "gpt")
    commands.push({ argv: [sfdisk, "--no-reread", "--no-tell-kernel", "--relocate", "gpt-bak-std", disk] });
  commands.push({ argv: [sfdisk, "--no-reread", "--no-tell-kernel", "-N", String(partition), disk], input: ", +\n" });
  commands.push({ argv: [partx, "--update", "--nr", String(partition), disk] });
  return commands;
}

/** Collects one mount's plan; each plan* method answers "did the layer below grow?". */
class MountPlanner {
  readonly steps: PlannedStep[] = [];
  readonly refusals: string[] = [];
  readonly notes: string[] = [];

  constructor(private readonly facts: GrowFacts) {}

  private tool(tool: GrowTool): string | null {
    const binary = this.facts.tools[tool];
    if (!binary) this.refusals.push(missingToolMessage(tool));
    return binary;
  }

  partition(
    partition: PartitionNode,
    disk: DiskNode,
    table: PartitionTable | null,
    tableError: string | null,
  ): boolean {
    const where = `partition ${partition.number} of ${disk.devPath}`;
    if (!table) {
      this.refusals.push(`cannot read the partition table of ${disk.devPath}: ${tableError ?? "unknown error"}`);
      return false;
    }
    if (table.label !== "gpt" && table.label !== "dos") {
      this.refusals.push(`${disk.devPath} has a ${table.label} partition table; grow understands gpt and dos`);
      return false;
    }
    const ours = table.partitions.find((p) => p.number === partition.number);
    if (!ours || ours.startBytes !== partition.startBytes) {
      this.refusals.push(
        `the partition table of ${disk.devPath} does not match what the kernel shows for ${where}: refusing to guess`,
      );
      return false;
    }
    if (table.label === "dos" && partition.number > 4) {
      this.refusals.push(
        `${where} is a logical partition inside an extended one; grow does not resize extended partitions`,
      );
      return false;
    }
    const usableEnd = disk.sizeBytes - tableReserveBytes(table);
    const later = table.partitions.filter((p) => p.startBytes > ours.startBytes);
    if (later.length > 0) {
      const lastEnd = Math.max(...table.partitions.map((p) => p.startBytes + p.sizeBytes));
      const freeAtEnd = usableEnd - lastEnd;
      const blockers = later.map((p) => `${p.number}${isExtendedPartition(table, p) ? " (extended)" : ""}`).join(", ");
      if (freeAtEnd >= MIN_GROWTH_BYTES) {
        this.refusals.push(
          `${where} is not the last partition (partition ${blockers} comes after it): the ${formatBytes(freeAtEnd)} free at the end of the disk is left alone; grow never moves or touches other partitions`,
        );
        return false;
      }
      this.notes.push(`${where} is not the last partition, and there is no free space after it`);
      return this.kernelCatchUp(where, disk, partition, ours.sizeBytes);
    }
    const freeBytes = usableEnd - (ours.startBytes + ours.sizeBytes);
    if (freeBytes < MIN_GROWTH_BYTES) {
      this.notes.push(`${where} already reaches the end of the disk`);
      return this.kernelCatchUp(where, disk, partition, ours.sizeBytes);
    }
    if (!this.facts.capabilities.sysAdmin) {
      this.refusals.push(
        `growing ${where} needs CAP_SYS_ADMIN to tell the kernel the new size, and this process lacks it`,
      );
      return false;
    }
    const step: GrowStep = {
      kind: "grow-partition",
      via: "growpart",
      disk: disk.devPath,
      partition: partition.number,
      partitionPath: partition.devPath,
      freeBytes,
    };
    const { growpart, sfdisk, partx } = this.facts.tools;
    if (growpart) {
      this.steps.push({
        step,
        commands: [{ argv: [growpart, disk.devPath, String(partition.number)] }],
        description: `grow ${where} into ${formatBytes(freeBytes)} of free space`,
      });
    } else if (sfdisk && partx) {
      this.steps.push({
        step: { ...step, via: "sfdisk" },
        commands: sfdiskGrowCommands(sfdisk, partx, disk.devPath, partition.number, table.label),
        description: `grow ${where} into ${formatBytes(freeBytes)} of free space (with sfdisk: growpart, Debian package cloud-guest-utils, is not installed)`,
      });
    } else {
      this.refusals.push(
        `growing ${where} needs growpart (Debian package cloud-guest-utils) or sfdisk and partx (fdisk, util-linux)`,
      );
      return false;
    }
    return true;
  }

  /** The table can be ahead of the kernel when an earlier run stopped between the two. */
  private kernelCatchUp(where: string, disk: DiskNode, partition: PartitionNode, tableBytes: number): boolean {
    if (tableBytes - partition.sizeBytes < MIN_GROWTH_BYTES) return false;
    const partx = this.tool("partx");
    if (!partx) return false;
    this.steps.push({
      step: {
        kind: "tell-kernel",
        disk: disk.devPath,
        partition: partition.number,
        partitionPath: partition.devPath,
        tableBytes,
        kernelBytes: partition.sizeBytes,
      },
      commands: [{ argv: [partx, "--update", "--nr", String(partition.number), disk.devPath] }],
      description: `tell the kernel ${where} is ${formatBytes(tableBytes)}, as the table says (it uses ${formatBytes(partition.sizeBytes)})`,
    });
    return true;
  }

  /** The device under a filesystem or a physical volume. */
  underlying(device: DeviceFacts): boolean {
    switch (device.kind) {
      case "partition":
        return this.partition(device.partition, device.disk, device.table, device.tableError);
      case "disk":
        this.notes.push(`${device.disk.devPath} is a whole disk, not a partition: no partition to grow`);
        return false;
      case "unsupported":
        this.refusals.push(device.reason);
        return false;
      case "lvm":
        this.refusals.push(`LVM on top of LVM (${device.dmName}) is not understood`);
        return false;
    }
  }

  private physicalVolume(physical: PhysicalVolumeFacts, extentBytes: number): boolean {
    const grewUnderneath = this.underlying(physical.device);
    if (!physical.pv) {
      this.refusals.push(physical.pvError ?? "physical volume not found");
      return false;
    }
    if (!grewUnderneath && !physicalVolumeHasRoom(physical.pv, extentBytes)) return false;
    const pvresize = this.tool("pvresize");
    if (!pvresize) return false;
    this.steps.push({
      step: { kind: "pvresize", pv: physical.pv.path, vg: physical.pv.vg },
      commands: [{ argv: [pvresize, physical.pv.path] }],
      description: `grow LVM physical volume ${physical.pv.path} to the end of its device`,
    });
    return true;
  }

  lvm(device: Extract<DeviceFacts, { kind: "lvm" }>): boolean {
    const lv = device.lv;
    if (!lv) {
      this.refusals.push(device.lvError ?? `no logical volume found for ${device.node.devPath}`);
      return false;
    }
    const odd = [...new Set(lv.segmentTypes.filter((type) => type !== "linear"))];
    if (odd.length > 0) {
      this.refusals.push(
        `logical volume ${lv.vg}/${lv.lv} has ${odd.join(", ")} segments; grow extends linear volumes only`,
      );
      return false;
    }
    if (device.physicalVolumes.length === 0) {
      this.refusals.push(`logical volume ${lv.vg}/${lv.lv}: /sys shows no physical volume under ${device.node.name}`);
      return false;
    }
    let physicalGrew = false;
    for (const physical of device.physicalVolumes) {
      if (this.physicalVolume(physical, lv.extentBytes)) physicalGrew = true;
    }
    if (!physicalGrew && lv.vgFreeBytes < lv.extentBytes) {
      this.notes.push(`volume group ${lv.vg} has no free extents`);
      return false;
    }
    const lvextend = this.tool("lvextend");
    if (!lvextend) return false;
    this.steps.push({
      step: { kind: "lvextend", vg: lv.vg, lv: lv.lv, device: device.node.devPath },
      commands: [{ argv: [lvextend, "-l", "+100%FREE", `${lv.vg}/${lv.lv}`] }],
      description: `extend logical volume ${lv.vg}/${lv.lv} over the free space of volume group ${lv.vg}`,
    });
    return true;
  }

  filesystem(target: TargetFacts, deviceBytes: number, deviceGrows: boolean): void {
    const mount = target.mount!;
    const device = deviceNodePath(target.device!);
    const fsType = mount.fsType;
    const occupied = target.filesystemOnDeviceBytes;
    if (!deviceGrows && occupied !== null && deviceBytes - occupied < MIN_GROWTH_BYTES) {
      this.notes.push(`the ${fsType} filesystem at ${mount.mountPoint} already fills ${device}`);
      return;
    }
    if (occupied === null) {
      this.notes.push(
        `cannot tell how much of ${device} the filesystem fills (${target.filesystemSizeError ?? "unknown"}): growing it anyway, which changes nothing if it already fills the device`,
      );
    }
    const step: GrowStep = { kind: "grow-filesystem", fsType, device, mountPoint: mount.mountPoint };
    if (fsType === "xfs") {
      const tool = this.tool("xfs_growfs");
      if (!tool) return;
      if (!this.facts.capabilities.sysAdmin) {
        this.refusals.push("xfs_growfs needs CAP_SYS_ADMIN, and this process lacks it");
        return;
      }
      this.steps.push({
        step,
        commands: [{ argv: [tool, mount.mountPoint] }],
        description: `grow the xfs filesystem at ${mount.mountPoint} to the end of ${device}`,
      });
      return;
    }
    if (fsType === "btrfs") {
      const tool = this.tool("btrfs");
      if (!tool) return;
      const devices = target.btrfsDevices;
      if (!devices) {
        this.refusals.push(
          `cannot list the devices of the btrfs filesystem at ${mount.mountPoint}: ${target.btrfsError ?? "unknown error"}`,
        );
        return;
      }
      if (devices.length !== 1) {
        this.refusals.push(
          `the btrfs filesystem at ${mount.mountPoint} spans ${devices.length} devices; grow resizes single-device btrfs only`,
        );
        return;
      }
      if (!this.facts.capabilities.sysAdmin) {
        this.refusals.push("btrfs filesystem resize needs CAP_SYS_ADMIN, and this process lacks it");
        return;
      }
      const devid = devices[0]!.devid;
      this.steps.push({
        step,
        commands: [{ argv: [tool, "filesystem", "resize", `${devid}:max`, mount.mountPoint] }],
        description: `grow the btrfs filesystem at ${mount.mountPoint} (device id ${devid}) to the end of ${device}`,
      });
      return;
    }
    // ext2/3/4: resize2fs grows a mounted filesystem online; the kernel cannot shrink one online.
    const tool = this.tool("resize2fs");
    if (!tool) return;
    if (!this.facts.capabilities.sysResource) {
      this.refusals.push(
        `growing the mounted ${fsType} filesystem at ${mount.mountPoint} needs CAP_SYS_RESOURCE (the kernel's online resize answers EPERM without it), and this process lacks it: run grow as full root, outside a container or sandbox that drops it`,
      );
      return;
    }
    this.steps.push({
      step,
      commands: [{ argv: [tool, device] }],
      description: `grow the ${fsType} filesystem on ${device} (mounted at ${mount.mountPoint}) to the end of the device`,
    });
  }
}

function deviceBytes(device: DeviceFacts): number {
  switch (device.kind) {
    case "disk":
      return device.disk.sizeBytes;
    case "partition":
      return device.partition.sizeBytes;
    case "lvm":
      return device.node.sizeBytes;
    case "unsupported":
      return 0;
  }
}

export function planTarget(facts: GrowFacts, target: TargetFacts): MountPlan {
  const plan: MountPlan = {
    requested: target.requested,
    mountPoint: target.mount?.mountPoint ?? null,
    fsType: target.mount?.fsType ?? null,
    device: target.device ? deviceNodePath(target.device) : null,
    steps: [],
    refusals: [],
    notes: [],
  };
  if (target.problem || !target.mount || !target.device) {
    plan.refusals.push(target.problem ?? `${target.requested}: no block device found`);
    return plan;
  }
  if (target.requested !== target.mount.mountPoint) {
    plan.notes.push(`${target.requested} is on the filesystem mounted at ${target.mount.mountPoint}`);
  }
  if (!(GROWABLE_FILESYSTEMS as readonly string[]).includes(target.mount.fsType)) {
    plan.refusals.push(
      `${target.mount.mountPoint} is ${target.mount.fsType}; grow understands ${GROWABLE_FILESYSTEMS.join(", ")}`,
    );
    return plan;
  }
  const planner = new MountPlanner(facts);
  const device = target.device;
  if (device.kind === "unsupported") {
    plan.refusals.push(device.reason);
    return plan;
  }
  const deviceGrows = device.kind === "lvm" ? planner.lvm(device) : planner.underlying(device);
  planner.filesystem(target, deviceBytes(device), deviceGrows);
  return { ...plan, steps: planner.steps, refusals: planner.refusals, notes: [...plan.notes, ...planner.notes] };
}

/** The whole plan, pure, from gathered facts. */
export function planGrow(facts: GrowFacts): MountPlan[] {
  return facts.targets.map((target) => planTarget(facts, target));
}
