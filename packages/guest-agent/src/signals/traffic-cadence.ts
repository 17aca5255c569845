/**
 * Tells a machine's traffic from a person's in an SSH session, from the session process's I/O
 * counters sampled once a second: sizes and times only, never content. Pure.
 *
 * A machine talks on a clock: a page reloading itself, a poller, a health check send similar
 * requests at a regular period with silence in between (a cadence). A person's traffic follows
 * them: bursts of keys of every length, pauses of seconds to minutes, saves and clicks. The rule
 * (docs/signals/remote-sessions.md has it with the captures it was measured on):
 *
 * 1. A one-second bin is traffic unless it is keep-alives (every call a small whole packet,
 *    see isTrafficBin); consecutive traffic bins are one burst.
 * 2. A cadence is at least MIN_CADENCE_BURSTS short bursts (at most MAX_BURST_BINS bins) of
 *    similar size (within SIZE_TOLERANCE of the newest one's, or SIZE_SLACK_BYTES) whose starts
 *    are a period apart: each within PERIOD_TOLERANCE of the median gap (or 2 bins), or two
 *    periods (a missed poll); the period at least MIN_PERIOD_MS. It is the session's traffic
 *    while it goes on (the newest is no more than a period and its tolerance old). Bursts that
 *    do not fit (a click between two reloads) are left out of it, not a reason to reject it.
 * 3. Bursts in the cadence are a machine's; every other burst is a person's.
 *
 * A person typing at a steady rhythm for ten minutes does not make a cadence: keys a fraction
 * of a second apart fill every bin, so the traffic is one long burst, not short similar bursts
 * with silence between them. What this cannot tell: a machine that talks every second or
 * streams (that is one long burst too: a person), and a person who sends the same-sized thing
 * on a clock (a cadence: weak).
 */
import { KEEPALIVE_BYTES_PER_CALL } from "./remote-sessions-parse.js";

/** One sample bin: what the session process moved since the previous reading. */
export interface TrafficBin {
  /** Monotonic time of the reading that closed the bin. */
  atMs: number;
  bytes: number;
  calls: number;
}

/** Consecutive traffic bins. */
export interface Burst {
  startMs: number;
  endMs: number;
  bytes: number;
  bins: number;
}

export interface Cadence {
  periodMs: number;
  /** Bursts of the window that belong to it. */
  bursts: number;
  meanBurstBytes: number;
  firstMs: number;
  lastMs: number;
}

export interface TrafficVerdict {
  /** The newest burst a person made (outside any cadence), if the window has one. */
  lastHumanMs?: number;
  /** The newest burst of any kind. */
  lastTrafficMs?: number;
  /** Set while the window's newest traffic is a machine's cadence. */
  cadence?: Cadence;
}

/** The smallest SSH packet on the wire (a keep-alive reply with chacha20-poly1305: 28 bytes). */
const SMALLEST_PACKET_BYTES = 28;
export const MIN_CADENCE_BURSTS = 5;
export const MIN_PERIOD_MS = 3_000;
/** Jitter of a poller's timer, a browser's reload: each gap within 30% of the median period. */
export const PERIOD_TOLERANCE = 0.3;
/** The same request's exchange varies by headers, timestamps, TCP chunking: 20%. */
export const SIZE_TOLERANCE = 0.2;
export const SIZE_SLACK_BYTES = 160;
/** A request and its reply take a second or two; a person's typing fills many seconds in a row: at most 3 bins' time. */
export const MAX_BURST_BINS = 3;
/** How many of the newest bursts are tried as the cadence's reference (a person's click may be newest). */
const REFERENCE_CANDIDATES = 4;

/** Bins from successive cumulative readings [atMs, bytes, calls]; a counter that went back starts over. Pure. */
export function binsFromReadings(
  readings: ReadonlyArray<{ atMs: number; bytes: number; calls: number }>,
): TrafficBin[] {
  const bins: TrafficBin[] = [];
  for (let i = 1; i < readings.length; i++) {
    const previous = readings[i - 1]!;
    const current = readings[i]!;
    const bytes = current.bytes - previous.bytes;
    const calls = current.calls - previous.calls;
    if (bytes < 0 || calls < 0) continue;
    bins.push({ atMs: current.atMs, bytes, calls });
  }
  return bins;
}

/**
 * Whether a bin is more than keep-alives. Keep-alives are whole small packets, every call
 * SMALLEST_PACKET_BYTES to KEEPALIVE_BYTES_PER_CALL; a bin of them (one exchange or several,
 * as the ticks fall) is not traffic. Payload moves more per call; a command's keystrokes move
 * less (a byte through its pipes for every packet on the socket).
 */
export function isTrafficBin(bin: TrafficBin): boolean {
  if (bin.calls === 0) return false;
  const perCall = bin.bytes / bin.calls;
  return perCall > KEEPALIVE_BYTES_PER_CALL || perCall < SMALLEST_PACKET_BYTES;
}

