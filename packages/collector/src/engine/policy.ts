// A VM's policy: built-in defaults, overridden by the collector config's
// defaults, then by the profile the VM names, then by the VM's own annotations.
// Parsing never throws: every bad value becomes a PolicyError, and
// resolvePolicy() decides what the VM runs under meanwhile (never a policy
// that came from a typo).

import type { MessageInitShape } from "@bufbuild/protobuf";
import { type EffectivePolicySchema, PolicyMode as ProtoPolicyMode } from "@ws/protocol";
import { closestName } from "./suggest.js";
import type { ParsedPolicy, Policy, PolicyError, PolicyOverrides, ResolvedPolicy, Thresholds } from "./types.js";
import {
  ValueError,
  parseBoolean,
  parseByteRate,
  parseCores,
  parseDurationValue,
  parseMode,
  parseOnOff,
  parseOptionalDuration,
  parseRatio,
  parseSwitch,
} from "./values.js";

export const DEFAULT_ANNOTATION_PREFIX = "workstation.aik8s.run/";

export const BUILTIN_DEFAULT_POLICY: Policy = Object.freeze({
  autostopEnabled: false,
  mode: "enforce",
  profile: "",
  idleTimeoutSeconds: 2 * 3600,
  gracePeriodSeconds: 10 * 60,
  maxKeepRunningSeconds: 24 * 3600,
  weakActivityMaxSeconds: 0,
  unattendedMaxSeconds: 24 * 3600,
  agentLostAfterSeconds: 5 * 60,
  // docs/policy.md "agent-lost-max": 40× the longest outage a healthy agent has (failover, backoff, restart).
  agentLostMaxSeconds: 3600,
  stopWhenAgentLostAfterSeconds: null,
  reportIntervalSeconds: 15,
  noticeRepeatSeconds: 5 * 60,
  observeNotices: false,
  thresholds: Object.freeze({
    gpuUtilizationRatio: 0.1,
    cpuBusyRatio: 0.5,
    userProcessCpuCores: 0.5,
    networkBytesPerSecond: 1_000_000,
    diskBytesPerSecond: 5_000_000,
    ttyOutputCounts: false,
  }),
}) as Policy;

export type KnobSource = "annotation" | "config";

interface Knob {
  name: string;
  /** One line for docs and error messages. */
  help: string;
  set(target: PolicyOverrides, raw: unknown, source: KnobSource): void;
}

function thresholds(target: PolicyOverrides): Partial<Thresholds> {
  target.thresholds ??= {};
  return target.thresholds;
}

// Minimums guard VMs against a typo in an annotation ("idle-timeout: 2s"). The collector's own
// config file is the admin's, who may set shorter timings on purpose (demos, tests): there a
// duration only has to be positive.
const duration = (raw: unknown, source: KnobSource, limits: { min?: number; max?: number; allowZero?: boolean } = {}) =>
  parseDurationValue(raw, {
    allowBareSeconds: source === "config",
    ...(limits.allowZero !== undefined ? { allowZero: limits.allowZero } : {}),
    ...(limits.min !== undefined && source === "annotation" ? { minSeconds: limits.min } : {}),
    ...(limits.max !== undefined ? { maxSeconds: limits.max } : {}),
  });

