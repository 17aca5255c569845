import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { KubeInventory, type InventoryChange, type InventoryOptions } from "../../../src/platform/kube/inventory.js";
import { VmStopper } from "../../../src/platform/kube/stop.js";
import type { KubeClients } from "../../../src/platform/kube/client.js";
import { eventually, fakeCluster, resourceByKind, type FakeKube } from "./helpers.js";

const VM = resourceByKind("VirtualMachine");
const NS = "team-a";

let fake: FakeKube;
let clients: KubeClients;
const inventories: KubeInventory[] = [];

beforeAll(async () => {
  ({ fake, clients } = await fakeCluster());
});
afterEach(async () => {
  fake.faults.clear();
  await Promise.all(inventories.splice(0).map((i) => i.stop()));
});
afterAll(async () => {
  await fake.close();
});

const quickSleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, Math.min(ms, 50)));

async function startInventory(
  options: InventoryOptions = {},
): Promise<{ inventory: KubeInventory; changes: InventoryChange[]; errors: string[] }> {
  const errors: string[] = [];
  const inventory = new KubeInventory(clients, { sleep: quickSleep, onError: (m) => errors.push(m), ...options });
  inventories.push(inventory);
  const changes: InventoryChange[] = [];
  inventory.onChange((c) => changes.push(c));
  await inventory.start();
  return { inventory, changes, errors };
}

