// `ws-collector whatif` options: pure parsing, every problem named.
import { DurationError, errorMessage, parseDuration, UsageError, parseCommandLine, ConfigError } from "@ws/protocol";
import { parse as parseYaml } from "yaml";
import { parseCollectorPolicyConfig } from "../../engine/config.js";
import { DEFAULT_ANNOTATION_PREFIX } from "../../engine/policy.js";
import { mergePolicy, parseKnobs, POLICY_KNOB_NAMES, crossCheckPolicy } from "../../engine/policy.js";
import type { Policy } from "../../engine/types.js";
import { DEFAULT_FALSE_STOP_BUDGET, planSweep, type SweepPlan } from "./sweep.js";

/** whatif's usage mistakes are the programs' one UsageError (exit 2 with the message). */
export { UsageError as WhatifUsageError };

/** Knobs that make no sense in a replay: it always enforces, and the step is the report interval. */
const FIXED_KNOBS = new Set(["autostop", "mode", "report-interval"]);
export const WHATIF_KNOBS: readonly string[] = POLICY_KNOB_NAMES.filter((name) => !FIXED_KNOBS.has(name));

function hostWindow(raw: string | undefined, stepSeconds: number): { hostWindowSeconds?: number } {
  if (raw === undefined) return {};
  const seconds = duration(raw, "--host-window");
  if (seconds < stepSeconds)
    throw new UsageError(
      `--host-window ${raw} is shorter than --step: each step's window must reach back to the previous one`,
    );
  return { hostWindowSeconds: seconds };
}

export interface WhatifOptions {
  /** Where the recording is: Prometheus (with the range below) or, without it, traceFile. */
  prometheusUrl: URL | undefined;
  /** --trace FILE: replay a trace (docs/replay.md) instead; the range is the trace's. */
  traceFile?: string;
  fromMs: number;
  toMs: number;
  stepSeconds: number;
  /** The policy replayed for every VM (autostop on, enforce). */
  policy: Policy;
  /** The knobs given on the command line, as typed (for the report). */
  overrides: Record<string, string>;
  falseStopWindowSeconds: number;
  namespace?: string;
  vm?: string;
  json: boolean;
  /** Extra HTTP headers for Prometheus (--header 'Authorization: Bearer …'). */
  headers: Record<string, string>;
  /** --vms-per-query N: how many VMs one history query reads (default: as many as keep its answer near 4 M points). */
  vmsPerQuery?: number;
  /** --host-window: also replay KubeVirt's per-VM metrics (host-side evidence) with rates over this window. */
  hostWindowSeconds?: number;
  /** --disputes FILE: the stop disputes to show beside the replay ("-": stdin). */
  disputesFile?: string;
  /** The policy annotation prefix the last-stop annotations of a VirtualMachineList use. */
  annotationPrefix: string;
  /** The policy before the knobs given (the defaults or the profile): each sweep point starts from it. */
  base: Policy;
  /** --sweep: replay once per value (or pair of values) instead of once. */
  sweep?: SweepPlan & { falseStopBudget: number; jobs?: number };
  /** --profile NAME, for the recommendation's command. */
  profile?: string;
}

/** `--disputes FILE` without --prometheus: list the disputes and the knob of each, replay nothing. */
export interface DisputesOnlyOptions {
  kind: "disputes";
  disputesFile: string;
  annotationPrefix: string;
  namespace?: string;
  vm?: string;
  json: boolean;
}

/** `--returns FILE` without --prometheus: replay learned warm starts on the VMs' recorded returns. */
export interface ReturnsOnlyOptions {
  kind: "returns";
  returnsFile: string;
  annotationPrefix: string;
  timeZone: string;
  warmWindowSeconds: number;
  json: boolean;
}

