import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { VmStopper, stopGracePeriod } from "../../../src/platform/kube/stop.js";
import { eventually, fakeCluster, maxOverlap, recordingSleep, resourceByKind, type FakeKube } from "./helpers.js";
import { createKubeClients, loadKubeConfig, type KubeClients } from "../../../src/platform/kube/client.js";
import { selfSignedCertificate } from "../../../../../test/support/fake-kube/tls.js";

const VM = resourceByKind("VirtualMachine");
const VMI = resourceByKind("VirtualMachineInstance");
const POD = resourceByKind("Pod");
const NS = "users";

let fake: FakeKube;
let clients: KubeClients;
let seq = 0;

beforeAll(async () => {
  ({ fake, clients } = await fakeCluster());
});
afterAll(async () => {
  await fake.close();
});
afterEach(() => {
  fake.faults.clear();
});

function freshVm(overrides: Partial<Parameters<FakeKube["seedWorkstation"]>[0]> = {}): string {
  const name = `ws-${++seq}`;
  fake.seedWorkstation({ namespace: NS, name, ...overrides });
  return name;
}

function stopPuts(name: string) {
  return fake.requestsMatching("PUT", `/virtualmachines/${name}/stop`);
}

function accepted(name: string) {
  return stopPuts(name).filter((r) => r.status === 202);
}

describe("stopGracePeriod (pure): never shorter than the VM's own terminationGracePeriodSeconds", () => {
  it("sends none unless asked, so the VMI keeps its own", () => {
    expect(stopGracePeriod({})).toBeUndefined();
    expect(stopGracePeriod({ minimumGracePeriodSeconds: 120 })).toBeUndefined();
  });
  it("raises a shorter request to the VM's own, keeps a longer one", () => {
    expect(stopGracePeriod({ gracePeriodSeconds: 0, minimumGracePeriodSeconds: 120 })).toBe(120);
    expect(stopGracePeriod({ gracePeriodSeconds: 30, minimumGracePeriodSeconds: 120 })).toBe(120);
    expect(stopGracePeriod({ gracePeriodSeconds: 300, minimumGracePeriodSeconds: 120 })).toBe(300);
    expect(stopGracePeriod({ gracePeriodSeconds: 45 })).toBe(45);
  });
});

