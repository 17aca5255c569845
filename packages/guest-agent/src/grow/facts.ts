import { readFile, realpath, statfs } from "node:fs/promises";
import path from "node:path";
import { parseBtrfsShow, type BtrfsDevice } from "./btrfs.js";
import { parseEffectiveCapabilities, type GrowCapabilities } from "./capabilities.js";
import { describeFailure, type CommandRunner } from "./exec.js";
import { parseDumpe2fsSize, parseXfsInfoSize } from "./fs-size.js";
import { LVS_FIELDS, PVS_FIELDS, parseLvsJson, parsePvsJson, type LogicalVolume, type PhysicalVolume } from "./lvm.js";
import { mountContaining, parseMountInfo, type MountEntry } from "./mountinfo.js";
import { parseSfdiskJson, type PartitionTable } from "./partition-table.js";
import {
  kernelNameOfSource,
  readBlockByName,
  readBlockByNumber,
  type BlockNode,
  type DiskNode,
  type PartitionNode,
  type SysBlockDevice,
} from "./sysblock.js";
import { missingToolMessage, type ToolPaths } from "./tools.js";

/** Where a filesystem lives, as far as grow needs to know. */
export type DeviceFacts =
  | { kind: "disk"; disk: DiskNode }
  | {
      kind: "partition";
      partition: PartitionNode;
      disk: DiskNode;
      table: PartitionTable | null;
      tableError: string | null;
    }
  | {
      kind: "lvm";
      node: BlockNode;
      dmName: string;
      lv: LogicalVolume | null;
      lvError: string | null;
      physicalVolumes: PhysicalVolumeFacts[];
    }
  | { kind: "unsupported"; name: string; reason: string };

export interface PhysicalVolumeFacts {
  device: DeviceFacts;
  pv: PhysicalVolume | null;
  pvError: string | null;
}

export interface TargetFacts {
  /** The path asked for (--mount), before resolving. */
  requested: string;
  mount: MountEntry | null;
  device: DeviceFacts | null;
  /** Devices of a btrfs filesystem; null for other types. */
  btrfsDevices: BtrfsDevice[] | null;
  btrfsError: string | null;
  /** Total size as statfs reports it (what df shows). */
  filesystemBytes: number | null;
  /** How much of its device the filesystem occupies, from the filesystem's own records. */
  filesystemOnDeviceBytes: number | null;
  filesystemSizeError: string | null;
  /** Why the rest could not be found; planning refuses the target with it. */
  problem: string | null;
}

export interface GrowFacts {
  targets: TargetFacts[];
  tools: ToolPaths;
  capabilities: GrowCapabilities;
}

export interface GrowEnvironment {
  procRoot: string;
  sysRoot: string;
  devRoot: string;
  tools: ToolPaths;
  run: CommandRunner;
}

