// The rules between policy knobs judge the values the config file sets (issue 40, item 9): the
// top-level reportInterval applies before agent-lost-after is checked against it, and
// `serve --start-command` is the standalone start action, as --stop-command is the stop.
import { ConfigError } from "@ws/protocol";
import { describe, expect, it } from "vitest";
import { resolveCollectorConfig } from "../../src/platform/config.js";
import { loadPolicyConfig } from "../../src/serve/serve.js";

const resolve = (text: string, flags = {}) => resolveCollectorConfig(text, "c.yaml", flags, {});

describe("the report interval the policy is checked against", () => {
  it("is the file's reportInterval: 2s with agent-lost-after 20s is accepted", () => {
    const config = resolve("reportInterval: 2s\npolicy:\n  defaults:\n    agent-lost-after: 20s\n");
    const policy = loadPolicyConfig(config);
    expect(policy.defaults.reportIntervalSeconds).toBe(2);
    expect(policy.defaults.agentLostAfterSeconds).toBe(20);
  });

  it("is the file's reportInterval: 20s with agent-lost-after 30s is refused, citing 20s", () => {
    const config = resolve("reportInterval: 20s\npolicy:\n  defaults:\n    agent-lost-after: 30s\n");
    expect(() => loadPolicyConfig(config)).toThrow(ConfigError);
    expect(() => loadPolicyConfig(config)).toThrow(
      /agent-lost-after \(30s\) must be at least twice report-interval \(20s\)/,
    );
  });

  it("applies to profiles too", () => {
    const config = resolve("reportInterval: 20s\npolicy:\n  profiles:\n    short:\n      agent-lost-after: 35s\n");
    expect(() => loadPolicyConfig(config)).toThrow(/profiles\.short\.agent-lost-after: .*\(20s\)/);
  });
});

describe("the standalone start command", () => {
  it("comes from --start-command, over the file's standalone.startCommand", () => {
    const file = 'standalone:\n  startCommand: ["virsh", "start", "{name}"]\n';
    expect(resolve(file).standalone.startCommand).toEqual(["virsh", "start", "{name}"]);
    expect(resolve(file, { startCommand: ["vm-up", "{namespace}", "{name}"] }).standalone.startCommand).toEqual([
      "vm-up",
      "{namespace}",
      "{name}",
    ]);
  });
});
