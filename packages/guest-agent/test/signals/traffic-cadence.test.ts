/**
 * The traffic classifier on series recorded from real programs behind a real sshd
 * (bench/capture-traffic.ts; fixtures/remote-sessions/traffic/, README.md there says how).
 *
 * Each series is replayed as the agent sees it: the ticker's reading once a second, one more
 * reading whenever a Report is sampled (every 10 s here), the classifier run at each Report over
 * the last ten minutes with the instant it last ran, and the session's interaction clock moved
 * to the newest person's burst as trackSessions moves it. Issue 39's captures were read every
 * 100 ms, so they are replayed at every phase of the one-second tick against the traffic (ten)
 * and of the Report against the tick (four): a sample that falls between a request and its
 * answer is among them.
 */
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import {
  binsFromReadings,
  classifyTraffic,
  STREAM_MIN_MS,
  type TrafficBin,
  type TrafficVerdict,
} from "../../src/signals/traffic-cadence.js";

interface Capture {
  name: string;
  sampleIntervalMs: number;
  samples: number[][];
}

interface Reading {
  atMs: number;
  bytes: number;
  calls: number;
}

const WINDOW_MS = 10 * 60_000;
const BIN_MS = 1_000;
const REPORT_MS = 10_000;

function load(name: string): Capture {
  return JSON.parse(
    readFileSync(new URL(`../fixtures/remote-sessions/traffic/${name}.json`, import.meta.url), "utf8"),
  ) as Capture;
}

const readingsOf = (data: Capture): Reading[] =>
  data.samples.map(([atMs, rchar, wchar, syscr, syscw]) => ({
    atMs: atMs!,
    bytes: rchar! + wchar!,
    calls: syscr! + syscw!,
  }));

function capture(name: string): TrafficBin[] {
  return binsFromReadings(readingsOf(load(name)));
}

/** The counters at `atMs`: the newest capture reading at or before it. */
function counterAt(readings: readonly Reading[], atMs: number): Reading {
  let lo = 0;
  let hi = readings.length - 1;
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if (readings[mid]!.atMs <= atMs) lo = mid;
    else hi = mid - 1;
  }
  return { ...readings[lo]!, atMs };
}

interface Replayed {
  atMs: number;
  verdict: TrafficVerdict;
  /** The session's interaction clock after this Report (trackSessions' lastInteractionMonoMs). */
  humanClockMs: number;
}

/**
 * The agent over a capture: ticks at tickPhaseMs + k s, Reports at reportPhaseMs + k·10 s after
 * the first tick, each adding its own reading; the interaction clock starts at the opening (0).
 */
function replayAgent(
  readings: readonly Reading[],
  tickPhaseMs: number,
  reportPhaseMs: number,
  forwardOnly: boolean,
  reportMs = REPORT_MS,
): Replayed[] {
  const end = readings[readings.length - 1]!.atMs;
  const ticks: number[] = [];
  for (let at = tickPhaseMs; at <= end; at += BIN_MS) ticks.push(at);
  const reports: number[] = [];
  for (let at = tickPhaseMs + reportPhaseMs + reportMs; at <= end; at += reportMs) reports.push(at);
  const times = [...new Set([...ticks, ...reports])].sort((a, b) => a - b);
  const taken = times.map((at) => counterAt(readings, at));
  const out: Replayed[] = [];
  let humanClockMs = 0;
  let judgedUntilMs: number | undefined;
  let from = 0;
  let upto = 0;
  for (const at of reports) {
    while (upto < taken.length && taken[upto]!.atMs <= at) upto++;
    while (taken[from]!.atMs < at - WINDOW_MS) from++;
    const verdict = classifyTraffic(binsFromReadings(taken.slice(from, upto)), BIN_MS, at, judgedUntilMs, forwardOnly);
    judgedUntilMs = at;
    if (verdict.lastHumanMs !== undefined && verdict.lastHumanMs > humanClockMs) humanClockMs = verdict.lastHumanMs;
    out.push({ atMs: at, verdict, humanClockMs });
  }
  return out;
}

const TICK_PHASES = [0, 100, 200, 300, 400, 500, 600, 700, 800, 900];
const REPORT_PHASES = [0, 250, 500, 750];

/** Every replay of a 100 ms capture (an `ssh -N` session): each tick phase against the traffic, each Report phase against the tick. */
function everyPhase(name: string): Array<{ phase: string; replayed: Replayed[] }> {
  const readings = readingsOf(load(name));
  return TICK_PHASES.flatMap((tick) =>
    REPORT_PHASES.map((report) => ({
      phase: `tick +${tick} ms, Report +${report} ms`,
      replayed: replayAgent(readings, tick, report, true),
    })),
  );
}

