// platform/kube/leader-label.ts against the fake API server: the leader's label on its own pod, set,
// removed, retried, taken off a dead leader's pod, and given up with one clear message.
import { afterEach, describe, expect, it } from "vitest";
import { LEADER_LABEL, LeaderLabel } from "../../../src/platform/kube/leader-label.js";
import { fakeCluster, recordingSleep, resourceByKind, type FakeKube } from "./helpers.js";

const POD = resourceByKind("Pod");
const NS = "ws-system";

let fake: FakeKube | undefined;
afterEach(async () => {
  await fake?.close();
  fake = undefined;
});

function seedPod(kube: FakeKube, name: string, labels: Record<string, string> = {}): void {
  kube.store.create(POD, {
    metadata: { name, namespace: NS, labels: { "app.kubernetes.io/name": "ws-collector", ...labels } },
    spec: { containers: [{ name: "collector", image: "ws-collector" }] },
    status: { phase: "Running", podIP: "10.0.0.1" },
  });
}

const labelsOf = (kube: FakeKube, name: string) => kube.store.get(POD, NS, name)?.metadata.labels ?? {};

describe("LeaderLabel", () => {
  it("removes a label left from an earlier run, sets it when leading, and removes it on step-down", async () => {
    const cluster = await fakeCluster();
    fake = cluster.fake;
    seedPod(fake, "replica-a", { [LEADER_LABEL]: "true" });
    const errors: string[] = [];
    const label = new LeaderLabel(cluster.clients, {
      namespace: NS,
      podName: "replica-a",
      onError: (m) => errors.push(m),
      ...recordingSleep(),
    });

    await label.start();
    expect(labelsOf(fake, "replica-a")[LEADER_LABEL]).toBeUndefined();
    expect(labelsOf(fake, "replica-a")["app.kubernetes.io/name"]).toBe("ws-collector");
    await label.want(true);
    expect(labelsOf(fake, "replica-a")[LEADER_LABEL]).toBe("true");
    expect(label.isSet()).toBe(true);
    await label.want(false);
    expect(labelsOf(fake, "replica-a")[LEADER_LABEL]).toBeUndefined();
    // Only metadata.labels is ever sent.
    const patches = fake.requestsMatching("PATCH", "/api/v1/namespaces/ws-system/pods/replica-a");
    expect(patches.map((p) => p.contentType)).toEqual(Array(3).fill("application/merge-patch+json"));
    for (const patch of patches) expect(Object.keys(patch.body as object)).toEqual(["metadata"]);
    expect(errors).toEqual([]);
  });

  it("takes the label off the pod of a leader that died leading, and leaves other pods alone", async () => {
    const cluster = await fakeCluster();
    fake = cluster.fake;
    seedPod(fake, "replica-dead", { [LEADER_LABEL]: "true" });
    seedPod(fake, "replica-new");
    seedPod(fake, "unrelated", { tier: "x" });
    const info: string[] = [];
    const label = new LeaderLabel(cluster.clients, {
      namespace: NS,
      podName: "replica-new",
      onInfo: (m) => info.push(m),
      ...recordingSleep(),
    });
    await label.want(true);
    expect(labelsOf(fake, "replica-new")[LEADER_LABEL]).toBe("true");
    expect(labelsOf(fake, "replica-dead")[LEADER_LABEL]).toBeUndefined();
    expect(labelsOf(fake, "unrelated")).toMatchObject({ tier: "x" });
    expect(fake.requestsMatching("PATCH", "/pods/unrelated")).toHaveLength(0);
    expect(info).toEqual(["removed the stale leader label from pod ws-system/replica-dead"]);
  });

  it("retries through server errors until the label holds", async () => {
    const cluster = await fakeCluster();
    fake = cluster.fake;
    seedPod(fake, "replica-a");
    fake.faults.add({ method: "PATCH", pathPattern: "/pods/replica-a", status: 503, times: 2 });
    const sleep = recordingSleep();
    const errors: string[] = [];
    const label = new LeaderLabel(cluster.clients, {
      namespace: NS,
      podName: "replica-a",
      onError: (m) => errors.push(m),
      ...sleep,
    });
    await label.want(true);
    expect(labelsOf(fake, "replica-a")[LEADER_LABEL]).toBe("true");
    expect(sleep.delays).toHaveLength(2);
    expect(errors).toHaveLength(2);
    expect(errors[0]).toMatch(/setting the leader label on pod ws-system\/replica-a \(attempt 1\): HTTP 503/);
  });

  it("applies the latest wish when leadership flips while a write is under way", async () => {
    const cluster = await fakeCluster();
    fake = cluster.fake;
    seedPod(fake, "replica-a");
    const label = new LeaderLabel(cluster.clients, { namespace: NS, podName: "replica-a", ...recordingSleep() });
    const first = label.want(true);
    const second = label.want(false);
    await Promise.all([first, second]);
    expect(labelsOf(fake, "replica-a")[LEADER_LABEL]).toBeUndefined();
    expect(label.isSet()).toBe(false);
  });

  it("gives up with one message when its pod does not exist or RBAC forbids the patch", async () => {
    const cluster = await fakeCluster();
    fake = cluster.fake;
    const errors: string[] = [];
    const label = new LeaderLabel(cluster.clients, {
      namespace: NS,
      podName: "not-a-pod",
      onError: (m) => errors.push(m),
      ...recordingSleep(),
    });
    await label.want(true);
    await label.want(false);
    await label.want(true);
    expect(errors).toEqual([
      "cannot label pod ws-system/not-a-pod: it does not exist (running outside a pod?); agents must reach this replica another way",
    ]);
    expect(fake.requestsMatching("PATCH", "/pods/not-a-pod")).toHaveLength(1);

    seedPod(fake, "replica-b");
    fake.faults.add({ method: "PATCH", pathPattern: "/pods/replica-b", status: 403 });
    const forbidden: string[] = [];
    const other = new LeaderLabel(cluster.clients, {
      namespace: NS,
      podName: "replica-b",
      onError: (m) => forbidden.push(m),
      ...recordingSleep(),
    });
    await other.want(true);
    expect(forbidden).toHaveLength(1);
    expect(forbidden[0]).toMatch(/cannot label pod ws-system\/replica-b: HTTP 403.*grant patch on pods/);
  });

  it("removes the label on close with a few tries only, so shutdown is never held up", async () => {
    const cluster = await fakeCluster();
    fake = cluster.fake;
    seedPod(fake, "replica-a");
    const sleep = recordingSleep();
    const label = new LeaderLabel(cluster.clients, { namespace: NS, podName: "replica-a", ...sleep });
    await label.want(true);
    fake.faults.add({ method: "PATCH", pathPattern: "/pods/replica-a", status: 500, times: 10 });
    await label.close();
    expect(fake.requestsMatching("PATCH", "/pods/replica-a").length).toBe(1 + 3);
    // After close nothing more is written.
    await label.want(true);
    expect(fake.requestsMatching("PATCH", "/pods/replica-a").length).toBe(1 + 3);
  });
});
