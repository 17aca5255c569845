// The gRPC side: one bidi stream per VM. Authenticates the Hello, validates
// every Report, and hands them on; a bad stream is closed alone.
import * as grpc from "@grpc/grpc-js";
import net, { type AddressInfo } from "node:net";
import { create } from "@bufbuild/protobuf";
import {
  AgentService,
  CollectorMessageSchema,
  MAX_AGENT_MESSAGE_BYTES,
  RETRY_AFTER_METADATA_KEY,
  serverChannelOptions,
  type AgentMessage,
  type CollectorMessage,
  type Directive,
  type Hello,
  type Report,
  errorMessage,
  terminalText,
} from "@ws/protocol";
import { bidiHandler, serverDefinition, type BidiServerStream, wireBytesOf } from "@ws/protocol/grpc";
import type { CollectorStats } from "../lib/stats.js";
import { type VmKey, vmId } from "../model/vm-key.js";
import { rememberWire } from "../model/compact-report.js";
import {
  ConnectionSlots,
  connectionSource,
  DEFAULT_HANDSHAKE_TIMEOUT_MS,
  DEFAULT_PENDING_PER_SOURCE,
} from "./connection-slots.js";
import { describeTruncation, validateHello, validateReport, ValidationError } from "./validate.js";

/** `kind` is the bounded label of workstation_auth_failures_total (default: bad-token / identity by code). */
export type AuthResult = { ok: true } | { ok: false; code: grpc.status; reason: string; kind?: string };

/** A Goodbye's reason as shown on the VM page: an agent's words, bounded and stripped of control characters. */
const GOODBYE_MAX_CHARS = 120;
const safeGoodbye = (reason: string): string => terminalText(reason, GOODBYE_MAX_CHARS) || "stopped on purpose";

/** The most one Report may add to workstation_agent_unhandled_errors_total (an agent may not flood it). */
const MAX_UNHANDLED_STEP = 1000n;

export interface AgentSession {
  readonly vm: VmKey;
  readonly hello: Hello;
  readonly peer: string;
  readonly connectedAtMs: number;
  send(directive: Directive): void;
  /** Ends the stream; with retryAfterMs the agent is told when to come back (it adds jitter). */
  close(code: grpc.status, details: string, retryAfterMs?: number): void;
}

export interface AgentSink {
  authenticate(vm: VmKey, token: string, peer: string): Promise<AuthResult> | AuthResult;
  connected(session: AgentSession): void;
  /** `truncated`: what validation cut from the Report to the per-agent limits, in words. */
  report(session: AgentSession, report: Report, receivedAtMs: number, truncated?: readonly string[]): void;
  /** `goodbye`: the agent said it stops on purpose (its reason); undefined: the stream just ended. */
  disconnected(session: AgentSession, reason: string, goodbye?: string): void;
}

export type { Logger } from "@ws/protocol";
import type { Logger } from "@ws/protocol";

export interface AgentServerOptions {
  sink: AgentSink;
  stats: CollectorStats;
  log: Logger;
  nowMs: () => number;
  /** A stream that sends no Hello this long is closed. */
  helloTimeoutMs?: number;
  /**
   * Hellos admitted per second, on average (default 400): beyond it, in a reconnect burst, an
   * agent is answered RESOURCE_EXHAUSTED with a retry hint instead of being served late, so the
   * event loop stays free for Reports and for the leader Lease's renewals.
   */
  hellosPerSecond?: number;
  /** Hellos admitted at once before the rate applies (default: one second's worth). */
  helloBurst?: number;
  /** Reports one stream may send per second, sustained, and at once (defaults MAX_REPORTS_PER_SECOND, REPORT_BURST). */
  reportsPerSecond?: number;
  reportBurst?: number;
  /** Report bytes one stream may send per second, sustained (default MAX_REPORT_BYTES_PER_SECOND); a full bucket holds one message of the largest size. */
  reportBytesPerSecond?: number;
}

/**
 * A token bucket on the injected clock: the admission of Hellos, and per stream the Report rate
 * and the Report byte budget (MAX_REPORT_BYTES_PER_SECOND). A refused agent is told to come back
 * when the agents refused before it will have been admitted (the backlog over the rate), at least
 * a second; the agent spreads that ±50 %.
 */
export class TokenBucket {
  private tokens: number;
  private backlog = 0;
  private lastMs: number | undefined;

  constructor(
    private readonly ratePerSecond: number,
    private readonly burst: number,
    private readonly nowMs: () => number,
  ) {
    this.tokens = burst;
  }

