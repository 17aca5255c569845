/** /proc/PID/stat and /proc/PID/status: one process's CPU time, parent, start and owner. */

/**
 * USER_HZ: the unit of every time in /proc/PID/stat and /proc/stat. It is 100 on
 * every Linux architecture the agent runs on (the kernel fixes it for userspace
 * whatever CONFIG_HZ is); Node cannot call sysconf(_SC_CLK_TCK) without a native addon.
 */
export const CLOCK_TICKS_PER_SECOND = 100;

/** The highest proc(5) field number of /proc/PID/stat that parsePidStat reads (starttime). */
const LAST_FIELD_READ = 22;

export interface ProcessStat {
  pid: number;
  /** The kernel's name for the process (15 characters at most), as /proc/PID/comm has it. */
  comm: string;
  ppid: number;
  /** utime + stime: CPU the process's own threads used, in ticks. */
  ownTicks: number;
  /** cutime + cstime: CPU of children it has waited for, in ticks. */
  reapedChildTicks: number;
  /** Start time in ticks after boot; with pid it identifies one process across samples. */
  startTicks: number;
}

/**
 * Parses /proc/PID/stat. Pure. The command name sits between the first "(" and
 * the last ")" and may itself hold spaces and parentheses.
 */
export function parsePidStat(text: string): ProcessStat {
  const open = text.indexOf("(");
  const close = text.lastIndexOf(")");
  if (open < 0 || close < open) throw new Error("no (comm) field");
  const pid = Number(text.slice(0, open).trim());
  if (!Number.isInteger(pid) || pid <= 0) throw new Error(`not a pid: ${JSON.stringify(text.slice(0, open))}`);
  // Fields after ")" start at field 3 (state); field N of proc(5) is rest[N - 3]. Only fields up
  // to 22 (starttime) are read: splitting no further than that costs a third of the whole line's
  // split, and this runs for every process every sample.
  const rest = text
    .slice(close + 1)
    .trim()
    .split(/\s+/, LAST_FIELD_READ - 2);
  if (rest.length < LAST_FIELD_READ - 2)
    throw new Error(`pid ${pid}: ${rest.length + 2} fields, expected at least ${LAST_FIELD_READ}`);
  const numberAt = (field: number): number => {
    const raw = rest[field - 3] ?? "";
    const value = Number(raw);
    // Every field read here (ppid, CPU times, start time) is a count: a sign means a damaged line.
    if (!/^\d+$/.test(raw) || !Number.isSafeInteger(value))
      throw new Error(`pid ${pid}: field ${field} is not a non-negative number: ${JSON.stringify(raw.slice(0, 24))}`);
    return value;
  };
  return {
    pid,
    comm: text.slice(open + 1, close),
    ppid: numberAt(4),
    ownTicks: numberAt(14) + numberAt(15),
    reapedChildTicks: numberAt(16) + numberAt(17),
    startTicks: numberAt(22),
  };
}

/**
 * The effective uid from /proc/PID/status ("Uid: real effective saved fs"), the
 * one ps and top show as the process's user. Pure.
 */
export function parseStatusUid(text: string): number {
  const match = /^Uid:\s+(\d+)\s+(\d+)/m.exec(text);
  if (!match) throw new Error("no Uid line");
  return Number(match[2]);
}
