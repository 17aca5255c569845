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
import { closeSync, openSync, readdirSync, readFileSync, readlinkSync, readSync } from "node:fs";
import { open, readdir, readFile, readlink } from "node:fs/promises";
import { StringDecoder } from "node:string_decoder";
import type { MessageInitShape } from "@bufbuild/protobuf";
import type { RemoteSessionSchema, RemoteSessionSignalSchema } from "@ws/protocol";
import { under, type Roots } from "../roots.js";
import type { Users } from "../users.js";
import { CLOCK_TICKS_PER_SECOND, parsePidStat, parseStatusUid, type ProcessStat } from "./proc-pid.js";
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
import { classifyTraffic } from "./traffic-cadence.js";
import { absent, errorMessage, ok, type Signal, type SignalContext, type SignalOutcome } from "./types.js";
import type { WatchedProcess, WatchedServices } from "./watched-services.js";

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
/** The traffic classifier's bins: one reading of each session's /proc/PID/io a second. */
const BIN_MS = 1_000;
/** What the classifier looks at: ten minutes of bins (a 30 s reload repeats 20 times). */
const WINDOW_MS = 10 * 60_000;
/** Forwards remembered per session. */
const MAX_FORWARDS = 8;
/** A new forwarded connection is resolved through /proc/net/tcp at most this often. */
const NET_TCP_MIN_INTERVAL_MS = 5_000;
/** A listener's process is looked for among at most this many descriptors of each service process. */
const MAX_SERVICE_FDS = 1024;
/** The ticker stops when nobody has collected for this long (a signal made for one probe). */
const TICKER_IDLE_STOP_MS = 15 * 60_000;
const CODE_SERVER_COMMS = new Set(["node", "code-server"]);
/**
 * sshd's listening ports are kept while root's sshd processes hold exactly the same sockets, and
 * read again at least this often. Reading /proc/net/tcp makes the kernel walk its whole socket
 * hash (milliseconds of system time on a machine with gigabytes of memory, whatever the number
 * of sockets), then every line is parsed: measured, it was the largest part of an idle agent's
 * sample (docs/benchmarks.md, benchmark 1, issue 30).
 */
const LISTENING_REFRESH_MS = 5 * 60_000;
/** Files are read through this much at a time (one reused buffer), never a buffer of their whole cap. */
const READ_CHUNK_BYTES = 64 * 1024;

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

/** One reading of a session's counters: bytes (rchar + wchar) and calls (syscr + syscw). */
interface Reading {
  atMs: number;
  bytes: number;
  calls: number;
}

/** A forward seen: where it goes and whether a watched service listens there. */
export interface SeenForward {
  destinationAddress: string;
  destinationPort: number;
  service: WatchedProcess["service"] | "";
  listenerPid: number;
  lastSeenMonoMs: number;
}

/** What the signal remembers of a session between samples. */
export interface Tracked {
  pid: number;
  lastInteractionMonoMs: number;
  /** Readings of the last WINDOW_MS, oldest first. */
  readings: Reading[];
  forwards: Map<string, SeenForward>;
  /** Socket inodes already resolved (a forward's connection is looked up once). */
  knownInodes: Set<number>;
}

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
      const sockets = readSocketsSync(ctx.roots);
      for (const session of tracked.values())
        resolveForwards(ctx.roots, session, socketInodesSync(ctx.roots, session.pid), sockets, services(), now);
    }
  };
  return {
    name: "remote_sessions",
    async collect(ctx: SignalContext): Promise<SignalOutcome<RemoteSessionSignalValue>> {
      const notes: string[] = [];
      const found = await findSessionProcesses(ctx, processes, codeServers, notes);
      if (found === undefined) return { state: "failed", message: notes.join("; ") || "cannot list processes" };
      codeServerPids = found.codeServerPids;
      const uptimeSeconds = await readFile(under(ctx.roots.proc, "uptime"), "utf8").then(parseUptime, () => undefined);
      // The same instant as the uptime: login ages are counted back from it.
      const nowMono = ctx.clock.monotonicMs();
      const sockets = found.sessions.length > 0 ? await readSockets(ctx.roots, notes) : [];
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
      if (found.sessions.length === 0 && found.rootSshdInodes.size === 0 && !(await sshdInstalled(ctx.roots)))
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
  const io = readIoSync(roots, session.pid);
  if (!io) return false;
  const previous = session.readings[session.readings.length - 1];
  recordReading(session, io, nowMono);
  return previous !== undefined && io.readBytes + io.writtenBytes > previous.bytes && hasNewSocket(roots, session);
}

/** Appends a reading and drops those older than the window. */
function recordReading(session: Tracked, io: IoCounters, nowMono: number): void {
  session.readings.push({
    atMs: nowMono,
    bytes: io.readBytes + io.writtenBytes,
    calls: io.readCalls + io.writeCalls,
  });
  const oldest = nowMono - WINDOW_MS;
  let drop = 0;
  while (drop < session.readings.length - 1 && session.readings[drop]!.atMs < oldest) drop++;
  if (drop > 0) session.readings.splice(0, drop);
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
    for (const inode of socketInodesSync(roots, process.pid, MAX_SERVICE_FDS)) owners.set(inode, process);
  }
  return owners;
}

