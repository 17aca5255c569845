/**
 * How much of its device a filesystem occupies, read from the filesystem itself; it tells
 * "already fills the device" from "needs growing" before anything is run.
 */

/** `dumpe2fs -h DEVICE`: Block count × Block size. Pure; throws if either line is missing. */
export function parseDumpe2fsSize(text: string): number {
  const count = /^Block count:\s+(\d+)\s*$/m.exec(text);
  const size = /^Block size:\s+(\d+)\s*$/m.exec(text);
  if (!count || !size) throw new Error("dumpe2fs -h: no Block count / Block size lines");
  return Number(count[1]) * Number(size[1]);
}

/** `xfs_info MOUNTPOINT`: the data section's bsize × blocks. Pure. */
export function parseXfsInfoSize(text: string): number {
  const data = /^data\s+=\s+bsize=(\d+)\s+blocks=(\d+)/m.exec(text);
  if (!data) throw new Error("xfs_info: no data section with bsize= and blocks=");
  return Number(data[1]) * Number(data[2]);
}
