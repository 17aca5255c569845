/** /proc/net/dev: bytes each network interface has received and sent since it came up. */

export interface InterfaceCounters {
  name: string;
  receiveBytes: number;
  transmitBytes: number;
}

/**
 * Parses /proc/net/dev. Pure. The first two lines are headers; each further line
 * is "name: 8 receive fields 8 transmit fields".
 */
export function parseNetDev(text: string): InterfaceCounters[] {
  const lines = text.split("\n");
  if (!lines[0]?.startsWith("Inter-") || !lines[1]?.includes("face")) throw new Error("missing the two header lines");
  const counters: InterfaceCounters[] = [];
  for (const [offset, line] of lines.slice(2).entries()) {
    if (line.trim() === "") continue;
    const colon = line.indexOf(":");
    if (colon < 0) throw new Error(`line ${offset + 3} has no "name:"`);
    const name = line.slice(0, colon).trim();
    const fields = line
      .slice(colon + 1)
      .trim()
      .split(/\s+/);
    if (name === "" || fields.length < 16)
      throw new Error(`line ${offset + 3} (${JSON.stringify(name)}) has ${fields.length} counters, expected 16`);
    counters.push({ name, receiveBytes: counter(fields[0]!, name), transmitBytes: counter(fields[8]!, name) });
  }
  return counters;
}

function counter(field: string, name: string): number {
  const value = Number(field);
  if (!/^\d+$/.test(field) || !Number.isFinite(value))
    throw new Error(`${name}: not a byte count: ${JSON.stringify(field)}`);
  return value;
}
