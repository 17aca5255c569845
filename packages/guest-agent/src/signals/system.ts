/**
 * System / background work: CPU, load, network, disk I/O, memory and the CPU of
 * people's processes, from /proc (and three directory listings of /sys that say
 * which network interfaces and disks are real hardware). Rates need two
 * readings: the previous one lives in the closure, so the first sample after
 * start has no rates.
 *
 * Every read here is synchronous on purpose. procfs and sysfs build these files
 * in memory and never wait on a disk, so a blocking read costs the kernel's
 * work and nothing else, while a promise-based readFile or readdir goes through
 * libuv's thread pool: measured on the benchmark machine, 1.0 ms of CPU for the
 * five small /proc files against 0.09 ms synchronously, 0.13 against 0.03 ms
 * for the three /sys listings, 1.1 against 0.19 ms for ten /proc/PID/status.
 * None of these paths is writable by a user.
 */
import { readdirSync, readFileSync } from "node:fs";
import type { MessageInitShape } from "@bufbuild/protobuf";
import type { SystemSignalSchema } from "@ws/protocol";
import { under, type Roots } from "../roots.js";
import { userSliceCores, type UserSliceUsage } from "./cgroup-cpu.js";
import { parseDiskstats } from "./proc-diskstats.js";
import { parseLoadavg, type LoadAverages } from "./proc-loadavg.js";
import { parseMeminfo, type MemoryInfo } from "./proc-meminfo.js";
import { parseNetDev } from "./proc-netdev.js";
import { readProcessFile } from "./proc-files.js";
import { parseStatusUid } from "./proc-pid.js";
import {
  cpuBusyRatio,
  processCpuTicks,
  summedRate,
  userProcessCpu,
  type OwnedProcessCpu,
  type ProcessCpu,
  type ProcessSnapshot,
} from "./proc-rates.js";
import { parseProcStat, type ProcStat } from "./proc-stat.js";
import { ownProcessScan, type ProcessScan, type ProcessTable } from "./process-scan.js";
import { errorMessage, ok, type Signal, type SignalContext, type SignalOutcome } from "./types.js";

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

/** `processes`: shared with the remote-sessions signal (createSignals), so /proc is listed once per sample. */
export function createSystemSignal(processes: ProcessScan = ownProcessScan()): Signal<SystemSignalValue> {
  let previous: PreviousReading = {};
  return {
    name: "system",
    async collect(ctx: SignalContext): Promise<SignalOutcome<SystemSignalValue>> {
      const reading = readSystem(ctx.roots, processes.table(ctx), ctx.clock.monotonicMs());
      const value = systemValue(previous, reading);
      const busy = busyProcessesSince(previous.processes, reading.processes);
      if (busy !== undefined && reading.uptimeSeconds !== undefined) {
        const owned = withOwners(ctx.roots, busy.usage, reading.problems);
        Object.assign(value, userProcessCpu(owned, ctx.users, busy.seconds, reading.uptimeSeconds));
      }
      const sliceCores = userSliceCoresSince(previous.userSlices, reading.userSlices, ctx.users.isHuman);
      if (sliceCores !== undefined && !(sliceCores <= (value.userProcessCpuCores ?? 0)))
        value.userProcessCpuCores = sliceCores;
      previous = {
        stat: reading.stat ?? previous.stat,
        network: reading.network ?? previous.network,
        disk: reading.disk ?? previous.disk,
        processes: reading.processes ?? previous.processes,
        userSlices: reading.userSlices ?? previous.userSlices,
      };
      if (reading.problems.length === 0) return ok(value);
      return { state: "failed", message: reading.problems.join("; "), value };
    },
  };
}

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

function readSystem(roots: Roots, table: ProcessTable, atMs: number): SystemReading {
  const problems: string[] = [...table.problems];
  const parsed = <T>(relative: string, parse: (text: string) => T): T | undefined => {
    const file = under(roots.proc, relative);
    try {
      return parse(readFileSync(file, "utf8"));
    } catch (error) {
      problems.push(`${file}: ${errorMessage(error)}`);
      return undefined;
    }
  };
  const listing = (relative: string): Set<string> | undefined => {
    const dir = under(roots.sys, relative);
    try {
      return new Set(readdirSync(dir));
    } catch (error) {
      problems.push(`${dir}: ${errorMessage(error)}`);
      return undefined;
    }
  };

  // The uptime, cgroups and processes come from the sample's process table (process-scan.ts).
  const { uptimeSeconds, cgroups, processes } = table;
  const stat = parsed("stat", parseProcStat);
  const loadavg = parsed("loadavg", parseLoadavg);
  const memory = parsed("meminfo", parseMeminfo);
  const interfaces = parsed("net/dev", parseNetDev);
  const disks = parsed("diskstats", parseDiskstats);
  const virtualInterfaces = listing("devices/virtual/net");
  const blockDevices = listing("block");
  const virtualBlockDevices = listing("devices/virtual/block");

  const reading: SystemReading = { problems };
  if (cgroups) reading.userSlices = { atMs, usage: cgroups.userSlices };
  if (stat) reading.stat = stat;
  if (loadavg) reading.loadavg = loadavg;
  if (memory) reading.memory = memory;
  if (uptimeSeconds !== undefined) {
    reading.uptimeSeconds = uptimeSeconds;
    if (processes) reading.processes = { atMs: table.atMonoMs, uptimeSeconds, processes };
  }
  if (interfaces && virtualInterfaces) {
    // Virtual interfaces (lo, bridges, veth, tun, VPNs) carry traffic that also crosses a real one, or never leaves the VM.
    const counted = interfaces.filter((entry) => !virtualInterfaces.has(entry.name) && entry.name !== "lo");
    reading.network = {
      atMs,
      receiveBytes: new Map(counted.map((entry) => [entry.name, entry.receiveBytes])),
      transmitBytes: new Map(counted.map((entry) => [entry.name, entry.transmitBytes])),
    };
  }
  if (disks && blockDevices && virtualBlockDevices) {
    // /sys/block lists whole disks only (no partitions); the virtual ones (loop, ram, zram, dm-, md) repeat I/O of real ones or are memory.
    const counted = disks.filter((entry) => blockDevices.has(entry.name) && !virtualBlockDevices.has(entry.name));
    reading.disk = {
      atMs,
      readBytes: new Map(counted.map((entry) => [entry.name, entry.readBytes])),
      writtenBytes: new Map(counted.map((entry) => [entry.name, entry.writtenBytes])),
    };
  }
  return reading;
}

/** The owner of each busy process, from /proc/PID/status; processes gone by now are dropped. */
function withOwners(roots: Roots, usage: ProcessCpu[], problems: string[]): OwnedProcessCpu[] {
  const owned: OwnedProcessCpu[] = [];
  for (const entry of usage) {
    const file = under(roots.proc, String(entry.process.pid), "status");
    let text: string;
    try {
      text = readProcessFile(file);
    } catch {
      continue; // exited since its stat was read
    }
    try {
      owned.push({ ...entry, uid: parseStatusUid(text) });
    } catch (error) {
      problems.push(`${file}: ${errorMessage(error)}`);
    }
  }
  return owned;
}
