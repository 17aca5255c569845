// The latest Report kept as its bytes and a summary once decided on: the same views, the same
// decisions at later deadlines and after a policy change, and the decoded message let go.
import { create, toBinary } from "@bufbuild/protobuf";
import { AgentMessageSchema, type Report } from "@ws/protocol";
import { describe, expect, it } from "vitest";
import { reportFor, TYPICAL_VM } from "../../../../bench/lib/reports.js";
import { BUILTIN_DEFAULT_POLICY } from "../../src/engine/policy.js";
import type { Policy } from "../../src/engine/types.js";
import { CompactReport, rememberWire, reportSummary, summarizeReport } from "../../src/model/compact-report.js";
import { newVmLoopState, step } from "../../src/loop/step.js";
import { vmView } from "../../src/loop/view.js";

const NOW = 1_800_000_000_000;
const policy: Policy = { ...BUILTIN_DEFAULT_POLICY, autostopEnabled: true, idleTimeoutSeconds: 3600 };

/** A Report as the server hands it over: decoded from an AgentMessage whose bytes are remembered. */
function received(report: Report): Report {
  const bytes = toBinary(
    AgentMessageSchema,
    create(AgentMessageSchema, { payload: { case: "report", value: report } }),
  );
  rememberWire(report, bytes);
  return report;
}

const view = (loop: ReturnType<typeof newVmLoopState>, nowMs: number) =>
  vmView(
    {
      key: { namespace: "lab", name: "ada" },
      loop,
      connectedAtMs: NOW - 60_000,
      agentVersion: "test",
      peer: "10.0.0.7:1",
      policyErrors: [],
      truncated: [],
    },
    nowMs,
  );

describe("compact latest Report", () => {
  it("keeps the bytes and the summary once decided on, and decodes the same Report on demand", () => {
    const report = received(reportFor(TYPICAL_VM, 7));
    const loop = newVmLoopState(policy);
    step(loop, NOW, { kind: "connected" });
    step(loop, NOW, { kind: "report", received: { report, receivedAtMs: NOW } });
    expect(loop.latest).toBeInstanceOf(CompactReport);
    const compact = loop.latest as CompactReport;
    expect(compact.report).toEqual(report);
    expect(compact.byteLength).toBeLessThan(2000);
    // The evidence extracted on arrival stays tied to it: a later deadline does not extract again.
    expect(loop.evidence?.of).toBe(compact);
    expect(reportSummary(compact)).toEqual(summarizeReport(report, NOW));
  });

  it("shows the same view and takes the same decisions as the decoded Report would", () => {
    const full = newVmLoopState(policy);
    const compact = newVmLoopState(policy);
    const report = reportFor(TYPICAL_VM, 11);
    for (const loop of [full, compact]) step(loop, NOW, { kind: "connected" });
    step(full, NOW, { kind: "report", received: { report, receivedAtMs: NOW } });
    step(compact, NOW, {
      kind: "report",
      received: { report: received(reportFor(TYPICAL_VM, 11)), receivedAtMs: NOW },
    });
    expect(full.latest).not.toBeInstanceOf(CompactReport);
    expect(compact.latest).toBeInstanceOf(CompactReport);
    expect(view(compact, NOW + 1000)).toEqual(view(full, NOW + 1000));
    // A deadline, then a policy change (the evidence is extracted again, from the bytes).
    const later = NOW + 3_700_000;
    expect(step(compact, later, { kind: "wake" }).next).toEqual(step(full, later, { kind: "wake" }).next);
    const stricter: Policy = { ...policy, idleTimeoutSeconds: 600 };
    const a = step(full, later + 1000, { kind: "policy", policy: stricter, status: undefined });
    const b = step(compact, later + 1000, { kind: "policy", policy: stricter, status: undefined });
    expect(b.next).toEqual(a.next);
    expect(b.explanation).toEqual(a.explanation);
  });

  it("leaves a Report without known bytes (a truncated one, replay, whatif) decoded", () => {
    const loop = newVmLoopState(policy);
    const report = reportFor(TYPICAL_VM, 3);
    step(loop, NOW, { kind: "report", received: { report, receivedAtMs: NOW } });
    expect(loop.latest?.report).toBe(report);
  });
});
