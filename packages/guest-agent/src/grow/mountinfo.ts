/**
 * /proc/self/mountinfo rather than /proc/self/mounts: it carries each mount's device number
 * (major:minor), which finds the block device even when the source reads "/dev/root".
 */
export interface MountEntry {
  mountId: number;
  parentId: number;
  major: number;
  minor: number;
  /** The path inside the filesystem that is mounted (a bind mount or btrfs subvolume shows here). */
  root: string;
  mountPoint: string;
  fsType: string;
  /** What the kernel was told to mount, e.g. /dev/vda1, /dev/mapper/vg-root, tmpfs. */
  source: string;
}

const OCTAL_ESCAPE = /\\([0-7]{3})/g;

/** mountinfo escapes space, tab, newline and backslash as \ooo. */
export function unescapeMountField(field: string): string {
  return field.replace(OCTAL_ESCAPE, (_, octal: string) => String.fromCharCode(parseInt(octal, 8)));
}

/** Parses /proc/<pid>/mountinfo. Pure; lines it cannot read are skipped. */
export function parseMountInfo(text: string): MountEntry[] {
  const entries: MountEntry[] = [];
  for (const line of text.split("\n")) {
    if (line.trim() === "") continue;
    const separator = line.indexOf(" - ");
    if (separator < 0) continue;
    const before = line.slice(0, separator).split(" ");
    const after = line.slice(separator + 3).split(" ");
    if (before.length < 6 || after.length < 2) continue;
    const [mountId, parentId, devNumber, root, mountPoint] = before;
    const [major, minor] = (devNumber ?? "").split(":").map(Number);
    if (!Number.isInteger(Number(mountId)) || !Number.isInteger(major) || !Number.isInteger(minor)) continue;
    entries.push({
      mountId: Number(mountId),
      parentId: Number(parentId),
      major: major!,
      minor: minor!,
      root: unescapeMountField(root!),
      mountPoint: unescapeMountField(mountPoint!),
      fsType: after[0]!,
      source: unescapeMountField(after[1]!),
    });
  }
  return entries;
}

/**
 * The mount that holds `path` (an absolute, symlink-free path): the longest mount point that is
 * a prefix of it; among equal ones the last, because a later mount hides an earlier one.
 */
export function mountContaining(entries: MountEntry[], path: string): MountEntry | undefined {
  let best: MountEntry | undefined;
  for (const entry of entries) {
    if (!isPathWithin(path, entry.mountPoint)) continue;
    if (!best || entry.mountPoint.length >= best.mountPoint.length) best = entry;
  }
  return best;
}

function isPathWithin(path: string, mountPoint: string): boolean {
  if (mountPoint === "/") return path.startsWith("/");
  return path === mountPoint || path.startsWith(`${mountPoint}/`);
}