describe("stopVm against the fake API server", () => {
  it("a requested grace period below the VM's own goes out as the VM's own", async () => {
    const name = freshVm();
    const result = await new VmStopper(clients, { ...recordingSleep() }).stopVm(NS, name, {
      gracePeriodSeconds: 5,
      minimumGracePeriodSeconds: 120,
    });
    expect(result.ok).toBe(true);
    expect(stopPuts(name)[0]!.body).toEqual({ gracePeriod: 120 });
  });

  it("refuses a malformed minimum grace period without sending anything", async () => {
    const name = freshVm();
    const result = await new VmStopper(clients, { ...recordingSleep() }).stopVm(NS, name, {
      minimumGracePeriodSeconds: 1.5,
    });
    expect(result).toMatchObject({
      ok: false,
      attempts: 0,
      message: "minimumGracePeriodSeconds must be a non-negative integer, got 1.5",
    });
    expect(stopPuts(name)).toHaveLength(0);
  });

  it("stops a running VM: runStrategy Halted, VMI and launcher pod gone, one PUT", async () => {
    const name = freshVm();
    const stopper = new VmStopper(clients, { ...recordingSleep() });
    const result = await stopper.stopVm(NS, name, { gracePeriodSeconds: 45 });
    expect(result).toEqual({ ok: true, alreadyStopped: false, attempts: 1, lastStatus: 202, message: "stop accepted" });
    expect(stopPuts(name)).toHaveLength(1);
    expect(stopPuts(name)[0]!.body).toEqual({ gracePeriod: 45 });
    const vm = (await clients.custom.getNamespacedCustomObject({
      group: "kubevirt.io",
      version: "v1",
      namespace: NS,
      plural: "virtualmachines",
      name,
    })) as {
      spec: { runStrategy: string };
      status: { printableStatus: string };
    };
    expect(vm.spec.runStrategy).toBe("Halted");
    await eventually("VMI deleted", () => fake.store.get(VMI, NS, name) === undefined);
    expect(fake.store.list(POD, NS).filter((p) => p.metadata.labels?.["vm.kubevirt.io/name"] === name)).toEqual([]);
    expect((fake.store.get(VM, NS, name)?.["status"] as { printableStatus: string }).printableStatus).toBe("Stopped");
  });

  it("sends an empty body without a grace period, and uses spec.running=false on VMs that use it", async () => {
    const name = freshVm({ running: true });
    const result = await new VmStopper(clients, { ...recordingSleep() }).stopVm(NS, name);
    expect(result.ok).toBe(true);
    expect(stopPuts(name)[0]!.body).toEqual({});
    const spec = fake.store.get(VM, NS, name)?.["spec"] as { running?: boolean; runStrategy?: string };
    expect(spec.running).toBe(false);
    expect(spec.runStrategy).toBeUndefined();
  });

  it("is idempotent: an already stopped VM answers 409 and counts as stopped", async () => {
    const name = freshVm({ runStrategy: "Halted" });
    const result = await new VmStopper(clients, { ...recordingSleep() }).stopVm(NS, name);
    expect(result.ok).toBe(true);
    expect(result.alreadyStopped).toBe(true);
    expect(result.attempts).toBe(1);
    expect(result.lastStatus).toBe(409);
    expect(result.message).toContain("VM is not running");
    expect(accepted(name)).toHaveLength(0);
  });

  it("stopping twice never double-stops", async () => {
    const name = freshVm();
    const stopper = new VmStopper(clients, { ...recordingSleep() });
    const first = await stopper.stopVm(NS, name);
    await eventually("VM stopped", () => fake.store.get(VMI, NS, name) === undefined);
    const second = await stopper.stopVm(NS, name);
    expect(first.ok && second.ok).toBe(true);
    expect(second.alreadyStopped).toBe(true);
    expect(accepted(name)).toHaveLength(1);
  });

  it("concurrent calls for one VM share one stop", async () => {
    const name = freshVm();
    const stopper = new VmStopper(clients, { ...recordingSleep() });
    const [a, b] = await Promise.all([stopper.stopVm(NS, name), stopper.stopVm(NS, name)]);
    expect(a).toEqual(b);
    expect(stopPuts(name)).toHaveLength(1);
  });

  it("retries through 409, 429 (honouring Retry-After), 500 and 503 with growing jittered delays", async () => {
    const name = freshVm();
    const path = `/virtualmachines/${name}/stop`;
    fake.faults.add({
      method: "PUT",
      pathPattern: path,
      status: 409,
      times: 1,
      message: "Operation cannot be fulfilled: the object has been modified",
    });
    fake.faults.add({ method: "PUT", pathPattern: path, status: 429, times: 1, retryAfter: 7 });
    fake.faults.add({ method: "PUT", pathPattern: path, status: 500, times: 1 });
    fake.faults.add({ method: "PUT", pathPattern: path, status: 503, times: 1 });
    const { sleep, delays } = recordingSleep();
    const randoms = [0, 1, 0.5, 0.25];
    const stopper = new VmStopper(clients, {
      sleep,
      random: () => randoms.shift() ?? 0,
      backoff: { initialMs: 100, maxMs: 60_000, factor: 2 },
      maxAttempts: 6,
    });
    const result = await stopper.stopVm(NS, name);
    expect(result).toMatchObject({ ok: true, alreadyStopped: false, attempts: 5, lastStatus: 202 });
    expect(stopPuts(name).map((r) => r.status)).toEqual([409, 429, 500, 503, 202]);
    expect(accepted(name)).toHaveLength(1);
    // retry 1 after the 409: ceiling 100, random 0 → 50; retry 2 after 429: Retry-After 7 s wins;
    // retry 3: ceiling 400, random 0.5 → 300; retry 4: ceiling 800, random 0.25 → 500.
    expect(delays).toEqual([50, 7000, 300, 500]);
  });

  it("a hung request times out and is retried; the stop lands once", async () => {
    const name = freshVm();
    fake.faults.add({ method: "PUT", pathPattern: `/virtualmachines/${name}/stop`, hangMs: Infinity, times: 1 });
    const stopper = new VmStopper(clients, { ...recordingSleep(), requestTimeoutMs: 2000 });
    const result = await stopper.stopVm(NS, name);
    expect(result).toMatchObject({ ok: true, attempts: 2, lastStatus: 202 });
    const puts = stopPuts(name);
    expect(puts.map((r) => [r.faulted, r.delivered])).toEqual([
      [true, false],
      [false, true],
    ]);
    expect(accepted(name)).toHaveLength(1);
  });

  it("a lost answer (stop processed, reply never arrives) is recognised as done, not repeated", async () => {
    const name = freshVm();
    fake.faults.add({
      method: "PUT",
      pathPattern: `/virtualmachines/${name}/stop`,
      hangMs: Infinity,
      afterProcessing: true,
      times: 1,
    });
    const stopper = new VmStopper(clients, { ...recordingSleep(), requestTimeoutMs: 2000 });
    const result = await stopper.stopVm(NS, name);
    expect(result).toMatchObject({ ok: true, alreadyStopped: true, attempts: 1, lastStatus: null });
    // The server took exactly one stop (the one whose answer was lost), and no second PUT went out.
    expect(stopPuts(name).map((r) => [r.status, r.delivered])).toEqual([[202, false]]);
  });

  it("a lost answer followed by a 409 on the retry is also done", async () => {
    const name = freshVm();
    const path = `/virtualmachines/${name}/stop`;
    // The state check after the timeout fails, so the retry goes out and meets "VM is not running".
    fake.faults.add({ method: "PUT", pathPattern: path, hangMs: Infinity, afterProcessing: true, times: 1 });
    fake.faults.add({ method: "GET", pathPattern: `/namespaces/${NS}/virtualmachines/${name}`, status: 500, times: 1 });
    const stopper = new VmStopper(clients, { ...recordingSleep(), requestTimeoutMs: 2000 });
    const result = await stopper.stopVm(NS, name);
    expect(result).toMatchObject({ ok: true, alreadyStopped: true, attempts: 2, lastStatus: 409 });
    expect(stopPuts(name).map((r) => r.status)).toEqual([202, 409]);
    expect(accepted(name).filter((r) => r.delivered)).toHaveLength(0);
  });

  it("gives up after maxAttempts with the last status", async () => {
    const name = freshVm();
    fake.faults.add({
      method: "PUT",
      pathPattern: `/virtualmachines/${name}/stop`,
      status: 500,
      times: 100,
      message: "etcdserver: request timed out",
    });
    const result = await new VmStopper(clients, { ...recordingSleep(), maxAttempts: 3 }).stopVm(NS, name);
    expect(result.ok).toBe(false);
    expect(result.attempts).toBe(3);
    expect(result.lastStatus).toBe(500);
    expect(result.message).toContain("gave up after 3 attempts");
    expect(result.message).toContain("etcdserver: request timed out");
    expect(accepted(name)).toHaveLength(0);
    expect((fake.store.get(VM, NS, name)?.["spec"] as { runStrategy: string }).runStrategy).toBe("Always");
  });

  it("a missing VM is a failure without retries", async () => {
    const result = await new VmStopper(clients, { ...recordingSleep() }).stopVm(NS, "no-such-vm");
    expect(result).toMatchObject({ ok: false, attempts: 1, lastStatus: 404 });
    expect(result.message).toContain("not found");
  });

  it("refuses a bad grace period before sending anything", async () => {
    const name = freshVm();
    const result = await new VmStopper(clients, { ...recordingSleep() }).stopVm(NS, name, { gracePeriodSeconds: -1 });
    expect(result).toMatchObject({ ok: false, attempts: 0 });
    expect(stopPuts(name)).toHaveLength(0);
  });

  it("bounds concurrency across VMs", async () => {
    const names = Array.from({ length: 6 }, () => freshVm());
    for (const name of names)
      fake.faults.add({ method: "PUT", pathPattern: `/virtualmachines/${name}/stop`, hangMs: 150, times: 1 });
    const stopper = new VmStopper(clients, { ...recordingSleep(), maxConcurrent: 2 });
    const results = await Promise.all(names.map((n) => stopper.stopVm(NS, n)));
    expect(results.every((r) => r.ok && r.attempts === 1)).toBe(true);
    const intervals = names
      .flatMap((n) => stopPuts(n))
      .map((r) => [r.receivedAtMs, r.answeredAtMs ?? r.receivedAtMs] as [number, number]);
    expect(intervals).toHaveLength(6);
    expect(maxOverlap(intervals)).toBeLessThanOrEqual(2);
  });
});

