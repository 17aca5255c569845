import { readFileSync, statSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { under, type Roots } from "./roots.js";

export interface UserEntry {
  name: string;
  uid: number;
  gid: number;
  home: string;
  shell: string;
}

/** uid ↔ name, and which accounts are people rather than system accounts. */
export interface Users {
  byUid(uid: number): UserEntry | undefined;
  byName(name: string): UserEntry | undefined;
  all(): UserEntry[];
  /** Accounts that log in as people: uid ≥ 1000 (Debian's UID_MIN) and not nobody. */
  isHuman(uid: number): boolean;
}

export const FIRST_HUMAN_UID = 1000;
export const NOBODY_UID = 65534;
export const NOBODY_NAME = "nobody";

/** Parses /etc/passwd. Pure; malformed lines are skipped. */
export function parsePasswd(text: string): UserEntry[] {
  const entries: UserEntry[] = [];
  for (const line of text.split("\n")) {
    if (line.trim() === "" || line.startsWith("#")) continue;
    const fields = line.split(":");
    if (fields.length < 7) continue;
    const uid = Number(fields[2]);
    const gid = Number(fields[3]);
    if (!Number.isInteger(uid) || !Number.isInteger(gid)) continue;
    entries.push({ name: fields[0]!, uid, gid, home: fields[5]!, shell: fields[6]! });
  }
  return entries;
}

export function usersFrom(entries: UserEntry[]): Users {
  const byUid = new Map(entries.map((e) => [e.uid, e]));
  const byName = new Map(entries.map((e) => [e.name, e]));
  return {
    byUid: (uid) => byUid.get(uid),
    byName: (name) => byName.get(name),
    all: () => [...entries],
    isHuman: (uid) => uid >= FIRST_HUMAN_UID && uid !== NOBODY_UID,
  };
}

/** Reads <etc>/passwd; an unreadable file gives an empty table (names then show as uids). */
export async function loadUsers(roots: Roots): Promise<Users> {
  try {
    return usersFrom(parsePasswd(await readFile(under(roots.etc, "passwd"), "utf8")));
  } catch {
    return usersFrom([]);
  }
}

/** The passwd table as of the last change of the file. */
export interface UsersCache {
  /** The current table: one stat of the file, and a read only when it changed since the last call. */
  current(): Users;
}

/**
 * <etc>/passwd, re-read only when it changes. The file changes when accounts do,
 * not every sample, and parsing it each sample cost 0.3–0.7 ms of CPU
 * (benchmark 1's profile: 4 % of the agent's JavaScript time). Changed means a
 * different inode (useradd and vipw replace the file), size, mtime or ctime.
 * An unreadable file gives an empty table, as loadUsers does, and is tried
 * again on the next call.
 */
export function createUsersCache(roots: Roots): UsersCache {
  const file = under(roots.etc, "passwd");
  let version: string | undefined;
  let users = usersFrom([]);
  return {
    current(): Users {
      let seen: string;
      try {
        const info = statSync(file);
        seen = `${info.ino}:${info.size}:${info.mtimeMs}:${info.ctimeMs}`;
        if (seen === version) return users;
        users = usersFrom(parsePasswd(readFileSync(file, "utf8")));
        version = seen;
      } catch {
        users = usersFrom([]);
        version = undefined;
      }
      return users;
    },
  };
}
