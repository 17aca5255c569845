/** /proc/diskstats: I/O each block device has done since boot. */

/** The kernel counts diskstats sectors in 512-byte units whatever the device's sector size. */
export const DISKSTATS_SECTOR_BYTES = 512;

export interface DiskCounters {
  name: string;
  readBytes: number;
  writtenBytes: number;
}

/**
 * Parses /proc/diskstats. Pure. Each line is "major minor name" and at least
 * 11 counters (14 fields; 18 since Linux 4.18, 20 since 5.5): sectors read is
 * field 6, sectors written field 10.
 */
export function parseDiskstats(text: string): DiskCounters[] {
  const disks: DiskCounters[] = [];
  for (const [index, line] of text.split("\n").entries()) {
    if (line.trim() === "") continue;
    const fields = line.trim().split(/\s+/);
    const name = fields[2] ?? "";
    if (fields.length < 14)
      throw new Error(`line ${index + 1} (${JSON.stringify(name)}) has ${fields.length} fields, expected at least 14`);
    disks.push({
      name,
      readBytes: sectors(fields[5]!, name) * DISKSTATS_SECTOR_BYTES,
      writtenBytes: sectors(fields[9]!, name) * DISKSTATS_SECTOR_BYTES,
    });
  }
  return disks;
}

function sectors(field: string, name: string): number {
  const value = Number(field);
  if (!/^\d+$/.test(field) || !Number.isFinite(value))
    throw new Error(`${name}: not a sector count: ${JSON.stringify(field)}`);
  return value;
}
