/**
 * Terminal sessions: logins from utmp (ssh, console) and the users' own pseudo-terminals that
 * utmp does not list (tmux/screen panes, IDE and Jupyter terminals).
 *
 * Activity comes from the kernel's tty timestamps: a read from the tty (the shell taking a
 * keystroke) sets its atime, a write to it sets its mtime. The kernel moves them only when
 * the second crosses into a new 8-second-aligned slot (tty_update_time), so both ages may
 * overstate by up to 8 s. docs/signals/sessions.md has what was measured.
 */
import { lstat, readFile, readdir } from "node:fs/promises";
import type { MessageInitShape } from "@bufbuild/protobuf";
import type { SessionSignalSchema } from "@ws/protocol";
import { under } from "../roots.js";
import { isMissing, processExists } from "../fs/exists.js";
import { errorMessage, type Signal, type SignalContext, type SignalOutcome } from "./types.js";
import { parseUtmp, utmpTrailingBytes, type UtmpRecord } from "./utmp.js";
import { type TtyStat, buildSessions, userLogins, isSafeTtyName } from "./sessions-parse.js";

export type SessionSignalValue = MessageInitShape<typeof SessionSignalSchema>;

export function createSessionsSignal(): Signal<SessionSignalValue> {
  return {
    name: "sessions",
    async collect(ctx: SignalContext): Promise<SignalOutcome<SessionSignalValue>> {
      const notes: string[] = [];
      const logins = await readLogins(ctx, notes);
      const pts = await readPtsNames(ctx, notes);

      const ttys = new Map<string, TtyStat>();
      // Display logins (":0") have no device node; a hostile line ("../x") must not leave /dev.
      const loginTtys = (logins ?? []).map((login) => login.line).filter(isSafeTtyName);
      for (const name of new Set([...loginTtys, ...(pts ?? [])])) {
        try {
          // lstat: /dev is root's, but a utmp line names any path under it; a link there is not a tty.
          const info = await lstat(under(ctx.roots.dev, name));
          if (info.isSymbolicLink()) continue;
          ttys.set(name, { uid: info.uid, atimeMs: info.atimeMs, mtimeMs: info.mtimeMs });
        } catch (error) {
          // A session that ended between reading utmp and stat(): nothing to time.
          if (!isMissing(error)) notes.push(`${under(ctx.roots.dev, name)}: ${errorMessage(error)}`);
        }
      }

      const value = { sessions: buildSessions({ logins, ttys, ptsNames: pts ?? [] }, ctx.users, ctx.clock.nowMs()) };
      const message = notes.length > 0 ? notes.join("; ") : undefined;
      if (logins === undefined && pts === undefined) {
        return { state: "failed", message: message ?? "neither utmp nor /dev/pts could be read", value };
      }
      return message === undefined ? { state: "ok", value } : { state: "ok", value, message };
    },
  };
}

/** Live logins from utmp; undefined (with a note) when utmp is missing or unreadable. */
async function readLogins(ctx: SignalContext, notes: string[]): Promise<UtmpRecord[] | undefined> {
  const file = under(ctx.roots.run, "utmp");
  let buffer: Buffer;
  try {
    buffer = await readFile(file);
  } catch (error) {
    notes.push(
      isMissing(error)
        ? `utmp absent (${file}): only pseudo-terminals are reported`
        : `utmp unreadable (${file}): ${errorMessage(error)}`,
    );
    return undefined;
  }
  const trailing = utmpTrailingBytes(buffer);
  if (trailing > 0) notes.push(`${file}: ignored a truncated trailing record (${trailing} bytes)`);

  const logins: UtmpRecord[] = [];
  let stale = 0;
  for (const login of userLogins(parseUtmp(buffer))) {
    // A crashed login service leaves its record behind; its pts number may since belong to
    // someone else's terminal.
    if (await processExists(ctx.roots.proc, login.pid)) logins.push(login);
    else stale++;
  }
  if (stale > 0) notes.push(`${file}: ignored ${stale} stale record(s) whose process is gone`);
  return logins;
}

/** "pts/N" for every numbered entry of /dev/pts (ptmx is the multiplexer, not a terminal). */
async function readPtsNames(ctx: SignalContext, notes: string[]): Promise<string[] | undefined> {
  const dir = under(ctx.roots.dev, "pts");
  try {
    return (await readdir(dir)).filter((name) => /^\d+$/.test(name)).map((name) => `pts/${name}`);
  } catch (error) {
    notes.push(`${dir}: ${errorMessage(error)}`);
    return undefined;
  }
}
