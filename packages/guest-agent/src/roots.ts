import path from "node:path";

/**
 * Where the agent reads the machine from. Tests point these at fixture trees;
 * in production they are "/proc", "/sys", "/dev", "/run", "/home", "/etc", "/".
 */
export interface Roots {
  proc: string;
  sys: string;
  dev: string;
  /** /run: utmp, systemd inhibitors, user runtime dirs (/run/user/UID). */
  run: string;
  /** Parent of users' home directories. */
  home: string;
  /** /etc: passwd for uid → user names. */
  etc: string;
  /** The agent's own state directory (leases, identity). */
  state: string;
}

export const defaultRoots: Roots = {
  proc: "/proc",
  sys: "/sys",
  dev: "/dev",
  run: "/run",
  home: "/home",
  etc: "/etc",
  state: "/var/lib/ws-agent",
};

/** Joins a path that is absolute on the real machine under a configurable root. */
export function under(root: string, ...segments: string[]): string {
  return path.join(root, ...segments);
}
