// The two field guides' own VMs, as written (test/fixtures/field-guides/), through Kubernetes mode
// with the shipped bundles: the collector (`ws-collector serve --kubeconfig`) and one agent per
// VM, against the fake Kubernetes API server. Each guide's VM goes notice → stop, or notice → the
// documented refusal: the Tiny Core desktop stops with its installer ISO attached (a read-only
// cdrom), the CirrOS smoke VM (a writable containerDisk, nothing persistent) is refused with its
// reason, and the GPU workstation stops with its own 120 s grace, leaving the VM and its PVC, the
// VMI gone, and the audit naming what was freed and whose VM it was.
//
// What the platform team adds to each VM, as docs/kubernetes.md says: the autostop label (the
// guides do not have it), the agent in the image and its token; the guides' objects are
// otherwise loaded verbatim. CDI and virtctl are stood in for: each DataVolume's PVC is created
// Bound (what CDI does once the import or clone is done), and `virtctl start` is the fake's start.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, it, type TestContext } from "vitest";
import { fieldGuideObjects, type GuideName, type GuideObject } from "../support/field-guides.js";
import { resourceByKind, startFakeKube, type FakeKube, type KubeObject } from "../support/fake-kube/index.js";
import { collectorToken, collectorTokenKey, startFrozenAgent, type FrozenAgent } from "../support/kube-agent.js";
import {
  collectorBundle,
  eventually,
  freePort,
  getText,
  requireBundles,
  start,
  type Proc,
} from "../support/process.js";

const VM = resourceByKind("VirtualMachine");
const VMI = resourceByKind("VirtualMachineInstance");
const DV = resourceByKind("DataVolume");
const PVC = resourceByKind("PersistentVolumeClaim");
const EVENT = resourceByKind("Event");
const PREFIX = "workstation.aik8s.run/";
const OWNER_LABEL = "platform.example.com/user";

// The engine's minimums (docs/policy.md), as in kubernetes.test.ts.
const IDLE_TIMEOUT_S = 60;
const GRACE_S = 30;
const SCENARIO_TIMEOUT_MS = 300_000;
const NOTICE_WAIT_MS = (IDLE_TIMEOUT_S + 60) * 1000;
const STOP_WAIT_MS = (GRACE_S + 90) * 1000;
/** The fake's virt-handler takes 100 ms per second of the VMI's grace: the A100 VM's 120 s is 12 s, long enough to see it terminating. */
const GRACE_SECOND_MS = 100;

let key: Awaited<ReturnType<typeof collectorTokenKey>> | undefined;
let keyFile: string;

beforeAll(async () => {
  requireBundles();
  key = await collectorTokenKey();
  keyFile = key.file;
});

afterAll(() => key?.remove());

/** One guide's cluster: the fake API server with the guide's objects, a collector, agents. */
class GuideCluster {
  readonly dir: string;
  private readonly procs: Proc[] = [];
  httpPort = 0;

  private constructor(readonly kube: FakeKube) {
    this.dir = mkdtempSync(path.join(os.tmpdir(), "ws-guides-e2e-"));
  }

  static async create(context: TestContext): Promise<GuideCluster> {
    const cluster = new GuideCluster(await startFakeKube({ graceSecondMs: GRACE_SECOND_MS }));
    context.onTestFailed(() => console.error(cluster.diagnostics()));
    context.onTestFinished(() => cluster.close());
    return cluster;
  }

  diagnostics(): string {
    const writes = this.kube.requests
      .filter((r) => !r.watch && r.method !== "GET" && !r.path.includes("/leases"))
      .map((r) => `${r.method} ${r.path} → ${r.status} ${JSON.stringify(r.body).slice(0, 300)}`);
    const outputs = this.procs.map(
      (proc, i) => `--- process ${i}: ${proc.child.spawnargs.slice(1, 3).join(" ")}\n${proc.output().slice(-6000)}`,
    );
    return [`=== ${this.dir}`, ...outputs, "--- API writes", ...writes].join("\n");
  }