describe("inventory of VMs, VMIs and launcher pods", () => {
  it("lists what exists at start, with every field the collector uses", async () => {
    fake.seedWorkstation({
      namespace: NS,
      name: "alice",
      podIp: "10.244.1.7",
      extraPodIps: ["fd00::7"],
      annotations: { "workstation.aik8s.run/idle-timeout": "3h" },
    });
    fake.seedWorkstation({ namespace: NS, name: "bob", runStrategy: "Halted" });
    const { inventory } = await startInventory({ namespace: NS });
    expect(inventory.isSynced()).toBe(true);
    const alice = inventory.get(NS, "alice");
    expect(alice).toMatchObject({
      namespace: NS,
      name: "alice",
      labels: { "workstation.aik8s.run/autostop": "enabled" },
      annotations: { "workstation.aik8s.run/idle-timeout": "3h" },
      runStrategy: "Always",
      running: null,
      printableStatus: "Running",
      vmiPhase: "Running",
      launcherPodIp: "10.244.1.7",
      launcherPodIps: ["10.244.1.7", "fd00::7"],
      volumes: [
        { name: "rootdisk", source: "dataVolume", claimName: "alice-root" },
        { name: "cloudinitdisk", source: "cloudInitNoCloud", claimName: null },
      ],
    });
    expect(alice?.uid).toMatch(/[0-9a-f-]{36}/);
    expect(inventory.get(NS, "bob")).toMatchObject({
      runStrategy: "Halted",
      printableStatus: "Stopped",
      vmi: null,
      launcherPodIp: null,
      launcherPodIps: [],
    });
    expect(
      inventory
        .list()
        .map((v) => v.name)
        .sort(),
    ).toEqual(["alice", "bob"]);
  });

  it("follows adds, changes and deletes through watches, without polling any VM", async () => {
    const ns = "team-watch";
    const { inventory, changes } = await startInventory({ namespace: ns });
    const before = fake.requests.length;
    fake.seedWorkstation({ namespace: ns, name: "carol", podIp: "10.244.2.2" });
    await eventually("carol running with an IP", () => inventory.get(ns, "carol")?.launcherPodIp === "10.244.2.2");
    expect(changes[0]).toMatchObject({ kind: "added", name: "carol" });

    await clients.custom.patchNamespacedCustomObject(
      {
        group: "kubevirt.io",
        version: "v1",
        namespace: ns,
        plural: "virtualmachines",
        name: "carol",
        body: { metadata: { annotations: { "workstation.aik8s.run/mode": "observe" } } },
      },
      (await import("@kubernetes/client-node")).setHeaderOptions("Content-Type", "application/merge-patch+json"),
    );
    await eventually(
      "annotation seen",
      () => inventory.get(ns, "carol")?.annotations["workstation.aik8s.run/mode"] === "observe",
    );

    const stopped = await new VmStopper(clients).stopVm(ns, "carol");
    expect(stopped.ok).toBe(true);
    await eventually("carol stopped", () => {
      const vm = inventory.get(ns, "carol");
      return (
        vm?.printableStatus === "Stopped" && vm.vmi === null && vm.launcherPodIp === null && vm.runStrategy === "Halted"
      );
    });

    fake.store.delete(VM, ns, "carol");
    await eventually("carol removed", () => inventory.get(ns, "carol") === undefined);
    const last = changes[changes.length - 1]!;
    expect(last).toMatchObject({ kind: "removed", name: "carol", vm: null });
    expect(last.previous?.name).toBe("carol");
    expect(changes.every((c) => c.kind !== "updated" || JSON.stringify(c.vm) !== JSON.stringify(c.previous))).toBe(
      true,
    );

    // Only collection list/watch requests: no GET of a single VM, VMI or pod.
    const gets = fake.requests.slice(before).filter((r) => r.method === "GET");
    expect(gets.every((r) => /\/(virtualmachines|virtualmachineinstances|pods)$/.test(r.path))).toBe(true);
  });

  it("resumes a closed watch from its resourceVersion, missing nothing and relisting nothing", async () => {
    const ns = "team-resume";
    const { inventory } = await startInventory({ namespace: ns });
    await eventually("three open watches", () => fake.openWatchCount(`/namespaces/${ns}/`) === 3);
    const listsBefore = inventory.watchStats();
    fake.closeWatches();
    fake.seedWorkstation({ namespace: ns, name: "dave", podIp: "10.244.3.3" });
    await eventually(
      "dave seen after the watch restarted",
      () => inventory.get(ns, "dave")?.launcherPodIp === "10.244.3.3",
    );
    const stats = inventory.watchStats();
    expect([stats.vms.lists, stats.vmis.lists, stats.pods.lists]).toEqual([
      listsBefore.vms.lists,
      listsBefore.vmis.lists,
      listsBefore.pods.lists,
    ]);
    expect(stats.vms.watches).toBeGreaterThan(listsBefore.vms.watches);
    const resumed = fake.requests.filter(
      (r) => r.watch && r.path === `/apis/kubevirt.io/v1/namespaces/${ns}/virtualmachines`,
    );
    expect(resumed.length).toBeGreaterThanOrEqual(2);
    expect(resumed.every((r) => (r.query.get("resourceVersion") ?? "") !== "")).toBe(true);
  });

  it("survives 410 Expired: relists, and sees what changed while it was away", async () => {
    const ns = "team-expired";
    fake.seedWorkstation({ namespace: ns, name: "erin" });
    fake.seedWorkstation({ namespace: ns, name: "frank" });
    const { inventory, changes } = await startInventory({ namespace: ns });
    expect(inventory.list()).toHaveLength(2);
    await eventually("three open watches", () => fake.openWatchCount(`/namespaces/${ns}/`) === 3);
    // While no watch is open, history is compacted and the world changes.
    fake.faults.add({ method: "GET", pathPattern: /watch=true/, status: 503, times: 3 });
    fake.closeWatches();
    fake.store.delete(VM, ns, "erin");
    fake.seedWorkstation({ namespace: ns, name: "gina" });
    fake.compact();
    await eventually(
      "the relist",
      () =>
        inventory.watchStats().vms.expired >= 1 &&
        inventory.get(ns, "gina") !== undefined &&
        inventory.get(ns, "erin") === undefined,
    );
    expect(inventory.watchStats().vms.lists).toBeGreaterThanOrEqual(2);
    expect(changes.some((c) => c.kind === "removed" && c.name === "erin")).toBe(true);
    expect(changes.some((c) => c.kind === "added" && c.name === "gina")).toBe(true);
    // And it keeps watching afterwards.
    fake.seedWorkstation({ namespace: ns, name: "hank" });
    await eventually("hank after the relist", () => inventory.get(ns, "hank") !== undefined);
  });

  it("relists when the apiserver answers a watch with HTTP 410 Gone", async () => {
    const ns = "team-gone";
    fake.seedWorkstation({ namespace: ns, name: "kim" });
    const { inventory } = await startInventory({ namespace: ns });
    await eventually("three open watches", () => fake.openWatchCount(`/namespaces/${ns}/`) === 3);
    fake.faults.add({ method: "GET", pathPattern: `/namespaces/${ns}/virtualmachines?`, status: 410, times: 1 });
    fake.closeWatches();
    await eventually(
      "a relist after 410",
      () => inventory.watchStats().vms.expired === 1 && inventory.watchStats().vms.lists === 2,
    );
    expect(inventory.get(ns, "kim")).toBeDefined();
  });

  it("filters VMs by label: labelling adds a VM, unlabelling removes it", async () => {
    const ns = "team-labels";
    fake.seedWorkstation({ namespace: ns, name: "opted-in" });
    fake.seedWorkstation({ namespace: ns, name: "opted-out", labels: {} });
    const { inventory, changes } = await startInventory({
      namespace: ns,
      vmLabelSelector: "workstation.aik8s.run/autostop=enabled",
    });
    expect(inventory.list().map((v) => v.name)).toEqual(["opted-in"]);
    const out = fake.store.get(VM, ns, "opted-out")!;
    fake.store.update(VM, {
      ...out,
      metadata: { ...out.metadata, labels: { "workstation.aik8s.run/autostop": "enabled" } },
    });
    await eventually("opted-out now listed", () => inventory.get(ns, "opted-out") !== undefined);
    const inVm = fake.store.get(VM, ns, "opted-in")!;
    fake.store.update(VM, { ...inVm, metadata: { ...inVm.metadata, labels: {} } });
    await eventually("opted-in dropped", () => inventory.get(ns, "opted-in") === undefined);
    expect(changes.map((c) => `${c.kind}:${c.name}`)).toEqual([
      "added:opted-in",
      "added:opted-out",
      "removed:opted-in",
    ]);
  });

  it("keeps retrying a failing first list and reports the errors", async () => {
    const ns = "team-flaky";
    fake.seedWorkstation({ namespace: ns, name: "ivy" });
    fake.faults.add({
      method: "GET",
      pathPattern: `/namespaces/${ns}/virtualmachines?`,
      status: 500,
      times: 2,
      message: "etcd leader changed",
    });
    fake.faults.add({
      method: "GET",
      pathPattern: `/namespaces/${ns}/virtualmachines`,
      status: 500,
      times: 2,
      message: "etcd leader changed",
    });
    const { inventory, errors } = await startInventory({ namespace: ns });
    expect(inventory.get(ns, "ivy")).toBeDefined();
    expect(errors.some((e) => e.includes("etcd leader changed"))).toBe(true);
  });

  it("stops at once even while backing off from a failing API", async () => {
    const ns = "team-down";
    fake.faults.add({ method: "GET", pathPattern: `/namespaces/${ns}/`, status: 503, times: 1_000 });
    const errors: string[] = [];
    // Real sleeping, with backoff far longer than the test's timeout: stop() must cut it short.
    const inventory = new KubeInventory(clients, {
      namespace: ns,
      backoff: { initialMs: 600_000, maxMs: 600_000, factor: 1 },
      onError: (m) => errors.push(m),
    });
    void inventory.start();
    await eventually("the first failure", () => errors.length > 0);
    await inventory.stop();
    expect(inventory.isSynced()).toBe(false);
    expect(errors[0]).toContain("HTTP 503");
  });

  it("watches all namespaces when none is given", async () => {
    fake.seedWorkstation({ namespace: "elsewhere", name: "jo" });
    const { inventory } = await startInventory();
    expect(inventory.get("elsewhere", "jo")).toBeDefined();
    expect(inventory.get(NS, "alice")).toBeDefined();
  });
});
