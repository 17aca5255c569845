/** /proc/meminfo: memory size and how much of it a new program could get. */

export interface MemoryInfo {
  totalBytes: bigint;
  availableBytes: bigint;
}

/**
 * Parses /proc/meminfo. Pure. Values are in kB (KiB, despite the unit). Kernels
 * before 3.14 have no MemAvailable; there free + buffers + page cache stands in
 * for it, which overstates it a little.
 */
export function parseMeminfo(text: string): MemoryInfo {
  const kib = new Map<string, bigint>();
  for (const line of text.split("\n")) {
    const match = /^(\w+(?:\(\w+\))?):\s+(\d+)(?:\s+kB)?\s*$/.exec(line);
    if (match) kib.set(match[1]!, BigInt(match[2]!));
  }
  const total = kib.get("MemTotal");
  if (total === undefined) throw new Error("no MemTotal line");
  let available = kib.get("MemAvailable");
  if (available === undefined) {
    const free = kib.get("MemFree");
    if (free === undefined) throw new Error("neither MemAvailable nor MemFree");
    available = free + (kib.get("Buffers") ?? 0n) + (kib.get("Cached") ?? 0n);
  }
  return { totalBytes: total * 1024n, availableBytes: available * 1024n };
}
