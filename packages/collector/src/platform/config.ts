// ws-collector configuration file (YAML) and flags. Resolution is pure; the
// policy section is handed to the engine's own parser.
import { type DormantConfig, parseDormantConfig } from "../outreach/dormant/config.js";
import { parseCredentialsConfig, type CredentialsConfig } from "./kube/credentials.js";
import { parse as parseYaml } from "yaml";
import {
  ConfigError,
  durationSetting,
  errorMessage,
  isJsonObject,
  type JsonObject,
  parseDuration,
  type SectionSetting,
  type Setting,
  SettingsReader,
  settingAt,
} from "@ws/protocol";
import { DEFAULT_OWNER_LABEL } from "./kube/vm-resources.js";
import { parseHostSideConfig, type HostSideConfig } from "../loop/hostside/config.js";
import type { VmSeriesSet } from "../metrics/metrics.js";
import { parseNotificationsConfig, type NotificationsConfig } from "../outreach/notify/config.js";
import { isHostPort, parseStartConfig, type StartConfig } from "../comeback/start/config.js";
import { parseIdentityConfig, type IdentityConfig } from "../web/identity.js";
import { parsePricesConfig, type Prices } from "../outreach/money/prices.js";

export interface CollectorConfig {
  mode: "standalone" | "kubernetes";
  /** Dormant workstations: stopped this long, reminded this often (outreach/dormant/config.ts; Kubernetes mode). */
  dormant: DormantConfig;
  /**
   * hellosPerSecond: agents admitted per second before RESOURCE_EXHAUSTED with a retry hint (docs/collector-limits.md);
   * maxConnections: agent connections held at once (unset: the open-file limit less a reserve, agents/connection-cap.ts);
   * handshakeTimeoutMs: a connection with no authenticated Hello this long after accept is closed;
   * maxPendingConnectionsPerSource: unauthenticated connections one source address may hold (agents/connection-slots.ts; unset: by mode).
   * certCheckSeconds: how often certFile and keyFile are read again, so a renewed certificate is served without a restart (agents/tls-files.ts).
   */
  grpc: {
    listen: string;
    certFile?: string;
    keyFile?: string;
    certCheckSeconds: number;
    hellosPerSecond?: number;
    maxConnections?: number;
    handshakeTimeoutMs?: number;
    maxPendingConnectionsPerSource?: number;
  };
  /**
   * listen: the pages, /api/vms and keep links (behind the site's auth proxy); metricsListen:
   * /metrics, /healthz and /readyz on their own port for Prometheus and probes (unset: on listen);
   * identity: the auth proxy's header that decides who sees which VM (unset: pages open to all).
   */
  http: { listen: string; metricsListen?: string; identity?: IdentityConfig };
  tokenKeyFile: string;
  reportIntervalSeconds: number;
  /**
   * The longest an agent with nothing new to say stays quiet (docs/protocol.md, "Reports on
   * change"; default 5m); 0 (`off`): every agent reports every interval, as before.
   */
  reportHeartbeatSeconds: number;
  /** Accepted so existing config files load; unused since VMs are evaluated on events and at their deadlines (loop/deadlines.ts). */
  tickSeconds: number;
  standalone: {
    /** argv with {namespace} and {name} placeholders; absent → the stop is a log line only. */
    stopCommand?: string[];
    /** argv like stopCommand, run when a person presses Start (docs/coming-back.md); absent → the starting page says how to start it instead. */
    startCommand?: string[];
    /** Per-VM policy annotations ("ns/name" → { "idle-timeout": "1h", ... }); labels too. */
    vms: Record<string, { labels: Record<string, string>; annotations: Record<string, string> }>;
  };
  kubernetes: {
    kubeconfig?: string;
    leaseNamespace: string;
    leaseName: string;
    identity: string;
    /** The VM label naming its owner (Events, the status page, workstation_vm_info). */
    ownerLabel: string;
    /** Watch VMs, VMIs and launcher pods in this namespace only (a namespaced Role suffices). */
    watchNamespace?: string;
    /** Per-VM credential Secrets (docs/credentials.md); absent: off. */
    credentials?: CredentialsConfig;
  };
  /** The raw `policy:` section (defaults and profiles), parsed by the engine. */
  policyYaml: string;
  recordTrace?: string;
  /** Webhooks, keep-running links, the owner label (docs/notifications.md). */
  notifications: NotificationsConfig;
  /** Start links, the starting page, entry points (docs/coming-back.md). */
  start: StartConfig;
  /** KubeVirt's per-VM metrics through Prometheus (hostside/); absent: not configured. */
  hostSide?: HostSideConfig;
  /** Which per-VM series /metrics carries (docs/metrics.md, "Series per VM"). */
  metrics: { vmSeries: VmSeriesSet };
  /** The memory guard (docs/install.md, "Sizing"): where the cgroup is read, when the collector sheds. */
  memory: { cgroupRoot: string; shedRatio: number };
  /** What the site pays per core-, GiB- and GPU-hour and GiB-month of disk (docs/cost.md); absent: resource-hours only. */
  prices?: Prices;
}