  /**
   * Loads the guide's VirtualMachines and DataVolumes as written, plus what the platform adds:
   * the autostop label on each VM, and the Bound PVC CDI makes of each DataVolume.
   */
  load(guide: GuideName): GuideObject[] {
    const objects = fieldGuideObjects(guide).filter(
      (o) => o.kind === "DataVolume" || (o.kind === "VirtualMachine" && o.metadata.namespace),
    );
    for (const { guide: _guide, file: _file, ...object } of objects) {
      if (object.kind === "DataVolume") {
        this.kube.store.create(DV, { ...object, status: { phase: "Succeeded", progress: "100.0%" } } as KubeObject);
        const storage = (
          object.spec as {
            storage: { accessModes: string[]; volumeMode?: string; resources: { requests: { storage: string } } };
          }
        ).storage;
        this.kube.store.create(PVC, {
          metadata: {
            name: object.metadata.name,
            namespace: object.metadata.namespace,
            labels: object.metadata.labels ?? {},
          },
          spec: {
            accessModes: storage.accessModes,
            volumeMode: storage.volumeMode ?? "Filesystem",
            resources: storage.resources,
            volumeName: `pvc-${object.metadata.name}`,
          },
          status: {
            phase: "Bound",
            accessModes: storage.accessModes,
            capacity: { storage: storage.resources.requests.storage },
          },
        });
      } else {
        const labels = { ...(object.metadata.labels ?? {}), [`${PREFIX}autostop`]: "enabled" };
        this.kube.store.create(VM, { ...object, metadata: { ...object.metadata, labels } } as KubeObject);
      }
    }
    return objects;
  }

  /** `virtctl start` (a Halted VM becomes Always) and a VMI whose launcher pod is where the agent connects from. */
  startVm(namespace: string, name: string): void {
    this.kube.startWorkstation(namespace, name, { podIp: "127.0.0.1" });
  }

  async collector(): Promise<number> {
    const grpcPort = await freePort();
    this.httpPort = await freePort();
    const config = path.join(this.dir, "collector.yaml");
    writeFileSync(
      config,
      `mode: kubernetes
grpc: { listen: "127.0.0.1:${grpcPort}" }
http: { listen: "127.0.0.1:${this.httpPort}" }
tokenKeyFile: ${JSON.stringify(keyFile)}
reportInterval: 1s
tick: 1s
kubernetes: { leaseNamespace: ws-system, leaseName: ws-collector, ownerLabel: ${OWNER_LABEL} }
notifications: { publicUrl: "http://127.0.0.1:${this.httpPort}" } # required in enforce mode
policy:
  defaults:
    mode: enforce
    idle-timeout: ${IDLE_TIMEOUT_S}s
    grace-period: ${GRACE_S}s
    agent-lost-after: 30s
    notice-repeat: 30s
`,
    );
    const proc = start(collectorBundle, ["serve", "--kubeconfig", this.kube.kubeconfigPath, "--config", config], {
      POD_NAME: "collector-0",
    });
    this.procs.push(proc);
    await proc.waitFor(/collector serving/, 60_000);
    await eventually(
      async () => (await getText(`http://127.0.0.1:${this.httpPort}/readyz`)).status === 200,
      60_000,
      "the collector to lead",
    );
    return grpcPort;
  }

  async agent(namespace: string, name: string, grpcPort: number): Promise<FrozenAgent> {
    const agent = startFrozenAgent({
      root: path.join(this.dir, `vm-${name}`),
      namespace,
      name,
      grpcPort,
      token: await collectorToken(keyFile, namespace, name),
    });
    this.procs.push(agent.proc);
    await agent.proc.waitFor(/connected to collector/, 60_000);
    return agent;
  }

  vm(namespace: string, name: string): KubeObject {
    const vm = this.kube.store.get(VM, namespace, name);
    if (!vm) throw new Error(`no VirtualMachine ${namespace}/${name}`);
    return vm;
  }

