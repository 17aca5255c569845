// The agent-lost rule with host-side evidence (engine/host.ts through decide()).
import { describe, expect, it } from "vitest";
import { describeHostReading } from "../../src/engine/host.js";
import type { HostReading } from "../../src/engine/types.js";
import { HOUR, MINUTE, SECOND, Sim, T0, actionsOf, report, testPolicy, transitions, ttySession } from "./sim.js";

const WINDOW_S = 120;
const quiet = (atMs: number, extra: Partial<HostReading> = {}): HostReading => ({
  atMs,
  windowSeconds: WINDOW_S,
  state: "ok",
  vcpus: 2,
  vcpuBusyRatio: 0.003,
  networkBytesPerSecond: 2000,
  diskBytesPerSecond: 0,
  vncConnections: 0,
  consoleConnections: 0,
  portForwardTunnels: 0,
  ...extra,
});

/**
 * A VM whose agent reported once at T0 and was then gone, with the host read every minute
 * by `host(atMs)` for `ms`, deciding on every reading (as the collector's host source does).
 * Its person typed at T0 (the agent's last sight of them): the host's quiet counts from T0 plus
 * idle-timeout (1 h), so a notice comes at T0 + 2 h at the earliest.
 */
function lostAgent(ms: number, host: (atMs: number) => HostReading, sim = new Sim(testPolicy())): Sim {
  sim.send(report({ sessions: { sessions: [ttySession(0)] } }));
  sim.connected = false;
  runHost(sim, ms, host);
  return sim;
}

function runHost(sim: Sim, ms: number, host: (atMs: number) => HostReading) {
  const end = sim.now + ms;
  while (sim.now < end) {
    sim.now += MINUTE;
    sim.host = host(sim.now);
    sim.step();
  }
}