/** The collector's configuration errors are the programs' one ConfigError. */
export { ConfigError as CollectorConfigError };

export interface CollectorFlags {
  standalone?: boolean;
  kubeconfig?: string;
  grpcListen?: string;
  httpListen?: string;
  metricsListen?: string;
  keyFile?: string;
  recordTrace?: string;
  stopCommand?: string[];
  startCommand?: string[];
}

/** How often grpc.certFile/keyFile are read again by default: the kubelet itself updates a mounted Secret within about a minute. */
const CERT_CHECK_DEFAULT_SECONDS = 60;
/** The most grpc.maxConnections may say: Linux's default nr_open (the highest nofile a process can get) is 1,048,576. */
const MAX_CONNECTIONS_SETTING = 1_048_576;
/** The longest grpc.handshakeTimeout: longer, a flood of connections that never authenticate holds the slots that long. */
const MAX_HANDSHAKE_TIMEOUT_MS = 600_000;
const optional = <K extends string, V>(key: K, value: V | undefined): Partial<Record<K, V>> =>
  value === undefined ? {} : ({ [key]: value } as Record<K, V>);

const text = (description: string, extra: Partial<Omit<Setting, "type">> = {}): Setting =>
  ({ type: "string", description, ...extra }) as Setting;
const hostPort = (description: string, fallback?: string): Setting =>
  text(description, { ...(fallback ? { default: fallback } : {}), examples: ["0.0.0.0:8080"] });
const section = (description: string, settings: Record<string, Setting>): Setting => ({
  type: "section",
  description,
  settings,
});
const parsedElsewhere = (description: string, see: string): Setting => ({ type: "any", description, see });

/**
 * The collector's config file, declared: its keys (an unknown top-level key is reported), their
 * types, defaults and limits. SettingsReader's checks and packaging/schema/ws-collector.schema.json
 * come from it; the sections other modules parse (policy, notifications, start, hostSide,
 * http.identity, kubernetes.credentials) are named here and checked by their own parsers.
 */