  runStrategy(namespace: string, name: string): unknown {
    return (this.vm(namespace, name)["spec"] as { runStrategy?: unknown }).runStrategy;
  }

  annotation(namespace: string, name: string, key: string): string | undefined {
    return this.vm(namespace, name).metadata.annotations?.[`${PREFIX}${key}`];
  }

  events(namespace: string, name: string, reason: string): KubeObject[] {
    return this.kube.store
      .list(EVENT, namespace)
      .filter((e) => (e["regarding"] as { name?: string } | undefined)?.name === name && e["reason"] === reason);
  }

  async waitForEvent(namespace: string, name: string, reason: string, timeoutMs: number): Promise<KubeObject> {
    return eventually(
      () => this.events(namespace, name, reason)[0],
      timeoutMs,
      `an Event ${reason} on ${namespace}/${name}`,
    );
  }

  stopPuts(namespace: string, name: string) {
    return this.kube.requestsMatching(
      "PUT",
      `/apis/subresources.kubevirt.io/v1/namespaces/${namespace}/virtualmachines/${name}/stop`,
    );
  }

  /** The stop as the guides promise it: Halted, last-stop written, state Stopped, the VMI gone. */
  async waitForStop(namespace: string, name: string): Promise<Record<string, unknown>> {
    await eventually(
      () => this.runStrategy(namespace, name) === "Halted",
      STOP_WAIT_MS,
      `runStrategy Halted on ${namespace}/${name}`,
    );
    const lastStop = await eventually(
      () => this.annotation(namespace, name, "last-stop"),
      30_000,
      `last-stop on ${namespace}/${name}`,
    );
    await eventually(
      () => this.annotation(namespace, name, "state") === "Stopped",
      30_000,
      `state Stopped on ${namespace}/${name}`,
    );
    await eventually(
      () => this.kube.store.get(VMI, namespace, name) === undefined,
      30_000,
      `the VMI ${namespace}/${name} to go`,
    );
    return JSON.parse(lastStop) as Record<string, unknown>;
  }

  async metrics(): Promise<string> {
    return (await getText(`http://127.0.0.1:${this.httpPort}/metrics`)).body;
  }

  async apiVm(namespace: string, name: string): Promise<Record<string, unknown> | undefined> {
    const vms = JSON.parse((await getText(`http://127.0.0.1:${this.httpPort}/api/vms`)).body).vms as Array<
      Record<string, unknown>
    >;
    return vms.find((v) => v["namespace"] === namespace && v["name"] === name);
  }

  async close(): Promise<void> {
    await Promise.all(this.procs.map((proc) => proc.stop()));
    await this.kube.close();
    rmSync(this.dir, { recursive: true, force: true });
  }
}

function gauge(metrics: string, name: string, labels: string): number | undefined {
  // The labels given, and any after them (workstation_vm_info gained profile="…").
  const line = metrics
    .split("\n")
    .find((l) => l.startsWith(`${name}{${labels}}`) || l.startsWith(`${name}{${labels},`));
  return line ? Number(line.slice(line.lastIndexOf(" ") + 1)) : undefined;
}

function noticeFile(agent: FrozenAgent): { reason: string; message: string } {
  return JSON.parse(readFileSync(path.join(agent.root, "run/ws-agent/notice.json"), "utf8"));
}