/** Every policy knob, by the name it has after the prefix (annotations) or in the config file. */
export const POLICY_KNOBS: readonly Knob[] = [
  {
    name: "autostop",
    help: "enabled | disabled: whether idle VMs get notices and stops (normally the label)",
    set: (t, raw) => {
      t.autostopEnabled = parseSwitch(raw);
    },
  },
  {
    name: "mode",
    help: "enforce | observe: observe records would-stop and stops nothing",
    set: (t, raw) => {
      t.mode = parseMode(raw);
    },
  },
  {
    name: "idle-timeout",
    help: "idle time before a notice (default 2h, at least 1m)",
    set: (t, raw, s) => {
      t.idleTimeoutSeconds = duration(raw, s, { min: 60 });
    },
  },
  {
    name: "grace-period",
    help: "time between the notice and the stop (default 10m, at least 30s)",
    set: (t, raw, s) => {
      t.gracePeriodSeconds = duration(raw, s, { min: 30 });
    },
  },
  {
    name: "max-keep-running",
    help: "cap on a lease or an inhibitor lock (default 24h)",
    set: (t, raw, s) => {
      t.maxKeepRunningSeconds = duration(raw, s, { min: 60 });
    },
  },
  {
    name: "weak-activity-max",
    help: "how long weak evidence keeps a VM after the last strong evidence (default 4h; 0s: never)",
    set: (t, raw, s) => {
      t.weakActivityMaxSeconds = duration(raw, s, { allowZero: true });
    },
  },
  {
    name: "unattended-max",
    help: "how long background work (CPU, GPU, network, disk, a busy kernel) holds a VM after the last human evidence (default 24h; off)",
    set: (t, raw, s) => {
      t.unattendedMaxSeconds = parseOptionalDuration(raw, {
        allowBareSeconds: s === "config",
        ...(s === "annotation" ? { minSeconds: 60 } : {}),
      });
    },
  },
  {
    name: "agent-lost-after",
    help: "no report for this long → AgentLost (default 5m, at least 30s)",
    set: (t, raw, s) => {
      t.agentLostAfterSeconds = duration(raw, s, { min: 30 });
    },
  },
  {
    name: "agent-lost-max",
    help: "with host-side evidence: no agent for this long (lost or never connected) lets the host's readings alone bring the notice and the stop (default 1h, at least 5m)",
    set: (t, raw, s) => {
      t.agentLostMaxSeconds = duration(raw, s, { min: 300 });
    },
  },
  {
    name: "stop-when-agent-lost-after",
    help: "stop a VM whose agent has been silent this long (default never)",
    set: (t, raw, s) => {
      t.stopWhenAgentLostAfterSeconds = parseOptionalDuration(raw, {
        allowBareSeconds: s === "config",
        ...(s === "annotation" ? { minSeconds: 60 } : {}),
      });
    },
  },
  {
    name: "report-interval",
    help: "how often agents report (default 15s, 5s to 10m)",
    set: (t, raw, s) => {
      t.reportIntervalSeconds = duration(raw, s, { min: 5, max: 600 });
    },
  },
  {
    name: "notice-repeat",
    help: "how often a pending notice is sent again (default 5m, at least 30s)",
    set: (t, raw, s) => {
      t.noticeRepeatSeconds = duration(raw, s, { min: 30 });
    },
  },
  {
    name: "observe-notices",
    help: "enabled | disabled: observe mode also warns users (terminals, desktop, webhooks), for a dry run (default disabled)",
    set: (t, raw) => {
      t.observeNotices = parseSwitch(raw);
    },
  },
  {
    name: "warm-start",
    help: "on | off: start the stopped VM ahead of its owner's usual arrival, learned from their returns (default off; a profile opts in, a VM's `off` is its owner's opt-out)",
    set: (t, raw) => {
      t.warmStart = parseOnOff(raw);
    },
  },
  {
    name: "warm-start-window",
    help: "how long a warm-started VM nobody uses runs before its notice: its idle-timeout until a person comes (default 30m, at least 5m)",
    set: (t, raw, s) => {
      t.warmStartWindowSeconds = duration(raw, s, { min: 300 });
    },
  },
  {
    name: "gpu-utilization-threshold",
    help: "GPU utilization that counts as work (default 10%; off)",
    set: (t, raw) => {
      thresholds(t).gpuUtilizationRatio = parseRatio(raw);
    },
  },
  {
    name: "cpu-busy-threshold",
    help: "whole-machine CPU busy share that counts as work (default 50%; off)",
    set: (t, raw) => {
      thresholds(t).cpuBusyRatio = parseRatio(raw);
    },
  },
  {
    name: "user-cpu-threshold",
    help: "CPU cores used by users' processes that count as work (default 0.5; off)",
    set: (t, raw) => {
      thresholds(t).userProcessCpuCores = parseCores(raw);
    },
  },
  {
    name: "network-threshold",
    help: "network bytes/s that count as work (default 1MB/s; off)",
    set: (t, raw) => {
      thresholds(t).networkBytesPerSecond = parseByteRate(raw);
    },
  },
  {
    name: "disk-threshold",
    help: "disk bytes/s that count as work (default 5MB/s; off)",
    set: (t, raw) => {
      thresholds(t).diskBytesPerSecond = parseByteRate(raw);
    },
  },
  {
    name: "tty-output-counts",
    help: "true: output written to a terminal counts as activity, not only keystrokes (default false)",
    set: (t, raw) => {
      thresholds(t).ttyOutputCounts = parseBoolean(raw);
    },
  },
];

export const POLICY_KNOB_NAMES: readonly string[] = POLICY_KNOBS.map((knob) => knob.name);

/**
 * Names under the prefix that are not policy and must not be reported as
 * unknown: the engine's own restart-safe state (persist.ts) and what the
 * Kubernetes side writes or reads.
 */
