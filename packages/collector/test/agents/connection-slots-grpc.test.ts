// One client cannot hold the agent port's connection slots, over real gRPC on loopback (agents/
// connection-slots.ts, enforced by agents/server.ts's listener): idle TCP sockets and HTTP/2
// sessions that answer pings are closed at the handshake deadline while an authenticated agent's
// connection stays (TLS too); a source past its share of unauthenticated connections is refused
// while agents from another address, and many from one address once authenticated, get in; at
// the cap a new agent takes the oldest unauthenticated connection's slot; and a VM's newer
// connection closes its older one. The hostile client connects from 127.0.0.2, the agents from
// 127.0.0.1 (both loopback).
import * as grpc from "@grpc/grpc-js";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import http2 from "node:http2";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { create } from "@bufbuild/protobuf";
import {
  AgentMessageSchema,
  AgentService,
  clientChannelOptions,
  DirectiveSchema,
  PROTOCOL_VERSION,
  ReportSchema,
  type CollectorMessage,
} from "@ws/protocol";
import { clientConstructor, openBidi } from "@ws/protocol/grpc";
import { afterEach, describe, expect, it } from "vitest";
import { openAgentStream, type AgentStream } from "../../../../bench/lib/agent-stream.js";
import { selfSignedCertificate } from "../../../../test/support/prometheus.js";
import { type AgentListen, AgentServer, type AgentSink } from "../../src/agents/server.js";
import { CollectorStats } from "../../src/lib/stats.js";

const HOSTILE = "127.0.0.2";

interface Port {
  server: AgentServer;
  stats: CollectorStats;
  address: string;
  port: number;
}

const cleanups: Array<() => unknown> = [];

afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** Answers every Hello and every Report with a Directive, so a client sees its stream is served. */
const answeringSink: AgentSink = {
  authenticate: (_vm, token) =>
    token === "t" ? { ok: true } : { ok: false, code: grpc.status.UNAUTHENTICATED, reason: "bad token" },
  connected: (session) => session.send(create(DirectiveSchema, {})),
  report: (session) => session.send(create(DirectiveSchema, {})),
  disconnected: () => {},
};

async function startPort(
  listen: Omit<AgentListen, "host" | "port">,
  credentials = grpc.ServerCredentials.createInsecure(),
): Promise<Port> {
  const stats = new CollectorStats();
  const server = new AgentServer({ sink: answeringSink, stats, log: () => {}, nowMs: () => Date.now() });
  const port = await server.listen({ host: "127.0.0.1", port: 0, ...listen }, credentials);
  cleanups.push(() => server.close());
  return { server, stats, port, address: `127.0.0.1:${port}` };
}

/** An agent's stream, resolved once its Hello is answered; `served()` resolves when a Report is answered. */
function agent(
  port: Port,
  name: string,
  credentials?: grpc.ChannelCredentials,
): Promise<{ stream: AgentStream; served(): Promise<void>; ended: () => string | undefined }> {
  return new Promise((resolve, reject) => {
    let directives = 0;
    let ended: string | undefined;
    let waiting: (() => void) | undefined;
    const stream = openAgentStream(
      port.address,
      { namespace: "lab", name },
      "t",
      {
        onDirective: () => {
          directives++;
          if (directives === 1)
            resolve({
              stream,
              ended: () => ended,
              served: () =>
                new Promise<void>((answered) => {
                  waiting = answered;
                  stream.sendReport(create(ReportSchema, { sequence: 1n, intervalSeconds: 15 }));
                }),
            });
          else waiting?.();
        },
        onEnd: (reason) => {
          ended = reason;
          reject(new Error(`${name}: stream ended: ${reason}`));
        },
      },
      [],
      credentials,
    );
    cleanups.push(() => stream.close());
  });
}

/** A hostile connection: an idle TCP socket from HOSTILE; `closed` is set when the collector closes it. */
async function idleSocket(port: Port): Promise<{ closed: () => boolean }> {
  const socket = net.connect({ host: "127.0.0.1", port: port.port, localAddress: HOSTILE });
  let closed = false;
  socket.on("error", () => {});
  socket.on("close", () => {
    closed = true;
  });
  await new Promise<void>((resolve) => socket.once("connect", () => resolve()));
  cleanups.push(() => socket.destroy());
  return { closed: () => closed };
}

/** A hostile HTTP/2 session from HOSTILE that answers the server's pings (Node does) and never opens a stream. */
async function pingingSession(port: Port): Promise<{ closed: () => boolean }> {
  let closed = false;
  const session = http2.connect(`http://127.0.0.1:${port.port}`, {
    createConnection: () => net.connect({ host: "127.0.0.1", port: port.port, localAddress: HOSTILE }),
  });
  session.on("error", () => {});
  // Its own pings too, so the session is as alive as an HTTP/2 peer can be.
  const pinger = setInterval(() => {
    if (!session.destroyed) session.ping(() => {});
  }, 100);
  session.on("close", () => {
    closed = true;
    clearInterval(pinger);
  });
  await new Promise<void>((resolve) => session.once("connect", () => resolve()));
  cleanups.push(() => {
    clearInterval(pinger);
    session.destroy();
  });
  return { closed: () => closed };
}

