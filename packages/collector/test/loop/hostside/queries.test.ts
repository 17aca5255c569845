// The host-side source's pure parts: the PromQL, the answers as per-VM readings, the API answer
// parser and the config section.
import { describe, expect, it } from "vitest";
import { parseHostSideConfig } from "../../../src/loop/hostside/config.js";
import { disagreements } from "../../../src/loop/hostside/disagree.js";
import { PrometheusQueryError, parseVector, type VectorSample } from "../../../src/loop/hostside/prometheus.js";
import { type HostAnswers, hostQueries, readingFor, readingsFromAnswers } from "../../../src/loop/hostside/queries.js";
import { hostSteps, withHostSteps } from "../../../src/offline/whatif/host-history.js";
import { stepSamples, type VmHistory } from "../../../src/offline/whatif/history.js";

/** Every step's sample of a history, as a replay is handed them. */
function samplesOf(history: VmHistory, count: number) {
  const at = stepSamples(history);
  return Array.from({ length: count }, (_, index) => at(index));
}
import { HOUR, MINUTE, Sim, actionsOf, report, testPolicy, ttySession } from "../../engine/sim.js";

const AT = Date.UTC(2026, 11, 1, 12, 0, 0);
const vm = (name: string) => ({ namespace: "users", name });
const vmi = (name: string) => ({ namespace: "users", vmi: name });

function answers(overrides: Partial<HostAnswers> = {}): HostAnswers {
  return {
    vcpuSeconds: [{ metric: vm("ada"), value: 0.02 }],
    vcpus: [{ metric: vm("ada"), value: 2 }],
    network: [{ metric: vm("ada"), value: 2000 }],
    disk: [{ metric: vm("ada"), value: 0 }],
    vnc: [],
    console: [],
    portForward: [],
    connectionsWitness: [{ metric: {}, value: 2 }],
    ...overrides,
  };
}

describe("hostQueries", () => {
  it("is one query per metric for the whole fleet, over the window", () => {
    const queries = hostQueries(120);
    expect(queries.vcpuSeconds).toBe("sum by (namespace, name) (rate(kubevirt_vmi_vcpu_seconds_total[120s]))");
    expect(queries.vcpus).toBe(
      "count by (namespace, name) (count by (namespace, name, id) (kubevirt_vmi_vcpu_seconds_total))",
    );
    expect(queries.network).toContain("rate(kubevirt_vmi_network_receive_bytes_total[120s])");
    expect(queries.network).toContain("rate(kubevirt_vmi_network_transmit_bytes_total[120s])");
    expect(queries.disk).toContain("kubevirt_vmi_storage_write_traffic_bytes_total");
    expect(queries.vnc).toBe("sum by (namespace, vmi) (max_over_time(kubevirt_vnc_active_connections[120s]))");
    expect(queries.connectionsWitness).toBe("count(kubevirt_virt_api_ready_status)");
    expect(Object.values(queries).some((query) => query.includes('name="'))).toBe(false);
  });

  it("follows relabelled label names", () => {
    const queries = hostQueries(60, { namespace: "exported_namespace", name: "name", vmi: "vmi" });
    expect(queries.vnc).toContain("sum by (exported_namespace, vmi)");
  });
});

