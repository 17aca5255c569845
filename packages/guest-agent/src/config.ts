// Agent configuration: /etc/ws-agent/config.yaml (what cloud-init writes),
// overridden by environment, overridden by flags. Resolution is pure.
import { parse as parseYaml } from "yaml";
import {
  ConfigError,
  durationSetting,
  errorMessage,
  isJsonObject,
  type JsonObject,
  type SectionSetting,
  type Setting,
  SettingsReader,
  SOURCE_NAMES,
} from "@ws/protocol";
import { defaultRoots, type Roots } from "./roots.js";

export const DEFAULT_CONFIG_PATH = "/etc/ws-agent/config.yaml";
/** Where ws-agent's mount unit puts the VM's credential disk (docs/credentials.md). */
export const DEFAULT_CREDENTIAL_DIR = "/run/ws/credential";

/** What the collector's per-VM Secret carries, as files on the credential disk. */
export interface Credential {
  /** config.yaml: collector.addresses, collector.serverName, vm.namespace, vm.name. */
  configText?: string;
  token?: string;
  /** Path of collector-ca.crt when the disk has one. */
  caFile?: string;
}

export interface AgentConfig {
  /**
   * `address` is the first of `addresses`, which the agent tries in order (the cluster DNS name,
   * a LoadBalancer or NodePort address, an enterprise DNS name: docs/kubernetes.md#reaching-the-collector).
   */
  collector: { address: string; addresses: string[]; caFile?: string; insecure: boolean; serverName?: string };
  vm: { namespace: string; name: string };
  token: string;
  reportIntervalSeconds: number;
  socketPath: string;
  roots: Roots;
  jupyter: { urls: string[]; timeoutMs: number };
  gpu: { command: string; intervalMs: number; timeoutMs: number };
  disk: { mounts: string[] };
  disabledSignals: string[];
  /** Whole-sample time budget: a source that takes longer is reported failed. */
  sampleTimeoutMs: number;
}

export { ConfigError };

type Described = { description: string; default?: string | number | boolean | readonly string[] };

const text = (description: string, extra: Partial<Described> = {}): Setting => ({
  type: "string",
  description,
  ...extra,
});
const duration = (description: string, fallback: string): Setting => ({
  type: "duration",
  description,
  default: fallback,
});

/**
 * The agent's config file (/etc/ws-agent/config.yaml), declared: its keys (anything else is
 * reported, since a typo would silently do nothing), their types and defaults. The checks of
 * SettingsReader and packaging/schema/ws-agent.schema.json come from it.
 */
export const AGENT_CONFIG_SCHEMA: SectionSetting = {
  type: "section",
  closed: true,
  description: "ws-agent's configuration (/etc/ws-agent/config.yaml); environment variables and flags override it",
  settings: {
    collector: {
      type: "section",
      description: "Where the collector is and how to trust it",
      settings: {
        address: {
          type: "strings",
          orOne: true,
          description: "The collector's host:port, or a list of them tried in order",
          examples: ["ws-collector.ws-system.svc:7443"],
        },
        addresses: { type: "strings", description: "More host:port addresses, tried after address" },
        caFile: text("The CA certificate that signed the collector's (PEM)"),
        insecure: { type: "boolean", description: "Connect without TLS (tests only)", default: false },
        serverName: text("The name the collector's certificate is checked against (default: the address's host)"),
      },
    },
    vm: {
      type: "section",
      description: "This VM's identity in the cluster (cloud-init writes it)",
      settings: {
        namespace: text("The VirtualMachine's namespace"),
        name: text("The VirtualMachine's name"),
      },
    },
    token: text("The VM's token (ws-collector token prints it); prefer tokenFile"),
    tokenFile: text("A file holding the VM's token"),
    credentialDir: text("Where the per-VM credential disk is mounted (docs/credentials.md)", {
      default: DEFAULT_CREDENTIAL_DIR,
    }),
    reportInterval: duration("How often the agent samples and reports (at most 1h)", "15s"),
    socket: text("The lease socket's path (ws-lease)", { default: "/run/ws-agent/agent.sock" }),
    stateDir: text("Where leases, audit and identity are kept", { default: defaultRoots.state }),
    roots: {
      type: "section",
      description: "Where the agent reads the system from (tests and containers)",
      settings: Object.fromEntries(
        (["proc", "sys", "dev", "run", "home", "etc"] as const).map((root) => [
          root,
          text(`The ${root} root`, { default: defaultRoots[root] }),
        ]),
      ),
    },
    jupyter: {
      type: "section",
      description: "The Jupyter servers to ask for their kernels and terminals",
      settings: {
        urls: { type: "strings", description: "Jupyter server URLs (default: found from the runtime files)" },
        timeout: duration("How long one Jupyter request may take", "3s"),
      },
    },
    gpu: {
      type: "section",
      description: "The GPU reading (nvidia-smi)",
      settings: {
        command: text("The nvidia-smi command", { default: "nvidia-smi" }),
        interval: duration("How often GPUs are read", "30s"),
        timeout: duration("How long one reading may take", "10s"),
      },
    },
    disk: {
      type: "section",
      description: "The disk-activity reading",
      settings: { mounts: { type: "strings", description: "The mount points to watch", default: ["/"] } },
    },
    disabledSignals: {
      type: "strings",
      items: SOURCE_NAMES,
      description: "Signals not read on this VM",
      default: [],
    },
    sampleTimeout: duration("The whole sample's time budget: a source that takes longer is reported failed", "5s"),
  },
};

