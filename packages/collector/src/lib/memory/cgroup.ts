// The collector's memory as its container's cgroup (v2) counts it, and the limit it is killed at.
// Pure parsers over the files' text; readCgroupMemory() reads them under a root the config names
// (memory.cgroupRoot, default /sys/fs/cgroup: a container's own cgroup), so tests read fixtures.
import { readFileSync } from "node:fs";
import path from "node:path";

export interface CgroupMemory {
  /**
   * The working set: memory.current less inactive file cache (what the kernel can drop before it
   * OOM-kills anything), as the kubelet and cAdvisor count it (container_memory_working_set_bytes).
   */
  workingSetBytes: number;
  /** memory.max; undefined when the cgroup has no limit ("max"). */
  limitBytes: number | undefined;
}

/** memory.max: a byte count, or "max" for none. */
export function parseMemoryMax(text: string): number | undefined {
  const value = text.trim();
  if (value === "max") return undefined;
  if (!/^\d+$/.test(value)) throw new Error(`memory.max: expected a byte count or "max", not "${value.slice(0, 40)}"`);
  return Number(value);
}

/** memory.current: a byte count. */
export function parseMemoryCurrent(text: string): number {
  const value = text.trim();
  if (!/^\d+$/.test(value)) throw new Error(`memory.current: expected a byte count, not "${value.slice(0, 40)}"`);
  return Number(value);
}

/** memory.stat's inactive_file (0 when absent). */
export function inactiveFileBytes(statText: string): number {
  const line = statText.split("\n").find((l) => l.startsWith("inactive_file "));
  const value = Number(line?.slice("inactive_file ".length).trim());
  return Number.isFinite(value) ? value : 0;
}

export function cgroupMemory(currentText: string, maxText: string, statText: string | undefined): CgroupMemory {
  const current = parseMemoryCurrent(currentText);
  const inactive = statText === undefined ? 0 : inactiveFileBytes(statText);
  return { workingSetBytes: Math.max(0, current - inactive), limitBytes: parseMemoryMax(maxText) };
}

/**
 * The cgroup's memory under `root`; undefined where there is no cgroup v2 memory controller
 * there (cgroup v1, a bare machine, a root without memory.current).
 */
export function readCgroupMemory(root: string): CgroupMemory | undefined {
  let current: string;
  let max: string;
  try {
    current = readFileSync(path.join(root, "memory.current"), "utf8");
    max = readFileSync(path.join(root, "memory.max"), "utf8");
  } catch {
    return undefined;
  }
  let stat: string | undefined;
  try {
    stat = readFileSync(path.join(root, "memory.stat"), "utf8");
  } catch {
    stat = undefined;
  }
  return cgroupMemory(current, max, stat);
}
