// Writing to people's terminals the way wall(1) does: open the tty device
// write-only, without making it our controlling terminal and without
// blocking, write, close. A stuck terminal (flow control, a dead ssh
// connection) loses this one message; it never holds the agent.
import { constants, type Stats } from "node:fs";
import { lstat, open, readdir, readFile } from "node:fs/promises";
import path from "node:path";
import type { Roots } from "../roots.js";
import { parseUtmp, UtmpType, type UtmpRecord } from "../signals/utmp.js";
import type { Users } from "../users.js";
import { errorMessage } from "@ws/protocol";

export interface TerminalTarget {
  /** Relative to /dev: "pts/3", "tty1". */
  tty: string;
  uid: number;
  user: string;
}

export type ListTerminals = () => Promise<TerminalTarget[]>;

/** Only device names a login can have: nothing that climbs out of /dev. */
export function isTerminalName(tty: string): boolean {
  return /^(pts\/\d{1,7}|tty\d{1,3}|ttyS\d{1,3}|ttyAMA\d{1,3}|hvc\d{1,3}|console)$/.test(tty);
}

export interface PtyEntry {
  name: string;
  uid: number;
  isCharacterDevice: boolean;
}

/**
 * Pseudo-terminals people hold without a utmp record (tmux and screen panes,
 * IDE terminals): /dev/pts/N owned by a human account. Pure.
 */
export function userPtys(entries: PtyEntry[], users: Users): TerminalTarget[] {
  return entries
    .filter((entry) => /^\d+$/.test(entry.name) && entry.isCharacterDevice && users.isHuman(entry.uid))
    .map((entry) => ({
      tty: `pts/${entry.name}`,
      uid: entry.uid,
      user: users.byUid(entry.uid)?.name ?? String(entry.uid),
    }))
    .sort((a, b) => Number(a.tty.slice(4)) - Number(b.tty.slice(4)));
}

/** Reads <dev>/pts: every human-owned pseudo-terminal. A missing /dev/pts is no terminals. */
export async function listUserPtys(devRoot: string, users: Users): Promise<TerminalTarget[]> {
  const directory = path.join(devRoot, "pts");
  let names: string[];
  try {
    names = await readdir(directory);
  } catch {
    return [];
  }
  const entries: PtyEntry[] = [];
  for (const name of names) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const info = await lstat(path.join(directory, name));
      entries.push({ name, uid: info.uid, isCharacterDevice: info.isCharacterDevice() });
    } catch {
      // closed between readdir and lstat
    }
  }
  return userPtys(entries, users);
}

/** Login sessions in utmp (ssh, console logins): the terminals wall writes to. Pure. */
export function utmpTerminals(records: readonly UtmpRecord[], users: Users): TerminalTarget[] {
  return records
    .filter((record) => record.type === UtmpType.USER_PROCESS && record.user !== "" && isTerminalName(record.line))
    .map((record) => ({ tty: record.line, uid: users.byName(record.user)?.uid ?? -1, user: record.user }));
}

/** Reads <run>/utmp; missing or unreadable is no sessions (the pty scan still finds terminals). */
export async function listUtmpTerminals(runRoot: string, users: Users): Promise<TerminalTarget[]> {
  try {
    return utmpTerminals(parseUtmp(await readFile(path.join(runRoot, "utmp"))), users);
  } catch {
    return [];
  }
}

/** Every logged-in terminal: utmp sessions, then human-owned ptys without a utmp record. */
export async function listLoggedInTerminals(roots: Roots, users: Users): Promise<TerminalTarget[]> {
  const [logins, ptys] = await Promise.all([listUtmpTerminals(roots.run, users), listUserPtys(roots.dev, users)]);
  return mergeTerminals(logins, ptys);
}

/** Every terminal once, whichever source found it first. */
export function mergeTerminals(...lists: TerminalTarget[][]): TerminalTarget[] {
  const seen = new Map<string, TerminalTarget>();
  for (const list of lists) for (const target of list) if (!seen.has(target.tty)) seen.set(target.tty, target);
  return [...seen.values()];
}

export type WriteOutcome = { tty: string; ok: true } | { tty: string; ok: false; error: string };

/** Writes `text` to <dev>/<tty>. Never blocks; never throws. */
export async function writeToTerminal(
  devRoot: string,
  tty: string,
  text: string,
  timeoutMs = 2_000,
): Promise<WriteOutcome> {
  if (!isTerminalName(tty)) return { tty, ok: false, error: "not a terminal name" };
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<WriteOutcome>((resolve) => {
    timer = setTimeout(() => resolve({ tty, ok: false, error: `no answer within ${timeoutMs}ms` }), timeoutMs);
    timer.unref?.();
  });
  try {
    return await Promise.race([writeNow(path.join(devRoot, tty), tty, Buffer.from(text, "utf8")), deadline]);
  } finally {
    clearTimeout(timer);
  }
}

async function writeNow(device: string, tty: string, bytes: Buffer): Promise<WriteOutcome> {
  let handle;
  try {
    handle = await open(device, constants.O_WRONLY | constants.O_NOCTTY | constants.O_NONBLOCK | constants.O_NOFOLLOW);
  } catch (error) {
    return { tty, ok: false, error: (error as NodeJS.ErrnoException).code ?? errorMessage(error) };
  }
  try {
    const info: Stats = await handle.stat();
    if (!info.isCharacterDevice()) return { tty, ok: false, error: "not a character device" };
    let offset = 0;
    while (offset < bytes.length) {
      const { bytesWritten } = await handle.write(bytes, offset, bytes.length - offset, null);
      if (bytesWritten <= 0) break;
      offset += bytesWritten;
    }
    return offset === bytes.length
      ? { tty, ok: true }
      : { tty, ok: false, error: `wrote ${offset} of ${bytes.length} bytes` };
  } catch (error) {
    // EAGAIN: the terminal's buffer is full (a suspended or dead session). Wall gives up there too.
    return { tty, ok: false, error: (error as NodeJS.ErrnoException).code ?? errorMessage(error) };
  } finally {
    await handle.close().catch(() => undefined);
  }
}
