import { lstat, readFile, readlink } from "node:fs/promises";
import path from "node:path";
import type { CommandRunner } from "../grow/exec.js";
import { defaultRoots } from "../roots.js";
import {
  CLOUD_INIT_NETWORK_CONFIGS,
  CLOUD_INIT_SSH_CONFIGS,
  readCloudInitSettings,
  type CloudInitSettings,
} from "./cloud-init.js";
import { entryAt, listImageDir, resolveInRoot, walkImageDir, type ImageEntry } from "./rootfs.js";
import {
  REGENERATE_UNIT_LINK,
  REGENERATE_UNIT_NAME,
  REGENERATE_UNIT_PATH,
  isHostKeyFile,
  unitRegeneratesHostKeys,
} from "./ssh.js";
import { errorMessage } from "@ws/protocol";

/** Everything seal decides from, read from the tree at `root`. Gathered again to verify. */
export interface SealFacts {
  root: string;
  /** Sealing the running system ("/") rather than an offline tree. */
  live: boolean;
  cloudInit: {
    installed: boolean;
    /** `cloud-init clean --help`, read on the live system only (an offline image's cloud-init is not run). */
    cleanHelp: string | null;
    cleanHelpError: string | null;
    settings: CloudInitSettings;
    /** /etc/cloud/cloud-init.disabled: cloud-init will not run on the clone. */
    disabled: boolean;
    /** Everything in /var/lib/cloud but seed/. */
    state: ImageEntry[];
    logs: ImageEntry[];
    generatedNetwork: ImageEntry[];
    generatedSsh: ImageEntry[];
    /** /etc/cloud/clean.d hooks, which `cloud-init clean` runs. */
    cleanHooks: ImageEntry[];
  };
  machineId: { entry: ImageEntry | null; content: string | null };
  dbusMachineId: { entry: ImageEntry | null; linkTarget: string | null };
  netplan: NetplanFile[];
  sshHostKeys: ImageEntry[];
  keyRegeneration: {
    /** Other units that run ssh-keygen -A (or sshd-keygen), and whether something wants them. */
    units: Array<{ path: string; enabled: boolean }>;
    ourUnitText: string | null;
    ourUnitLinked: boolean;
  };
  agentState: ImageEntry[];
  agentConfig: ImageEntry | null;
  logs: { truncate: ImageEntry[]; remove: ImageEntry[] };
  journal: ImageEntry[];
  histories: ImageEntry[];
  tmp: ImageEntry[];
  randomSeeds: ImageEntry[];
  dhcpLeases: ImageEntry[];
}

export interface NetplanFile {
  path: string;
  text: string | null;
  mode: number;
  error: string | null;
}

export const AGENT_STATE_DIR = defaultRoots.state;
export const AGENT_CONFIG = "/etc/ws-agent/config.yaml";
const UNIT_DIRS = ["/etc/systemd/system", "/usr/lib/systemd/system", "/lib/systemd/system"];
const HISTORY_FILES = [
  ".bash_history",
  ".zsh_history",
  ".sh_history",
  ".history",
  ".python_history",
  ".node_repl_history",
  ".psql_history",
  ".mysql_history",
  ".sqlite_history",
  ".lesshst",
  ".viminfo",
  ".wget-hsts",
  ".local/share/fish/fish_history",
];
const RANDOM_SEEDS = [
  "/var/lib/systemd/random-seed",
  "/var/lib/systemd/credential.secret",
  "/var/lib/urandom/random-seed",
];
const DHCP_DIRS = ["/var/lib/dhcp", "/var/lib/dhclient", "/var/lib/NetworkManager"];
const ROTATED_LOG = /(\.\d+(\.(gz|xz|bz2|zst|lz4))?|\.(gz|xz|bz2|zst|lz4|old)|-\d{8}(\.(gz|xz|bz2|zst))?)$/;

async function readImageText(root: string, imagePath: string): Promise<string | null> {
  try {
    return await readFile(await resolveInRoot(root, imagePath, true), "utf8");
  } catch {
    return null;
  }
}