async function until(what: string, probe: () => boolean): Promise<void> {
  for (let i = 0; i < 600; i++) {
    if (probe()) return;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  throw new Error(`timed out waiting for ${what}`);
}

describe("the agent port's connection slots", () => {
  it("closes idle sockets and pinging HTTP/2 sessions at the handshake deadline, never an authenticated agent", async () => {
    const port = await startPort({ handshakeTimeoutMs: 300 });
    const held = await agent(port, "vm-0");
    const hostile = [await idleSocket(port), await pingingSession(port), await idleSocket(port)];
    // Opened after the agent, so the agent's own deadline passed before theirs.
    await until("the hostile connections closed", () => hostile.every((connection) => connection.closed()));
    expect(port.stats.agentConnectionsDeadlineClosed).toBe(3);
    await held.served();
    expect(held.ended()).toBeUndefined();
    expect(port.server.connectionCount).toBe(1);
  });

  it("finds a TLS agent's connection too: it outlives the deadline that closes a socket that never speaks TLS", async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), "ws-slots-tls-"));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    const { certFile, keyFile } = selfSignedCertificate(dir);
    const port = await startPort(
      { handshakeTimeoutMs: 300 },
      grpc.ServerCredentials.createSsl(
        null,
        [{ cert_chain: readFileSync(certFile), private_key: readFileSync(keyFile) }],
        false,
      ),
    );
    const held = await agent(port, "vm-0", grpc.credentials.createSsl(readFileSync(certFile)));
    const hostile = await idleSocket(port);
    await until("the socket without TLS closed", () => hostile.closed());
    expect(port.stats.agentConnectionsDeadlineClosed).toBe(1);
    await held.served();
    expect(port.server.connectionCount).toBe(1);
  });

  it("refuses a source past its share of unauthenticated connections; agents elsewhere, and many authenticated from one address, get in", async () => {
    const port = await startPort({ maxPendingConnectionsPerSource: 3 });
    const hostile: Array<{ closed: () => boolean }> = [];
    for (let i = 0; i < 5; i++) hostile.push(await idleSocket(port));
    await until("two refused", () => hostile.filter((connection) => connection.closed()).length === 2);
    expect(hostile.slice(0, 3).every((connection) => !connection.closed())).toBe(true);
    expect(port.stats.agentConnectionsRefusedPerSource).toBe(2);
    // Five agents from one address, more than its share: each is pending only until its Hello authenticates.
    const agents = [];
    for (let i = 0; i < 5; i++) agents.push(await agent(port, `vm-${i}`));
    for (const held of agents) await held.served();
    expect(port.server.connectionCount).toBe(8);
    expect(port.server.pendingConnectionCount).toBe(3);
  });

  it("at the cap, lets a new agent in in place of the oldest unauthenticated connection", async () => {
    const port = await startPort({ maxConnections: 4 });
    const hostile: Array<{ closed: () => boolean }> = [];
    for (let i = 0; i < 4; i++) hostile.push(await idleSocket(port));
    await until("the cap held", () => port.server.connectionCount === 4);
    const first = await agent(port, "vm-0");
    await until("the oldest hostile socket evicted", () => hostile[0]!.closed());
    const second = await agent(port, "vm-1");
    await until("the next oldest evicted", () => hostile[1]!.closed());
    expect(hostile.map((connection) => connection.closed())).toEqual([true, true, false, false]);
    expect(port.stats.agentConnectionsEvicted.get("cap")).toBe(2);
    // Two agents and two hostile sockets: the agents' slots are not taken from them.
    await idleSocket(port);
    await until("the oldest hostile socket left evicted", () => hostile[2]!.closed());
    await first.served();
    await second.served();
    expect(port.stats.agentConnectionsEvicted.get("cap")).toBe(3);
    expect(port.stats.agentConnectionsRefused).toBe(0);
  });

  it("gives a VM one connection: a newer one authenticated as the same VM closes the older", async () => {
    const port = await startPort({});
    // A client that keeps its connection after its stream ends (ws-agent closes it; a hostile one need not).
    const Client = clientConstructor(AgentService);
    const hello = (client: grpc.Client) =>
      new Promise<void>((resolve) => {
        const call = openBidi(client, AgentService, "connect", new grpc.Metadata());
        call.on("data", (_message: CollectorMessage) => resolve());
        call.on("error", () => {});
        call.write(
          create(AgentMessageSchema, {
            payload: {
              case: "hello",
              value: {
                vm: { namespace: "lab", name: "vm-0" },
                token: "t",
                agentVersion: "test",
                bootId: "00000000-0000-4000-8000-000000000000",
                protocolVersion: PROTOCOL_VERSION,
              },
            },
          }),
        );
      });
    const clients = [0, 1].map(
      () =>
        new Client(port.address, grpc.credentials.createInsecure(), {
          ...clientChannelOptions(),
          "grpc.use_local_subchannel_pool": 1,
        }),
    );
    for (const client of clients) cleanups.push(() => client.close());
    await hello(clients[0]!);
    await hello(clients[1]!);
    // The collector closed the older client's connection (its channel is no longer READY), not only its stream.
    await until(
      "the older connection closed",
      () => clients[0]!.getChannel().getConnectivityState(false) !== grpc.connectivityState.READY,
    );
    expect(clients[1]!.getChannel().getConnectivityState(false)).toBe(grpc.connectivityState.READY);
    expect(port.server.connectionCount).toBe(1);
    expect(port.stats.agentConnectionsEvicted.get("same-vm")).toBe(1);
  });
});
