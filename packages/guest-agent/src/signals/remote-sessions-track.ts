/**
 * The pure part of the remote-sessions signal: what it remembers of each SSH session between
 * samples (its counter readings, its forwards) and what a sample's session processes make of
 * it, with the traffic classifier (traffic-cadence.ts). remote-sessions.ts reads /proc and
 * calls these; nothing here reads a file or a clock.
 */
import type { MessageInitShape } from "@bufbuild/protobuf";
import type { RemoteSessionSchema } from "@ws/protocol";
import { CLOCK_TICKS_PER_SECOND, type ProcessStat } from "./proc-pid.js";
import { forwardConnections, type IoCounters, type TcpSocket } from "./remote-sessions-parse.js";
import { binsFromReadings, classifyTraffic } from "./traffic-cadence.js";
import type { WatchedProcess } from "./watched-services.js";

type RemoteSessionInit = MessageInitShape<typeof RemoteSessionSchema>;

/** The traffic classifier's bins: one reading of each session's /proc/PID/io a second. */
export const BIN_MS = 1_000;
/** What the classifier looks at: ten minutes of bins (a 30 s reload repeats 20 times). */
export const WINDOW_MS = 10 * 60_000;
/**
 * sshd's listening ports are kept while root's sshd processes hold exactly the same sockets, and
 * read again at least this often. Reading /proc/net/tcp makes the kernel walk its whole socket
 * hash (milliseconds of system time on a machine with gigabytes of memory, whatever the number
 * of sockets), then every line is parsed: measured, it was the largest part of an idle agent's
 * sample (docs/benchmarks.md, benchmark 1).
 */
export const LISTENING_REFRESH_MS = 5 * 60_000;

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
export interface Reading {
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
  /** When its traffic was last classified: bursts that had closed by then have been judged (traffic-cadence.ts). */
  judgedUntilMonoMs?: number;
  forwards: Map<string, SeenForward>;
  /** Socket inodes already resolved (a forward's connection is looked up once). */
  knownInodes: Set<number>;
}

/** Appends a reading and drops those older than the window. */
export function recordReading(session: Tracked, io: IoCounters, nowMono: number): void {
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
    const verdict = classifyTraffic(
      binsFromReadings(session.readings),
      BIN_MS,
      nowMonoMs,
      session.judgedUntilMonoMs,
      process.command === "",
    );
    session.judgedUntilMonoMs = nowMonoMs;
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
 * than LISTENING_REFRESH_MS. "Not listening" never holds: sshd's process runs a moment before it
 * binds (a boot, a restart), and readiness of a start waits on the ports appearing. Pure.
 */
export function listeningPortsHold(previous: ListeningPorts | undefined, key: string, nowMonoMs: number): boolean {
  return (
    previous !== undefined &&
    previous.ports.length > 0 &&
    previous.key === key &&
    nowMonoMs >= previous.readAtMonoMs &&
    nowMonoMs - previous.readAtMonoMs < LISTENING_REFRESH_MS
  );
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
