import { parse as parseYaml } from "yaml";
import { errorMessage } from "@ws/protocol";

/** What the installed `cloud-init clean` accepts, read from its --help (versions differ). */
export interface CleanFlags {
  logs: boolean;
  machineId: boolean;
  seed: boolean;
  /** Choices of --configs (all, network, ssh_config), or null where the version has no --configs. */
  configs: string[] | null;
}

/** Parses `cloud-init clean --help` (argparse output). Pure. */
export function parseCleanHelp(text: string): CleanFlags {
  const has = (flag: string) => new RegExp(`(^|[\\s\\[,])${flag}(?=[\\s,\\]]|$)`, "m").test(text);
  let configs: string[] | null = null;
  if (/--configs\b/.test(text)) {
    const choices = /--configs\s+\{([^}]*)\}/.exec(text);
    configs = choices
      ? choices[1]!
          .split(",")
          .map((choice) => choice.trim())
          .filter(Boolean)
      : [];
  }
  return { logs: has("--logs"), machineId: has("--machine-id"), seed: has("--seed"), configs };
}

/**
 * The arguments for the clean the seed guide asks for (`--logs --machine-id --configs all`),
 * restricted to what this cloud-init accepts. `keepNetworkConfig` holds back the network part
 * where cloud-init will not write a new one on first boot.
 */
export function cleanArguments(flags: CleanFlags, keepNetworkConfig: boolean): string[] {
  const args = ["clean"];
  if (flags.logs) args.push("--logs");
  if (flags.machineId) args.push("--machine-id");
  if (flags.configs) {
    if (!keepNetworkConfig && flags.configs.includes("all")) args.push("--configs", "all");
    else if (flags.configs.includes("ssh_config")) args.push("--configs", "ssh_config");
  }
  return args;
}

/** Files cloud-init writes from instance data, which `clean --configs` removes (cloud-init 23.4+). */
export const CLOUD_INIT_NETWORK_CONFIGS = [
  "/etc/netplan/50-cloud-init.yaml",
  "/etc/NetworkManager/conf.d/99-cloud-init.conf",
  "/etc/NetworkManager/conf.d/30-cloud-init-ip6-addr-gen-mode.conf",
  "/etc/NetworkManager/system-connections/cloud-init-*.nmconnection",
  "/etc/systemd/network/10-cloud-init-*.network",
  "/etc/network/interfaces.d/50-cloud-init.cfg",
];
export const CLOUD_INIT_SSH_CONFIGS = ["/etc/ssh/sshd_config.d/50-cloud-init.conf"];

/** What cloud-init's configuration (cloud.cfg then cloud.cfg.d/*.cfg, later wins) says about a clone's first boot. */
export interface CloudInitSettings {
  /** network: {config: disabled}: cloud-init will not write network config, so the image's own must stay. */
  networkConfigDisabled: boolean;
  /** The ssh module runs and deletes/regenerates host keys for a new instance. */
  regeneratesHostKeys: boolean;
  /** Files that could not be parsed, with the reason. */
  problems: string[];
}

export function readCloudInitSettings(files: Array<{ path: string; text: string }>): CloudInitSettings {
  let network: unknown;
  let deleteKeys: unknown = true;
  let keyTypes: unknown;
  let modules: unknown;
  const problems: string[] = [];
  for (const file of files) {
    let document: unknown;
    try {
      document = parseYaml(file.text);
    } catch (error) {
      problems.push(`${file.path}: ${errorMessage(error).split("\n")[0]}`);
      continue;
    }
    if (!document || typeof document !== "object") continue;
    const config = document as Record<string, unknown>;
    if ("network" in config) network = config.network;
    if ("ssh_deletekeys" in config) deleteKeys = config.ssh_deletekeys;
    if ("ssh_genkeytypes" in config) keyTypes = config.ssh_genkeytypes;
    if ("cloud_init_modules" in config) modules = config.cloud_init_modules;
  }
  const networkConfigDisabled =
    !!network &&
    typeof network === "object" &&
    String((network as Record<string, unknown>).config ?? "") === "disabled";
  const moduleNames = Array.isArray(modules) ? modules.map((m) => (Array.isArray(m) ? String(m[0]) : String(m))) : [];
  const sshModule = moduleNames.some((name) => name === "ssh" || name === "cc_ssh");
  const typesOk = keyTypes === undefined || (Array.isArray(keyTypes) && keyTypes.length > 0);
  return { networkConfigDisabled, regeneratesHostKeys: sshModule && deleteKeys !== false && typesOk, problems };
}
