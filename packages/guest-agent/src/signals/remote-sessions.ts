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
import { closeSync, openSync, readdirSync, readlinkSync, readSync } from "node:fs";
import { StringDecoder } from "node:string_decoder";
import type { MessageInitShape } from "@bufbuild/protobuf";
import type { RemoteSessionSignalSchema } from "@ws/protocol";
import { under, type Roots } from "../roots.js";
import type { Users } from "../users.js";
import { parsePidStat, parseStatusUid, type ProcessStat } from "./proc-pid.js";
import { ownProcessScan, type ProcessScan } from "./process-scan.js";
import { parseUptime } from "./proc-uptime.js";
import {
  cmdlineSshdPorts,
  configuredSshdPorts,
  forwardConnections,
  isSshMonitorTitle,
  listeningPorts,
  parseProcIo,
  parseProcNetTcp,
  rootListeningPorts,
  socketInode,
  sshSessionTitleUser,
  type IoCounters,
  type TcpSocket,
} from "./remote-sessions-parse.js";
import {
  BIN_MS,
  CodeServerMemo,
  type ListeningPorts,
  listeningPortsHold,
  recordReading,
  type SessionProcess,
  socketSetKey,
  type Tracked,
  trackSessions,
  WINDOW_MS,
} from "./remote-sessions-track.js";
import { absent, errorMessage, ok, type Signal, type SignalContext, type SignalOutcome } from "./types.js";
import type { WatchedProcess, WatchedServices } from "./watched-services.js";

export type RemoteSessionSignalValue = MessageInitShape<typeof RemoteSessionSignalSchema>;

/** The kernel's comm of sshd's processes: OpenSSH before 9.8, and its per-session binary since. */
const SSHD_COMMS = new Set(["sshd", "sshd-session"]);
/** A session process holds a handful of descriptors; more are not looked at. */
const MAX_FDS_SCANNED = 64;
/** /proc/net/tcp of a busy server is large; what is past this is not read. */
const MAX_NET_TCP_BYTES = 4 * 1024 * 1024;
const MAX_SESSIONS = 256;
/** A process named sshd by its user may carry megabytes of arguments: a title is read this far. */
const MAX_TITLE_BYTES = 4096;
/** Forwards remembered per session. */
const MAX_FORWARDS = 8;
/** A new forwarded connection is resolved through /proc/net/tcp at most this often. */
const NET_TCP_MIN_INTERVAL_MS = 5_000;
/** A listener's process is looked for among at most this many descriptors of each service process. */
const MAX_SERVICE_FDS = 1024;
/** The ticker stops when nobody has collected for this long (a signal made for one probe). */
const TICKER_IDLE_STOP_MS = 15 * 60_000;
const CODE_SERVER_COMMS = new Set(["node", "code-server"]);
/** Files are read through this much at a time (one reused buffer), never a buffer of their whole cap. */
const READ_CHUNK_BYTES = 64 * 1024;

export interface RemoteSessionsOptions {
  /** The services other signals read (Jupyter servers): a forward to one is its client. */
  services?: WatchedServices;
  /** Shared with the system signal (createSignals), so /proc is listed once per sample. */
  processes?: ProcessScan;
}