describe("readingsFromAnswers", () => {
  it("turns the answers into one reading per VM", () => {
    const batch = readingsFromAnswers(answers({ vnc: [{ metric: vmi("ada"), value: 1 }] }), AT, 120);
    expect(readingFor(batch, "users/ada")).toEqual({
      atMs: AT,
      windowSeconds: 120,
      state: "ok",
      vcpus: 2,
      vcpuBusyRatio: 0.01,
      networkBytesPerSecond: 2000,
      diskBytesPerSecond: 0,
      vncConnections: 1,
      consoleConnections: 0,
      portForwardTunnels: 0,
    });
  });

  it("reads KubeVirt's packet counters each way when both are there; without them the reading is ok, with no packets", () => {
    expect(hostQueries(120).receivePackets).toBe(
      "sum by (namespace, name) (rate(kubevirt_vmi_network_receive_packets_total[120s]))",
    );
    expect(hostQueries(120).transmitPackets).toBe(
      "sum by (namespace, name) (rate(kubevirt_vmi_network_transmit_packets_total[120s]))",
    );
    const both = answers({
      receivePackets: [{ metric: vm("ada"), value: 2.4 }],
      transmitPackets: [{ metric: vm("ada"), value: 1.9 }],
    });
    expect(readingFor(readingsFromAnswers(both, AT, 120), "users/ada")).toMatchObject({
      state: "ok",
      receivePacketsPerSecond: 2.4,
      transmitPacketsPerSecond: 1.9,
    });
    const oneWay = answers({ receivePackets: [{ metric: vm("ada"), value: 2.4 }] });
    const reading = readingFor(readingsFromAnswers(oneWay, AT, 120), "users/ada");
    expect(reading.state).toBe("ok");
    expect(reading.receivePacketsPerSecond).toBeUndefined();
    // A negative packet rate cannot be true: the reading fails, as for any other query.
    const wrong = answers({
      receivePackets: [{ metric: vm("ada"), value: -1 }],
      transmitPackets: [{ metric: vm("ada"), value: 1 }],
    });
    expect(readingFor(readingsFromAnswers(wrong, AT, 120), "users/ada")).toMatchObject({ state: "failed" });
  });

  it("a VM missing a metric is absent, naming it; a VM with none is absent", () => {
    const batch = readingsFromAnswers(answers({ disk: [] }), AT, 120);
    expect(readingFor(batch, "users/ada")).toMatchObject({
      state: "absent",
      message: "no kubevirt_vmi_storage_*_traffic_bytes_total series for this VMI over the last 120s",
    });
    expect(readingFor(batch, "users/bob")).toMatchObject({ state: "absent" });
  });

  it("without virt-api's series every VM fails: connections cannot be seen", () => {
    const batch = readingsFromAnswers(answers({ connectionsWitness: [] }), AT, 120);
    expect(readingFor(batch, "users/ada")).toMatchObject({
      state: "failed",
      message: expect.stringMatching(/virt-api/),
    });
  });
});