/** Expands a pattern whose last component may hold "*". */
async function globImage(root: string, pattern: string): Promise<ImageEntry[]> {
  const dir = path.posix.dirname(pattern);
  const base = path.posix.basename(pattern);
  if (!base.includes("*")) {
    const entry = await entryAt(root, pattern);
    return entry ? [entry] : [];
  }
  const regex = new RegExp(
    `^${base
      .split("*")
      .map((part) => part.replace(/[.+?^${}()|[\]\\]/g, "\\$&"))
      .join(".*")}$`,
  );
  return (await listImageDir(root, dir)).filter((entry) => regex.test(path.posix.basename(entry.path)));
}

async function cloudInitFacts(root: string, live: boolean, run: CommandRunner): Promise<SealFacts["cloudInit"]> {
  const installed = (await entryAt(root, "/usr/bin/cloud-init")) !== null;
  const configFiles: Array<{ path: string; text: string }> = [];
  for (const file of [
    "/etc/cloud/cloud.cfg",
    ...(await globImage(root, "/etc/cloud/cloud.cfg.d/*.cfg")).map((e) => e.path),
  ]) {
    const text = await readImageText(root, file);
    if (text !== null) configFiles.push({ path: file, text });
  }
  let cleanHelp: string | null = null;
  let cleanHelpError: string | null = null;
  if (live && installed) {
    const result = await run(["/usr/bin/cloud-init", "clean", "--help"]);
    if (result.exitCode === 0) cleanHelp = result.stdout;
    else
      cleanHelpError =
        `cloud-init clean --help: ${result.error ?? `exit status ${result.exitCode}`} ${result.stderr.trim()}`.trim();
  }
  const generatedNetwork: ImageEntry[] = [];
  for (const pattern of CLOUD_INIT_NETWORK_CONFIGS) generatedNetwork.push(...(await globImage(root, pattern)));
  const generatedSsh: ImageEntry[] = [];
  for (const pattern of CLOUD_INIT_SSH_CONFIGS) generatedSsh.push(...(await globImage(root, pattern)));
  return {
    installed,
    cleanHelp,
    cleanHelpError,
    settings: readCloudInitSettings(configFiles),
    disabled: (await entryAt(root, "/etc/cloud/cloud-init.disabled")) !== null,
    state: (await listImageDir(root, "/var/lib/cloud")).filter((entry) => entry.path !== "/var/lib/cloud/seed"),
    logs: await globImage(root, "/var/log/cloud-init*.log"),
    generatedNetwork,
    generatedSsh,
    cleanHooks: await listImageDir(root, "/etc/cloud/clean.d"),
  };
}

async function netplanFacts(root: string): Promise<NetplanFile[]> {
  const files: NetplanFile[] = [];
  for (const dir of ["/etc/netplan", "/lib/netplan", "/usr/lib/netplan"]) {
    for (const entry of await listImageDir(root, dir)) {
      if (!/\.ya?ml$/.test(entry.path) || (entry.kind !== "file" && entry.kind !== "symlink")) continue;
      try {
        const host = await resolveInRoot(root, entry.path, true);
        const stats = await lstat(host);
        files.push({ path: entry.path, text: await readFile(host, "utf8"), mode: stats.mode & 0o7777, error: null });
      } catch (error) {
        files.push({ path: entry.path, text: null, mode: 0o600, error: errorMessage(error) });
      }
    }
  }
  return files;
}

async function keyRegenerationFacts(root: string): Promise<SealFacts["keyRegeneration"]> {
  const seenHostPaths = new Set<string>();
  const wanted = new Set<string>();
  const units: Array<{ path: string; enabled: boolean }> = [];
  for (const dir of UNIT_DIRS) {
    const hostDir = await resolveInRoot(root, dir, true);
    if (seenHostPaths.has(hostDir)) continue; // /lib → usr/lib on merged-/usr systems
    seenHostPaths.add(hostDir);
    const entries = await listImageDir(root, dir);
    for (const entry of entries) {
      if (entry.kind === "directory" && /\.(wants|requires)$/.test(entry.path)) {
        for (const link of await listImageDir(root, entry.path)) wanted.add(path.posix.basename(link.path));
      }
    }
    for (const entry of entries) {
      const name = path.posix.basename(entry.path);
      if (!name.endsWith(".service") || name === REGENERATE_UNIT_NAME || entry.kind === "directory") continue;
      const text = await readImageText(root, entry.path);
      if (text !== null && unitRegeneratesHostKeys(text)) units.push({ path: entry.path, enabled: false });
    }
  }
  for (const unit of units) {
    const name = path.posix.basename(unit.path);
    const template = name.endsWith("@.service") ? name.slice(0, -".service".length) : null;
    unit.enabled = wanted.has(name) || (template !== null && [...wanted].some((w) => w.startsWith(template)));
  }
  const link = await entryAt(root, REGENERATE_UNIT_LINK);
  let ourUnitLinked = false;
  if (link?.kind === "symlink") {
    const target = await readlink(await resolveInRoot(root, REGENERATE_UNIT_LINK)).catch(() => "");
    ourUnitLinked = target === REGENERATE_UNIT_PATH;
  }
  return { units, ourUnitText: await readImageText(root, REGENERATE_UNIT_PATH), ourUnitLinked };
}

