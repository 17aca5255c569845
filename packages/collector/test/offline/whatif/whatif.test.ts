// whatif's pure parts: options, the replay through the engine, the report.
// The HTTP side runs against a real Prometheus in test/prometheus/.
import { ConfigError } from "@ws/protocol";
import { readFileSync } from "node:fs";
import { Writable } from "node:stream";
import { describe, expect, it } from "vitest";
import { freePort } from "../../../../../test/support/process.js";
import { parseTime, parseWhatifArgs, WhatifUsageError, type WhatifOptions } from "../../../src/offline/whatif/args.js";
import { whatifCommand } from "../../../src/offline/whatif/command.js";
import {
  HistoryError,
  historyFromSeries,
  batchHistoryQuery,
  defaultVmsPerQuery,
  HISTORY_METRICS,
  parseLabelSets,
  recordedVms,
  vmBatches,
  parseMatrix,
  rangeChunks,
  stepGrid,
  stepSamples,
  type StepSample,
  type VmHistory,
} from "../../../src/offline/whatif/history.js";
import type { ReportReadings } from "../../../src/model/readings.js";
import { formatJson, formatText } from "../../../src/offline/whatif/report.js";
import { simulateVm } from "../../../src/offline/whatif/simulate.js";
import { quiet } from "../../fixtures/whatif-readings.js";

const NOW = Date.parse("2024-05-08T00:00:00Z");
const MIN = 60_000;
const noConfig = () => {
  throw Object.assign(new Error("no such file"), { code: "ENOENT" });
};

function options(argv: string[], readConfig: (path: string) => string = noConfig): WhatifOptions {
  const parsed = parseWhatifArgs(
    ["--prometheus", "http://prometheus:9090", "--from", "now-7d", ...argv],
    NOW,
    readConfig,
  );
  if (parsed === "help" || "kind" in parsed) throw new Error("unexpected help or disputes listing");
  return parsed;
}

function usageError(argv: string[], readConfig: (path: string) => string = noConfig): string {
  try {
    parseWhatifArgs(argv, NOW, readConfig);
  } catch (error) {
    expect(error).toBeInstanceOf(WhatifUsageError);
    return (error as Error).message;
  }
  throw new Error(`no error for ${argv.join(" ")}`);
}