/** The credential disk's config.yaml: the same keys, not checked for unknown ones (the collector writes it). */
const CREDENTIAL_FILE_SCHEMA: SectionSetting = { ...AGENT_CONFIG_SCHEMA, closed: false };

export const SIGNAL_NAMES: readonly string[] = SOURCE_NAMES;

/** What flags may set (already split from argv by the CLI). */
export interface ConfigOverrides {
  collector?: string;
  token?: string;
  namespace?: string;
  name?: string;
  reportInterval?: string;
  insecure?: boolean;
  caFile?: string;
  stateDir?: string;
  socket?: string;
  procRoot?: string;
  sysRoot?: string;
  devRoot?: string;
  runRoot?: string;
  homeRoot?: string;
  etcRoot?: string;
  jupyterUrls?: string[];
  gpuCommand?: string;
  mounts?: string[];
}

export interface ConfigSources {
  /** Contents of the config file, or undefined when there is none. */
  fileText?: string;
  filePath: string;
  /** Contents of tokenFile when the file names one (read by the caller). */
  readTokenFile?: (path: string) => string;
  /** The per-VM credential disk's files in credentialDir, when it is mounted (read by the caller). */
  readCredential?: (dir: string) => Credential | undefined;
  env: Record<string, string | undefined>;
  flags: ConfigOverrides;
  /** `probe` needs no collector: identity fields may be missing. */
  requireCollector: boolean;
}

const ADDRESS_PATTERN = /^[\w.-]+:\d{1,5}$|^\[[0-9a-f:.]+\]:\d{1,5}$|^unix:/i;

/**
 * The collector addresses, in the order to try them: a flag or WS_AGENT_COLLECTOR (comma-separated)
 * replaces the file's; the file's `collector.address` is one address or a list, and
 * `collector.addresses` a list after it.
 */
function collectorAddresses(
  override: string | undefined,
  file: JsonObject,
  where: string,
  problems: string[],
): string[] {
  const found: string[] = [];
  const take = (value: unknown, label: string) => {
    if (value === undefined || value === null) return;
    const items = Array.isArray(value) ? value : [value];
    for (const item of items) {
      if (typeof item !== "string") problems.push(`${label}: expected host:port or a list of them`);
      else found.push(item.trim());
    }
  };
  if (override !== undefined)
    take(
      override.split(",").filter((a) => a.trim() !== ""),
      "collector address",
    );
  else {
    take(file["address"], `${where}: collector.address`);
    take(file["addresses"], `${where}: collector.addresses`);
  }
  for (const address of found) {
    if (!ADDRESS_PATTERN.test(address)) {
      problems.push(`collector address "${address}" must be host:port (for example collector.ws-system.svc:7443)`);
    }
  }
  return [...new Set(found)];
}

/** The config file's text as a mapping ({} when there is none); YAML that does not parse stops at once. */
function parseAgentFile(sources: ConfigSources, problems: string[]): JsonObject {
  const where = sources.filePath;
  if (sources.fileText === undefined || sources.fileText.trim() === "") return {};
  let parsed: unknown;
  try {
    parsed = parseYaml(sources.fileText);
  } catch (error) {
    throw new ConfigError([`${where}: not valid YAML: ${errorMessage(error).split("\n")[0]}`]);
  }
  if (parsed === null || parsed === undefined) return {};
  if (isJsonObject(parsed)) return parsed;
  problems.push(`${where}: expected a mapping of settings at the top level`);
  return {};
}

/** The credential disk's config.yaml as a mapping ({} when there is none or it is not one). */
function parseCredentialFile(
  credentialDir: string,
  credential: Credential | undefined,
  problems: string[],
): JsonObject {
  if (credential?.configText === undefined) return {};
  try {
    const parsed: unknown = parseYaml(credential.configText);
    if (isJsonObject(parsed)) return parsed;
    problems.push(`${credentialDir}/config.yaml: expected a mapping`);
  } catch (error) {
    problems.push(`${credentialDir}/config.yaml: not valid YAML: ${errorMessage(error).split("\n")[0]}`);
  }
  return {};
}