async function logFacts(root: string): Promise<{ logs: SealFacts["logs"]; journal: ImageEntry[] }> {
  const truncate: ImageEntry[] = [];
  const remove: ImageEntry[] = [];
  for (const entry of await walkImageDir(root, "/var/log")) {
    if (entry.kind !== "file") continue;
    if (entry.path.startsWith("/var/log/journal/")) continue;
    if (/^\/var\/log\/cloud-init[^/]*\.log$/.test(entry.path)) continue; // cloud-init's own step
    if (ROTATED_LOG.test(entry.path)) remove.push(entry);
    else if (entry.size > 0) truncate.push(entry);
  }
  return { logs: { truncate, remove }, journal: await listImageDir(root, "/var/log/journal") };
}

async function historyFacts(root: string): Promise<ImageEntry[]> {
  const homes = [
    "/root",
    ...(await listImageDir(root, "/home")).filter((e) => e.kind === "directory").map((e) => e.path),
  ];
  const found: ImageEntry[] = [];
  for (const home of homes) {
    for (const file of HISTORY_FILES) {
      const entry = await entryAt(root, path.posix.join(home, file));
      if (entry && entry.kind !== "directory") found.push(entry);
    }
  }
  return found;
}

export async function gatherSealFacts(root: string, run: CommandRunner): Promise<SealFacts> {
  const live = path.resolve(root) === "/";
  const machineIdEntry = await entryAt(root, "/etc/machine-id");
  const dbusEntry = await entryAt(root, "/var/lib/dbus/machine-id");
  const { logs, journal } = await logFacts(root);
  const dhcpLeases: ImageEntry[] = [];
  for (const dir of DHCP_DIRS) {
    dhcpLeases.push(
      ...(await listImageDir(root, dir)).filter(
        (e) => e.kind === "file" && /(\.leases?|^dhclient.*)$/.test(path.posix.basename(e.path)),
      ),
    );
  }
  const randomSeeds: ImageEntry[] = [];
  for (const seed of RANDOM_SEEDS) {
    const entry = await entryAt(root, seed);
    if (entry) randomSeeds.push(entry);
  }
  return {
    root,
    live,
    cloudInit: await cloudInitFacts(root, live, run),
    machineId: {
      entry: machineIdEntry,
      content: machineIdEntry?.kind === "file" ? await readImageText(root, "/etc/machine-id") : null,
    },
    dbusMachineId: {
      entry: dbusEntry,
      linkTarget:
        dbusEntry?.kind === "symlink"
          ? await readlink(await resolveInRoot(root, "/var/lib/dbus/machine-id")).catch(() => null)
          : null,
    },
    netplan: await netplanFacts(root),
    sshHostKeys: (await listImageDir(root, "/etc/ssh")).filter((e) => isHostKeyFile(path.posix.basename(e.path))),
    keyRegeneration: await keyRegenerationFacts(root),
    agentState: await listImageDir(root, AGENT_STATE_DIR),
    agentConfig: await entryAt(root, AGENT_CONFIG),
    logs,
    journal,
    histories: await historyFacts(root),
    tmp: [...(await listImageDir(root, "/tmp")), ...(await listImageDir(root, "/var/tmp"))],
    randomSeeds,
    dhcpLeases,
  };
}
