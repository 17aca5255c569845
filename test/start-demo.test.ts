// `npm start`'s demo judges this machine's users, not the machine (issue 40, item 8): the config
// scripts/start.mjs writes, resolved by the collector's own resolver, turns a whole-machine disk
// burst (a browser opening the status page) into no work at all, while users' processes above
// the demo's 1.5 cores still keep the machine.
import { describe, expect, it } from "vitest";
import { resolveCollectorConfig } from "../packages/collector/src/platform/config.js";
import { extractEvidence } from "../packages/collector/src/engine/evidence.js";
import { loadPolicyConfig } from "../packages/collector/src/serve/serve.js";
import { report, T0 } from "../packages/collector/test/engine/sim.js";
import { demoCollectorConfig } from "../scripts/lib/start-config.mjs";

const demo = resolveCollectorConfig(
  demoCollectorConfig({ grpcPort: 7443, httpPort: 8080, keyFile: "/tmp/demo.key" }),
  "collector.yaml",
  {},
  {},
);
const policy = loadPolicyConfig(demo).defaults;

function signalsOf(system: NonNullable<Parameters<typeof report>[0]>["system"]) {
  const evidence = extractEvidence({ report: report({ system }), receivedAtMs: T0 }, policy);
  return evidence.vetoes.map((veto) => veto.kind);
}

describe("npm start's demo config", () => {
  it("does not count a whole-machine disk burst (the browser opening the page) as work", () => {
    const browserOpensThePage = {
      cpuCount: 2,
      cpuBusyRatio: 0.9,
      userProcessCpuCores: 0.4,
      diskReadBytesPerSecond: 40_000_000,
      diskWriteBytesPerSecond: 12_000_000,
    };
    expect(signalsOf(browserOpensThePage)).toEqual([]);
  });

  it("still counts this machine's users' work", () => {
    const aBuild = { cpuCount: 2, cpuBusyRatio: 0.95, userProcessCpuCores: 1.8, diskWriteBytesPerSecond: 30_000_000 };
    expect(signalsOf(aBuild)).toEqual(["user-cpu"]);
  });
});
