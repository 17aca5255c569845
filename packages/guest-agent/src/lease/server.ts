// The unix socket the CLI talks to. Thin: framing, limits, the identity
// challenge; what a request means is the handler's business. Nothing a client
// sends can crash the agent: every failure is an error answer or a closed
// connection.
import { connect, createServer, type Server, type Socket } from "node:net";
import { chmod, lstat, mkdir, unlink } from "node:fs/promises";
import path from "node:path";
import { StringDecoder } from "node:string_decoder";
import { discardProof, newProofChallenge, prepareProofDir, verifyProof, type ProofResult } from "./peer-proof.js";
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

/** Resolves the caller's uid (once per connection, on first need). */
export type WhoIsCalling = () => Promise<ProofResult>;
export type RequestHandler = (request: Request, whoIsCalling: WhoIsCalling) => Promise<Answer>;

export interface SocketServerOptions {
  socketPath: string;
  proofDir: string;
  handle: RequestHandler;
  log: (line: string) => void;
  /** Connections served at once; more get a "busy" answer. */
  maxConnections?: number;
  /** A connection silent this long is closed. */
  idleTimeoutMs?: number;
  /** Requests one connection may make. */
  maxRequestsPerConnection?: number;
  /** The uid the proof directory must belong to: the agent's own. */
  ownUid?: number;
}

export class LeaseSocketServer {
  private readonly connections = new Set<Socket>();

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
    if (left.length > 0) options.log(`leases: left in ${options.proofDir} what is not a file or an empty directory: ${left.join(", ")}`);
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
    return instance;
  }

  async close(): Promise<void> {
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
    for (const socket of this.connections) socket.destroy();
    await closed;
    await unlink(this.options.socketPath).catch(() => undefined);
  }

  private serve(socket: Socket): void {
    const { log, handle, proofDir } = this.options;
    const maxConnections = this.options.maxConnections ?? 32;
    const maxRequests = this.options.maxRequestsPerConnection ?? 16;
    socket.on("error", () => undefined); // a client that vanishes mid-write is not the agent's problem
    if (this.connections.size >= maxConnections) {
      socket.end(JSON.stringify(errorAnswer("busy", "the agent is serving too many connections; try again in a moment")) + "\n");
      return;
    }
    this.connections.add(socket);
    socket.setTimeout(this.options.idleTimeoutMs ?? 15_000, () => socket.destroy());

    const challenge = newProofChallenge();
    let identity: Promise<ProofResult> | undefined;
    const whoIsCalling: WhoIsCalling = () => (identity ??= verifyProof(proofDir, challenge));
    const hello: Challenge = { protocol: PROTOCOL_NAME, version: PROTOCOL_VERSION, nonce: challenge.nonce, proof: challenge.name };
    socket.write(JSON.stringify(hello) + "\n");

    const decoder = new StringDecoder("utf8");
    let pending = "";
    let served = 0;
    let queue = Promise.resolve();
    const answer = (reply: Answer): void => {
      if (!socket.destroyed && socket.writable) socket.write(JSON.stringify(reply) + "\n");
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
          if (Buffer.byteLength(line) > MAX_LINE_BYTES) return answer(errorAnswer("bad_request", `request longer than ${MAX_LINE_BYTES} bytes`));
          const parsed = parseRequest(line);
          if (!parsed.ok) return answer(parsed);
          try {
            answer(await handle(parsed.request, whoIsCalling));
          } catch (error) {
            log(`leases: request ${parsed.request.op} failed: ${(error as Error).stack ?? String(error)}`);
            answer(errorAnswer("internal", `the agent failed to handle the request: ${(error as Error).message}`));
          }
        });
      }
    });
    socket.on("close", () => {
      this.connections.delete(socket);
      void discardProof(proofDir, challenge);
    });
  }
}

async function exists(file: string): Promise<boolean> {
  try {
    await lstat(file);
    return true;
  } catch {
    return false;
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
