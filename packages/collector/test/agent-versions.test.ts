import { describe, expect, it } from "vitest";
import { countAgentVersions, MAX_VERSION_LABELS } from "../src/rollout/agent-versions.js";

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
