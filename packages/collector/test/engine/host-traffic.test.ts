// Interactive traffic from the host (engine/host-traffic.ts): realistic packet counters, as
// KubeVirt's kubevirt_vmi_network_{receive,transmit}_packets_total rates give them over the
// host-side window, judged alone and through decide().
import { describe, expect, it } from "vitest";
import { interactiveTraffic, keepPacketWindows, type PacketWindow } from "../../src/engine/host-traffic.js";
import type { HostReading } from "../../src/engine/types.js";
import { HOUR, MINUTE, Sim, T0, actionsOf, report, testPolicy } from "./sim.js";

const WINDOW_S = 120;
/** Idle chatter every VM has: ARP, NTP every 64 s, DHCP renewals (packets/s each way). */
const CHATTER = { rx: 0.03, tx: 0.02 };

/**
 * A person typing over SSH for one window: `keys` keystrokes. Each is a packet in (~90 B on the
 * wire) and its echo out (~130 B); the client's delayed ACKs add ~0.6 of a packet in per key, the
 * server's ~0.3 out; output (ls, an editor redraw) adds a few larger packets out.
 */
function typing(atMs: number, keys: number): PacketWindow {
  const rx = (keys * 1.6) / WINDOW_S + CHATTER.rx;
  const tx = (keys * 1.3) / WINDOW_S + CHATTER.tx;
  return { atMs, receivePacketsPerSecond: rx, transmitPacketsPerSecond: tx, bytesPerSecond: rx * 90 + tx * 130 };
}

/** Keystrokes per 2-minute window of a person at work: bursts, pauses to read and think. */
const KEYS_PER_WINDOW = [140, 35, 0, 260, 90, 12, 180, 0, 0, 75, 310, 40, 8, 150, 60, 220];

/** A health check every 10 s (±25 % jitter): SYN, ACK, a small request and answer, FIN — 5 packets each way, ~80 B. */
function healthCheck(atMs: number, index: number): PacketWindow {
  const checks = 12 + ((index * 7) % 3) - 1; // 11–13 per window: the jitter moves one check in or out
  const rx = (checks * 5) / WINDOW_S + CHATTER.rx;
  const tx = (checks * 5) / WINDOW_S + CHATTER.tx;
  return { atMs, receivePacketsPerSecond: rx, transmitPacketsPerSecond: tx, bytesPerSecond: (rx + tx) * 80 };
}

const idle = (atMs: number): PacketWindow => ({
  atMs,
  receivePacketsPerSecond: CHATTER.rx,
  transmitPacketsPerSecond: CHATTER.tx,
  bytesPerSecond: (CHATTER.rx + CHATTER.tx) * 70,
});

/** Feeds windows one by one as the engine does; returns each window's verdict. */
function verdicts(windows: PacketWindow[]): Array<string | undefined> {
  let kept: PacketWindow[] | undefined;
  return windows.map((w) => {
    kept = keepPacketWindows(kept, w);
    return interactiveTraffic(kept);
  });
}

describe("interactive traffic from the host's packet counters", () => {
  it("a person typing over SSH: every window with keystrokes, once the history is there, is a person", () => {
    const seen = verdicts(KEYS_PER_WINDOW.map((keys, i) => typing(T0 + i * WINDOW_S * 1000, keys)));
    // A window of a few keys (8, 12) is near the floor of 0.1 packets/s each way: either answer is fair.
    KEYS_PER_WINDOW.forEach((keys, i) => {
      if (i < 3 || keys === 0) expect(seen[i], `window ${i} (${keys} keys)`).toBeUndefined();
      else if (keys >= 30)
        expect(seen[i], `window ${i} (${keys} keys)`).toMatch(
          /^interactive traffic: \S+ packets\/s in, \S+ out, \d+ B each, irregular/,
        );
    });
  });

  it("an idle guest's chatter is never a person", () => {
    expect(verdicts(Array.from({ length: 20 }, (_, i) => idle(T0 + i * WINDOW_S * 1000)))).toEqual(
      Array(20).fill(undefined),
    );
  });

  it("periodic tiny traffic (a jittered health check) is small and both ways, but regular: never a person", () => {
    expect(verdicts(Array.from({ length: 20 }, (_, i) => healthCheck(T0 + i * WINDOW_S * 1000, i)))).toEqual(
      Array(20).fill(undefined),
    );
  });

  it("bulk traffic (a download: many full-size packets one way) and one-way streams are not typing", () => {
    const download = (atMs: number, n: number): PacketWindow => ({
      atMs,
      receivePacketsPerSecond: 800 * n,
      transmitPacketsPerSecond: 400 * n,
      bytesPerSecond: 800 * n * 1500 + 400 * n * 66,
    });
    expect(verdicts([1, 0.2, 1.5, 0.6, 1].map((n, i) => download(T0 + i * 120_000, n))).at(-1)).toBeUndefined();
    const oneWay = (atMs: number, n: number): PacketWindow => ({
      atMs,
      receivePacketsPerSecond: 0.02,
      transmitPacketsPerSecond: 2 * n,
      bytesPerSecond: 2 * n * 200,
    });
    expect(verdicts([1, 0.2, 1.5, 0.6, 1].map((n, i) => oneWay(T0 + i * 120_000, n))).at(-1)).toBeUndefined();
  });
});

