import { SourceState } from "@ws/protocol";
import { describe, expect, it } from "vitest";
import { extractEvidence, vetoesAt } from "../../src/engine/evidence.js";
import { HOUR, MINUTE, SECOND, Sim, T0, actionsOf, report, sources, testPolicy, transitions } from "./sim.js";

const policy = testPolicy();

describe("extractEvidence", () => {
  it("turns every age into a time on the collector's clock, never reading a guest clock", () => {
    const evidence = extractEvidence(
      {
        report: report({
          sampleAgeSeconds: 10,
          gpu: { sampleAgeSeconds: 5, gpus: [{ index: 0, utilizationRatio: 0.5 }] },
          jupyter: {
            servers: [
              {
                url: "http://127.0.0.1:8888/",
                reachable: true,
                lastActivityAgeSeconds: 1,
                kernels: [
                  { id: "k1", name: "python3", executionState: "idle", lastActivityAgeSeconds: 20, connections: 1 },
                ],
                terminals: [{ name: "1", lastActivityAgeSeconds: 40 }],
              },
            ],
          },
        }),
        receivedAtMs: T0,
      },
      policy,
    );
    const sampled = T0 - 10 * SECOND;
    expect(evidence.sampledAtMs).toBe(sampled);
    // A terminal's last_activity is its output as much as its input: not counted by default.
    expect(evidence.readings.map((r) => [r.signal, r.strength, r.atMs])).toEqual([
      ["jupyter-kernel", "strong", sampled - 20 * SECOND],
      ["jupyter-connected", "weak", sampled],
      ["jupyter-server", "weak", sampled - 1 * SECOND],
      ["gpu", "strong", sampled - 5 * SECOND],
    ]);
    const withOutput = extractEvidence(
      {
        report: report({
          jupyter: {
            servers: [{ url: "http://j/", reachable: true, terminals: [{ name: "1", lastActivityAgeSeconds: 40 }] }],
          },
        }),
        receivedAtMs: T0,
      },
      testPolicy({ thresholds: { ttyOutputCounts: true } }),
    );
    expect(withOutput.readings.map((r) => [r.signal, r.atMs, r.detail])).toEqual([
      ["jupyter-terminal", T0 - 40 * SECOND, "output of terminal 1 on http://j/"],
    ]);
  });

  it("treats negative or non-finite ages as no age at all rather than as the future", () => {
    const evidence = extractEvidence(
      {
        report: report({
          sampleAgeSeconds: -50,
          sessions: { sessions: [{ tty: "pts/0", inputAgeSeconds: Number.NaN }] },
        }),
        receivedAtMs: T0,
      },
      policy,
    );
    expect(evidence.sampledAtMs).toBe(T0);
    expect(evidence.readings).toEqual([]);
  });

  it("counts only idle inhibitor locks", () => {
    const evidence = extractEvidence(
      {
        report: report({
          inhibitors: {
            locks: [
              { who: "gsd-power", why: "suspend", what: "sleep", mode: "delay", uid: 1000, pid: 1 },
              { who: "backup", why: "rsync", what: "shutdown:idle", mode: "block", uid: 1000, pid: 2 },
            ],
          },
        }),
        receivedAtMs: T0,
      },
      policy,
    );
    expect(evidence.vetoes).toEqual([
      {
        kind: "inhibitor",
        detail: 'idle inhibitor lock by backup ("rsync")',
        untilMs: T0 + policy.maxKeepRunningSeconds * 1000,
      },
    ]);
  });

  it("a lease's hold ends at its clamped expiry", () => {
    const evidence = extractEvidence(
      {
        report: report({ leases: { leases: [{ id: "L", user: "a", requestedSeconds: 3600, ageSeconds: 1800 }] } }),
        receivedAtMs: T0,
      },
      policy,
    );
    expect(vetoesAt(evidence, T0 + 29 * MINUTE)).toHaveLength(1);
    expect(vetoesAt(evidence, T0 + 30 * MINUTE)).toHaveLength(0);
  });

  it("forgets Jupyter servers that went away, and a source that recovers is no longer blind", () => {
    const first = extractEvidence(
      {
        report: report({ jupyter: { servers: [{ url: "http://a/", reachable: true, kernels: [{ id: "k" }] }] } }),
        receivedAtMs: T0,
      },
      policy,
    );
    expect(first.memory.sources["jupyter http://a/"]).toMatchObject({ liveAtLastOk: true });
    const failed = extractEvidence(
      {
        report: report({ sources: sources({ jupyter: { state: SourceState.FAILED, message: "boom" } }) }),
        receivedAtMs: T0 + MINUTE,
      },
      policy,
      first.memory,
    );
    expect(failed.blind.map((b) => b.source)).toEqual(["jupyter"]);
    const recovered = extractEvidence(
      { report: report({ jupyter: { servers: [] } }), receivedAtMs: T0 + 2 * MINUTE },
      policy,
      failed.memory,
    );
    expect(recovered.blind).toEqual([]);
    expect(recovered.memory.sources["jupyter http://a/"]).toBeUndefined();
    expect(recovered.memory.sources.jupyter).toEqual({ liveAtLastOk: false, lastOkAtMs: T0 + 2 * MINUTE });
  });
});

