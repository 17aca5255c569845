import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import http2 from "node:http2";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startFakeKube, type FakeKube } from "../support/fake-kube/index.js";
import { collectorToken, kubeCollectorConfig, startFrozenAgent, type FrozenAgent } from "../support/kube-agent.js";
import {
  collectorBundle,
  eventually,
  getText,
  requireBundles,
  requirePrlimit,
  start,
  type Proc,
} from "../support/process.js";

const NS = "slots";
const NOFILE = 128;
const CAP = 64;
/** The Kubernetes default of grpc.maxPendingConnectionsPerSource (agents/connection-slots.ts). */
const PER_SOURCE = 8;
/** Eight sources fill the cap at their share (and try two more each); a ninth keeps two more knocking. */
const HOSTILE_SOURCES = [
  ...Array.from({ length: 8 }, (_, i) => ({ address: `127.0.0.${i + 2}`, connections: PER_SOURCE + 2 })),
  { address: "127.0.0.10", connections: 2 },
];

let dir: string;

beforeAll(() => {
  requireBundles();
  requirePrlimit();
  dir = mkdtempSync(path.join(os.tmpdir(), "ws34-slots-"));
});

afterAll(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/**
 * The hostile client: keeps `connections` open from `address`, every other one an HTTP/2 session
 * that answers the collector's keepalive pings (so keepalive never closes it), never opening a
 * stream; each one closed is opened again 50 ms later (so a slot the collector frees is the
 * flood's again before an agent's retry can take it). `stop()` ends it.
 */
function flood(port: number, address: string, connections: number): { stop(): void } {
  let stopped = false;
  const open = new Set<{ destroy(): void }>();
  const reopen = (slot: number) => {
    if (!stopped) setTimeout(() => connect(slot), 50);
  };
  const connect = (slot: number) => {
    if (stopped) return;
    const socket = () => net.connect({ host: "127.0.0.1", port, localAddress: address });
    if (slot % 2 === 0) {
      const raw = socket();
      open.add(raw);
      raw.on("error", () => {});
      raw.on("close", () => {
        open.delete(raw);
        reopen(slot);
      });
      return;
    }
    // Node's HTTP/2 client answers the collector's keepalive pings by itself.
    const session = http2.connect(`http://127.0.0.1:${port}`, { createConnection: socket });
    open.add(session);
    session.on("error", () => {});
    session.on("close", () => {
      open.delete(session);
      reopen(slot);
    });
  };
  for (let slot = 0; slot < connections; slot++) connect(slot);
  return {
    stop() {
      stopped = true;
      for (const connection of open) connection.destroy();
    },
  };
}

describe("a hostile client on the agent port", () => {
  let kube: FakeKube | undefined;
  let collector: Proc | undefined;
  const floods: Array<{ stop(): void }> = [];
  const agents: FrozenAgent[] = [];

  afterAll(async () => {
    for (const hostile of floods) hostile.stop();
    for (const agent of agents) await agent.proc.stop();
    await collector?.stop();
    await kube?.close();
  });

  it("does not keep real agents out: they connect within their backoff, and the collector counts what it closed", async () => {
    kube = await startFakeKube();
    for (const name of ["vm-a", "vm-b"]) kube.seedWorkstation({ namespace: NS, name, podIp: "127.0.0.1" });
    const {
      file: config,
      keyFile,
      grpcPort,
      httpPort,
    } = await kubeCollectorConfig(dir, {
      // The shortest deadline, so that this test sees it close the flood's connections (default 30s).
      grpc: "handshakeTimeout: 1s",
      extra: "policy:\n  defaults: { autostop: enabled, mode: observe, idle-timeout: 2h }\n",
    });
    collector = start(
      collectorBundle,
      ["serve", "--kubeconfig", kube.kubeconfigPath, "--config", config],
      { POD_NAME: "ws34-slots-collector" },
      { launcher: ["prlimit", `--nofile=${NOFILE}:${NOFILE}`, "--"] },
    );
    await collector.waitFor(/became the leader/, 60_000);
    expect(collector.output()).toContain(`agentConnections="${CAP} (open-file limit ${NOFILE} less ${NOFILE - CAP})"`);
    const metrics = async () => {
      const { status, body } = await getText(`http://127.0.0.1:${httpPort}/metrics`);
      expect(status).toBe(200);
      return (name: string) => Number(body.match(new RegExp(`^${name} (\\S+)$`, "m"))?.[1] ?? Number.NaN);
    };

    const tokens = new Map<string, string>();
    for (const name of ["vm-a", "vm-b"]) tokens.set(name, await collectorToken(keyFile, NS, name));

    // The flood takes every slot before any agent starts.
    for (const source of HOSTILE_SOURCES) floods.push(flood(grpcPort, source.address, source.connections));
    await eventually(
      async () => (await metrics())("workstation_agent_connections") === CAP,
      60_000,
      "the flood holding the cap",
    );

    for (const [name, token] of tokens) {
      const root = path.join(dir, name);
      mkdirSync(root, { recursive: true });
      agents.push(startFrozenAgent({ root, namespace: NS, name, grpcPort, token }));
    }
    // The agents retry with backoff (1 s doubling to 60 s, ws-agent's RECONNECT_BACKOFF): both get
    // in within its ceiling while the flood goes on. (Before the fix only grpc-js's keepalive ever
    // freed a slot: an idle socket's after 70 s, a pinging session's never.)
    await Promise.all(agents.map((agent) => agent.proc.waitFor(/connected to collector/, 60_000)));
    await eventually(
      async () => (await metrics())("workstation_agent_streams") === 2,
      60_000,
      "both agents' streams held",
    );

    // The flood's sources were refused past their share and its connections evicted for newer ones
    // at the cap.
    for (const counter of [
      "workstation_agent_connections_per_source_refused_total",
      'workstation_agent_connections_evicted_total\\{reason="cap"\\}',
    ])
      await eventually(async () => (await metrics())(counter) > 0, 60_000, `${counter} counted`);

    // The handshake deadline: whether a flood connection lives out its second before a newer one
    // evicts it depends on how busy the machine is, so the deadline is shown on its own: the flood
    // ends, one idle socket from a fresh source stays, and the collector closes it.
    for (const hostile of floods) hostile.stop();
    const idle = net.connect({ host: "127.0.0.1", port: grpcPort, localAddress: "127.0.0.11" });
    idle.on("error", () => {});
    const idleClosed = new Promise<void>((resolve) => idle.on("close", () => resolve()));
    await eventually(
      async () => (await metrics())("workstation_agent_connections_deadline_closed_total") > 0,
      60_000,
      "workstation_agent_connections_deadline_closed_total counted",
    );
    await idleClosed;
    const sample = await metrics();
    expect(sample("workstation_agent_connections_limit")).toBe(CAP);
    expect(sample("workstation_agent_streams")).toBe(2);
    expect(sample("process_max_fds")).toBe(NOFILE);
    expect(sample("workstation_collector_leader")).toBe(1);
    expect((await getText(`http://127.0.0.1:${httpPort}/healthz`)).status).toBe(200);
    expect(collector.output()).not.toMatch(/EMFILE/);
  }, 300_000);
});
