/**
 * Tells a machine's traffic from a person's in an SSH session, from the session process's I/O
 * counters (read once a second by the agent's ticker, and once more whenever a Report is
 * sampled): sizes and times only, never content. Pure.
 *
 * A machine talks on a clock: a page reloading itself, a poller, a dashboard's panels, a
 * WebSocket heartbeat send the same exchange again and again. A person's traffic follows them:
 * bursts of keys of every length, pauses of seconds to minutes. The rule
 * (docs/signals/remote-sessions.md has it with the captures it was measured on):
 *
 * 1. A bin is traffic unless it is keep-alives (every call a small whole packet, see
 *    isTrafficBin). Traffic bins are one burst unless a whole bin's time of silence lies
 *    between them: an answer that comes 300 ms after its request, whatever the phase of the
 *    readings, belongs to the request's burst.
 * 2. A burst is judged once: when it is complete (a whole bin of silence has been read after
 *    it) or, still going, once it is longer than any exchange of a cadence (MAX_BURST_BINS):
 *    a request whose answer has not come yet is never judged on its own (blind spot A), and a
 *    burst judged a machine's is not judged again when the cadence around it has aged out of
 *    the window (blind spot D). The caller passes when it last classified (judgedUntilMs).
 * 3. A cadence is short bursts of similar size on a clock, the newest no more than a period
 *    and its tolerance old. Two clocks are recognised, whichever explains more bursts:
 *    - a timer re-armed after each exchange (setInterval, `sleep 10` in a loop): each gap within
 *      PERIOD_TOLERANCE of the period, or two periods (a missed poll);
 *    - a schedule of slots (cron-like, "every 10 s ± jitter"): the starts fit a lattice
 *      phase + k·period, fitted by least squares, each within PERIOD_TOLERANCE of its slot,
 *      however the jitter of two neighbours adds up in their gap (blind spot B).
 *    Bursts that fit neither (a click between two reloads) are left out, not a reason to reject it.
 * 4. A stream is a clock faster than the bins (a heartbeat every second, blind spot C): over
 *    the last STREAM_MIN_MS nine bins in ten hold one or two of one exchange (the smallest bin
 *    size that does; two neighbours may share one that a reading cut in two), no more than one
 *    and a quarter a bin's time, every STREAM_BLOCK_MS the same count, and the messages carry
 *    payload (more than a packet a call). It reaches back over the bins before that which are
 *    its exchanges too. A bin that is not whole exchanges (keys typed beside it) is a person's.
 * 5. Bursts of a cadence and bins of a stream are a machine's; every other burst is a person's.
 *    In a session that only forwards (forwardOnly), less than a packet a call is sshd's
 *    bookkeeping of a forwarded connection, not traffic (isForwardTrafficBin).
 *
 * A person typing at a steady rhythm does not make either: keys move a few bytes a call, fill
 * the bins unevenly and pause. What this cannot tell: a machine that streams data of varying
 * size (a log followed with `tail -f`: a person), direction (sshd relays both ways in one
 * process), and a person who sends the same thing on a clock (a machine: weak).
 */
import { KEEPALIVE_BYTES_PER_CALL } from "./remote-sessions-parse.js";

/** One sample bin: what the session process moved since the previous reading. */
export interface TrafficBin {
  /** Monotonic time of the reading that closed the bin. */
  atMs: number;
  bytes: number;
  calls: number;
}

/** Traffic bins with less than a bin's time of silence between them. */
export interface Burst {
  startMs: number;
  endMs: number;
  bytes: number;
  bins: number;
}

export interface Cadence {
  periodMs: number;
  /** Bursts of the window that belong to it (for a stream: its exchanges). */
  bursts: number;
  meanBurstBytes: number;
  firstMs: number;
  lastMs: number;
  /** Which clock: re-armed timer, slots, or a stream faster than the bins. */
  kind: "timer" | "slots" | "stream";
}

export interface TrafficVerdict {
  /** The newest burst judged now that is a person's, if any. */
  lastHumanMs?: number;
  /** The newest burst of any kind. */
  lastTrafficMs?: number;
  /** Set while the window's newest traffic is a machine's cadence or stream. */
  cadence?: Cadence;
}