describe("a VM whose agent never reports", () => {
  it("is never stopped by default, and is stopped after stop-when-agent-lost-after when it is known to run", () => {
    const quiet = new Sim(testPolicy());
    quiet.vmRunning = true;
    expect(actionsOf(quiet.advance(24 * HOUR, { tickMs: 10 * MINUTE }), "stop")).toEqual([]);
    const strict = new Sim(testPolicy({ stopWhenAgentLostAfterSeconds: 2 * 3600 }));
    strict.vmRunning = true;
    const decisions = strict.advance(3 * HOUR, { tickMs: 10 * MINUTE });
    expect(transitions(decisions)).toEqual(["Unknown→Stopping"]);
    expect(actionsOf(decisions, "stop")[0]).toMatchObject({ trigger: "agent-lost" });
  });
});

describe("remote sessions judged by what their traffic is", () => {
  const at = (session: Record<string, unknown>, jupyter?: Record<string, unknown>) =>
    extractEvidence(
      {
        report: report({
          remoteSessions: { sessions: [{ user: "alice", uid: 1000, pid: 7, remoteHost: "10.0.0.12", ...session }] },
          ...(jupyter ? { jupyter } : {}),
        }),
        receivedAtMs: T0,
      },
      policy,
    ).readings;

  it("a forward to a Jupyter server is weak and named by the kernel's idle time", () => {
    const readings = at(
      {
        interactionAgeSeconds: 3 * 3600 + 60,
        judgedByService: true,
        forwards: [{ destinationAddress: "127.0.0.1", destinationPort: 8888, service: "jupyter", listenerPid: 42 }],
      },
      {
        servers: [
          {
            url: "http://127.0.0.1:8888/",
            pid: 42,
            reachable: true,
            kernels: [{ id: "k1", name: "python3", executionState: "idle", lastActivityAgeSeconds: 3 * 3600 }],
          },
        ],
      },
    );
    const connected = readings.find((r) => r.signal === "remote-connected")!;
    expect(connected).toMatchObject({ strength: "weak", atMs: T0 });
    expect(connected.detail).toBe(
      "SSH session without a terminal is open (alice from 10.0.0.12, forwarding ports): forward to Jupyter server 8888: judged by the kernel, idle 3h",
    );
    // Only the opening is a person's: 3h and a minute ago.
    expect(readings.find((r) => r.signal === "remote-session")?.atMs).toBe(T0 - (3 * 3600 + 60) * SECOND);
  });

  it("a regular cadence says so, weak; a busy kernel behind the forward is named busy", () => {
    expect(
      at({
        command: "",
        interactionAgeSeconds: 600,
        cadence: { periodSeconds: 30.2, bursts: 20, meanBurstBytes: 2500 },
      }).find((r) => r.signal === "remote-connected")?.detail,
    ).toMatch(/: regular traffic every 30s \(a page reloading itself or a poller\)$/);
    expect(
      at(
        {
          judgedByService: true,
          forwards: [{ destinationAddress: "127.0.0.1", destinationPort: 8888, service: "jupyter", listenerPid: 42 }],
        },
        { servers: [{ url: "u", pid: 42, reachable: true, kernels: [{ id: "k", executionState: "busy" }] }] },
      ).find((r) => r.signal === "remote-connected")?.detail,
    ).toMatch(/forward to Jupyter server 8888: judged by the kernel, busy$/);
  });
});
