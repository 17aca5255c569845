// packaging/kubernetes/rbac.yaml: least privilege, and enough for everything the collector does.
import { persistedAnnotations } from "../../../src/engine/persist.js";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { parseAllDocuments } from "yaml";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { KubeAudit, auditEvent } from "../../../src/platform/kube/audit.js";
import { createKubeClients, loadKubeConfig, type KubeClients } from "../../../src/platform/kube/client.js";
import { KubeInventory } from "../../../src/platform/kube/inventory.js";
import { LeaderElector } from "../../../src/platform/kube/leader.js";
import { LEADER_LABEL, LeaderLabel } from "../../../src/platform/kube/leader-label.js";
import { checkStopSafety } from "../../../src/platform/kube/pvcs.js";
import { VmStopper } from "../../../src/platform/kube/stop.js";
import { startFakeKube, type FakeKube } from "../../../../../test/support/fake-kube/index.js";
import { policyForServiceAccount } from "../../../../../test/support/fake-kube/rbac.js";
import { eventually, recordingSleep, resourceByKind } from "./helpers.js";

const manifestPath = fileURLToPath(new URL("../../../../../packaging/kubernetes/rbac.yaml", import.meta.url));
const documents = parseAllDocuments(readFileSync(manifestPath, "utf8")).map((d) => d.toJS() as Record<string, any>);
const SA = { namespace: "ws-system", name: "ws-collector" };

describe("rbac.yaml, read as data", () => {
  it("declares the ServiceAccount, a ClusterRole and a Role for the Lease, each bound to it", () => {
    expect(documents.map((d) => `${d.kind}/${d.metadata.name}`)).toEqual([
      "ServiceAccount/ws-collector",
      "ClusterRole/ws-collector",
      "ClusterRoleBinding/ws-collector",
      "Role/ws-collector-leader-election",
      "RoleBinding/ws-collector-leader-election",
    ]);
  });

  it("grants exactly the rules the collector needs, and no delete, no wildcard", () => {
    const rules = documents
      .filter((d) => d.kind === "ClusterRole" || d.kind === "Role")
      .flatMap((d) => d.rules as Array<Record<string, string[]>>);
    const flat = rules.flatMap((r) =>
      r.apiGroups!.flatMap((g) =>
        r.resources!.flatMap((res) =>
          r.verbs!.map((v) => `${g || "core"} ${res} ${v}${r.resourceNames ? ` ${r.resourceNames.join()}` : ""}`),
        ),
      ),
    );
    expect(flat.sort()).toEqual(
      [
        "kubevirt.io virtualmachines get",
        "kubevirt.io virtualmachines list",
        "kubevirt.io virtualmachines watch",
        "kubevirt.io virtualmachines patch",
        "kubevirt.io virtualmachineinstances get",
        "kubevirt.io virtualmachineinstances list",
        "kubevirt.io virtualmachineinstances watch",
        "subresources.kubevirt.io virtualmachines/stop update",
        "subresources.kubevirt.io virtualmachines/start update",
        "core pods list",
        "core pods watch",
        "core pods patch",
        "core persistentvolumeclaims get",
        "events.k8s.io events create",
        "events.k8s.io events patch",
        "coordination.k8s.io leases create",
        "coordination.k8s.io leases get ws-collector",
        "coordination.k8s.io leases update ws-collector",
      ].sort(),
    );
    expect(flat.some((r) => /delete|\*/.test(r))).toBe(false);
  });
});