/** Consecutive traffic bins merged into bursts; binMs is the sampling interval. Pure. */
export function burstsOf(bins: readonly TrafficBin[], binMs: number): Burst[] {
  const bursts: Burst[] = [];
  let current: Burst | undefined;
  let previousAtMs = Number.NEGATIVE_INFINITY;
  for (const bin of bins) {
    const traffic = isTrafficBin(bin);
    // A reading that came late (a loaded machine) still continues the burst it belongs to; one
    // taken between two ticks (a Report's sample) makes a shorter bin, not a longer burst.
    const adjacent = bin.atMs - previousAtMs <= binMs * 1.5;
    const startMs = adjacent ? previousAtMs : bin.atMs - binMs;
    previousAtMs = bin.atMs;
    if (!traffic) {
      current = undefined;
      continue;
    }
    if (current && adjacent) {
      current.endMs = bin.atMs;
      current.bytes += bin.bytes;
      current.bins++;
    } else {
      current = { startMs, endMs: bin.atMs, bytes: bin.bytes, bins: 1 };
      bursts.push(current);
    }
  }
  return bursts;
}

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

const similarSize = (a: number, b: number): boolean =>
  Math.abs(a - b) <= Math.max(SIZE_TOLERANCE * b, SIZE_SLACK_BYTES);

/** How many of the newest similar bursts the period is estimated from. */
const PERIOD_SAMPLE = 20;

/**
 * The cadence ending with `reference`: walking back over the short bursts of its size, each one
 * a period before the last one kept (or two: a missed poll) is the cadence's; one that comes
 * sooner is something else in between (a click) and is skipped; a longer silence is where the
 * cadence began.
 */
function cadenceEndingAt(bursts: readonly Burst[], reference: number, binMs: number): Burst[] | undefined {
  const ref = bursts[reference]!;
  const short = (burst: Burst): boolean => burst.endMs - burst.startMs <= MAX_BURST_BINS * binMs;
  if (!short(ref)) return undefined;
  const similar = bursts.slice(0, reference + 1).filter((burst) => short(burst) && similarSize(burst.bytes, ref.bytes));
  if (similar.length < MIN_CADENCE_BURSTS) return undefined;
  const recent = similar.slice(-PERIOD_SAMPLE);
  const period = median(recent.slice(1).map((burst, i) => burst.startMs - recent[i]!.startMs));
  if (period < MIN_PERIOD_MS) return undefined;
  // Bins quantize each start by up to one bin either way.
  const tolerance = Math.max(PERIOD_TOLERANCE * period, 2 * binMs) + binMs;
  const run = [ref];
  let kept = ref;
  let singleGaps = 0;
  for (let i = similar.length - 2; i >= 0; i--) {
    const gap = kept.startMs - similar[i]!.startMs;
    const single = Math.abs(gap - period) <= tolerance;
    if (single || Math.abs(gap - 2 * period) <= 2 * tolerance) {
      run.unshift(similar[i]!);
      kept = similar[i]!;
      if (single) singleGaps++;
    } else if (gap > period + tolerance) break;
  }
  // Missed polls are forgiven, but the cadence itself must have been seen.
  return singleGaps >= MIN_CADENCE_BURSTS - 1 ? run : undefined;
}

/** Classifies a window of bins (oldest first) at nowMs. Pure. */
export function classifyTraffic(bins: readonly TrafficBin[], binMs: number, nowMs: number): TrafficVerdict {
  const bursts = burstsOf(bins, binMs);
  if (bursts.length === 0) return {};
  const lastTrafficMs = bursts[bursts.length - 1]!.endMs;
  let stopped: Burst[] | undefined;
  for (let reference = bursts.length - 1; reference >= Math.max(0, bursts.length - REFERENCE_CANDIDATES); reference--) {
    const run = cadenceEndingAt(bursts, reference, binMs);
    if (!run) continue;
    const gaps = run.slice(1).map((burst, i) => burst.startMs - run[i]!.startMs);
    // A missed poll is a double gap: the period is the median of the single ones.
    const periodMs = median(gaps.filter((gap) => gap < 1.5 * median(gaps)));
    const last = run[run.length - 1]!;
    // A cadence that stopped (the tab was closed) is no longer the session's traffic, but
    // its bursts were still a machine's.
    if (nowMs - last.endMs > periodMs * (1 + PERIOD_TOLERANCE) + 2 * binMs) {
      stopped ??= run;
      continue;
    }
    const cadence: Cadence = {
      periodMs,
      bursts: run.length,
      meanBurstBytes: run.reduce((sum, burst) => sum + burst.bytes, 0) / run.length,
      firstMs: run[0]!.startMs,
      lastMs: last.endMs,
    };
    return { lastTrafficMs, cadence, ...lastHumanOutside(bursts, run) };
  }
  return { lastTrafficMs, ...lastHumanOutside(bursts, stopped ?? []) };
}

function lastHumanOutside(bursts: readonly Burst[], machine: readonly Burst[]): { lastHumanMs?: number } {
  const theirs = new Set(machine);
  const human = bursts.filter((burst) => !theirs.has(burst));
  const last = human[human.length - 1];
  return last ? { lastHumanMs: last.endMs } : {};
}