export function createRemoteSessionsSignal(options: RemoteSessionsOptions = {}): Signal<RemoteSessionSignalValue> {
  const tracked = new Map<string, Tracked>();
  let ticker: NodeJS.Timeout | undefined;
  let lastCollectMono = 0;
  let lastNetReadMono = Number.NEGATIVE_INFINITY;
  let codeServerPids: number[] = [];
  let listening: ListeningPorts | undefined;
  const processes = options.processes ?? ownProcessScan();
  const codeServers = new CodeServerMemo();
  const services = (): WatchedProcess[] => [
    ...(options.services?.jupyter() ?? []),
    ...codeServerPids.map((pid) => ({ service: "code-server" as const, pid, url: "" })),
  ];
  const tick = (ctx: SignalContext): void => {
    const now = ctx.clock.monotonicMs();
    if (now - lastCollectMono > TICKER_IDLE_STOP_MS) {
      clearInterval(ticker);
      ticker = undefined;
      return;
    }
    let fresh = false;
    for (const session of tracked.values()) fresh = readSessionTick(ctx.roots, session, now) || fresh;
    if (fresh && now - lastNetReadMono >= NET_TCP_MIN_INTERVAL_MS) {
      lastNetReadMono = now;
      const sockets = readSockets(ctx.roots);
      for (const session of tracked.values())
        resolveForwards(ctx.roots, session, socketInodes(ctx.roots, session.pid), sockets, services(), now);
    }
  };
  return {
    name: "remote_sessions",
    async collect(ctx: SignalContext): Promise<SignalOutcome<RemoteSessionSignalValue>> {
      const notes: string[] = [];
      const found = findSessionProcesses(ctx, processes, codeServers, notes);
      if (found === undefined) return { state: "failed", message: notes.join("; ") || "cannot list processes" };
      codeServerPids = found.codeServerPids;
      const uptimeSeconds = readOr(under(ctx.roots.proc, "uptime"), parseUptime);
      // The same instant as the uptime: login ages are counted back from it.
      const nowMono = ctx.clock.monotonicMs();
      const sockets = found.sessions.length > 0 ? readSockets(ctx.roots, notes) : [];
      lastCollectMono = nowMono;
      const watched = services();
      const sessions = trackSessions(tracked, found.sessions, sockets, uptimeSeconds, nowMono, (session) =>
        resolveForwards(
          ctx.roots,
          session,
          found.sessions.find((p) => p.pid === session.pid)?.socketInodes ?? [],
          sockets,
          watched,
          nowMono,
        ),
      );
      if (tracked.size > 0 && ticker === undefined) {
        ticker = setInterval(() => tick(ctx), BIN_MS);
        ticker.unref();
      }
      listening = sshdListeningPorts(
        ctx.roots,
        found.rootSshdInodes,
        found.rootSshdCmdlines,
        found.sessions.length > 0 ? sockets : undefined,
        listening,
        nowMono,
      );
      const value = { sessions, sshdListeningPorts: listening.ports };
      if (found.sessions.length === 0 && found.rootSshdInodes.size === 0 && !sshdInstalled(ctx.roots))
        return absent("no sshd process running");
      return notes.length > 0 ? ok(value, notes.join("; ")) : ok(value);
    },
  };
}

/**
 * One tick for one session: its counters, and whether it has a socket not seen yet. A forwarded
 * connection lives as long as a request (or a keep-alive connection): new sockets are looked
 * for while traffic flows, not only when the Report is sampled.
 */
export function readSessionTick(roots: Roots, session: Tracked, nowMono: number): boolean {
  const io = readIo(roots, session.pid);
  if (!io) return false;
  const previous = session.readings[session.readings.length - 1];
  recordReading(session, io, nowMono);
  return previous !== undefined && io.readBytes + io.writtenBytes > previous.bytes && hasNewSocket(roots, session);
}

/**
 * Records the forwards among a session's sockets: where each goes and, when a watched
 * service's process holds the listening socket, which service it is.
 */
function resolveForwards(
  roots: Roots,
  session: Tracked,
  inodes: readonly number[],
  sockets: readonly TcpSocket[],
  watched: readonly WatchedProcess[],
  nowMono: number,
): void {
  for (const inode of inodes) session.knownInodes.add(inode);
  if (session.knownInodes.size > MAX_FDS_SCANNED * 4) session.knownInodes = new Set(inodes);
  let listenerOwners: Map<number, WatchedProcess> | undefined;
  for (const forward of forwardConnections(inodes, sockets)) {
    const key = `${forward.destinationAddress}:${forward.destinationPort}`;
    const known = session.forwards.get(key);
    if (known) known.lastSeenMonoMs = nowMono;
    // A forward seen before its service was (the jupyter signal publishes in the same sample) is looked at again.
    if (known?.service || (!known && session.forwards.size >= MAX_FORWARDS) || (known && watched.length === 0))
      continue;
    listenerOwners ??= listenerInodesOf(roots, watched);
    const owner = listenerOwners.get(forward.listenerInode);
    session.forwards.set(key, {
      destinationAddress: forward.destinationAddress,
      destinationPort: forward.destinationPort,
      service: owner?.service ?? "",
      listenerPid: owner?.pid ?? 0,
      lastSeenMonoMs: nowMono,
    });
  }
  for (const [key, forward] of session.forwards)
    if (nowMono - forward.lastSeenMonoMs > WINDOW_MS) session.forwards.delete(key);
}

