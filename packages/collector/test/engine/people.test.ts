import { readFileSync } from "node:fs";
// The engine telling a person from a process: desktop input, SSH sessions without a terminal,
// Jupyter terminal output, unattended-max, and what an explanation's "counted" means.
import { InputDeviceKind } from "@ws/protocol";
import { describe, expect, it } from "vitest";
import { extractEvidence } from "../../src/engine/evidence.js";
import { SIGNALS, isHumanSignal, showsPersonAfter } from "../../src/engine/signals.js";
import { HOUR, MINUTE, SECOND, Sim, T0, actionsOf, report, testPolicy, transitions, ttySession } from "./sim.js";

type ReportInit = NonNullable<Parameters<typeof report>[0]>;
const busyCpu = (extra: Omit<ReportInit, "system"> = {}) =>
  report({
    system: {
      cpuCount: 4,
      cpuBusyRatio: 1,
      userProcessCpuCores: 4,
      uptimeSeconds: 86_400,
      topProcesses: [{ pid: 7, uid: 1000, user: "alice", command: "python3", cpuCores: 4 }],
    },
    ...extra,
  } as ReportInit);
const typing = () => report({ sessions: { sessions: [ttySession(0)] } });
const everyMinute = (makeReport: () => ReturnType<typeof report>) => ({
  tickMs: MINUTE,
  reportEveryMs: MINUTE,
  makeReport,
});

describe("unattended-max", () => {
  it("stops a VM whose CPU has been busy for unattended-max after its user left, with a notice that says why", () => {
    const sim = new Sim(testPolicy({ unattendedMaxSeconds: 24 * 3600 }));
    sim.send(typing());
    const decisions = sim.advance(
      25 * HOUR,
      everyMinute(() => busyCpu()),
    );
    expect(transitions(decisions)).toEqual(["Active→StoppingPending", "StoppingPending→Stopping"]);
    const pending = decisions.find((d) => d.explanation.to === "StoppingPending")!;
    // The notice goes out when unattended-max ends, not an idle-timeout later.
    expect(pending.explanation.atMs).toBe(T0 + 24 * HOUR);
    expect(pending.explanation.unattended).toBe(true);
    const [notice] = actionsOf(decisions, "notice");
    expect(notice!.reason).toMatch(
      /no human evidence for 1d \(unattended-max 1d\): background work \(CPU 100% busy.*\) no longer holds the VM; ws-lease keeps it running/,
    );
    expect(notice!.hint).toMatch(/ws-lease/);
    const cpuReading = pending.explanation.readings.find((r) => r.signal === "cpu")!;
    expect(cpuReading).toMatchObject({ counted: false, note: expect.stringMatching(/unattended-max/) });
    expect(actionsOf(decisions, "stop")).toHaveLength(1);
  });

  it("holds the busy VM before unattended-max, says until when, and never bounds it with unattended-max off", () => {
    const bounded = new Sim(testPolicy({ unattendedMaxSeconds: 24 * 3600 }));
    bounded.send(typing());
    const before = bounded.advance(
      3 * HOUR,
      everyMinute(() => busyCpu()),
    );
    expect(bounded.state).toBe("Active");
    expect(before.at(-1)!.explanation.vetoes).toEqual([
      expect.objectContaining({ kind: "cpu", untilMs: T0 + 24 * HOUR }),
      expect.objectContaining({ kind: "user-cpu", untilMs: T0 + 24 * HOUR }),
    ]);

    const unbounded = new Sim(testPolicy({ unattendedMaxSeconds: null }));
    unbounded.send(typing());
    const decisions = unbounded.advance(
      30 * HOUR,
      everyMinute(() => busyCpu()),
    );
    expect(transitions(decisions)).toEqual([]);
    expect(decisions.at(-1)!.explanation.vetoes.map((veto) => [veto.kind, veto.untilMs])).toEqual([
      ["cpu", undefined],
      ["user-cpu", undefined],
    ]);
  });

  it("counts from the last human evidence: a keystroke at 20h moves the end to 44h", () => {
    const sim = new Sim(testPolicy({ unattendedMaxSeconds: 24 * 3600 }));
    sim.send(typing());
    sim.advance(
      20 * HOUR,
      everyMinute(() => busyCpu()),
    );
    sim.send(busyCpu({ sessions: { sessions: [ttySession(0)] } }));
    const decisions = sim.advance(
      25 * HOUR,
      everyMinute(() => busyCpu()),
    );
    expect(decisions.find((d) => d.explanation.to === "StoppingPending")!.explanation.atMs).toBe(T0 + 44 * HOUR);
  });

  it("a lease still holds after unattended-max, up to max-keep-running", () => {
    const sim = new Sim(testPolicy({ unattendedMaxSeconds: 3600 }));
    sim.send(typing());
    const leased = () =>
      busyCpu({
        leases: {
          leases: [
            {
              id: "l1",
              uid: 1000,
              user: "alice",
              reason: "training",
              requestedSeconds: 8 * 3600,
              ageSeconds: (sim.now - T0) / 1000,
              confirmed: true,
            },
          ],
        },
      });
    const decisions = sim.advance(8 * HOUR - MINUTE, everyMinute(leased));
    expect(transitions(decisions)).toEqual([]);
    expect(decisions.at(-1)!.explanation.vetoes.map((v) => v.kind)).toEqual(["lease"]);
  });

  it("background work does not cancel a notice once unattended-max is over; a keystroke does", () => {
    const sim = new Sim(testPolicy({ unattendedMaxSeconds: 24 * 3600 }));
    sim.send(typing());
    sim.advance(
      24 * HOUR + MINUTE,
      everyMinute(() => busyCpu()),
    );
    expect(sim.state).toBe("StoppingPending");
    sim.advance(
      2 * MINUTE,
      everyMinute(() => busyCpu()),
    );
    expect(sim.state).toBe("StoppingPending");
    sim.now += MINUTE;
    const back = sim.send(busyCpu({ sessions: { sessions: [ttySession(0)] } }));
    expect(back.explanation.to).toBe("Active");
    expect(back.explanation.reason).toMatch(/activity: input on pts\/0/);
  });
});

