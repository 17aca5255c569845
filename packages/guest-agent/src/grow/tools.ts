import { access, constants } from "node:fs/promises";
import path from "node:path";

/** The programs grow may run, with the Debian package each comes from (named in refusals). */
export const GROW_TOOLS = {
  growpart: "cloud-guest-utils",
  sfdisk: "fdisk",
  partx: "util-linux",
  resize2fs: "e2fsprogs",
  dumpe2fs: "e2fsprogs",
  xfs_growfs: "xfsprogs",
  xfs_info: "xfsprogs",
  btrfs: "btrfs-progs",
  lvs: "lvm2",
  pvs: "lvm2",
  vgs: "lvm2",
  pvresize: "lvm2",
  lvextend: "lvm2",
} as const;

export type GrowTool = keyof typeof GROW_TOOLS;

/** Absolute path of each tool, or null where it is not installed. */
export type ToolPaths = Record<GrowTool, string | null>;

/** systemd units and cron have sbin on PATH, interactive non-root shells may not: search both. */
const SYSTEM_DIRS = ["/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"];

export async function findTools(searchPath: string | undefined): Promise<ToolPaths> {
  const dirs = [...new Set([...(searchPath ?? "").split(":").filter((d) => d.startsWith("/")), ...SYSTEM_DIRS])];
  const found = {} as ToolPaths;
  for (const tool of Object.keys(GROW_TOOLS) as GrowTool[]) {
    found[tool] = null;
    for (const dir of dirs) {
      const candidate = path.join(dir, tool);
      try {
        await access(candidate, constants.X_OK);
        found[tool] = candidate;
        break;
      } catch {
        // not in this directory
      }
    }
  }
  return found;
}

export function missingToolMessage(tool: GrowTool): string {
  return `${tool} is not installed (Debian package ${GROW_TOOLS[tool]})`;
}
