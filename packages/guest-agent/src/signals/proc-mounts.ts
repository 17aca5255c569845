/** /proc/self/mounts: which filesystem is mounted where. */

export interface MountEntry {
  device: string;
  mountPoint: string;
  fsType: string;
  options: string;
}

/**
 * Parses /proc/self/mounts (fstab format). Pure. The kernel escapes space, tab,
 * newline and backslash in names as octal (\040, \011, \012, \134).
 */
export function parseMounts(text: string): MountEntry[] {
  const entries: MountEntry[] = [];
  for (const [index, line] of text.split("\n").entries()) {
    if (line.trim() === "") continue;
    const fields = line.trim().split(/\s+/);
    if (fields.length < 4) throw new Error(`line ${index + 1} has ${fields.length} fields, expected at least 4`);
    const [device, mountPoint, fsType, options] = fields.map(unescapeOctal) as [string, string, string, string];
    if (!mountPoint.startsWith("/"))
      throw new Error(`line ${index + 1}: mount point is not absolute: ${JSON.stringify(mountPoint)}`);
    entries.push({ device, mountPoint, fsType, options });
  }
  return entries;
}

/**
 * The mount that holds a path: the longest mount point that is the path or one
 * of its parent directories; of equal ones the last, which hides the earlier.
 * Pure; the path is taken as written (symlinks are not resolved).
 */
export function mountHolding(entries: MountEntry[], absolutePath: string): MountEntry | undefined {
  let best: MountEntry | undefined;
  for (const entry of entries) {
    if (!contains(entry.mountPoint, absolutePath)) continue;
    if (best === undefined || entry.mountPoint.length >= best.mountPoint.length) best = entry;
  }
  return best;
}

function contains(mountPoint: string, absolutePath: string): boolean {
  if (mountPoint === "/" || mountPoint === absolutePath) return true;
  return absolutePath.startsWith(mountPoint.endsWith("/") ? mountPoint : `${mountPoint}/`);
}

function unescapeOctal(field: string): string {
  return field.replace(/\\([0-7]{3})/g, (_, octal: string) => String.fromCharCode(parseInt(octal, 8)));
}
