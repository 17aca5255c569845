import { errorMessage } from "@ws/protocol";
/** What `sfdisk --json DISK` says about a disk's partition table. */
export interface PartitionTable {
  label: "gpt" | "dos" | string;
  /** Logical sector size in bytes. */
  sectorSize: number;
  partitions: TablePartition[];
}

export interface TablePartition {
  /** Device node as sfdisk names it, e.g. /dev/vda1, /dev/loop0p2. */
  node: string;
  /** Partition number, from the node name's trailing digits. */
  number: number;
  /** Start and size in bytes (sfdisk reports sectors of `sectorSize`). */
  startBytes: number;
  sizeBytes: number;
  /** GPT type GUID or MBR type code ("5", "f", "85" are extended partitions). */
  type: string;
}

const MBR_EXTENDED_TYPES = new Set(["5", "f", "85"]);

export function isExtendedPartition(table: PartitionTable, partition: TablePartition): boolean {
  return table.label === "dos" && MBR_EXTENDED_TYPES.has(partition.type.toLowerCase());
}

/** Parses `sfdisk --json` output. Pure; throws with a clear message on anything else. */
export function parseSfdiskJson(text: string): PartitionTable {
  let document: unknown;
  try {
    document = JSON.parse(text);
  } catch (error) {
    throw new Error(`sfdisk --json: not JSON (${errorMessage(error)})`);
  }
  const table = (document as { partitiontable?: unknown })?.partitiontable as Record<string, unknown> | undefined;
  if (!table || typeof table !== "object") throw new Error("sfdisk --json: no partitiontable object");
  const label = typeof table.label === "string" ? table.label : "";
  if (label === "") throw new Error("sfdisk --json: partition table has no label");
  const sectorSize = typeof table.sectorsize === "number" && table.sectorsize > 0 ? table.sectorsize : 512;
  const rawPartitions = Array.isArray(table.partitions) ? table.partitions : [];
  const partitions: TablePartition[] = [];
  for (const raw of rawPartitions as Array<Record<string, unknown>>) {
    const node = typeof raw.node === "string" ? raw.node : "";
    const number = Number(/(\d+)$/.exec(node)?.[1]);
    if (!Number.isInteger(number) || typeof raw.start !== "number" || typeof raw.size !== "number") {
      throw new Error(`sfdisk --json: unreadable partition entry ${JSON.stringify(raw)}`);
    }
    partitions.push({
      node,
      number,
      startBytes: raw.start * sectorSize,
      sizeBytes: raw.size * sectorSize,
      type: typeof raw.type === "string" ? raw.type : "",
    });
  }
  return { label, sectorSize, partitions };
}