describe("interactive traffic holds a VM whose agent is gone (through decide)", () => {
  const reading = (w: PacketWindow): HostReading => ({
    atMs: w.atMs,
    windowSeconds: WINDOW_S,
    state: "ok",
    vcpus: 2,
    vcpuBusyRatio: 0.005,
    networkBytesPerSecond: w.bytesPerSecond,
    receivePacketsPerSecond: w.receivePacketsPerSecond,
    transmitPacketsPerSecond: w.transmitPacketsPerSecond,
    diskBytesPerSecond: 0,
    vncConnections: 0,
    consoleConnections: 0,
    portForwardTunnels: 0,
  });

  it("someone typing over SSH for 5 hours after their agent vanished is never stopped; once they stop, the notice follows idle-timeout later", () => {
    const sim = new Sim(testPolicy());
    sim.send(report());
    sim.connected = false;
    let i = 0;
    const typedUntil = T0 + 5 * HOUR;
    while (sim.now < typedUntil) {
      sim.now += 2 * MINUTE;
      sim.host = reading(typing(sim.now, KEYS_PER_WINDOW[i++ % KEYS_PER_WINDOW.length]!));
      sim.step();
    }
    expect(actionsOf(sim.decisions, "notice")).toEqual([]);
    expect(actionsOf(sim.decisions, "stop")).toEqual([]);
    const last = sim.decisions.at(-1)!;
    expect(last.explanation.host!.summary).toMatch(/packets \S+\/s in, \S+\/s out/);
    expect(last.explanation.reason).toMatch(/last host activity: host: interactive traffic: /);
    const lastPerson = sim.record!.host!.lastConnectionAtMs!;
    while (sim.now < typedUntil + 3 * HOUR) {
      sim.now += 2 * MINUTE;
      sim.host = reading(idle(sim.now));
      sim.step();
    }
    const noticed = sim.decisions.find((d) => actionsOf(d, "notice").length > 0)!;
    // The host's quiet counts from the last interactive window, for idle-timeout (1 h); then the grace.
    expect(noticed.explanation.atMs - lastPerson).toBeGreaterThanOrEqual(HOUR);
    expect(noticed.explanation.atMs - lastPerson).toBeLessThanOrEqual(HOUR + 2 * MINUTE);
    expect(actionsOf(sim.decisions, "stop")).toHaveLength(1);
  });

  it("a VM with only a health check's periodic tiny traffic is stopped as an idle one is", () => {
    const sim = new Sim(testPolicy());
    sim.send(report());
    sim.connected = false;
    let i = 0;
    while (sim.now < T0 + 4 * HOUR) {
      sim.now += 2 * MINUTE;
      sim.host = reading(healthCheck(sim.now, i++));
      sim.step();
    }
    const noticed = sim.decisions.find((d) => actionsOf(d, "notice").length > 0)!;
    // Person (the VM's start) at T0: quiet from T0 + idle-timeout, notice an idle-timeout later (as for any quiet VM).
    expect(noticed.explanation.atMs).toBe(T0 + 2 * HOUR);
  });
});
