// One process's cost as the kernel accounts it: CPU from /proc/PID/stat
// (utime + stime), memory from /proc/PID/status (VmRSS, VmHWM), children from
// /proc/PID/task/*/children.
import { readdirSync, readFileSync } from "node:fs";
import { CLOCK_TICKS_PER_SECOND, parsePidStat } from "../../packages/guest-agent/src/signals/proc-pid.js";

/** A "Name:   1234 kB" line of /proc/PID/status, in KiB; undefined when absent (a zombie has no VmRSS). Pure. */
export function statusKiB(text: string, field: "VmRSS" | "VmHWM" | "VmSize"): number | undefined {
  const match = new RegExp(`^${field}:\\s+(\\d+) kB$`, "m").exec(text);
  return match ? Number(match[1]) : undefined;
}

/** CPU seconds (user + system) the process's own threads have used so far. */
export function cpuSeconds(pid: number): number {
  return parsePidStat(readFileSync(`/proc/${pid}/stat`, "utf8")).ownTicks / CLOCK_TICKS_PER_SECOND;
}

/** CPU seconds of the children the process has waited for (a short-lived helper shows up here). */
export function reapedChildCpuSeconds(pid: number): number {
  return parsePidStat(readFileSync(`/proc/${pid}/stat`, "utf8")).reapedChildTicks / CLOCK_TICKS_PER_SECOND;
}

export interface Memory {
  rssBytes: number;
  /** Peak RSS since the process started. */
  hwmBytes: number;
}

export function memory(pid: number): Memory {
  const text = readFileSync(`/proc/${pid}/status`, "utf8");
  return { rssBytes: (statusKiB(text, "VmRSS") ?? 0) * 1024, hwmBytes: (statusKiB(text, "VmHWM") ?? 0) * 1024 };
}

/** Live children of every thread of the process. */
export function childPids(pid: number): number[] {
  const children: number[] = [];
  let tasks: string[];
  try {
    tasks = readdirSync(`/proc/${pid}/task`);
  } catch {
    return children;
  }
  for (const task of tasks) {
    try {
      for (const word of readFileSync(`/proc/${pid}/task/${task}/children`, "utf8").trim().split(/\s+/)) {
        if (/^\d+$/.test(word)) children.push(Number(word));
      }
    } catch {
      // The thread ended between readdir and read.
    }
  }
  return children;
}

export function commOf(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/comm`, "utf8").trim();
  } catch {
    return "?";
  }
}

export function isAlive(pid: number): boolean {
  try {
    readFileSync(`/proc/${pid}/stat`);
    return true;
  } catch {
    return false;
  }
}

export interface CpuSplit {
  userSeconds: number;
  systemSeconds: number;
}

/** utime and stime (fields 14 and 15 of /proc/PID/stat), in seconds. Pure. */
export function cpuSplitFromStat(text: string): CpuSplit {
  const rest = text
    .slice(text.lastIndexOf(")") + 1)
    .trim()
    .split(/\s+/);
  const user = Number(rest[14 - 3]);
  const system = Number(rest[15 - 3]);
  if (!Number.isFinite(user) || !Number.isFinite(system)) throw new Error("no utime/stime fields");
  return { userSeconds: user / CLOCK_TICKS_PER_SECOND, systemSeconds: system / CLOCK_TICKS_PER_SECOND };
}

export function cpuSplit(pid: number): CpuSplit {
  return cpuSplitFromStat(readFileSync(`/proc/${pid}/stat`, "utf8"));
}

/**
 * CPU of the main thread (tid = pid: JavaScript, synchronous I/O) and of every other thread together
 * (libuv's pool doing asynchronous fs work, V8's GC and compiler threads). Node names them all "node".
 */
export function cpuByThread(pid: number): Map<string, CpuSplit> {
  const byName = new Map<string, CpuSplit>();
  let tasks: string[] = [];
  try {
    tasks = readdirSync(`/proc/${pid}/task`);
  } catch {
    return byName;
  }
  for (const task of tasks) {
    try {
      const text = readFileSync(`/proc/${pid}/task/${task}/stat`, "utf8");
      const name = task === String(pid) ? "main thread" : "other threads";
      const split = cpuSplitFromStat(text);
      const sum = byName.get(name) ?? { userSeconds: 0, systemSeconds: 0 };
      byName.set(name, {
        userSeconds: sum.userSeconds + split.userSeconds,
        systemSeconds: sum.systemSeconds + split.systemSeconds,
      });
    } catch {
      // The thread ended between readdir and read.
    }
  }
  return byName;
}

/** How many processes the machine runs now: the agent reads each one's stat every sample. */
export function processCount(): number {
  return readdirSync("/proc").filter((name) => /^\d+$/.test(name)).length;
}
