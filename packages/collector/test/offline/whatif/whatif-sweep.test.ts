// whatif --sweep's pure parts: the plan, the sums, the recommendation, on a fleet whose right
// answer is known. The HTTP side runs against a real Prometheus in test/prometheus/live.test.ts.
import { readdirSync } from "node:fs";
import { Writable } from "node:stream";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { whatifCommand } from "../../../src/offline/whatif/command.js";
import { parseWhatifArgs, replayPolicy, WHATIF_KNOBS, type WhatifOptions } from "../../../src/offline/whatif/args.js";
import { stepGrid, type StepSample, type VmHistory } from "../../../src/offline/whatif/history.js";
import { quiet } from "../../fixtures/whatif-readings.js";
import { simulateVm, totals } from "../../../src/offline/whatif/simulate.js";
import { bar, formatSweepJson, formatSweepText } from "../../../src/offline/whatif/sweep-report.js";
import { capacityFromSeries, planSweep, recommend, runSweep } from "../../../src/offline/whatif/sweep.js";

const NOW = Date.parse("2024-05-08T00:00:00Z");
const START = Date.parse("2024-05-01T08:00:00Z");
const MIN = 60_000;
const noConfig = () => {
  throw Object.assign(new Error("no such file"), { code: "ENOENT" });
};

function options(argv: string[]): WhatifOptions {
  const parsed = parseWhatifArgs(
    ["--prometheus", "http://prometheus:9090", "--from", "now-7d", ...argv],
    NOW,
    noConfig,
  );
  if (parsed === "help" || "kind" in parsed) throw new Error("unexpected help or disputes listing");
  return parsed;
}

function usageError(argv: string[]): string {
  try {
    options(argv);
  } catch (error) {
    return (error as Error).message;
  }
  throw new Error(`no error for ${argv.join(" ")}`);
}

describe("whatif --sweep options", () => {
  it("expands ranges of durations and percentages and takes lists as given", () => {
    expect(planSweep(["idle-timeout=30m..2h/30m"], {}, WHATIF_KNOBS).knobs).toEqual([
      { name: "idle-timeout", values: ["30m", "1h", "1h30m", "2h"] },
    ]);
    expect(planSweep(["cpu-busy-threshold=10%..30%/10%"], {}, WHATIF_KNOBS).knobs[0]!.values).toEqual([
      "10%",
      "20%",
      "30%",
    ]);
    // A listed duration is printed in its one spelling; a value with control characters is refused.
    expect(planSweep(["idle-timeout=90m,2h"], {}, WHATIF_KNOBS).knobs[0]!.values).toEqual(["1h30m", "2h"]);
    expect(() => planSweep(["idle-timeout=1h,\u001b[31m2h"], {}, WHATIF_KNOBS)).toThrow(/plain text/);
    const two = planSweep(["idle-timeout=30m,1h", "grace-period=5m,15m"], {}, WHATIF_KNOBS);
    expect(two.points.map((point) => point.overrides)).toEqual([
      { "idle-timeout": "30m", "grace-period": "5m" },
      { "idle-timeout": "30m", "grace-period": "15m" },
      { "idle-timeout": "1h", "grace-period": "5m" },
      { "idle-timeout": "1h", "grace-period": "15m" },
    ]);
  });

  it("keeps the other knobs and the budget, and names every mistake", () => {
    const parsed = options(["--sweep", "idle-timeout=30m,1h", "--grace-period", "5m", "--false-stop-budget", "2"]);
    expect(parsed.sweep).toMatchObject({ falseStopBudget: 2, knobs: [{ name: "idle-timeout" }] });
    expect(parsed.overrides).toEqual({ "grace-period": "5m" });
    expect(options(["--sweep", "idle-timeout=30m"]).sweep!.falseStopBudget).toBe(1);

    expect(usageError(["--sweep", "idle-timout=30m"])).toMatch(/--sweep idle-timout: not a knob whatif replays/);
    expect(usageError(["--sweep", "idle-timeout"])).toMatch(/write it as KNOB=VALUES/);
    expect(usageError(["--sweep", "idle-timeout=2h..30m/30m"])).toMatch(/must go up/);
    expect(usageError(["--sweep", "idle-timeout=30m..4d/1m"])).toMatch(/more than 64 values/);
    expect(usageError(["--sweep", "tty-output-counts=a..b/c"])).toMatch(/a range needs durations/);
    expect(usageError(["--sweep", "idle-timeout=10s"])).toMatch(/--idle-timeout/);
    expect(usageError(["--sweep", "idle-timeout=30m", "--idle-timeout", "1h"])).toMatch(/both set it/);
    expect(usageError(["--false-stop-budget", "1"])).toMatch(/goes with --sweep/);
    expect(usageError(["--sweep", "idle-timeout=30m", "--false-stop-budget", "many"])).toMatch(/per 100 stops/);
    expect(
      usageError(["--sweep", "idle-timeout=1h", "--sweep", "grace-period=1m", "--sweep", "cpu-busy-threshold=5%"]),
    ).toMatch(/at most two knobs/);
  });

  it("takes --jobs with --sweep only, a whole number of threads; without it the caller picks (the cores)", () => {
    expect(options(["--sweep", "idle-timeout=30m", "--jobs", "3"]).sweep!.jobs).toBe(3);
    expect(options(["--sweep", "idle-timeout=30m"]).sweep!.jobs).toBeUndefined();
    expect(usageError(["--jobs", "2"])).toMatch(/--jobs goes with --sweep/);
    expect(usageError(["--sweep", "idle-timeout=30m", "--jobs", "0"])).toMatch(/number of worker threads/);
    expect(usageError(["--sweep", "idle-timeout=30m", "--jobs", "two"])).toMatch(/number of worker threads/);
  });

  it("takes --vms-per-query, a whole number of VMs from 1 to 100000, with Prometheus only", () => {
    expect(options(["--vms-per-query", "4"]).vmsPerQuery).toBe(4);
    expect(options([]).vmsPerQuery).toBeUndefined();
    for (const bad of ["0", "2.5", "many", "100001"])
      expect(usageError(["--vms-per-query", bad])).toMatch(/give a number of VMs, 1 to 100000/);
    expect(usageError(["--vms-per-query", "-1"])).toMatch(/--vms-per-query needs a value/);
    const trace = () => parseWhatifArgs(["--trace", "t.jsonl", "--vms-per-query", "4"], NOW, noConfig);
    expect(trace).toThrow(/--vms-per-query reads Prometheus/);
  });
});

