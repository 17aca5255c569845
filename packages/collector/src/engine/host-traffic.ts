// Interactive traffic seen from the host: a person typing over SSH (or any remote shell) is
// invisible to the vCPU, byte-rate and connection thresholds (0.5 % of a vCPU, a few kB/s), but
// KubeVirt's per-VMI packet counters (kubevirt_vmi_network_receive_packets_total,
// ..._transmit_packets_total, read by loop/hostside/queries.ts) still show its shape: small
// packets both ways (a keystroke in, its echo out, their ACKs), a few a second at most, and an
// irregular count from one window to the next, because people pause, think and burst. An idle
// guest shows about nothing, or periodic tiny traffic (NTP, ARP, DHCP renewals, a health check)
// whose count per window is the same window after window. Pure: readings in, a verdict out.
//
// Limits (docs/policy.md, "Interactive traffic from the host"): a window is the host's whole
// resolution (one count per host-side round), so the rule sees that packets moved, not who moved
// them: a machine exchanging small packets both ways at an irregular rate (a chatty client with a
// jittered poll and tiny answers) reads as a person and holds the VM, which costs idle hours, never
// a false stop; and the irregularity needs HISTORY readings, so the first windows after the
// agent went away, and the HISTORY − 1 after typing stopped, are judged on what came before.
import type { HostReading } from "./types.js";

/** The packet counts of one ok reading, as the rule keeps them between readings. */
export interface PacketWindow {
  atMs: number;
  receivePacketsPerSecond: number;
  transmitPacketsPerSecond: number;
  /** Both directions' bytes per second (the reading's network rate): the packets' mean size. */
  bytesPerSecond: number;
}

/** The shape of a person's remote shell on the wire; each bound's reason is beside it. */
export const INTERACTIVE_TRAFFIC = {
  /**
   * Each way, at least: a key every ten seconds with its echo (0.1 packets/s) — periodic idle
   * chatter (NTP every 64 s, ARP, DHCP) stays well below, a person at the keyboard well above.
   */
  minPacketsPerSecond: 0.1,
  /** Each way, at most: a fast typist makes ~10 keys/s, each a packet and an ACK; more is a transfer or a stream. */
  maxPacketsPerSecond: 60,
  /** Mean bytes per packet, at most: SSH keystroke and echo packets are 90–150 B on the wire, ACKs 66 B; bulk data fills 1500. */
  maxMeanPacketBytes: 300,
  /** In over out (and out over in), at most: every keystroke is echoed, so a person's shell is about balanced. */
  maxImbalance: 4,
  /** How many windows (this one included) the irregularity is judged over. */
  history: 4,
  /**
   * Coefficient of variation of the packets per window over `history` windows, at least: a
   * periodic sender makes the same count every window (the count's rounding alone makes under
   * 0.1 once it is 0.1 packets/s or more over a 2-minute window); a person's bursts and pauses vary far more.
   */
  minVariation: 0.25,
} as const;

/** The reading's packet window, or undefined when it has no packet counters (older KubeVirt, failed reading). */
export function packetWindow(reading: HostReading): PacketWindow | undefined {
  if (
    reading.state !== "ok" ||
    reading.receivePacketsPerSecond === undefined ||
    reading.transmitPacketsPerSecond === undefined
  )
    return undefined;
  return {
    atMs: reading.atMs,
    receivePacketsPerSecond: reading.receivePacketsPerSecond,
    transmitPacketsPerSecond: reading.transmitPacketsPerSecond,
    bytesPerSecond: reading.networkBytesPerSecond ?? 0,
  };
}

/** The last `history` windows, newest last, with `next` taken in. */
export function keepPacketWindows(previous: readonly PacketWindow[] | undefined, next: PacketWindow): PacketWindow[] {
  return [...(previous ?? []), next].slice(-INTERACTIVE_TRAFFIC.history);
}

const rate = (n: number): string => (n >= 10 ? String(Math.round(n)) : n.toFixed(1));

function variation(values: readonly number[]): number {
  const mean = values.reduce((sum, v) => sum + v, 0) / values.length;
  if (mean <= 0) return 0;
  const variance = values.reduce((sum, v) => sum + (v - mean) ** 2, 0) / values.length;
  return Math.sqrt(variance) / mean;
}

/**
 * Whether the newest window is a person's remote shell: "interactive traffic: …" in words, or
 * undefined when it is not (or cannot be told yet).
 */
export function interactiveTraffic(windows: readonly PacketWindow[]): string | undefined {
  const rule = INTERACTIVE_TRAFFIC;
  const now = windows.at(-1);
  if (!now || windows.length < rule.history) return undefined;
  const rx = now.receivePacketsPerSecond;
  const tx = now.transmitPacketsPerSecond;
  if (Math.min(rx, tx) < rule.minPacketsPerSecond || Math.max(rx, tx) > rule.maxPacketsPerSecond) return undefined;
  if (Math.max(rx, tx) / Math.min(rx, tx) > rule.maxImbalance) return undefined;
  const meanBytes = now.bytesPerSecond / (rx + tx);
  if (meanBytes > rule.maxMeanPacketBytes) return undefined;
  const cv = variation(windows.map((w) => w.receivePacketsPerSecond + w.transmitPacketsPerSecond));
  if (cv < rule.minVariation) return undefined;
  return `interactive traffic: ${rate(rx)} packets/s in, ${rate(tx)} out, ${Math.round(meanBytes)} B each, irregular (variation ${cv.toFixed(2)} over ${windows.length} readings)`;
}