describe("the collector under exactly this RBAC", () => {
  let fake: FakeKube;
  let clients: KubeClients;

  beforeAll(async () => {
    fake = await startFakeKube({ rbac: policyForServiceAccount(documents, SA), namespace: "ws-system" });
    clients = createKubeClients(loadKubeConfig({ kubeconfigPath: fake.kubeconfigPath }), { requestTimeoutMs: 5_000 });
  });
  afterAll(async () => {
    await fake.close();
  });

  it("watches, checks safety, stops, audits and elects without a single 403", async () => {
    const { vm } = fake.seedWorkstation({ namespace: "users", name: "alice" });
    fake.seedWorkstation({ namespace: "users", name: "halted", runStrategy: "Halted" });
    const inventory = new KubeInventory(clients);
    try {
      await inventory.start();
      expect(inventory.get("users", "alice")?.launcherPodIp).not.toBeNull();

      const safety = await checkStopSafety(clients, inventory.get("users", "alice")!);
      expect(safety.safe).toBe(true);

      const audit = new KubeAudit(clients, {
        reportingInstance: "ws-collector-0",
        nowMs: () => Date.UTC(2025, 0, 1),
        ...recordingSleep(),
      });
      const target = { namespace: "users", name: "alice", uid: vm.metadata.uid ?? "" };
      expect((await audit.recordEvent(target, auditEvent("IdleStopPending", "idle"))).ok).toBe(true);
      expect((await audit.recordEvent(target, auditEvent("IdleStopPending", "idle"))).ok).toBe(true);
      expect(
        (
          await audit.patchAnnotations(
            target,
            persistedAnnotations({
              state: "Stopping",
              lastActiveMs: Date.UTC(2025, 0, 1),
              noticeId: undefined,
              stopDeadlineMs: undefined,
            }),
          )
        ).ok,
      ).toBe(true);

      const stopper = new VmStopper(clients, recordingSleep());
      expect((await stopper.stopVm("users", "alice")).ok).toBe(true);
      expect(await stopper.stopVm("users", "halted")).toMatchObject({ ok: true, alreadyStopped: true });
      expect(
        (await audit.recordLastStop(target, { whenMs: Date.UTC(2025, 0, 1), reason: "idle", signals: {} })).ok,
      ).toBe(true);

      const clock = { now: Date.UTC(2025, 0, 1) };
      const elector = new LeaderElector(clients, {
        namespace: "ws-system",
        leaseName: "ws-collector",
        identity: "ws-collector-0",
        nowMs: () => clock.now,
      });
      await elector.step();
      expect(elector.isLeader()).toBe(true);
      clock.now += 5_000;
      await elector.step();
      expect(elector.isLeader()).toBe(true);
      await elector.stop({ release: true });

      // The leader's label on its own pod, and off a dead leader's pod, in the collector's namespace.
      const POD = resourceByKind("Pod");
      for (const [name, labels] of [
        ["ws-collector-0", {}],
        ["ws-collector-dead", { [LEADER_LABEL]: "true" }],
      ] as const) {
        fake.store.create(POD, {
          metadata: { name, namespace: "ws-system", labels: { "app.kubernetes.io/name": "ws-collector", ...labels } },
          spec: { containers: [{ name: "c", image: "i" }] },
        });
      }
      const label = new LeaderLabel(clients, {
        namespace: "ws-system",
        podName: "ws-collector-0",
        ...recordingSleep(),
      });
      await label.want(true);
      expect(fake.store.get(POD, "ws-system", "ws-collector-0")?.metadata.labels?.[LEADER_LABEL]).toBe("true");
      expect(fake.store.get(POD, "ws-system", "ws-collector-dead")?.metadata.labels?.[LEADER_LABEL]).toBeUndefined();
      await label.close();

      await eventually("alice's VMI gone from the inventory", () => inventory.get("users", "alice")?.vmi === null);
    } finally {
      await inventory.stop();
    }
    expect(fake.requests.filter((r) => r.status === 403).map((r) => `${r.method} ${r.path}`)).toEqual([]);
    expect(fake.requests.some((r) => r.method === "DELETE")).toBe(false);
  });

  it("forbids what the collector must never do", async () => {
    fake.seedWorkstation({ namespace: "users", name: "bob" });
    const call = async (method: string, path: string, body?: unknown, contentType = "application/json") =>
      (
        await fetch(fake.url + path, {
          method,
          headers: { Authorization: `Bearer ${fake.token}`, "Content-Type": contentType },
          ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
        })
      ).status;
    expect(await call("DELETE", "/apis/kubevirt.io/v1/namespaces/users/virtualmachines/bob")).toBe(403);
    expect(await call("DELETE", "/apis/kubevirt.io/v1/namespaces/users/virtualmachineinstances/bob")).toBe(403);
    // Start is granted (a person's button), restart and migrate are not.
    expect(
      await call("PUT", "/apis/subresources.kubevirt.io/v1/namespaces/users/virtualmachines/bob/restart", {}),
    ).toBe(403);
    expect(
      await call("PUT", "/apis/subresources.kubevirt.io/v1/namespaces/users/virtualmachines/bob/migrate", {}),
    ).toBe(403);
    expect(
      await call("PUT", "/apis/kubevirt.io/v1/namespaces/users/virtualmachines/bob", { metadata: { name: "bob" } }),
    ).toBe(403);
    expect(
      await call("POST", "/apis/kubevirt.io/v1/namespaces/users/virtualmachines", { metadata: { name: "new" } }),
    ).toBe(403);
    // Pods are patched (the leader label) only in the collector's own namespace.
    expect(await call("PATCH", "/api/v1/namespaces/users/pods/x", {}, "application/merge-patch+json")).toBe(403);
    expect(await call("PATCH", "/api/v1/namespaces/kube-system/pods/x", {}, "application/merge-patch+json")).toBe(403);
    expect(await call("GET", "/api/v1/namespaces/users/pods/x")).toBe(403);
    expect(await call("GET", "/api/v1/persistentvolumeclaims")).toBe(403);
    expect(await call("GET", "/apis/coordination.k8s.io/v1/namespaces/ws-system/leases/someone-elses")).toBe(403);
    expect(await call("GET", "/apis/coordination.k8s.io/v1/namespaces/users/leases/ws-collector")).toBe(403);
    expect(
      await call("POST", "/apis/coordination.k8s.io/v1/namespaces/users/leases", {
        metadata: { name: "ws-collector" },
      }),
    ).toBe(403);
  });
});
