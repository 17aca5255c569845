/**
 * What the VM test image is made of, as data: the Debian release and packages, the files the
 * builder writes into the tree, the disk layout. Pure: the builder (image.ts) carries it out,
 * and the cache key is a hash of it, so any change here builds a new image.
 */
import { createHash } from "node:crypto";

/** Bump when the builder's steps change in a way the recipe data does not show. */
export const RECIPE_VERSION = 1;

export const SUITE = "bookworm";
export const VARIANT = "minbase";

/**
 * What a cloud workstation image needs for the scenarios: systemd with logind (utmp, idle
 * inhibitors) and polkit (so a normal user may take an idle inhibitor lock, as on a desktop),
 * OpenSSH, Debian's Node.js (18: the agent's floor), cloud-init with the growpart tools, a
 * kernel and initramfs for direct kernel boot, ifupdown/DHCP for cloud-init's network config.
 * python3-cffi-backend is named because debootstrap does not resolve the virtual
 * python3-cffi-backend-api-* packages python3-cryptography (cloud-init) depends on.
 */
export const GUEST_PACKAGES = [
  "systemd",
  "systemd-sysv",
  "udev",
  "dbus",
  "libpam-systemd",
  "polkitd",
  "openssh-server",
  "sudo",
  "nodejs",
  "cloud-init",
  "python3-cffi-backend",
  "cloud-guest-utils",
  "e2fsprogs",
  "xfsprogs",
  "fdisk",
  "linux-image-cloud-amd64",
  "initramfs-tools",
  "kmod",
  "ifupdown",
  "isc-dhcp-client",
  "iproute2",
] as const;

export const ROOT_LABEL = "ws-root";
export const DISK_SIZE_BYTES = 2 * 1024 ** 3;
/** GPT, one partition from 1 MiB to the end, like a cloud image: the one the agent grows. */
export const PARTITION_SCRIPT = "label: gpt\nstart=2048, type=linux, name=root\n";
export const KERNEL_COMMAND_LINE = `root=LABEL=${ROOT_LABEL} ro console=ttyS0 panic=-1`;

/** Files written into the tree after the packages, path → contents. */
export const GUEST_FILES: Readonly<Record<string, string>> = {
  "/etc/fstab": `LABEL=${ROOT_LABEL} / ext4 defaults 0 1\n`,
  // cloud-init sets the real name per VM; debootstrap copied the build host's.
  "/etc/hostname": "localhost\n",
  "/etc/hosts": "127.0.0.1 localhost\n::1 localhost ip6-localhost ip6-loopback\n",
  // Only the NoCloud seed a platform attaches: no minutes lost probing cloud metadata services.
  "/etc/cloud/cloud.cfg.d/90-ws-vm-test.cfg": "datasource_list: [ NoCloud, None ]\n",
  // Empty: systemd makes a new one at first boot, as in a cloud image.
  "/etc/machine-id": "",
};

/** Removed from the tree: per-machine identity a cloud image must not carry. */
export const GUEST_REMOVED = ["/var/lib/dbus/machine-id", "/etc/ssh/ssh_host_*"];

/** Created in the tree: a persistent journal, so a boot can read the previous boot's shutdown. */
export const GUEST_DIRECTORIES = ["/var/log/journal"];

/**
 * Timers and services that would wake in the middle of a test and spend the emulated CPU on
 * nothing the scenarios look at.
 */
export const GUEST_DISABLED_UNITS = [
  "apt-daily.timer",
  "apt-daily-upgrade.timer",
  "e2scrub_all.timer",
  "e2scrub_reap.service",
  "dpkg-db-backup.timer",
];

export interface RootfsRecipe {
  suite: string;
  variant: string;
  mirror: string;
  packages: readonly string[];
}

export interface ImageRecipe {
  rootfsKey: string;
  debSha256: string;
  files: Readonly<Record<string, string>>;
  removed: readonly string[];
  directories: readonly string[];
  disabledUnits: readonly string[];
  diskSizeBytes: number;
  partitionScript: string;
  rootLabel: string;
}

export function rootfsRecipe(mirror: string): RootfsRecipe {
  return { suite: SUITE, variant: VARIANT, mirror, packages: [...GUEST_PACKAGES] };
}

export function imageRecipe(rootfsKey: string, debSha256: string): ImageRecipe {
  return {
    rootfsKey,
    debSha256,
    files: GUEST_FILES,
    removed: GUEST_REMOVED,
    directories: GUEST_DIRECTORIES,
    disabledUnits: GUEST_DISABLED_UNITS,
    diskSizeBytes: DISK_SIZE_BYTES,
    partitionScript: PARTITION_SCRIPT,
    rootLabel: ROOT_LABEL,
  };
}