export const WHATIF_HELP = `Usage: ws-collector whatif --prometheus URL --from TIME [--to TIME] [options] [--KNOB VALUE ...]
       ws-collector whatif --trace FILE [options] [--KNOB VALUE ...]

Replays the signals Prometheus recorded from the collector's /metrics through the
same decision engine under another policy, and prints per VM and in total: stops,
VM-hours and GPU-hours saved, and likely false stops (activity within 15 minutes of
a stop). This is how to pick thresholds from a week of observe mode.

Options:
      --prometheus URL       Prometheus base URL (its HTTP API is under /api/v1/)
      --trace FILE           Replay a trace (ws-collector serve --record-trace, docs/replay.md) instead of
                             Prometheus: each step takes the VM's last Report in it; the range is the trace's
      --from TIME            Start: RFC 3339 (2024-05-01T00:00:00Z), Unix seconds, now or now-DURATION (now-7d)
      --to TIME              End (default now)
      --step DURATION        Replay step: one report per step (default 1m)
  -c, --config FILE          Start from the policy section of this collector config (default: built-in defaults)
      --profile NAME         ... with this profile of the config applied
      --namespace NS         Only VMs in this namespace
      --vm NAME              Only VMs with this name
      --false-stop-window D  Activity this soon after a stop makes it a likely false stop (default 15m)
      --header 'NAME: VALUE' HTTP header for Prometheus (repeatable), e.g. an Authorization header
      --vms-per-query N      VMs read from Prometheus per range query (default: as many as keep each answer near
                             4 million points, 12 at a one-minute step over a week); the fleet is read and
                             replayed a batch at a time. Lower it if Prometheus refuses a query for its size
      --host-window D        Also replay host-side evidence: KubeVirt's per-VM metrics in the same Prometheus,
                             rates over D (at least --step), as ws-collector with hostSide reads them
      --disputes FILE        The stop disputes ("this stop was a mistake") to list, each with the knob that would
                             have kept its VM and, with --prometheus, whether this replay keeps it: the JSON of
                             the collector's /api/disputes, or kubectl get vm -A -o json ("-": stdin). Without
                             --prometheus only the disputes are listed
      --returns FILE         Replay learned warm starts (docs/policy.md) on the VMs' recorded returns (their
                             returns annotation in kubectl get vm -A -o json; "-": stdin): per VM, the warm
                             starts, used and wasted, the wait saved and the run time added. Not with --prometheus
      --time-zone TZ         The owners' time zone for --returns (default UTC)
      --warm-window D        How long a warm start waits for its person before it is waste (default 30m)
      --annotation-prefix P  The prefix of the VMs' last-stop annotation (default: the config's, workstation.aik8s.run/)
      --sweep KNOB=VALUES    Replay once per value instead of once, and recommend one: VALUES is a list
                             (idle-timeout=30m,1h,2h) or a range FROM..TO/STEP of durations or percentages
                             (idle-timeout=30m..4h/30m, cpu-busy-threshold=10%..50%/10%). Twice sweeps two knobs
                             (every pair). Prints per value: stops, VM-, core-, GiB- and GPU-hours reclaimed,
                             likely false stops, disputed stops still made (with --disputes), the longest notice
      --false-stop-budget N  With --sweep: likely false stops allowed per 100 stops (default 1)
      --jobs N               With --sweep: worker threads, each replaying a slice of the VMs under every value
                             (default: the cores available); the rows are the same for any N
      --json                 Print JSON instead of a table
  -h, --help                 This help

Policy knobs, each as --KNOB VALUE, parsed like the config file's:
  ${WHATIF_KNOBS.join(", ")}
The replay always enforces (autostop enabled, mode enforce) with the report interval = --step.
`;

const DNS_LABEL = /^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/;

/** RFC 3339, Unix seconds, "now" or "now-DURATION". */
export function parseTime(text: string, nowMs: number, what: string): number {
  const value = text.trim();
  if (value === "now") return nowMs;
  const relative = /^now-(.+)$/.exec(value);
  if (relative) {
    try {
      return nowMs - parseDuration(relative[1]!) * 1000;
    } catch (error) {
      if (error instanceof DurationError) throw new UsageError(`${what} ${JSON.stringify(text)}: ${error.message}`);
      throw error;
    }
  }
  if (/^\d+(\.\d+)?$/.test(value)) return Number(value) * 1000;
  if (/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:\d{2})$/.test(value)) {
    const ms = Date.parse(value);
    if (Number.isFinite(ms)) return ms;
  }
  throw new UsageError(
    `${what} ${JSON.stringify(text)} is not a time: use RFC 3339 (2024-05-01T00:00:00Z), Unix seconds, now or now-7d`,
  );
}

function duration(text: string, what: string, allowZero = false): number {
  try {
    return parseDuration(text, { allowZero });
  } catch (error) {
    if (error instanceof DurationError) throw new UsageError(`${what}: ${error.message}`);
    throw error;
  }
}

/** The `policy:` section of a collector config file, as the engine's config parser takes it. */
function policySectionOf(text: string, path: string): string {
  let document: unknown;
  try {
    document = parseYaml(text);
  } catch (error) {
    throw new ConfigError([`${path}: ${errorMessage(error).split("\n")[0]}`]);
  }
  if (document === null || document === undefined) return "";
  if (typeof document !== "object" || Array.isArray(document))
    throw new ConfigError([`${path}: the config must be a mapping (key: value)`]);
  const policy = (document as Record<string, unknown>).policy;
  // JSON is YAML too: the section travels as JSON, as serve passes it.
  return policy === undefined || policy === null ? "" : JSON.stringify(policy);
}