/** Socket inode → the watched process holding it (a Jupyter server's listening socket). */
function listenerInodesOf(roots: Roots, watched: readonly WatchedProcess[]): Map<number, WatchedProcess> {
  const owners = new Map<number, WatchedProcess>();
  for (const process of watched) {
    for (const inode of socketInodes(roots, process.pid, MAX_SERVICE_FDS)) owners.set(inode, process);
  }
  return owners;
}

/** Every sshd session process without a pty, owned by a person; undefined when /proc cannot be listed. */
function findSessionProcesses(
  ctx: SignalContext,
  scan: ProcessScan,
  codeServers: CodeServerMemo,
  notes: string[],
):
  | {
      sessions: SessionProcess[];
      codeServerPids: number[];
      rootSshdInodes: Set<number>;
      /** The command lines of root's sshd daemons (readable without their descriptors); [] when none runs. */
      rootSshdCmdlines: string[];
    }
  | undefined {
  const { roots, users } = ctx;
  const table = scan.table(ctx);
  if (table.processes === undefined) {
    notes.push(...table.problems);
    return undefined;
  }
  // The names come from the sample's one pass over /proc (process-scan.ts): the stat's comm is
  // the kernel's task name, the same /proc/PID/comm serves.
  const sshdProcesses: ProcessStat[] = [];
  const nodes: ProcessStat[] = [];
  for (const process of table.processes) {
    if (SSHD_COMMS.has(process.comm)) sshdProcesses.push(process);
    else if (CODE_SERVER_COMMS.has(process.comm)) nodes.push(process);
  }
  const codeServerPids = codeServers.pick(nodes, (pid) => isCodeServer(roots, String(pid))).slice(0, 16);
  // Root's sshd daemons hold the LISTEN sockets: the entry service is up. Only a daemon (an sshd
  // whose parent is not sshd) is looked at: the per-connection monitors it forks close the
  // listeners and hold their connection's socket, which would change the set at every login.
  const sshdPids = new Set(sshdProcesses.map((process) => process.pid));
  const daemons: string[] = [];
  // A session's process is a monitor's child: an sshd with an sshd parent.
  const forked: string[] = [];
  for (const process of sshdProcesses) (sshdPids.has(process.ppid) ? forked : daemons).push(String(process.pid));
  const rootSshdInodes = new Set<number>();
  const rootSshdCmdlines: string[] = [];
  for (const pid of daemons.slice(0, MAX_ROOT_SSHD)) {
    const uid = readOr(under(roots.proc, pid, "status"), parseStatusUid);
    if (uid !== 0) continue;
    for (const inode of socketInodes(roots, Number(pid))) rootSshdInodes.add(inode);
    let cmdline = "";
    try {
      cmdline = readCapped(under(roots.proc, pid, "cmdline"), MAX_TITLE_BYTES);
    } catch {
      // gone since
    }
    rootSshdCmdlines.push(cmdline);
  }
  const sessions: SessionProcess[] = [];
  for (const pid of forked) {
    if (sessions.length >= MAX_SESSIONS) break;
    try {
      const session = readSessionProcess(roots, users, pid);
      if (session) sessions.push(session);
    } catch (error) {
      // A session that ended while being read is simply gone.
      if (!isGone(error)) notes.push(`${under(roots.proc, pid)}: ${errorMessage(error)}`);
    }
  }
  return { sessions, codeServerPids, rootSshdInodes, rootSshdCmdlines };
}

/** sshd daemons whose descriptors are looked at for LISTEN sockets. */
const MAX_ROOT_SSHD = 16;

/**
 * The ports of the LISTEN sockets root's sshd holds, from /proc/net/tcp and tcp6 (those this
 * sample already read for its sessions, else read now unless the previous answer holds); [] without any.
 * Under the packaged unit (no CAP_SYS_PTRACE) root's sshd's descriptors cannot be read (sshd is
 * not dumpable): then, with a root sshd daemon running, root's LISTEN sockets on sshd's ports —
 * those on its command line (-p, -o Port=), else sshd_config's (22 by default).
 */
