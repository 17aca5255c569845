/** One device of a mounted btrfs filesystem, from `btrfs filesystem show --raw MOUNTPOINT`. */
export interface BtrfsDevice {
  devid: number;
  sizeBytes: number;
  path: string;
}

const DEVICE_LINE = /^\s*devid\s+(\d+)\s+size\s+(\d+)\s+used\s+\d+\s+path\s+(\S+)/;

/** Pure. Lines such as "*** Some devices missing" are ignored; the caller checks the count. */
export function parseBtrfsShow(text: string): BtrfsDevice[] {
  const devices: BtrfsDevice[] = [];
  for (const line of text.split("\n")) {
    const match = DEVICE_LINE.exec(line);
    if (match) devices.push({ devid: Number(match[1]), sizeBytes: Number(match[2]), path: match[3]! });
  }
  return devices;
}
