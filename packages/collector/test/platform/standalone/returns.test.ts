import { describe, expect, it } from "vitest";
import { encodeReturns, parseReturns } from "../../../src/comeback/warm/returns.js";
import { StandaloneStarts } from "../../../src/platform/standalone/start.js";

const VM = { namespace: "users", name: "alice-dev" };
const DAY_MS = 24 * 3600_000;
const NOW = Date.parse("2026-12-07T08:50:00Z");

function starts(configured: Record<string, string>): StandaloneStarts {
  return new StandaloneStarts({
    configured: () => [VM],
    labels: () => ({}),
    annotations: () => configured,
    owner: () => "alice",
    connectedAtMs: () => undefined,
    nowMs: () => NOW,
  });
}

describe("standalone returns", () => {
  it("keeps each return over the configured ones, in memory, and the warm-start rule reads them from the facts", async () => {
    const configured = [3, 2, 1].map((weeks) => ({
      atMs: NOW - weeks * 7 * DAY_MS,
      trigger: "link" as const,
      waitSeconds: 100,
    }));
    const platform = starts({ "workstation.aik8s.run/returns": encodeReturns(configured) });
    // Unbound, as the start path calls it.
    const { recordReturn } = platform;
    expect(await recordReturn(VM, { atMs: NOW, trigger: "standalone", waitSeconds: 42 }, NOW)).toBeUndefined();
    expect(await recordReturn(VM, { atMs: NOW + 60_000, trigger: "warm", waitSeconds: 0 }, NOW)).toBeUndefined();
    const kept = parseReturns(platform.facts(VM)?.annotations["workstation.aik8s.run/returns"]);
    expect(kept).toEqual([
      ...configured,
      { atMs: NOW, trigger: "standalone", waitSeconds: 42 },
      { atMs: NOW + 60_000, trigger: "warm", waitSeconds: 0 },
    ]);
  });

  it("drops configured returns older than the weeks the rule keeps", async () => {
    const old = { atMs: NOW - 10 * 7 * DAY_MS, trigger: "link" as const, waitSeconds: 100 };
    const platform = starts({ "workstation.aik8s.run/returns": encodeReturns([old]) });
    await platform.recordReturn(VM, { atMs: NOW, trigger: "link", waitSeconds: 90 }, NOW);
    expect(parseReturns(platform.facts(VM)?.annotations["workstation.aik8s.run/returns"])).toEqual([
      { atMs: NOW, trigger: "link", waitSeconds: 90 },
    ]);
  });
});
