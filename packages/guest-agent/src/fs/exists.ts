// Whether something is there, where missing is the ordinary answer (scanning homes, checking a
// process): a path that is certainly absent is absent; one that cannot be read counts as present
// (missing data is not absence).
import { stat } from "node:fs";
import { under } from "../roots.js";

/** ENOENT or ENOTDIR: the path is not there. */
export function isMissing(error: unknown): boolean {
  const code = (error as NodeJS.ErrnoException | undefined)?.code;
  return code === "ENOENT" || code === "ENOTDIR";
}

/**
 * False only when the path is certainly not there; an unreadable path counts as present. The
 * callback form: a gone process's /proc/PID (a stale runtime file's, every sample) costs no exception.
 */
export function exists(file: string): Promise<boolean> {
  return new Promise((resolve) => stat(file, (error) => resolve(error === null || !isMissing(error))));
}

/** Whether process `pid` runs, read from `procRoot` (the agent's roots.proc). */
export async function processExists(procRoot: string, pid: number): Promise<boolean> {
  if (!Number.isInteger(pid) || pid <= 0) return false;
  return exists(under(procRoot, String(pid)));
}
