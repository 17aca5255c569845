/**
 * logind inhibitor locks, as `systemd-inhibit --what=idle …` takes them. logind keeps one state
 * file per lock under /run/systemd/inhibit/ (plus a FIFO "<id>.ref" that the holder keeps
 * open) and deletes both when the holder closes its end. The agent reads those files instead
 * of asking logind over D-Bus: no bus client, no process spawned.
 *
 * The file format (logind-inhibit.c, inhibitor_save): KEY=VALUE lines WHAT, MODE, UID, PID,
 * (PIDFDID in newer systemd), WHO, WHY, FIFO. WHO and WHY are C-escaped (cescape: \t, \",
 * \\, bytes ≥ 0x7f as \ooo); in newer systemd a value with spaces or shell specials is also
 * double-quoted with shell escaping on top. logind writes "Do not parse." in the header;
 * it is the only way to see locks without a bus, and its keys have not changed since 2012.
 */
import { readdir } from "node:fs/promises";
import type { MessageInitShape } from "@bufbuild/protobuf";
import type { InhibitorSignalSchema } from "@ws/protocol";
import { isMissingUserPath, readUserFile, UserPathError } from "../fs/user-file.js";
import { under } from "../roots.js";
import { exists, isMissing, processExists } from "../fs/exists.js";
import { errorMessage, type Signal, type SignalContext, type SignalOutcome } from "./types.js";
import { parseInhibitorFile, type LockFile, reportedLocks } from "./inhibitors-parse.js";

export type InhibitorSignalValue = MessageInitShape<typeof InhibitorSignalSchema>; // (uid_t) -1 means "no uid"
const MAX_FILE_BYTES = 64 * 1024;

export function createInhibitorsSignal(): Signal<InhibitorSignalValue> {
  return {
    name: "inhibitors",
    async collect(ctx: SignalContext): Promise<SignalOutcome<InhibitorSignalValue>> {
      const dir = under(ctx.roots.run, "systemd", "inhibit");
      let names: string[];
      try {
        const entries = await readdir(dir, { withFileTypes: true });
        // "<id>.ref" are the holders' FIFOs; dot files are logind's temporaries before rename.
        names = entries
          .filter((entry) => entry.isFile() && !entry.name.endsWith(".ref") && !entry.name.startsWith("."))
          .map((entry) => entry.name)
          .sort(byInhibitorId);
      } catch (error) {
        if (!isMissing(error)) return { state: "failed", message: `${dir}: ${errorMessage(error)}` };
        // logind makes the directory with the first lock, but seat0's state file at startup.
        if (await exists(under(ctx.roots.run, "systemd", "seats"))) return { state: "ok", value: { locks: [] } };
        return { state: "absent", message: `${dir} absent and no logind state beside it: logind is not running here` };
      }

      const notes: string[] = [];
      const files: LockFile[] = [];
      for (const name of names) {
        const file = under(dir, name);
        try {
          // logind's files, root's alone; read the safe way anyway (the .ref FIFOs sit beside them).
          const read = await readUserFile({
            trusted: ctx.roots.run,
            segments: ["systemd", "inhibit", name],
            maxBytes: MAX_FILE_BYTES,
            owners: "root",
            signal: ctx.signal,
          });
          const lock = parseInhibitorFile(read.data.toString("utf8"));
          if (lock.problems.length > 0) notes.push(`${file}: ${lock.problems.join(", ")}`);
          const holderAlive = lock.pid === undefined ? undefined : await processExists(ctx.roots.proc, lock.pid);
          files.push({ id: name, lock, holderAlive });
        } catch (error) {
          // Released between readdir() and here: logind deleted it, not a problem.
          if (!isMissing(error) && !isMissingUserPath(error))
            notes.push(error instanceof UserPathError ? error.message : `${file}: ${errorMessage(error)}`);
        }
      }

      const { locks, stale } = reportedLocks(files);
      if (stale.length > 0) notes.push(`ignored stale idle lock(s) ${stale.join(", ")}: holder process gone`);
      const value = { locks };
      const message = notes.length > 0 ? notes.join("; ") : undefined;
      if (files.length === 0 && message !== undefined) return { state: "failed", message, value };
      return message === undefined ? { state: "ok", value } : { state: "ok", value, message };
    },
  };
}

function byInhibitorId(a: string, b: string): number {
  const numeric = /^\d+$/;
  if (numeric.test(a) && numeric.test(b)) return Number(a) - Number(b);
  return a.localeCompare(b);
}
