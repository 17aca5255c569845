/**
 * What the cgroup v2 tree says about CPU, where systemd manages it:
 *
 * - each login's processes live under user.slice/user-UID.slice, whose cpu.stat counts
 *   the CPU of every process that ever ran there, including short-lived ones that came
 *   and went between two samples;
 * - what systemd leaves in the root cgroup are kernel threads (and helpers the kernel
 *   spawns, such as modprobe): never people's processes, so their /proc/PID/stat need
 *   not be read. On a VM they are about half of all processes, and more the more vCPUs
 *   it has (per-CPU kworkers, ksoftirqd, migration threads).
 *
 * The v2 hierarchy is /sys/fs/cgroup on a unified system and /sys/fs/cgroup/unified on a
 * hybrid one (systemd's hybrid mode keeps the v2 tree there; cpu.stat's usage fields exist
 * in v2 whether or not the cpu controller is enabled). Without systemd (no init.scope at
 * the root), nothing here is used and the per-process reading counts everything.
 */
import { readdirSync, readFileSync, statSync } from "node:fs";
import path from "node:path";
import { under } from "../roots.js";
import { errorMessage } from "@ws/protocol";

/** The CPU a cgroup has used since it was created, from its cpu.stat, in microseconds. */
export interface CgroupCpuStat {
  usageUsec: number;
  userUsec: number;
  systemUsec: number;
}

/**
 * Parses a cgroup v2 cpu.stat ("usage_usec 123\nuser_usec 100\n..."). Pure. Other keys
 * (nr_periods, throttled_usec, core_sched.force_idle_usec, ...) are ignored.
 */
export function parseCgroupCpuStat(text: string): CgroupCpuStat {
  const values = new Map<string, number>();
  for (const line of text.split("\n")) {
    const space = line.indexOf(" ");
    if (space <= 0) continue;
    const raw = line.slice(space + 1).trim();
    const value = Number(raw);
    if (/^\d+$/.test(raw) && Number.isSafeInteger(value)) values.set(line.slice(0, space), value);
  }
  const field = (key: string): number => {
    const value = values.get(key);
    if (value === undefined) throw new Error(`no ${key} line`);
    return value;
  };
  return { usageUsec: field("usage_usec"), userUsec: field("user_usec"), systemUsec: field("system_usec") };
}

/** The uid of a systemd user slice directory name ("user-1000.slice" → 1000), undefined for any other name. Pure. */
export function userSliceUid(name: string): number | undefined {
  const match = /^user-(\d+)\.slice$/.exec(name);
  if (!match) return undefined;
  const uid = Number(match[1]);
  return Number.isSafeInteger(uid) ? uid : undefined;
}

/** Parses cgroup.procs: one pid per line. Pure; a line that is not a pid is an error. */
export function parseCgroupProcs(text: string): Set<number> {
  const pids = new Set<number>();
  for (const line of text.split("\n")) {
    if (line === "") continue;
    const pid = Number(line);
    if (!/^\d+$/.test(line) || !Number.isSafeInteger(pid))
      throw new Error(`not a pid: ${JSON.stringify(line.slice(0, 32))}`);
    pids.add(pid);
  }
  return pids;
}

/** CPU used so far by each user slice, by uid, in microseconds. */
export type UserSliceUsage = Map<number, number>;

/** One reading of the systemd-managed cgroup tree. */
export interface CgroupReading {
  /** Pids in the root cgroup: kernel threads, whose /proc/PID/stat need not be read. */
  kernelPids: Set<number>;
  /** usage_usec of each user-UID.slice. */
  userSlices: UserSliceUsage;
}

/**
 * The v2 root under the sys root, when systemd manages the tree (an init.scope at its root),
 * else undefined. Checked every sample: one stat each, and a tree that appears after boot
 * (the agent started before systemd mounted it in a container) is picked up.
 */
export function systemdCgroupRoot(sysRoot: string): string | undefined {
  for (const candidate of [under(sysRoot, "fs", "cgroup"), under(sysRoot, "fs", "cgroup", "unified")]) {
    if (statSync(path.join(candidate, "init.scope"), { throwIfNoEntry: false })?.isDirectory()) return candidate;
  }
  return undefined;
}

/**
 * Reads the root cgroup's processes and every user slice's cpu.stat, synchronously (cgroupfs,
 * like procfs, is built in memory and only root can change it). Undefined when systemd does not
 * manage the tree; problems with single files are added to `problems` and leave them out.
 */
export function readCgroups(sysRoot: string, problems: string[]): CgroupReading | undefined {
  const root = systemdCgroupRoot(sysRoot);
  if (root === undefined) return undefined;
  let kernelPids: Set<number>;
  const procs = path.join(root, "cgroup.procs");
  try {
    kernelPids = parseCgroupProcs(readFileSync(procs, "utf8"));
  } catch (error) {
    problems.push(`${procs}: ${errorMessage(error)}`);
    return undefined;
  }
  const userSlices: UserSliceUsage = new Map();
  const slices = path.join(root, "user.slice");
  let names: string[] = [];
  try {
    names = readdirSync(slices);
  } catch (error) {
    // No user.slice: nobody has logged in since boot. Anything else is worth a note.
    if ((error as NodeJS.ErrnoException).code !== "ENOENT") problems.push(`${slices}: ${errorMessage(error)}`);
  }
  for (const name of names) {
    const uid = userSliceUid(name);
    if (uid === undefined) continue;
    const file = path.join(slices, name, "cpu.stat");
    try {
      userSlices.set(uid, parseCgroupCpuStat(readFileSync(file, "utf8")).usageUsec);
    } catch (error) {
      // A slice removed between the listing and the read (the user's last session ended) is not a problem.
      if ((error as NodeJS.ErrnoException).code !== "ENOENT") problems.push(`${file}: ${errorMessage(error)}`);
    }
  }
  return { kernelPids, userSlices };
}

/**
 * CPU of the user slices of `isHuman` uids between two readings, in cores. A slice that
 * appeared since the previous reading was created after it: all of its CPU counts (a login that
 * starts a build at once is busy, not idle). A removed slice is gone and adds nothing, nor does a
 * counter that went backwards (a slice removed and created again). Pure.
 */
export function userSliceCores(
  previous: UserSliceUsage,
  current: UserSliceUsage,
  seconds: number,
  isHuman: (uid: number) => boolean,
): number | undefined {
  if (!(seconds > 0)) return undefined;
  let usec = 0;
  for (const [uid, usage] of current) {
    if (!isHuman(uid)) continue;
    const before = previous.get(uid) ?? 0;
    if (usage >= before) usec += usage - before;
  }
  return usec / 1e6 / seconds;
}