export const COLLECTOR_CONFIG_SCHEMA: SectionSetting = {
  type: "section",
  closed: true,
  description: "ws-collector's configuration (ws-collector serve --config FILE); flags override it",
  settings: {
    mode: {
      type: "enum",
      values: ["standalone", "kubernetes"],
      default: "standalone",
      description: "Where the VMs are",
    },
    grpc: section("The agents' port", {
      listen: hostPort("host:port the agents connect to", "0.0.0.0:7443"),
      certFile: text("The TLS certificate (PEM); re-read when renewed"),
      keyFile: text("The TLS key (PEM), with certFile"),
      certCheckInterval: {
        type: "duration",
        default: "1m",
        description: "How often certFile and keyFile are read again",
      },
      hellosPerSecond: {
        type: "number",
        minimum: 1,
        maximum: 1_000_000,
        default: 400,
        description: "Agents admitted per second before they are told to come back later (docs/collector-limits.md)",
        refusal: "grpc.hellosPerSecond: expected a number from 1 to 1000000",
      },
      maxConnections: {
        type: "integer",
        minimum: 1,
        maximum: MAX_CONNECTIONS_SETTING,
        description: "Agent connections held at once (unset: the open-file limit less 1024)",
        refusal: `grpc.maxConnections must be a whole number of agent connections from 1 to ${MAX_CONNECTIONS_SETTING} (unset: the open-file limit less 1024)`,
      },
      handshakeTimeout: {
        type: "duration",
        default: "30s",
        description: "A connection with no authenticated Hello this long after accept is closed (1s to 10m)",
        refusal:
          "grpc.handshakeTimeout must be a duration from 1s to 10m (a connection with no authenticated Hello that long after accept is closed; unset: 30s)",
      },
      maxPendingConnectionsPerSource: {
        type: "integer",
        minimum: 1,
        maximum: MAX_CONNECTIONS_SETTING,
        description: "Unauthenticated connections one source address may hold (unset: 8 in Kubernetes, 64 standalone)",
        refusal: `grpc.maxPendingConnectionsPerSource must be a whole number of unauthenticated connections from 1 to ${MAX_CONNECTIONS_SETTING} (unset: 8 in Kubernetes, 64 standalone)`,
      },
    }),
    http: section("The pages and probes", {
      listen: hostPort("host:port of the pages, /api/vms and the keep and start links", "0.0.0.0:8080"),
      metricsListen: hostPort("host:port of /metrics, /healthz and /readyz on their own (unset: on listen)"),
      identity: parsedElsewhere("The auth proxy's identity header: who sees which VM", "docs/install.md"),
    }),
    tokenKeyFile: text("The key that signs the agents' tokens and the links", {
      default: "/etc/ws-collector/token.key",
    }),
    reportInterval: { type: "duration", default: "15s", description: "How often agents report" },
    reportHeartbeat: {
      type: "duration",
      default: "5m",
      description:
        "The longest an agent with nothing new stays quiet (off: every interval, the default with metrics.vmSeries detailed; docs/protocol.md)",
    },
    tick: { type: "duration", default: "5s", description: "Accepted so older files load; unused" },
    standalone: section("Standalone mode: the VMs and how to stop and start them", {
      stopCommand: {
        type: "strings",
        minItems: 1,
        description: "argv run to stop a VM, with {namespace} and {name} (never through a shell; unset: a log line)",
        examples: ["virsh", "shutdown", "{name}"],
      },
      startCommand: {
        type: "strings",
        minItems: 1,
        description: "argv run when a person presses Start (unset: the starting page says how)",
      },
      vms: {
        type: "map",
        description: 'The VMs, "namespace/name" → { labels, annotations } (the policy annotations)',
        values: section("One VM", {
          labels: { type: "map", description: "Its labels", values: text("A label") },
          annotations: { type: "map", description: "Its policy annotations", values: text("An annotation") },
        }),
      },
    }),
    kubernetes: section("Kubernetes mode", {
      kubeconfig: text("A kubeconfig (unset: in-cluster)"),
      leaseNamespace: text("The leader Lease's namespace (unset: the pod's)", { default: "ws-system" }),
      leaseName: text("The leader Lease's name", { default: "ws-collector" }),
      ownerLabel: text("The VM label naming its owner", { default: DEFAULT_OWNER_LABEL }),
      watchNamespace: text("Watch this namespace only (a namespaced Role suffices)"),
      credentials: parsedElsewhere("Per-VM credential Secrets", "docs/credentials.md"),
    }),
    policy: parsedElsewhere("Policy defaults and profiles", "docs/policy.md"),
    recordTrace: text("Record every input to this file, for ws-collector replay (docs/replay.md)"),
    notifications: parsedElsewhere("Webhooks, keep-running links, the owner label", "docs/notifications.md"),
    start: parsedElsewhere("Start links, the starting page, entry points", "docs/coming-back.md"),
    hostSide: parsedElsewhere("KubeVirt's per-VM metrics through Prometheus", "docs/kubernetes.md"),
    dormant: parsedElsewhere("Dormant workstations: after, notifyEvery, scanEvery", "docs/policy.md"),
    prices: parsedElsewhere(
      "Prices per core-, GiB- and GPU-hour and disk GiB-month, for the cost figures",
      "docs/cost.md",
    ),
    metrics: section("/metrics", {
      vmSeries: {
        type: "enum",
        values: ["default", "detailed"],
        default: "default",
        description: "Which per-VM series /metrics carries (docs/metrics.md)",
      },
    }),
    memory: section("The memory guard (docs/install.md, Sizing)", {
      cgroupRoot: text("Where the cgroup is read", { default: "/sys/fs/cgroup" }),
      shedAt: {
        type: "string",
        pattern: "^\\d{1,2}(\\.\\d+)?%$",
        default: "85%",
        description: "The share of the memory limit (50% to 98%) from which detail series and chart points are shed",
      },
    }),
  },
};

/** The config file's text as a mapping ({} when there is none); YAML that does not parse stops at once. */
function parseCollectorFile(fileText: string | undefined, filePath: string, problems: string[]): JsonObject {
  if (fileText === undefined || fileText.trim() === "") return {};
  let parsed: unknown;
  try {
    parsed = parseYaml(fileText);
  } catch (error) {
    throw new ConfigError([`${filePath}: not valid YAML: ${errorMessage(error).split("\n")[0]}`]);
  }
  if (isJsonObject(parsed)) return parsed;
  if (parsed != null) problems.push(`${filePath}: expected a mapping at the top level`);
  return {};
}

