/**
 * The pure half of the sessions signal (sessions.ts reads): utmp logins and tty timestamps → the report's terminal sessions. Tested on fixtures.
 */
import type { MessageInitShape } from "@bufbuild/protobuf";
import { SessionKind, type TerminalSessionSchema } from "@ws/protocol";
import type { Users } from "../users.js";
import { UtmpType, type UtmpRecord } from "./utmp.js";

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