// --- a fleet whose right answer is known -------------------------------------------------------

const MINUTES = 480;

/**
 * A person types for an hour, leaves for 40 minutes (lunch), types for another hour and leaves for
 * the day. An idle-timeout that stops during lunch (timeout + grace-period under 40 minutes) stops
 * someone who comes back minutes later: a likely false stop.
 */
function lunchBreaker(name: string, shiftMinutes: number): VmHistory {
  const working = (minute: number) => minute < 60 || (minute >= 100 && minute < 160);
  const samples: StepSample[] = [];
  let lastTypedAtMs = START - MIN;
  for (let minute = 0; minute <= MINUTES; minute++) {
    const atMs = START + minute * MIN;
    if (working(minute - shiftMinutes)) lastTypedAtMs = atMs;
    samples.push({
      connected: true,
      readings: quiet({ lastActivityAtMs: { "tty-input": lastTypedAtMs } }),
      gpuCount: 1,
    });
  }
  return { namespace: "lab", name, samples };
}

const FLEET = Array.from({ length: 10 }, (_, index) => lunchBreaker(`vm-${index}`, index * 5));
const GRID = stepGrid(START, START + MINUTES * MIN, 60);

function sweep(argv: string[]) {
  const parsed = options(argv);
  const rows = runSweep(
    {
      plan: parsed.sweep!,
      grid: GRID,
      falseStopWindowSeconds: parsed.falseStopWindowSeconds,
      falseStopBudget: parsed.sweep!.falseStopBudget,
      policyFor: (overrides) => replayPolicy(parsed.base, { ...parsed.overrides, ...overrides }, 60),
      capacity: new Map(FLEET.map((vm) => [`lab/${vm.name}`, { cores: 4, memoryGiB: 16 }])),
    },
    FLEET,
  );
  return { parsed, rows };
}