/** The config's policy.annotationPrefix, or the built-in one. */
function prefixOf(configText: string | undefined, configPath: string | undefined): string {
  const parsed = parseCollectorPolicyConfig(
    configText === undefined ? "" : policySectionOf(configText, configPath ?? "config"),
  );
  return parsed.ok ? parsed.config.annotationPrefix : DEFAULT_ANNOTATION_PREFIX;
}

function basePolicy(
  configText: string | undefined,
  configPath: string | undefined,
  profile: string | undefined,
): Policy {
  const parsed = parseCollectorPolicyConfig(
    configText === undefined ? "" : policySectionOf(configText, configPath ?? "config"),
  );
  if (!parsed.ok) throw new ConfigError(parsed.errors.map((error) => `${configPath}: ${error}`));
  if (profile === undefined) return parsed.config.defaults;
  const overrides = parsed.config.profiles[profile];
  if (!overrides) {
    const known = Object.keys(parsed.config.profiles);
    throw new UsageError(
      `--profile ${profile}: no such profile in ${configPath ?? "the built-in defaults (give --config)"}${known.length ? ` (known: ${known.join(", ")})` : ""}`,
    );
  }
  return mergePolicy(parsed.config.defaults, overrides);
}

/** whatif's command-line options: its own, then one per policy knob. */
const WHATIF_OPTIONS = {
  prometheus: { type: "string" },
  from: { type: "string" },
  to: { type: "string" },
  step: { type: "string" },
  config: { type: "string", short: "c" },
  profile: { type: "string" },
  namespace: { type: "string" },
  vm: { type: "string" },
  "false-stop-window": { type: "string" },
  header: { type: "string", multiple: true },
  json: { type: "boolean" },
  "host-window": { type: "string" },
  disputes: { type: "string" },
  returns: { type: "string" },
  "time-zone": { type: "string" },
  "warm-window": { type: "string" },
  "annotation-prefix": { type: "string" },
  sweep: { type: "string", multiple: true },
  "false-stop-budget": { type: "string" },
  jobs: { type: "string" },
  "vms-per-query": { type: "string" },
  trace: { type: "string" },
  help: { type: "boolean", short: "h" },
  ...Object.fromEntries(WHATIF_KNOBS.map((name) => [name, { type: "string" as const }])),
} as const;

type ParsedValues = Record<string, string | boolean | string[] | undefined>;

/** One option's text, when it was given as a string. */
function textOf(values: ParsedValues, name: string): string | undefined {
  const value = values[name];
  return typeof value === "string" ? value : undefined;
}

/** --config FILE's text (undefined without --config); a file that cannot be read is a ConfigError. */
function readConfigText(configPath: string | undefined, readConfig: (path: string) => string): string | undefined {
  if (configPath === undefined) return undefined;
  try {
    return readConfig(configPath);
  } catch (error) {
    throw new ConfigError([
      `cannot read ${configPath}: ${(error as NodeJS.ErrnoException).code ?? errorMessage(error)}`,
    ]);
  }
}

/** --header 'Name: value', repeated, as a header object. */
function parseHeaders(headerTexts: readonly string[]): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const header of headerTexts) {
    const colon = header.indexOf(":");
    if (colon <= 0) throw new UsageError(`--header ${JSON.stringify(header)}: write it as 'Name: value'`);
    headers[header.slice(0, colon).trim()] = header.slice(colon + 1).trim();
  }
  return headers;
}

/** --namespace and --vm, each checked as a Kubernetes name, as the options they become. */
function selection(values: ParsedValues): { namespace?: string; vm?: string } {
  for (const name of ["namespace", "vm"]) {
    const value = textOf(values, name);
    if (value !== undefined && !DNS_LABEL.test(value))
      throw new UsageError(`--${name} ${JSON.stringify(value)} is not a Kubernetes name`);
  }
  const namespace = textOf(values, "namespace");
  const vm = textOf(values, "vm");
  return { ...(namespace !== undefined ? { namespace } : {}), ...(vm !== undefined ? { vm } : {}) };
}

