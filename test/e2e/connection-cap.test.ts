// A collector at its open-file limit keeps its Lease: the bundled collector in Kubernetes mode
// (against the fake API server, the one fake allowed) runs under `prlimit --nofile=128:128`, so
// its cap on agent connections is 64 (the limit less half of it, agents/connection-cap.ts), and
// 100 agents, each on its own connection, connect at once. The 36 over the cap are refused right
// after accept (or, while the held ones are still unauthenticated, take the oldest one's place:
// agents/connection-slots.ts) and counted; the 64 held are served; /healthz and /metrics answer; and the Lease
// keeps being renewed by this replica, which never steps down (before the cap, the accepted
// sockets used up the descriptors and the Lease renewals failed with `connect EMFILE`).
import { execFile } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { create } from "@bufbuild/protobuf";
import { ReportSchema } from "@ws/protocol";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openAgentStream, type AgentStream } from "../../bench/lib/agent-stream.js";
import { tokenFor } from "../../packages/collector/src/links/agent-token.js";
import { resourceByKind, startFakeKube, type FakeKube } from "../support/fake-kube/index.js";
import { kubeCollectorConfig } from "../support/kube-agent.js";
import {
  collectorBundle,
  eventually,
  getText,
  requireBundles,
  requirePrlimit,
  start,
  type Proc,
} from "../support/process.js";

const _run = promisify(execFile);
const LEASE = resourceByKind("Lease");
const NS = "fd-cap";
const NOFILE = 128;
const CAP = 64;
const AGENTS = 100;

let dir: string;

beforeAll(() => {
  requireBundles();
  requirePrlimit();
  dir = mkdtempSync(path.join(os.tmpdir(), "ws27-fd-cap-"));
});

afterAll(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
});

interface Agent {
  name: string;
  stream: AgentStream;
  /** Directives received: the first answers the Hello. */
  directives: number;
  /** Why the collector ended the stream, if it did. */
  ended?: string;
}

