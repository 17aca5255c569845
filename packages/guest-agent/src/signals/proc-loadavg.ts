/** /proc/loadavg: run-queue averages over 1, 5 and 15 minutes. */

export interface LoadAverages {
  load1: number;
  load5: number;
  load15: number;
}

/** Parses /proc/loadavg ("0.07 0.21 0.10 3/112 8297"). Pure. */
export function parseLoadavg(text: string): LoadAverages {
  const fields = text.trim().split(/\s+/);
  if (fields.length < 3) throw new Error(`expected at least 3 fields, found ${fields.length}`);
  const [load1, load5, load15] = fields.slice(0, 3).map((field, index) => {
    const value = Number(field);
    if (field === "" || !Number.isFinite(value) || value < 0)
      throw new Error(`field ${index + 1} is not a load average: ${JSON.stringify(field)}`);
    return value;
  }) as [number, number, number];
  return { load1, load5, load15 };
}