describe("impossible readings (a wrong reading is not idleness)", () => {
  const busy = answers({
    vcpuSeconds: [
      { metric: vm("ada"), value: 1.8 },
      { metric: vm("bob"), value: 0.01 },
    ],
    network: [
      { metric: vm("ada"), value: 2000 },
      { metric: vm("bob"), value: 10 },
    ],
    vcpus: [
      { metric: vm("ada"), value: 2 },
      { metric: vm("bob"), value: 2 },
    ],
    disk: [
      { metric: vm("ada"), value: 0 },
      { metric: vm("bob"), value: 0 },
    ],
  });

  it.each([
    ["a negative rate", { vcpuSeconds: [{ metric: vm("ada"), value: -3 }] }, /vcpuSeconds -3 \(below zero\)/],
    ["a hugely negative rate", { network: [{ metric: vm("ada"), value: -1e9 }] }, /network -1000000000 \(below zero\)/],
    ["NaN", { disk: [{ metric: vm("ada"), value: Number.NaN }] }, /disk NaN/],
    ["+Inf", { vcpuSeconds: [{ metric: vm("ada"), value: Number.POSITIVE_INFINITY }] }, /vcpuSeconds \+Inf/],
    ["-Inf", { network: [{ metric: vm("ada"), value: Number.NEGATIVE_INFINITY }] }, /network -Inf/],
    ["a negative connection gauge", { vnc: [{ metric: vmi("ada"), value: -1 }] }, /vnc -1 \(below zero\)/],
    ["a negative vCPU count", { vcpus: [{ metric: vm("ada"), value: -2 }] }, /vcpus -2/],
    [
      "a sample stamped in the future",
      { vcpuSeconds: [{ metric: vm("ada"), value: 0.01, timestampMs: AT + 3_600_000 }] },
      /vcpuSeconds stamped 2026-12-01T13:00:00\.000Z, after the query's 2026-12-01T12:00:00\.000Z/,
    ],
    [
      "a sample stamped with no time",
      { disk: [{ metric: vm("ada"), value: 0, timestampMs: Number.NaN }] },
      /disk stamped with no time/,
    ],
  ] as Array<[string, Partial<HostAnswers>, RegExp]>)(
    "%s fails that VM's reading, never reads as idle; the others are read",
    (_name, wrong, why) => {
      // Ada's series in that query are the wrong ones; Bob's stay right.
      const [query, samples] = Object.entries(wrong)[0] as [keyof HostAnswers, VectorSample[]];
      const isAda = (sample: VectorSample) => (sample.metric.name ?? sample.metric.vmi) === "ada";
      const batch = readingsFromAnswers(
        { ...busy, [query]: [...(busy[query] ?? []).filter((sample) => !isAda(sample)), ...samples] },
        AT,
        120,
      );
      const reading = readingFor(batch, "users/ada");
      expect(reading).toEqual({
        atMs: AT,
        windowSeconds: 120,
        state: "failed",
        message: expect.stringMatching(
          /^Prometheus answered what cannot be true for this VMI: .* a wrong reading is not idleness$/,
        ),
      });
      expect(reading.message).toMatch(why);
      expect(readingFor(batch, "users/bob")).toMatchObject({ state: "ok", networkBytesPerSecond: 10 });
    },
  );

  it("one wrong sample among right ones is not summed away", () => {
    const batch = readingsFromAnswers(
      answers({
        network: [
          { metric: vm("ada"), value: 5000 },
          { metric: vm("ada"), value: -4000 },
        ],
      }),
      AT,
      120,
    );
    expect(readingFor(batch, "users/ada")).toMatchObject({ state: "failed" });
  });

  it("a VM whose only series are wrong is failed, not absent", () => {
    const batch = readingsFromAnswers(
      answers({ vcpuSeconds: [], network: [{ metric: vm("eve"), value: -3 }], disk: [] }),
      AT,
      120,
    );
    expect(readingFor(batch, "users/eve")).toMatchObject({
      state: "failed",
      message: expect.stringMatching(/network -3/),
    });
  });

  it("a wrong witness fails the whole round: no connection can be trusted to be absent", () => {
    for (const value of [Number.NaN, -1, Number.POSITIVE_INFINITY]) {
      const batch = readingsFromAnswers(answers({ connectionsWitness: [{ metric: {}, value }] }), AT, 120);
      expect(batch.ok).toBe(false);
      expect(readingFor(batch, "users/ada")).toMatchObject({
        state: "failed",
        message: expect.stringMatching(/cannot be true for virt-api's metrics \(kubevirt_virt_api_ready_status: /),
      });
    }
  });

  it("a stamp up to a second late is the query's own rounding, not the future", () => {
    const batch = readingsFromAnswers(
      answers({ disk: [{ metric: vm("ada"), value: 0, timestampMs: AT + 1000 }] }),
      AT,
      120,
    );
    expect(readingFor(batch, "users/ada")).toMatchObject({ state: "ok" });
  });

  it("a busy VM whose agent is gone, Prometheus answering negative rates: never noticed, never stopped", () => {
    // What stopped a busy VM: -3 and -1e9 were clamped to 0, which read as a quiet host.
    const sim = new Sim(testPolicy());
    sim.send(report({ sessions: { sessions: [ttySession(0)] } }));
    sim.connected = false;
    const end = sim.now + 6 * HOUR;
    while (sim.now < end) {
      sim.now += MINUTE;
      const wrong = answers({
        vcpuSeconds: [{ metric: vm("ada"), value: -3 }],
        network: [{ metric: vm("ada"), value: -1e9 }],
      });
      sim.host = readingFor(readingsFromAnswers(wrong, sim.now, 120), "users/ada");
      sim.step();
    }
    expect(actionsOf(sim.decisions, "notice")).toEqual([]);
    expect(actionsOf(sim.decisions, "stop")).toEqual([]);
    const last = sim.decisions.at(-1)!;
    expect(last.explanation.reason).toMatch(/missing data is not idleness/);
    expect(last.explanation.host!.summary).toMatch(/^failed: Prometheus answered what cannot be true/);
  });
});

describe("parseVector", () => {
  it("keeps NaN, +Inf, -Inf and garbage as non-finite values, with each sample's time", () => {
    const result = (value: unknown) => ({ metric: vm("ada"), value: [AT / 1000, value] });
    const samples = parseVector(
      200,
      JSON.stringify({
        status: "success",
        data: {
          resultType: "vector",
          result: [result("NaN"), result("+Inf"), result("-Inf"), result("x"), result(""), result("-3")],
        },
      }),
    );
    expect(samples.map((s) => s.value)).toEqual([
      Number.NaN,
      Number.POSITIVE_INFINITY,
      Number.NEGATIVE_INFINITY,
      Number.NaN,
      Number.NaN,
      -3,
    ]);
    expect(samples.every((s) => s.timestampMs === AT)).toBe(true);
  });

  it("reads a vector and says what Prometheus said when it refused", () => {
    expect(
      parseVector(
        200,
        JSON.stringify({
          status: "success",
          data: { resultType: "vector", result: [{ metric: { a: "b" }, value: [1, "2.5"] }] },
        }),
      ),
    ).toEqual([{ metric: { a: "b" }, value: 2.5, timestampMs: 1000 }]);
    expect(() =>
      parseVector(422, JSON.stringify({ status: "error", errorType: "execution", error: "too many samples" })),
    ).toThrow(new PrometheusQueryError("HTTP 422: execution: too many samples"));
    expect(() => parseVector(502, "<html>Bad gateway</html>")).toThrow(/HTTP 502: not a Prometheus API answer/);
    expect(() =>
      parseVector(200, JSON.stringify({ status: "success", data: { resultType: "matrix", result: [] } })),
    ).toThrow(/expected an instant vector/);
  });
});

describe("parseHostSideConfig", () => {
  it("absent: not configured; every problem named", () => {
    expect(parseHostSideConfig(undefined, [], "hostSide")).toBeUndefined();
    const problems: string[] = [];
    parseHostSideConfig(
      { prometheus: { url: "ftp://x", tmeout: "1s" }, interval: "1m", window: "30s", labels: { name: "bad-label" } },
      problems,
      "hostSide",
    );
    expect(problems).toEqual([
      'hostSide.prometheus: unknown setting "tmeout" (known: url, bearerTokenFile, caFile, timeout, maxResponseBytes)',
      'hostSide.prometheus.url: "ftp://x" must be http(s)://host[:port][/prefix], without credentials',
      "hostSide.window (30s) must be at least interval (60s): each round's window must reach back to the previous round, or the readings have gaps",
      'hostSide.labels.name: "bad-label" is not a Prometheus label name',
    ]);
  });

  it("defaults: every minute over two, 10s timeout, 16 MiB", () => {
    const problems: string[] = [];
    expect(parseHostSideConfig({ prometheus: { url: "https://prom:9091" } }, problems, "hostSide")).toEqual({
      prometheus: { url: "https://prom:9091", timeoutMs: 10_000, maxResponseBytes: 16 * 1024 * 1024 },
      intervalSeconds: 60,
      windowSeconds: 120,
      labels: { namespace: "namespace", name: "name", vmi: "vmi" },
      connectionsWitness: "kubevirt_virt_api_ready_status",
    });
    expect(problems).toEqual([]);
  });
});

describe("disagreements", () => {
  const busy = { atMs: AT, windowSeconds: 120, state: "ok" as const, vcpuBusyRatio: 0.9, vncConnections: 1 };
  const thresholds = testPolicy().thresholds;
  it("agent idle, host busy: vcpu and connection; the agent seeing it: none", () => {
    expect(disagreements({ state: "Active", connected: true, activeSignals: [] }, busy, thresholds, AT)).toEqual([
      "vcpu",
      "connection",
    ]);
    expect(
      disagreements(
        { state: "Active", connected: true, activeSignals: ["cpu", "desktop-input"] },
        busy,
        thresholds,
        AT,
      ),
    ).toEqual([]);
    // No agent: nothing to disagree with; a stale reading says nothing.
    expect(disagreements({ state: "AgentLost", connected: false, activeSignals: [] }, busy, thresholds, AT)).toEqual(
      [],
    );
    expect(
      disagreements({ state: "Active", connected: true, activeSignals: [] }, busy, thresholds, AT + 10 * 60_000),
    ).toEqual([]);
  });
});

describe("hostSteps and withHostSteps (whatif --host-window)", () => {
  it("folds range answers into one reading per VM per step, as a live round would read them", () => {
    const grid = { startMs: AT, stepMs: 60_000, count: 3 };
    const t = (index: number) => (AT + index * 60_000) / 1000;
    const series = (metric: Record<string, string>, values: number[]) => [
      { metric, values: values.map((value, index) => [t(index), String(value)] as [number, string]) },
    ];
    const answers = {
      vcpuSeconds: series(vm("ada"), [1.6, 1.6, 0.01]),
      vcpus: series(vm("ada"), [2, 2, 2]),
      network: series(vm("ada"), [2000, 2000, 2000]),
      disk: series(vm("ada"), [0, 0, 0]),
      vnc: series(vmi("ada"), [0, 1, 0]),
      console: [],
      portForward: [],
      // virt-api unscraped at the last step: that step fails.
      connectionsWitness: [{ metric: {}, values: [[t(0), "1"] as [number, string], [t(1), "1"] as [number, string]] }],
    };
    // A history read from Prometheus (its series kept as read).
    const [history] = withHostSteps(
      [{ namespace: "users", name: "ada", samples: { columns: [] } }],
      hostSteps(answers, grid, 120),
    );
    expect(samplesOf(history!, 3).map((sample) => sample?.host)).toEqual([
      expect.objectContaining({ state: "ok", vcpuBusyRatio: 0.8, vncConnections: 0 }),
      expect.objectContaining({ state: "ok", vcpuBusyRatio: 0.8, vncConnections: 1 }),
      expect.objectContaining({ state: "failed", message: expect.stringMatching(/virt-api/) }),
    ]);
    expect(samplesOf(history!, 3)[0]).toMatchObject({ connected: false });
  });

  it("a step whose point is NaN or below zero is a failed reading, not a missing or idle one", () => {
    const grid = { startMs: AT, stepMs: 60_000, count: 2 };
    const t = (index: number) => (AT + index * 60_000) / 1000;
    const series = (metric: Record<string, string>, values: string[]) => [
      { metric, values: values.map((value, index) => [t(index), value] as [number, string]) },
    ];
    // A history of samples (a trace's, a test's).
    const [history] = withHostSteps(
      [{ namespace: "users", name: "ada", samples: [undefined, undefined] }],
      hostSteps(
        {
          vcpuSeconds: series(vm("ada"), ["NaN", "-3"]),
          vcpus: series(vm("ada"), ["2", "2"]),
          network: series(vm("ada"), ["2000", "2000"]),
          disk: series(vm("ada"), ["0", "0"]),
          vnc: [],
          console: [],
          portForward: [],
          connectionsWitness: series({}, ["1", "1"]),
        },
        grid,
        120,
      ),
    );
    expect(samplesOf(history!, 2).map((sample) => sample?.host)).toEqual([
      expect.objectContaining({ state: "failed", message: expect.stringMatching(/vcpuSeconds NaN/) }),
      expect.objectContaining({ state: "failed", message: expect.stringMatching(/vcpuSeconds -3 \(below zero\)/) }),
    ]);
  });
});
