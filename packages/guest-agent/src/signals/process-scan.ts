/**
 * One pass over /proc's processes per sample, shared by the signals that look at every process:
 * system (the CPU of people's processes) and remote_sessions (sshd's and code-server's processes,
 * found by name). Each process costs one pread of its /proc/PID/stat, kept open between samples
 * (proc-files.ts); the name both signals need is the stat's comm field, which is the kernel's
 * task name that /proc/PID/comm serves, so it is not read again.
 *
 * The uptime is read before the listing (a process missing from it then started after that
 * moment, see ProcessSnapshot), and the root cgroup's kernel threads are left out (cgroup-cpu.ts):
 * none of them is a person's process, an sshd session or code-server.
 */
import { readdirSync, readFileSync } from "node:fs";
import type { Clock } from "../clock.js";
import { under, type Roots } from "../roots.js";
import { readCgroups, type CgroupReading } from "./cgroup-cpu.js";
import { ProcessStatFiles } from "./proc-files.js";
import { parsePidStat, type ProcessStat } from "./proc-pid.js";
import { parseUptime } from "./proc-uptime.js";
import { errorMessage } from "./types.js";

/** /proc's process table at one moment of a sample. */
export interface ProcessTable {
  /** Monotonic ms when the table was read. */
  atMonoMs: number;
  /** Seconds since boot, read before the listing. */
  uptimeSeconds?: number;
  /** The systemd-managed cgroup tree, where there is one. */
  cgroups?: CgroupReading;
  /** Every process's stat except the root cgroup's kernel threads; undefined when /proc cannot be listed. */
  processes?: ProcessStat[];
  /** What could not be read, one line each. */
  problems: string[];
}

export interface ProcessScan {
  /**
   * This sample's table. Shared (createProcessScan): a sample is named by its clock and the wall
   * time it reads (the sampler gives every signal of one sample the same clock, stopped at the
   * sample's instant) and its roots, so the first signal to ask reads it and the others reuse it.
   */
  table(ctx: { roots: Roots; clock: Clock }): ProcessTable;
}

/** A scan shared by the signals of one agent: /proc is listed once per sample. */
export function createProcessScan(): ProcessScan {
  let statFiles: ProcessStatFiles | undefined;
  let current: { clock: Clock; nowMs: number; roots: Roots; table: ProcessTable } | undefined;
  return {
    table(ctx) {
      const nowMs = ctx.clock.nowMs();
      if (current?.clock === ctx.clock && current.nowMs === nowMs && current.roots === ctx.roots) return current.table;
      if (statFiles?.procRoot !== ctx.roots.proc) {
        statFiles?.retainOnly(new Set());
        statFiles = new ProcessStatFiles(ctx.roots.proc);
      }
      const table = readProcessTable(ctx.roots, statFiles, ctx.clock.monotonicMs());
      current = { clock: ctx.clock, nowMs, roots: ctx.roots, table };
      return table;
    },
  };
}

/** A scan of a signal's own (one made alone, as tests and benchmarks do): every call reads afresh. */
export function ownProcessScan(): ProcessScan {
  let statFiles: ProcessStatFiles | undefined;
  return {
    table(ctx) {
      if (statFiles?.procRoot !== ctx.roots.proc) {
        statFiles?.retainOnly(new Set());
        statFiles = new ProcessStatFiles(ctx.roots.proc);
      }
      return readProcessTable(ctx.roots, statFiles, ctx.clock.monotonicMs());
    },
  };
}

/** "123" → true; "self", "net", "1a" → false. Pure; no regex, as it runs for every /proc entry. */
export function isPidName(name: string): boolean {
  if (name.length === 0 || name.length > 10) return false;
  for (let i = 0; i < name.length; i++) {
    const code = name.charCodeAt(i);
    if (code < 48 || code > 57) return false;
  }
  return true;
}

function readProcessTable(roots: Roots, statFiles: ProcessStatFiles, atMonoMs: number): ProcessTable {
  const problems: string[] = [];
  const table: ProcessTable = { atMonoMs, problems };
  // Uptime first: a process that is not in the listing below then started after it.
  const uptimeFile = under(roots.proc, "uptime");
  try {
    table.uptimeSeconds = parseUptime(readFileSync(uptimeFile, "utf8"));
  } catch (error) {
    problems.push(`${uptimeFile}: ${errorMessage(error)}`);
  }
  const cgroups = readCgroups(roots.sys, problems);
  if (cgroups) table.cgroups = cgroups;
  const processes = readProcesses(roots, statFiles, problems, cgroups?.kernelPids);
  if (processes) table.processes = processes;
  return table;
}

/**
 * Every process's stat. Processes that exit while being read are skipped; so are unparsable
 * entries, with a note. One promise-based readFile per process costs about five times the CPU in
 * thread-pool round trips (measured: 7.3 ms against 1.3 ms for 100 processes); the files kept
 * open between samples (proc-files.ts) halve what is left. Pids in `skip` (the kernel threads of
 * the root cgroup, see cgroup-cpu.ts) are not read at all.
 */
function readProcesses(
  roots: Roots,
  statFiles: ProcessStatFiles,
  problems: string[],
  skip: ReadonlySet<number> = new Set(),
): ProcessStat[] | undefined {
  let names: string[];
  try {
    names = readdirSync(roots.proc);
  } catch (error) {
    problems.push(`${roots.proc}: ${errorMessage(error)}`);
    return undefined;
  }
  const listed = new Set<number>();
  const unparsable: string[] = [];
  const stats: ProcessStat[] = [];
  for (const name of names) {
    if (!isPidName(name)) continue;
    const pid = Number(name);
    if (skip.has(pid)) continue;
    listed.add(pid);
    const text = statFiles.read(pid);
    if (text === undefined) continue; // exited between the listing and the read
    try {
      stats.push(parsePidStat(text));
    } catch (error) {
      unparsable.push(`${pid}: ${errorMessage(error)}`);
    }
  }
  statFiles.retainOnly(listed);
  if (unparsable.length > 0) problems.push(`${roots.proc}: unparsable stat of process ${unparsable.join(", ")}`);
  return stats;
}
