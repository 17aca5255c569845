import { readdir, readFile, realpath } from "node:fs/promises";
import path from "node:path";
import { exists } from "../fs/exists.js";

/**
 * Block devices as /sys shows them. Every size in /sys/class/block/X/{size,start} counts
 * 512-byte units whatever the device's logical sector size; here everything is bytes.
 */
export interface BlockNode {
  /** Kernel name: vda, vda1, nvme0n1p2, loop0p2, dm-0. */
  name: string;
  /** The node commands are given: /dev/<name>, or /dev/mapper/<name> for device-mapper. */
  devPath: string;
  sizeBytes: number;
}

export interface PartitionNode extends BlockNode {
  number: number;
  startBytes: number;
}

export interface DiskNode extends BlockNode {
  /** Partitions the kernel knows on this disk. */
  partitions: PartitionNode[];
}

export type SysBlockDevice =
  | { kind: "disk"; disk: DiskNode }
  | { kind: "partition"; partition: PartitionNode; disk: DiskNode }
  | { kind: "device-mapper"; node: BlockNode; dmName: string; dmUuid: string; slaves: string[] };

const SECTOR = 512;

async function readTrimmed(file: string): Promise<string> {
  return (await readFile(file, "utf8")).trim();
}

async function readSectorsAsBytes(file: string): Promise<number> {
  const value = Number(await readTrimmed(file));
  if (!Number.isFinite(value)) throw new Error(`${file}: not a number`);
  return value * SECTOR;
}

async function readDisk(sysDir: string): Promise<DiskNode> {
  const name = path.basename(sysDir);
  const partitions: PartitionNode[] = [];
  for (const entry of await readdir(sysDir)) {
    const partitionDir = path.join(sysDir, entry);
    if (!(await exists(path.join(partitionDir, "partition")))) continue;
    partitions.push(await readPartition(partitionDir));
  }
  partitions.sort((a, b) => a.startBytes - b.startBytes);
  return { name, devPath: `/dev/${name}`, sizeBytes: await readSectorsAsBytes(path.join(sysDir, "size")), partitions };
}

async function readPartition(sysDir: string): Promise<PartitionNode> {
  const name = path.basename(sysDir);
  return {
    name,
    devPath: `/dev/${name}`,
    number: Number(await readTrimmed(path.join(sysDir, "partition"))),
    startBytes: await readSectorsAsBytes(path.join(sysDir, "start")),
    sizeBytes: await readSectorsAsBytes(path.join(sysDir, "size")),
  };
}

/** Reads the device whose /sys directory is `sysDir` (a resolved path under /sys/devices). */
export async function readSysBlockDir(sysDir: string): Promise<SysBlockDevice> {
  const name = path.basename(sysDir);
  if (await exists(path.join(sysDir, "partition"))) {
    // A partition's directory sits inside its disk's directory: no name parsing needed.
    return { kind: "partition", partition: await readPartition(sysDir), disk: await readDisk(path.dirname(sysDir)) };
  }
  if (await exists(path.join(sysDir, "dm"))) {
    const dmName = await readTrimmed(path.join(sysDir, "dm", "name"));
    const dmUuid = await readTrimmed(path.join(sysDir, "dm", "uuid")).catch(() => "");
    const slaves = await readdir(path.join(sysDir, "slaves")).catch(() => [] as string[]);
    return {
      kind: "device-mapper",
      node: { name, devPath: `/dev/mapper/${dmName}`, sizeBytes: await readSectorsAsBytes(path.join(sysDir, "size")) },
      dmName,
      dmUuid,
      slaves: slaves.sort(),
    };
  }
  return { kind: "disk", disk: await readDisk(sysDir) };
}

export async function readBlockByNumber(sysRoot: string, major: number, minor: number): Promise<SysBlockDevice> {
  return readSysBlockDir(await realpath(path.join(sysRoot, "dev", "block", `${major}:${minor}`)));
}

export async function readBlockByName(sysRoot: string, name: string): Promise<SysBlockDevice> {
  return readSysBlockDir(await realpath(path.join(sysRoot, "class", "block", name)));
}

/**
 * The kernel name behind a mount source such as /dev/loop0p2 or /dev/mapper/vg-root, for
 * filesystems (btrfs) whose mountinfo carries an anonymous device number instead of the real one.
 */
export async function kernelNameOfSource(source: string, devRoot: string): Promise<string | undefined> {
  if (!source.startsWith("/dev/")) return undefined;
  const underDevRoot = path.join(devRoot, source.slice("/dev/".length));
  try {
    return path.basename(await realpath(underDevRoot));
  } catch {
    return path.basename(source);
  }
}