/** A short stable name for a recipe: the cache directory's suffix. */
export function recipeKey(recipe: RootfsRecipe | ImageRecipe): string {
  return createHash("sha256")
    .update(JSON.stringify({ version: RECIPE_VERSION, recipe }))
    .digest("hex")
    .slice(0, 16);
}

export function debootstrapArgs(recipe: RootfsRecipe, target: string): string[] {
  return [`--variant=${recipe.variant}`, `--include=${recipe.packages.join(",")}`, recipe.suite, target, recipe.mirror];
}

export interface AptSource {
  uris: string[];
  suites: string[];
  components: string[];
}

/**
 * apt's sources, both formats: deb822 stanzas (*.sources) and one-line entries (*.list).
 * Only `deb` entries (not deb-src) and only enabled ones.
 */
export function parseAptSources(text: string, format: "deb822" | "one-line"): AptSource[] {
  return format === "deb822" ? parseDeb822(text) : parseOneLine(text);
}

function parseDeb822(text: string): AptSource[] {
  const sources: AptSource[] = [];
  for (const stanza of text.split(/\n\s*\n/)) {
    const fields = new Map<string, string>();
    let last: string | undefined;
    for (const line of stanza.split("\n")) {
      if (line.startsWith("#") || line.trim() === "") continue;
      if (/^\s/.test(line) && last) {
        fields.set(last, `${fields.get(last)} ${line.trim()}`);
        continue;
      }
      const match = /^([\w-]+):\s*(.*)$/.exec(line);
      if (!match) continue;
      last = match[1]!.toLowerCase();
      fields.set(last, match[2]!.trim());
    }
    const words = (key: string) => (fields.get(key) ?? "").split(/\s+/).filter(Boolean);
    if (!words("types").includes("deb")) continue;
    if (/^(no|false)$/i.test(fields.get("enabled") ?? "yes")) continue;
    sources.push({ uris: words("uris"), suites: words("suites"), components: words("components") });
  }
  return sources;
}

function parseOneLine(text: string): AptSource[] {
  const sources: AptSource[] = [];
  for (const raw of text.split("\n")) {
    const line = raw.replace(/#.*$/, "").trim();
    // "deb [options] uri suite component..."
    const match = /^deb\s+(?:\[[^\]]*\]\s+)?(\S+)\s+(\S+)\s*(.*)$/.exec(line);
    if (!match) continue;
    sources.push({ uris: [match[1]!], suites: [match[2]!], components: match[3]!.split(/\s+/).filter(Boolean) });
  }
  return sources;
}

/** The mirror apt uses for `suite` main (the release itself, not its security or updates suites). */
export function debianMirror(sources: AptSource[], suite: string): string | undefined {
  for (const source of sources) {
    if (!source.suites.includes(suite) || !source.components.includes("main")) continue;
    const uri = source.uris.find((u) => /^https?:\/\//.test(u));
    if (uri) return uri;
  }
  return undefined;
}

/** Mount points at or below `dir` (deepest first), from /proc/self/mountinfo. */
export function mountsUnder(mountinfo: string, dir: string): string[] {
  const prefix = dir.endsWith("/") ? dir : `${dir}/`;
  const points = mountinfo
    .split("\n")
    .map((line) => line.split(" ")[4])
    .filter((point): point is string => point !== undefined)
    .map((point) => point.replace(/\\(\d{3})/g, (_, octal: string) => String.fromCharCode(parseInt(octal, 8))))
    .filter((point) => point === dir || point.startsWith(prefix));
  return [...new Set(points)].sort((a, b) => b.length - a.length);
}

export interface PartitionTable {
  partitions: Array<{ start: number; size: number }>;
  sectorSize: number;
}

/** `sfdisk --json` output → the partitions' start and size in sectors. */
export function parseSfdiskJson(text: string): PartitionTable {
  const parsed = JSON.parse(text) as {
    partitiontable?: { sectorsize?: number; partitions?: Array<{ start?: number; size?: number }> };
  };
  const table = parsed.partitiontable;
  if (!table?.partitions) throw new Error(`sfdisk --json: no partition table in ${JSON.stringify(text.slice(0, 200))}`);
  return {
    sectorSize: table.sectorsize ?? 512,
    partitions: table.partitions.map((p) => {
      if (typeof p.start !== "number" || typeof p.size !== "number")
        throw new Error(`sfdisk --json: partition without start/size: ${JSON.stringify(p)}`);
      return { start: p.start, size: p.size };
    }),
  };
}
