// Host-side evidence end to end, Kubernetes mode: the bundled collector against the fake
// Kubernetes API server (the one fake allowed), a real Prometheus scraping a stand-in for
// KubeVirt's metric endpoints (test/support/virt-handler.ts) whose values the test drives, the
// bundled agent on a frozen machine, and a real webhook receiver as the owner's channel.
//
// Timings are the config file's (an admin may go below the annotations' minimums): report every
// 1s, agent-lost-after 3s, agent-lost-max 8s, idle-timeout 12s, grace-period 8s; the host side
// is read every 2s over a 4s window.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, it, type TestContext } from "vitest";
import { resourceByKind, startFakeKube, type FakeKube } from "../support/fake-kube/index.js";
import { collectorToken, collectorTokenKey, startFrozenAgent } from "../support/kube-agent.js";
import {
  collectorBundle,
  eventually,
  freePort,
  getText,
  requireBundles,
  start,
  type Proc,
} from "../support/process.js";
import { startPrometheus, type RunningPrometheus } from "../support/prometheus.js";
import { startVirtHandler, type VirtHandlerStandIn } from "../support/virt-handler.js";
import { webhookReceiver, type WebhookReceiver } from "../support/webhook-receiver.js";

const VM = resourceByKind("VirtualMachine");
const NS = "users";
const PREFIX = "workstation.aik8s.run/";
const AGENT_LOST_MAX_S = 8;
const IDLE_TIMEOUT_S = 12;
const GRACE_S = 8;
/** Long enough that, were the host not holding it, a lost VM would have had its notice. */
const HELD_MS = (AGENT_LOST_MAX_S + IDLE_TIMEOUT_S + 10) * 1000;
const WAIT_MS = 90_000;
const SCENARIO_TIMEOUT_MS = 240_000;

let key: Awaited<ReturnType<typeof collectorTokenKey>> | undefined;

beforeAll(async () => {
  requireBundles();
  key = await collectorTokenKey();
});
afterAll(() => key?.remove());

interface VmView {
  name: string;
  state: string;
  connected: boolean;
  agentGone?: { how: string; atMs?: number; reason?: string };
  explanation: string;
  host?: { state: string; summary: string; disagreements: string[] };
}

interface Hook {
  event: string;
  vm: { name: string };
  reason: string;
  deadline: string | null;
}

/** One cluster: API server, KubeVirt's metrics in a real Prometheus (or none), a collector, agents. */
class Cluster {
  readonly dir = mkdtempSync(path.join(os.tmpdir(), "ws-hostside-e2e-"));
  readonly procs: Proc[] = [];
  kubevirt!: VirtHandlerStandIn;
  prometheus: RunningPrometheus | undefined;
  hooks!: WebhookReceiver;
  kube!: FakeKube;
  grpcPort = 0;
  httpPort = 0;

  static async create(
    context: TestContext,
    prometheus: "up" | "erring" | "down",
    vms: Array<{ name: string }>,
  ): Promise<Cluster> {
    const cluster = new Cluster();
    context.onTestFailed(() => console.error(cluster.diagnostics()));
    context.onTestFinished(() => cluster.close());
    cluster.kube = await startFakeKube();
    cluster.hooks = await webhookReceiver();
    cluster.kubevirt = await startVirtHandler();
    for (const vm of vms) {
      cluster.kube.seedWorkstation({
        namespace: NS,
        name: vm.name,
        podIp: "127.0.0.1",
        labels: { "platform.example.com/user": "alice", [`${PREFIX}autostop`]: "enabled" },
        annotations: { [`${PREFIX}notify-url`]: `${cluster.hooks.url}/owner-${vm.name}` },
      });
      cluster.kubevirt.set({ namespace: NS, name: vm.name });
    }
    const prometheusUrl =
      prometheus === "down"
        ? `http://127.0.0.1:${await freePort()}`
        : (cluster.prometheus = await startPrometheus({
            targets: [cluster.kubevirt.target],
            scrapeIntervalSeconds: 1,
            ...(prometheus === "erring" ? { extraArgs: ["--query.max-samples=1"] } : {}),
          })).url;
    await cluster.startCollector(prometheusUrl);
    return cluster;
  }

