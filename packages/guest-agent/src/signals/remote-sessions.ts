/**
 * Remote sessions without a terminal: VS Code Remote-SSH, JetBrains Gateway, `ssh host cmd`,
 * sftp and port forwards open SSH sessions with no pty, so utmp has no record of them and the
 * sessions signal cannot see them. sshd runs every session in a process of the user's own,
 * titled "sshd: alice@notty" (or "sshd: alice" when it only forwards ports), child of a root
 * monitor "sshd: alice [priv]". This signal finds those processes in /proc, names the peer
 * from the session's TCP socket, and tells interaction from keep-alives with the process's
 * I/O counters (/proc/PID/io): see remote-sessions-parse.ts and
 * docs/signals/remote-sessions.md for the rule and its limits.
 *
 * Everything read here is written by the kernel; the title is set by a process the user owns,
 * so it is only believed when the uid, the parent and the parent's title all agree.
 */
import { readFileSync } from "node:fs";
import { open, readdir, readFile, readlink } from "node:fs/promises";
import type { MessageInitShape } from "@bufbuild/protobuf";
import type { RemoteSessionSchema, RemoteSessionSignalSchema } from "@ws/protocol";
import { under, type Roots } from "../roots.js";
import type { Users } from "../users.js";
import { CLOCK_TICKS_PER_SECOND, parsePidStat, parseStatusUid } from "./proc-pid.js";
import { parseUptime } from "./proc-uptime.js";
import {
  isInteraction,
  isSshMonitorTitle,
  listeningPorts,
  parseListeningSockets,
  parseProcIo,
  parseProcNetTcp,
  socketInode,
  sshSessionTitleUser,
  type IoCounters,
} from "./remote-sessions-parse.js";
import { absent, errorMessage, ok, type Signal, type SignalContext, type SignalOutcome } from "./types.js";

export type RemoteSessionSignalValue = MessageInitShape<typeof RemoteSessionSignalSchema>;
type RemoteSessionInit = MessageInitShape<typeof RemoteSessionSchema>;

/** The kernel's comm of sshd's processes: OpenSSH before 9.8, and its per-session binary since. */
const SSHD_COMMS = new Set(["sshd", "sshd-session"]);
/** A session process holds a handful of descriptors; more are not looked at. */
const MAX_FDS_SCANNED = 64;
/** /proc/net/tcp of a busy server is large; what is past this is not read. */
const MAX_NET_TCP_BYTES = 4 * 1024 * 1024;
const MAX_SESSIONS = 256;
/** A process named sshd by its user may carry megabytes of arguments: a title is read this far. */
const MAX_TITLE_BYTES = 4096;

/** One session process as found in /proc. */
export interface SessionProcess {
  pid: number;
  uid: number;
  user: string;
  startTicks: number;
  io: IoCounters;
  socketInodes: number[];
  /** comm of the first child, "" when none. */
  command: string;
}

/** What the signal remembers of a session between samples. */
interface Tracked {
  io: IoCounters;
  lastInteractionMonoMs: number;
}

export function createRemoteSessionsSignal(): Signal<RemoteSessionSignalValue> {
  const tracked = new Map<string, Tracked>();
  return {
    name: "remote_sessions",
    async collect(ctx: SignalContext): Promise<SignalOutcome<RemoteSessionSignalValue>> {
      const notes: string[] = [];
      const listing = await findSessionProcesses(ctx.roots, ctx.users, notes);
      if (listing === undefined) return { state: "failed", message: notes.join("; ") || "cannot list processes" };
      const { sessions: found, rootSshdInodes } = listing;
      const uptimeSeconds = await readFile(under(ctx.roots.proc, "uptime"), "utf8").then(parseUptime, () => undefined);
      const tcp = found.length > 0 || rootSshdInodes.size > 0 ? await readTcp(ctx.roots, notes) : [];
      const peers = new Map<number, string>();
      for (const socket of tcp.flatMap(parseProcNetTcp)) peers.set(socket.inode, socket.remoteAddress);
      const nowMono = ctx.clock.monotonicMs();
      const value = {
        sessions: trackSessions(tracked, found, peers, uptimeSeconds, nowMono),
        sshdListeningPorts: listeningPorts(tcp.flatMap(parseListeningSockets), rootSshdInodes),
      };
      if (found.length === 0 && rootSshdInodes.size === 0 && !(await sshdInstalled(ctx.roots)))
        return absent("no sshd process running");
      return notes.length > 0 ? ok(value, notes.join("; ")) : ok(value);
    },
  };
}

