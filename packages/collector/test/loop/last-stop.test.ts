import { describe, expect, it } from "vitest";
import {
  formatLastStop,
  lastStopFactsOf,
  lastStopIn,
  lastStopKey,
  parseLastStop,
  withDispute,
} from "../../src/loop/last-stop.js";

const STOP_AT = Date.UTC(2026, 0, 5, 9, 30, 0);

describe("the last-stop record", () => {
  it("reads back what a mode wrote: time, reason, idle time, last activity, boot", () => {
    const text = formatLastStop({
      whenMs: STOP_AT + 250,
      reason: "idle for 2h",
      signals: { idleSeconds: 7200, lastActivity: { at: new Date(STOP_AT - 7_200_000).toISOString(), what: "ssh" } },
      by: "collector-0",
      bootId: "b-1",
    });
    expect(JSON.parse(text).when).toBe("2026-01-05T09:30:00Z");
    expect(parseLastStop(text)).toMatchObject({
      atMs: STOP_AT,
      reason: "idle for 2h",
      idleSeconds: 7200,
      lastActivity: { atMs: STOP_AT - 7_200_000, what: "ssh" },
      bootId: "b-1",
    });
    expect(lastStopIn({ [lastStopKey("p/")]: text }, "p/")?.atMs).toBe(STOP_AT);
  });

  it("keeps a dispute beside the record and reads when it was made", () => {
    const raw = { when: new Date(STOP_AT).toISOString(), reason: "idle", signals: {} };
    const disputed = lastStopFactsOf(withDispute(raw, { at: new Date(STOP_AT + 60_000).toISOString(), what: "x" }));
    expect(disputed?.disputedAtMs).toBe(STOP_AT + 60_000);
    expect(disputed?.raw).toMatchObject({ reason: "idle", dispute: { what: "x" } });
  });

  it("answers null to a record that is absent, unreadable, oversized or without time and reason", () => {
    expect(parseLastStop(undefined)).toBeNull();
    expect(parseLastStop("{not json")).toBeNull();
    expect(parseLastStop("null")).toBeNull();
    expect(parseLastStop(JSON.stringify({ reason: "idle" }))).toBeNull();
    expect(parseLastStop(JSON.stringify({ when: "2026-01-05T09:30:00Z", reason: "x".repeat(70_000) }))).toBeNull();
  });
});