describe("whatif options", () => {
  it("reads times as RFC 3339, Unix seconds, now and now-DURATION", () => {
    expect(parseTime("now", NOW, "--to")).toBe(NOW);
    expect(parseTime("now-7d", NOW, "--from")).toBe(NOW - 7 * 86_400_000);
    expect(parseTime("2024-05-01T12:00:00Z", NOW, "--from")).toBe(Date.parse("2024-05-01T12:00:00Z"));
    expect(parseTime("2024-05-01T14:00:00+02:00", NOW, "--from")).toBe(Date.parse("2024-05-01T12:00:00Z"));
    expect(parseTime("1714564800", NOW, "--from")).toBe(1_714_564_800_000);
    expect(() => parseTime("yesterday", NOW, "--from")).toThrow(/--from "yesterday" is not a time/);
    expect(() => parseTime("now-7x", NOW, "--from")).toThrow(/not a duration/);
  });

  it("builds the replayed policy from the defaults and the knobs given", () => {
    const parsed = options([
      "--idle-timeout",
      "30m",
      "--grace-period",
      "5m",
      "--gpu-utilization-threshold",
      "5%",
      "--network-threshold",
      "off",
      "--step",
      "30s",
    ]);
    expect(parsed.fromMs).toBe(NOW - 7 * 86_400_000);
    expect(parsed.toMs).toBe(NOW);
    expect(parsed.stepSeconds).toBe(30);
    expect(parsed.policy).toMatchObject({
      autostopEnabled: true,
      mode: "enforce",
      idleTimeoutSeconds: 1800,
      gracePeriodSeconds: 300,
      reportIntervalSeconds: 30,
    });
    expect(parsed.policy.thresholds.gpuUtilizationRatio).toBeCloseTo(0.05);
    expect(parsed.policy.thresholds.networkBytesPerSecond).toBe(Infinity);
    expect(parsed.policy.thresholds.cpuBusyRatio).toBe(0.5);
    expect(parsed.overrides).toEqual({
      "idle-timeout": "30m",
      "grace-period": "5m",
      "gpu-utilization-threshold": "5%",
      "network-threshold": "off",
    });
    expect(parsed.falseStopWindowSeconds).toBe(900);
  });

  it("starts from a collector config and one of its profiles", () => {
    const config = `mode: standalone
policy:
  defaults:
    idle-timeout: 3h
  profiles:
    teaching: { idle-timeout: 45m, cpu-busy-threshold: 20% }
`;
    expect(options(["--config", "/etc/ws-collector/config.yaml"], () => config).policy.idleTimeoutSeconds).toBe(
      3 * 3600,
    );
    const teaching = options(
      ["--config", "c.yaml", "--profile", "teaching", "--grace-period", "1m"],
      () => config,
    ).policy;
    expect(teaching).toMatchObject({ idleTimeoutSeconds: 45 * 60, gracePeriodSeconds: 60 });
    expect(teaching.thresholds.cpuBusyRatio).toBeCloseTo(0.2);
    expect(
      usageError(
        ["--prometheus", "http://p", "--from", "now-1d", "--config", "c.yaml", "--profile", "training"],
        () => config,
      ),
    ).toMatch(/no such profile .*known: teaching/);
  });

  it("names every problem", () => {
    expect(usageError(["--from", "now-1d"])).toMatch(/needs --prometheus/);
    expect(usageError(["--prometheus", "http://p"])).toMatch(/needs --from/);
    expect(usageError(["--prometheus", "not a url", "--from", "now-1d"])).toMatch(/is not a URL/);
    expect(usageError(["--prometheus", "ftp://p", "--from", "now-1d"])).toMatch(/http:\/\/ or https:\/\//);
    expect(usageError(["--prometheus", "http://p", "--from", "now", "--to", "now-1d"])).toMatch(
      /--to must be after --from/,
    );
    expect(usageError(["--prometheus", "http://p", "--from", "now-1d", "--idle-timeout", "30s"])).toMatch(
      /--idle-timeout 30s: .*minimum of 1m/,
    );
    expect(usageError(["--prometheus", "http://p", "--from", "now-1d", "--idle-timeout", "7200"])).toMatch(
      /has no unit/,
    );
    expect(usageError(["--prometheus", "http://p", "--from", "now-1d", "--gpu-utilization-threshold", "150%"])).toMatch(
      /--gpu-utilization-threshold/,
    );
    expect(usageError(["--prometheus", "http://p", "--from", "now-1d", "--idle-timout", "1h"])).toMatch(/idle-timout/);
    expect(usageError(["--prometheus", "http://p", "--from", "now-1d", "--mode", "observe"])).toMatch(/mode/);
    expect(usageError(["--prometheus", "http://p", "--from", "now-1d", "--vm", 'a"}or{x="'])).toMatch(
      /not a Kubernetes name/,
    );
    expect(usageError(["--prometheus", "http://p", "--from", "now-1d", "--header", "nocolon"])).toMatch(
      /'Name: value'/,
    );
  });

  it("takes an unreadable or invalid --config as a configuration error (exit 3), not a usage error", () => {
    const configError = (readConfig: (path: string) => string) => {
      try {
        parseWhatifArgs(["--prometheus", "http://p", "--from", "now-1d", "--config", "c.yaml"], NOW, readConfig);
      } catch (error) {
        expect(error).toBeInstanceOf(ConfigError);
        return (error as Error).message;
      }
      throw new Error("no error");
    };
    expect(configError(noConfig)).toMatch(/cannot read c.yaml: ENOENT/);
    expect(configError(() => "policy:\n  defaults:\n    idle-timeout: soon\n")).toMatch(
      /c.yaml: defaults.idle-timeout/,
    );
  });

  it("keeps agent-lost-after at two steps or more", () => {
    expect(options(["--step", "5m"]).policy.agentLostAfterSeconds).toBe(600);
    expect(options(["--step", "1m"]).policy.agentLostAfterSeconds).toBe(300);
  });

  it("splits long ranges into queries Prometheus accepts", () => {
    const grid = stepGrid(0, 25_000 * 60_000, 60);
    const chunks = rangeChunks(grid);
    expect(chunks).toHaveLength(3);
    expect(chunks[0]).toEqual({ startMs: 0, endMs: 9_999 * 60_000 });
    expect(chunks[2]!.endMs).toBe(25_000 * 60_000);
    for (const chunk of chunks) expect((chunk.endMs - chunk.startMs) / 60_000 + 1).toBeLessThanOrEqual(10_000);
  });
});

// --- recorded history ------------------------------------------------------------------------

describe("whatif history from Prometheus", () => {
  // Captured from a real Prometheus 2.42 scraping the collector with two agents (vm-idle's agent
  // stopped at +30s; vm-lease holds a 2h lease), queried for every replayed series at a 5s step.
  const fixture = JSON.parse(
    readFileSync(new URL("../../fixtures/prometheus/query_range.json", import.meta.url), "utf8"),
  );
  const grid = stepGrid(fixture.start * 1000, fixture.end * 1000, fixture.step);

  it("asks for exactly the series it replays, a batch of VMs at a time, from the leader", () => {
    expect(fixture.query).toBe(`{__name__=~"workstation_(${HISTORY_METRICS.join("|")})"}`);
    const series = `__name__=~"workstation_(${HISTORY_METRICS.join("|")})",namespace="lab"`;
    // Older recordings name the VM by `vm`; a waiting replica knows the VMs but sees no agent.
    expect(batchHistoryQuery({ namespace: "lab", names: ["vm-idle", "vm-lease"] })).toBe(
      `({${series},name=~"vm-idle|vm-lease"} or {${series},vm=~"vm-idle|vm-lease"}) and on (job, instance) (workstation_collector_leader == 1)`,
    );
    // Each name matches itself only: a dot is a dot, and a hostile label value stays inside its string.
    expect(batchHistoryQuery({ namespace: "lab", names: ["a.b"] })).toContain('name=~"a\\\\.b"}');
    expect(batchHistoryQuery({ namespace: 'x"} or up{a="', names: ['b"|.*'] })).toContain(
      'namespace="x\\"} or up{a=\\"",name=~"b\\"\\\\|\\\\.\\\\*"}',
    );
  });

  it("lists each recorded VM once, by name or the older vm label, and cuts them into batches per namespace", () => {
    const labelSets = parseLabelSets({
      status: "success",
      data: [
        { __name__: "workstation_gpus", namespace: "lab", name: "b", job: "ws", instance: "10.0.0.1:9090" },
        { __name__: "workstation_gpus", namespace: "lab", name: "b", job: "ws", instance: "10.0.0.2:9090" },
        { __name__: "workstation_agent_connected", namespace: "lab", vm: "a", job: "ws", instance: "10.0.0.1:9090" },
        { __name__: "workstation_agent_connected", namespace: "dev", name: "c", job: "ws", instance: "10.0.0.1:9090" },
        { __name__: "workstation_agent_connected", namespace: "lab", name: "d" },
        { __name__: "workstation_agent_connected", name: "no-namespace" },
      ],
    });
    const vms = recordedVms(labelSets, {});
    expect(vms.map((vm) => `${vm.namespace}/${vm.name}`)).toEqual(["dev/c", "lab/a", "lab/b", "lab/d"]);
    expect(recordedVms(labelSets, { vm: "a" })).toEqual([{ namespace: "lab", name: "a" }]);
    expect(vmBatches(vms, 2)).toEqual([
      { namespace: "dev", names: ["c"] },
      { namespace: "lab", names: ["a", "b"] },
      { namespace: "lab", names: ["d"] },
    ]);
    expect(() => parseLabelSets({ status: "success", data: [{ name: 3 }] })).toThrow(/not a label set/);
    expect(() => parseLabelSets({ status: "error", errorType: "bad_data", error: "parse error" })).toThrow(
      "Prometheus refused the query: bad_data: parse error",
    );
  });

  it("reads as many VMs per query as keep each answer near 4 million points", () => {
    // A week at one minute: two chunks of at most 10,000 steps, 12 VMs a query (32 series each, counted generously).
    expect(defaultVmsPerQuery(stepGrid(0, 7 * 86_400_000, 60))).toBe(12);
    // An hour at 5 s: 721 steps.
    expect(defaultVmsPerQuery(stepGrid(0, 3_600_000, 5))).toBe(173);
    expect(defaultVmsPerQuery(stepGrid(0, 30 * 86_400_000, 1))).toBe(12);
  });

  it("folds the matrix into one sample per VM per step", () => {
    const histories = historyFromSeries(parseMatrix(fixture.answer), grid);
    expect(histories.map((h) => `${h.namespace}/${h.name}`)).toEqual(["lab/vm-idle", "lab/vm-lease"]);
    const [idle, leased] = (histories as [VmHistory, VmHistory]).map((history) => {
      const at = stepSamples(history);
      return Array.from({ length: grid.count }, (_, index) => at(index));
    }) as [Array<StepSample | undefined>, Array<StepSample | undefined>];
    // Nothing before the first scrape; reports while connected; the series stays, without readings, once the agent left.
    expect(idle[0]).toBeUndefined();
    const reported = idle.filter((s) => s?.readings);
    expect(reported.length).toBe(4);
    for (const sample of reported) {
      expect(sample!.connected).toBe(true);
      expect(sample!.readings!.cpuBusyRatio).toBeGreaterThanOrEqual(0);
      expect(sample!.readings).toMatchObject({
        jupyterBusyKernels: 0,
        jupyterConnectedKernels: 0,
        idleInhibitors: 0,
        gpuCount: 0,
        lastActivityAtMs: {},
      });
    }
    expect(idle.at(-1)).toEqual({ connected: false });
    const lease = leased.at(-1)!;
    expect(lease.connected).toBe(true);
    expect(lease.leaseExpiresAtMs! - fixture.end * 1000).toBeGreaterThan(7000 * 1000);
  });

  it("replays it: a lease holds, a short recording stops nothing", () => {
    const parsed = options(["--idle-timeout", "1m", "--grace-period", "30s", "--step", "5s"]);
    const outcomes = historyFromSeries(parseMatrix(fixture.answer), grid).map((h) =>
      simulateVm(h, { policy: parsed.policy, grid, falseStopWindowSeconds: 900 }),
    );
    expect(outcomes.map((o) => [o.name, o.stops.length, o.reportedSteps])).toEqual([
      ["vm-idle", 0, 4],
      ["vm-lease", 0, 6],
    ]);
  });

  it("rejects answers that are not a range query's matrix", () => {
    expect(() => parseMatrix({ status: "error", errorType: "bad_data", error: "parse error" })).toThrow(
      new HistoryError("Prometheus refused the query: bad_data: parse error"),
    );
    expect(() => parseMatrix({ status: "success", data: { resultType: "vector", result: [] } })).toThrow(
      /a vector where a range query returns a matrix/,
    );
    expect(() =>
      parseMatrix({ status: "success", data: { resultType: "matrix", result: [{ metric: {}, values: [[1, 2]] }] } }),
    ).toThrow(/malformed sample/);
    expect(() => parseMatrix("<html>")).toThrow(/not a JSON object/);
  });
});

// --- the replay ------------------------------------------------------------------------------

const START = Date.parse("2024-05-01T08:00:00Z");

/** A history of `minutes` one-minute steps; `at(minute)` says what was recorded then. */
function history(minutes: number, at: (minute: number, atMs: number) => StepSample | undefined): VmHistory {
  const samples: Array<StepSample | undefined> = [];
  for (let minute = 0; minute <= minutes; minute++) samples.push(at(minute, START + minute * MIN));
  return { namespace: "lab", name: "ada", samples };
}

const connected = (readings: ReportReadings, extra: Partial<StepSample> = {}): StepSample => ({
  connected: true,
  readings,
  gpuCount: readings.gpuCount,
  ...extra,
});

function replay(vm: VmHistory, minutes: number, argv: string[]) {
  const parsed = options(argv);
  return simulateVm(vm, {
    policy: parsed.policy,
    grid: stepGrid(START, START + minutes * MIN, 60),
    falseStopWindowSeconds: parsed.falseStopWindowSeconds,
  });
}

describe("whatif replay", () => {
  it("stops an idle VM after idle-timeout plus grace, and saves until the end of the range", () => {
    const vm = history(180, () => connected(quiet()));
    const outcome = replay(vm, 180, ["--idle-timeout", "1h", "--grace-period", "10m"]);
    expect(outcome.stops).toHaveLength(1);
    const [stop] = outcome.stops;
    expect(stop).toMatchObject({
      atMs: START + 70 * MIN,
      endedBy: "end-of-range",
      likelyFalse: false,
      gpus: 1,
      trigger: "idle",
    });
    expect(outcome.vmHoursSaved).toBeCloseTo(110 / 60);
    expect(outcome.gpuHoursSaved).toBeCloseTo(110 / 60);
    expect(outcome.reportedSteps).toBe(181);
  });

  it("counts activity soon after a stop as a likely false stop, and starts the idle clock afresh after it", () => {
    const typedAt = START + 75 * MIN - 20_000;
    const vm = history(240, (minute) =>
      connected(quiet(minute >= 75 ? { lastActivityAtMs: { "tty-input": typedAt } } : {})),
    );
    const outcome = replay(vm, 240, ["--idle-timeout", "1h", "--grace-period", "10m"]);
    expect(
      outcome.stops.map((stop) => ({
        at: (stop.atMs - START) / MIN,
        endedBy: stop.endedBy,
        likelyFalse: stop.likelyFalse,
        resumedBy: stop.resumedBy,
      })),
    ).toEqual([
      { at: 70, endedBy: "activity", likelyFalse: true, resumedBy: "tty-input" },
      // Started again at minute 75: the idle clock starts there, a second stop 70 minutes later.
      { at: 145, endedBy: "end-of-range", likelyFalse: false, resumedBy: undefined },
    ]);
    expect(outcome.stops[0]!.untilMs).toBe(typedAt);
    expect(outcome.likelyFalseStops).toBe(1);
  });

  it("does not call a stop false when the user comes back much later", () => {
    const vm = history(240, (minute, atMs) =>
      connected(quiet(minute >= 200 ? { lastActivityAtMs: { "tty-input": Math.min(atMs, START + 200 * MIN) } } : {})),
    );
    const outcome = replay(vm, 240, ["--idle-timeout", "1h", "--grace-period", "10m"]);
    expect(outcome.stops[0]).toMatchObject({ atMs: START + 70 * MIN, endedBy: "activity", likelyFalse: false });
    expect(outcome.stops[0]!.savedSeconds).toBe(130 * 60);
  });

  it("applies the thresholds given: a GPU at 30% holds the VM at 10% and not at 50%", () => {
    const vm = history(180, () => connected(quiet({ gpuUtilization: { "0": 0.3 } })));
    expect(replay(vm, 180, ["--idle-timeout", "1h", "--grace-period", "10m"]).stops).toEqual([]);
    const looser = replay(vm, 180, [
      "--idle-timeout",
      "1h",
      "--grace-period",
      "10m",
      "--gpu-utilization-threshold",
      "50%",
    ]);
    expect(looser.stops).toHaveLength(1);
  });

  it("holds the VM while a recorded busy kernel, background work or inhibitor lasts", () => {
    for (const busy of [
      { jupyterBusyKernels: 1 },
      { userProcessCpuCores: 3 },
      { networkBytesPerSecond: 5e7 },
      { idleInhibitors: 1 },
    ]) {
      const vm = history(180, () => connected(quiet(busy)));
      expect(replay(vm, 180, ["--idle-timeout", "1h", "--grace-period", "10m"]).stops, JSON.stringify(busy)).toEqual(
        [],
      );
    }
  });

  it("honours a recorded lease until it ends", () => {
    const leaseEnd = START + 120 * MIN;
    const vm = history(240, (_minute, atMs) =>
      connected(quiet(), atMs < leaseEnd ? { leaseExpiresAtMs: leaseEnd } : {}),
    );
    const outcome = replay(vm, 240, ["--idle-timeout", "1h", "--grace-period", "10m"]);
    expect(outcome.stops).toHaveLength(1);
    expect(outcome.stops[0]!.atMs).toBe(leaseEnd + 10 * MIN);
  });

  it("ends the saving when the recorded VM goes away, and never stops a VM it cannot see", () => {
    const gone = history(180, (minute) => (minute < 100 ? connected(quiet()) : { connected: false, gpuCount: 1 }));
    const outcome = replay(gone, 180, ["--idle-timeout", "1h", "--grace-period", "10m"]);
    expect(outcome.stops).toEqual([
      expect.objectContaining({ atMs: START + 70 * MIN, endedBy: "vm-gone", untilMs: START + 100 * MIN }),
    ]);

    const silent = history(180, (minute) => (minute < 10 ? connected(quiet()) : { connected: false }));
    expect(replay(silent, 180, ["--idle-timeout", "1h", "--grace-period", "10m"]).stops).toEqual([]);
  });

  it("names, under a stop, the machine traffic it did not count: a forward judged by its kernel, a cadence", () => {
    const vm = history(120, (_minute, atMs) =>
      connected(
        quiet({
          remoteForwardJupyterPort: 8888,
          remoteCadenceSeconds: 30,
          lastActivityAtMs: { "remote-connected": atMs, "jupyter-kernel": START - 3 * 3600_000 },
        }),
      ),
    );
    const parsed = options(["--idle-timeout", "1h", "--grace-period", "10m"]);
    const outcome = replay(vm, 120, ["--idle-timeout", "1h", "--grace-period", "10m"]);
    expect(outcome.stops).toHaveLength(1);
    const text = formatText({
      fromMs: START,
      toMs: START + 120 * MIN,
      stepSeconds: 60,
      falseStopWindowSeconds: 900,
      policy: parsed.policy,
      overrides: parsed.overrides,
      vms: [outcome],
    });
    expect(text).toMatch(/not counted: .*forward to Jupyter server 8888: judged by the kernel, idle 4h10m \(weak\)/);
    expect(text).toMatch(/not counted: .*regular traffic every 30s \(a page reloading itself or a poller\) \(weak\)/);
  });

  it("prints a table and JSON with per-VM and total figures", () => {
    const vm = history(180, () => connected(quiet({ gpuCount: 2, gpuUtilization: { "0": 0, "1": 0 } })));
    const parsed = options(["--idle-timeout", "1h", "--grace-period", "10m"]);
    const outcome = replay(vm, 180, ["--idle-timeout", "1h", "--grace-period", "10m"]);
    const result = {
      fromMs: START,
      toMs: START + 180 * MIN,
      stepSeconds: 60,
      falseStopWindowSeconds: 900,
      policy: parsed.policy,
      overrides: parsed.overrides,
      vms: [outcome],
    };
    const text = formatText(result);
    expect(text).toContain("What-if 2024-05-01T08:00:00Z … 2024-05-01T11:00:00Z, one step every 1m, 1 VM");
    expect(text).toContain("idle-timeout 1h, grace-period 10m");
    expect(text).toMatch(/lab\/ada\s+1\s+0\s+1\.83\s+3\.67/);
    expect(text).toMatch(/total\s+1\s+0\s+1\.83\s+3\.67/);
    expect(text).toContain("2024-05-01T09:10:00Z  idle until the end of the range; saved 1.83 VM-hours × 2 GPU");
    const json = JSON.parse(formatJson(result));
    expect(json.total).toEqual({
      vms: 1,
      stops: 1,
      likelyFalseStops: 0,
      vmHoursSaved: 110 / 60,
      gpuHoursSaved: 220 / 60,
    });
    expect(json.vms[0].stopList[0]).toMatchObject({
      at: "2024-05-01T09:10:00Z",
      endedBy: "end-of-range",
      gpus: 2,
      likelyFalse: false,
    });
    expect(json.policy.idleTimeoutSeconds).toBe(3600);
  });
});

describe("whatif command", () => {
  const sink = () => {
    let text = "";
    const stream = new Writable({
      write(chunk, _encoding, done) {
        text += chunk.toString();
        done();
      },
    });
    return { stream, text: () => text };
  };

  it("prints its help and exits 2 on bad usage", async () => {
    const out = sink();
    const err = sink();
    expect(await whatifCommand(["--help"], { stdout: out.stream, stderr: err.stream })).toBe(0);
    expect(out.text()).toContain("Usage: ws-collector whatif --prometheus URL --from TIME");
    expect(out.text()).toContain("idle-timeout, grace-period");
    expect(await whatifCommand(["--from", "now-1d"], { stdout: out.stream, stderr: err.stream })).toBe(2);
    expect(err.text()).toMatch(/whatif needs --prometheus/);
  });

  it("says clearly when Prometheus cannot be reached", async () => {
    const out = sink();
    const err = sink();
    // A port nothing listens on: a real refused connection.
    const port = await freePort();
    const code = await whatifCommand(["--prometheus", `http://127.0.0.1:${port}`, "--from", "now-1h"], {
      stdout: out.stream,
      stderr: err.stream,
    });
    expect(code).toBe(1);
    expect(err.text()).toContain(`cannot reach Prometheus at http://127.0.0.1:${port}/: ECONNREFUSED`);
  });
});