  private async startCollector(prometheusUrl: string): Promise<void> {
    this.grpcPort = await freePort();
    this.httpPort = await freePort();
    const config = path.join(this.dir, "collector.yaml");
    writeFileSync(
      config,
      `mode: kubernetes
grpc: { listen: "127.0.0.1:${this.grpcPort}" }
http: { listen: "127.0.0.1:${this.httpPort}" }
tokenKeyFile: ${JSON.stringify(key!.file)}
reportInterval: 1s
kubernetes: { leaseNamespace: ws-system, leaseName: ws-collector }
notifications: { publicUrl: "http://127.0.0.1:${this.httpPort}" } # required in enforce mode
hostSide:
  prometheus: { url: "${prometheusUrl}", timeout: 1s }
  interval: 2s
  window: 4s
policy:
  defaults:
    autostop: enabled
    mode: enforce
    idle-timeout: ${IDLE_TIMEOUT_S}s
    grace-period: ${GRACE_S}s
    report-interval: 1s
    agent-lost-after: 3s
    agent-lost-max: ${AGENT_LOST_MAX_S}s
    notice-repeat: 1h
`,
    );
    const proc = start(collectorBundle, ["serve", "--kubeconfig", this.kube.kubeconfigPath, "--config", config], {
      POD_NAME: "collector-0",
    });
    this.procs.push(proc);
    await proc.waitFor(/collector serving/, 60_000);
    await eventually(
      async () =>
        /^workstation_collector_leader 1$/m.test((await getText(`http://127.0.0.1:${this.httpPort}/metrics`)).body),
      60_000,
      "the collector to lead",
    );
  }

  /**
   * An agent that reports for a while, then ends: SIGKILL (no goodbye, as a crash or the OOM killer
   * would) or SIGTERM (its goodbye, as `systemctl stop` or a package removal would).
   */
  async agentThatDies(
    name: string,
    whileUp?: () => Promise<void>,
    signal: "SIGKILL" | "SIGTERM" = "SIGKILL",
  ): Promise<void> {
    const agent = startFrozenAgent({
      root: path.join(this.dir, `vm-${name}`),
      namespace: NS,
      name,
      grpcPort: this.grpcPort,
      token: await collectorToken(key!.file, NS, name),
    });
    this.procs.push(agent.proc);
    await agent.proc.waitFor(/connected to collector/, 60_000);
    await eventually(async () => (await this.view(name))?.state === "Active", 30_000, `${name} Active`);
    await whileUp?.();
    agent.proc.child.kill(signal);
    await eventually(async () => (await this.view(name))?.state === "AgentLost", 30_000, `${name} AgentLost`);
  }

  async view(name: string): Promise<VmView | undefined> {
    const body = JSON.parse((await getText(`http://127.0.0.1:${this.httpPort}/api/vms`)).body) as { vms: VmView[] };
    return body.vms.find((vm) => vm.name === name);
  }

  async page(name: string): Promise<string> {
    return (await getText(`http://127.0.0.1:${this.httpPort}/vm/${NS}/${name}`)).body;
  }

  ownerHooks(name: string): Hook[] {
    return this.hooks.on(`/owner-${name}`).map((hook) => hook.body as Hook);
  }

  stopPuts(name: string) {
    return this.kube.requestsMatching(
      "PUT",
      `/apis/subresources.kubevirt.io/v1/namespaces/${NS}/virtualmachines/${name}/stop`,
    );
  }

  runStrategy(name: string): unknown {
    return (this.kube.store.get(VM, NS, name)?.["spec"] as { runStrategy?: unknown } | undefined)?.runStrategy;
  }

  /** Waits `ms` and checks on the way that nothing was announced or stopped. */
  async holds(name: string, ms: number): Promise<void> {
    const until = Date.now() + ms;
    while (Date.now() < until) {
      if (this.ownerHooks(name).length > 0 || this.stopPuts(name).length > 0)
        throw new Error(`${name} was announced or stopped: ${JSON.stringify(this.ownerHooks(name))}`);
      await new Promise((resolve) => setTimeout(resolve, 500));
    }
  }

