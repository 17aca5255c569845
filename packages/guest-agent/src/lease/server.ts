// The unix socket the CLI talks to. Thin: framing, limits, the identity
// challenge; what a request means is the handler's business. Nothing a client
// sends can crash the agent: every failure is an error answer or a closed
// connection.
import { connect, createServer, type Server, type Socket } from "node:net";
import { chmod, lstat, mkdir, unlink } from "node:fs/promises";
import path from "node:path";
import { exists } from "../fs/exists.js";
import { StringDecoder } from "node:string_decoder";
import {
  discardProof,
  newProofChallenge,
  prepareProofDir,
  rootSocketFor,
  verifyProof,
  type ProofChallenge,
  type ProofResult,
} from "./peer-proof.js";
import {
  MAX_LINE_BYTES,
  PROTOCOL_NAME,
  PROTOCOL_VERSION,
  errorAnswer,
  parseRequest,
  takeLines,
  type Answer,
  type Challenge,
  type Request,
} from "./wire.js";
import { errorMessage } from "@ws/protocol";

/** Resolves the caller's uid (once per connection, on first need). */
export type WhoIsCalling = () => Promise<ProofResult>;
export type RequestHandler = (request: Request, whoIsCalling: WhoIsCalling) => Promise<Answer>;

export interface SocketServerOptions {
  socketPath: string;
  proofDir: string;
  handle: RequestHandler;
  log: (line: string) => void;
  /**
   * Connections that have not proven who they are yet (each has firstRequestTimeoutMs to do so).
   * When full, a new connection pushes the oldest unproven one out instead of being refused, so
   * connections held open without a request cannot lock anyone out.
   */
  maxUnverified?: number;
  /** How long a new connection may take to send its first request (and its proof with it). */
  firstRequestTimeoutMs?: number;
  /** Connections one uid may hold at once, counted once the kernel-attested uid is known; root is not limited. */
  maxPerUid?: number;
  /** Every connection at once, all uids together (bounds the agent's descriptors); root's socket is apart. */
  maxConnections?: number;
  /** A connection silent this long is closed. */
  idleTimeoutMs?: number;
  /** Requests one connection may make. */
  maxRequestsPerConnection?: number;
  /** The uid the proof directory must belong to: the agent's own. */
  ownUid?: number;
}

const DEFAULTS = {
  // Generous: a silent connection costs one descriptor, and below this bound nobody is pushed out.
  maxUnverified: 512,
  firstRequestTimeoutMs: 3_000,
  maxPerUid: 8,
  maxConnections: 1024,
  idleTimeoutMs: 10_000,
  maxRequestsPerConnection: 16,
  maxRootConnections: 64,
};

export class LeaseSocketServer {
  private readonly connections = new Set<Socket>();
  /** Connections yet to prove their uid, oldest first. */
  private readonly unverified = new Set<Socket>();
  /** Open connections per proven uid (-1: served without a proof, list/status only). */
  private readonly perUid = new Map<number, number>();
  private rootServer: Server | undefined;
  private readonly rootConnections = new Set<Socket>();

  private constructor(
    private readonly server: Server,
    private readonly options: SocketServerOptions,
  ) {}