/** The smallest SSH packet on the wire (a keep-alive reply with chacha20-poly1305: 28 bytes). */
const SMALLEST_PACKET_BYTES = 28;
export const MIN_CADENCE_BURSTS = 5;
/** Below three bins a clock's exchanges are no longer separate bursts: that is a stream's. */
export const MIN_PERIOD_MS = 3_000;
/** Jitter of a timer, a browser's reload, a slot: within 30% of the period. */
export const PERIOD_TOLERANCE = 0.3;
/** The same request's exchange varies by headers, timestamps, TCP chunking: 20%. */
export const SIZE_TOLERANCE = 0.2;
export const SIZE_SLACK_BYTES = 160;
/** A request and its reply take a second or two (three with a slow answer); a person's typing fills many seconds in a row. */
export const MAX_BURST_BINS = 3;
/** How many of the newest bursts are tried as the cadence's reference (a person's click may be newest). */
const REFERENCE_CANDIDATES = 4;
/** A stream must hold this long before its bins are a machine's: a heartbeat's first minute is a person's opening it. */
export const STREAM_MIN_MS = 60_000;
/** The stream's steadiness is counted over blocks this long. */
export const STREAM_BLOCK_MS = 10_000;
/** A bin of whole exchanges is within this share of them (or SIZE_SLACK_BYTES / 4): a heartbeat repeats its message to the byte or nearly, and one key (74 bytes through `cat`) beside it is more. */
const EXCHANGE_TOLERANCE = 0.05;
/** A slot lattice needs this many bursts (more than a re-armed timer: it may choose its phase). */
const MIN_SLOT_BURSTS = 6;
/** ...and this share of its slots filled. */
const MIN_SLOTS_FILLED = 0.75;

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

/**
 * The same for a session that only forwards ports (`ssh -N`): it runs no command, so nothing
 * goes through pipes a byte at a time, and less than a packet per call is sshd's bookkeeping of
 * a forwarded connection (the server closing an idle keep-alive connection five or sixty
 * seconds after each exchange: a read of end-of-file and a small channel message), not payload.
 */
export function isForwardTrafficBin(bin: TrafficBin): boolean {
  return bin.calls > 0 && bin.bytes / bin.calls > KEEPALIVE_BYTES_PER_CALL;
}

type TrafficTest = (bin: TrafficBin) => boolean;

/** When a bin began: the previous reading, or one bin before its end when readings were missed (a stalled agent). */
function binStarts(bins: readonly TrafficBin[], binMs: number): number[] {
  return bins.map((bin, i) => {
    const previous = bins[i - 1]?.atMs;
    return previous !== undefined && bin.atMs - previous <= binMs * 1.5 ? previous : bin.atMs - binMs;
  });
}

/** A whole bin's time of silence: a tick's interval, less the few milliseconds a timer runs early or late. */
const silenceMs = (binMs: number): number => 0.9 * binMs;

