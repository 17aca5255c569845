import { describe, expect, it } from "vitest";
import type { StartJson } from "../../../src/comeback/start/handler.js";
import { progressLines } from "../../../src/comeback/ssh-proxy/lines.js";

const at = Date.parse("2026-12-01T10:00:00Z");
const base: StartJson = {
  vm: { namespace: "users", name: "alice-gpu" },
  status: "starting",
  stages: [
    { name: "requested", label: "Start requested", state: "done", atMs: at, detail: "by the start link (ssh)" },
    { name: "scheduled", label: "VMI scheduled", state: "current" },
    { name: "running", label: "VMI running", state: "waiting" },
    { name: "agent", label: "Agent connected", state: "waiting" },
    { name: "ready", label: "Ready", state: "waiting", detail: "waiting for sshd or Jupyter to answer" },
  ],
};

describe("what the ssh helper prints", () => {
  it("one line per stage as it completes, the scheduler's message once", () => {
    expect(progressLines(undefined, base)).toEqual(["ws: ✓ Start requested 10:00:00 (by the start link (ssh))"]);
    expect(progressLines(base, base)).toEqual([]);
    const blocked: StartJson = {
      ...base,
      status: "unschedulable",
      unschedulable: {
        reason: "Unschedulable",
        message: "0/3 nodes are available: 3 Insufficient nvidia.com/gpu.",
        waitedSeconds: 4,
      },
    };
    expect(progressLines(base, blocked)).toEqual([
      "ws: ✗ the scheduler cannot place the VM yet: 0/3 nodes are available: 3 Insufficient nvidia.com/gpu. — waiting for room",
    ]);
    expect(
      progressLines(blocked, { ...blocked, unschedulable: { ...blocked.unschedulable!, waitedSeconds: 8 } }),
    ).toEqual([]);
    const scheduled: StartJson = {
      ...base,
      stages: base.stages.map((s) =>
        s.name === "scheduled" ? { ...s, state: "done", atMs: at + 5000, detail: "on node n1" } : s,
      ),
    };
    expect(progressLines(blocked, scheduled)).toEqual([
      "ws: ✓ VMI scheduled 10:00:05 (on node n1)",
      "ws: there is room now",
    ]);
    expect(progressLines(scheduled, { ...scheduled, status: "failed", failure: "403" })).toEqual([
      "ws: ✗ the start failed: 403",
    ]);
  });
});
