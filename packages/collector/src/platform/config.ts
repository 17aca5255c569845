// ws-collector configuration file (YAML) and flags. Resolution is pure; the
// policy section is handed to the engine's own parser.
import { parseCredentialsConfig, type CredentialsConfig } from "./kube/credentials.js";
import { parse as parseYaml } from "yaml";
import { ConfigError, DurationError, errorMessage, isJsonObject, type JsonObject, parseDuration } from "@ws/protocol";
import { DEFAULT_OWNER_LABEL } from "./kube/vm-resources.js";
import { parseHostSideConfig, type HostSideConfig } from "../loop/hostside/config.js";
import type { VmSeriesSet } from "../metrics/metrics.js";
import { parseNotificationsConfig, type NotificationsConfig } from "../outreach/notify/config.js";
import { isHostPort, parseStartConfig, type StartConfig } from "../comeback/start/config.js";
import { parseIdentityConfig, type IdentityConfig } from "../web/identity.js";

export interface CollectorConfig {
  mode: "standalone" | "kubernetes";
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

const TOP_KEYS = [
  "mode",
  "grpc",
  "http",
  "tokenKeyFile",
  "reportInterval",
  "reportHeartbeat",
  "tick",
  "standalone",
  "kubernetes",
  "policy",
  "recordTrace",
  "notifications",
  "start",
  "hostSide",
  "metrics",
  "memory",
];
/** How often grpc.certFile/keyFile are read again by default: the kubelet itself updates a mounted Secret within about a minute. */
const CERT_CHECK_DEFAULT_SECONDS = 60;
/** The most grpc.maxConnections may say: Linux's default nr_open (the highest nofile a process can get) is 1,048,576. */
const MAX_CONNECTIONS_SETTING = 1_048_576;
/** The longest grpc.handshakeTimeout: longer, a flood of connections that never authenticate holds the slots that long. */
const MAX_HANDSHAKE_TIMEOUT_MS = 600_000;
const optional = <K extends string, V>(key: K, value: V | undefined): Partial<Record<K, V>> =>
  value === undefined ? {} : ({ [key]: value } as Record<K, V>);

export function resolveCollectorConfig(
  fileText: string | undefined,
  filePath: string,
  flags: CollectorFlags,
  env: Record<string, string | undefined>,
): CollectorConfig {
  const problems: string[] = [];
  let file: JsonObject = {};
  if (fileText !== undefined && fileText.trim() !== "") {
    try {
      const parsed: unknown = parseYaml(fileText);
      if (isJsonObject(parsed)) file = parsed;
      else if (parsed != null) problems.push(`${filePath}: expected a mapping at the top level`);
    } catch (error) {
      throw new ConfigError([`${filePath}: not valid YAML: ${errorMessage(error).split("\n")[0]}`]);
    }
  }
  for (const key of Object.keys(file))
    if (!TOP_KEYS.includes(key)) problems.push(`${filePath}: unknown setting "${key}" (known: ${TOP_KEYS.join(", ")})`);
  const section = (key: string): JsonObject => {
    const v = file[key];
    if (v == null) return {};
    if (isJsonObject(v)) return v;
    problems.push(`${filePath}: "${key}" must be a mapping`);
    return {};
  };
  const str = (obj: JsonObject, key: string, label: string): string | undefined => {
    const v = obj[key];
    if (v == null) return undefined;
    if (typeof v === "string" || typeof v === "number") return String(v);
    problems.push(`${label}: expected a string`);
    return undefined;
  };
  const seconds = (text: string | undefined, label: string, fallback: number): number => {
    if (text === undefined) return fallback;
    try {
      return parseDuration(text, { allowBareSeconds: true });
    } catch (error) {
      problems.push(`${label}: ${error instanceof DurationError ? error.message : String(error)}`);
      return fallback;
    }
  };
  const positiveRate = (value: unknown): number => {
    if (typeof value === "number" && Number.isFinite(value) && value >= 1 && value <= 1_000_000) return value;
    problems.push(
      `grpc.hellosPerSecond: expected a number from 1 to 1000000, not ${JSON.stringify(value)?.slice(0, 40)}`,
    );
    return 400;
  };
  const connectionCap = (value: unknown): number | undefined => {
    if (typeof value === "number" && Number.isInteger(value) && value >= 1 && value <= MAX_CONNECTIONS_SETTING)
      return value;
    problems.push(
      `${filePath}: grpc.maxConnections must be a whole number of agent connections from 1 to ${MAX_CONNECTIONS_SETTING} (unset: the open-file limit less 1024), not ${JSON.stringify(value)?.slice(0, 40)}`,
    );
    return undefined;
  };
  const handshakeTimeout = (value: unknown): number | undefined => {
    const text = typeof value === "string" || typeof value === "number" ? String(value) : "";
    let ms = Number.NaN;
    try {
      ms = parseDuration(text, { allowBareSeconds: true }) * 1000;
    } catch {}
    if (ms >= 1_000 && ms <= MAX_HANDSHAKE_TIMEOUT_MS) return ms;
    problems.push(
      `${filePath}: grpc.handshakeTimeout must be a duration from 1s to 10m (a connection with no authenticated Hello that long after accept is closed; unset: 30s), not ${JSON.stringify(value)?.slice(0, 40)}`,
    );
    return undefined;
  };
  const pendingPerSource = (value: unknown): number | undefined => {
    if (typeof value === "number" && Number.isInteger(value) && value >= 1 && value <= MAX_CONNECTIONS_SETTING)
      return value;
    problems.push(
      `${filePath}: grpc.maxPendingConnectionsPerSource must be a whole number of unauthenticated connections from 1 to ${MAX_CONNECTIONS_SETTING} (unset: 8 in Kubernetes, 64 standalone), not ${JSON.stringify(value)?.slice(0, 40)}`,
    );
    return undefined;
  };
  const grpcFile = section("grpc");
  const httpFile = section("http");
  const standaloneFile = section("standalone");
  const kubeFile = section("kubernetes");
  const metricsFile = section("metrics");
  const memoryFile = section("memory");
  const vmSeries = str(metricsFile, "vmSeries", "metrics.vmSeries") ?? "default";
  if (vmSeries !== "default" && vmSeries !== "detailed")
    problems.push(`${filePath}: metrics.vmSeries must be default or detailed, not "${vmSeries.slice(0, 40)}"`);
  const shedText = str(memoryFile, "shedAt", "memory.shedAt") ?? "85%";
  const shedRatio = /^\d{1,2}(\.\d+)?%$/.test(shedText) ? Number(shedText.slice(0, -1)) / 100 : Number.NaN;
  if (!(shedRatio >= 0.5 && shedRatio <= 0.98))
    problems.push(
      `${filePath}: memory.shedAt must be a share of the memory limit from 50% to 98%, not "${shedText.slice(0, 40)}"`,
    );

  const modeText = flags.standalone
    ? "standalone"
    : flags.kubeconfig
      ? "kubernetes"
      : (str(file, "mode", `${filePath}: mode`) ?? "standalone");
  if (modeText !== "standalone" && modeText !== "kubernetes")
    problems.push(`${filePath}: mode must be standalone or kubernetes, not "${modeText}"`);

  let stopCommand = flags.stopCommand;
  if (!stopCommand && standaloneFile.stopCommand != null) {
    const v = standaloneFile.stopCommand;
    if (Array.isArray(v) && v.length > 0 && v.every((x) => typeof x === "string")) stopCommand = v as string[];
    else
      problems.push(
        `${filePath}: standalone.stopCommand must be a non-empty list of argv strings, e.g. ["virsh", "shutdown", "{name}"] (it is never run through a shell)`,
      );
  }
  let startCommand = flags.startCommand;
  if (!startCommand && standaloneFile.startCommand != null) {
    const v = standaloneFile.startCommand;
    if (Array.isArray(v) && v.length > 0 && v.every((x) => typeof x === "string")) startCommand = v as string[];
    else
      problems.push(
        `${filePath}: standalone.startCommand must be a non-empty list of argv strings, e.g. ["virsh", "start", "{name}"] (it is never run through a shell)`,
      );
  }
  const vms: CollectorConfig["standalone"]["vms"] = {};
  const vmsFile = standaloneFile.vms;
  if (vmsFile != null) {
    if (!isJsonObject(vmsFile)) problems.push(`${filePath}: standalone.vms must map "namespace/name" to annotations`);
    else {
      for (const [id, value] of Object.entries(vmsFile)) {
        if (!/^[a-z0-9-.]+\/[a-z0-9-.]+$/.test(id))
          problems.push(`${filePath}: standalone.vms: "${id}" is not namespace/name`);
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
  const policy = file.policy;
  const policyYaml = policy == null ? "" : JSON.stringify(policy);

  const config: CollectorConfig = {
    mode: modeText === "kubernetes" ? "kubernetes" : "standalone",
    grpc: {
      listen: flags.grpcListen ?? str(grpcFile, "listen", `${filePath}: grpc.listen`) ?? "0.0.0.0:7443",
      ...(str(grpcFile, "certFile", "grpc.certFile") ? { certFile: str(grpcFile, "certFile", "grpc.certFile")! } : {}),
      ...(str(grpcFile, "keyFile", "grpc.keyFile") ? { keyFile: str(grpcFile, "keyFile", "grpc.keyFile")! } : {}),
      certCheckSeconds: seconds(
        str(grpcFile, "certCheckInterval", "grpc.certCheckInterval"),
        `${filePath}: grpc.certCheckInterval`,
        CERT_CHECK_DEFAULT_SECONDS,
      ),
      ...(grpcFile["hellosPerSecond"] !== undefined
        ? { hellosPerSecond: positiveRate(grpcFile["hellosPerSecond"]) }
        : {}),
      ...optional(
        "maxConnections",
        grpcFile["maxConnections"] == null ? undefined : connectionCap(grpcFile["maxConnections"]),
      ),
      ...optional(
        "handshakeTimeoutMs",
        grpcFile["handshakeTimeout"] == null ? undefined : handshakeTimeout(grpcFile["handshakeTimeout"]),
      ),
      ...optional(
        "maxPendingConnectionsPerSource",
        grpcFile["maxPendingConnectionsPerSource"] == null
          ? undefined
          : pendingPerSource(grpcFile["maxPendingConnectionsPerSource"]),
      ),
    },
    http: {
      listen: flags.httpListen ?? str(httpFile, "listen", `${filePath}: http.listen`) ?? "0.0.0.0:8080",
      ...((flags.metricsListen ?? str(httpFile, "metricsListen", `${filePath}: http.metricsListen`))
        ? { metricsListen: flags.metricsListen ?? str(httpFile, "metricsListen", `${filePath}: http.metricsListen`)! }
        : {}),
      ...(httpFile.identity != null
        ? { identity: parseIdentityConfig(httpFile.identity, problems, `${filePath}: http.identity`)! }
        : {}),
    },
    tokenKeyFile:
      flags.keyFile ??
      env.WS_COLLECTOR_KEY_FILE ??
      str(file, "tokenKeyFile", `${filePath}: tokenKeyFile`) ??
      "/etc/ws-collector/token.key",
    reportIntervalSeconds: seconds(str(file, "reportInterval", "reportInterval"), `${filePath}: reportInterval`, 15),
    // Reports on change are on by default: the heartbeat carries the VM page's per-minute chart
    // (Report.quiet_minutes), so a quiet VM costs a Report per heartbeat and loses nothing (docs/protocol.md).
    reportHeartbeatSeconds:
      str(file, "reportHeartbeat", "reportHeartbeat") === "off"
        ? 0
        : seconds(str(file, "reportHeartbeat", "reportHeartbeat"), `${filePath}: reportHeartbeat`, 300),
    tickSeconds: seconds(str(file, "tick", "tick"), `${filePath}: tick`, 5),
    standalone: { ...(stopCommand ? { stopCommand } : {}), ...(startCommand ? { startCommand } : {}), vms },
    kubernetes: {
      ...((flags.kubeconfig ?? str(kubeFile, "kubeconfig", "kubernetes.kubeconfig"))
        ? { kubeconfig: flags.kubeconfig ?? str(kubeFile, "kubeconfig", "kubernetes.kubeconfig")! }
        : {}),
      leaseNamespace: str(kubeFile, "leaseNamespace", "kubernetes.leaseNamespace") ?? env.POD_NAMESPACE ?? "ws-system",
      leaseName: str(kubeFile, "leaseName", "kubernetes.leaseName") ?? "ws-collector",
      ownerLabel: str(kubeFile, "ownerLabel", "kubernetes.ownerLabel") ?? DEFAULT_OWNER_LABEL,
      identity: env.POD_NAME ?? env.HOSTNAME ?? "ws-collector",
      ...(str(kubeFile, "watchNamespace", "kubernetes.watchNamespace")
        ? { watchNamespace: str(kubeFile, "watchNamespace", "kubernetes.watchNamespace")! }
        : {}),
      ...optional("credentials", parseCredentialsConfig(kubeFile["credentials"], problems, "kubernetes.credentials")),
    },
    policyYaml,
    notifications: parseNotificationsConfig(file.notifications, problems, `${filePath}: notifications`),
    start: parseStartConfig(file.start, problems, `${filePath}: start`),
    ...optional("hostSide", parseHostSideConfig(file.hostSide, problems, `${filePath}: hostSide`)),
    metrics: { vmSeries: vmSeries === "detailed" ? "detailed" : "default" },
    memory: {
      cgroupRoot: str(memoryFile, "cgroupRoot", "memory.cgroupRoot") ?? "/sys/fs/cgroup",
      shedRatio: shedRatio >= 0.5 && shedRatio <= 0.98 ? shedRatio : 0.85,
    },
    ...((flags.recordTrace ?? str(file, "recordTrace", "recordTrace"))
      ? { recordTrace: flags.recordTrace ?? str(file, "recordTrace", "recordTrace")! }
      : {}),
  };
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
  if (problems.length) throw new ConfigError(problems);
  return config;
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
