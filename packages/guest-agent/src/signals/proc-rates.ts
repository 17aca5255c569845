/**
 * Turning two readings of /proc counters into rates. Pure: every reading comes
 * in, with the seconds between them; nothing here reads a clock or a file.
 */
import type { MessageInitShape } from "@bufbuild/protobuf";
import type { ProcessUsageSchema } from "@ws/protocol";
import type { Users } from "../users.js";
import { CLOCK_TICKS_PER_SECOND, type ProcessStat } from "./proc-pid.js";
import type { CpuTimes } from "./proc-stat.js";

export type ProcessUsageInit = MessageInitShape<typeof ProcessUsageSchema>;

/** How many processes a Report names, busiest first. */
export const TOP_PROCESS_LIMIT = 10;

/** Share of CPU time spent busy between two readings; undefined when the counters did not move forward. */
export function cpuBusyRatio(previous: CpuTimes, current: CpuTimes): number | undefined {
  const total = current.totalTicks - previous.totalTicks;
  const busy = current.busyTicks - previous.busyTicks;
  if (total <= 0 || busy < 0) return undefined;
  return Math.min(1, busy / total);
}

/**
 * Per second, the sum of how much each named counter grew. A name in only one
 * reading adds nothing (hot-plugged, removed), nor does a counter that went
 * backwards (the device was re-created and started again at zero).
 */
export function summedRate(
  previous: ReadonlyMap<string, number>,
  current: ReadonlyMap<string, number>,
  seconds: number,
): number | undefined {
  if (!(seconds > 0)) return undefined;
  let growth = 0;
  for (const [name, value] of current) {
    const before = previous.get(name);
    if (before !== undefined && value >= before) growth += value - before;
  }
  return growth / seconds;
}

/** The process table at one moment. */
export interface ProcessSnapshot {
  /**
   * Seconds since boot, read before the table was listed: a process missing
   * from the listing then always started after this moment.
   */
  uptimeSeconds: number;
  processes: ProcessStat[];
}

export interface ProcessCpu {
  process: ProcessStat;
  /** CPU ticks the process used between the two snapshots. */
  ticks: number;
}

const identity = (process: ProcessStat): string => `${process.pid}@${process.startTicks}`;

/**
 * CPU each process of the current snapshot used since the previous one.
 *
 * - Seen in both: the growth of its own utime + stime.
 * - Started after the previous snapshot: all of its CPU so far.
 * - Children that lived and died between the snapshots appear nowhere else: the
 *   kernel adds their CPU to the parent's cutime/cstime when it reaps them, so
 *   that growth counts for the parent, less the CPU already counted for children
 *   seen in the previous snapshot that have gone since (their last reading).
 *
 * A pid whose start time changed is a new process that reused the number.
 */
export function processCpuTicks(previous: ProcessSnapshot, current: ProcessSnapshot): ProcessCpu[] {
  const before = new Map(previous.processes.map((process) => [identity(process), process]));
  const stillHere = new Set(current.processes.map(identity));
  const countedForGoneChildren = new Map<number, number>();
  for (const [key, process] of before) {
    if (stillHere.has(key)) continue;
    const counted = process.ownTicks + process.reapedChildTicks;
    countedForGoneChildren.set(process.ppid, (countedForGoneChildren.get(process.ppid) ?? 0) + counted);
  }

  const usage: ProcessCpu[] = [];
  for (const process of current.processes) {
    const earlier = before.get(identity(process));
    if (earlier !== undefined) {
      const own = Math.max(0, process.ownTicks - earlier.ownTicks);
      const unseenChildren =
        process.reapedChildTicks - earlier.reapedChildTicks - (countedForGoneChildren.get(process.pid) ?? 0);
      usage.push({ process, ticks: own + Math.max(0, unseenChildren) });
    } else if (process.startTicks / CLOCK_TICKS_PER_SECOND >= previous.uptimeSeconds) {
      usage.push({ process, ticks: process.ownTicks + process.reapedChildTicks });
    }
    // Otherwise it was running at the previous snapshot but not in it (unreadable then): unknown, left out.
  }
  return usage;
}

export interface OwnedProcessCpu extends ProcessCpu {
  uid: number;
}

export interface UserProcessCpu {
  /** CPU of processes of non-system users over the interval, in cores. */
  userProcessCpuCores: number;
  topProcesses: ProcessUsageInit[];
}

/**
 * The CPU of people's processes (Users.isHuman) over an interval of
 * `intervalSeconds`: their sum in cores and the busiest, with user, command and age.
 */
export function userProcessCpu(
  usage: OwnedProcessCpu[],
  users: Users,
  intervalSeconds: number,
  uptimeSeconds: number,
  limit = TOP_PROCESS_LIMIT,
): UserProcessCpu {
  const cores = (ticks: number): number => ticks / CLOCK_TICKS_PER_SECOND / intervalSeconds;
  const human = usage.filter((entry) => entry.ticks > 0 && users.isHuman(entry.uid));
  const busiest = [...human].sort((a, b) => b.ticks - a.ticks || a.process.pid - b.process.pid).slice(0, limit);
  return {
    userProcessCpuCores: cores(human.reduce((sum, entry) => sum + entry.ticks, 0)),
    topProcesses: busiest.map(({ process, ticks, uid }) => ({
      pid: process.pid,
      uid,
      user: users.byUid(uid)?.name ?? String(uid),
      command: process.comm,
      cpuCores: cores(ticks),
      ageSeconds: Math.max(0, uptimeSeconds - process.startTicks / CLOCK_TICKS_PER_SECOND),
    })),
  };
}
