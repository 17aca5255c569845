/**
 * Disk: size, used and available bytes of "/" and the configured mounts, for
 * the 70/85/95 % alerts. Not an activity. One statfs per mount; the device and
 * filesystem type come from the agent's own /proc/self/mounts.
 */
import { readFile, statfs } from "node:fs/promises";
import path from "node:path";
import type { MessageInitShape } from "@bufbuild/protobuf";
import type { DiskSignalSchema } from "@ws/protocol";
import { under } from "../roots.js";
import { mountHolding, parseMounts, type MountEntry } from "./proc-mounts.js";
import { absent, errorMessage, ok, type Signal, type SignalContext, type SignalOutcome } from "./types.js";
import { type MountInit, mountUsage } from "./disk-parse.js";

export type DiskSignalValue = MessageInitShape<typeof DiskSignalSchema>;

export interface DiskSignalOptions {
  /** Absolute paths; each is reported for the filesystem that holds it. */
  mounts: string[];
}

export const DEFAULT_DISK_MOUNTS = ["/"];

export function createDiskSignal(
  options: DiskSignalOptions = { mounts: DEFAULT_DISK_MOUNTS },
): Signal<DiskSignalValue> {
  const notAbsolute = options.mounts.filter((mount) => !path.isAbsolute(mount));
  if (notAbsolute.length > 0) throw new Error(`disk mounts must be absolute paths: ${notAbsolute.join(", ")}`);
  return {
    name: "disk",
    async collect(ctx: SignalContext): Promise<SignalOutcome<DiskSignalValue>> {
      if (options.mounts.length === 0) return absent("no mounts configured");
      const problems: string[] = [];
      const mountsFile = under(ctx.roots.proc, "self", "mounts");
      let entries: MountEntry[] = [];
      try {
        entries = parseMounts(await readFile(mountsFile, "utf8"));
      } catch (error) {
        problems.push(`${mountsFile}: ${errorMessage(error)}`);
      }
      const mounts: MountInit[] = [];
      for (const mountPoint of options.mounts) {
        try {
          mounts.push(
            mountUsage(mountPoint, mountHolding(entries, mountPoint), await statfs(mountPoint, { bigint: true })),
          );
        } catch (error) {
          problems.push(`${mountPoint}: ${errorMessage(error)}`);
        }
      }
      if (problems.length === 0) return ok({ mounts });
      return { state: "failed", message: problems.join("; "), value: { mounts } };
    },
  };
}
