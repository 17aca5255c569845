import { describe, expect, it } from "vitest";
import { StartTracker } from "../../../src/comeback/start/tracker.js";
import { splitWait, ZERO_WAIT } from "../../../src/comeback/wait/stages.js";
import { type RecordedWait, summarizeWaits, waitSummaryHtml } from "../../../src/comeback/wait/summary.js";

const NOW = Date.parse("2026-12-07T12:00:00Z");
const DAY = 24 * 3600_000;
const wait = (daysAgo: number, trigger: RecordedWait["trigger"], total: number): RecordedWait => ({
  atMs: NOW - daysAgo * DAY,
  trigger,
  split: splitWait([], 0, total * 1000),
});

describe("the fleet page's p50/p95 per stage over 7 days", () => {
  it("per trigger and in all, leaving out returns older than 7 days", () => {
    const waits = [
      ...[10, 20, 30, 40, 50, 60, 70, 80, 90, 100].map((s) => wait(1, "link", s)),
      { atMs: NOW - DAY, trigger: "ssh" as const, split: ZERO_WAIT },
      wait(8, "wake", 999),
    ];
    const rows = summarizeWaits(waits, NOW);
    expect(rows.map((r) => [r.trigger, r.returns, r.stages.total.p50, r.stages.total.p95])).toEqual([
      ["link", 10, 50, 100],
      ["ssh", 1, 0, 0],
      ["all", 11, 50, 100],
    ]);
    const html = waitSummaryHtml(rows);
    expect(html).toContain('<tr data-trigger="link"><td>link</td><td>10</td>');
    expect(html).not.toContain("wake");
    expect(waitSummaryHtml(summarizeWaits([wait(8, "wake", 1)], NOW))).toBe("");
  });

  it("the tracker keeps what the table needs: each ready return with its trigger", async () => {
    const tracker = new StartTracker();
    const vm = { namespace: "lab", name: "h36w-bob" };
    await tracker.request(vm, { by: "bob", trigger: "ssh" }, NOW, { running: false }, async () => ({
      ok: true,
      already: false,
      message: "",
    }));
    tracker.markReady(vm, NOW + 30_000);
    expect(tracker.recent()).toEqual([{ atMs: NOW, trigger: "ssh", split: splitWait([], NOW, NOW + 30_000) }]);
    expect(summarizeWaits(tracker.recent(), NOW + 60_000)[0]?.stages.total).toEqual({ p50: 30, p95: 30 });
  });
});
