import { describe, expect, it } from "vitest";
import { create } from "@bufbuild/protobuf";
import { HelloSchema } from "@ws/protocol";
import { BUILTIN_DEFAULT_POLICY } from "../../src/engine/policy.js";
import { createMetrics } from "../../src/metrics/metrics.js";
import { countAgentVersions, MAX_VERSION_LABELS } from "../../src/metrics/agent-versions.js";
import { CollectorStats } from "../../src/lib/stats.js";
import { startFleet } from "../loop/fleet-harness.js";

const agent = (agentVersion: string, connected = true) => ({ agentVersion, connected });

describe("countAgentVersions", () => {
  it("counts connected agents per version, most common first", () => {
    expect(
      countAgentVersions([agent("0.1.0"), agent("0.2.0"), agent("0.2.0"), agent("0.1.0", false), agent("0.3.0-rc.1")]),
    ).toEqual([
      { version: "0.2.0", agents: 2 },
      { version: "0.1.0", agents: 1 },
      { version: "0.3.0-rc.1", agents: 1 },
    ]);
  });

  it("keeps an agent's arbitrary string out of the labels and caps the label count", () => {
    const hostile = Array.from({ length: 100 }, (_, i) => agent(`9.9.${i}`));
    const counted = countAgentVersions([agent('0.1.0"}\n'), agent(""), ...hostile]);
    expect(counted).toHaveLength(MAX_VERSION_LABELS);
    expect(counted.find((c) => c.version === "invalid")).toEqual({ version: "invalid", agents: 2 });
    expect(counted.at(-1)!.version).toBe("other");
    expect(counted.reduce((sum, c) => sum + c.agents, 0)).toBe(102);
  });
});

describe("workstation_agent_versions from a Fleet", () => {
  it("counts what the VMs' views say, without building them (Fleet.agents)", async () => {
    const harness = startFleet(BUILTIN_DEFAULT_POLICY, 1_000_000);
    const sessions = ["0.4.0", "0.4.0", "0.5.0", "0.5.0"].map((agentVersion, i) => {
      const session = harness.connect({ namespace: "team", name: `vm-${i}` });
      const withVersion = { ...session, hello: create(HelloSchema, { ...session.hello, agentVersion }) };
      harness.fleet.connected(withVersion);
      return withVersion;
    });
    harness.fleet.disconnected(sessions[3]!);
    harness.fleet.track({ namespace: "team", name: "never-connected" });
    const fromViews = harness.fleet
      .views(harness.clock.nowMs)
      .map(({ connected, agentVersion }) => ({ connected, agentVersion }));
    expect([...harness.fleet.agents()]).toEqual(expect.arrayContaining(fromViews));
    expect([...harness.fleet.agents()]).toHaveLength(fromViews.length);
    const registry = createMetrics(
      harness.fleet,
      new CollectorStats(),
      () => harness.clock.nowMs,
      () => 5,
      {
        processMetrics: false,
      },
    );
    const text = await registry.metrics();
    expect(text).toContain('workstation_agent_versions{version="0.4.0"} 2');
    expect(text).toContain('workstation_agent_versions{version="0.5.0"} 1');
  });
});