export const NON_POLICY_ANNOTATION_NAMES: readonly string[] = [
  "last-active",
  "state",
  "notice-id",
  "stop-deadline",
  "last-stop",
  "allow-ephemeral-stop",
  // The VM's own webhook (outreach/notify/config.ts): read by the notifier, and never echoed (a URL may be a secret).
  "notify-url",
  "notify-format",
  // The start schedule and its default zone (comeback/schedule/schedules.ts): read by the schedule's loop.
  "schedule",
  "time-zone",
  // Dormant workstations (outreach/dormant/report.ts): since when the VM is stopped, its owner's last reminder.
  "dormant",
  // Learned warm starts (comeback/warm/): the returns recorded and the warm starts made, written by the collector.
  "returns",
  "warm-starts",
];

/** Applies one set of knob values (annotations without the prefix, or a config section). */
export function parseKnobs(
  entries: Iterable<[string, unknown]>,
  source: KnobSource,
  options: {
    keyLabel?: (name: string) => string;
    ignoredNames?: readonly string[];
    alsoKnown?: readonly string[];
  } = {},
): { overrides: PolicyOverrides; errors: PolicyError[] } {
  const label = options.keyLabel ?? ((name: string) => name);
  const overrides: PolicyOverrides = {};
  const errors: PolicyError[] = [];
  for (const [name, raw] of entries) {
    const knob = POLICY_KNOBS.find((candidate) => candidate.name === name);
    if (!knob) {
      if (options.ignoredNames?.includes(name)) continue;
      const suggestion = closestName(name, [...POLICY_KNOB_NAMES, "profile", ...(options.alsoKnown ?? [])]);
      errors.push({
        key: label(name),
        ...valueField(raw),
        message:
          `unknown setting "${name}"` +
          (suggestion ? `; did you mean "${suggestion}"?` : `; known: ${POLICY_KNOB_NAMES.join(", ")}, profile`),
      });
      continue;
    }
    try {
      knob.set(overrides, raw, source);
    } catch (error) {
      if (!(error instanceof ValueError)) throw error;
      errors.push({ key: label(name), ...valueField(raw), message: error.message });
    }
  }
  return { overrides, errors };
}

function valueField(raw: unknown): { value?: string } {
  if (raw === undefined) return {};
  return { value: typeof raw === "string" ? raw : JSON.stringify(raw) };
}

export function mergePolicy(base: Policy, overrides: PolicyOverrides): Policy {
  const { thresholds: thresholdOverrides, ...rest } = overrides;
  return { ...base, ...rest, thresholds: { ...base.thresholds, ...thresholdOverrides } };
}

/** Rules between knobs, checked on the merged policy. */
export function crossCheckPolicy(policy: Policy, keyLabel: (name: string) => string = (name) => name): PolicyError[] {
  const errors: PolicyError[] = [];
  if (policy.agentLostAfterSeconds < 2 * policy.reportIntervalSeconds) {
    errors.push({
      key: keyLabel("agent-lost-after"),
      message:
        `agent-lost-after (${policy.agentLostAfterSeconds}s) must be at least twice report-interval ` +
        `(${policy.reportIntervalSeconds}s), or every late report would look like a lost agent`,
    });
  }
  if (
    policy.stopWhenAgentLostAfterSeconds !== null &&
    policy.stopWhenAgentLostAfterSeconds < policy.agentLostAfterSeconds
  ) {
    errors.push({
      key: keyLabel("stop-when-agent-lost-after"),
      message:
        `stop-when-agent-lost-after (${policy.stopWhenAgentLostAfterSeconds}s) is shorter than agent-lost-after ` +
        `(${policy.agentLostAfterSeconds}s): the agent must be lost before it can be stopped for it`,
    });
  }
  if (policy.agentLostMaxSeconds < policy.agentLostAfterSeconds) {
    errors.push({
      key: keyLabel("agent-lost-max"),
      message:
        `agent-lost-max (${policy.agentLostMaxSeconds}s) is shorter than agent-lost-after ` +
        `(${policy.agentLostAfterSeconds}s): the agent must be lost before the host alone can decide`,
    });
  }
  return errors;
}

export interface AnnotationPolicyOptions {
  /** More names under the prefix that belong to someone else and are not policy. */
  otherNames?: readonly string[];
}

/**
 * The policy a VM's labels and annotations describe, on top of the collector's
 * defaults and the profile it names. Pure: returns every error instead of
 * throwing, and the caller decides (resolvePolicy) what the VM runs under.
 */
