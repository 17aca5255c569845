/**
 * Every home directory a user's per-user files (Jupyter runtime files, code-server's
 * heartbeat) may be under: each directory in the home root, each passwd home, and /root.
 *
 * Passwd homes are absolute paths on the machine; they are read under the root that holds
 * etc (dirname of roots.etc: "/" in production, the fixture tree in tests).
 *
 * A home is named as a trusted parent (root's directory) and the home's own name, the form
 * the safe reader (fs/user-file.ts) walks: nothing below the parent is followed if it is a link.
 */
import { readdir } from "node:fs/promises";
import path from "node:path";
import { isMissing } from "../fs/exists.js";
import type { Roots } from "../roots.js";
import type { Users } from "../users.js";
import { errorMessage } from "./types.js";

export interface HomeDir {
  /** trusted/name, for messages. */
  path: string;
  /** The directory the home is in, which root controls (/home, the parent of a passwd home). */
  trusted: string;
  /** The home's own name inside `trusted`. */
  name: string;
}

export interface HomeListing {
  homes: HomeDir[];
  /** Reasons some homes could not be listed (the home root unreadable); empty when all went well. */
  problems: string[];
}

export function filesystemRoot(roots: Roots): string {
  return path.dirname(path.resolve(roots.etc));
}

export function homeDir(absolute: string): HomeDir {
  const resolved = path.resolve(absolute);
  return { path: resolved, trusted: path.dirname(resolved), name: path.basename(resolved) };
}

/**
 * homeDir, remembered: the same homes come back every sample, and resolving their paths again
 * was a visible part of a sample's cost with a hundred homes. Bounded by what root's home root
 * and passwd name; emptied if it ever grows past that bound.
 */
const knownHomes = new Map<string, HomeDir>();
const MAX_KNOWN_HOMES = 16_384;

function knownHomeDir(absolute: string): HomeDir {
  let home = knownHomes.get(absolute);
  if (home === undefined) {
    if (knownHomes.size >= MAX_KNOWN_HOMES) knownHomes.clear();
    home = homeDir(absolute);
    knownHomes.set(absolute, home);
  }
  return home;
}

/** Paths in code-unit order: a stable order for the Report, cheaper than localeCompare. */
export function byPath(a: { path: string }, b: { path: string }): number {
  return a.path < b.path ? -1 : a.path > b.path ? 1 : 0;
}

export async function listHomeDirs(roots: Roots, users: Users): Promise<HomeListing> {
  const homes = new Map<string, HomeDir>();
  const problems: string[] = [];
  const add = (absolute: string): void => {
    const home = knownHomeDir(absolute);
    homes.set(home.path, home);
  };
  try {
    for (const entry of await readdir(roots.home, { withFileTypes: true })) {
      if (entry.isDirectory() || entry.isSymbolicLink()) add(path.join(roots.home, entry.name));
    }
  } catch (error) {
    if (!isMissing(error)) problems.push(`${roots.home}: ${errorMessage(error)}`);
  }
  const fsRoot = filesystemRoot(roots);
  for (const user of users.all()) {
    if (user.home.startsWith("/") && path.resolve(user.home) !== "/") add(path.join(fsRoot, user.home));
  }
  add(path.join(fsRoot, "root"));
  return { homes: [...homes.values()].sort(byPath), problems };
}