/** The verdict at every 10 s of a one-second capture, over the window the agent keeps, as the agent calls it. */
function replay(bins: readonly TrafficBin[], forwardOnly = false): Replayed[] {
  const out: Replayed[] = [];
  const end = bins[bins.length - 1]!.atMs;
  let humanClockMs = 0;
  let judgedUntilMs: number | undefined;
  for (let at = 10_000; at <= end; at += 10_000) {
    const window = bins.filter((bin) => bin.atMs <= at && bin.atMs > at - WINDOW_MS);
    const verdict = classifyTraffic(window, BIN_MS, at, judgedUntilMs, forwardOnly);
    judgedUntilMs = at;
    if (verdict.lastHumanMs !== undefined && verdict.lastHumanMs > humanClockMs) humanClockMs = verdict.lastHumanMs;
    out.push({ atMs: at, verdict, humanClockMs });
  }
  return out;
}

describe("issue 39: machine traffic against a server answering in 100–300 ms, at every phase of the agent's readings", () => {
  // How long a machine's traffic may count as a person's after it began: the cadence must have
  // repeated (five or six periods), a stream must have held STREAM_MIN_MS and a block more.
  for (const [name, settledMs, kinds] of [
    ["slow-page-10s", 80_000, ["timer", "slots"]],
    ["dashboard-refresh", 80_000, ["timer", "slots"]],
    ["poller-slot-jitter", 100_000, ["timer", "slots"]],
    ["heartbeat-1s", 90_000, ["stream"]],
  ] as const) {
    it(`${name}: a machine's once it has repeated; the interaction clock never moves after that`, () => {
      for (const { phase, replayed } of everyPhase(name)) {
        const last = replayed.at(-1)!;
        expect(last.humanClockMs, phase).toBeLessThanOrEqual(settledMs);
        expect(kinds, phase).toContain(last.verdict.cadence?.kind);
        // Recognised and never lost after.
        const settled = replayed.filter((r) => r.atMs > settledMs + 20_000);
        expect(
          settled.every((r) => r.verdict.cadence !== undefined),
          phase,
        ).toBe(true);
      }
    });
  }

  it("slow-page-10s: a Report read between a request and its answer judges neither half alone (blind spot A)", () => {
    // Without holding an incomplete burst, some phase puts the request alone as the newest burst.
    for (const { phase, replayed } of everyPhase("slow-page-10s"))
      for (const r of replayed.filter((r) => r.atMs > 100_000))
        expect(r.verdict.lastHumanMs, `${phase} at ${r.atMs}`).toBeUndefined();
  });

  it("poller-slot-jitter: slots ±25% make gaps of 5–15 s, and it is still a schedule (blind spot B)", () => {
    for (const { phase, replayed } of everyPhase("poller-slot-jitter")) {
      const period = replayed.at(-1)!.verdict.cadence?.periodMs ?? 0;
      expect(period, phase).toBeGreaterThan(8_000);
      expect(period, phase).toBeLessThan(12_000);
    }
  });

  it("page-stops: after the page stops refreshing, nothing it sent becomes a person's as it ages out (blind spot D)", () => {
    const stoppedAtMs = 200_000;
    for (const { phase, replayed } of everyPhase("page-stops")) {
      const last = replayed.at(-1)!;
      expect(last.humanClockMs, phase).toBeLessThanOrEqual(80_000);
      // The cadence is over: the session's newest traffic is no longer a machine's clock.
      expect(last.verdict.cadence, phase).toBeUndefined();
      expect(last.verdict.lastTrafficMs ?? 0, phase).toBeLessThan(stoppedAtMs + 10_000);
    }
  });

  it("Reports minutes apart: the bursts between them are judged against the whole cadence or stream", () => {
    // report-interval may be up to 10 minutes: a stream found over its last minute reaches back.
    for (const name of ["heartbeat-1s", "slow-page-10s", "dashboard-refresh", "poller-slot-jitter"]) {
      const readings = readingsOf(load(name));
      for (const reportMs of [120_000, 300_000])
        for (const tick of [0, 100, 500]) {
          const replayed = replayAgent(readings, tick, 250, true, reportMs);
          const phase = `${name}, Reports every ${reportMs / 1000} s, tick +${tick} ms`;
          expect(replayed.at(-1)!.humanClockMs, phase).toBeLessThanOrEqual(100_000);
        }
    }
  });

  it("heartbeat-1s with a person typing beside it: the keys are a person's, the heartbeat after them is not (blind spot C)", () => {
    const heartbeat = readingsOf(load("heartbeat-1s"));
    const typing = capture("typing-irregular");
    const typedFromMs = 200_000;
    const typedUntilMs = 320_000;
    // The typing session's bins added to the heartbeat's counters, as one session carrying both would count them.
    let extraBytes = 0;
    let extraCalls = 0;
    let next = 0;
    const merged = heartbeat.map((reading) => {
      while (next < typing.length && typing[next]!.atMs + typedFromMs <= reading.atMs) {
        if (typing[next]!.atMs + typedFromMs <= typedUntilMs) {
          extraBytes += typing[next]!.bytes;
          extraCalls += typing[next]!.calls;
        }
        next++;
      }
      return { atMs: reading.atMs, bytes: reading.bytes + extraBytes, calls: reading.calls + extraCalls };
    });
    const lastTyped =
      typedFromMs +
      Math.max(...typing.filter((t) => t.atMs + typedFromMs <= typedUntilMs && t.calls > 2).map((t) => t.atMs));
    for (const tick of [0, 300, 600]) {
      const replayed = replayAgent(merged, tick, 500, false);
      const end = replayed.at(-1)!;
      // The last keys move the clock (judged when their burst is complete, a second or two late)...
      expect(end.humanClockMs).toBeGreaterThanOrEqual(lastTyped - 2_000);
      // ...and the heartbeat after them does not, once its last minute is whole exchanges again
      // (STREAM_MIN_MS: until then the keys' bins keep it from being a stream, and it counts).
      expect(end.humanClockMs).toBeLessThanOrEqual(lastTyped + STREAM_MIN_MS + REPORT_MS);
      expect(end.verdict.cadence?.kind).toBe("stream");
    }
  });
});