describe("stop semantics that need a slow virt-controller", () => {
  let slow: FakeKube;
  let slowClients: KubeClients;
  beforeAll(async () => {
    ({ fake: slow, clients: slowClients } = await fakeCluster({ stopDelayMs: 600_000 }));
  });
  afterAll(async () => {
    await slow.close();
  });

  it("passes the grace period to the VMI, and a second stop while Stopping is already done", async () => {
    slow.seedWorkstation({ namespace: NS, name: "slow" });
    const stopper = new VmStopper(slowClients, { ...recordingSleep() });
    expect((await stopper.stopVm(NS, "slow", { gracePeriodSeconds: 20 })).ok).toBe(true);
    const vmi = slow.store.get(VMI, NS, "slow");
    expect((vmi?.["spec"] as { terminationGracePeriodSeconds?: number }).terminationGracePeriodSeconds).toBe(20);
    expect((slow.store.get(VM, NS, "slow")?.["status"] as { printableStatus: string }).printableStatus).toBe(
      "Stopping",
    );
    const again = await stopper.stopVm(NS, "slow", { gracePeriodSeconds: 20 });
    expect(again).toMatchObject({ ok: true, alreadyStopped: true, lastStatus: 409 });
    expect(slow.requestsMatching("PUT", "/virtualmachines/slow/stop").filter((r) => r.status === 202)).toHaveLength(1);
  });

  it("Manual run strategy: the stop is queued on the VM's status; a lost answer is not followed by a second stop", async () => {
    slow.seedWorkstation({ namespace: NS, name: "manual", runStrategy: "Manual" });
    slow.faults.add({
      method: "PUT",
      pathPattern: "/virtualmachines/manual/stop",
      hangMs: Infinity,
      afterProcessing: true,
      times: 1,
    });
    const stopper = new VmStopper(slowClients, { ...recordingSleep(), requestTimeoutMs: 2000 });
    expect(await stopper.stopVm(NS, "manual")).toMatchObject({ ok: true, alreadyStopped: true, attempts: 1 });
    const status = slow.store.get(VM, NS, "manual")?.["status"] as { stateChangeRequests?: Array<{ action: string }> };
    expect(status.stateChangeRequests?.map((r) => r.action)).toEqual(["Stop"]);
    expect(slow.requestsMatching("PUT", "/virtualmachines/manual/stop")).toHaveLength(1);
  });
});