  static async listen(options: SocketServerOptions): Promise<LeaseSocketServer> {
    const directory = path.dirname(options.socketPath);
    // Clients of every uid must reach the socket. A directory made here gets 0755 whatever the
    // umask; an existing one (systemd's RuntimeDirectory, or /tmp in a test) is left as it is.
    if (!(await exists(directory))) {
      await mkdir(directory, { recursive: true, mode: 0o755 });
      await chmod(directory, 0o755);
    }
    const left = await prepareProofDir(options.proofDir, options.ownUid ?? process.getuid?.() ?? 0);
    if (left.length > 0)
      options.log(`leases: left in ${options.proofDir} what is not a file or an empty directory: ${left.join(", ")}`);
    await removeStaleSocket(options.socketPath);
    const server = createServer({ allowHalfOpen: false });
    const instance = new LeaseSocketServer(server, options);
    server.on("connection", (socket) => instance.serve(socket));
    server.on("error", (error) => options.log(`leases: socket server error: ${error.message}`));
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(options.socketPath, () => {
        server.off("error", reject);
        resolve();
      });
    });
    await chmod(options.socketPath, 0o666); // any local user may take a lease; who they are is proven per connection
    await instance.listenForRoot();
    return instance;
  }

  async close(): Promise<void> {
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
    const rootClosed = new Promise<void>((resolve) =>
      this.rootServer ? this.rootServer.close(() => resolve()) : resolve(),
    );
    for (const socket of [...this.connections, ...this.rootConnections]) socket.destroy();
    await Promise.all([closed, rootClosed]);
    await unlink(this.options.socketPath).catch(() => undefined);
    if (this.rootServer) await unlink(rootSocketFor(this.options.socketPath)).catch(() => undefined);
  }

  /**
   * Root's socket: 0600 and root's, so only root can connect (the kernel checks write permission
   * on connect). No proof is needed there, and no user can fill it. Failing to open it only costs
   * root the fast path; the public socket still serves root.
   */
  private async listenForRoot(): Promise<void> {
    const rootPath = rootSocketFor(this.options.socketPath);
    try {
      await removeStaleSocket(rootPath);
      const server = createServer({ allowHalfOpen: false });
      server.on("connection", (socket) => this.serveRoot(socket));
      server.on("error", (error) => this.options.log(`leases: root socket error: ${error.message}`));
      await new Promise<void>((resolve, reject) => {
        server.once("error", reject);
        // Created 0600 from the start (umask), so there is no moment when anyone else may connect.
        const previous = process.umask(0o177);
        try {
          server.listen(rootPath, () => {
            server.off("error", reject);
            resolve();
          });
        } finally {
          process.umask(previous);
        }
      });
      await chmod(rootPath, 0o600);
      this.rootServer = server;
    } catch (error) {
      this.options.log(
        `leases: cannot serve root's socket ${rootPath}: ${errorMessage(error)}; root uses the shared one`,
      );
    }
  }

  private serveRoot(socket: Socket): void {
    socket.on("error", () => undefined);
    if (this.rootConnections.size >= DEFAULTS.maxRootConnections) {
      socket.end(`${JSON.stringify(errorAnswer("busy", "root already holds too many connections to the agent"))}\n`);
      return;
    }
    this.rootConnections.add(socket);
    socket.on("close", () => this.rootConnections.delete(socket));
    const root: ProofResult = { ok: true, uid: 0 };
    this.converse(
      socket,
      newProofChallenge(),
      async () => root,
      () => true,
    );
  }

  private serve(socket: Socket): void {
    const { proofDir } = this.options;
    const maxConnections = this.options.maxConnections ?? DEFAULTS.maxConnections;
    const maxUnverified = this.options.maxUnverified ?? DEFAULTS.maxUnverified;
    const maxPerUid = this.options.maxPerUid ?? DEFAULTS.maxPerUid;
    socket.on("error", () => undefined); // a client that vanishes mid-write is not the agent's problem
    if (this.unverified.size >= maxUnverified) {
      // Push out the oldest connection that has not said anything yet, not the newcomer.
      const oldest = this.unverified.values().next().value as Socket | undefined;
      if (oldest)
        this.dropUnverified(oldest, "too many connections are waiting to prove who they are; try again in a moment");
    }
    if (this.connections.size >= maxConnections) {
      socket.end(
        `${JSON.stringify(errorAnswer("busy", "the agent is serving too many connections; try again in a moment"))}\n`,
      );
      return;
    }
    this.connections.add(socket);
    this.unverified.add(socket);
    const firstRequest = setTimeout(() => {
      if (this.unverified.has(socket)) this.dropUnverified(socket, "no request within the time allowed");
    }, this.options.firstRequestTimeoutMs ?? DEFAULTS.firstRequestTimeoutMs);
    firstRequest.unref?.();

    const challenge = newProofChallenge();
    let countedUid: number | undefined;
    let identity: Promise<ProofResult> | undefined;
    const whoIsCalling: WhoIsCalling = () => (identity ??= verifyProof(proofDir, challenge));
    // Called before the first request is handled: counts the connection under its uid.
    const admit = (proof: ProofResult): boolean => {
      clearTimeout(firstRequest);
      this.unverified.delete(socket);
      const uid = proof.ok ? proof.uid : -1;
      const open = this.perUid.get(uid) ?? 0;
      if (uid !== 0 && open >= maxPerUid) return false;
      this.perUid.set(uid, open + 1);
      countedUid = uid;
      return true;
    };
    socket.on("close", () => {
      clearTimeout(firstRequest);
      this.connections.delete(socket);
      this.unverified.delete(socket);
      if (countedUid !== undefined) {
        const left = (this.perUid.get(countedUid) ?? 1) - 1;
        if (left > 0) this.perUid.set(countedUid, left);
        else this.perUid.delete(countedUid);
      }
      void discardProof(proofDir, challenge);
    });
    this.converse(socket, challenge, whoIsCalling, admit, maxPerUid);
  }

  private dropUnverified(socket: Socket, why: string): void {
    this.unverified.delete(socket);
    if (socket.writable) socket.end(`${JSON.stringify(errorAnswer("busy", why))}\n`);
    socket.destroySoon?.();
    setTimeout(() => socket.destroy(), 100).unref?.();
  }

  /** The conversation on one connection: challenge, then up to N request lines, one answer each. */
  private converse(
    socket: Socket,
    challenge: ProofChallenge,
    whoIsCalling: WhoIsCalling,
    admit: (proof: ProofResult) => boolean,
    maxPerUid = 0,
  ): void {
    const { log, handle } = this.options;
    const maxRequests = this.options.maxRequestsPerConnection ?? DEFAULTS.maxRequestsPerConnection;
    socket.setTimeout(this.options.idleTimeoutMs ?? DEFAULTS.idleTimeoutMs, () => socket.destroy());
    let admitted = false;
    let turnedAway = false;
    const hello: Challenge = {
      protocol: PROTOCOL_NAME,
      version: PROTOCOL_VERSION,
      nonce: challenge.nonce,
      proof: challenge.name,
    };
    socket.write(`${JSON.stringify(hello)}\n`);

    const decoder = new StringDecoder("utf8");
    let pending = "";
    let served = 0;
    let queue = Promise.resolve();
    const answer = (reply: Answer): void => {
      if (!socket.destroyed && socket.writable) socket.write(`${JSON.stringify(reply)}\n`);
    };

    socket.on("data", (chunk: Buffer) => {
      pending += decoder.write(chunk);
      const { lines, rest } = takeLines(pending);
      pending = rest;
      if (Buffer.byteLength(pending) > MAX_LINE_BYTES) {
        answer(errorAnswer("bad_request", `request longer than ${MAX_LINE_BYTES} bytes`));
        socket.end();
        pending = "";
        return;
      }
      for (const line of lines) {
        if (++served > maxRequests) {
          answer(errorAnswer("bad_request", `at most ${maxRequests} requests per connection`));
          socket.end();
          return;
        }
        queue = queue.then(async () => {
          if (turnedAway) return;
          if (!admitted) {
            const proof = await whoIsCalling();
            if (!admit(proof)) {
              const who = proof.ok ? `you (uid ${proof.uid})` : "callers who cannot prove who they are";
              answer(
                errorAnswer(
                  "busy",
                  `${who} already hold ${maxPerUid} connections to the agent; close some (or wait ${Math.round((this.options.idleTimeoutMs ?? DEFAULTS.idleTimeoutMs) / 1000)}s) and try again`,
                ),
              );
              socket.end();
              turnedAway = true;
              return;
            }
            admitted = true;
          }
          if (Buffer.byteLength(line) > MAX_LINE_BYTES)
            return answer(errorAnswer("bad_request", `request longer than ${MAX_LINE_BYTES} bytes`));
          const parsed = parseRequest(line);
          if (!parsed.ok) return answer(parsed);
          answer(await handle(parsed.request, whoIsCalling));
        });
        // One failed request (a bug, a proof that could not be checked) is answered and logged;
        // it neither ends the agent as an unhandled rejection nor blocks the requests after it.
        queue = queue.catch((error: unknown) => {
          log(`leases: a request failed: ${(error as Error).stack ?? String(error)}`);
          answer(errorAnswer("internal", `the agent failed to handle the request: ${errorMessage(error)}`));
        });
      }
    });
  }
}

/** A socket file left by an agent that died is removed; one another agent still listens on is not. */
async function removeStaleSocket(socketPath: string): Promise<void> {
  let info;
  try {
    info = await lstat(socketPath);
  } catch {
    return;
  }
  if (!info.isSocket()) throw new Error(`${socketPath} exists and is not a socket; remove it`);
  const alive = await new Promise<boolean>((resolve) => {
    const probe = connect(socketPath);
    probe.once("connect", () => {
      probe.destroy();
      resolve(true);
    });
    probe.once("error", () => resolve(false));
  });
  if (alive) throw new Error(`another ws-agent is already serving ${socketPath}`);
  await unlink(socketPath);
}