describe("traffic cadence on recorded series (one reading a second)", () => {
  for (const [name, period] of [
    ["reload-10s", 10],
    ["reload-30s", 30],
    ["poller-10s", 10],
    ["poller-jitter", 10],
  ] as const) {
    it(`${name}: a regular cadence every ${period} s once it has repeated, and the human clock stays at the start`, () => {
      // Each an `ssh -N` session.
      const verdicts = replay(capture(name), true);
      const last = verdicts.at(-1)!.verdict;
      expect(last.cadence?.periodMs).toBeGreaterThanOrEqual(period * 1000 * 0.9);
      expect(last.cadence?.periodMs).toBeLessThanOrEqual(period * 1000 * 1.1);
      // Recognised within six repetitions and never lost after.
      const firstRegular = verdicts.findIndex((v) => v.verdict.cadence !== undefined);
      expect(firstRegular).toBeGreaterThanOrEqual(0);
      expect(verdicts[firstRegular]!.atMs).toBeLessThanOrEqual(period * 1000 * 6 + 10_000);
      expect(verdicts.slice(firstRegular).every((v) => v.verdict.cadence !== undefined)).toBe(true);
      // A person opened it: the only human moment left is near the beginning.
      expect(verdicts.at(-1)!.humanClockMs).toBeLessThanOrEqual(period * 1000 * 6 + 10_000);
    });
  }

  for (const name of ["typing-irregular", "typing-steady"]) {
    it(`${name}: never a cadence or a stream; the interaction clock follows the keys`, () => {
      const bins = capture(name);
      const verdicts = replay(bins);
      for (const { atMs, verdict, humanClockMs } of verdicts) {
        expect(verdict.cadence).toBeUndefined();
        // Keys have moved the clock once their burst is complete, or longer than an exchange (3 s):
        // at most four seconds late.
        const typedBefore = bins.filter((b) => b.calls > 2 && b.atMs <= atMs - 4 * BIN_MS).at(-1)?.atMs;
        if (typedBefore !== undefined) expect(humanClockMs).toBeGreaterThanOrEqual(typedBefore - BIN_MS);
      }
    });
  }

  it("typing-steady: ten minutes at one rhythm is a person's to the end", () => {
    const bins = capture("typing-steady");
    const busy = bins.filter((bin) => bin.calls > 2).length;
    expect(busy / bins.length).toBeGreaterThan(0.8);
    expect(replay(bins).at(-1)!.humanClockMs).toBeGreaterThan(bins.at(-1)!.atMs - 5_000);
  });

  it("keep-alives alone are no traffic at all, however the ticks fall", () => {
    expect(replay(capture("keepalive")).every(({ verdict }) => verdict.lastTrafficMs === undefined)).toBe(true);
    // ServerAliveInterval=1 against a one-second tick: no exchange, one or two in a bin (52 + 28 bytes each).
    const bins = [0, 1, 2, 1, 1, 0, 2, 1].map((exchanges, i) => ({
      atMs: (i + 1) * 1000,
      bytes: 80 * exchanges,
      calls: 2 * exchanges,
    }));
    expect(classifyTraffic(bins, BIN_MS, 8_000)).toEqual({});
    // One key through `cat` (4 calls: socket, pipe, pipe, socket) is traffic, even beside a keep-alive:
    // a person's once a bin of silence has been read after it.
    const quiet = { atMs: 2000, bytes: 0, calls: 0 };
    expect(classifyTraffic([{ atMs: 1000, bytes: 74, calls: 4 }, quiet], BIN_MS, 2000).lastHumanMs).toBe(1000);
    expect(classifyTraffic([{ atMs: 1000, bytes: 154, calls: 6 }, quiet], BIN_MS, 2000).lastHumanMs).toBe(1000);
    // Not before: it may be a request whose answer is on its way.
    expect(classifyTraffic([{ atMs: 1000, bytes: 74, calls: 4 }], BIN_MS, 1000).lastHumanMs).toBeUndefined();
  });

  it("a person typing while a page reloads itself is human until they stop; then the reloads are the machine's", () => {
    const reload = capture("reload-30s");
    const typing = capture("typing-irregular");
    const typedUntilMs = 180_000;
    // Both sessions' bins added, as one session carrying both would count them.
    const merged = reload.map((bin) => {
      const other = typing.find((t) => Math.abs(t.atMs - bin.atMs) < 500 && t.atMs <= typedUntilMs);
      return other ? { atMs: bin.atMs, bytes: bin.bytes + other.bytes, calls: bin.calls + other.calls } : bin;
    });
    const verdicts = replay(merged);
    const lastTyped = Math.max(...typing.filter((t) => t.atMs <= typedUntilMs && t.calls > 2).map((t) => t.atMs));
    for (const { atMs, humanClockMs } of verdicts) {
      if (atMs <= lastTyped) expect(humanClockMs).toBeGreaterThan(atMs - 200_000);
    }
    const end = verdicts.at(-1)!;
    expect(end.verdict.cadence?.periodMs).toBeGreaterThan(27_000);
    // The human clock ends at (or within one reload of) the last keys.
    expect(end.humanClockMs).toBeGreaterThanOrEqual(lastTyped - 1_000);
    expect(end.humanClockMs).toBeLessThanOrEqual(lastTyped + 31_000);
  });

  it("readings between two ticks (a Report's sample) do not lengthen a burst", () => {
    const bins = capture("poller-10s");
    // A reading half a second into every other second, as a Report sampled then would add.
    const doubled = bins.flatMap((bin, i) =>
      i % 2
        ? [
            { atMs: bin.atMs - 500, bytes: Math.floor(bin.bytes / 2), calls: Math.floor(bin.calls / 2) },
            {
              atMs: bin.atMs,
              bytes: bin.bytes - Math.floor(bin.bytes / 2),
              calls: bin.calls - Math.floor(bin.calls / 2),
            },
          ]
        : [bin],
    );
    expect(classifyTraffic(doubled, BIN_MS, doubled.at(-1)!.atMs).cadence?.periodMs).toBeCloseTo(10_000, -3);
  });

  it("a poller that stops is no longer a cadence, and its polls stay a machine's as they age out (blind spot D)", () => {
    const bins = capture("poller-10s");
    const end = bins.at(-1)!.atMs;
    expect(classifyTraffic(bins, BIN_MS, end).cadence).toBeDefined();
    expect(classifyTraffic(bins, BIN_MS, end + 60_000).cadence).toBeUndefined();
    // The agent keeps classifying while the window empties: the last polls were judged when they closed.
    let judgedUntilMs: number | undefined = end;
    let humanClockMs = 0;
    for (let at = end + 10_000; at <= end + WINDOW_MS; at += 10_000) {
      const quiet = [
        ...bins,
        ...Array.from({ length: (at - end) / 1000 }, (_, i) => ({ atMs: end + (i + 1) * 1000, bytes: 0, calls: 0 })),
      ];
      const window = quiet.filter((bin) => bin.atMs > at - WINDOW_MS);
      const verdict = classifyTraffic(window, BIN_MS, at, judgedUntilMs);
      judgedUntilMs = at;
      humanClockMs = Math.max(humanClockMs, verdict.lastHumanMs ?? 0);
    }
    expect(humanClockMs).toBe(0);
  });
});
