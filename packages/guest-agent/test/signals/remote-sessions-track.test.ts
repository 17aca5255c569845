/**
 * trackSessions, the pure part of the remote-sessions signal: what a session's readings and
 * forwards make of its interaction age. The readings are a recorded capture (poller-10s,
 * bench/capture-traffic.ts) replayed one a second, as the agent's ticker takes them.
 */
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { type SessionProcess, type Tracked, trackSessions } from "../../src/signals/remote-sessions-track.js";

const poller = (
  JSON.parse(readFileSync(new URL("../fixtures/remote-sessions/traffic/poller-10s.json", import.meta.url), "utf8")) as {
    samples: number[][];
  }
).samples;

const process = (sample: number[], command: string): SessionProcess => ({
  pid: 4100,
  uid: 1000,
  user: "alice",
  startTicks: 100,
  io: { readBytes: sample[1]!, writtenBytes: sample[2]!, readCalls: sample[3]!, writeCalls: sample[4]! },
  socketInodes: [],
  command,
});

/** Replays the capture through trackSessions; `forward` is what the session's forward reached. */
function replay(command: string, service: "" | "jupyter") {
  const tracked = new Map<string, Tracked>();
  const uptime = (ms: number) => 1 + ms / 1000;
  let last: ReturnType<typeof trackSessions> = [];
  for (const sample of poller) {
    const now = 1_000 + sample[0]!;
    last = trackSessions(tracked, [process(sample, command)], [], uptime(sample[0]!), now, (session) => {
      session.forwards.set("127.0.0.1:8888", {
        destinationAddress: "127.0.0.1",
        destinationPort: 8888,
        service,
        listenerPid: service ? 4242 : 0,
        lastSeenMonoMs: now,
      });
    });
  }
  return last[0]!;
}

describe("trackSessions", () => {
  it("a forward only to a Jupyter server is that server's client: its traffic moves nothing", () => {
    const session = replay("", "jupyter");
    expect(session.judgedByService).toBe(true);
    expect(session.forwards).toEqual([
      expect.objectContaining({ destinationPort: 8888, service: "jupyter", listenerPid: 4242 }),
    ]);
    // Only the opening, ten minutes ago.
    expect(session.interactionAgeSeconds).toBeGreaterThan(590);
    expect(session.cadence).toBeUndefined();
  });

  it("the same traffic to anything else is a cadence every 10 s: weak, the opening stays the last interaction", () => {
    const session = replay("", "");
    expect(session.judgedByService).toBe(false);
    expect(session.cadence?.periodSeconds).toBeCloseTo(10, 0);
    // The first polls count until the cadence has repeated (about 50 s), then nothing.
    expect(session.interactionAgeSeconds).toBeGreaterThan(540);
  });

  it("a session that runs a command is judged as a whole, whatever its forwards reach", () => {
    const session = replay("node", "jupyter");
    expect(session.judgedByService).toBe(false);
    expect(session.cadence?.periodSeconds).toBeCloseTo(10, 0);
  });
});

describe("trackSessions over a page that stops refreshing (issue 39, blind spot D)", () => {
  const samples = (
    JSON.parse(
      readFileSync(new URL("../fixtures/remote-sessions/traffic/page-stops.json", import.meta.url), "utf8"),
    ) as {
      samples: number[][];
    }
  ).samples;
  /** The capture's counters at each whole second (it was read every 100 ms), as the ticker reads them. */
  const everySecond = samples.filter((sample) => sample[0]! % 1000 < 100);

  it("the refreshes stay a machine's after they stop and age out of the window: the interaction age only grows", () => {
    const tracked = new Map<string, Tracked>();
    const ages: Array<[number, number]> = [];
    // Then ten more minutes of the lingering connection, nothing moving: the refreshes leave the window.
    const final = everySecond.at(-1)!;
    const lingering = Array.from({ length: 600 }, (_, i) => [final[0]! + (i + 1) * 1000, ...final.slice(1)]);
    for (const sample of [...everySecond, ...lingering]) {
      const now = 1_000 + sample[0]!;
      const [session] = trackSessions(tracked, [process(sample, "")], [], 1 + sample[0]! / 1000, now);
      ages.push([sample[0]!, session!.interactionAgeSeconds!]);
    }
    // Twenty minutes: the page refreshed for three, then its connection lingered.
    const last = ages.at(-1)!;
    expect(last[0]).toBeGreaterThan(1_190_000);
    // The last moment counted as a person's is in the first refreshes (before the cadence had repeated).
    expect(last[1]).toBeGreaterThan((last[0] - 80_000) / 1000);
  });
});
