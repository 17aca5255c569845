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
import { SessionKind, type SessionSignalSchema, type TerminalSessionSchema } from "@ws/protocol";
import { under } from "../roots.js";
import { isMissing, processExists } from "../fs/exists.js";
import type { Users } from "../users.js";
import { errorMessage, type Signal, type SignalContext, type SignalOutcome } from "./types.js";
import { parseUtmp, utmpTrailingBytes, UtmpType, type UtmpRecord } from "./utmp.js";

export type SessionSignalValue = MessageInitShape<typeof SessionSignalSchema>;
type TerminalSessionInit = MessageInitShape<typeof TerminalSessionSchema>;

/** What stat() says about a tty device node. */
export interface TtyStat {
  uid: number;
  atimeMs: number;
  mtimeMs: number;
}

export interface SessionSources {
  /** Live USER_PROCESS records from utmp; undefined when utmp could not be read. */
  logins: UtmpRecord[] | undefined;
  /** tty name relative to /dev ("pts/3", "tty1") → its device node's stat. */
  ttys: ReadonlyMap<string, TtyStat>;
  /** Names of the /dev/pts entries ("pts/0", …), whether or not they are in utmp. */
  ptsNames: readonly string[];
}

/** Builds the report's sessions from what was read. Pure. */
export function buildSessions(sources: SessionSources, users: Users, nowMs: number): TerminalSessionInit[] {
  const sessions: TerminalSessionInit[] = [];
  const loginTtys = new Set<string>();
  for (const login of sources.logins ?? []) {
    loginTtys.add(login.line);
    const tty = sources.ttys.get(login.line);
    sessions.push({
      kind: SessionKind.UTMP,
      user: login.user,
      // Names from a directory service may be missing in passwd; sshd chowns the pts to the user.
      uid: users.byName(login.user)?.uid ?? tty?.uid ?? 0,
      tty: login.line,
      remoteHost: login.host,
      pid: Math.max(0, login.pid),
      ...(login.timeMs > 0 ? { loginAgeSeconds: ageSeconds(nowMs, login.timeMs) } : {}),
      ...ttyAges(tty, nowMs),
    });
  }
  for (const name of [...sources.ptsNames].sort(byPtsNumber)) {
    if (loginTtys.has(name)) continue;
    const tty = sources.ttys.get(name);
    if (!tty || !users.isHuman(tty.uid)) continue;
    sessions.push({
      kind: SessionKind.PTY,
      user: users.byUid(tty.uid)?.name ?? String(tty.uid),
      uid: tty.uid,
      tty: name,
      ...ttyAges(tty, nowMs),
    });
  }
  return sessions;
}

/** USER_PROCESS records, in file order. Pure. */
export function userLogins(records: readonly UtmpRecord[]): UtmpRecord[] {
  return records.filter((record) => record.type === UtmpType.USER_PROCESS && record.user !== "");
}

/** A tty name that stays inside /dev: "pts/3", "tty1", "ttyS0"; not "", ":0" or "../x". */
export function isSafeTtyName(line: string): boolean {
  return /^[A-Za-z0-9][A-Za-z0-9._-]*(\/[A-Za-z0-9._-]+)*$/.test(line) && !line.split("/").includes("..");
}

function ttyAges(
  tty: TtyStat | undefined,
  nowMs: number,
): Pick<TerminalSessionInit, "inputAgeSeconds" | "outputAgeSeconds"> {
  if (!tty) return {};
  return { inputAgeSeconds: ageSeconds(nowMs, tty.atimeMs), outputAgeSeconds: ageSeconds(nowMs, tty.mtimeMs) };
}

function ageSeconds(nowMs: number, pastMs: number): number {
  return Math.max(0, (nowMs - pastMs) / 1000);
}

function byPtsNumber(a: string, b: string): number {
  return Number(a.slice(4)) - Number(b.slice(4)) || a.localeCompare(b);
}

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
