// What a benchmark ran on, printed above every table: figures from one machine
// mean little without it.
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import os from "node:os";

export interface Machine {
  /** CPUs this process may run on (what nproc prints). */
  cpus: number;
  cpuModel: string;
  memoryGiB: number;
  node: string;
  kernel: string;
  /** /proc/loadavg when the benchmark started: other work on the machine skews every figure. */
  loadAtStart: string;
}

/** "model name" of the first CPU in /proc/cpuinfo. Pure. */
export function cpuModelFromCpuinfo(text: string): string {
  const match = /^model name\s*:\s*(.+)$/m.exec(text);
  return match?.[1]?.trim() ?? "unknown";
}

/** MemTotal in /proc/meminfo, in GiB. Pure. */
export function memoryGiBFromMeminfo(text: string): number {
  const match = /^MemTotal:\s+(\d+)\s+kB$/m.exec(text);
  return match ? Number(match[1]) / 1024 / 1024 : NaN;
}

function nproc(): number {
  try {
    return Number(execFileSync("nproc", { encoding: "utf8" }).trim());
  } catch {
    return os.availableParallelism();
  }
}

export function describeMachine(): Machine {
  return {
    cpus: nproc(),
    cpuModel: cpuModelFromCpuinfo(readFileSync("/proc/cpuinfo", "utf8")),
    memoryGiB: memoryGiBFromMeminfo(readFileSync("/proc/meminfo", "utf8")),
    node: process.version,
    kernel: os.release(),
    loadAtStart: readFileSync("/proc/loadavg", "utf8").split(" ").slice(0, 3).join(" "),
  };
}

export function machineLine(machine: Machine): string {
  return (
    `Machine: ${machine.cpus} CPUs (nproc), ${machine.cpuModel}, ${machine.memoryGiB.toFixed(1)} GiB memory, ` +
    `Linux ${machine.kernel}, Node ${machine.node}; load average at start ${machine.loadAtStart}.`
  );
}
