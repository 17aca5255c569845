import { describe, expect, it } from "vitest";
import type { StartProgress } from "../../../src/comeback/start/progress.js";
import { type PlacementMemory, placementNews } from "../../../src/comeback/wait/placement.js";

const T0 = Date.parse("2026-12-07T08:45:00Z");
const blocked: StartProgress = {
  status: "unschedulable",
  stages: [
    { name: "requested", label: "Start requested", state: "done", atMs: T0 },
    { name: "scheduled", label: "VMI scheduled", state: "blocked" },
  ],
  unschedulable: {
    reason: "Unschedulable",
    message: "0/3 nodes are available: 3 Insufficient nvidia.com/gpu.",
    waitedSeconds: 30,
  },
};
const placed: StartProgress = {
  status: "starting",
  stages: [
    { name: "requested", label: "Start requested", state: "done", atMs: T0 },
    { name: "scheduled", label: "VMI scheduled", state: "done", atMs: T0 + 600_000, detail: "on node gpu-2" },
  ],
};

describe("where the GPU went: the owner told once it cannot be placed, and once it is", () => {
  it("tells the scheduler's message once, then the placement with the whole wait", () => {
    const memory: PlacementMemory = {};
    expect(placementNews(memory, blocked, T0, T0 + 30_000)).toEqual({
      kind: "unplaced",
      reason: "Unschedulable",
      message: "0/3 nodes are available: 3 Insufficient nvidia.com/gpu.",
      waitedSeconds: 30,
    });
    expect(placementNews(memory, { ...blocked }, T0, T0 + 60_000)).toBeUndefined();
    expect(placementNews(memory, placed, T0, T0 + 601_000)).toEqual({
      kind: "placed",
      waitedSeconds: 600,
      node: "gpu-2",
    });
    expect(placementNews(memory, placed, T0, T0 + 602_000)).toBeUndefined();
    // Kept for the welcome back in the guest.
    expect(memory).toMatchObject({
      unplacedMessage: "0/3 nodes are available: 3 Insufficient nvidia.com/gpu.",
      placedAfterSeconds: 600,
    });
  });

  it("a start placed at once says nothing", () => {
    expect(placementNews({}, placed, T0, T0 + 5_000)).toBeUndefined();
  });
});
