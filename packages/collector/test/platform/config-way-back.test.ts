// The way back is required where the collector stops VMs in Kubernetes (issue 40 #4): enforce
// mode there without notifications.publicUrl is a configuration error that says why; observe
// mode and standalone run without it (serve/serve.ts warns). And grpc.certCheckInterval, how often the
// certificate files are read again (issue 40 #5).
import { describe, expect, it } from "vitest";
import { CollectorConfigError, enforcingPolicies, resolveCollectorConfig } from "../../src/platform/config.js";

const resolve = (text: string) => resolveCollectorConfig(text, "collector.yaml", {}, {});

function problemsOf(text: string): string[] {
  try {
    resolve(text);
  } catch (error) {
    if (error instanceof CollectorConfigError) return error.problems;
    throw error;
  }
  return [];
}

describe("notifications.publicUrl in enforce mode", () => {
  it("is required in Kubernetes mode when the defaults enforce, with a message that says what it is for", () => {
    expect(problemsOf("mode: kubernetes\npolicy: { defaults: { mode: enforce } }\n")).toEqual([
      expect.stringMatching(
        /^collector\.yaml: notifications\.publicUrl is required in enforce mode \(policy\.defaults\): it is the address users reach the collector's pages at .* no notice, webhook or welcome back carries a keep-running or start link/,
      ),
    ]);
  });

  it("is required when only a profile enforces, naming the profile", () => {
    expect(
      problemsOf("mode: kubernetes\npolicy: { defaults: { mode: observe }, profiles: { lab: { mode: enforce } } }\n"),
    ).toEqual([expect.stringContaining("required in enforce mode (policy.profiles.lab)")]);
  });

  it("is accepted when set", () => {
    const config = resolve(
      "mode: kubernetes\nnotifications: { publicUrl: https://ws.example.com/ }\npolicy: { defaults: { mode: enforce } }\n",
    );
    expect(config.notifications.publicUrl).toBe("https://ws.example.com");
  });

  it("may be left out in observe mode and in standalone", () => {
    expect(problemsOf("mode: kubernetes\npolicy: { defaults: { mode: observe } }\n")).toEqual([]);
    expect(problemsOf("mode: standalone\npolicy: { defaults: { mode: enforce } }\n")).toEqual([]);
  });

  it("enforcingPolicies lists the places that enforce and nothing else", () => {
    expect(enforcingPolicies(undefined)).toEqual([]);
    expect(
      enforcingPolicies({
        defaults: { mode: "enforce" },
        profiles: { a: { mode: "observe" }, b: { mode: "enforce" } },
      }),
    ).toEqual(["policy.defaults", "policy.profiles.b"]);
  });
});

describe("grpc.certCheckInterval", () => {
  it("is a minute by default and takes a duration of a second or more", () => {
    expect(resolve("").grpc.certCheckSeconds).toBe(60);
    expect(resolve("grpc: { certCheckInterval: 5s }\n").grpc.certCheckSeconds).toBe(5);
    expect(problemsOf("grpc: { certCheckInterval: 0s }\n")).toEqual([
      'collector.yaml: grpc.certCheckInterval: "0s" is zero: a duration must be positive',
    ]);
  });
});
