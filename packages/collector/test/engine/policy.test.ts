import { PolicyMode } from "@ws/protocol";
import { describe, expect, it } from "vitest";
import { parseCollectorPolicyConfig } from "../../src/engine/config.js";
import {
  BUILTIN_DEFAULT_POLICY,
  POLICY_KNOB_NAMES,
  policyFromAnnotations,
  resolvePolicy,
  toEffectivePolicy,
} from "../../src/engine/policy.js";
import { closestName } from "../../src/engine/suggest.js";
import type { PolicyOverrides } from "../../src/engine/types.js";
import { parseByteRate, parseRatio } from "../../src/engine/values.js";
import { HOUR, Sim, actionsOf, report, ttySession } from "./sim.js";

const P = "workstation.aik8s.run/";
const profiles: Record<string, PolicyOverrides> = {
  training: { idleTimeoutSeconds: 8 * 3600, thresholds: { gpuUtilizationRatio: 0.05 } },
  teaching: { idleTimeoutSeconds: 30 * 60, gracePeriodSeconds: 5 * 60 },
};
const fromAnnotations = (annotations: Record<string, string>, labels: Record<string, string> = {}) =>
  policyFromAnnotations(labels, annotations, BUILTIN_DEFAULT_POLICY, profiles);

describe("policyFromAnnotations", () => {
  it("gives the built-in defaults for a VM without annotations (autostop off)", () => {
    expect(fromAnnotations({})).toEqual({ policy: BUILTIN_DEFAULT_POLICY, errors: [] });
    expect(BUILTIN_DEFAULT_POLICY).toMatchObject({
      idleTimeoutSeconds: 7200,
      gracePeriodSeconds: 600,
      maxKeepRunningSeconds: 86_400,
      weakActivityMaxSeconds: 0,
      agentLostAfterSeconds: 300,
      agentLostMaxSeconds: 3600,
      stopWhenAgentLostAfterSeconds: null,
      reportIntervalSeconds: 15,
    });
  });

  it("reads every knob", () => {
    const { policy, errors } = fromAnnotations(
      {
        [`${P}mode`]: "observe",
        [`${P}idle-timeout`]: "90m",
        [`${P}grace-period`]: "5m",
        [`${P}max-keep-running`]: "12h",
        [`${P}weak-activity-max`]: "0s",
        [`${P}agent-lost-after`]: "10m",
        [`${P}unattended-max`]: "off",
        [`${P}stop-when-agent-lost-after`]: "2d",
        [`${P}agent-lost-max`]: "9h",
        [`${P}report-interval`]: "30s",
        [`${P}notice-repeat`]: "2m",
        [`${P}observe-notices`]: "enabled",
        [`${P}gpu-utilization-threshold`]: "5%",
        [`${P}cpu-busy-threshold`]: "0.75",
        [`${P}user-cpu-threshold`]: "2",
        [`${P}network-threshold`]: "500KiB/s",
        [`${P}disk-threshold`]: "off",
        [`${P}tty-output-counts`]: "true",
        "kubectl.kubernetes.io/last-applied-configuration": "{}",
        [`${P}last-active`]: "2025-01-06T09:00:00Z",
      },
      { [`${P}autostop`]: "enabled" },
    );
    expect(errors).toEqual([]);
    expect(policy).toEqual({
      autostopEnabled: true,
      mode: "observe",
      profile: "",
      idleTimeoutSeconds: 5400,
      gracePeriodSeconds: 300,
      maxKeepRunningSeconds: 43_200,
      weakActivityMaxSeconds: 0,
      unattendedMaxSeconds: null,
      agentLostAfterSeconds: 600,
      agentLostMaxSeconds: 32_400,
      stopWhenAgentLostAfterSeconds: 172_800,
      reportIntervalSeconds: 30,
      noticeRepeatSeconds: 120,
      observeNotices: true,
      thresholds: {
        gpuUtilizationRatio: 0.05,
        cpuBusyRatio: 0.75,
        userProcessCpuCores: 2,
        networkBytesPerSecond: 512_000,
        diskBytesPerSecond: Number.POSITIVE_INFINITY,
        ttyOutputCounts: true,
      },
    });
  });

  it("applies a profile under the VM's own annotations", () => {
    const { policy, errors } = fromAnnotations({ [`${P}profile`]: "training", [`${P}grace-period`]: "20m" });
    expect(errors).toEqual([]);
    expect(policy).toMatchObject({
      profile: "training",
      idleTimeoutSeconds: 8 * 3600,
      gracePeriodSeconds: 1200,
      thresholds: { gpuUtilizationRatio: 0.05 },
    });
  });

  it("the label wins over an annotation of the same name", () => {
    expect(
      fromAnnotations({ [`${P}autostop`]: "enabled" }, { [`${P}autostop`]: "disabled" }).policy.autostopEnabled,
    ).toBe(false);
  });

  it("honours another prefix", () => {
    const { policy } = policyFromAnnotations(
      { "ws.example.org/autostop": "enabled" },
      { "ws.example.org/idle-timeout": "3h", [`${P}idle-timeout`]: "1h" },
      BUILTIN_DEFAULT_POLICY,
      {},
      "ws.example.org/",
    );
    expect(policy).toMatchObject({ autostopEnabled: true, idleTimeoutSeconds: 3 * 3600 });
  });

  it.each([
    [`${P}idle-timout`, "2h", /unknown setting "idle-timout"; did you mean "idle-timeout"\?/],
    [`${P}grace`, "10m", /unknown setting "grace"; did you mean "grace-period"\?/],
    [`${P}idle-timeout`, "2hh", /"2hh" is not a duration/],
    [`${P}idle-timeout`, "120", /has no unit: write 120h, 120m or 120s/],
    [`${P}idle-timeout`, "5y", /is not a duration/],
    [`${P}idle-timeout`, "900d", /longer than a year/],
    [`${P}idle-timeout`, "10s", /shorter than the minimum of 1m/],
    [`${P}mode`, "enforcing", /not a mode: write enforce or observe/],
    [`${P}profile`, "trainig", /unknown profile "trainig"; did you mean "training"\?/],
    [`${P}gpu-utilization-threshold`, "50", /out of range.*did you mean 50%\?/],
    [`${P}network-threshold`, "10Mb/s", /bytes \(B\), not bits \(b\); write 10MB\/s/],
    [`${P}tty-output-counts`, "maybe", /not a boolean/],
    [`${P}warm-start`, "of", /"of" is not on or off: write on or off/],
    [`${P}warm-strat`, "off", /unknown setting "warm-strat"; did you mean "warm-start"\?/],
    [`${P}warm-start-window`, "1m", /shorter than the minimum of 5m/],
    [`${P}agent-lost-after`, "30s", /at least twice report-interval/],
    [`${P}stop-when-agent-lost-after`, "2m", /shorter than agent-lost-after/],
  ])("%s=%s is an error", (key, value, message) => {
    const annotations =
      key.endsWith("agent-lost-after") && !key.includes("stop-when")
        ? { [key]: value, [`${P}report-interval`]: "1m" }
        : { [key]: value };
    const { errors } = fromAnnotations(annotations);
    expect(errors.map((error) => error.message).join("\n")).toMatch(message);
    expect(errors[0]?.key.startsWith(P)).toBe(true);
  });

  it("a label value that is not enabled/disabled is an error", () => {
    expect(fromAnnotations({}, { [`${P}autostop`]: "yes please" }).errors[0]).toMatchObject({
      key: `${P}autostop`,
      message: expect.stringMatching(/write enabled or disabled/),
    });
  });

  it("knob names are what the docs list", () => {
    expect(POLICY_KNOB_NAMES).toEqual([
      "autostop",
      "mode",
      "idle-timeout",
      "grace-period",
      "max-keep-running",
      "weak-activity-max",
      "unattended-max",
      "agent-lost-after",
      "agent-lost-max",
      "stop-when-agent-lost-after",
      "report-interval",
      "notice-repeat",
      "observe-notices",
      "warm-start",
      "warm-start-window",
      "gpu-utilization-threshold",
      "cpu-busy-threshold",
      "user-cpu-threshold",
      "network-threshold",
      "disk-threshold",
      "tty-output-counts",
    ]);
  });
});