/** A duration setting's seconds, named by its path in the file. */
function seconds(file: SettingsReader, path: string, fallback: number): number {
  return durationSetting(file.text(path), `${file.where}: ${path}`, fallback, file.problems);
}

/** grpc.handshakeTimeout in ms, 1s to 10m; outside that, its declared refusal. */
function handshakeTimeoutMs(file: SettingsReader): number | undefined {
  const value = file.raw("grpc.handshakeTimeout");
  if (value === undefined) return undefined;
  const text = typeof value === "string" || typeof value === "number" ? String(value) : "";
  let ms = Number.NaN;
  try {
    ms = parseDuration(text, { allowBareSeconds: true }) * 1000;
  } catch {}
  if (ms >= 1_000 && ms <= MAX_HANDSHAKE_TIMEOUT_MS) return ms;
  const refusal = settingAt(COLLECTOR_CONFIG_SCHEMA, "grpc.handshakeTimeout")?.refusal;
  file.problems.push(`${file.where}: ${refusal}, not ${JSON.stringify(value)?.slice(0, 40)}`);
  return undefined;
}

function resolveGrpc(file: SettingsReader, flags: CollectorFlags): CollectorConfig["grpc"] {
  file.section("grpc");
  const certFile = file.text("grpc.certFile");
  const keyFile = file.text("grpc.keyFile");
  return {
    listen: flags.grpcListen ?? file.text("grpc.listen") ?? "0.0.0.0:7443",
    ...(certFile ? { certFile } : {}),
    ...(keyFile ? { keyFile } : {}),
    certCheckSeconds: seconds(file, "grpc.certCheckInterval", CERT_CHECK_DEFAULT_SECONDS),
    ...optional(
      "hellosPerSecond",
      file.raw("grpc.hellosPerSecond") === undefined ? undefined : (file.count("grpc.hellosPerSecond") ?? 400),
    ),
    ...optional("maxConnections", file.count("grpc.maxConnections")),
    ...optional("handshakeTimeoutMs", handshakeTimeoutMs(file)),
    ...optional("maxPendingConnectionsPerSource", file.count("grpc.maxPendingConnectionsPerSource")),
  };
}

function resolveHttp(file: SettingsReader, flags: CollectorFlags): CollectorConfig["http"] {
  const httpFile = file.section("http");
  const metricsListen = flags.metricsListen ?? file.text("http.metricsListen");
  return {
    listen: flags.httpListen ?? file.text("http.listen") ?? "0.0.0.0:8080",
    ...(metricsListen ? { metricsListen } : {}),
    ...(httpFile.identity != null
      ? { identity: parseIdentityConfig(httpFile.identity, file.problems, `${file.where}: http.identity`)! }
      : {}),
  };
}

/** An argv setting: a non-empty list of strings, never run through a shell. */
function argvSetting(file: SettingsReader, path: string, example: string): string[] | undefined {
  const value = file.raw(path);
  if (value === undefined) return undefined;
  if (Array.isArray(value) && value.length > 0 && value.every((x) => typeof x === "string")) return value as string[];
  file.problems.push(
    `${file.where}: ${path} must be a non-empty list of argv strings, e.g. ${example} (it is never run through a shell)`,
  );
  return undefined;
}

function resolveStandalone(file: SettingsReader, flags: CollectorFlags): CollectorConfig["standalone"] {
  const standaloneFile = file.section("standalone");
  const stopCommand =
    flags.stopCommand ?? argvSetting(file, "standalone.stopCommand", '["virsh", "shutdown", "{name}"]');
  const startCommand =
    flags.startCommand ?? argvSetting(file, "standalone.startCommand", '["virsh", "start", "{name}"]');
  const vms: CollectorConfig["standalone"]["vms"] = {};
  const vmsFile = standaloneFile.vms;
  if (vmsFile != null) {
    if (!isJsonObject(vmsFile))
      file.problems.push(`${file.where}: standalone.vms must map "namespace/name" to annotations`);
    else {
      for (const [id, value] of Object.entries(vmsFile)) {
        if (!/^[a-z0-9-.]+\/[a-z0-9-.]+$/.test(id))
          file.problems.push(`${file.where}: standalone.vms: "${id}" is not namespace/name`);
        const entry = isJsonObject(value) ? value : {};
        const labels = isJsonObject(entry.labels) ? (entry.labels as Record<string, string>) : {};
        const annotations = isJsonObject(entry.annotations) ? (entry.annotations as Record<string, string>) : {};
        vms[id] = {
          labels: Object.fromEntries(Object.entries(labels).map(([k, v]) => [k, String(v)])),
          annotations: Object.fromEntries(Object.entries(annotations).map(([k, v]) => [k, String(v)])),
        };
      }
    }
  }
  return { ...(stopCommand ? { stopCommand } : {}), ...(startCommand ? { startCommand } : {}), vms };
}