/** Traffic bins merged into bursts: less than a bin's time of silence between them is one exchange. Pure. */
export function burstsOf(bins: readonly TrafficBin[], binMs: number, isTraffic: TrafficTest = isTrafficBin): Burst[] {
  const starts = binStarts(bins, binMs);
  const bursts: Burst[] = [];
  let current: Burst | undefined;
  bins.forEach((bin, i) => {
    if (!isTraffic(bin)) return;
    if (current && starts[i]! - current.endMs < silenceMs(binMs)) {
      current.endMs = bin.atMs;
      current.bytes += bin.bytes;
      current.bins++;
    } else {
      current = { startMs: starts[i]!, endMs: bin.atMs, bytes: bin.bytes, bins: 1 };
      bursts.push(current);
    }
  });
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

const isShort = (burst: Burst, binMs: number): boolean => burst.endMs - burst.startMs <= MAX_BURST_BINS * binMs;

/**
 * A re-armed timer ending with `reference`: walking back over the short bursts of its size,
 * each one a period before the last one kept (or two: a missed poll) is the cadence's; one
 * that comes sooner is something else in between (a click) and is skipped; a longer silence is
 * where the cadence began.
 */
function timerEndingAt(similar: readonly Burst[], period: number, binMs: number): Burst[] | undefined {
  // Bins quantize each start by up to one bin either way.
  const tolerance = Math.max(PERIOD_TOLERANCE * period, 2 * binMs) + binMs;
  const ref = similar[similar.length - 1]!;
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

/** Least-squares line start = phase + slot · period over the kept bursts. */
function fitLattice(slots: readonly number[], starts: readonly number[]): { phase: number; period: number } {
  const n = slots.length;
  const meanK = slots.reduce((a, b) => a + b, 0) / n;
  const meanS = starts.reduce((a, b) => a + b, 0) / n;
  let sxy = 0;
  let sxx = 0;
  for (let i = 0; i < n; i++) {
    sxy += (slots[i]! - meanK) * (starts[i]! - meanS);
    sxx += (slots[i]! - meanK) ** 2;
  }
  const period = sxx > 0 ? sxy / sxx : 0;
  return { phase: meanS - period * meanK, period };
}

/**
 * A schedule of slots ending with `reference`: each earlier burst is given the slot its start
 * is nearest to on the lattice fitted so far (counting back from the reference's slot 0), kept
 * when it lies within the tolerance of that slot and the slot is not taken; the lattice is
 * refitted with each burst kept, so a period estimated a little off does not drift across the
 * window. Three empty slots in a row are where the schedule began.
 */
function slotsEndingAt(similar: readonly Burst[], period: number, binMs: number): Burst[] | undefined {
  const ref = similar[similar.length - 1]!;
  const kept: Burst[] = [ref];
  const slots = [0];
  let lattice = { phase: ref.startMs, period };
  for (let i = similar.length - 2; i >= 0; i--) {
    const burst = similar[i]!;
    const slot = Math.round((burst.startMs - lattice.phase) / lattice.period);
    const lastSlot = slots[0]!;
    if (slot >= lastSlot) continue;
    if (lastSlot - slot > 3) break;
    const tolerance = PERIOD_TOLERANCE * lattice.period + binMs;
    if (Math.abs(burst.startMs - (lattice.phase + slot * lattice.period)) > tolerance) continue;
    kept.unshift(burst);
    slots.unshift(slot);
    if (kept.length >= 3) {
      const fitted = fitLattice(
        slots,
        kept.map((b) => b.startMs),
      );
      if (fitted.period >= MIN_PERIOD_MS) lattice = fitted;
    }
  }
  const filled = kept.length / (1 - slots[0]!);
  if (kept.length < MIN_SLOT_BURSTS || filled < MIN_SLOTS_FILLED) return undefined;
  // Every kept burst within the tolerance of the final lattice, not only of the one it was kept by.
  const tolerance = PERIOD_TOLERANCE * lattice.period + binMs;
  const fits = kept.every((b, i) => Math.abs(b.startMs - (lattice.phase + slots[i]! * lattice.period)) <= tolerance);
  return fits ? kept : undefined;
}

/** The cadence (either clock) whose newest burst is `reference`, or undefined. */
function cadenceEndingAt(
  bursts: readonly Burst[],
  reference: number,
  binMs: number,
): { run: Burst[]; kind: "timer" | "slots" } | undefined {
  const ref = bursts[reference]!;
  if (!isShort(ref, binMs)) return undefined;
  const similar = bursts
    .slice(0, reference + 1)
    .filter((burst) => isShort(burst, binMs) && similarSize(burst.bytes, ref.bytes));
  if (similar.length < MIN_CADENCE_BURSTS) return undefined;
  const recent = similar.slice(-PERIOD_SAMPLE);
  const period = median(recent.slice(1).map((burst, i) => burst.startMs - recent[i]!.startMs));
  if (period < MIN_PERIOD_MS) return undefined;
  const timer = timerEndingAt(similar, period, binMs);
  const slots = slotsEndingAt(similar, period, binMs);
  if (slots && (!timer || slots.length > timer.length)) return { run: slots, kind: "slots" };
  return timer ? { run: timer, kind: "timer" } : undefined;
}

/** Bins of at least 0.9 bin each: a reading taken between two ticks (a Report's) is added to the next bin. */
function wholeBins(bins: readonly TrafficBin[], binMs: number): Array<TrafficBin & { startMs: number }> {
  const starts = binStarts(bins, binMs);
  const out: Array<TrafficBin & { startMs: number }> = [];
  let pending: (TrafficBin & { startMs: number }) | undefined;
  bins.forEach((bin, i) => {
    const merged = pending
      ? { startMs: pending.startMs, atMs: bin.atMs, bytes: pending.bytes + bin.bytes, calls: pending.calls + bin.calls }
      : { startMs: starts[i]!, ...bin };
    if (merged.atMs - merged.startMs >= 0.9 * binMs) {
      out.push(merged);
      pending = undefined;
    } else pending = merged;
  });
  if (pending) out.push(pending);
  return out;
}

interface Stream {
  exchangeBytes: number;
  /** The stream's bins: their traffic is the machine's. */
  fromMs: number;
  toMs: number;
  /** Exchanges in its last minute, and the period they make. */
  exchanges: number;
  periodMs: number;
  /** Bins inside the span that are not whole exchanges: a person's, at their end times. */
  misfitsAtMs: number[];
}

/**
 * The stream the newest bins are, if any. Over the last STREAM_MIN_MS (no more than three bins
 * of silence in it): the exchange is the smallest bin size that most bins are whole multiples
 * of (1–3: a clock of a third of a bin or slower; two neighbouring bins may share one exchange
 * that a reading cut in two); at most one bin in ten is not; and every STREAM_BLOCK_MS holds the
 * same count of exchanges (to within the edges' and a timer's drift). A person's steady typing
 * moves a few bytes per call (keys, not messages) and pauses; keys beside a heartbeat are bins
 * that are not whole exchanges.
 */
function streamAtEnd(bins: readonly TrafficBin[], binMs: number, isTraffic: TrafficTest): Stream | undefined {
  const whole = wholeBins(bins, binMs);
  if (whole.length === 0) return undefined;
  const endMs = whole[whole.length - 1]!.atMs;
  let first = whole.length;
  let silentMs = 0;
  for (let i = whole.length - 1; i >= 0 && whole[i]!.atMs > endMs - STREAM_MIN_MS; i--) {
    const bin = whole[i]!;
    if (isTraffic(bin)) silentMs = 0;
    else silentMs += bin.atMs - bin.startMs;
    if (silentMs > 3 * binMs) return undefined;
    first = i;
  }
  const span = whole.slice(first);
  const traffic = span.filter(isTraffic);
  if (traffic.length < 3 || endMs - span[0]!.startMs < STREAM_MIN_MS - binMs) return undefined;
  // A machine's messages carry payload, more than a packet's worth per read or write; keys
  // typed through a command move a few bytes per call (a byte through each pipe): a steady
  // typist is never a stream, whatever their rhythm.
  if (median(traffic.map((bin) => bin.bytes / bin.calls)) <= KEEPALIVE_BYTES_PER_CALL) return undefined;
  const candidates = [...new Set(traffic.map((bin) => bin.bytes))].sort((a, b) => a - b).slice(0, 6);
  for (const exchangeBytes of candidates) {
    const stream = streamOf(span, exchangeBytes, binMs, isTraffic);
    if (stream) return reachBack(whole, first, stream, binMs, isTraffic);
  }
  return undefined;
}

/** How many exchanges of this size `bytes` is, if a whole number: at most two in one bin, four in two that share a cut one. */
function wholeCounter(exchangeBytes: number): (bytes: number, most?: number) => number | undefined {
  const slack = Math.max(EXCHANGE_TOLERANCE * exchangeBytes, SIZE_SLACK_BYTES / 4);
  return (bytes, most = 2) => {
    const n = Math.round(bytes / exchangeBytes);
    return n >= 1 && n <= most && Math.abs(bytes - n * exchangeBytes) <= slack * n ? n : undefined;
  };
}

/**
 * A stream found over its last minute reaches back over the bins before it that are its
 * exchanges too (whole, or cut in two between neighbours), to the first that is not or the
 * first silence longer than three bins: Reports minutes apart judge the bursts between them
 * against the stream they belonged to, not only against its last minute.
 */
function reachBack(
  whole: ReadonlyArray<TrafficBin & { startMs: number }>,
  first: number,
  stream: Stream,
  binMs: number,
  isTraffic: TrafficTest,
): Stream {
  const wholeCount = wholeCounter(stream.exchangeBytes);
  let fromMs = stream.fromMs;
  let silentMs = 0;
  for (let i = first - 1; i >= 0; i--) {
    const bin = whole[i]!;
    if (!isTraffic(bin)) {
      silentMs += bin.atMs - bin.startMs;
      if (silentMs > 3 * binMs) break;
      continue;
    }
    silentMs = 0;
    if (wholeCount(bin.bytes) !== undefined) fromMs = bin.startMs;
    else {
      const earlier = whole[i - 1];
      if (!earlier || !isTraffic(earlier) || wholeCount(bin.bytes + earlier.bytes, 4) === undefined) break;
      fromMs = earlier.startMs;
      i--;
    }
  }
  return { ...stream, fromMs };
}

/** The span as a stream of exchanges of this size, or undefined. */
function streamOf(
  span: ReadonlyArray<TrafficBin & { startMs: number }>,
  exchangeBytes: number,
  binMs: number,
  isTraffic: TrafficTest,
): Stream | undefined {
  const wholeCount = wholeCounter(exchangeBytes);
  const counts: number[] = span.map(() => 0);
  const misfitsAtMs: number[] = [];
  let trafficBins = 0;
  for (let i = 0; i < span.length; i++) {
    const bin = span[i]!;
    if (!isTraffic(bin)) continue;
    trafficBins++;
    const n = wholeCount(bin.bytes);
    if (n !== undefined) {
      counts[i] = n;
      continue;
    }
    const next = span[i + 1];
    const paired = next && isTraffic(next) ? wholeCount(bin.bytes + next.bytes, 4) : undefined;
    if (paired !== undefined && wholeCount(next!.bytes) === undefined) {
      counts[i + 1] = paired;
      trafficBins++;
      i++;
      continue;
    }
    misfitsAtMs.push(bin.atMs);
  }
  if (misfitsAtMs.length > trafficBins / 10) return undefined;
  const spanStart = span[0]!.startMs;
  const endMs = span[span.length - 1]!.atMs;
  // One exchange a bin's time or fewer (two fall in one bin when the next gets none): two in
  // every bin is a smaller unit counted in pairs (a typist's keys), not this clock.
  const exchanges = counts.reduce((a, b) => a + b, 0);
  if (exchanges > 1.25 * ((endMs - spanStart) / binMs)) return undefined;
  const perBlock = new Map<number, number>();
  const blocks = Math.floor((endMs - spanStart) / STREAM_BLOCK_MS);
  span.forEach((bin, i) => {
    const block = Math.floor((bin.atMs - spanStart) / STREAM_BLOCK_MS);
    if (block < blocks) perBlock.set(block, (perBlock.get(block) ?? 0) + counts[i]!);
  });
  const perBlockCounts = Array.from({ length: blocks }, (_, block) => perBlock.get(block) ?? 0);
  if (perBlockCounts.length < 2) return undefined;
  const typical = median(perBlockCounts);
  // Slower than a period of MIN_PERIOD_MS, its exchanges are bursts: the cadence rule's.
  if (typical < STREAM_BLOCK_MS / MIN_PERIOD_MS) return undefined;
  // A block holds its share to within one exchange at each edge (and a tenth for a timer's
  // drift); one block may be off (a browser that held its timers back for a few seconds).
  const tolerance = 2 + 0.1 * typical;
  if (perBlockCounts.filter((count) => Math.abs(count - typical) > tolerance).length > 1) return undefined;
  return {
    exchangeBytes,
    fromMs: spanStart,
    toMs: endMs,
    exchanges,
    periodMs: (endMs - spanStart) / Math.max(1, exchanges),
    misfitsAtMs,
  };
}

/**
 * Classifies a window of bins (oldest first) at nowMs. judgedUntilMs: when the caller last
 * classified this session (bursts complete by then were judged then); undefined: every burst
 * is judged now. forwardOnly: the session runs no command (see isForwardTrafficBin). Pure.
 */
export function classifyTraffic(
  bins: readonly TrafficBin[],
  binMs: number,
  nowMs: number,
  judgedUntilMs?: number,
  forwardOnly = false,
): TrafficVerdict {
  const isTraffic = forwardOnly ? isForwardTrafficBin : isTrafficBin;
  const bursts = burstsOf(bins, binMs, isTraffic);
  if (bursts.length === 0) return {};
  const lastTrafficMs = bursts[bursts.length - 1]!.endMs;
  const lastReadingMs = bins[bins.length - 1]!.atMs;
  const machine = new Set<Burst>();
  let cadence: Cadence | undefined;
  for (let reference = bursts.length - 1; reference >= Math.max(0, bursts.length - REFERENCE_CANDIDATES); reference--) {
    const found = cadenceEndingAt(bursts, reference, binMs);
    if (!found) continue;
    const { run, kind } = found;
    for (const burst of run) machine.add(burst);
    const gaps = run.slice(1).map((burst, i) => burst.startMs - run[i]!.startMs);
    // A missed poll is a double gap: the period is the median of the single ones.
    const periodMs = median(gaps.filter((gap) => gap < 1.5 * median(gaps)));
    const last = run[run.length - 1]!;
    // A cadence that stopped (the tab was closed) is no longer the session's traffic, but
    // its bursts were still a machine's; so are those of a second clock beside it (a page's
    // reload and what its connection does a few seconds after each): every candidate is tried.
    if (nowMs - last.endMs > periodMs * (1 + PERIOD_TOLERANCE) + 2 * binMs) continue;
    const meanBurstBytes = run.reduce((sum, burst) => sum + burst.bytes, 0) / run.length;
    // Of two clocks going on, the one that moves more is shown.
    if (cadence && cadence.meanBurstBytes >= meanBurstBytes) continue;
    cadence = { periodMs, bursts: run.length, meanBurstBytes, firstMs: run[0]!.startMs, lastMs: last.endMs, kind };
  }
  const stream = streamAtEnd(bins, binMs, isTraffic);
  if (stream && !cadence && lastReadingMs - stream.toMs < 2 * binMs)
    cadence = {
      periodMs: stream.periodMs,
      bursts: stream.exchanges,
      meanBurstBytes: stream.exchangeBytes,
      firstMs: stream.fromMs,
      lastMs: stream.toMs,
      kind: "stream",
    };
  let lastHumanMs: number | undefined;
  for (const burst of bursts) {
    if (machine.has(burst)) continue;
    const complete = lastReadingMs - burst.endMs >= silenceMs(binMs);
    const longerThanAnExchange = burst.endMs - burst.startMs > MAX_BURST_BINS * binMs;
    if (!complete && !longerThanAnExchange) continue;
    // Judged before: a complete burst the previous classification had read a bin of silence after.
    if (judgedUntilMs !== undefined && complete && judgedUntilMs - burst.endMs >= silenceMs(binMs)) continue;
    let humanAtMs: number | undefined = burst.endMs;
    if (stream && burst.endMs > stream.fromMs) {
      // Inside a stream only the bins that were not whole exchanges are a person's.
      const misfits = stream.misfitsAtMs.filter((at) => at > burst.startMs && at <= burst.endMs);
      humanAtMs = misfits[misfits.length - 1];
    }
    if (humanAtMs !== undefined) lastHumanMs = Math.max(lastHumanMs ?? humanAtMs, humanAtMs);
  }
  return { lastTrafficMs, ...(cadence ? { cadence } : {}), ...(lastHumanMs !== undefined ? { lastHumanMs } : {}) };
}
