import { create } from "@bufbuild/protobuf";
import { ReportSchema, SessionKind } from "@ws/protocol";
import { describe, expect, it } from "vitest";
import { stopEnds } from "../../../src/loop/stop-ends.js";
import { jsonPayload } from "../../../src/outreach/notify/payloads.js";

describe("what a stop will end", () => {
  it("logins, tmux/screen panes, process names and counts per user, Jupyter kernels and terminals; never arguments", () => {
    const report = create(ReportSchema, {
      sessions: {
        sessions: [
          { kind: SessionKind.UTMP, user: "alice", tty: "pts/0" },
          { kind: SessionKind.PTY, user: "alice", tty: "pts/1" },
          { kind: SessionKind.PTY, user: "alice", tty: "pts/2" },
          { kind: SessionKind.UTMP, user: "bob", tty: "pts/3" },
        ],
      },
      system: {
        topProcesses: [
          { user: "alice", command: "python3", cpuCores: 1 },
          { user: "alice", command: "python3", cpuCores: 0.5 },
          { user: "alice", command: "tmux: server", cpuCores: 0.01 },
          { user: "bob", command: "make", cpuCores: 0.2 },
        ],
      },
      jupyter: {
        servers: [
          {
            url: "http://127.0.0.1:8888/",
            reachable: true,
            kernels: [
              { id: "k1", name: "python3", executionState: "busy" },
              { id: "k2", name: "python3", executionState: "idle" },
            ],
            terminals: [{ name: "1" }],
          },
        ],
      },
    });
    const ends = stopEnds(report)!;
    expect(ends.text).toBe(
      "alice: 1 login, 2 tmux/screen/IDE terminals, processes python3 ×2, tmux: server; bob: 1 login, processes make; Jupyter: 2 kernels (python3), 1 busy, 1 terminal",
    );
    expect(ends.users[0]).toEqual({
      user: "alice",
      logins: 1,
      panes: 2,
      processes: [
        { name: "python3", count: 2 },
        { name: "tmux: server", count: 1 },
      ],
    });
    expect(stopEnds(create(ReportSchema, {}))!.text).toBe("nothing that ws can see running");
    expect(stopEnds(undefined)).toBeUndefined();
    const at = Date.parse("2026-12-01T10:00:00Z");
    const payload = jsonPayload({
      transition: {
        kind: "notice",
        vm: { namespace: "lab", name: "gpu-1" },
        atMs: at,
        mode: "enforce",
        reason: "idle for 2h",
        noticeId: "n",
        deadlineMs: at + 600_000,
        explanation: "",
      },
      owner: "alice",
      ends,
    });
    expect(payload.stopEnds?.jupyter).toEqual({ kernels: 2, busyKernels: 1, terminals: 1, kernelNames: ["python3"] });
    expect(payload.text).toContain("The stop ends alice: 1 login, 2 tmux/screen/IDE terminals");
  });
});

describe("a stop disputed", () => {
  it("names the knob that would have kept the VM, and keeps only a clean sentence", async () => {
    const { cleanDisputeText, disputeKnob } = await import("../../../src/comeback/start/dispute.js");
    expect(
      disputeKnob({
        atMs: 0,
        reason: "idle",
        idleSeconds: 7800,
        lastActivity: { atMs: 0, what: "keystroke on pts/0" },
      }),
    ).toBe(
      "idle-timeout 2h11m (it had been idle 2h10m) would have kept it; the last activity ws saw: keystroke on pts/0; try: ws-collector whatif --idle-timeout 2h11m",
    );
    expect(disputeKnob({ atMs: 0, reason: "agent lost" })).toMatch(/recorded no idle time/);
    expect(cleanDisputeText("a\u0000b\nc\u001b[31m")).toBe("a b c [31m");
    expect(cleanDisputeText("x".repeat(600))).toHaveLength(500);
  });
});