/**
 * Turns this sample's session processes into report entries and updates what is remembered.
 * Pure apart from the map it is given and `resolve`, which records a new session's forwards.
 * A session seen for the first time counts as interaction at its start: someone opened it.
 * After that, its traffic is judged by what it reaches: a forward only to a watched service
 * is that service's client (its own signals decide); anything else goes through the traffic
 * classifier (traffic-cadence.ts), where a regular cadence is a machine's and stays weak.
 */
export function trackSessions(
  tracked: Map<string, Tracked>,
  found: readonly SessionProcess[],
  sockets: readonly TcpSocket[],
  uptimeSeconds: number | undefined,
  nowMonoMs: number,
  resolve: (session: Tracked) => void = () => {},
): RemoteSessionInit[] {
  const seen = new Set<string>();
  const sessions: RemoteSessionInit[] = [];
  const forwardInodes = new Set(
    forwardConnections(
      found.flatMap((p) => p.socketInodes),
      sockets,
    ).map((f) => f.inode),
  );
  const peers = new Map(sockets.map((socket) => [socket.inode, socket.remoteAddress]));
  for (const process of found) {
    const key = `${process.pid}:${process.startTicks}`;
    seen.add(key);
    const loginAgeSeconds =
      uptimeSeconds === undefined
        ? undefined
        : Math.max(0, uptimeSeconds - process.startTicks / CLOCK_TICKS_PER_SECOND);
    let session = tracked.get(key);
    if (!session) {
      if (loginAgeSeconds === undefined) continue;
      session = {
        pid: process.pid,
        lastInteractionMonoMs: nowMonoMs - loginAgeSeconds * 1000,
        readings: [],
        forwards: new Map(),
        knownInodes: new Set(),
      };
      tracked.set(key, session);
    }
    recordReading(session, process.io, nowMonoMs);
    resolve(session);
    const forwards = [...session.forwards.values()];
    const judgedByService = process.command === "" && forwards.length > 0 && forwards.every((f) => f.service !== "");
    const verdict = classifyTraffic(binsOf(session.readings), BIN_MS, nowMonoMs);
    if (!judgedByService && verdict.lastHumanMs !== undefined && verdict.lastHumanMs > session.lastInteractionMonoMs)
      session.lastInteractionMonoMs = verdict.lastHumanMs;
    const remoteHost =
      process.socketInodes
        .filter((inode) => !forwardInodes.has(inode))
        .map((inode) => peers.get(inode))
        .find((host) => host !== undefined) ?? "";
    const cadence = verdict.cadence;
    sessions.push({
      user: process.user,
      uid: process.uid,
      pid: process.pid,
      remoteHost,
      command: process.command,
      ...(loginAgeSeconds === undefined ? {} : { loginAgeSeconds }),
      interactionAgeSeconds: Math.max(0, (nowMonoMs - session.lastInteractionMonoMs) / 1000),
      trafficBytes: BigInt(process.io.readBytes + process.io.writtenBytes),
      forwards: forwards.map((forward) => ({
        destinationAddress: forward.destinationAddress,
        destinationPort: forward.destinationPort,
        service: forward.service,
        listenerPid: forward.listenerPid,
        lastSeenAgeSeconds: Math.max(0, (nowMonoMs - forward.lastSeenMonoMs) / 1000),
      })),
      judgedByService,
      ...(cadence && !judgedByService
        ? {
            cadence: {
              periodSeconds: cadence.periodMs / 1000,
              bursts: cadence.bursts,
              meanBurstBytes: Math.round(cadence.meanBurstBytes),
              lastBurstAgeSeconds: Math.max(0, (nowMonoMs - cadence.lastMs) / 1000),
            },
          }
        : {}),
    });
  }
  for (const key of tracked.keys()) if (!seen.has(key)) tracked.delete(key);
  return sessions;
}

