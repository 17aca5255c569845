import { lstat, readdir, readlink } from "node:fs/promises";
import path from "node:path";

/**
 * Paths inside the image being sealed, resolved as if `root` were "/" (chroot semantics): an
 * absolute symlink in an offline image (/var/lib/cloud/instance → /var/lib/cloud/instances/x)
 * points inside the image, never at the host running seal.
 */
const MAX_SYMLINK_HOPS = 40;

/**
 * The host path of `imagePath` under `root`. Symlinks along the way are followed inside the
 * root; the last component is followed only when asked (removing a symlink removes the link).
 */
export async function resolveInRoot(root: string, imagePath: string, followLast = false): Promise<string> {
  const pending = imagePath.split("/").filter((part) => part !== "" && part !== ".");
  const resolved: string[] = [];
  let hops = 0;
  while (pending.length > 0) {
    const part = pending.shift()!;
    if (part === "..") {
      resolved.pop();
      continue;
    }
    const candidate = [...resolved, part];
    const isLast = pending.length === 0;
    if (isLast && !followLast) {
      resolved.push(part);
      break;
    }
    let target: string | undefined;
    try {
      const stats = await lstat(path.join(root, ...candidate));
      if (stats.isSymbolicLink()) target = await readlink(path.join(root, ...candidate));
    } catch {
      // Missing: nothing further to follow; the rest is taken as written.
    }
    if (target === undefined) {
      resolved.push(part);
      continue;
    }
    hops += 1;
    if (hops > MAX_SYMLINK_HOPS) throw new Error(`${imagePath}: too many levels of symbolic links`);
    const targetParts = target.split("/").filter((p) => p !== "" && p !== ".");
    if (target.startsWith("/")) resolved.length = 0;
    pending.unshift(...targetParts);
  }
  return path.join(root, ...resolved);
}

export type EntryKind = "file" | "directory" | "symlink" | "other";

/** A path in the image and what is there. */
export interface ImageEntry {
  /** Absolute path inside the image, e.g. /var/lib/cloud/instance. */
  path: string;
  kind: EntryKind;
  size: number;
}

export async function entryAt(root: string, imagePath: string): Promise<ImageEntry | null> {
  try {
    const stats = await lstat(await resolveInRoot(root, imagePath));
    const kind: EntryKind = stats.isSymbolicLink()
      ? "symlink"
      : stats.isFile()
        ? "file"
        : stats.isDirectory()
          ? "directory"
          : "other";
    return { path: imagePath, kind, size: stats.size };
  } catch {
    return null;
  }
}

/** Entries of an image directory, sorted; an absent directory has none. */
export async function listImageDir(root: string, imageDir: string): Promise<ImageEntry[]> {
  let names: string[];
  try {
    names = await readdir(await resolveInRoot(root, imageDir, true));
  } catch {
    return [];
  }
  const entries: ImageEntry[] = [];
  for (const name of names.sort()) {
    const entry = await entryAt(root, path.posix.join(imageDir, name));
    if (entry) entries.push(entry);
  }
  return entries;
}

/** Every entry below an image directory, depth first, not following symlinks. */
export async function walkImageDir(root: string, imageDir: string, limit = 100_000): Promise<ImageEntry[]> {
  const found: ImageEntry[] = [];
  const queue = [imageDir];
  while (queue.length > 0 && found.length < limit) {
    const dir = queue.shift()!;
    for (const entry of await listImageDir(root, dir)) {
      found.push(entry);
      if (entry.kind === "directory") queue.push(entry.path);
    }
  }
  return found;
}