  /** Admits one (undefined), or says after how many ms to retry; `cost` is what it takes of the bucket. */
  admit(cost = 1): number | undefined {
    const now = this.nowMs();
    const elapsed = this.lastMs === undefined ? 0 : Math.max(0, now - this.lastMs) / 1000;
    this.lastMs = now;
    this.tokens = Math.min(this.burst, this.tokens + elapsed * this.ratePerSecond);
    this.backlog = Math.max(0, this.backlog - elapsed * this.ratePerSecond);
    if (this.tokens >= cost) {
      this.tokens -= cost;
      return undefined;
    }
    this.backlog += cost;
    return Math.max(1_000, Math.round((this.backlog / this.ratePerSecond) * 1000));
  }
}

/** Reports one stream may send per second, sustained (agents send one per interval, 15 s by default), and in a burst. */
export const MAX_REPORTS_PER_SECOND = 2;
export const REPORT_BURST = 10;
/**
 * Report bytes one stream may send per second, sustained. The collector's work on a Report grows
 * with its size (decoding, validation, evidence: ~3.7 ms for the largest accepted one against
 * 0.3 ms for a typical 1.3 kB one), so a byte budget is a CPU budget per VM: an agent sending the
 * largest Report every interval gets one through every minute or so, and the other VMs keep
 * their share of the event loop. 4 KiB/s is a 60 kB Report every 15 s, sustained, or a typical
 * Report every 0.3 s; the bucket starts full with one message of the largest size
 * (MAX_AGENT_MESSAGE_BYTES), so a first large Report always passes.
 */
export const MAX_REPORT_BYTES_PER_SECOND = 4 * 1024;

/** Where the gRPC port listens, and how it shares its connection slots (agents/connection-cap.ts, agents/connection-slots.ts). */
export interface AgentListen {
  host: string;
  port: number;
  /** The most connections held at once; past it the oldest pending one is evicted, else the new one is closed (counted); undefined: no cap. */
  maxConnections?: number;
  /** A connection with no authenticated Hello this long after accept is closed (default DEFAULT_HANDSHAKE_TIMEOUT_MS). */
  handshakeTimeoutMs?: number;
  /** Pending (not yet authenticated) connections one source address may hold (default: the standalone one). */
  maxPendingConnectionsPerSource?: number;
}

/** Below this share of the cap again, the next refusal is logged again (one line per episode, not per agent). */
const CAP_EPISODE_END = 0.9;
/** Per-source refusals are logged at most once this often, with how many there were since. */
const PER_SOURCE_LOG_EVERY_MS = 60_000;

/**
 * Closes a connection grpc-js already holds, at once: a reset, as nginx's reset_timedout_connection
 * does. A plain destroy() of a socket whose HTTP/2 session has taken it over leaves the peer
 * connected; the reset reaches it, and the descriptor is freed without a closing handshake.
 */
function closeNow(socket: net.Socket): void {
  try {
    socket.resetAndDestroy();
  } catch {
    // A handle that is no longer TCP (a TLS wrap took it): a plain destroy closes it.
  }
  if (!socket.destroyed) socket.destroy();
}

const retryMetadata = (ms: number): grpc.Metadata => {
  const metadata = new grpc.Metadata();
  metadata.set(RETRY_AFTER_METADATA_KEY, String(Math.round(ms)));
  return metadata;
};

/** One agent stream's conversation: its session once the Hello is authenticated, and its budgets. */
interface AgentConversation {
  stream: BidiServerStream<AgentMessage, CollectorMessage>;
  peer: string;
  session: AgentSession | undefined;
  /** The Hello is being authenticated: messages before the answer are ignored. */
  authenticating: boolean;
  reportBudget: TokenBucket;
  reportBytes: TokenBucket;
  helloTimer: ReturnType<typeof setTimeout>;
  /** The agent's Goodbye reason, once it said one. */
  goodbye?: string;
}

export class AgentServer {
  private readonly server = new grpc.Server(serverChannelOptions());
  private readonly sessions = new Map<string, AgentSession>();
  /** Per VM, the agent's last reported count of errors nobody handled (only VMs that reported one). */
  private readonly agentUnhandled = new Map<string, bigint>();
  private readonly admission: TokenBucket;
  /** The collector's own TCP listener, which hands each connection it keeps to grpc-js (createConnectionInjector). */
  private listener: net.Server | undefined;
  /** Every agent connection open on the port, pending or authenticated (agents/connection-slots.ts). */
  private slots: ConnectionSlots<net.Socket> | undefined;
  private capReached = false;
  /** When a per-source refusal was last logged, and how many since (one line a minute at most, whatever the flood). */
  private perSourceLoggedAtMs: number | undefined;
  private perSourceUnlogged = 0;