describe("people's signals", () => {
  it("desktop input is strong human evidence; none while the screen is locked", () => {
    const desktop = (locked: boolean) =>
      report({
        desktop: {
          locked,
          devices: [
            { node: "event3", name: "QEMU USB Tablet", kind: InputDeviceKind.TABLET, inputAgeSeconds: 4 },
            { node: "event1", name: "AT kbd", kind: InputDeviceKind.KEYBOARD },
          ],
        },
      });
    const unlocked = extractEvidence({ report: desktop(false), receivedAtMs: T0 }, testPolicy());
    expect(unlocked.readings).toEqual([
      {
        signal: "desktop-input",
        strength: "strong",
        atMs: T0 - 4 * SECOND,
        detail: "desktop tablet input (QEMU USB Tablet)",
      },
    ]);
    expect(extractEvidence({ report: desktop(true), receivedAtMs: T0 }, testPolicy()).readings).toEqual([]);
  });

  it("an open SSH session without a terminal is weak; its interaction is strong", () => {
    const evidence = extractEvidence(
      {
        report: report({
          remoteSessions: {
            sessions: [
              {
                user: "alice",
                uid: 1000,
                pid: 9,
                remoteHost: "10.0.0.7",
                command: "node",
                loginAgeSeconds: 600,
                interactionAgeSeconds: 30,
                trafficBytes: 9000n,
              },
            ],
          },
        }),
        receivedAtMs: T0,
      },
      testPolicy(),
    );
    expect(evidence.readings).toEqual([
      {
        signal: "remote-connected",
        strength: "weak",
        atMs: T0,
        detail: "SSH session without a terminal is open (alice from 10.0.0.7, running node)",
      },
      {
        signal: "remote-session",
        strength: "strong",
        atMs: T0 - 30 * SECOND,
        detail: "traffic in an SSH session without a terminal (alice from 10.0.0.7, running node)",
      },
    ]);
  });

  it("a Jupyter terminal printing every second with nobody typing: the VM is stopped after idle-timeout + grace", () => {
    const sim = new Sim(testPolicy());
    const printing = () =>
      report({
        jupyter: {
          servers: [
            {
              url: "http://127.0.0.1:8888/",
              reachable: true,
              lastActivityAgeSeconds: 0,
              terminals: [{ name: "1", lastActivityAgeSeconds: 0 }],
            },
          ],
        },
        sessions: { sessions: [ttySession(99_999, { tty: "pts/4" })] },
      });
    sim.send(printing());
    const decisions = sim.advance(HOUR + 11 * MINUTE, everyMinute(printing));
    expect(transitions(decisions)).toEqual(["Active→StoppingPending", "StoppingPending→Stopping"]);
    expect(decisions.find((d) => d.explanation.to === "StoppingPending")!.explanation.atMs).toBe(T0 + HOUR);
    // The server's last_activity is the terminal's output again: not counted at all.
    expect(decisions.at(-1)!.explanation.readings.map((r) => r.signal)).toEqual(["tty-input"]);
  });

  it("the server reading says what moves it, and counts when something other than a terminal moved it", () => {
    const evidence = extractEvidence(
      {
        report: report({
          jupyter: {
            servers: [
              {
                url: "http://j/",
                reachable: true,
                lastActivityAgeSeconds: 2,
                terminals: [{ name: "1", lastActivityAgeSeconds: 300 }],
              },
            ],
          },
        }),
        receivedAtMs: T0,
      },
      testPolicy(),
    );
    expect(evidence.readings).toEqual([
      {
        signal: "jupyter-server",
        strength: "weak",
        atMs: T0 - 2 * SECOND,
        detail: "server activity on http://j/ (API traffic, kernel messages or terminal output)",
      },
    ]);
  });

  it("a notice whose last evidence is weak says nobody used it and how long weak evidence counts", () => {
    const sim = new Sim(testPolicy({ weakActivityMaxSeconds: 4 * 3600 }));
    sim.send(typing());
    const tab = () => report({ codeServer: { instances: [{ user: "alice", uid: 1000, heartbeatAgeSeconds: 10 }] } });
    const decisions = sim.advance(6 * HOUR, everyMinute(tab));
    const notice = actionsOf(decisions, "notice")[0]!;
    expect(notice.reason).toMatch(
      /code-server browser connected \(alice\) \(weak\), 1h ago: connected, but nobody has used it for 5h; weak evidence counts for at most 4h/,
    );
  });

  it("counted means the reading moved the idle clock: the same keystroke reported twice counts once", () => {
    const sim = new Sim(testPolicy());
    sim.send(typing());
    sim.now += 2 * MINUTE;
    const first = sim.send(report({ sessions: { sessions: [ttySession(30)] } }));
    expect(first.explanation.readings.find((r) => r.signal === "tty-input")).toMatchObject({ counted: true });
    sim.now += MINUTE;
    const again = sim.send(report({ sessions: { sessions: [ttySession(90)] } }));
    expect(again.explanation.readings.find((r) => r.signal === "tty-input")).toMatchObject({
      counted: false,
      note: expect.stringMatching(/not newer than the idle clock/),
    });
  });
});