describe("a collector at its open-file limit", () => {
  let kube: FakeKube | undefined;
  let collector: Proc | undefined;
  const agents: Agent[] = [];

  afterAll(async () => {
    for (const agent of agents) agent.stream.close();
    await collector?.stop();
    await kube?.close();
  });

  it("refuses the agents past its cap, serves the others and keeps renewing its Lease", async () => {
    kube = await startFakeKube();
    for (let i = 0; i < AGENTS; i++) kube.seedWorkstation({ namespace: NS, name: `vm-${i}`, podIp: "127.0.0.1" });
    const {
      file: config,
      keyText,
      grpcPort,
      httpPort,
    } = await kubeCollectorConfig(dir, {
      // All 100 VMs share 127.0.0.1 here (a real cluster gives each its launcher pod's IP): let
      // them all be unauthenticated at once, as the burst has them, so only the cap refuses.
      grpc: `maxPendingConnectionsPerSource: ${AGENTS}`,
      extra: "policy:\n  defaults: { autostop: enabled, mode: observe, idle-timeout: 2h }\n",
    });
    collector = start(
      collectorBundle,
      ["serve", "--kubeconfig", kube.kubeconfigPath, "--config", config],
      { POD_NAME: "ws27-fd-collector" },
      { launcher: ["prlimit", `--nofile=${NOFILE}:${NOFILE}`, "--"] },
    );
    await collector.waitFor(/became the leader/, 60_000);
    const output = collector.output();
    // The cap comes from the limit the process runs under, and the start says it cannot hold the fleet.
    expect(output).toContain(`agentConnections="${CAP} (open-file limit ${NOFILE} less ${NOFILE - CAP})"`);
    expect(output).toContain(
      `the open-file limit (${NOFILE}) holds ${CAP} agent connections (${NOFILE - CAP} kept for the rest of the collector), fewer than the ${AGENTS} VMs it serves`,
    );

    const renewals = () =>
      kube!.requests.filter((r) => r.method === "PUT" && r.path.includes("/leases/ws-collector") && r.status === 200)
        .length;
    const key = Buffer.from(keyText.trim(), "utf8");
    for (let i = 0; i < AGENTS; i++) {
      const name = `vm-${i}`;
      const agent: Agent = { name, directives: 0, stream: undefined as unknown as AgentStream };
      agent.stream = openAgentStream(`127.0.0.1:${grpcPort}`, { namespace: NS, name }, tokenFor(key, NS, name), {
        onDirective: () => {
          agent.directives++;
        },
        onEnd: (reason) => {
          agent.ended = reason;
        },
      });
      agents.push(agent);
    }
    // Every agent is either held (its Hello answered) or refused.
    await eventually(
      () => agents.every((agent) => agent.directives > 0 || agent.ended !== undefined),
      60_000,
      "every agent held or refused",
    );
    const held = agents.filter((agent) => agent.directives > 0 && agent.ended === undefined);
    const refused = agents.filter((agent) => agent.ended !== undefined);
    expect(held).toHaveLength(CAP);
    expect(refused).toHaveLength(AGENTS - CAP);
    for (const agent of refused) expect(agent.ended).toMatch(/^UNAVAILABLE/);
    const renewalsAtCap = renewals();

    // The held agents are served: each Report is answered with a Directive.
    for (const agent of held) agent.stream.sendReport(create(ReportSchema, { sequence: 1n, intervalSeconds: 15 }));
    await eventually(() => held.every((agent) => agent.directives >= 2), 60_000, "every held agent's Report answered");

    // With every slot authenticated there is none to evict: one more agent is refused at accept.
    const late = await new Promise<string>((resolve) => {
      const stream = openAgentStream(`127.0.0.1:${grpcPort}`, { namespace: NS, name: "vm-0" }, "late", {
        onDirective: () => resolve("admitted"),
        onEnd: (reason) => resolve(reason),
      });
      agents.push({ name: "late", directives: 0, stream });
    });
    expect(late).toMatch(/^UNAVAILABLE/);

    // The probes and the scrape answer, and the refusals are counted.
    expect(await getText(`http://127.0.0.1:${httpPort}/healthz`)).toEqual({ status: 200, body: "ok\n" });
    const metrics = await getText(`http://127.0.0.1:${httpPort}/metrics`);
    expect(metrics.status).toBe(200);
    const sample = (name: string) => Number(metrics.body.match(new RegExp(`^${name} (\\S+)$`, "m"))?.[1]);
    expect(sample("workstation_agent_connections")).toBe(CAP);
    expect(sample("workstation_agent_connections_limit")).toBe(CAP);
    // Each agent over the cap was refused, or took the place of one still unauthenticated (evicted).
    const evicted = Number(
      metrics.body.match(/^workstation_agent_connections_evicted_total\{reason="cap"\} (\S+)$/m)?.[1],
    );
    expect(sample("workstation_agent_connections_refused_total") + evicted).toBeGreaterThanOrEqual(AGENTS - CAP);
    expect(sample("workstation_agent_streams")).toBe(CAP);
    expect(sample("process_max_fds")).toBe(NOFILE);
    expect(sample("process_open_fds")).toBeLessThan(NOFILE);
    expect(sample("workstation_collector_leader")).toBe(1);

    // Two more renewals at the cap (one every 5 s), the Lease still this replica's, never a step-down.
    await eventually(() => renewals() >= renewalsAtCap + 2, 30_000, "two Lease renewals at the cap");
    const lease = kube.store.get(LEASE, "ws-system", "ws-collector") as
      | { spec?: { holderIdentity?: string } }
      | undefined;
    expect(lease?.spec?.holderIdentity).toBe("ws27-fd-collector");
    expect(held.every((agent) => agent.ended === undefined)).toBe(true);
    const after = collector.output();
    expect(after).toMatch(/agent connections at their cap: refusing new ones/);
    expect(after).not.toMatch(/EMFILE/);
    expect(after).not.toMatch(/lost the leadership|no longer the leader/);
    expect((await getText(`http://127.0.0.1:${httpPort}/healthz`)).status).toBe(200);
  }, 180_000);
});
