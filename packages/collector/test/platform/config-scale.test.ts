// The collector config's scale settings: which per-VM series /metrics carries, the memory
// guard's cgroup root and threshold, the cap on agent connections, their defaults and the errors
// that name a bad value.
import { describe, expect, it } from "vitest";
import { CollectorConfigError, resolveCollectorConfig } from "../../src/platform/config.js";

const resolve = (text: string) => resolveCollectorConfig(text, "collector.yaml", {}, {});

describe("metrics and memory settings", () => {
  it("default to the budgeted series set, /sys/fs/cgroup and shedding at 85 %", () => {
    const config = resolve("");
    expect(config.metrics).toEqual({ vmSeries: "default" });
    expect(config.memory).toEqual({ cgroupRoot: "/sys/fs/cgroup", shedRatio: 0.85 });
  });

  it("take the detail set, another cgroup root and another threshold", () => {
    const config = resolve("metrics: { vmSeries: detailed }\nmemory: { cgroupRoot: /host/cgroup, shedAt: 90% }\n");
    expect(config.metrics.vmSeries).toBe("detailed");
    expect(config.memory).toEqual({ cgroupRoot: "/host/cgroup", shedRatio: 0.9 });
  });

  it("refuse an unknown series set and a threshold that is not a share from 50 % to 98 %, naming both", () => {
    let error: unknown;
    try {
      resolve("metrics: { vmSeries: everything }\nmemory: { shedAt: 0.9 }\n");
    } catch (caught) {
      error = caught;
    }
    expect(error).toBeInstanceOf(CollectorConfigError);
    expect((error as CollectorConfigError).problems).toEqual([
      'collector.yaml: metrics.vmSeries must be default or detailed, not "everything"',
      'collector.yaml: memory.shedAt must be a share of the memory limit from 50% to 98%, not "0.9"',
    ]);
    expect(() => resolve("memory: { shedAt: 99% }\n")).toThrow(/from 50% to 98%, not "99%"/);
  });
});

describe("grpc.maxConnections", () => {
  it("is unset by default (the open-file limit less its reserve decides) and taken when a whole number", () => {
    expect(resolve("").grpc.maxConnections).toBeUndefined();
    expect(resolve("grpc: { maxConnections: 12000 }\n").grpc.maxConnections).toBe(12_000);
  });

  it("refuses what is not a whole number of connections from 1 to 1048576, naming it", () => {
    for (const bad of ["0", "-5", "2.5", '"many"', "2000000"])
      expect(() => resolve(`grpc: { maxConnections: ${bad} }\n`)).toThrow(
        new RegExp(
          `grpc\\.maxConnections must be a whole number of agent connections from 1 to 1048576 .*, not ${bad.replace(".", "\\.")}$`,
        ),
      );
  });
});

describe("grpc.handshakeTimeout and grpc.maxPendingConnectionsPerSource", () => {
  it("are unset by default (agents/connection-slots.ts's defaults by mode) and taken when valid", () => {
    expect(resolve("").grpc.handshakeTimeoutMs).toBeUndefined();
    expect(resolve("").grpc.maxPendingConnectionsPerSource).toBeUndefined();
    const set = resolve("grpc: { handshakeTimeout: 45s, maxPendingConnectionsPerSource: 500 }\n").grpc;
    expect(set.handshakeTimeoutMs).toBe(45_000);
    expect(set.maxPendingConnectionsPerSource).toBe(500);
    expect(resolve("grpc: { handshakeTimeout: 2m }\n").grpc.handshakeTimeoutMs).toBe(120_000);
  });

  it("refuse a deadline outside 1s to 10m, and a share that is not a whole number of connections, naming them", () => {
    for (const bad of ["0s", "500ms", "11m", '"soon"', "-3"])
      expect(() => resolve(`grpc: { handshakeTimeout: ${bad} }\n`)).toThrow(
        /grpc\.handshakeTimeout must be a duration from 1s to 10m .*unset: 30s\), not /,
      );
    for (const bad of ["0", "2.5", '"many"', "2000000"])
      expect(() => resolve(`grpc: { maxPendingConnectionsPerSource: ${bad} }\n`)).toThrow(
        /grpc\.maxPendingConnectionsPerSource must be a whole number of unauthenticated connections from 1 to 1048576 \(unset: 8 in Kubernetes, 64 standalone\), not /,
      );
  });
});

describe("reportHeartbeat", () => {
  it("is 5 minutes by default, off turns reports on change off, and a bad duration is named", () => {
    expect(resolve("mode: standalone\n").reportHeartbeatSeconds).toBe(300);
    expect(resolve("mode: standalone\nreportHeartbeat: 2m\n").reportHeartbeatSeconds).toBe(120);
    expect(resolve("mode: standalone\nreportHeartbeat: off\n").reportHeartbeatSeconds).toBe(0);
    expect(() => resolve("mode: standalone\nreportHeartbeat: soon\n")).toThrow(/reportHeartbeat/);
    // The detail set is whatif's history of every raw reading: unless set, every sample is heard.
    expect(resolve("mode: standalone\nmetrics: { vmSeries: detailed }\n").reportHeartbeatSeconds).toBe(0);
    expect(
      resolve("mode: standalone\nmetrics: { vmSeries: detailed }\nreportHeartbeat: 5m\n").reportHeartbeatSeconds,
    ).toBe(300);
  });
});