/** The replayed policy, the knobs as typed, and the sweep with every point checked now, not mid-replay. */
function policyAndSweep(
  values: ParsedValues,
  base: Policy,
  stepSeconds: number,
): Pick<WhatifOptions, "policy" | "overrides" | "sweep"> {
  const overrides: Record<string, string> = {};
  for (const name of WHATIF_KNOBS) {
    const value = textOf(values, name);
    if (value !== undefined) overrides[name] = value;
  }
  const policy = replayPolicy(base, overrides, stepSeconds);
  const sweepTexts = (values.sweep as string[] | undefined) ?? [];
  const sweep = sweepTexts.length > 0 ? planSweep(sweepTexts, overrides, WHATIF_KNOBS) : undefined;
  // Every point of the sweep must be a policy the engine takes: a bad value is a usage error now, not mid-replay.
  for (const point of sweep?.points ?? []) replayPolicy(base, { ...overrides, ...point.overrides }, stepSeconds);
  const budgetText = textOf(values, "false-stop-budget");
  if (budgetText !== undefined && !sweep) throw new UsageError("--false-stop-budget goes with --sweep");
  const jobs = parseJobs(textOf(values, "jobs"), sweep !== undefined);
  return {
    policy,
    overrides,
    ...(sweep ? { sweep: { ...sweep, falseStopBudget: parseBudget(budgetText), ...(jobs ? { jobs } : {}) } } : {}),
  };
}

export function parseWhatifArgs(
  argv: string[],
  nowMs: number,
  readConfig: (path: string) => string,
): WhatifOptions | DisputesOnlyOptions | ReturnsOnlyOptions | "help" {
  const values = parseCommandLine(argv, { help: WHATIF_HELP, options: WHATIF_OPTIONS }).values as ParsedValues;
  if (values.help) return "help";
  const text = (name: string): string | undefined => textOf(values, name);
  const selected = selection(values);
  const configPath = text("config");
  const configText = readConfigText(configPath, readConfig);
  const annotationPrefix = text("annotation-prefix") ?? prefixOf(configText, configPath);
  const disputesFile = text("disputes");
  const prometheus = text("prometheus");
  const returnsFile = text("returns");
  if (returnsFile !== undefined) {
    if (prometheus) throw new UsageError("--returns replays the recorded returns: not with --prometheus");
    const timeZone = text("time-zone") ?? "UTC";
    try {
      new Intl.DateTimeFormat("en-US", { timeZone });
    } catch {
      throw new UsageError(`--time-zone: "${timeZone.slice(0, 64)}" is not a time zone (e.g. Europe/Berlin)`);
    }
    const windowText = text("warm-window") ?? "30m";
    let warmWindowSeconds: number;
    try {
      warmWindowSeconds = parseDuration(windowText, { allowBareSeconds: true });
    } catch {
      throw new UsageError(`--warm-window: "${windowText.slice(0, 64)}" is not a duration (e.g. 30m)`);
    }
    return { kind: "returns", returnsFile, annotationPrefix, timeZone, warmWindowSeconds, json: values.json === true };
  }
  if (!prometheus && disputesFile !== undefined)
    return {
      kind: "disputes",
      disputesFile,
      annotationPrefix,
      ...selected,
      json: values.json === true,
    };
  const traceFile = text("trace");
  if (traceFile !== undefined && prometheus) throw new UsageError("--trace and --prometheus: replay one of them");
  for (const name of ["from", "to", "host-window", "header", "vms-per-query"])
    if (traceFile !== undefined && values[name] !== undefined)
      throw new UsageError(`--${name} reads Prometheus; a --trace replays its own range and readings`);
  if (!prometheus && traceFile === undefined)
    throw new UsageError("whatif needs --prometheus URL (for example http://prometheus:9090) or --trace FILE");
  // A trace carries its own range (whatif reads it from the file); Prometheus needs one.
  const { prometheusUrl, fromMs, toMs } = prometheus
    ? prometheusRange(prometheus, text("from"), text("to"), nowMs)
    : { prometheusUrl: undefined, fromMs: 0, toMs: 0 };
  const stepSeconds = duration(text("step") ?? "1m", "--step");
  if (stepSeconds < 1) throw new UsageError("--step must be at least 1s");
  if (prometheusUrl && (toMs - fromMs) / 1000 / stepSeconds > 5_000_000)
    throw new UsageError("--step is too small for the range: more than 5 million steps");
  const falseStopWindowSeconds = duration(text("false-stop-window") ?? "15m", "--false-stop-window");

  const headers = parseHeaders((values.header as string[] | undefined) ?? []);
  const base = basePolicy(configText, configPath, text("profile"));
  const { policy, overrides, sweep } = policyAndSweep(values, base, stepSeconds);
  return {
    prometheusUrl,
    fromMs,
    toMs,
    stepSeconds,
    policy,
    overrides,
    falseStopWindowSeconds,
    ...selected,
    json: values.json === true,
    headers,
    ...hostWindow(text("host-window"), stepSeconds),
    ...vmsPerQuery(text("vms-per-query")),
    ...(disputesFile !== undefined ? { disputesFile } : {}),
    ...(traceFile !== undefined ? { traceFile } : {}),
    annotationPrefix,
    base,
    ...(sweep ? { sweep } : {}),
    ...(text("profile") !== undefined ? { profile: text("profile")! } : {}),
  };
}