describe("agent-lost with host-side evidence", () => {
  it("without host-side evidence configured nothing changes: AgentLost is never stopped", () => {
    const sim = new Sim(testPolicy());
    sim.send(report());
    sim.connected = false;
    const decisions = sim.advance(12 * HOUR, { tickMs: MINUTE });
    expect(sim.state).toBe("AgentLost");
    expect(actionsOf(decisions, "stop")).toEqual([]);
    expect(actionsOf(decisions, "notice")).toEqual([]);
    expect(decisions.at(-1)!.explanation.host).toBeUndefined();
  });

  it("no agent for agent-lost-max and a quiet host: notice, grace, stop, explained", () => {
    const sim = lostAgent(3 * HOUR, quiet);
    const notices = actionsOf(sim.decisions, "notice").filter((n) => !n.repeat);
    expect(notices).toHaveLength(1);
    // The agent last saw its person at T0: the host's quiet counts from T0 + idle-timeout (1h), and
    // lasts idle-timeout; agent-lost-max 1h (the default) is over long before.
    const noticeAt = sim.decisions.find((d) => actionsOf(d, "notice").length > 0)!.explanation.atMs;
    expect(noticeAt).toBe(T0 + 2 * HOUR);
    expect(notices[0]!.reason).toMatch(
      /^no agent for 2h; host: vCPU 0\.3 %, network 2\.0 kB\/s, disk 0 B\/s, no VNC connection; host idle for 1h/,
    );
    const [stop] = actionsOf(sim.decisions, "stop");
    expect(stop).toMatchObject({ trigger: "agent-lost" });
    expect(stop!.reason).toContain("grace period of the notice");
    const stopAt = sim.decisions.find((d) => actionsOf(d, "stop").length > 0)!.explanation.atMs;
    expect(stopAt).toBe(noticeAt + 10 * MINUTE);
    expect(transitions(sim.decisions)).toEqual(["Unknown→Active", "Active→AgentLost", "AgentLost→Stopping"]);
  });

  it("a busy vCPU holds exactly as agent evidence would, then unattended-max bounds it", () => {
    const busy = (atMs: number) => quiet(atMs, { vcpuBusyRatio: 0.9 });
    const sim = lostAgent(4 * HOUR - MINUTE, busy, new Sim(testPolicy({ unattendedMaxSeconds: 3 * 3600 })));
    expect(actionsOf(sim.decisions, "notice")).toEqual([]);
    expect(sim.decisions.at(-1)!.explanation.host!.role).toMatch(/last host activity: host: vCPU 90 % ≥ 50 %/);
    // unattended-max 3h after the last person (T0): background work stops holding at T0+3h, a notice follows.
    runHost(sim, 2 * HOUR, busy);
    const first = sim.decisions.find((d) => actionsOf(d, "notice").length > 0)!;
    expect(first.explanation.atMs).toBe(T0 + 4 * HOUR);
  });

  it("an open VNC connection holds; closing it starts the host idle clock", () => {
    const vnc = (atMs: number) => quiet(atMs, { vncConnections: 1 });
    const sim = lostAgent(3 * HOUR, vnc);
    expect(actionsOf(sim.decisions, "notice")).toEqual([]);
    expect(sim.decisions.at(-1)!.explanation.host!.summary).toContain("1 VNC connection open");
    const closedAt = sim.now;
    runHost(sim, 2 * HOUR, quiet);
    const first = sim.decisions.find((d) => actionsOf(d, "notice").length > 0)!;
    expect(first.explanation.atMs).toBe(closedAt + HOUR);
  });

  it("activity during the grace period cancels the notice; the agent's return clears it", () => {
    const sim = lostAgent(2 * HOUR + 2 * MINUTE, quiet);
    expect(sim.record!.notice).toBeDefined();
    sim.now += MINUTE;
    sim.host = quiet(sim.now, { consoleConnections: 1 });
    const cancelled = sim.step();
    expect(actionsOf(cancelled, "notice-cleared")).toHaveLength(1);
    expect(sim.state).toBe("AgentLost");
    runHost(sim, HOUR + 2 * MINUTE, quiet);
    expect(sim.record!.notice).toBeDefined();
    sim.connected = true;
    const back = sim.send(report());
    expect(actionsOf(back, "notice-cleared")[0]!.reason).toBe("the agent reports again");
    expect(sim.state).toBe("Active");
  });

  it("Prometheus down, answering errors, or the VM's series absent: never stopped, and the source says why", () => {
    for (const reading of [
      (atMs: number): HostReading => ({
        atMs,
        windowSeconds: WINDOW_S,
        state: "failed",
        message: "connect ECONNREFUSED",
      }),
      (atMs: number): HostReading => ({ atMs, windowSeconds: WINDOW_S, state: "absent", message: "no series" }),
    ]) {
      const sim = lostAgent(6 * HOUR, reading);
      expect(actionsOf(sim.decisions, "notice")).toEqual([]);
      expect(actionsOf(sim.decisions, "stop")).toEqual([]);
      const last = sim.decisions.at(-1)!;
      expect(last.explanation.reason).toMatch(/missing data is not idleness/);
      expect(last.explanation.host!.summary).toMatch(/^(failed: connect ECONNREFUSED|absent: no series)$/);
    }
  });

  it("a stale reading is missing data; a gap in the readings restarts the host idle clock", () => {
    const sim = lostAgent(HOUR - 10 * MINUTE, quiet);
    // Prometheus stops answering for 20 minutes: the last reading goes stale, nothing is stopped.
    sim.now += 20 * MINUTE;
    const stale = sim.step();
    expect(stale.explanation.reason).toMatch(/reading is 20m old/);
    runHost(sim, 30 * MINUTE, quiet);
    expect(actionsOf(sim.decisions, "notice")).toEqual([]);
    const resumedAt = T0 + HOUR + 10 * MINUTE + MINUTE;
    runHost(sim, HOUR, quiet);
    const first = sim.decisions.find((d) => actionsOf(d, "notice").length > 0)!;
    // The new run of readings starts one window before the first reading after the gap.
    expect(first.explanation.atMs).toBe(resumedAt - WINDOW_S * SECOND + HOUR);
  });

  it("a VM whose agent never connected is judged from when it was seen running", () => {
    const sim = new Sim(testPolicy());
    sim.connected = false;
    sim.vmRunning = true;
    runHost(sim, 2 * HOUR, quiet);
    const first = sim.decisions.find((d) => actionsOf(d, "notice").length > 0)!;
    // First seen (running, no agent) at the first decision, one minute in.
    expect(first.explanation.atMs).toBe(T0 + MINUTE + HOUR);
    expect(first.explanation.from).toBe("Unknown");
    expect(actionsOf(sim.decisions, "stop")).toHaveLength(1);
  });

  it("autostop turned off during the grace period withdraws the notice", () => {
    const sim = lostAgent(2 * HOUR + 2 * MINUTE, quiet);
    expect(sim.record!.notice).toBeDefined();
    sim.policy = testPolicy({ autostopEnabled: false });
    sim.now += MINUTE;
    sim.host = quiet(sim.now);
    const off = sim.step();
    expect(actionsOf(off, "notice-cleared")[0]!.reason).toBe("autostop was disabled");
    runHost(sim, HOUR, quiet);
    expect(actionsOf(sim.decisions, "stop")).toEqual([]);
  });

  it("observe mode records a would-stop and stops nothing", () => {
    const sim = lostAgent(3 * HOUR, quiet, new Sim(testPolicy({ mode: "observe" })));
    expect(actionsOf(sim.decisions, "stop")).toEqual([]);
    expect(actionsOf(sim.decisions, "would-stop")).toHaveLength(1);
  });

  it("issue 39: the agent went away while its person typed: the host's quiet counts from idle-timeout after them", () => {
    // Someone typing over SSH moves 0.5 % of a vCPU and a few kB/s: a quiet host to every threshold.
    const sim = lostAgent(4 * HOUR, quiet);
    const first = sim.decisions.find((d) => actionsOf(d, "notice").length > 0)!;
    // Person at T0, idle-timeout 1h: quiet from T0+1h, a notice an idle-timeout later, the stop after the grace.
    expect(first.explanation.atMs).toBe(T0 + 2 * HOUR);
    const stopAt = sim.decisions.find((d) => actionsOf(d, "stop").length > 0)!.explanation.atMs;
    expect(stopAt).toBe(T0 + 2 * HOUR + 10 * MINUTE);
    // Before then the host says why it waits, on the VM page.
    const waiting = sim.decisions.find((d) => d.explanation.atMs === T0 + 90 * MINUTE)!;
    expect(waiting.explanation.host!.role).toMatch(/the agent last saw a person 1h30m ago/);
    expect(waiting.explanation.host!.idleSinceMs).toBe(T0 + HOUR);
  });

  it("issue 39: an agent stopped on purpose says goodbye: the VM is unmanaged, no agent-lost-max wait, the host's quiet counts from the goodbye", () => {
    // The same VM as above, its person typing at T0, but root stopped the agent then (systemctl stop).
    const sim = new Sim(testPolicy());
    sim.send(report({ sessions: { sessions: [ttySession(0)] } }));
    sim.connected = false;
    sim.goodbye = "SIGTERM: stopped on purpose";
    const parted = sim.step();
    expect(actionsOf(parted, "event")).toEqual([
      expect.objectContaining({ type: "Warning", reason: "AgentStoppedOnPurpose" }),
    ]);
    expect(parted.next.goodbye).toEqual({ atMs: T0, reason: "SIGTERM: stopped on purpose" });
    runHost(sim, 3 * HOUR, quiet);
    // Said once, not on every decision.
    expect(
      sim.decisions.flatMap((d) => actionsOf(d, "event")).filter((e) => e.reason === "AgentStoppedOnPurpose"),
    ).toHaveLength(1);
    const noticed = sim.decisions.find((d) => actionsOf(d, "notice").length > 0)!;
    // Quiet from the goodbye (T0) for idle-timeout (1h): an hour before the vanished agent's T0 + 2h.
    expect(noticed.explanation.atMs).toBe(T0 + HOUR);
    expect(actionsOf(noticed, "notice")[0]!.reason).toMatch(
      /^no agent for 1h: stopped on purpose 1h ago \(SIGTERM: stopped on purpose\), the VM is unmanaged; host: vCPU 0\.3 %/,
    );
    const stopAt = sim.decisions.find((d) => actionsOf(d, "stop").length > 0)!.explanation.atMs;
    expect(stopAt).toBe(T0 + HOUR + 10 * MINUTE);
  });

  it("issue 39: a goodbye does not outlast the agent: it connects again, then vanishes: judged as vanished", () => {
    const sim = new Sim(testPolicy());
    sim.send(report({ sessions: { sessions: [ttySession(0)] } }));
    sim.connected = false;
    sim.goodbye = "SIGTERM: stopped on purpose";
    sim.step();
    sim.now += MINUTE;
    sim.connected = true;
    sim.goodbye = undefined;
    expect(sim.send(report({ sessions: { sessions: [ttySession(0)] } })).next.goodbye).toBeUndefined();
    sim.connected = false;
    runHost(sim, 4 * HOUR, quiet);
    // Person at T0+1m: quiet from T0+1h1m, the notice an idle-timeout later, as for any vanished agent.
    const noticed = sim.decisions.find((d) => actionsOf(d, "notice").length > 0)!;
    expect(noticed.explanation.atMs).toBe(T0 + 2 * HOUR + MINUTE);
    expect(actionsOf(noticed, "notice")[0]!.reason).toMatch(/^no agent for 2h; host: /);
  });

  it("issue 39: after a goodbye, host activity still holds the unmanaged VM", () => {
    const sim = new Sim(testPolicy());
    sim.send(report());
    sim.connected = false;
    sim.goodbye = "SIGTERM: stopped on purpose";
    runHost(sim, 3 * HOUR, (atMs) => quiet(atMs, { vncConnections: 1 }));
    expect(actionsOf(sim.decisions, "notice")).toEqual([]);
    expect(sim.decisions.at(-1)!.explanation.host!.role).toMatch(
      /stopped on purpose .* the VM is unmanaged; host: .*1 VNC connection open/,
    );
  });

  it("issue 39: a VM with passthrough GPUs and no GPU reading is never stopped on host readings alone", () => {
    const gpuJob = (atMs: number) => quiet(atMs, { vcpuBusyRatio: 0.19, passthroughGpus: 2 });
    const sim = lostAgent(8 * HOUR, gpuJob);
    expect(actionsOf(sim.decisions, "notice")).toEqual([]);
    expect(actionsOf(sim.decisions, "stop")).toEqual([]);
    const last = sim.decisions.at(-1)!;
    expect(last.explanation.host!.summary).toContain("2 passthrough GPUs (not read: the host cannot see their work)");
    expect(last.explanation.reason).toMatch(/no GPU metric source reads them/);
    expect(last.explanation.stopAtMs).toBeUndefined();
  });

  it("issue 39: with a GPU reading, a busy GPU holds as background work and an idle one lets the rule stop", () => {
    const busy = lostAgent(3 * HOUR, (atMs) => quiet(atMs, { passthroughGpus: 1, gpuBusyRatio: 0.97 }));
    expect(actionsOf(busy.decisions, "notice")).toEqual([]);
    expect(busy.decisions.at(-1)!.explanation.host!.role).toMatch(/last host activity: host: GPU 97 %/);
    const idle = lostAgent(3 * HOUR, (atMs) => quiet(atMs, { passthroughGpus: 1, gpuBusyRatio: 0 }));
    expect(actionsOf(idle.decisions, "stop")).toHaveLength(1);
  });

  it("describes a reading as the notice says it", () => {
    expect(describeHostReading(quiet(T0, { portForwardTunnels: 2, vncConnections: 1 }))).toBe(
      "vCPU 0.3 %, network 2.0 kB/s, disk 0 B/s, 1 VNC connection, 2 port-forward tunnels open",
    );
  });
});