function binsOf(readings: readonly Reading[]) {
  const bins = [];
  for (let i = 1; i < readings.length; i++) {
    const bytes = readings[i]!.bytes - readings[i - 1]!.bytes;
    const calls = readings[i]!.calls - readings[i - 1]!.calls;
    if (bytes >= 0 && calls >= 0) bins.push({ atMs: readings[i]!.atMs, bytes, calls });
  }
  return bins;
}

/** Every sshd session process without a pty, owned by a person; undefined when /proc cannot be listed. */
async function findSessionProcesses(
  ctx: SignalContext,
  scan: ProcessScan,
  codeServers: CodeServerMemo,
  notes: string[],
): Promise<
  | {
      sessions: SessionProcess[];
      codeServerPids: number[];
      rootSshdInodes: Set<number>;
      /** The command lines of root's sshd daemons (readable without their descriptors); [] when none runs. */
      rootSshdCmdlines: string[];
    }
  | undefined
> {
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
    const uid = await readFile(under(roots.proc, pid, "status"), "utf8").then(parseStatusUid, () => undefined);
    if (uid !== 0) continue;
    for (const inode of socketInodesSync(roots, Number(pid))) rootSshdInodes.add(inode);
    let cmdline = "";
    try {
      cmdline = readCappedSync(under(roots.proc, pid, "cmdline"), MAX_TITLE_BYTES);
    } catch {
      // gone since
    }
    rootSshdCmdlines.push(cmdline);
  }
  const sessions: SessionProcess[] = [];
  for (const pid of forked) {
    if (sessions.length >= MAX_SESSIONS) break;
    try {
      const session = await readSessionProcess(roots, users, pid);
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

/** The ports root's sshd listens on, and the sockets they were found among. */
export interface ListeningPorts {
  /** Root's sshd sockets, sorted and joined: the answer holds while these are the same. */
  key: string;
  ports: number[];
  readAtMonoMs: number;
}

/** The sockets' key: their inodes in order. Pure. */
export function socketSetKey(inodes: ReadonlySet<number>): string {
  return [...inodes].sort((a, b) => a - b).join(",");
}

/**
 * Whether the ports found before still answer: root's sshd holds the same sockets (a socket's
 * inode is its own for its whole life, and sshd listens as it binds) and the answer is younger
 * than LISTENING_REFRESH_MS. Pure.
 */
export function listeningPortsHold(previous: ListeningPorts | undefined, key: string, nowMonoMs: number): boolean {
  return (
    previous !== undefined &&
    previous.key === key &&
    nowMonoMs >= previous.readAtMonoMs &&
    nowMonoMs - previous.readAtMonoMs < LISTENING_REFRESH_MS
  );
}

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
    return { key, ports: rootListeningPorts(sampleSockets ?? readSocketsSync(roots), wanted), readAtMonoMs: nowMonoMs };
  }
  const key = socketSetKey(inodes);
  if (sampleSockets === undefined && listeningPortsHold(previous, key, nowMonoMs)) return previous!;
  return { key, ports: listeningPorts(sampleSockets ?? readSocketsSync(roots), inodes), readAtMonoMs: nowMonoMs };
}