describe.concurrent("the field guides' VMs, as written, in Kubernetes mode as shipped", {
  timeout: SCENARIO_TIMEOUT_MS,
}, () => {
  it("single-node desktop: tinycore-desktop stops with its ISO attached; cirros-smoke is refused with its reason", async (context) => {
    const { expect } = context;
    const c = await GuideCluster.create(context);
    const NS = "kubevirt-lab";
    const loaded = c.load("single-node-desktop");
    expect(loaded.map((o) => `${o.kind}/${o.metadata.name}`).sort()).toEqual([
      "DataVolume/desktop-root",
      "DataVolume/ubuntu-golden",
      "VirtualMachine/cirros-smoke",
      "VirtualMachine/tinycore-desktop",
    ]);
    c.startVm(NS, "cirros-smoke");
    c.startVm(NS, "tinycore-desktop");
    const grpcPort = await c.collector();
    const desktop = await c.agent(NS, "tinycore-desktop", grpcPort);
    const cirros = await c.agent(NS, "cirros-smoke", grpcPort);

    // Notice: the desktop's users are told what the stop gives back.
    const pending = await c.waitForEvent(NS, "tinycore-desktop", "IdleStopPending", NOTICE_WAIT_MS);
    expect(pending["note"]).toContain("stopping frees 1 vCPU, 1Gi memory");
    await eventually(
      () => {
        try {
          return noticeFile(desktop);
        } catch {
          return undefined;
        }
      },
      30_000,
      "the desktop's notice file",
    );
    expect(noticeFile(desktop).message).toContain("stopping frees 1 vCPU, 1Gi memory");

    // Stop, with the installer ISO still attached: a read-only cdrom holds no state.
    const lastStop = await c.waitForStop(NS, "tinycore-desktop");
    expect(lastStop).toMatchObject({ by: "collector-0", frees: { cpu: "1 vCPU", memory: "1Gi" } });
    const stopped = c.events(NS, "tinycore-desktop", "Stopped");
    expect(stopped).toHaveLength(1);
    expect(stopped[0]!["note"]).toContain(
      'volume "installer" (containerDisk) is attached as a read-only cdrom: it holds no state',
    );
    expect(stopped[0]!["note"]).toContain("persistent volumes Bound: desktop-root");
    expect(stopped[0]!["note"]).toContain("freed 1 vCPU, 1Gi memory");
    // The VM sets no terminationGracePeriodSeconds: no gracePeriod is sent, KubeVirt's default applies.
    expect(c.stopPuts(NS, "tinycore-desktop").map((put) => [put.status, put.body])).toEqual([[202, {}]]);
    expect(
      c.kube.vmiTerminations.filter((t) => t.name === "tinycore-desktop").map((t) => t.gracePeriodSeconds),
    ).toEqual([30]);
    // The VM and its disks remain, the ISO still attached; the VMI is gone.
    const volumes = (
      c.vm(NS, "tinycore-desktop")["spec"] as { template: { spec: { volumes: Array<Record<string, unknown>> } } }
    ).template.spec.volumes;
    expect(volumes.map((v) => v["name"])).toEqual(["root", "installer"]);
    expect((c.kube.store.get(PVC, NS, "desktop-root")?.["status"] as { phase: string }).phase).toBe("Bound");
    expect(c.kube.store.get(DV, NS, "desktop-root")).toBeDefined();

    // CirrOS: warned like any idle VM, then the stop is refused, naming the disk and why.
    await c.waitForEvent(NS, "cirros-smoke", "IdleStopPending", 60_000);
    const refused = await c.waitForEvent(NS, "cirros-smoke", "IdleStopRefused", STOP_WAIT_MS);
    expect(refused["type"]).toBe("Warning");
    expect(refused["note"]).toContain(
      'stop refused: volume "root" is a containerDisk, attached as a writable disk: its writes are lost when the VM stops',
    );
    expect(refused["note"]).toContain(`${PREFIX}allow-ephemeral-stop`);
    expect(c.stopPuts(NS, "cirros-smoke")).toHaveLength(0);
    expect(c.runStrategy(NS, "cirros-smoke")).toBe("Always");
    expect(c.kube.store.get(VMI, NS, "cirros-smoke")).toBeDefined();
    expect(cirros.proc.output()).not.toMatch(/cirros-smoke: stop accepted/);
    const outcomes = await c.metrics();
    expect(
      gauge(outcomes, "workstation_stop_outcomes_total", `namespace="${NS}",name="cirros-smoke",outcome="refused"`),
    ).toBeGreaterThanOrEqual(1);
    expect(
      gauge(outcomes, "workstation_stop_outcomes_total", `namespace="${NS}",name="cirros-smoke",outcome="accepted"`),
    ).toBe(0);
    // Neither VM has the guides' owner label: the info series says so with an empty owner.
    expect(
      gauge(outcomes, "workstation_vm_info", `namespace="${NS}",name="tinycore-desktop",owner="",autostop="enforce"`),
    ).toBe(1);
  });

  it("Ceph RBD GPU: alice-gpu-workstation stops after its own 120 s grace; VM and PVC stay, the VMI goes, the audit names the A100 and alice", async (context) => {
    const { expect } = context;
    const c = await GuideCluster.create(context);
    const NS = "notebook-alice";
    const NAME = "alice-gpu-workstation";
    c.load("ceph-rbd-gpu");
    // runStrategy: Halted as created; the user starts it (virtctl start), as the guide's §9 does.
    expect(c.runStrategy(NS, NAME)).toBe("Halted");
    c.startVm(NS, NAME);
    expect(c.runStrategy(NS, NAME)).toBe("Always");
    const grpcPort = await c.collector();
    const agent = await c.agent(NS, NAME, grpcPort);

    // The VM's own facts, before any stop: its owner and its A100 (the agent reports no GPU here).
    await eventually(
      async () => gauge(await c.metrics(), "workstation_gpus", `namespace="${NS}",name="${NAME}"`) === 1,
      30_000,
      "workstation_gpus 1",
    );
    const before = await c.metrics();
    expect(
      gauge(before, "workstation_vm_info", `namespace="${NS}",name="${NAME}",owner="alice",autostop="enforce"`),
    ).toBe(1);
    expect((await c.apiVm(NS, NAME))?.["owner"]).toBe("alice");
    // The fleet page has an Owner column.
    expect((await getText(`http://127.0.0.1:${c.httpPort}/`)).body).toContain("<td>alice</td>");

    const FREES = "8 CPU, 64Gi memory, 1 × nvidia.com/A100-PCIE-40GB";
    const pending = await c.waitForEvent(NS, NAME, "IdleStopPending", NOTICE_WAIT_MS);
    expect(pending["note"]).toContain(`stopping frees ${FREES}`);
    expect(pending["note"]).toContain("(owner alice)");
    await eventually(
      () => {
        try {
          return noticeFile(agent);
        } catch {
          return undefined;
        }
      },
      30_000,
      "alice's notice file",
    );
    expect(noticeFile(agent).reason).toContain(`stopping frees ${FREES}`);
    expect(noticeFile(agent).message).toContain("stopping frees 8 CPU, 64Gi memory, 1 × nvidia.com/A100-PCIE-40GB");

    // The stop: no gracePeriod sent (never a shorter one), so the guest gets its own 120 s.
    await eventually(() => c.runStrategy(NS, NAME) === "Halted", STOP_WAIT_MS, "runStrategy Halted");
    const terminating = await eventually(
      () => (c.kube.store.get(VMI, NS, NAME)?.metadata.deletionTimestamp ? c.kube.store.get(VMI, NS, NAME) : undefined),
      30_000,
      "the VMI terminating",
    );
    expect(terminating.metadata["deletionGracePeriodSeconds"]).toBe(120);
    const lastStop = await c.waitForStop(NS, NAME);
    expect(c.stopPuts(NS, NAME).map((put) => [put.status, put.body])).toEqual([[202, {}]]);
    expect(c.kube.vmiTerminations).toMatchObject([{ namespace: NS, name: NAME, gracePeriodSeconds: 120 }]);
    expect(c.kube.vmiTerminations[0]!.goneAtMs).toEqual(expect.any(Number));

    // The audit: what was freed, whose VM, how long the guest had.
    expect(lastStop).toMatchObject({
      by: "collector-0",
      owner: "alice",
      frees: { cpu: "8", memory: "64Gi", gpus: [{ deviceName: "nvidia.com/A100-PCIE-40GB", count: 1 }] },
    });
    const stopped = c.events(NS, NAME, "Stopped");
    expect(stopped).toHaveLength(1);
    expect(stopped[0]!["note"]).toContain(`freed ${FREES}`);
    expect(stopped[0]!["note"]).toContain("the guest got its own terminationGracePeriodSeconds (120s) to shut down");
    expect(stopped[0]!["note"]).toContain("persistent volumes Bound: alice-rootdisk");
    expect(stopped[0]!["note"]).toContain("(owner alice)");

    // What the guide's §9 says to check after a stop: the VM still exists, the VMI is gone, the root PVC is still Bound.
    expect(c.vm(NS, NAME).metadata.labels?.[OWNER_LABEL]).toBe("alice");
    expect(c.kube.store.get(VMI, NS, NAME)).toBeUndefined();

    // What ws gave back: this stop is ws's own, so its stopped time counts, × 8 cores, 64Gi and 1 GPU.
    const freed = `namespace="${NS}",owner="alice"`;
    const given = await eventually(
      async () => {
        const text = await c.metrics();
        const vmSeconds = gauge(text, "workstation_freed_vm_seconds_total", freed);
        return vmSeconds !== undefined && vmSeconds > 0 ? text : undefined;
      },
      30_000,
      "workstation_freed_vm_seconds_total for alice",
    );
    const vmSeconds = gauge(given, "workstation_freed_vm_seconds_total", freed)!;
    // One scrape reads one instant: the four counters agree exactly.
    expect(gauge(given, "workstation_freed_gpu_seconds_total", freed)).toBe(vmSeconds);
    expect(gauge(given, "workstation_freed_cpu_core_seconds_total", freed)).toBe(8 * vmSeconds);
    expect(gauge(given, "workstation_freed_memory_byte_seconds_total", freed)).toBe(64 * 2 ** 30 * vmSeconds);
    expect((await getText(`http://127.0.0.1:${c.httpPort}/`)).body).toMatch(
      /<h2>Given back by ws's stops<\/h2>[\s\S]*<td>notebook-alice<\/td><td>alice<\/td><td>1<\/td>/,
    );
    // What the fleet holds (docs/cost.md): the VM's size from its spec, its stopped time as given back.
    const spendOf = (body: { rows: Array<{ namespace: string; owner: string }> }) =>
      body.rows.find((r) => r.namespace === NS && r.owner === "alice") as
        | { spend: Record<string, { vm: number; cpuCore: number; memoryGiB: number; gpu: number }> }
        | undefined;
    const spend = await eventually(
      async () => {
        const body = JSON.parse((await getText(`http://127.0.0.1:${c.httpPort}/api/spend`)).body);
        return (spendOf(body)?.spend.givenBack?.vm ?? 0) > 0 ? body : undefined;
      },
      30_000,
      "the stopped VM's time given back in /api/spend",
    );
    const givenBack = spendOf(spend)!.spend.givenBack!;
    expect(givenBack.cpuCore).toBeCloseTo(8 * givenBack.vm, 6);
    expect(givenBack.memoryGiB).toBeCloseTo(64 * givenBack.vm, 6);
    expect(givenBack.gpu).toBeCloseTo(givenBack.vm, 6);
    expect(spend.vms.find((v: { name: string }) => v.name === NAME).capacity).toEqual({
      cpuCores: 8,
      memoryBytes: 64 * 2 ** 30,
      gpus: 1,
    });
    expect((c.kube.store.get(PVC, NS, "alice-rootdisk")?.["status"] as { phase: string }).phase).toBe("Bound");
    expect(c.kube.store.get(DV, NS, "alice-rootdisk")).toBeDefined();
    // "GPU resources return to the pool": the stopped VM's A100 shows in the documented query's inputs.
    const after = await c.metrics();
    expect(gauge(after, "workstation_state", `namespace="${NS}",name="${NAME}",state="Stopped"`)).toBe(1);
    expect(gauge(after, "workstation_gpus", `namespace="${NS}",name="${NAME}"`)).toBe(1);
  });
});
