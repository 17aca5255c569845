// Agent configuration: /etc/ws-agent/config.yaml (what cloud-init writes),
// overridden by environment, overridden by flags. Resolution is pure.
import { parse as parseYaml } from "yaml";
import {
  ConfigError,
  DurationError,
  errorMessage,
  isJsonObject,
  type JsonObject,
  parseDuration,
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

/** Keys the file may hold; anything else is reported, since a typo would silently do nothing. */
const FILE_KEYS = [
  "collector",
  "vm",
  "token",
  "tokenFile",
  "credentialDir",
  "reportInterval",
  "socket",
  "stateDir",
  "roots",
  "jupyter",
  "gpu",
  "disk",
  "disabledSignals",
  "sampleTimeout",
] as const;

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

export function resolveAgentConfig(sources: ConfigSources): AgentConfig {
  const problems: string[] = [];
  const where = sources.filePath;
  let file: JsonObject = {};
  if (sources.fileText !== undefined && sources.fileText.trim() !== "") {
    try {
      const parsed: unknown = parseYaml(sources.fileText);
      if (parsed === null || parsed === undefined) file = {};
      else if (!isJsonObject(parsed)) problems.push(`${where}: expected a mapping of settings at the top level`);
      else file = parsed;
    } catch (error) {
      throw new ConfigError([`${where}: not valid YAML: ${errorMessage(error).split("\n")[0]}`]);
    }
  }
  for (const key of Object.keys(file)) {
    if (!(FILE_KEYS as readonly string[]).includes(key)) {
      problems.push(`${where}: unknown setting "${key}" (known: ${FILE_KEYS.join(", ")})`);
    }
  }

  const credentialDir = typeof file["credentialDir"] === "string" ? file["credentialDir"] : DEFAULT_CREDENTIAL_DIR;
  const credential = sources.readCredential?.(credentialDir);
  let credentialFile: JsonObject = {};
  if (credential?.configText !== undefined) {
    try {
      const parsed: unknown = parseYaml(credential.configText);
      if (isJsonObject(parsed)) credentialFile = parsed;
      else problems.push(`${credentialDir}/config.yaml: expected a mapping`);
    } catch (error) {
      problems.push(`${credentialDir}/config.yaml: not valid YAML: ${errorMessage(error).split("\n")[0]}`);
    }
  }
  const credentialSection = (key: string): JsonObject => {
    const v = credentialFile[key];
    return isJsonObject(v) ? v : {};
  };

  const str = (obj: JsonObject, key: string, label: string): string | undefined => {
    const v = obj[key];
    if (v === undefined || v === null) return undefined;
    if (typeof v === "string") return v;
    if (typeof v === "number" || typeof v === "boolean") return String(v);
    problems.push(`${label}: expected a string`);
    return undefined;
  };
  const section = (key: string): JsonObject => {
    const v = file[key];
    if (v === undefined || v === null) return {};
    if (isJsonObject(v)) return v;
    problems.push(`${where}: "${key}" must be a mapping`);
    return {};
  };
  const list = (v: unknown, label: string): string[] | undefined => {
    if (v === undefined || v === null) return undefined;
    if (Array.isArray(v) && v.every((x) => typeof x === "string")) return v as string[];
    problems.push(`${label}: expected a list of strings`);
    return undefined;
  };
  const duration = (text: string | undefined, label: string, fallbackSeconds: number, min = 1): number => {
    if (text === undefined) return fallbackSeconds;
    try {
      const seconds = parseDuration(text, { allowBareSeconds: true });
      if (seconds < min) {
        problems.push(`${label}: ${text} is too short (at least ${min}s)`);
        return fallbackSeconds;
      }
      return seconds;
    } catch (error) {
      problems.push(`${label}: ${error instanceof DurationError ? error.message : String(error)}`);
      return fallbackSeconds;
    }
  };
  const bool = (text: string | undefined, label: string): boolean | undefined => {
    if (text === undefined) return undefined;
    if (/^(1|true|yes|on)$/i.test(text)) return true;
    if (/^(0|false|no|off)$/i.test(text)) return false;
    problems.push(`${label}: expected true or false, got "${text}"`);
    return undefined;
  };

  const env = sources.env;
  const flags = sources.flags;
  const collectorFile = section("collector");
  const vmFile = section("vm");
  const rootsFile = section("roots");
  const jupyterFile = section("jupyter");
  const gpuFile = section("gpu");
  const diskFile = section("disk");

  const configured = collectorAddresses(flags.collector ?? env.WS_AGENT_COLLECTOR, collectorFile, where, problems);
  const addresses =
    configured.length > 0
      ? configured
      : collectorAddresses(undefined, credentialSection("collector"), `${credentialDir}/config.yaml`, problems);
  const address = addresses[0] ?? "";
  const insecure =
    flags.insecure ??
    bool(env.WS_AGENT_INSECURE, "WS_AGENT_INSECURE") ??
    bool(str(collectorFile, "insecure", `${where}: collector.insecure`), `${where}: collector.insecure`) ??
    false;
  const caFile = flags.caFile ?? str(collectorFile, "caFile", `${where}: collector.caFile`) ?? credential?.caFile;
  const serverName =
    str(collectorFile, "serverName", `${where}: collector.serverName`) ??
    str(credentialSection("collector"), "serverName", `${credentialDir}/config.yaml: collector.serverName`);

  const credentialVm = credentialSection("vm");
  const namespace =
    flags.namespace ??
    env.WS_AGENT_VM_NAMESPACE ??
    str(vmFile, "namespace", `${where}: vm.namespace`) ??
    str(credentialVm, "namespace", `${credentialDir}/config.yaml: vm.namespace`) ??
    "";
  const name =
    flags.name ??
    env.WS_AGENT_VM_NAME ??
    str(vmFile, "name", `${where}: vm.name`) ??
    str(credentialVm, "name", `${credentialDir}/config.yaml: vm.name`) ??
    "";
  let token = flags.token ?? env.WS_AGENT_TOKEN ?? str(file, "token", `${where}: token`);
  const tokenFile = str(file, "tokenFile", `${where}: tokenFile`);
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

  if (sources.requireCollector) {
    if (address === "")
      problems.push(`no collector address: set collector.address in ${where}, WS_AGENT_COLLECTOR or --collector`);
    if (namespace === "" || name === "")
      problems.push(
        `no VM identity: set vm.namespace and vm.name in ${where} (cloud-init writes them), or --namespace/--name`,
      );
    if (!token)
      problems.push(
        `no token: set token or tokenFile in ${where}, WS_AGENT_TOKEN or --token (ws-collector token prints it)`,
      );
  }
  for (const [label, value] of [
    ["VM namespace", namespace],
    ["VM name", name],
  ] as const) {
    if (value !== "" && !/^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/.test(value)) {
      problems.push(`${label} "${value}" is not a valid Kubernetes name (lowercase letters, digits, '-' and '.')`);
    }
  }

  const reportIntervalSeconds = duration(
    flags.reportInterval ?? env.WS_AGENT_REPORT_INTERVAL ?? str(file, "reportInterval", `${where}: reportInterval`),
    "report interval",
    15,
  );
  if (reportIntervalSeconds > 3_600)
    problems.push(
      `report interval ${reportIntervalSeconds}s is over an hour; the collector would think the agent lost`,
    );

  const stateDir =
    flags.stateDir ?? env.WS_AGENT_STATE_DIR ?? str(file, "stateDir", `${where}: stateDir`) ?? defaultRoots.state;
  const roots: Roots = {
    proc: flags.procRoot ?? str(rootsFile, "proc", `${where}: roots.proc`) ?? defaultRoots.proc,
    sys: flags.sysRoot ?? str(rootsFile, "sys", `${where}: roots.sys`) ?? defaultRoots.sys,
    dev: flags.devRoot ?? str(rootsFile, "dev", `${where}: roots.dev`) ?? defaultRoots.dev,
    run: flags.runRoot ?? str(rootsFile, "run", `${where}: roots.run`) ?? defaultRoots.run,
    home: flags.homeRoot ?? str(rootsFile, "home", `${where}: roots.home`) ?? defaultRoots.home,
    etc: flags.etcRoot ?? str(rootsFile, "etc", `${where}: roots.etc`) ?? defaultRoots.etc,
    state: stateDir,
  };
  const disabledSignals = list(file.disabledSignals, `${where}: disabledSignals`) ?? [];
  for (const signal of disabledSignals) {
    if (!SIGNAL_NAMES.includes(signal))
      problems.push(`${where}: disabledSignals: unknown signal "${signal}" (known: ${SIGNAL_NAMES.join(", ")})`);
  }

  const config: AgentConfig = {
    collector: { address, addresses, insecure, ...(caFile ? { caFile } : {}), ...(serverName ? { serverName } : {}) },
    vm: { namespace, name },
    token: token ?? "",
    reportIntervalSeconds,
    socketPath:
      flags.socket ?? env.WS_AGENT_SOCKET ?? str(file, "socket", `${where}: socket`) ?? "/run/ws-agent/agent.sock",
    roots,
    jupyter: {
      urls: flags.jupyterUrls ?? list(jupyterFile.urls, `${where}: jupyter.urls`) ?? [],
      timeoutMs: duration(str(jupyterFile, "timeout", `${where}: jupyter.timeout`), "jupyter.timeout", 3) * 1000,
    },
    gpu: {
      command: flags.gpuCommand ?? str(gpuFile, "command", `${where}: gpu.command`) ?? "nvidia-smi",
      intervalMs: duration(str(gpuFile, "interval", `${where}: gpu.interval`), "gpu.interval", 30) * 1000,
      timeoutMs: duration(str(gpuFile, "timeout", `${where}: gpu.timeout`), "gpu.timeout", 10) * 1000,
    },
    disk: { mounts: flags.mounts ?? list(diskFile.mounts, `${where}: disk.mounts`) ?? ["/"] },
    disabledSignals,
    sampleTimeoutMs: duration(str(file, "sampleTimeout", `${where}: sampleTimeout`), "sampleTimeout", 5) * 1000,
  };
  if (problems.length > 0) throw new ConfigError(problems);
  return config;
}