function message(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

export async function filesystemBytes(mountPoint: string): Promise<number | null> {
  try {
    const stats = await statfs(mountPoint);
    return stats.blocks * stats.bsize;
  } catch {
    return null;
  }
}

async function readPartitionTable(
  env: GrowEnvironment,
  disk: DiskNode,
): Promise<{ table: PartitionTable | null; tableError: string | null }> {
  if (!env.tools.sfdisk) return { table: null, tableError: "sfdisk is not installed (Debian package fdisk)" };
  const argv = [env.tools.sfdisk, "--json", disk.devPath];
  const result = await env.run(argv);
  if (result.exitCode !== 0) return { table: null, tableError: describeFailure(argv, result) };
  try {
    return { table: parseSfdiskJson(result.stdout), tableError: null };
  } catch (error) {
    return { table: null, tableError: message(error) };
  }
}

async function lvmReport<T>(
  env: GrowEnvironment,
  tool: "lvs" | "pvs",
  args: string[],
  parse: (text: string) => T,
): Promise<T | string> {
  const binary = env.tools[tool];
  if (!binary) return `${tool} is not installed (Debian package lvm2)`;
  const argv = [binary, "--reportformat", "json", "--units", "b", "--nosuffix", ...args];
  const result = await env.run(argv);
  if (result.exitCode !== 0) return describeFailure(argv, result);
  try {
    return parse(result.stdout);
  } catch (error) {
    return message(error);
  }
}

/** What grow needs to know about one block device as /sys shows it (table, LVM volumes). */
export async function deviceFacts(env: GrowEnvironment, sys: SysBlockDevice, depth = 0): Promise<DeviceFacts> {
  switch (sys.kind) {
    case "disk":
      return { kind: "disk", disk: sys.disk };
    case "partition":
      return {
        kind: "partition",
        partition: sys.partition,
        disk: sys.disk,
        ...(await readPartitionTable(env, sys.disk)),
      };
    case "device-mapper": {
      if (!sys.dmUuid.startsWith("LVM-")) {
        const target = sys.dmUuid.split("-")[0] || "unknown";
        return {
          kind: "unsupported",
          name: sys.node.name,
          reason: `device-mapper device ${sys.dmName} is not LVM (uuid prefix ${target}); grow understands LVM only`,
        };
      }
      if (depth > 0)
        return {
          kind: "unsupported",
          name: sys.node.name,
          reason: `LVM stacked on device-mapper (${sys.dmName}) is not understood`,
        };
      const lvs = await lvmReport(env, "lvs", ["--segments", "-o", LVS_FIELDS], parseLvsJson);
      const lv =
        typeof lvs === "string" ? null : (lvs.find((candidate) => candidate.dmPath === sys.node.devPath) ?? null);
      const lvError = typeof lvs === "string" ? lvs : lv ? null : `lvs lists no logical volume at ${sys.node.devPath}`;
      const physicalVolumes: PhysicalVolumeFacts[] = [];
      for (const slave of sys.slaves) {
        let device: DeviceFacts;
        try {
          device = await deviceFacts(env, await readBlockByName(env.sysRoot, slave), depth + 1);
        } catch (error) {
          device = {
            kind: "unsupported",
            name: slave,
            reason: `cannot read /sys/class/block/${slave}: ${message(error)}`,
          };
        }
        const pvPath =
          device.kind === "partition"
            ? device.partition.devPath
            : device.kind === "disk"
              ? device.disk.devPath
              : `/dev/${slave}`;
        const pvs = await lvmReport(env, "pvs", ["-o", PVS_FIELDS, pvPath], parsePvsJson);
        const pv = typeof pvs === "string" ? null : (pvs.find((candidate) => candidate.path === pvPath) ?? null);
        const pvError = typeof pvs === "string" ? pvs : pv ? null : `pvs lists no physical volume at ${pvPath}`;
        physicalVolumes.push({ device, pv, pvError });
      }
      return { kind: "lvm", node: sys.node, dmName: sys.dmName, lv, lvError, physicalVolumes };
    }
  }
}

async function btrfsFacts(
  env: GrowEnvironment,
  mountPoint: string,
): Promise<{ btrfsDevices: BtrfsDevice[] | null; btrfsError: string | null }> {
  if (!env.tools.btrfs)
    return { btrfsDevices: null, btrfsError: "btrfs is not installed (Debian package btrfs-progs)" };
  const argv = [env.tools.btrfs, "filesystem", "show", "--raw", mountPoint];
  const result = await env.run(argv);
  if (result.exitCode !== 0) return { btrfsDevices: null, btrfsError: describeFailure(argv, result) };
  return { btrfsDevices: parseBtrfsShow(result.stdout), btrfsError: null };
}

export function deviceNodePath(device: DeviceFacts): string {
  switch (device.kind) {
    case "disk":
      return device.disk.devPath;
    case "partition":
      return device.partition.devPath;
    case "lvm":
      return device.node.devPath;
    case "unsupported":
      return `/dev/${device.name}`;
  }
}

async function readFilesystemSize(
  env: GrowEnvironment,
  tool: "dumpe2fs" | "xfs_info",
  args: string[],
  parse: (text: string) => number,
): Promise<{ filesystemOnDeviceBytes: number | null; filesystemSizeError: string | null }> {
  const binary = env.tools[tool];
  if (!binary) return { filesystemOnDeviceBytes: null, filesystemSizeError: missingToolMessage(tool) };
  const argv = [binary, ...args];
  const result = await env.run(argv);
  if (result.exitCode !== 0)
    return { filesystemOnDeviceBytes: null, filesystemSizeError: describeFailure(argv, result) };
  try {
    return { filesystemOnDeviceBytes: parse(result.stdout), filesystemSizeError: null };
  } catch (error) {
    return { filesystemOnDeviceBytes: null, filesystemSizeError: message(error) };
  }
}

async function filesystemSizeFacts(env: GrowEnvironment, facts: TargetFacts): Promise<Partial<TargetFacts>> {
  const mount = facts.mount!;
  const device = facts.device!;
  switch (mount.fsType) {
    case "ext2":
    case "ext3":
    case "ext4":
      return readFilesystemSize(env, "dumpe2fs", ["-h", deviceNodePath(device)], parseDumpe2fsSize);
    case "xfs":
      return readFilesystemSize(env, "xfs_info", [mount.mountPoint], parseXfsInfoSize);
    case "btrfs": {
      const devices = facts.btrfsDevices ?? [];
      return devices.length === 1
        ? { filesystemOnDeviceBytes: devices[0]!.sizeBytes, filesystemSizeError: null }
        : {
            filesystemOnDeviceBytes: null,
            filesystemSizeError: facts.btrfsError ?? `btrfs over ${devices.length} devices`,
          };
    }
    default:
      return {};
  }
}

async function targetFacts(env: GrowEnvironment, mounts: MountEntry[], requested: string): Promise<TargetFacts> {
  const empty: TargetFacts = {
    requested,
    mount: null,
    device: null,
    btrfsDevices: null,
    btrfsError: null,
    filesystemBytes: null,
    filesystemOnDeviceBytes: null,
    filesystemSizeError: null,
    problem: null,
  };
  let resolved: string;
  try {
    resolved = await realpath(requested);
  } catch (error) {
    return { ...empty, problem: `${requested}: ${message(error)}` };
  }
  const mount = mountContaining(mounts, resolved);
  if (!mount) return { ...empty, problem: `${requested}: no mount holds it` };
  const facts: TargetFacts = { ...empty, mount, filesystemBytes: await filesystemBytes(mount.mountPoint) };
  try {
    if (mount.major !== 0) {
      facts.device = await deviceFacts(env, await readBlockByNumber(env.sysRoot, mount.major, mount.minor));
    } else {
      // btrfs (and network or virtual filesystems) report an anonymous device number.
      const name = await kernelNameOfSource(mount.source, env.devRoot);
      if (!name)
        return {
          ...facts,
          problem: `${mount.mountPoint} (${mount.fsType} from ${mount.source}) is not on a block device`,
        };
      facts.device = await deviceFacts(env, await readBlockByName(env.sysRoot, name));
    }
  } catch (error) {
    return {
      ...facts,
      problem: `cannot find the block device of ${mount.mountPoint} (${mount.source}): ${message(error)}`,
    };
  }
  if (facts.device.kind === "unsupported") return facts;
  if (mount.fsType === "btrfs") Object.assign(facts, await btrfsFacts(env, mount.mountPoint));
  Object.assign(facts, await filesystemSizeFacts(env, facts));
  return facts;
}

/** Gathers everything the planner needs for each requested mount. Never throws for one bad mount. */
export async function gatherGrowFacts(env: GrowEnvironment, requestedMounts: string[]): Promise<GrowFacts> {
  const mounts = parseMountInfo(await readFile(path.join(env.procRoot, "self", "mountinfo"), "utf8"));
  const capabilities = parseEffectiveCapabilities(
    await readFile(path.join(env.procRoot, "self", "status"), "utf8").catch(() => ""),
  );
  const targets: TargetFacts[] = [];
  const seen = new Set<string>();
  for (const requested of requestedMounts) {
    const facts = await targetFacts(env, mounts, requested);
    // Two --mount paths on one filesystem grow it once.
    if (facts.mount) {
      if (seen.has(facts.mount.mountPoint)) continue;
      seen.add(facts.mount.mountPoint);
    }
    targets.push(facts);
  }
  return { targets, tools: env.tools, capabilities };
}