  constructor(private readonly options: AgentServerOptions) {
    const rate = options.hellosPerSecond ?? 400;
    this.admission = new TokenBucket(rate, options.helloBurst ?? rate, options.nowMs);
    this.server.addService(serverDefinition(AgentService), {
      connect: bidiHandler<AgentMessage, CollectorMessage>(
        (stream) => this.handle(stream),
        (failure, peer) => {
          options.stats.reportDecodeFailures++;
          options.log("warn", "malformed message from agent; stream closed", {
            peer,
            bytes: failure.byteLength,
            reason: failure.reason,
          });
        },
      ),
    });
  }

  get streamCount(): number {
    return this.sessions.size;
  }

  /** Agent TCP connections open on the gRPC port. */
  get connectionCount(): number {
    return this.slots?.size ?? 0;
  }

  /** Of those, the ones no Hello has authenticated yet. */
  get pendingConnectionCount(): number {
    return this.slots?.pendingCount ?? 0;
  }

  /** The cap on agent connections the port enforces (undefined: none, or not listening). */
  get connectionLimit(): number | undefined {
    return this.slots?.cap;
  }

  /**
   * Listens on the collector's own net.Server and hands each connection to grpc-js through its
   * public connection injector (TLS, when the credentials carry it, is grpc-js's as with
   * bindAsync). Each connection is admitted here, before grpc-js spends anything on it
   * (agents/connection-slots.ts): past its source's share of pending connections, or at the cap
   * with every connection authenticated, it is closed at once (the agent sees a reset
   * and backs off), and a connection that has not authenticated a Hello by the handshake deadline
   * is closed. The process keeps its other descriptors for the API server, the Lease and the scrapes.
   */
  async listen(address: AgentListen, credentials: grpc.ServerCredentials): Promise<number> {
    const { log, stats } = this.options;
    const injector = this.server.createConnectionInjector(credentials);
    const slots = new ConnectionSlots<net.Socket>({
      cap: address.maxConnections,
      maxPendingPerSource: address.maxPendingConnectionsPerSource ?? DEFAULT_PENDING_PER_SOURCE.standalone,
    });
    const handshakeTimeoutMs = address.handshakeTimeoutMs ?? DEFAULT_HANDSHAKE_TIMEOUT_MS;
    this.slots = slots;
    const listener = net.createServer((socket) => {
      const { remoteAddress, remotePort } = socket;
      if (remoteAddress === undefined || remotePort === undefined) {
        socket.destroy();
        return;
      }
      // grpc-js's getPeer() of every stream on this connection, so the Hello's outcome finds its slot.
      const key = `${remoteAddress}:${remotePort}`;
      const source = connectionSource(remoteAddress);
      const admission = slots.admit(source);
      if (admission.kind === "refuse") {
        socket.destroy();
        this.refused(admission.reason, source);
        return;
      }
      if (admission.kind === "evict") {
        stats.countConnectionEviction("cap");
        const victim = slots.handle(admission.victim);
        if (victim) closeNow(victim);
        slots.remove(admission.victim);
      }
      slots.add(key, source, socket);
      const deadline = setTimeout(() => {
        if (!slots.isPending(key) || slots.handle(key) !== socket) return;
        stats.agentConnectionsDeadlineClosed++;
        closeNow(socket);
      }, handshakeTimeoutMs);
      socket.once("close", () => {
        clearTimeout(deadline);
        if (slots.handle(key) === socket) slots.remove(key);
        const cap = slots.cap;
        if (this.capReached && cap !== undefined && slots.size < cap * CAP_EPISODE_END) {
          this.capReached = false;
          log("info", "agent connections below their cap again", { connections: slots.size, cap });
        }
      });
      injector.injectConnection(socket);
    });
    await new Promise<void>((resolve, reject) => {
      listener.once("error", reject);
      listener.listen(address.port, address.host, () => {
        listener.off("error", reject);
        resolve();
      });
    });
    // Accept failures (EMFILE when the reserve was spent elsewhere) must not end the process.
    listener.on("error", (error) => log("error", `gRPC listener: ${errorMessage(error)}`));
    this.listener = listener;
    return (listener.address() as AddressInfo).port;
  }

