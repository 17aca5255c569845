// Which processes a traced program started, from `strace -f -e trace=clone,clone3,fork,vfork,execve`
// output. Threads (CLONE_THREAD) are not processes and are left out. Pure.

export interface SpawnedProcess {
  pid: number;
  /** The program it ran: the successful execve's path, else the name it tried. */
  program: string;
  /** False when every execve failed (e.g. ENOENT: the tool is not installed); the child still existed. */
  execOk: boolean;
}

export interface SpawnCensus {
  /** fork/vfork/clone/clone3 calls that made a process rather than a thread. */
  processClones: number;
  threadClones: number;
  processes: SpawnedProcess[];
}

const LINE = /^(\d+)\s+(.*)$/;

export function parseSpawnTrace(text: string, rootPid: number): SpawnCensus {
  let processClones = 0;
  let threadClones = 0;
  const byPid = new Map<number, SpawnedProcess>();
  for (const raw of text.split("\n")) {
    const match = LINE.exec(raw.trim());
    if (!match) continue;
    const pid = Number(match[1]);
    const call = match[2]!;
    if (/^(clone3?|fork|vfork)\(/.test(call)) {
      // The flags are on the first line even when the call is split (<unfinished ...>).
      if (/CLONE_THREAD/.test(call)) threadClones++;
      else processClones++;
      continue;
    }
    const exec = /^execve\("([^"]*)"/.exec(call);
    if (exec && pid !== rootPid) {
      const ok = /\)\s*=\s*0\s*$/.test(call);
      const program = exec[1]!.split("/").pop() ?? exec[1]!;
      const seen = byPid.get(pid);
      if (!seen) byPid.set(pid, { pid, program, execOk: ok });
      else if (ok) byPid.set(pid, { pid, program, execOk: true });
    }
  }
  return { processClones, threadClones, processes: [...byPid.values()] };
}

/** "nvidia-smi ×4 (exec failed: not installed)" lines, one per program. Pure. */
export function describeSpawned(processes: readonly SpawnedProcess[]): string[] {
  const groups = new Map<string, { count: number; failed: number }>();
  for (const process of processes) {
    const group = groups.get(process.program) ?? { count: 0, failed: 0 };
    group.count++;
    if (!process.execOk) group.failed++;
    groups.set(process.program, group);
  }
  return [...groups.entries()].map(
    ([program, { count, failed }]) =>
      `${program} ×${count}${failed ? ` (${failed === count ? "all" : failed} exec failed: not installed)` : ""}`,
  );
}