function sshdListeningPorts(
  roots: Roots,
  inodes: ReadonlySet<number>,
  rootSshdCmdlines: readonly string[],
  sampleSockets: readonly TcpSocket[] | undefined,
  previous: ListeningPorts | undefined,
  nowMonoMs: number,
): ListeningPorts {
  if (inodes.size === 0 && rootSshdCmdlines.length === 0) return { key: "", ports: [], readAtMonoMs: nowMonoMs };
  if (inodes.size === 0) {
    const fromCmdline = rootSshdCmdlines.flatMap(cmdlineSshdPorts);
    const wanted = fromCmdline.length > 0 ? fromCmdline : configuredSshdPorts(sshdConfigTexts(roots));
    const key = `configured:${wanted.join(",")}`;
    if (sampleSockets === undefined && listeningPortsHold(previous, key, nowMonoMs)) return previous!;
    return { key, ports: rootListeningPorts(sampleSockets ?? readSockets(roots), wanted), readAtMonoMs: nowMonoMs };
  }
  const key = socketSetKey(inodes);
  if (sampleSockets === undefined && listeningPortsHold(previous, key, nowMonoMs)) return previous!;
  return { key, ports: listeningPorts(sampleSockets ?? readSockets(roots), inodes), readAtMonoMs: nowMonoMs };
}

/** sshd_config (and each drop-in) read at most this far. */
const MAX_SSHD_CONFIG_BYTES = 64 * 1024;

/** /etc/ssh/sshd_config and sshd_config.d/*.conf (root's files), capped; missing ones are none. */
function sshdConfigTexts(roots: Roots): string[] {
  const texts: string[] = [];
  const read = (file: string) => {
    try {
      texts.push(readCapped(file, MAX_SSHD_CONFIG_BYTES));
    } catch {
      // absent or unreadable: sshd's default applies
    }
  };
  read(under(roots.etc, "ssh", "sshd_config"));
  try {
    const dropIns = readdirSync(under(roots.etc, "ssh", "sshd_config.d"))
      .filter((name) => name.endsWith(".conf"))
      .sort()
      .slice(0, 32);
    for (const name of dropIns) read(under(roots.etc, "ssh", "sshd_config.d", name));
  } catch {
    // no drop-in directory
  }
  return texts;
}

/** code-server runs as node with its own entry point in the arguments (or as its own binary). */
function isCodeServer(roots: Roots, pid: string): boolean {
  try {
    const cmdline = readCapped(under(roots.proc, pid, "cmdline"), MAX_TITLE_BYTES);
    return /(^|\/|\0)code-server(\0|\/|$)/.test(cmdline);
  } catch {
    return false;
  }
}

function readIo(roots: Roots, pid: number): IoCounters | undefined {
  return readOr(under(roots.proc, String(pid), "io"), parseProcIo);
}

function socketInodes(roots: Roots, pid: number, max = MAX_FDS_SCANNED): number[] {
  const dir = under(roots.proc, String(pid), "fd");
  const inodes: number[] = [];
  let fds: string[];
  try {
    fds = readdirSync(dir).slice(0, max);
  } catch {
    return inodes;
  }
  for (const fd of fds) {
    let link = "";
    try {
      link = readlinkSync(under(dir, fd));
    } catch {}
    const inode = socketInode(link);
    if (inode !== undefined) inodes.push(inode);
  }
  return inodes;
}

function hasNewSocket(roots: Roots, session: Tracked): boolean {
  return socketInodes(roots, session.pid).some((inode) => !session.knownInodes.has(inode));
}

