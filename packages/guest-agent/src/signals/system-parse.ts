/**
 * The pure half of the system signal (system.ts reads): two readings of /proc and the cgroups → the report's rates and busy processes. Tested on fixtures.
 */
import type { MessageInitShape } from "@bufbuild/protobuf";
import type { SystemSignalSchema } from "@ws/protocol";
import { userSliceCores, type UserSliceUsage } from "./cgroup-cpu.js";
import type { LoadAverages } from "./proc-loadavg.js";
import type { MemoryInfo } from "./proc-meminfo.js";
import { cpuBusyRatio, processCpuTicks, summedRate, type ProcessCpu, type ProcessSnapshot } from "./proc-rates.js";
import type { ProcStat } from "./proc-stat.js";

export type SystemSignalValue = MessageInitShape<typeof SystemSignalSchema>;

/** Byte counters of the interfaces that count, by name, and when they were read (monotonic ms). */
export interface NetworkReading {
  atMs: number;
  receiveBytes: Map<string, number>;
  transmitBytes: Map<string, number>;
}

/** Byte counters of the disks that count, by name, and when they were read (monotonic ms). */
export interface DiskReading {
  atMs: number;
  readBytes: Map<string, number>;
  writtenBytes: Map<string, number>;
}

export interface ProcessReading extends ProcessSnapshot {
  atMs: number;
}

/** CPU used so far by each systemd user slice, and when it was read (monotonic ms). */
export interface UserSliceReading {
  atMs: number;
  usage: UserSliceUsage;
}

/** One pass over /proc: every part that could be read, and why the others could not. */
export interface SystemReading {
  stat?: ProcStat;
  loadavg?: LoadAverages;
  memory?: MemoryInfo;
  uptimeSeconds?: number;
  network?: NetworkReading;
  disk?: DiskReading;
  processes?: ProcessReading;
  /** Where systemd manages the cgroup tree. */
  userSlices?: UserSliceReading;
  problems: string[];
}

/** What the rates of the next sample are computed from. */
export type PreviousReading = Pick<SystemReading, "stat" | "network" | "disk" | "processes" | "userSlices">;

/** The Report's fields from the previous and current readings, all but the per-process ones. Pure. */
export function systemValue(previous: PreviousReading, current: SystemReading): SystemSignalValue {
  const value: SystemSignalValue = {
    cpuCount: current.stat?.cpuCount ?? 0,
    load1: current.loadavg?.load1 ?? 0,
    load5: current.loadavg?.load5 ?? 0,
    load15: current.loadavg?.load15 ?? 0,
    memoryTotalBytes: current.memory?.totalBytes ?? 0n,
    memoryAvailableBytes: current.memory?.availableBytes ?? 0n,
    uptimeSeconds: current.uptimeSeconds ?? 0,
    topProcesses: [],
  };
  if (previous.stat && current.stat) value.cpuBusyRatio = cpuBusyRatio(previous.stat.cpu, current.stat.cpu);
  if (previous.network && current.network) {
    const seconds = (current.network.atMs - previous.network.atMs) / 1000;
    value.networkReceiveBytesPerSecond = summedRate(
      previous.network.receiveBytes,
      current.network.receiveBytes,
      seconds,
    );
    value.networkTransmitBytesPerSecond = summedRate(
      previous.network.transmitBytes,
      current.network.transmitBytes,
      seconds,
    );
  }
  if (previous.disk && current.disk) {
    const seconds = (current.disk.atMs - previous.disk.atMs) / 1000;
    value.diskReadBytesPerSecond = summedRate(previous.disk.readBytes, current.disk.readBytes, seconds);
    value.diskWriteBytesPerSecond = summedRate(previous.disk.writtenBytes, current.disk.writtenBytes, seconds);
  }
  return value;
}

/** The processes that used CPU between two readings of the process table, and the seconds between them. Pure. */
export function busyProcessesSince(
  previous: ProcessReading | undefined,
  current: ProcessReading | undefined,
): { usage: ProcessCpu[]; seconds: number } | undefined {
  if (previous === undefined || current === undefined || !(current.atMs > previous.atMs)) return undefined;
  return {
    usage: processCpuTicks(previous, current).filter((entry) => entry.ticks > 0),
    seconds: (current.atMs - previous.atMs) / 1000,
  };
}

/**
 * CPU of people's user slices between two readings, in cores; undefined without two readings.
 * Where systemd keeps the tree it counts every process of every login, including those that
 * lived and died between samples; the per-process figure also sees people's processes outside
 * user.slice (a system service running as a user, a container). The Report carries the larger
 * of the two: each is a lower bound of what people's work used. Pure.
 */
export function userSliceCoresSince(
  previous: UserSliceReading | undefined,
  current: UserSliceReading | undefined,
  isHuman: (uid: number) => boolean,
): number | undefined {
  if (previous === undefined || current === undefined) return undefined;
  return userSliceCores(previous.usage, current.usage, (current.atMs - previous.atMs) / 1000, isHuman);
}