  /** Counts and logs a connection closed at accept: the port at its cap, or its source at its share of pending connections. */
  private refused(reason: "cap" | "per-source", source: string): void {
    const { log, stats, nowMs } = this.options;
    if (reason === "per-source") {
      stats.agentConnectionsRefusedPerSource++;
      this.perSourceUnlogged++;
      const now = nowMs();
      if (this.perSourceLoggedAtMs !== undefined && now - this.perSourceLoggedAtMs < PER_SOURCE_LOG_EVERY_MS) return;
      log(
        "warn",
        "refused agent connections from one source holding its share of unauthenticated connections (grpc.maxPendingConnectionsPerSource; workstation_agent_connections_per_source_refused_total)",
        { source, refused: this.perSourceUnlogged },
      );
      this.perSourceLoggedAtMs = now;
      this.perSourceUnlogged = 0;
      return;
    }
    stats.agentConnectionsRefused++;
    if (this.capReached) return;
    this.capReached = true;
    log(
      "warn",
      "agent connections at their cap: refusing new ones until some close (workstation_agent_connections_refused_total; docs/install.md, Sizing)",
      { cap: this.slots?.cap },
    );
  }

  async close(): Promise<void> {
    // No new connections; grpc-js's shutdown below closes the ones it holds (its injector's too).
    this.listener?.close();
    for (const session of this.sessions.values()) session.close(grpc.status.UNAVAILABLE, "collector shutting down");
    await new Promise<void>((resolve) => {
      const timer = setTimeout(() => {
        this.server.forceShutdown();
        resolve();
      }, 2_000);
      this.server.tryShutdown(() => {
        clearTimeout(timer);
        resolve();
      });
    });
  }

  private handle(stream: BidiServerStream<AgentMessage, CollectorMessage>): void {
    const { nowMs } = this.options;
    const conversation: AgentConversation = {
      stream,
      peer: stream.peer(),
      session: undefined,
      authenticating: false,
      reportBudget: new TokenBucket(
        this.options.reportsPerSecond ?? MAX_REPORTS_PER_SECOND,
        this.options.reportBurst ?? REPORT_BURST,
        nowMs,
      ),
      reportBytes: new TokenBucket(
        this.options.reportBytesPerSecond ?? MAX_REPORT_BYTES_PER_SECOND,
        MAX_AGENT_MESSAGE_BYTES,
        nowMs,
      ),
      helloTimer: setTimeout(() => {
        if (!conversation.session) stream.fail(grpc.status.DEADLINE_EXCEEDED, "no Hello within the time allowed");
      }, this.options.helloTimeoutMs ?? 10_000),
    };

    stream.onMessage((message) => {
      const session = conversation.session;
      if (!session) {
        if (conversation.authenticating) return;
        this.hello(conversation, message);
        return;
      }
      this.report(conversation, session, message);
    });

    stream.onEnd((reason) => {
      clearTimeout(conversation.helloTimer);
      const session = conversation.session;
      if (!session) return;
      if (this.sessions.get(vmId(session.vm)) === session) {
        this.sessions.delete(vmId(session.vm));
        const { goodbye } = conversation;
        this.options.log("info", goodbye === undefined ? "agent disconnected" : "agent stopped on purpose", {
          vm: vmId(session.vm),
          reason: goodbye ?? reason,
        });
        this.options.sink.disconnected(session, reason, goodbye);
      }
    });
  }

  /** The stream's first message: a Hello, validated, admitted at the pace allowed, then authenticated. */
  private hello(conversation: AgentConversation, message: AgentMessage): void {
    const { sink, stats, log } = this.options;
    const { stream, peer } = conversation;
    const payload = message.payload;
    if (payload.case !== "hello") {
      stream.fail(grpc.status.FAILED_PRECONDITION, "the first message must be Hello");
      return;
    }
    let vm: VmKey;
    try {
      vm = validateHello(payload.value);
    } catch (error) {
      stats.countAuthFailure("invalid-hello");
      log("warn", `refused agent: ${errorMessage(error)}`, { peer });
      stream.fail(grpc.status.INVALID_ARGUMENT, errorMessage(error));
      return;
    }
    const retryAfter = this.admission.admit();
    if (retryAfter !== undefined) {
      stats.streamsRefusedBusy++;
      stream.fail(
        grpc.status.RESOURCE_EXHAUSTED,
        `collector busy admitting agents; retry in ${(retryAfter / 1000).toFixed(1)} s`,
        retryMetadata(retryAfter),
      );
      return;
    }
    conversation.authenticating = true;
    void Promise.resolve(sink.authenticate(vm, payload.value.token, peer)).then((result) => {
      conversation.authenticating = false;
      if (!result.ok) {
        stats.countAuthFailure(result.kind ?? (result.code === grpc.status.UNAUTHENTICATED ? "bad-token" : "identity"));
        log("warn", `refused agent for ${vmId(vm)}: ${result.reason}`, { peer, vm: vmId(vm) });
        stream.fail(result.code, result.reason);
        return;
      }
      clearTimeout(conversation.helloTimer);
      this.helloAccepted(conversation, vm, payload.value);
    });
  }

