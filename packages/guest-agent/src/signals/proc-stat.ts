/** /proc/stat: how busy the CPUs have been since boot, in clock ticks. */

export interface CpuTimes {
  /** Ticks spent running something: user, nice, system, irq, softirq (guest time is inside user/nice). */
  busyTicks: number;
  /** busy + idle + iowait + steal: every tick the CPUs existed. */
  totalTicks: number;
}

export interface ProcStat {
  /** Online CPUs: one "cpuN" line each. */
  cpuCount: number;
  /** The aggregate "cpu" line, all CPUs together. */
  cpu: CpuTimes;
}

/**
 * Parses /proc/stat. Pure. Steal time (the hypervisor running another guest) is
 * counted in the total but never as busy: on an overcommitted node it would
 * otherwise make an idle VM look busy.
 */
export function parseProcStat(text: string): ProcStat {
  let cpu: CpuTimes | undefined;
  let cpuCount = 0;
  for (const line of text.split("\n")) {
    if (!line.startsWith("cpu")) continue;
    const [label, ...fields] = line.trim().split(/\s+/);
    if (label === "cpu") {
      cpu = cpuTimesFrom(fields);
    } else if (/^cpu\d+$/.test(label ?? "")) {
      cpuCount += 1;
    }
  }
  if (cpu === undefined) throw new Error('no aggregate "cpu" line');
  if (cpuCount === 0) throw new Error('no per-CPU "cpuN" line');
  return { cpuCount, cpu };
}

function cpuTimesFrom(fields: string[]): CpuTimes {
  // user nice system idle [iowait irq softirq steal guest guest_nice]; kernels before 2.6 stop at idle.
  if (fields.length < 4) throw new Error(`"cpu" line has ${fields.length} fields, expected at least 4`);
  const ticks = fields.map((field, index) => {
    const value = Number(field);
    if (!/^\d+$/.test(field) || !Number.isSafeInteger(value))
      throw new Error(`"cpu" field ${index + 1} is not a tick count: ${JSON.stringify(field)}`);
    return value;
  });
  const [user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0] = ticks;
  const busyTicks = user + nice + system + irq + softirq;
  return { busyTicks, totalTicks: busyTicks + idle + iowait + steal };
}
