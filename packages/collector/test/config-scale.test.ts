// The collector config's scale settings: which per-VM series /metrics carries and the memory
// guard's cgroup root and threshold, their defaults and the errors that name a bad value.
import { describe, expect, it } from "vitest";
import { CollectorConfigError, resolveCollectorConfig } from "../src/config.js";

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