describe("whatif --sweep on a fleet that takes a 40-minute lunch", () => {
  it("finds the false stops below 35m + grace and recommends the smallest idle-timeout without them", () => {
    const { parsed, rows } = sweep(["--sweep", "idle-timeout=15m..1h/15m", "--grace-period", "5m"]);
    const byValue = Object.fromEntries(rows.map((row) => [row.overrides["idle-timeout"], row]));
    // 15m: stopped 20 minutes into lunch, back 20 minutes later: a stop, but not within 15 minutes.
    expect(byValue["15m"]).toMatchObject({ stops: 20, likelyFalseStops: 0 });
    // 30m: stopped 35 minutes into lunch, back 5 minutes later: every lunch stop is a likely false stop.
    expect(byValue["30m"]).toMatchObject({
      stops: 20,
      likelyFalseStops: 10,
      likelyFalsePer100: 50,
      withinBudget: false,
    });
    // 45m and 1h outlast lunch: one stop each in the evening.
    expect(byValue["45m"]).toMatchObject({ stops: 10, likelyFalseStops: 0, withinBudget: true });
    expect(byValue["1h"]).toMatchObject({ stops: 10, likelyFalseStops: 0, withinBudget: true });
    // The person is told grace-period ahead.
    for (const row of rows) expect(row.longestNoticeSeconds).toBe(300);
    // Capacity turns VM-hours into core- and GiB-hours; the GPU was held all along.
    expect(byValue["45m"]!.coreHours).toBeCloseTo(byValue["45m"]!.vmHours * 4);
    expect(byValue["45m"]!.memoryGiBHours).toBeCloseTo(byValue["45m"]!.vmHours * 16);
    expect(byValue["45m"]!.gpuHours).toBeCloseTo(byValue["45m"]!.vmHours);
    expect(byValue["45m"]!.vmHours).toBeGreaterThan(byValue["1h"]!.vmHours);

    const recommendation = recommend(rows, {
      knobs: parsed.sweep!.knobs,
      falseStopBudget: 1,
      annotationPrefix: parsed.annotationPrefix,
      profile: "teaching",
      namespace: "lab",
    });
    // 15m keeps the budget too (the lunch stops end 20 minutes later): the smallest value within it.
    expect(recommendation.overrides).toEqual({ "idle-timeout": "15m" });
    expect(recommendation.config).toBe("policy.profiles.teaching: { idle-timeout: 15m }");
    expect(recommendation.annotate).toBe(
      "kubectl annotate vm --all -n lab --overwrite workstation.aik8s.run/idle-timeout=15m",
    );
  });

  it("recommends past the false stops when the window covers the return", () => {
    // A 25-minute window counts the 15m value's lunch stops (back 20 minutes later) as false too.
    const { parsed, rows } = sweep([
      "--sweep",
      "idle-timeout=15m..1h/15m",
      "--grace-period",
      "5m",
      "--false-stop-window",
      "25m",
    ]);
    expect(rows.map((row) => row.likelyFalseStops)).toEqual([10, 10, 0, 0]);
    const recommendation = recommend(rows, {
      knobs: parsed.sweep!.knobs,
      falseStopBudget: 1,
      annotationPrefix: "workstation.aik8s.run/",
    });
    expect(recommendation.overrides).toEqual({ "idle-timeout": "45m" });
    expect(recommendation.why).toBe(
      "the smallest idle-timeout whose likely false stops stay within 1 likely false stop per 100 stops",
    );
    expect(recommendation.config).toBe("policy.defaults: { idle-timeout: 45m }");
    expect(recommendation.annotate).toBe(
      "kubectl annotate vm --all -A --overwrite workstation.aik8s.run/idle-timeout=45m",
    );
    // One VM without its namespace: kubectl needs one, the line says where it goes.
    expect(
      recommend(rows, { knobs: parsed.sweep!.knobs, falseStopBudget: 1, annotationPrefix: "p/", vm: "ada" }).annotate,
    ).toBe("kubectl annotate vm ada -n NAMESPACE --overwrite p/idle-timeout=45m");
    // A looser budget takes the smaller value.
    expect(
      recommend(
        rows.map((row) => ({ ...row, withinBudget: row.likelyFalsePer100 <= 50 })),
        { knobs: parsed.sweep!.knobs, falseStopBudget: 50, annotationPrefix: "p/" },
      ).overrides,
    ).toEqual({ "idle-timeout": "15m" });
  });

  it("replays each value exactly as whatif does (the same simulateVm, step and decide)", () => {
    const { parsed, rows } = sweep(["--sweep", "idle-timeout=30m,45m", "--grace-period", "5m"]);
    for (const row of rows) {
      const policy = replayPolicy(parsed.base, { "grace-period": "5m", ...row.overrides }, 60);
      const sum = totals(FLEET.map((vm) => simulateVm(vm, { policy, grid: GRID, falseStopWindowSeconds: 900 })));
      expect({ stops: row.stops, likelyFalseStops: row.likelyFalseStops, vmHours: row.vmHours }).toEqual({
        stops: sum.stops,
        likelyFalseStops: sum.likelyFalseStops,
        vmHours: sum.vmHoursSaved,
      });
    }
  });

  it("counts the disputed stops each value would still make", () => {
    const parsed = options(["--sweep", "idle-timeout=30m,45m", "--grace-period", "5m"]);
    // vm-0's user disputed the lunch stop a 30m idle-timeout makes (typed last at 59m, stopped 35 minutes later).
    const dispute = {
      vm: "lab/vm-0",
      stoppedAt: new Date(START + 94 * MIN).toISOString(),
      reason: "idle",
      at: new Date(START + 100 * MIN).toISOString(),
      by: "ada",
      what: "at lunch, coming back",
      knob: { name: "idle-timeout", value: "45m", text: "idle-timeout 45m would have kept it" },
    };
    const rows = runSweep(
      {
        plan: parsed.sweep!,
        grid: GRID,
        falseStopWindowSeconds: 900,
        falseStopBudget: 1,
        policyFor: (overrides) => replayPolicy(parsed.base, { ...parsed.overrides, ...overrides }, 60),
        capacity: new Map(),
        disputes: [dispute],
      },
      FLEET,
    );
    expect(rows.map((row) => [row.overrides["idle-timeout"], row.disputedStillStopped])).toEqual([
      ["30m", 1],
      ["45m", 0],
    ]);
    // Without capacity, core- and GiB-hours are unknown, not zero.
    expect(rows[0]!.coreHours).toBeUndefined();
  });

  it("says so when no value keeps the budget, and picks the most reclaimed of two knobs", () => {
    const { parsed, rows } = sweep(["--sweep", "idle-timeout=30m", "--grace-period", "5m"]);
    const none = recommend(rows, { knobs: parsed.sweep!.knobs, falseStopBudget: 1, annotationPrefix: "p/" });
    expect(none.overrides).toBeUndefined();
    expect(none.why).toMatch(/no value swept stays within 1 likely false stop per 100 stops/);

    const pair = sweep(["--sweep", "idle-timeout=30m,45m", "--sweep", "grace-period=5m,10m"]);
    const chosen = recommend(pair.rows, {
      knobs: pair.parsed.sweep!.knobs,
      falseStopBudget: 1,
      annotationPrefix: "p/",
    });
    expect(chosen.overrides).toEqual({ "idle-timeout": "45m", "grace-period": "5m" });
    expect(chosen.why).toMatch(/reclaims the most VM-hours/);
  });

  it("prints a table with bars and the recommendation, and JSON for scripts", () => {
    const { parsed, rows } = sweep(["--sweep", "idle-timeout=30m,45m", "--grace-period", "5m"]);
    const result = {
      fromMs: GRID.startMs,
      toMs: GRID.startMs + MINUTES * MIN,
      stepSeconds: 60,
      falseStopWindowSeconds: 900,
      falseStopBudget: 1,
      vms: FLEET.length,
      knobs: parsed.sweep!.knobs,
      rows,
      recommendation: recommend(rows, { knobs: parsed.sweep!.knobs, falseStopBudget: 1, annotationPrefix: "ws/" }),
    };
    const text = formatSweepText(result);
    expect(text).toMatch(/^idle-timeout=30m\s+20\s+[\d.]+\s+[\d.]+\s+[\d.]+\s+[\d.]+\s+10\s+50\.0 !\s+5m$/m);
    expect(text).toMatch(/^idle-timeout=45m\s+10\s+[\d.]+\s+[\d.]+\s+[\d.]+\s+[\d.]+\s+0\s+0\.0\s+5m$/m);
    expect(text).toMatch(/^ {2}idle-timeout=30m {2}#+ +[\d.]+\n {20}x{30} 10$/m);
    expect(text).toContain("Recommended: idle-timeout 45m — the smallest idle-timeout whose likely false stops");
    expect(text).toContain("Or on the VMs: kubectl annotate vm --all -A --overwrite ws/idle-timeout=45m");
    const json = JSON.parse(formatSweepJson(result));
    expect(json.rows.map((row: any) => [row.overrides["idle-timeout"], row.stops, row.likelyFalseStops])).toEqual([
      ["30m", 20, 10],
      ["45m", 10, 0],
    ]);
    expect(json.recommendation.overrides).toEqual({ "idle-timeout": "45m" });
    expect(json.falseStopBudgetPer100).toBe(1);
  });

  it("draws bars to scale and reads capacity from KubeVirt's series", () => {
    expect(bar(10, 10, 20)).toBe("#".repeat(20));
    expect(bar(0.1, 10, 20)).toBe("#");
    expect(bar(0, 10, 20)).toBe("");
    const capacity = capacityFromSeries(
      [{ metric: { namespace: "lab", name: "a" }, values: [[1, "8"]] }],
      [{ metric: { namespace: "lab", name: "a" }, values: [[1, String(32 * 2 ** 30)]] }],
    );
    expect(capacity.get("lab/a")).toEqual({ cores: 8, memoryGiB: 32 });
  });
});

describe("whatif --trace", () => {
  const trace = fileURLToPath(new URL("../../../../../docs/examples/idle-then-stop.trace.jsonl", import.meta.url));
  async function whatif(argv: string[]): Promise<{ code: number; out: string; err: string }> {
    let out = "";
    let err = "";
    const sink = (write: (text: string) => void) =>
      new Writable({
        write(chunk, _encoding, done) {
          write(String(chunk));
          done();
        },
      });
    const code = await whatifCommand(argv, {
      stdout: sink((text) => (out += text)),
      stderr: sink((text) => (err += text)),
    });
    return { code, out, err };
  }

  it("replays a trace as it replays Prometheus: the stop replay makes, and a sweep over it", async () => {
    // docs/examples' story: idle from 8m48s, a notice at 5 minutes idle, stopped 2 minutes later (replay: +00:15:48).
    const plain = await whatif(["--trace", trace, "--idle-timeout", "5m", "--grace-period", "2m", "--json"]);
    expect(plain.err).toBe("");
    const json = JSON.parse(plain.out);
    expect(json.vms.map((vm: any) => [vm.namespace, vm.name, vm.stops])).toEqual([["demo", "alice", 1]]);
    expect(json.vms[0].stopList[0].at).toBe("1970-01-01T00:15:48Z");

    const sweep = await whatif(["--trace", trace, "--grace-period", "2m", "--sweep", "idle-timeout=5m,10m", "--json"]);
    const rows = JSON.parse(sweep.out).rows;
    expect(rows.map((row: any) => [row.overrides["idle-timeout"], row.stops, row.longestNoticeSeconds])).toEqual([
      ["5m", 1, 120],
      ["10m", 0, 0],
    ]);
    // From a trace nothing tells the cores or memory: unknown, not zero.
    expect(rows[0].coreHours).toBeUndefined();
  });

  it("gives for every recorded trace the rows of one plain whatif per value (the values share each report's evidence)", async () => {
    const examples = fileURLToPath(new URL("../../../../../docs/examples/", import.meta.url));
    const traces = readdirSync(examples).filter((name) => name.endsWith(".trace.jsonl"));
    expect(traces.length).toBeGreaterThan(5);
    // A timeout (only the desktop's liveness reads it), thresholds (each value its own evidence), and both at once.
    const sweeps = [
      ["idle-timeout=3m,5m,10m"],
      ["cpu-busy-threshold=1%,20%,90%"],
      ["tty-output-counts=true,false", "idle-timeout=5m,20m"],
    ];
    let stops = 0;
    for (const name of traces) {
      const base = ["--trace", `${examples}${name}`, "--grace-period", "2m", "--json"];
      for (const swept of sweeps) {
        const sweep = await whatif([...base, ...swept.flatMap((knob) => ["--sweep", knob])]);
        expect(sweep.err).toBe("");
        for (const row of JSON.parse(sweep.out).rows) {
          const knobs = Object.entries(row.overrides as Record<string, string>).flatMap(([knob, value]) => [
            `--${knob}`,
            value,
          ]);
          const plain = await whatif([...base, ...knobs]);
          const total = JSON.parse(plain.out).total;
          expect([name, row.overrides, row.stops, row.likelyFalseStops, row.vmHours, row.gpuHours]).toEqual([
            name,
            row.overrides,
            total.stops,
            total.likelyFalseStops,
            total.vmHoursSaved,
            total.gpuHoursSaved,
          ]);
          stops += row.stops;
        }
      }
    }
    // The traces stop VMs under some values: the rows compared are not all empty.
    expect(stops).toBeGreaterThan(0);
  });

  it("takes one recording, not two, and says what a bad trace holds", async () => {
    expect(usageError(["--trace", trace])).toMatch(/--trace and --prometheus: replay one of them/);
    expect(() => parseWhatifArgs(["--trace", trace, "--from", "now-7d"], NOW, noConfig)).toThrow(
      /--from reads Prometheus; a --trace replays its own range/,
    );
    const bad = await whatif(["--trace", "/nonexistent/trace.jsonl"]);
    expect(bad.code).toBe(1);
    expect(bad.err).toMatch(/--trace \/nonexistent\/trace.jsonl: ENOENT/);
  });
});