function readSessionProcess(roots: Roots, users: Users, pid: string): SessionProcess | undefined {
  const titleUser = sshSessionTitleUser(readCapped(under(roots.proc, pid, "cmdline"), MAX_TITLE_BYTES));
  if (titleUser === undefined) return undefined;
  const uid = parseStatusUid(readSmall(under(roots.proc, pid, "status")));
  const entry = users.byUid(uid);
  // The title is the user's to change: believe it only when the owner is a person of that name...
  if (!entry || entry.name !== titleUser || !users.isHuman(uid)) return undefined;
  const stat = parsePidStat(readSmall(under(roots.proc, pid, "stat")));
  // ...and sshd's root monitor for that user is its parent.
  const parent = String(stat.ppid);
  const parentUid = parseStatusUid(readSmall(under(roots.proc, parent, "status")));
  if (
    parentUid !== 0 ||
    !isSshMonitorTitle(readCapped(under(roots.proc, parent, "cmdline"), MAX_TITLE_BYTES), titleUser)
  )
    return undefined;
  const io = parseProcIo(readSmall(under(roots.proc, pid, "io")));
  return {
    pid: stat.pid,
    uid,
    user: titleUser,
    startTicks: stat.startTicks,
    io,
    socketInodes: socketInodes(roots, Number(pid)),
    command: firstChildCommand(roots, pid),
  };
}

/** comm of the session's first child (its task's children list, CONFIG_PROC_CHILDREN); "" when unknown. */
function firstChildCommand(roots: Roots, pid: string): string {
  const children = readOr(under(roots.proc, pid, "task", pid, "children"), (text) => text) ?? "";
  const child = children.trim().split(/\s+/)[0];
  if (!child || !/^\d+$/.test(child)) return "";
  return (readOr(under(roots.proc, child, "comm"), (text) => text) ?? "").trim().slice(0, 64);
}

/** Every TCP socket of /proc/net/tcp and tcp6; a file that cannot be read is noted (when `notes` is given) and skipped. */
function readSockets(roots: Roots, notes?: string[]): TcpSocket[] {
  const sockets: TcpSocket[] = [];
  for (const name of ["tcp", "tcp6"]) {
    const file = under(roots.proc, "net", name);
    try {
      sockets.push(...parseProcNetTcp(readCapped(file, MAX_NET_TCP_BYTES)));
    } catch (error) {
      if (!isGone(error)) notes?.push(`${file}: ${errorMessage(error)}`);
    }
  }
  return sockets;
}

/** A small kernel-written file (/proc/PID/status, stat, io): a page or two, read whole up to this. */
const MAX_SMALL_FILE_BYTES = 64 * 1024;

/** A small file's text; throws when it cannot be read. */
function readSmall(file: string): string {
  return readCapped(file, MAX_SMALL_FILE_BYTES);
}

/** A small file parsed, or undefined when it cannot be read or parsed (a process that exited). */
function readOr<T>(file: string, parse: (text: string) => T): T | undefined {
  try {
    return parse(readSmall(file));
  } catch {
    return undefined;
  }
}

/**
 * Every file here is read through this, synchronously: they are kernel-generated (/proc) or a
 * few small config files, each read is a copy out of memory, and the one-second ticker cannot
 * wait on a promise. One reader, so a cap or a fix holds for the ticker and the sample alike.
 */
/** The buffer every capped read goes through (the agent's event loop runs one at a time). */
const READ_CHUNK = Buffer.alloc(READ_CHUNK_BYTES);

/** A file's first `maxBytes` bytes as UTF-8, read a chunk at a time. */
function readCapped(file: string, maxBytes: number): string {
  const fd = openSync(file, "r");
  try {
    const decoder = new StringDecoder("utf8");
    let text = "";
    for (let total = 0; total < maxBytes; ) {
      const bytesRead = readSync(fd, READ_CHUNK, 0, Math.min(READ_CHUNK.length, maxBytes - total), null);
      if (bytesRead === 0) break;
      total += bytesRead;
      text += decoder.write(READ_CHUNK.subarray(0, bytesRead));
    }
    return text + decoder.end();
  } finally {
    closeSync(fd);
  }
}

/** A machine with no sshd at all has nothing to report ("absent"), not an empty list. */
function sshdInstalled(roots: Roots): boolean {
  return readOr(under(roots.etc, "ssh", "sshd_config"), () => true) ?? false;
}

function isGone(error: unknown): boolean {
  const code = (error as NodeJS.ErrnoException | undefined)?.code;
  return code === "ENOENT" || code === "ESRCH" || code === "ENOTDIR";
}
