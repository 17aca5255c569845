/** /proc/uptime: seconds since boot. */

/** Parses /proc/uptime ("360.50 613.10") into the first field, seconds since boot. Pure. */
export function parseUptime(text: string): number {
  const field = text.trim().split(/\s+/)[0] ?? "";
  const seconds = Number(field);
  if (field === "" || !Number.isFinite(seconds) || seconds < 0)
    throw new Error(`not an uptime: ${JSON.stringify(text.slice(0, 40))}`);
  return seconds;
}