/** "true"/"yes"/"on"/"1" or their opposites; anything else is a problem. */
function parseBool(text: string | undefined, label: string, problems: string[]): boolean | undefined {
  if (text === undefined) return undefined;
  if (/^(1|true|yes|on)$/i.test(text)) return true;
  if (/^(0|false|no|off)$/i.test(text)) return false;
  problems.push(`${label}: expected true or false, got "${text}"`);
  return undefined;
}

/** What the agent reads: the file, and the credential disk's file and files behind it. */
interface AgentReading {
  sources: ConfigSources;
  file: SettingsReader;
  credentialDir: string;
  credential: Credential | undefined;
  credentialFile: SettingsReader;
  problems: string[];
}

/** The credential file's section, {} when absent or not a mapping (the collector writes it). */
function credentialSection(reading: AgentReading, key: string): JsonObject {
  const value = reading.credentialFile.raw(key);
  return isJsonObject(value) ? value : {};
}

/** The collector's addresses, TLS and server name: flags, then environment, then the file, then the credential disk. */
function resolveCollector(reading: AgentReading): AgentConfig["collector"] {
  const { sources, file, credentialDir, credential, problems } = reading;
  const { env, flags } = sources;
  const where = file.where;
  const configured = collectorAddresses(
    flags.collector ?? env.WS_AGENT_COLLECTOR,
    file.section("collector"),
    where,
    problems,
  );
  const addresses =
    configured.length > 0
      ? configured
      : collectorAddresses(
          undefined,
          credentialSection(reading, "collector"),
          `${credentialDir}/config.yaml`,
          problems,
        );
  const insecure =
    flags.insecure ??
    parseBool(env.WS_AGENT_INSECURE, "WS_AGENT_INSECURE", problems) ??
    parseBool(file.text("collector.insecure"), `${where}: collector.insecure`, problems) ??
    false;
  const caFile = flags.caFile ?? file.text("collector.caFile") ?? credential?.caFile;
  const serverName = file.text("collector.serverName") ?? reading.credentialFile.text("collector.serverName");
  return {
    address: addresses[0] ?? "",
    addresses,
    insecure,
    ...(caFile ? { caFile } : {}),
    ...(serverName ? { serverName } : {}),
  };
}

/** The VM's namespace, name and token: flags, environment, the file (or its tokenFile), the credential disk. */
function resolveIdentity(reading: AgentReading): { namespace: string; name: string; token: string | undefined } {
  const { sources, file, credential, problems } = reading;
  const { env, flags } = sources;
  const where = file.where;
  file.section("vm");
  const namespace =
    flags.namespace ??
    env.WS_AGENT_VM_NAMESPACE ??
    file.text("vm.namespace") ??
    reading.credentialFile.text("vm.namespace") ??
    "";
  const name =
    flags.name ?? env.WS_AGENT_VM_NAME ?? file.text("vm.name") ?? reading.credentialFile.text("vm.name") ?? "";
  let token = flags.token ?? env.WS_AGENT_TOKEN ?? file.text("token");
  const tokenFile = file.text("tokenFile");
  if (token === undefined && tokenFile !== undefined) {
    try {
      token = (
        sources.readTokenFile ??
        (() => {
          throw new Error("no reader");
        })
      )(tokenFile).trim();
    } catch (error) {
      problems.push(`${where}: tokenFile ${tokenFile}: ${errorMessage(error)}`);
    }
  }
  if (!token && credential?.token) token = credential.token.trim();
  return { namespace, name, token };
}

/** What `run` cannot do without, and names that are not Kubernetes names. */
function checkIdentity(
  reading: AgentReading,
  collector: AgentConfig["collector"],
  identity: { namespace: string; name: string; token: string | undefined },
): void {
  const { sources, problems } = reading;
  const where = sources.filePath;
  if (sources.requireCollector) {
    if (collector.address === "")
      problems.push(`no collector address: set collector.address in ${where}, WS_AGENT_COLLECTOR or --collector`);
    if (identity.namespace === "" || identity.name === "")
      problems.push(
        `no VM identity: set vm.namespace and vm.name in ${where} (cloud-init writes them), or --namespace/--name`,
      );
    if (!identity.token)
      problems.push(
        `no token: set token or tokenFile in ${where}, WS_AGENT_TOKEN or --token (ws-collector token prints it)`,
      );
  }
  for (const [label, value] of [
    ["VM namespace", identity.namespace],
    ["VM name", identity.name],
  ] as const) {
    if (value !== "" && !/^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/.test(value)) {
      problems.push(`${label} "${value}" is not a valid Kubernetes name (lowercase letters, digits, '-' and '.')`);
    }
  }
}

