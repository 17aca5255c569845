// The host-side source's pure parts: the PromQL, the answers as per-VM readings, the API answer
// parser and the config section.
import { describe, expect, it } from "vitest";
import { parseHostSideConfig } from "../../src/hostside/config.js";
import { disagreements } from "../../src/hostside/disagree.js";
import { PrometheusQueryError, parseVector } from "../../src/hostside/prometheus.js";
import { type HostAnswers, hostQueries, readingFor, readingsFromAnswers } from "../../src/hostside/queries.js";
import { withHostHistory } from "../../src/whatif/host-history.js";
import { testPolicy } from "../engine/sim.js";

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

describe("parseVector", () => {
  it("reads a vector and says what Prometheus said when it refused", () => {
    expect(
      parseVector(
        200,
        JSON.stringify({
          status: "success",
          data: { resultType: "vector", result: [{ metric: { a: "b" }, value: [1, "2.5"] }] },
        }),
      ),
    ).toEqual([{ metric: { a: "b" }, value: 2.5 }]);
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

describe("withHostHistory (whatif --host-window)", () => {
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
    const [history] = withHostHistory(
      [{ namespace: "users", name: "ada", samples: [undefined, undefined, undefined] }],
      answers,
      grid,
      120,
    );
    expect(history!.samples.map((sample) => sample?.host)).toEqual([
      expect.objectContaining({ state: "ok", vcpuBusyRatio: 0.8, vncConnections: 0 }),
      expect.objectContaining({ state: "ok", vcpuBusyRatio: 0.8, vncConnections: 1 }),
      expect.objectContaining({ state: "failed", message: expect.stringMatching(/virt-api/) }),
    ]);
    expect(history!.samples[0]).toMatchObject({ connected: false });
  });
});
