/**
 * The traffic classifier on series recorded from real programs behind a real sshd
 * (bench/capture-traffic.ts; fixtures/remote-sessions/traffic/, README.md there says how).
 * Each series is replayed as the agent sees it: one reading a second, classified over the
 * last ten minutes at every 10 s of the capture.
 */
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import {
  binsFromReadings,
  classifyTraffic,
  type TrafficBin,
  type TrafficVerdict,
} from "../../src/signals/traffic-cadence.js";

interface Capture {
  name: string;
  samples: number[][];
}

function capture(name: string): TrafficBin[] {
  const data = JSON.parse(
    readFileSync(new URL(`../fixtures/remote-sessions/traffic/${name}.json`, import.meta.url), "utf8"),
  ) as Capture;
  return binsFromReadings(
    data.samples.map(([atMs, rchar, wchar, syscr, syscw]) => ({
      atMs: atMs!,
      bytes: rchar! + wchar!,
      calls: syscr! + syscw!,
    })),
  );
}

const WINDOW_MS = 10 * 60_000;
const BIN_MS = 1_000;

/** The verdict at every 10 s of the series, over the window the agent keeps. */
function replay(bins: readonly TrafficBin[]): Array<{ atMs: number; verdict: TrafficVerdict }> {
  const out: Array<{ atMs: number; verdict: TrafficVerdict }> = [];
  const end = bins[bins.length - 1]!.atMs;
  for (let at = 10_000; at <= end; at += 10_000) {
    const window = bins.filter((bin) => bin.atMs <= at && bin.atMs > at - WINDOW_MS);
    out.push({ atMs: at, verdict: classifyTraffic(window, BIN_MS, at) });
  }
  return out;
}

describe("traffic cadence on recorded series", () => {
  for (const [name, period] of [
    ["reload-10s", 10],
    ["reload-30s", 30],
    ["poller-10s", 10],
    ["poller-jitter", 10],
  ] as const) {
    it(`${name}: a regular cadence every ${period} s once it has repeated, and the human clock stays at the start`, () => {
      const verdicts = replay(capture(name));
      const last = verdicts.at(-1)!.verdict;
      expect(last.cadence?.periodMs).toBeGreaterThanOrEqual(period * 1000 * 0.9);
      expect(last.cadence?.periodMs).toBeLessThanOrEqual(period * 1000 * 1.1);
      // Recognised within six repetitions and never lost after.
      const firstRegular = verdicts.findIndex((v) => v.verdict.cadence !== undefined);
      expect(firstRegular).toBeGreaterThanOrEqual(0);
      expect(verdicts[firstRegular]!.atMs).toBeLessThanOrEqual(period * 1000 * 6 + 10_000);
      expect(verdicts.slice(firstRegular).every((v) => v.verdict.cadence !== undefined)).toBe(true);
      // A person opened it: the only human moment left is near the beginning.
      expect(last.lastHumanMs ?? 0).toBeLessThanOrEqual(period * 1000 * 6 + 10_000);
    });
  }

  for (const name of ["typing-irregular", "typing-steady"]) {
    it(`${name}: never a cadence; the newest burst is a person's`, () => {
      const verdicts = replay(capture(name));
      for (const { verdict } of verdicts) {
        expect(verdict.cadence).toBeUndefined();
        expect(verdict.lastHumanMs).toBe(verdict.lastTrafficMs);
      }
      expect(verdicts.filter((v) => v.verdict.lastHumanMs !== undefined).length).toBeGreaterThan(verdicts.length / 2);
    });
  }

  it("typing-steady: ten minutes at one rhythm fill every bin: one long burst, not a cadence", () => {
    const bins = capture("typing-steady");
    const busy = bins.filter((bin) => bin.calls > 2).length;
    expect(busy / bins.length).toBeGreaterThan(0.8);
    expect(classifyTraffic(bins, BIN_MS, bins.at(-1)!.atMs).lastHumanMs).toBe(bins.at(-1)!.atMs);
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
    // One key through `cat` (4 calls: socket, pipe, pipe, socket) is traffic, even beside a keep-alive.
    expect(classifyTraffic([{ atMs: 1000, bytes: 74, calls: 4 }], BIN_MS, 1000).lastHumanMs).toBe(1000);
    expect(classifyTraffic([{ atMs: 1000, bytes: 154, calls: 6 }], BIN_MS, 1000).lastHumanMs).toBe(1000);
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
    for (const { atMs, verdict } of verdicts) {
      if (atMs <= lastTyped) expect(verdict.lastHumanMs).toBeGreaterThan(atMs - 200_000);
    }
    const end = verdicts.at(-1)!.verdict;
    expect(end.cadence?.periodMs).toBeGreaterThan(27_000);
    // The human clock ends at (or within one reload of) the last keys.
    expect(end.lastHumanMs).toBeGreaterThanOrEqual(lastTyped - 1_000);
    expect(end.lastHumanMs).toBeLessThanOrEqual(lastTyped + 31_000);
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

  it("a poller that stops is no longer a cadence", () => {
    const bins = capture("poller-10s");
    const end = bins.at(-1)!.atMs;
    expect(classifyTraffic(bins, BIN_MS, end).cadence).toBeDefined();
    expect(classifyTraffic(bins, BIN_MS, end + 60_000).cadence).toBeUndefined();
  });
});