/**
 * Turns this sample's session processes into report entries and updates what is remembered.
 * Pure apart from the map it is given. A session seen for the first time counts as interaction
 * at its start: someone opened it.
 */
export function trackSessions(
  tracked: Map<string, Tracked>,
  found: readonly SessionProcess[],
  peers: ReadonlyMap<number, string>,
  uptimeSeconds: number | undefined,
  nowMonoMs: number,
): RemoteSessionInit[] {
  const seen = new Set<string>();
  const sessions: RemoteSessionInit[] = [];
  for (const process of found) {
    const key = `${process.pid}:${process.startTicks}`;
    seen.add(key);
    const loginAgeSeconds =
      uptimeSeconds === undefined
        ? undefined
        : Math.max(0, uptimeSeconds - process.startTicks / CLOCK_TICKS_PER_SECOND);
    const previous = tracked.get(key);
    let lastInteractionMonoMs: number | undefined;
    if (previous) {
      lastInteractionMonoMs = isInteraction(previous.io, process.io) ? nowMonoMs : previous.lastInteractionMonoMs;
    } else if (loginAgeSeconds !== undefined) {
      lastInteractionMonoMs = nowMonoMs - loginAgeSeconds * 1000;
    }
    if (lastInteractionMonoMs !== undefined) tracked.set(key, { io: process.io, lastInteractionMonoMs });
    const remoteHost = process.socketInodes.map((inode) => peers.get(inode)).find((host) => host !== undefined) ?? "";
    sessions.push({
      user: process.user,
      uid: process.uid,
      pid: process.pid,
      remoteHost,
      command: process.command,
      ...(loginAgeSeconds === undefined ? {} : { loginAgeSeconds }),
      ...(lastInteractionMonoMs === undefined
        ? {}
        : { interactionAgeSeconds: Math.max(0, (nowMonoMs - lastInteractionMonoMs) / 1000) }),
      trafficBytes: BigInt(process.io.readBytes + process.io.writtenBytes),
    });
  }
  for (const key of tracked.keys()) if (!seen.has(key)) tracked.delete(key);
  return sessions;
}

/** sshd processes of root (its listener, the per-connection monitors) whose descriptors are looked at for LISTEN sockets. */
const MAX_ROOT_SSHD = 16;

/**
 * Every sshd session process without a pty, owned by a person, and the socket inodes of root's
 * sshd processes (where the listener's LISTEN sockets are); undefined when /proc cannot be listed.
 */
async function findSessionProcesses(
  roots: Roots,
  users: Users,
  notes: string[],
): Promise<{ sessions: SessionProcess[]; rootSshdInodes: Set<number> } | undefined> {
  let pids: string[];
  try {
    pids = (await readdir(roots.proc)).filter((name) => /^\d+$/.test(name));
  } catch (error) {
    notes.push(`${roots.proc}: ${errorMessage(error)}`);
    return undefined;
  }
  // Synchronous on purpose: a comm file is 16 bytes the kernel serves from memory, and one
  // promise read per process costs ten times the CPU (bench/signals.ts, docs/benchmarks.md).
  const sshd = pids.filter((pid) => SSHD_COMMS.has(readComm(roots, pid)));
  const sessions: SessionProcess[] = [];
  const rootSshdInodes = new Set<number>();
  let rootSshd = 0;
  for (const pid of sshd) {
    const uid = await readFile(under(roots.proc, pid, "status"), "utf8").then(parseStatusUid, () => undefined);
    if (uid === 0 && rootSshd < MAX_ROOT_SSHD) {
      rootSshd++;
      for (const inode of await socketInodes(roots, pid).catch(() => [])) rootSshdInodes.add(inode);
    }
  }
  for (const pid of sshd) {
    if (sessions.length >= MAX_SESSIONS) break;
    try {
      const session = await readSessionProcess(roots, users, pid);
      if (session) sessions.push(session);
    } catch (error) {
      // A session that ended while being read is simply gone.
      if (!isGone(error)) notes.push(`${under(roots.proc, pid)}: ${errorMessage(error)}`);
    }
  }
  return { sessions, rootSshdInodes };
}