  diagnostics(): string {
    return [`=== ${this.dir}`, ...this.procs.map((proc) => proc.output().slice(-5000))].join("\n--- \n");
  }

  async close(): Promise<void> {
    await Promise.all(this.procs.map((proc) => proc.stop()));
    await this.prometheus?.stop();
    await this.kubevirt.close();
    await this.hooks.close();
    await this.kube.close();
    rmSync(this.dir, { recursive: true, force: true });
  }
}

describe.concurrent("host-side evidence (Kubernetes mode)", { timeout: SCENARIO_TIMEOUT_MS }, () => {
  it("an agent gone while the host's vCPU is busy: not stopped; the host goes quiet: the owner's webhook gets the notice, the stop follows the grace", async (context) => {
    const { expect } = context;
    const c = await Cluster.create(context, "up", [{ name: "worker" }]);
    c.kubevirt.set({ namespace: NS, name: "worker", vcpus: 4, vcpuBusyRatio: 0.9 });
    // While its agent reports, the agent says idle (a frozen machine) and the host sees the vCPUs busy: counted.
    await c.agentThatDies("worker", async () => {
      await eventually(
        async () => {
          const text = (await getText(`http://127.0.0.1:${c.httpPort}/metrics`)).body;
          // The gauge follows the VM's view at each scrape; the onset is counted at the next host-side round.
          return (
            /^workstation_host_disagreement\{namespace="users",name="worker",kind="vcpu"\} 1$/m.test(text) &&
            /^workstation_host_disagreements_total\{kind="vcpu"\} [1-9]\d*$/m.test(text) &&
            text
          );
        },
        30_000,
        "the vcpu disagreement of worker",
      );
      expect((await c.view("worker"))?.host?.disagreements).toEqual(["vcpu"]);
      expect(await c.page("worker")).toMatch(/The agent says idle, the host does not: vcpu/);
    });
    await c.holds("worker", HELD_MS);
    const held = await c.view("worker");
    expect(held?.state).toBe("AgentLost");
    expect(held?.host?.state).toBe("ok");
    expect(held?.host?.summary).toMatch(/^vCPU 9\d %/);
    expect(held?.explanation).toMatch(/host idle \S+ of 12s, last host activity: host: vCPU 9\d % ≥ 50 %/);
    expect(await c.page("worker")).toMatch(/id="host" data-state="ok">KubeVirt via Prometheus/);

    c.kubevirt.set({ namespace: NS, name: "worker", vcpuBusyRatio: 0.003 });
    const quietAt = Date.now();
    const notice = await eventually(
      () => c.ownerHooks("worker").find((hook) => hook.event === "notice"),
      WAIT_MS,
      "the owner's notice",
    );
    expect(notice.reason).toMatch(
      /^no agent for \S+; host: vCPU 0\.\d %, network \S+ kB\/s, packets 0\.0\/s in, 0\.0\/s out, disk 0 B\/s, no VNC connection; host idle for \S+ \(idle-timeout 12s\)$/,
    );
    expect(Date.now() - quietAt).toBeGreaterThanOrEqual(IDLE_TIMEOUT_S * 1000 - 3000);
    const deadline = Date.parse(notice.deadline ?? "");
    expect(c.stopPuts("worker")).toHaveLength(0);
    await eventually(() => c.runStrategy("worker") === "Halted", WAIT_MS, "worker stopped");
    expect(Date.now()).toBeGreaterThanOrEqual(deadline - 1000);
    expect(c.stopPuts("worker").map((put) => put.status)).toEqual([202]);
    await eventually(() => c.ownerHooks("worker").find((hook) => hook.event === "stop"), 30_000, "the stop message");
    // The audit on the VM names what the host saw.
    const lastStop = await eventually(
      () => c.kube.store.get(VM, NS, "worker")?.metadata.annotations?.[`${PREFIX}last-stop`],
      30_000,
      "the last-stop annotation",
    );
    expect(JSON.parse(lastStop).signals).toMatchObject({
      trigger: "agent-lost",
      host: { state: "ok", reading: expect.stringMatching(/^vCPU 0\.\d %, network /) },
    });
  });

  it("an agent stopped on purpose (SIGTERM) says goodbye and one killed (SIGKILL) does not: the collector shows which, and judges the unmanaged VM on the host from the goodbye", async (context) => {
    const { expect } = context;
    const c = await Cluster.create(context, "up", [{ name: "parted" }, { name: "crashed" }]);
    for (const name of ["parted", "crashed"]) c.kubevirt.set({ namespace: NS, name, vcpuBusyRatio: 0.003 });
    await Promise.all([
      c.agentThatDies("parted", undefined, "SIGTERM"),
      c.agentThatDies("crashed", undefined, "SIGKILL"),
    ]);
    const parted = await c.view("parted");
    expect(parted?.connected).toBe(false);
    expect(parted?.agentGone).toMatchObject({ how: "stopped-on-purpose", reason: "SIGTERM: stopped on purpose" });
    expect((await c.view("crashed"))?.agentGone).toEqual({ how: "vanished" });
    expect(await c.page("parted")).toMatch(
      /id="agent-gone" data-how="stopped-on-purpose">— stopped on purpose .*\(SIGTERM: stopped on purpose\): the VM is unmanaged/,
    );
    expect(await c.page("crashed")).toMatch(/id="agent-gone" data-how="vanished">— vanished without a goodbye/);
    // Both go quiet on the host; each is announced under its own rule, and says which.
    const partedNotice = await eventually(
      () => c.ownerHooks("parted").find((hook) => hook.event === "notice"),
      WAIT_MS,
      "the notice of the VM whose agent was stopped on purpose",
    );
    expect(partedNotice.reason).toMatch(
      /^no agent for \S+: stopped on purpose \S+ ago \(SIGTERM: stopped on purpose\), the VM is unmanaged; host: vCPU 0\.\d %/,
    );
    const crashedNotice = await eventually(
      () => c.ownerHooks("crashed").find((hook) => hook.event === "notice"),
      WAIT_MS,
      "the notice of the VM whose agent vanished",
    );
    expect(crashedNotice.reason).toMatch(/^no agent for \S+; host: vCPU 0\.\d %/);
  });

  it("someone typing over SSH after their agent vanished: KubeVirt's packet counters show it, the VM is held and the page says why; typing stops: the notice follows", async (context) => {
    const { expect } = context;
    const c = await Cluster.create(context, "up", [{ name: "typist" }]);
    await c.agentThatDies("typist");
    // Keystrokes and their echoes: small packets both ways (~110 B), a few a second, in spells of
    // typing and reading, so that every 4 s window differs from the last even when a loaded
    // machine stretches the 1.5 s steps; the byte rate stays a quiet VM's (under network-threshold).
    const bursts = [5, 4.5, 0.4, 0.3, 0.5, 0.4, 3.5, 0.3];
    let typing = true;
    const typist = (async () => {
      for (let i = 0; typing; i++) {
        const keys = bursts[i % bursts.length]!;
        c.kubevirt.set({
          namespace: NS,
          name: "typist",
          receivePacketsPerSecond: keys * 1.6,
          transmitPacketsPerSecond: keys * 1.3,
          receiveBytesPerSecond: keys * 1.6 * 90,
          transmitBytesPerSecond: keys * 1.3 * 130,
        });
        await new Promise((resolve) => setTimeout(resolve, 1500));
      }
    })();
    try {
      await c.holds("typist", HELD_MS);
      const held = await c.view("typist");
      expect(held?.state).toBe("AgentLost");
      expect(held?.host?.summary).toMatch(/packets \S+\/s in, \S+\/s out/);
      expect(held?.explanation).toMatch(/last host activity: host: interactive traffic: /);
      expect(await c.page("typist")).toMatch(/interactive traffic: \S+ packets\/s in/);
    } finally {
      typing = false;
      await typist;
    }
    c.kubevirt.set({
      namespace: NS,
      name: "typist",
      receivePacketsPerSecond: 0.03,
      transmitPacketsPerSecond: 0.02,
      receiveBytesPerSecond: 1000,
      transmitBytesPerSecond: 1000,
    });
    const notice = await eventually(
      () => c.ownerHooks("typist").find((hook) => hook.event === "notice"),
      WAIT_MS,
      "the owner's notice once the typing stopped",
    );
    expect(notice.reason).toMatch(
      /^no agent for \S+; host: vCPU 0\.\d %, network \S+ kB\/s, packets 0\.0\/s in, 0\.0\/s out/,
    );
  });

  it("an open VNC connection holds a VM whose agent never connected; closing it lets the host decide", async (context) => {
    const { expect } = context;
    const c = await Cluster.create(context, "up", [{ name: "desktop" }]);
    c.kubevirt.set({ namespace: NS, name: "desktop", vncConnections: 1 });
    await eventually(async () => (await c.view("desktop"))?.host?.state === "ok", 60_000, "a host reading");
    await c.holds("desktop", HELD_MS);
    const held = await c.view("desktop");
    expect(held?.state).toBe("Unknown");
    expect(held?.host?.summary).toMatch(/1 VNC connection open$/);
    c.kubevirt.set({ namespace: NS, name: "desktop", vncConnections: 0 });
    const notice = await eventually(
      () => c.ownerHooks("desktop").find((hook) => hook.event === "notice"),
      WAIT_MS,
      "the owner's notice after the VNC connection closed",
    );
    expect(notice.reason).toMatch(/no VNC connection; host idle for/);
  });

  it("a connection gauge below zero cannot be true: the VM's host reading fails, it is never read as idle", async (context) => {
    const { expect } = context;
    const c = await Cluster.create(context, "up", [{ name: "broken" }]);
    // A quiet host whose VNC gauge says -1: clamped or summed as 0 it read as idle and the VM was stopped.
    c.kubevirt.set({ namespace: NS, name: "broken", vncConnections: -1 });
    await eventually(
      async () => /^failed: .*cannot be true/.test((await c.view("broken"))?.host?.summary ?? ""),
      60_000,
      "the impossible reading failed",
    );
    await c.holds("broken", HELD_MS);
    const view = await c.view("broken");
    expect(view?.state).toBe("Unknown");
    expect(view?.host?.state).toBe("failed");
    expect(view?.host?.summary).toMatch(/cannot be true for this VMI: vnc -1 \(below zero\)/);
    expect(view?.explanation).toMatch(/missing data is not idleness, not stopped/);
    const metrics = (await getText(`http://127.0.0.1:${c.httpPort}/metrics`)).body;
    expect(metrics).toMatch(/^workstation_host_source_up 1$/m);
    expect(metrics).toMatch(/^workstation_host_source_impossible_vms 1$/m);
  });

  for (const [prometheus, why] of [
    ["down", /failed: Prometheus at http:\/\/127\.0\.0\.1:\d+: vcpuSeconds query: .*ECONNREFUSED/],
    [
      "erring",
      /failed: Prometheus at http:\/\/127\.0\.0\.1:\d+: \w+ query: HTTP 422: execution: query processing would load too many samples/,
    ],
  ] as const) {
    it(`Prometheus ${prometheus === "down" ? "down" : "answering errors"}: a VM whose agent is gone is not stopped, and the source says why`, async (context) => {
      const { expect } = context;
      const c = await Cluster.create(context, prometheus, [{ name: "blind" }]);
      await c.agentThatDies("blind");
      await c.holds("blind", HELD_MS);
      const view = await c.view("blind");
      expect(view?.state).toBe("AgentLost");
      expect(view?.host?.state).toBe("failed");
      expect(view?.host?.summary).toMatch(why);
      expect(view?.explanation).toMatch(/missing data is not idleness, not stopped/);
      expect(await c.page("blind")).toMatch(/id="host" data-state="failed"/);
      expect((await getText(`http://127.0.0.1:${c.httpPort}/metrics`)).body).toMatch(/^workstation_host_source_up 0$/m);
    });
  }
});