function resolveKubernetes(
  file: SettingsReader,
  flags: CollectorFlags,
  env: Record<string, string | undefined>,
): CollectorConfig["kubernetes"] {
  const kubeFile = file.section("kubernetes");
  const kubeconfig = flags.kubeconfig ?? file.text("kubernetes.kubeconfig");
  const watchNamespace = file.text("kubernetes.watchNamespace");
  return {
    ...(kubeconfig ? { kubeconfig } : {}),
    leaseNamespace: file.text("kubernetes.leaseNamespace") ?? env.POD_NAMESPACE ?? "ws-system",
    leaseName: file.text("kubernetes.leaseName") ?? "ws-collector",
    ownerLabel: file.text("kubernetes.ownerLabel") ?? DEFAULT_OWNER_LABEL,
    identity: env.POD_NAME ?? env.HOSTNAME ?? "ws-collector",
    ...(watchNamespace ? { watchNamespace } : {}),
    ...optional(
      "credentials",
      parseCredentialsConfig(kubeFile["credentials"], file.problems, "kubernetes.credentials"),
    ),
  };
}

/** reportHeartbeat in seconds, 0 for off: unset, 5 minutes, or off with the detail set (whatif replays every sample). */
function reportHeartbeatSeconds(file: SettingsReader, text: string | undefined, vmSeries: VmSeriesSet): number {
  if (text === "off" || (text === undefined && vmSeries === "detailed")) return 0;
  return seconds(file, "reportHeartbeat", 300);
}

/** metrics.vmSeries and the memory guard's cgroup root and shedding threshold. */
function resolveMetricsAndMemory(file: SettingsReader): Pick<CollectorConfig, "metrics" | "memory"> {
  file.section("metrics");
  file.section("memory");
  const vmSeries = file.choice<VmSeriesSet>("metrics.vmSeries", "default");
  const shedText = file.text("memory.shedAt") ?? "85%";
  const shedRatio = /^\d{1,2}(\.\d+)?%$/.test(shedText) ? Number(shedText.slice(0, -1)) / 100 : Number.NaN;
  const shedOk = shedRatio >= 0.5 && shedRatio <= 0.98;
  if (!shedOk)
    file.problems.push(
      `${file.where}: memory.shedAt must be a share of the memory limit from 50% to 98%, not "${shedText.slice(0, 40)}"`,
    );
  return {
    metrics: { vmSeries },
    memory: { cgroupRoot: file.text("memory.cgroupRoot") ?? "/sys/fs/cgroup", shedRatio: shedOk ? shedRatio : 0.85 },
  };
}

export function resolveCollectorConfig(
  fileText: string | undefined,
  filePath: string,
  flags: CollectorFlags,
  env: Record<string, string | undefined>,
): CollectorConfig {
  const problems: string[] = [];
  const fileSettings = parseCollectorFile(fileText, filePath, problems);
  const file = new SettingsReader(COLLECTOR_CONFIG_SCHEMA, fileSettings, filePath, problems);
  const metricsAndMemory = resolveMetricsAndMemory(file);
  const mode: CollectorConfig["mode"] = flags.standalone
    ? "standalone"
    : flags.kubeconfig
      ? "kubernetes"
      : file.choice("mode", "standalone");
  const policy = fileSettings.policy;
  const heartbeat = file.text("reportHeartbeat");
  const recordTrace = flags.recordTrace ?? file.text("recordTrace");
  const config: CollectorConfig = {
    mode,
    grpc: resolveGrpc(file, flags),
    http: resolveHttp(file, flags),
    tokenKeyFile:
      flags.keyFile ?? env.WS_COLLECTOR_KEY_FILE ?? file.text("tokenKeyFile") ?? "/etc/ws-collector/token.key",
    reportIntervalSeconds: seconds(file, "reportInterval", 15),
    // Reports on change are on by default: the heartbeat carries the VM page's per-minute chart
    // (Report.quiet_minutes), so a quiet VM costs a Report per heartbeat and loses nothing (docs/protocol.md).
    // Not with the detail set: it is whatif's replayable history of every raw reading, which a
    // Report per heartbeat would leave stale for minutes, so unless set, every sample is heard.
    reportHeartbeatSeconds: reportHeartbeatSeconds(file, heartbeat, metricsAndMemory.metrics.vmSeries),
    tickSeconds: seconds(file, "tick", 5),
    standalone: resolveStandalone(file, flags),
    kubernetes: resolveKubernetes(file, flags, env),
    policyYaml: policy == null ? "" : JSON.stringify(policy),
    notifications: parseNotificationsConfig(fileSettings.notifications, problems, `${filePath}: notifications`),
    start: parseStartConfig(fileSettings.start, problems, `${filePath}: start`),
    ...optional("hostSide", parseHostSideConfig(fileSettings.hostSide, problems, `${filePath}: hostSide`)),
    ...optional("prices", parsePricesConfig(fileSettings.prices, problems, `${filePath}: prices`)),
    dormant: parseDormantConfig(fileSettings.dormant, problems, `${filePath}: dormant`),
    ...metricsAndMemory,
    ...(recordTrace ? { recordTrace } : {}),
  };
  crossCheck(config, fileSettings, filePath, env, problems);
  if (problems.length) throw new ConfigError(problems);
  return config;
}