/** Where the system is read from: flags, then the file's roots section, then the defaults. */
function resolveRoots(reading: AgentReading): Roots {
  const { sources, file } = reading;
  const { env, flags } = sources;
  file.section("roots");
  return {
    proc: flags.procRoot ?? file.text("roots.proc") ?? defaultRoots.proc,
    sys: flags.sysRoot ?? file.text("roots.sys") ?? defaultRoots.sys,
    dev: flags.devRoot ?? file.text("roots.dev") ?? defaultRoots.dev,
    run: flags.runRoot ?? file.text("roots.run") ?? defaultRoots.run,
    home: flags.homeRoot ?? file.text("roots.home") ?? defaultRoots.home,
    etc: flags.etcRoot ?? file.text("roots.etc") ?? defaultRoots.etc,
    state: flags.stateDir ?? env.WS_AGENT_STATE_DIR ?? file.text("stateDir") ?? defaultRoots.state,
  };
}

/** The sampling settings: the report interval, Jupyter, GPU, disk, disabled signals, the sample's budget. */
function resolveSampling(
  reading: AgentReading,
): Pick<AgentConfig, "reportIntervalSeconds" | "jupyter" | "gpu" | "disk" | "disabledSignals" | "sampleTimeoutMs"> {
  const { sources, file, problems } = reading;
  const { env, flags } = sources;
  const reportIntervalSeconds = durationSetting(
    flags.reportInterval ?? env.WS_AGENT_REPORT_INTERVAL ?? file.text("reportInterval"),
    "report interval",
    15,
    problems,
    1,
  );
  if (reportIntervalSeconds > 3_600)
    problems.push(
      `report interval ${reportIntervalSeconds}s is over an hour; the collector would think the agent lost`,
    );
  const disabledSignals = file.strings("disabledSignals") ?? [];
  for (const signal of disabledSignals) {
    if (!SIGNAL_NAMES.includes(signal))
      problems.push(`${file.where}: disabledSignals: unknown signal "${signal}" (known: ${SIGNAL_NAMES.join(", ")})`);
  }
  const seconds = (path: string, label: string, fallback: number) =>
    durationSetting(file.text(path), label, fallback, problems, 1);
  file.section("jupyter");
  file.section("gpu");
  file.section("disk");
  return {
    reportIntervalSeconds,
    jupyter: {
      urls: flags.jupyterUrls ?? file.strings("jupyter.urls") ?? [],
      timeoutMs: seconds("jupyter.timeout", "jupyter.timeout", 3) * 1000,
    },
    gpu: {
      command: flags.gpuCommand ?? file.text("gpu.command") ?? "nvidia-smi",
      intervalMs: seconds("gpu.interval", "gpu.interval", 30) * 1000,
      timeoutMs: seconds("gpu.timeout", "gpu.timeout", 10) * 1000,
    },
    disk: { mounts: flags.mounts ?? file.strings("disk.mounts") ?? ["/"] },
    disabledSignals,
    sampleTimeoutMs: seconds("sampleTimeout", "sampleTimeout", 5) * 1000,
  };
}

export function resolveAgentConfig(sources: ConfigSources): AgentConfig {
  const problems: string[] = [];
  const fileSettings = parseAgentFile(sources, problems);
  const file = new SettingsReader(AGENT_CONFIG_SCHEMA, fileSettings, sources.filePath, problems, ["number", "boolean"]);
  const credentialDir =
    typeof fileSettings["credentialDir"] === "string" ? fileSettings["credentialDir"] : DEFAULT_CREDENTIAL_DIR;
  const credential = sources.readCredential?.(credentialDir);
  const credentialFile = new SettingsReader(
    CREDENTIAL_FILE_SCHEMA,
    parseCredentialFile(credentialDir, credential, problems),
    `${credentialDir}/config.yaml`,
    problems,
    ["number", "boolean"],
  );
  const reading: AgentReading = { sources, file, credentialDir, credential, credentialFile, problems };
  const collector = resolveCollector(reading);
  const identity = resolveIdentity(reading);
  checkIdentity(reading, collector, identity);
  const sampling = resolveSampling(reading);
  const roots = resolveRoots(reading);
  const config: AgentConfig = {
    collector,
    vm: { namespace: identity.namespace, name: identity.name },
    token: identity.token ?? "",
    reportIntervalSeconds: sampling.reportIntervalSeconds,
    socketPath:
      sources.flags.socket ?? sources.env.WS_AGENT_SOCKET ?? file.text("socket") ?? "/run/ws-agent/agent.sock",
    roots,
    jupyter: sampling.jupyter,
    gpu: sampling.gpu,
    disk: sampling.disk,
    disabledSignals: sampling.disabledSignals,
    sampleTimeoutMs: sampling.sampleTimeoutMs,
  };
  if (problems.length > 0) throw new ConfigError(problems);
  return config;
}