describe("resolvePolicy: a VM is never stopped because of a typo", () => {
  const valid = fromAnnotations({ [`${P}idle-timeout`]: "8h" }, { [`${P}autostop`]: "enabled" });
  const typo = fromAnnotations({ [`${P}idle-timeout`]: "8hh" }, { [`${P}autostop`]: "enabled" });

  it("a clean parse is the new valid policy", () => {
    expect(resolvePolicy(undefined, valid)).toEqual({
      policy: valid.policy,
      errors: [],
      fallback: "none",
      lastValid: valid.policy,
    });
  });

  it("errors keep the previous valid policy", () => {
    const resolved = resolvePolicy(valid.policy, typo);
    expect(resolved).toMatchObject({ policy: valid.policy, fallback: "previous-valid", lastValid: valid.policy });
    expect(resolved.errors).toHaveLength(1);
  });

  it("errors with no valid policy ever seen run in observe mode", () => {
    const resolved = resolvePolicy(undefined, typo);
    expect(resolved).toMatchObject({
      fallback: "observe-defaults",
      lastValid: undefined,
      policy: { mode: "observe", autostopEnabled: true },
    });
  });

  it("end to end: the typo'd VM idles past the defaults and is not stopped", () => {
    const resolved = resolvePolicy(undefined, typo);
    const sim = new Sim(resolved.policy);
    sim.policyStatus = { errors: resolved.errors, fallback: resolved.fallback };
    sim.send(report({ sessions: { sessions: [ttySession(0)] } }));
    const decisions = sim.idleFor(3 * HOUR);
    expect(actionsOf(decisions, "stop")).toEqual([]);
    expect(actionsOf(decisions, "would-stop")).toHaveLength(1);
    expect(actionsOf(sim.decisions, "policy-error")).toHaveLength(1);
  });
});