  /** An authenticated Hello: a probe is answered and ended; an agent's session replaces the VM's older one. */
  private helloAccepted(conversation: AgentConversation, vm: VmKey, hello: Hello): void {
    const { sink, stats, log, nowMs } = this.options;
    const { stream, peer } = conversation;
    if (hello.probe) {
      // `ws-agent probe`: the answer is the OK status; the VM's own stream stays as it is.
      log("info", "agent probe authenticated", { vm: vmId(vm), peer });
      stream.end();
      return;
    }
    const current: AgentSession = {
      vm,
      hello,
      peer,
      connectedAtMs: nowMs(),
      send: (directive) => {
        stream.write(create(CollectorMessageSchema, { payload: { case: "directive", value: directive } }));
      },
      close: (code, details, retryAfterMs) =>
        stream.fail(code, details, retryAfterMs === undefined ? undefined : retryMetadata(retryAfterMs)),
    };
    this.connectionAuthenticated(peer, vm);
    const previous = this.sessions.get(vmId(vm));
    if (previous) previous.close(grpc.status.ABORTED, "replaced by a newer connection from the same VM");
    conversation.session = current;
    this.sessions.set(vmId(vm), current);
    stats.streamsOpened++;
    log("info", "agent connected", { vm: vmId(vm), peer, version: hello.agentVersion, boot: hello.bootId });
    sink.connected(current);
  }

  /** A message after the Hello: a Report, validated (cut to the caps), paced, then handed to the sink. */
  private report(conversation: AgentConversation, session: AgentSession, message: AgentMessage): void {
    const { sink, stats, log, nowMs } = this.options;
    const { stream, peer } = conversation;
    const payload = message.payload;
    if (payload.case === "goodbye") {
      // The agent is stopped on purpose; its stream ends next (an agent that vanishes never says this).
      conversation.goodbye = safeGoodbye(payload.value.reason);
      return;
    }
    if (payload.case !== "report") {
      stream.fail(grpc.status.FAILED_PRECONDITION, "only Reports and a Goodbye may follow Hello");
      return;
    }
    let truncated: readonly string[] = [];
    try {
      const cuts = validateReport(payload.value);
      if (cuts.length > 0) {
        for (const cut of cuts) stats.countTruncation(cut.field);
        truncated = cuts.map(describeTruncation);
      }
    } catch (error) {
      stats.reportValidationFailures++;
      const details = error instanceof ValidationError ? error.message : String(error);
      log("warn", `invalid report; stream closed: ${details}`, { vm: vmId(session.vm), peer });
      stream.fail(grpc.status.INVALID_ARGUMENT, details);
      return;
    }
    stats.reportsReceived++;
    this.countAgentUnhandledErrors(session.vm, payload.value.agentUnhandledErrors);
    // One agent cannot buy more of the event loop than its share: Reports beyond the rate, in
    // number or in bytes, are dropped (the next one is newer anyway).
    const bytes = wireBytesOf(message);
    if (
      conversation.reportBudget.admit() !== undefined ||
      conversation.reportBytes.admit(bytes?.byteLength ?? 0) !== undefined
    ) {
      stats.reportsRateLimited++;
      return;
    }
    // Kept whole: the collector may hold the bytes instead of the decoded Report (model/compact-report.ts).
    if (truncated.length === 0 && bytes) rememberWire(payload.value, bytes);
    sink.report(session, payload.value, nowMs(), truncated);
  }

  /**
   * The connection under `peer` carries an authenticated agent of `vm`: its handshake deadline no
   * longer applies, and the VM's older connection, if any, is closed (a VM's token holds one slot).
   */
  private connectionAuthenticated(peer: string, vm: VmKey): void {
    const previous = this.slots?.authenticated(peer, vmId(vm));
    if (!previous) return;
    this.options.stats.countConnectionEviction("same-vm");
    closeNow(previous);
  }

  /**
   * Agents send how many errors nobody handled since they started; the collector sums the
   * increases per VM (a lower value is a restarted agent counting from 0 again). Only VMs that
   * ever reported one are remembered, and one Report adds at most MAX_UNHANDLED_STEP.
   */
  private countAgentUnhandledErrors(vm: VmKey, reported: bigint): void {
    const id = vmId(vm);
    const previous = this.agentUnhandled.get(id) ?? 0n;
    if (reported === previous) return;
    if (reported > previous) {
      const step = reported - previous;
      this.options.stats.agentUnhandledErrors += Number(step > MAX_UNHANDLED_STEP ? MAX_UNHANDLED_STEP : step);
    }
    this.agentUnhandled.set(id, reported);
  }
}
