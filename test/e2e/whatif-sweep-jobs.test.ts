// `whatif --sweep --jobs N`: the fleet cut into slices of VMs, each replayed by a worker thread of the
// built bundle (main.ts starts the slice there), gives the rows one thread gives, for any N.
import { describe, expect, it } from "vitest";
import { replayPolicy } from "../../packages/collector/src/offline/whatif/args.js";
import { stepGrid, type StepSample, type VmHistory } from "../../packages/collector/src/offline/whatif/history.js";
import { replaySweepSlice } from "../../packages/collector/src/offline/whatif/sweep.js";
import { replaySweepJobs, slices } from "../../packages/collector/src/offline/whatif/sweep-workers.js";
import { parseWhatifArgs } from "../../packages/collector/src/offline/whatif/args.js";
import { quiet } from "../../packages/collector/test/fixtures/whatif-readings.js";
import { collectorBundle } from "../support/process.js";

const START = Date.parse("2024-05-01T08:00:00Z");
const MIN = 60_000;
const MINUTES = 6 * 60;

/** Types for a while, takes a break of its own length, types again: each VM stops at other values. */
function person(index: number): VmHistory {
  const breakMinutes = 10 + index * 7;
  const samples: StepSample[] = [];
  let lastTypedAtMs = START - MIN;
  for (let minute = 0; minute <= MINUTES; minute++) {
    const atMs = START + minute * MIN;
    if (minute < 60 || minute >= 60 + breakMinutes) lastTypedAtMs = atMs;
    samples.push({
      connected: true,
      readings: quiet({ lastActivityAtMs: { "tty-input": lastTypedAtMs } }),
      gpuCount: 1,
    });
  }
  return { namespace: "lab", name: `vm-${index}`, samples };
}

describe("whatif --sweep --jobs", () => {
  it("cuts the fleet into ordered slices, none empty", () => {
    expect(slices([1, 2, 3, 4, 5], 2)).toEqual([
      [1, 2],
      [3, 4, 5],
    ]);
    expect(slices([1, 2], 8)).toEqual([[1], [2]]);
    expect(slices([], 4)).toEqual([[]]);
  });

  it("gives in worker threads the outcomes of one thread, in the fleet's order", async () => {
    const fleet = Array.from({ length: 7 }, (_, index) => person(index));
    const grid = stepGrid(START, START + MINUTES * MIN, 60);
    const parsed = parseWhatifArgs(["--prometheus", "http://p:9090", "--from", "now-7d"], START + MINUTES * MIN, () => {
      throw Object.assign(new Error("no config"), { code: "ENOENT" });
    });
    if (parsed === "help" || "kind" in parsed) throw new Error("unexpected options");
    const policies = ["15m", "30m", "1h"].map((value) => replayPolicy(parsed.base, { "idle-timeout": value }, 60));
    const one = replaySweepSlice(fleet, policies, grid, 900);
    expect(one.flat().reduce((sum, vm) => sum + vm.stops.length, 0)).toBeGreaterThan(0);
    for (const jobs of [2, 3]) {
      const many = await replaySweepJobs({
        histories: fleet,
        policies,
        grid,
        falseStopWindowSeconds: 900,
        jobs,
        script: collectorBundle,
      });
      expect(many).toEqual(one);
    }
  });

  it("says which worker failed rather than hanging", async () => {
    await expect(
      replaySweepJobs({
        histories: [person(0), person(1)],
        policies: [],
        grid: stepGrid(START, START + 10 * MIN, 60),
        falseStopWindowSeconds: 900,
        jobs: 2,
        script: "/nonexistent/ws-collector.cjs",
      }),
    ).rejects.toThrow();
  });
});