function readComm(roots: Roots, pid: string): string {
  try {
    return readFileSync(under(roots.proc, pid, "comm"), "utf8").trim();
  } catch {
    return "";
  }
}

async function readSessionProcess(roots: Roots, users: Users, pid: string): Promise<SessionProcess | undefined> {
  const titleUser = sshSessionTitleUser(await readCapped(under(roots.proc, pid, "cmdline"), MAX_TITLE_BYTES));
  if (titleUser === undefined) return undefined;
  const uid = parseStatusUid(await readFile(under(roots.proc, pid, "status"), "utf8"));
  const entry = users.byUid(uid);
  // The title is the user's to change: believe it only when the owner is a person of that name...
  if (!entry || entry.name !== titleUser || !users.isHuman(uid)) return undefined;
  const stat = parsePidStat(await readFile(under(roots.proc, pid, "stat"), "utf8"));
  // ...and sshd's root monitor for that user is its parent.
  const parent = String(stat.ppid);
  const parentUid = parseStatusUid(await readFile(under(roots.proc, parent, "status"), "utf8"));
  if (
    parentUid !== 0 ||
    !isSshMonitorTitle(await readCapped(under(roots.proc, parent, "cmdline"), MAX_TITLE_BYTES), titleUser)
  )
    return undefined;
  const io = parseProcIo(await readFile(under(roots.proc, pid, "io"), "utf8"));
  return {
    pid: stat.pid,
    uid,
    user: titleUser,
    startTicks: stat.startTicks,
    io,
    socketInodes: await socketInodes(roots, pid),
    command: await firstChildCommand(roots, pid),
  };
}

async function socketInodes(roots: Roots, pid: string): Promise<number[]> {
  const dir = under(roots.proc, pid, "fd");
  const inodes: number[] = [];
  for (const fd of (await readdir(dir)).slice(0, MAX_FDS_SCANNED)) {
    const inode = socketInode(await readlink(under(dir, fd)).catch(() => ""));
    if (inode !== undefined) inodes.push(inode);
  }
  return inodes;
}

/** comm of the session's first child (its task's children list, CONFIG_PROC_CHILDREN); "" when unknown. */
async function firstChildCommand(roots: Roots, pid: string): Promise<string> {
  const children = await readFile(under(roots.proc, pid, "task", pid, "children"), "utf8").catch(() => "");
  const child = children.trim().split(/\s+/)[0];
  if (!child || !/^\d+$/.test(child)) return "";
  return (await readFile(under(roots.proc, child, "comm"), "utf8").catch(() => "")).trim().slice(0, 64);
}

/** /proc/net/tcp and tcp6, the texts of those that could be read. */
async function readTcp(roots: Roots, notes: string[]): Promise<string[]> {
  const texts: string[] = [];
  for (const name of ["tcp", "tcp6"]) {
    const file = under(roots.proc, "net", name);
    try {
      texts.push(await readCapped(file, MAX_NET_TCP_BYTES));
    } catch (error) {
      if (!isGone(error)) notes.push(`${file}: ${errorMessage(error)}`);
    }
  }
  return texts;
}

async function readCapped(file: string, maxBytes: number): Promise<string> {
  const handle = await open(file, "r");
  try {
    const buffer = Buffer.alloc(maxBytes);
    let filled = 0;
    for (;;) {
      const { bytesRead } = await handle.read(buffer, filled, maxBytes - filled, null);
      if (bytesRead === 0 || filled + bytesRead >= maxBytes) {
        filled += bytesRead;
        break;
      }
      filled += bytesRead;
    }
    return buffer.subarray(0, filled).toString("utf8");
  } finally {
    await handle.close();
  }
}

/** A machine with no sshd at all has nothing to report ("absent"), not an empty list. */
async function sshdInstalled(roots: Roots): Promise<boolean> {
  try {
    await readFile(under(roots.etc, "ssh", "sshd_config"));
    return true;
  } catch {
    return false;
  }
}

function isGone(error: unknown): boolean {
  const code = (error as NodeJS.ErrnoException | undefined)?.code;
  return code === "ENOENT" || code === "ESRCH" || code === "ENOTDIR";
}