export function policyFromAnnotations(
  labels: Readonly<Record<string, string>>,
  annotations: Readonly<Record<string, string>>,
  defaults: Policy,
  profiles: Readonly<Record<string, PolicyOverrides>>,
  prefix: string = DEFAULT_ANNOTATION_PREFIX,
  options: AnnotationPolicyOptions = {},
): ParsedPolicy {
  const keyLabel = (name: string) => `${prefix}${name}`;
  const entries: Array<[string, string]> = [];
  let profileName = "";
  let profileRaw: string | undefined;
  for (const [key, value] of Object.entries(annotations)) {
    if (!key.startsWith(prefix)) continue;
    const name = key.slice(prefix.length);
    if (name === "profile") profileRaw = value;
    else entries.push([name, value]);
  }
  // The label is how a VM opts in (selectable with kubectl -l); it wins over an annotation of the same name.
  const autostopLabel = labels[keyLabel("autostop")];
  if (autostopLabel !== undefined) {
    const index = entries.findIndex(([name]) => name === "autostop");
    if (index >= 0) entries.splice(index, 1);
    entries.push(["autostop", autostopLabel]);
  }

  const { overrides, errors } = parseKnobs(entries, "annotation", {
    keyLabel,
    ignoredNames: [...NON_POLICY_ANNOTATION_NAMES, ...(options.otherNames ?? [])],
  });

  let base = defaults;
  if (profileRaw !== undefined && profileRaw.trim() !== "") {
    const wanted = profileRaw.trim();
    const profile = profiles[wanted];
    if (profile) {
      base = mergePolicy(defaults, profile);
      profileName = wanted;
    } else {
      const names = Object.keys(profiles);
      const suggestion = closestName(wanted, names);
      errors.push({
        key: keyLabel("profile"),
        value: profileRaw,
        message:
          `unknown profile "${wanted}"` +
          (suggestion
            ? `; did you mean "${suggestion}"?`
            : names.length > 0
              ? `; known profiles: ${names.join(", ")}`
              : "; the collector config defines no profiles"),
      });
    }
  }
  const policy = { ...mergePolicy(base, overrides), profile: profileName };
  errors.push(...crossCheckPolicy(policy, keyLabel));
  return { policy, errors };
}

/**
 * What a VM runs under, given the last policy that parsed cleanly and what its
 * annotations say now. With errors the VM keeps its previous valid policy; a
 * VM never seen with a valid policy runs in observe mode until the errors are
 * fixed, so a typo can never be what stops it.
 */
export function resolvePolicy(previousValid: Policy | undefined, parsed: ParsedPolicy): ResolvedPolicy {
  if (parsed.errors.length === 0) {
    return { policy: parsed.policy, errors: [], fallback: "none", lastValid: parsed.policy };
  }
  if (previousValid) {
    return { policy: previousValid, errors: parsed.errors, fallback: "previous-valid", lastValid: previousValid };
  }
  return {
    policy: { ...parsed.policy, mode: "observe" },
    errors: parsed.errors,
    fallback: "observe-defaults",
    lastValid: undefined,
  };
}

export function describeFallback(fallback: ResolvedPolicy["fallback"]): string {
  switch (fallback) {
    case "none":
      return "the policy as written";
    case "previous-valid":
      return "its last valid policy";
    case "observe-defaults":
      return "observe mode (no valid policy seen yet): nothing will be stopped";
  }
}

export function describeErrors(errors: readonly PolicyError[]): string {
  return errors
    .map(
      (error) => `${error.key}${error.value !== undefined ? `=${JSON.stringify(error.value)}` : ""}: ${error.message}`,
    )
    .join("; ");
}

/** The policy as the agent receives it in a Directive. */
export function toEffectivePolicy(policy: Policy): MessageInitShape<typeof EffectivePolicySchema> {
  return {
    autostopEnabled: policy.autostopEnabled,
    mode: policy.mode === "observe" ? ProtoPolicyMode.OBSERVE : ProtoPolicyMode.ENFORCE,
    profile: policy.profile,
    idleTimeoutSeconds: policy.idleTimeoutSeconds,
    gracePeriodSeconds: policy.gracePeriodSeconds,
    maxKeepRunningSeconds: policy.maxKeepRunningSeconds,
    weakActivityMaxSeconds: policy.weakActivityMaxSeconds,
    agentLostAfterSeconds: policy.agentLostAfterSeconds,
    thresholds: { ...policy.thresholds },
  };
}