describe("the strength table", () => {
  it("docs/policy.md's table says of each signal what its descriptor says", () => {
    const text = readFileSync(new URL("../../../../docs/policy.md", import.meta.url), "utf8");
    const rows = new Map<string, { strength: string; kind: string }>();
    for (const [, name, strength, kind] of text.matchAll(
      /^\| `([a-z-]+)` \| .* \| (strong|weak)[^|]* \| ([a-z]+) \| [^|]* \|$/gm,
    ))
      rows.set(name as string, { strength: strength as string, kind: kind as string });
    for (const [name, descriptor] of Object.entries(SIGNALS))
      expect(rows.get(name), name).toEqual({ strength: descriptor.strength, kind: descriptor.kind });
    expect([...rows.keys()].sort()).toEqual(Object.keys(SIGNALS).sort());
  });

  it("names every signal, and only people's signals show that the user came back after a stop", () => {
    expect(
      Object.entries(SIGNALS)
        .filter(([, meaning]) => meaning.kind === "human")
        .map(([name]) => name)
        .sort(),
    ).toEqual(["desktop-input", "jupyter-kernel", "remote-session", "tty-input"]);
    expect(isHumanSignal("cpu")).toBe(false);
    expect(showsPersonAfter({ signal: "network", atMs: T0 + 1 }, T0)).toBe(false);
    expect(showsPersonAfter({ signal: "tty-input", atMs: T0 + 1 }, T0)).toBe(true);
    expect(showsPersonAfter({ signal: "tty-input", atMs: T0 - 1 }, T0)).toBe(false);
  });
});