describe("parseCollectorPolicyConfig", () => {
  it("reads defaults, profiles and the prefix", () => {
    const result = parseCollectorPolicyConfig(`
annotationPrefix: ws.example.org/
defaults:
  autostop: enabled
  idle-timeout: 3h
  grace-period: 900        # bare seconds are fine in a config file
  gpu-utilization-threshold: 0.2
profiles:
  training:
    idle-timeout: 8h
    weak-activity-max: 8h
  teaching: { idle-timeout: 30m, mode: observe }
  empty:
`);
    expect(result.ok).toBe(true);
    if (!result.ok) return;
    expect(result.config.annotationPrefix).toBe("ws.example.org/");
    expect(result.config.defaults).toMatchObject({
      autostopEnabled: true,
      idleTimeoutSeconds: 3 * 3600,
      gracePeriodSeconds: 900,
      thresholds: { gpuUtilizationRatio: 0.2 },
    });
    expect(result.config.profiles).toEqual({
      training: { idleTimeoutSeconds: 8 * 3600, weakActivityMaxSeconds: 8 * 3600 },
      teaching: { idleTimeoutSeconds: 1800, mode: "observe" },
      empty: {},
    });
  });

  it("a profile's schedule is kept by profile name; a typo in it, or in its key, is a config error", () => {
    const good = parseCollectorPolicyConfig(`
profiles:
  office: { idle-timeout: 3h, schedule: "weekdays 08:45 stop by 19:00 tz Europe/Berlin" }
`);
    expect(good.ok && good.config.profileSchedules).toEqual({
      office: "weekdays 08:45 stop by 19:00 tz Europe/Berlin",
    });
    expect(good.ok && good.config.profiles["office"]).toEqual({ idleTimeoutSeconds: 3 * 3600 });
    const bad = parseCollectorPolicyConfig(`
profiles:
  office: { schedule: "wekdays 08:45" }
  lab: { schedul: "daily 09:00" }
`);
    expect(bad.ok).toBe(false);
    const errors = bad.ok ? [] : bad.errors;
    expect(errors).toHaveLength(2);
    expect(errors[0]).toMatch(/^profiles\.office\.schedule \(wekdays 08:45\): .*did you mean weekdays\?/);
    expect(errors[1]).toMatch(/^profiles\.lab\.schedul .*did you mean "schedule"\?/);
  });

  it("a profile opts in to learned warm starts; a VM's annotation turns them off; ws's own records are no policy", () => {
    const parsed = parseCollectorPolicyConfig(`
profiles:
  office: { warm-start: on, warm-start-window: 15m }
  lab: { warm-start: maybe }
`);
    expect(parsed.ok).toBe(false);
    expect(parsed.ok ? [] : parsed.errors).toEqual([
      'profiles.lab.warm-start (maybe): "maybe" is not on or off: write on or off',
    ]);
    const good = parseCollectorPolicyConfig("profiles:\n  office: { warm-start: on, warm-start-window: 15m }\n");
    const profiles = good.ok ? good.config.profiles : {};
    expect(profiles["office"]).toEqual({ warmStart: true, warmStartWindowSeconds: 15 * 60 });
    const { policy, errors } = policyFromAnnotations(
      {},
      {
        [`${P}profile`]: "office",
        [`${P}warm-start`]: "off",
        // Written by the collector itself (returns, warm starts): never reported as unknown settings.
        [`${P}returns`]: "tbqv1cl100",
        [`${P}warm-starts`]: "tbqv1cw",
      },
      BUILTIN_DEFAULT_POLICY,
      profiles,
    );
    expect(errors).toEqual([]);
    expect(policy).toMatchObject({ profile: "office", warmStart: false, warmStartWindowSeconds: 15 * 60 });
    expect(BUILTIN_DEFAULT_POLICY.warmStart).toBeUndefined();
  });

  it("an empty section is the built-in defaults", () => {
    expect(parseCollectorPolicyConfig("")).toEqual({
      ok: true,
      config: { annotationPrefix: P, defaults: BUILTIN_DEFAULT_POLICY, profiles: {} },
    });
  });

  it("reports every problem with its path", () => {
    const result = parseCollectorPolicyConfig(`
annotationPrefix: "Not A Prefix"
default:
  idle-timeout: 2h
defaults:
  idle-timeout: forever
  grace-priod: 5m
profiles:
  Training: { idle-timeout: 8h }
  teaching: { profile: other, disk-threshold: 12 parsecs }
`);
    expect(result.ok).toBe(false);
    if (result.ok) return;
    expect(result.errors).toEqual([
      expect.stringMatching(/^default: unknown key; did you mean "defaults"\?/),
      expect.stringMatching(/^annotationPrefix: "Not A Prefix" must be a DNS subdomain followed by "\/"/),
      expect.stringMatching(/^defaults\.idle-timeout \(forever\): "forever" is not a duration/),
      expect.stringMatching(
        /^defaults\.grace-priod \(5m\): unknown setting "grace-priod"; did you mean "grace-period"\?/,
      ),
      expect.stringMatching(/^profiles\.Training: a profile name is lower-case/),
      expect.stringMatching(/^profiles\.teaching\.profile: a profile is chosen per VM/),
      expect.stringMatching(/^profiles\.teaching\.disk-threshold \(12 parsecs\): "12 parsecs" is not a rate/),
    ]);
  });

  it("reports YAML syntax errors with their line", () => {
    const result = parseCollectorPolicyConfig("defaults:\n  idle-timeout: 2h\n   grace-period: [\n");
    expect(result.ok).toBe(false);
    if (!result.ok) expect(result.errors[0]).toMatch(/^line \d+, column \d+: /);
  });

  it("rejects duplicate keys rather than silently taking the last", () => {
    const result = parseCollectorPolicyConfig("defaults:\n  idle-timeout: 2h\n  idle-timeout: 3h\n");
    expect(result.ok).toBe(false);
  });
});

describe("values", () => {
  it.each([
    ["10%", 0.1],
    ["0.25", 0.25],
    ["100%", 1],
    ["off", Infinity],
  ])("ratio %s", (text, value) => expect(parseRatio(text)).toBe(value));

  it.each([
    ["1MB/s", 1e6],
    ["500KiB/s", 512_000],
    ["2M", 2e6],
    ["1.5GB", 1.5e9],
    ["200000", 200_000],
  ])("byte rate %s", (text, value) => expect(parseByteRate(text)).toBe(value));

  it("suggests only near names", () => {
    expect(closestName("idle-timout", POLICY_KNOB_NAMES)).toBe("idle-timeout");
    expect(closestName("colour", POLICY_KNOB_NAMES)).toBeUndefined();
  });
});

describe("toEffectivePolicy", () => {
  it("is the Directive's view of the policy", () => {
    expect(toEffectivePolicy({ ...BUILTIN_DEFAULT_POLICY, mode: "observe", idleTimeoutSeconds: 3600 })).toMatchObject({
      mode: PolicyMode.OBSERVE,
      idleTimeoutSeconds: 3600,
      gracePeriodSeconds: 600,
      thresholds: { gpuUtilizationRatio: 0.1 },
    });
  });
});
