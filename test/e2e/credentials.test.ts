// Per-VM credentials end to end: the shipped collector in Kubernetes mode, under the shipped RBAC
// plus the credentials component's create-only rule, creates the Secret of a VM labelled for ws;
// its files, laid out as KubeVirt's secret disk would show them, are all an agent needs: it starts
// with no identity, address or token of its own and connects as that VM.
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync, appendFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseAllDocuments } from "yaml";
import { resourceByKind, startFakeKube, type FakeKube } from "../support/fake-kube/index.js";
import { policyForServiceAccount } from "../support/fake-kube/rbac.js";
import { collectorTokenKey, layFrozenMachine } from "../support/kube-agent.js";
import {
  agentBundle,
  collectorBundle,
  eventually,
  freePort,
  getText,
  repoRoot,
  requireBundles,
  start,
  type Proc,
} from "../support/process.js";

const SECRET = resourceByKind("Secret");
const POD = resourceByKind("Pod");
const NS = "team-a";
const manifests = (file: string) =>
  parseAllDocuments(readFileSync(path.join(repoRoot, file), "utf8")).map((doc) => doc.toJS() as unknown);
const RBAC = policyForServiceAccount(
  [
    ...manifests("packaging/kubernetes/rbac.yaml"),
    ...manifests("packaging/kubernetes-overlays/credentials/rbac-credentials.yaml"),
  ],
  { namespace: "ws-system", name: "ws-collector" },
);

let fake: FakeKube;
let dir: string;
let key: { file: string; remove(): void };
const procs: Proc[] = [];

beforeAll(async () => {
  requireBundles();
  fake = await startFakeKube({ rbac: RBAC });
  dir = mkdtempSync(path.join(os.tmpdir(), "ws-credentials-"));
  key = await collectorTokenKey();
}, 60_000);

afterAll(async () => {
  for (const proc of procs) await proc.stop();
  await fake.close();
  key.remove();
  rmSync(dir, { recursive: true, force: true });
});

describe("per-VM credential Secrets", () => {
  it("the collector creates the VM's Secret; an agent with only its files connects as the VM", async () => {
    fake.store.create(POD, {
      metadata: {
        name: "ws-collector-0",
        namespace: "ws-system",
        labels: { "app.kubernetes.io/name": "ws-collector" },
      },
      spec: { containers: [{ name: "collector", image: "ws-collector" }] },
      status: { phase: "Running", podIP: "127.0.0.1" },
    });
    fake.seedWorkstation({ namespace: NS, name: "alice-workstation", podIp: "127.0.0.1" });
    fake.seedWorkstation({ namespace: NS, name: "unlabelled", labels: {}, podIp: "127.0.0.2" });
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
kubernetes:
  leaseNamespace: ws-system
  leaseName: ws-collector
  credentials:
    addresses: ["127.0.0.1:${grpcPort}"]
policy:
  defaults:
    idle-timeout: 1h
`,
    );
    const collector = start(collectorBundle, ["serve", "--kubeconfig", fake.kubeconfigPath, "--config", config], {
      POD_NAME: "ws-collector-0",
    });
    procs.push(collector);
    const secret = await eventually(
      () => fake.store.get(SECRET, NS, "alice-workstation-ws-agent"),
      30_000,
      "the credential Secret",
    );
    expect(fake.store.get(SECRET, NS, "unlabelled-ws-agent")).toBeUndefined();
    expect(fake.requests.filter((r) => r.path.includes("/secrets") && r.method !== "POST")).toEqual([]);
    expect(fake.requests.filter((r) => r.path.includes("/secrets") && r.status === 403)).toEqual([]);

    // The secret disk as the guest sees it: one file per key.
    const root = path.join(dir, "vm");
    layFrozenMachine(root);
    const disk = path.join(root, "credential");
    mkdirSync(disk);
    for (const [file, value] of Object.entries((secret as unknown as { data: Record<string, string> }).data)) {
      writeFileSync(path.join(disk, file), Buffer.from(value, "base64"));
    }
    appendFileSync(
      path.join(root, "agent.yaml"),
      `credentialDir: ${JSON.stringify(disk)}\ncollector: { insecure: true }\n`,
    );
    const agent = start(agentBundle, [
      "run",
      "--config",
      path.join(root, "agent.yaml"),
      "--report-interval",
      "1s",
      "--state-dir",
      path.join(root, "state"),
      "--socket",
      path.join(root, "agent.sock"),
      ...["proc", "sys", "dev", "run", "home", "etc"].flatMap((r) => [`--${r}-root`, path.join(root, r)]),
    ]);
    procs.push(agent);
    await eventually(
      async () => {
        const { body } = await getText(`http://127.0.0.1:${httpPort}/api/vms`);
        const vms = JSON.parse(body).vms as Array<{ namespace: string; name: string; connected: boolean }>;
        return vms.some((v) => v.namespace === NS && v.name === "alice-workstation" && v.connected);
      },
      60_000,
      "alice-workstation connected with the credential from its Secret",
    );
    expect(agent.output()).toContain("connected to collector");
  }, 120_000);
});