describe("stop over HTTPS with the kubeconfig's credentials", () => {
  let secure: FakeKube;
  let secureClients: KubeClients;
  beforeAll(async () => {
    ({ fake: secure, clients: secureClients } = await fakeCluster({ tls: selfSignedCertificate() }));
  });
  afterAll(async () => {
    await secure.close();
  });

  it("verifies the server with the kubeconfig's CA and sends its token, for typed calls and the raw stop alike", async () => {
    secure.seedWorkstation({ namespace: NS, name: "tls-vm" });
    const list = (await secureClients.custom.listNamespacedCustomObject({
      group: "kubevirt.io",
      version: "v1",
      namespace: NS,
      plural: "virtualmachines",
    })) as { items: unknown[] };
    expect(list.items).toHaveLength(1);
    const result = await new VmStopper(secureClients, { ...recordingSleep() }).stopVm(NS, "tls-vm");
    expect(result).toMatchObject({ ok: true, attempts: 1, lastStatus: 202 });
  });

  it("a rejected token is a failure, not something to retry", async () => {
    secure.seedWorkstation({ namespace: NS, name: "tls-denied" });
    const kc = loadKubeConfig({ kubeconfigPath: secure.kubeconfigPath });
    const user = kc.getCurrentUser()!;
    kc.loadFromClusterAndUser(kc.getCurrentCluster()!, { ...user, token: "wrong-token" });
    const result = await new VmStopper(createKubeClients(kc), { ...recordingSleep() }).stopVm(NS, "tls-denied");
    expect(result).toMatchObject({ ok: false, attempts: 1, lastStatus: 401 });
    expect(secure.requestsMatching("PUT", "/virtualmachines/tls-denied/stop").map((r) => r.status)).toEqual([401]);
  });
});
