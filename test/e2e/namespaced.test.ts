// One namespace only (docs/kubernetes.md, RBAC): the shipped collector with
// kubernetes.watchNamespace, under the shipped ClusterRole bound by a RoleBinding in that
// namespace alone, syncs, lists and watches VMs, VMIs and launcher pods there only, is refused
// nothing, and connects that namespace's agent.
import { readFileSync, rmSync, mkdtempSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseAllDocuments } from "yaml";
import { startFakeKube, type FakeKube } from "../support/fake-kube/index.js";
import { policyForServiceAccount } from "../support/fake-kube/rbac.js";
import { collectorToken, collectorTokenKey, startFrozenAgent } from "../support/kube-agent.js";
import {
  collectorBundle,
  eventually,
  freePort,
  getText,
  repoRoot,
  requireBundles,
  start,
  type Proc,
} from "../support/process.js";

const NS = "team-a";
type Doc = Record<string, any>;
const shipped = parseAllDocuments(readFileSync(path.join(repoRoot, "packaging/kubernetes/rbac.yaml"), "utf8")).map(
  (d) => d.toJS() as Doc,
);
// The ClusterRole bound in team-a only: the ClusterRoleBinding becomes a RoleBinding there.
const namespacedDocs = shipped.map((d) =>
  d.kind === "ClusterRoleBinding" ? { ...d, kind: "RoleBinding", metadata: { ...d.metadata, namespace: NS } } : d,
);
const RBAC = policyForServiceAccount(namespacedDocs, { namespace: "ws-system", name: "ws-collector" });

let fake: FakeKube;
let dir: string;
let key: { file: string; remove(): void };
const procs: Proc[] = [];

beforeAll(async () => {
  requireBundles();
  expect(RBAC.clusterRules).toEqual([]);
  fake = await startFakeKube({ rbac: RBAC });
  dir = mkdtempSync(path.join(os.tmpdir(), "ws-namespaced-"));
  key = await collectorTokenKey();
}, 60_000);

afterAll(async () => {
  for (const proc of procs) await proc.stop();
  await fake.close();
  key.remove();
  rmSync(dir, { recursive: true, force: true });
});

describe("kubernetes.watchNamespace", () => {
  it("watches one namespace under a namespaced binding, refused nothing", async () => {
    fake.seedWorkstation({ namespace: NS, name: "alice-ws", podIp: "127.0.0.1" });
    fake.seedWorkstation({ namespace: "team-b", name: "bob-ws", podIp: "127.0.0.2" });
    const grpcPort = await freePort();
    const httpPort = await freePort();
    const config = path.join(dir, "collector.yaml");
    writeFileSync(
      config,
      `mode: kubernetes
grpc: { listen: "127.0.0.1:${grpcPort}" }
http: { listen: "127.0.0.1:${httpPort}" }
tokenKeyFile: ${JSON.stringify(key.file)}
reportInterval: 1s
kubernetes: { leaseNamespace: ws-system, leaseName: ws-collector, watchNamespace: ${NS} }
policy:
  defaults:
    idle-timeout: 1h
`,
    );
    const collector = start(collectorBundle, ["serve", "--kubeconfig", fake.kubeconfigPath, "--config", config], {
      POD_NAME: "ws-collector-0",
    });
    procs.push(collector);
    await collector.waitFor(/collector serving/, 60_000);
    const agent = startFrozenAgent({
      root: path.join(dir, "vm"),
      namespace: NS,
      name: "alice-ws",
      grpcPort,
      token: await collectorToken(key.file, NS, "alice-ws"),
    });
    procs.push(agent.proc);
    await eventually(
      async () => {
        const vms = JSON.parse((await getText(`http://127.0.0.1:${httpPort}/api/vms`)).body).vms as Array<{
          name: string;
          connected: boolean;
        }>;
        return vms.some((v) => v.name === "alice-ws" && v.connected);
      },
      60_000,
      "alice-ws connected",
    );
    const vms = JSON.parse((await getText(`http://127.0.0.1:${httpPort}/api/vms`)).body).vms as Array<{
      namespace: string;
    }>;
    expect(vms.map((v) => v.namespace)).toEqual([NS]);
    const inventory = fake.requests.filter(
      (r) => r.method === "GET" && /\/(pods|virtualmachines|virtualmachineinstances)$/.test(r.path),
    );
    expect(inventory.length).toBeGreaterThan(0);
    for (const request of inventory) {
      if (request.path.includes("/namespaces/ws-system/pods")) continue; // the leader label's own pods
      expect(request.path, request.path).toMatch(new RegExp(`/namespaces/${NS}/`));
    }
    expect(fake.requests.filter((r) => r.status === 403).map((r) => `${r.method} ${r.path}`)).toEqual([]);
  }, 120_000);
});
