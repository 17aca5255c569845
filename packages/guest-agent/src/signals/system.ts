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
import { under, type Roots } from "../roots.js";
import { parseDiskstats } from "./proc-diskstats.js";
import { parseLoadavg } from "./proc-loadavg.js";
import { parseMeminfo } from "./proc-meminfo.js";
import { parseNetDev } from "./proc-netdev.js";
import { readProcessFile } from "./proc-files.js";
import { parseStatusUid } from "./proc-pid.js";
import { userProcessCpu, type OwnedProcessCpu, type ProcessCpu } from "./proc-rates.js";
import { parseProcStat } from "./proc-stat.js";
import { ownProcessScan, type ProcessScan, type ProcessTable } from "./process-scan.js";
import { errorMessage, ok, type Signal, type SignalContext, type SignalOutcome } from "./types.js";
import {
  type SystemSignalValue,
  type SystemReading,
  type PreviousReading,
  systemValue,
  busyProcessesSince,
  userSliceCoresSince,
} from "./system-parse.js";

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