/** sshd_config (and each drop-in) read at most this far. */
const MAX_SSHD_CONFIG_BYTES = 64 * 1024;

/** /etc/ssh/sshd_config and sshd_config.d/*.conf (root's files), capped; missing ones are none. */
function sshdConfigTexts(roots: Roots): string[] {
  const texts: string[] = [];
  const read = (file: string) => {
    try {
      texts.push(readCappedSync(file, MAX_SSHD_CONFIG_BYTES));
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

/**
 * Which node processes are code-server, remembered per process (pid, start time and comm: an
 * exec changes the comm, never the other two), so a process's command line is read once, not
 * every sample. Forgets the processes that are gone.
 */
export class CodeServerMemo {
  private known = new Map<string, boolean>();

  /** The pids of `candidates` that are code-server, asking `isCodeServer` only about processes not seen before. */
  pick(candidates: readonly ProcessStat[], isCodeServer: (pid: number) => boolean): number[] {
    const next = new Map<string, boolean>();
    const pids: number[] = [];
    for (const process of candidates) {
      const key = `${process.pid}@${process.startTicks}@${process.comm}`;
      const is = this.known.get(key) ?? isCodeServer(process.pid);
      next.set(key, is);
      if (is) pids.push(process.pid);
    }
    this.known = next;
    return pids;
  }
}

/** code-server runs as node with its own entry point in the arguments (or as its own binary). */
function isCodeServer(roots: Roots, pid: string): boolean {
  try {
    const cmdline = readCappedSync(under(roots.proc, pid, "cmdline"), MAX_TITLE_BYTES);
    return /(^|\/|\0)code-server(\0|\/|$)/.test(cmdline);
  } catch {
    return false;
  }
}

function readIoSync(roots: Roots, pid: number): IoCounters | undefined {
  try {
    return parseProcIo(readFileSync(under(roots.proc, String(pid), "io"), "utf8"));
  } catch {
    return undefined;
  }
}

function socketInodesSync(roots: Roots, pid: number, max = MAX_FDS_SCANNED): number[] {
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
  return socketInodesSync(roots, session.pid).some((inode) => !session.knownInodes.has(inode));
}

function readSocketsSync(roots: Roots): TcpSocket[] {
  const sockets: TcpSocket[] = [];
  for (const name of ["tcp", "tcp6"]) {
    try {
      sockets.push(...parseProcNetTcp(readCappedSync(under(roots.proc, "net", name), MAX_NET_TCP_BYTES)));
    } catch {}
  }
  return sockets;
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

/** Every TCP socket of /proc/net/tcp and tcp6. */
async function readSockets(roots: Roots, notes: string[]): Promise<TcpSocket[]> {
  const sockets: TcpSocket[] = [];
  for (const name of ["tcp", "tcp6"]) {
    const file = under(roots.proc, "net", name);
    try {
      sockets.push(...parseProcNetTcp(await readCapped(file, MAX_NET_TCP_BYTES)));
    } catch (error) {
      if (!isGone(error)) notes.push(`${file}: ${errorMessage(error)}`);
    }
  }
  return sockets;
}

/** The buffer every synchronous capped read goes through (the agent's event loop runs one at a time). */
const READ_CHUNK = Buffer.alloc(READ_CHUNK_BYTES);

/** A file's first `maxBytes` bytes as UTF-8, read a chunk at a time. */
function readCappedSync(file: string, maxBytes: number): string {
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

/** The same through a promise: each call has its own chunk, as reads of different files interleave. */
async function readCapped(file: string, maxBytes: number): Promise<string> {
  const handle = await open(file, "r");
  try {
    const chunk = Buffer.allocUnsafe(Math.min(READ_CHUNK_BYTES, maxBytes));
    const decoder = new StringDecoder("utf8");
    let text = "";
    for (let total = 0; total < maxBytes; ) {
      const { bytesRead } = await handle.read(chunk, 0, Math.min(chunk.length, maxBytes - total), null);
      if (bytesRead === 0) break;
      total += bytesRead;
      text += decoder.write(chunk.subarray(0, bytesRead));
    }
    return text + decoder.end();
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