/** --prometheus URL --from TIME --to TIME, checked. */
function prometheusRange(
  prometheus: string,
  from: string | undefined,
  to: string | undefined,
  nowMs: number,
): { prometheusUrl: URL; fromMs: number; toMs: number } {
  let prometheusUrl: URL;
  try {
    prometheusUrl = new URL(prometheus);
  } catch {
    throw new UsageError(
      `--prometheus ${JSON.stringify(prometheus)} is not a URL (for example http://prometheus:9090)`,
    );
  }
  if (prometheusUrl.protocol !== "http:" && prometheusUrl.protocol !== "https:") {
    throw new UsageError(`--prometheus must be an http:// or https:// URL, not ${prometheusUrl.protocol}`);
  }
  if (!from) throw new UsageError("whatif needs --from (for example --from now-7d)");
  const fromMs = parseTime(from, nowMs, "--from");
  const toMs = parseTime(to ?? "now", nowMs, "--to");
  if (toMs <= fromMs)
    throw new UsageError(
      `--to must be after --from (got ${new Date(fromMs).toISOString()} … ${new Date(toMs).toISOString()})`,
    );
  return { prometheusUrl, fromMs, toMs };
}

/** --vms-per-query N, 1 to 100000. */
function vmsPerQuery(text: string | undefined): { vmsPerQuery?: number } {
  if (text === undefined) return {};
  const count = Number(text.trim());
  if (!/^\d+$/.test(text.trim()) || count < 1 || count > 100_000)
    throw new UsageError(`--vms-per-query ${JSON.stringify(text.slice(0, 64))}: give a number of VMs, 1 to 100000`);
  return { vmsPerQuery: count };
}

/** --jobs N: worker threads for a sweep (undefined: the caller's default, the cores available). */
function parseJobs(text: string | undefined, sweeping: boolean): number | undefined {
  if (text === undefined) return undefined;
  if (!sweeping) throw new UsageError("--jobs goes with --sweep");
  if (!/^[1-9][0-9]{0,2}$/.test(text.trim()))
    throw new UsageError(`--jobs ${JSON.stringify(text)}: give a number of worker threads, 1 to 999`);
  return Number(text.trim());
}

/** --false-stop-budget: likely-false stops per 100 stops, "1", "0.5" or "1%" (default 1). */
function parseBudget(text: string | undefined): number {
  if (text === undefined) return DEFAULT_FALSE_STOP_BUDGET;
  const value = Number(text.trim().replace(/%$/, ""));
  if (!Number.isFinite(value) || value < 0 || value > 100)
    throw new UsageError(
      `--false-stop-budget ${JSON.stringify(text)}: give likely-false stops per 100 stops, 0 to 100 (for example 1)`,
    );
  return value;
}

/**
 * The policy one replay runs: the base (defaults or a profile) with the knobs given, always enforcing,
 * one report per step. whatif and every point of a sweep build theirs here.
 */
export function replayPolicy(base: Policy, overrides: Record<string, string>, stepSeconds: number): Policy {
  const knobs = parseKnobs(Object.entries(overrides), "annotation", { keyLabel: (name) => `--${name}` });
  if (knobs.errors.length > 0) {
    throw new UsageError(
      knobs.errors
        .map((error) => `${error.key}${error.value !== undefined ? ` ${error.value}` : ""}: ${error.message}`)
        .join("; "),
    );
  }
  const policy = mergePolicy(base, {
    ...knobs.overrides,
    autostopEnabled: true,
    mode: "enforce",
    reportIntervalSeconds: stepSeconds,
  });
  // A step longer than agent-lost-after would make every VM look lost between two steps.
  if (policy.agentLostAfterSeconds < 2 * stepSeconds) policy.agentLostAfterSeconds = 2 * stepSeconds;
  const crossErrors = crossCheckPolicy(policy, (name) => `--${name}`);
  if (crossErrors.length > 0)
    throw new UsageError(crossErrors.map((error) => `${error.key}: ${error.message}`).join("; "));
  return policy;
}