/** The rules that join settings, and what the environment adds (the wake listener, the leader's URL). */
function crossCheck(
  config: CollectorConfig,
  file: JsonObject,
  filePath: string,
  env: Record<string, string | undefined>,
  problems: string[],
): void {
  for (const [label, address] of [
    ["grpc.listen", config.grpc.listen],
    ["http.listen", config.http.listen],
    ...(config.http.metricsListen ? [["http.metricsListen", config.http.metricsListen] as const] : []),
  ] as const) {
    if (!isHostPort(address)) problems.push(`${label}: "${address}" must be host:port`);
  }
  if (Boolean(config.grpc.certFile) !== Boolean(config.grpc.keyFile))
    problems.push("grpc: certFile and keyFile go together");
  // Kubernetes mode stops VMs people do not own the hypervisor of: enforcing there without the
  // links leaves a stopped VM no way back but a ticket. Standalone (a demo, one host) warns instead.
  const enforcing = enforcingPolicies(file.policy);
  if (config.mode === "kubernetes" && enforcing.length > 0 && !config.notifications.publicUrl)
    problems.push(
      `${filePath}: notifications.publicUrl is required in enforce mode (${enforcing.join(", ")}): it is the address users reach the collector's pages at (https://ws.example.com), and without it no notice, webhook or welcome back carries a keep-running or start link, so a stopped VM has no way back but a platform engineer (docs/install.md, "The way back")`,
    );
  if (config.tickSeconds < 0.1 || config.tickSeconds > 60) problems.push(`tick must be between 100ms and 60s`);
  // The way-back component (packaging/kubernetes-overlays/way-back) turns the wake listener on
  // with this, so a site enables it with one line instead of editing its config copy.
  const wakeFromEnv = env.WS_COLLECTOR_WAKE_LISTEN;
  if (wakeFromEnv) {
    if (isHostPort(wakeFromEnv)) config.start.wakeListen = wakeFromEnv;
    else problems.push(`WS_COLLECTOR_WAKE_LISTEN: "${wakeFromEnv.slice(0, 100)}" must be host:port`);
  }
  // The collector's own Service selects the leader's pod (packaging/kubernetes/service.yaml): a
  // standby forwards POSTs there unless the file says otherwise.
  if (
    config.mode === "kubernetes" &&
    !config.start.leaderUrl &&
    (isJsonObject(file.start) ? file.start.leaderUrl : undefined) === undefined
  )
    config.start.leaderUrl = `http://ws-collector.${config.kubernetes.leaseNamespace}.svc:8080`;
}

/** Where the policy section sets enforce mode ("policy.defaults", "policy.profiles.NAME"): the places that stop VMs. */
export function enforcingPolicies(policy: unknown): string[] {
  if (!isJsonObject(policy)) return [];
  const places: string[] = [];
  if (isJsonObject(policy.defaults) && policy.defaults.mode === "enforce") places.push("policy.defaults");
  if (isJsonObject(policy.profiles))
    for (const [name, profile] of Object.entries(policy.profiles))
      if (isJsonObject(profile) && profile.mode === "enforce") places.push(`policy.profiles.${name}`);
  return places;
}
