// The gRPC side: one bidi stream per VM. Authenticates the Hello, validates
// every Report, and hands them on; a bad stream is closed alone.
import * as grpc from "@grpc/grpc-js";
import { create } from "@bufbuild/protobuf";
import {
  AgentService,
  bidiHandler,
  CollectorMessageSchema,
  serverChannelOptions,
  serverDefinition,
  type AgentMessage,
  type CollectorMessage,
  type Directive,
  type Hello,
  type Report,
} from "@ws/protocol";
import type { CollectorStats } from "../stats.js";
import { validateHello, validateReport, ValidationError } from "./validate.js";

export interface VmKey {
  namespace: string;
  name: string;
}
export const vmId = (vm: VmKey) => `${vm.namespace}/${vm.name}`;

/** `kind` is the bounded label of workstation_auth_failures_total (default: bad-token / identity by code). */
export type AuthResult = { ok: true } | { ok: false; code: grpc.status; reason: string; kind?: string };

export interface AgentSession {
  readonly vm: VmKey;
  readonly hello: Hello;
  readonly peer: string;
  readonly connectedAtMs: number;
  send(directive: Directive): void;
  close(code: grpc.status, details: string): void;
}

export interface AgentSink {
  authenticate(vm: VmKey, token: string, peer: string): Promise<AuthResult> | AuthResult;
  connected(session: AgentSession): void;
  report(session: AgentSession, report: Report, receivedAtMs: number): void;
  disconnected(session: AgentSession, reason: string): void;
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
}

export class AgentServer {
  private readonly server = new grpc.Server(serverChannelOptions());
  private readonly sessions = new Map<string, AgentSession>();

  constructor(private readonly options: AgentServerOptions) {
    this.server.addService(serverDefinition(AgentService), {
      connect: bidiHandler<AgentMessage, CollectorMessage>(
        (stream) => this.handle(stream),
        (failure, peer) => {
          options.stats.reportDecodeFailures++;
          options.log("warn", "malformed message from agent; stream closed", { peer, bytes: failure.byteLength, reason: failure.reason });
        },
      ),
    });
  }

  get streamCount(): number {
    return this.sessions.size;
  }

  async listen(address: string, credentials: grpc.ServerCredentials): Promise<number> {
    return new Promise((resolve, reject) => {
      this.server.bindAsync(address, credentials, (error, port) => (error ? reject(error) : resolve(port)));
    });
  }

  async close(): Promise<void> {
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

  private handle(stream: import("@ws/protocol").BidiServerStream<AgentMessage, CollectorMessage>): void {
    const { sink, stats, log, nowMs } = this.options;
    let session: AgentSession | undefined;
    let authenticating = false;
    const peer = stream.peer();
    const helloTimer = setTimeout(() => {
      if (!session) stream.fail(grpc.status.DEADLINE_EXCEEDED, "no Hello within the time allowed");
    }, this.options.helloTimeoutMs ?? 10_000);

    stream.onMessage((message) => {
      const payload = message.payload;
      if (!session) {
        if (authenticating) return;
        if (payload.case !== "hello") {
          stream.fail(grpc.status.FAILED_PRECONDITION, "the first message must be Hello");
          return;
        }
        let vm: VmKey;
        try {
          vm = validateHello(payload.value);
        } catch (error) {
          stats.countAuthFailure("invalid-hello");
          log("warn", `refused agent: ${(error as Error).message}`, { peer });
          stream.fail(grpc.status.INVALID_ARGUMENT, (error as Error).message);
          return;
        }
        authenticating = true;
        void Promise.resolve(sink.authenticate(vm, payload.value.token, peer)).then((result) => {
          authenticating = false;
          if (!result.ok) {
            stats.countAuthFailure(result.kind ?? (result.code === grpc.status.UNAUTHENTICATED ? "bad-token" : "identity"));
            log("warn", `refused agent for ${vmId(vm)}: ${result.reason}`, { peer, vm: vmId(vm) });
            stream.fail(result.code, result.reason);
            return;
          }
          clearTimeout(helloTimer);
          const hello = payload.value;
          const current: AgentSession = {
            vm,
            hello,
            peer,
            connectedAtMs: nowMs(),
            send: (directive) => {
              stream.write(create(CollectorMessageSchema, { payload: { case: "directive", value: directive } }));
            },
            close: (code, details) => stream.fail(code, details),
          };
          const previous = this.sessions.get(vmId(vm));
          if (previous) previous.close(grpc.status.ABORTED, "replaced by a newer connection from the same VM");
          session = current;
          this.sessions.set(vmId(vm), current);
          stats.streamsOpened++;
          log("info", "agent connected", { vm: vmId(vm), peer, version: hello.agentVersion, boot: hello.bootId });
          sink.connected(current);
        });
        return;
      }
      if (payload.case !== "report") {
        stream.fail(grpc.status.FAILED_PRECONDITION, "only Reports may follow Hello");
        return;
      }
      try {
        validateReport(payload.value);
      } catch (error) {
        stats.reportValidationFailures++;
        const details = error instanceof ValidationError ? error.message : String(error);
        log("warn", `invalid report; stream closed: ${details}`, { vm: vmId(session.vm), peer });
        stream.fail(grpc.status.INVALID_ARGUMENT, details);
        return;
      }
      stats.reportsReceived++;
      sink.report(session, payload.value, nowMs());
    });

    stream.onEnd((reason) => {
      clearTimeout(helloTimer);
      if (!session) return;
      if (this.sessions.get(vmId(session.vm)) === session) {
        this.sessions.delete(vmId(session.vm));
        log("info", "agent disconnected", { vm: vmId(session.vm), reason });
        sink.disconnected(session, reason);
      }
    });
  }
}
