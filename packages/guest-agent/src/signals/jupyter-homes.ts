/**
 * Every home directory a user's per-user files (Jupyter runtime files, code-server's
 * heartbeat) may be under: each directory in the home root, each passwd home, and /root.
 *
 * Passwd homes are absolute paths on the machine; they are read under the root that holds
 * etc (dirname of roots.etc: "/" in production, the fixture tree in tests).
 */
import { readdir } from "node:fs/promises";
import path from "node:path";
import type { Roots } from "../roots.js";
import type { Users } from "../users.js";
import { errorMessage } from "./types.js";

export interface HomeListing {
  homes: string[];
  /** Reasons some homes could not be listed (the home root unreadable); empty when all went well. */
  problems: string[];
}

export function filesystemRoot(roots: Roots): string {
  return path.dirname(path.resolve(roots.etc));
}

export async function listHomeDirs(roots: Roots, users: Users): Promise<HomeListing> {
  const homes = new Set<string>();
  const problems: string[] = [];
  try {
    for (const entry of await readdir(roots.home, { withFileTypes: true })) {
      if (entry.isDirectory() || entry.isSymbolicLink()) homes.add(path.resolve(roots.home, entry.name));
    }
  } catch (error) {
    if (!isMissing(error)) problems.push(`${roots.home}: ${errorMessage(error)}`);
  }
  const fsRoot = filesystemRoot(roots);
  for (const user of users.all()) {
    if (user.home.startsWith("/") && user.home !== "/") homes.add(path.join(fsRoot, user.home));
  }
  homes.add(path.join(fsRoot, "root"));
  return { homes: [...homes].sort(), problems };
}

/** Absent files and directories are the normal case when scanning every home, not problems. */
export function isMissing(error: unknown): boolean {
  const code = (error as NodeJS.ErrnoException | undefined)?.code;
  return code === "ENOENT" || code === "ENOTDIR";
}
