// Per-VM credential Secrets against the fake API server, under the shipped create-only RBAC: a
// labelled VM gets `<vm>-ws-agent` with its own token (verifiable with the key), owned by the VM;
// the collector never reads a Secret, leaves an existing one alone, and says what RBAC is missing.
import { readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, describe, expect, it } from "vitest";
import { parseAllDocuments } from "yaml";
import { policyForServiceAccount } from "../../../../../test/support/fake-kube/rbac.js";
import {
  CredentialIssuer,
  credentialConfig,
  credentialSecret,
  credentialSecretName,
  parseCredentialsConfig,
} from "../../../src/platform/kube/credentials.js";
import { verifyToken } from "../../../src/links/agent-token.js";
import { fakeCluster, resourceByKind, type FakeKube } from "./helpers.js";

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../../../..");
const SECRET = resourceByKind("Secret");
const key = Buffer.alloc(32, 7);
const settings = {
  addresses: ["ws-collector.ws-system.svc.cluster.local:7443", "10.96.40.7:7443"],
  caPem: "-----BEGIN CERTIFICATE-----\nCA\n-----END CERTIFICATE-----\n",
  serverName: "ws-collector.ws-system.svc",
};

const rbacDocs = parseAllDocuments(
  readFileSync(path.join(repoRoot, "packaging/kubernetes-overlays/credentials/rbac-credentials.yaml"), "utf8"),
).map((d) => d.toJS());
const CREATE_ONLY = policyForServiceAccount(rbacDocs, { namespace: "ws-system", name: "ws-collector" });

let fake: FakeKube | undefined;
afterEach(async () => {
  await fake?.close();
  fake = undefined;
});

const decode = (secret: Record<string, any>, field: string) =>
  Buffer.from(secret.data[field], "base64").toString("utf8");

describe("the credential Secret", () => {
  it("holds the VM's token, identity, addresses and CA, owned by the VM", () => {
    const secret = credentialSecret(
      { namespace: "team-a", name: "alice-workstation", uid: "u-1" },
      key,
      settings,
    ) as Record<string, any>;
    expect(secret.metadata.name).toBe("alice-workstation-ws-agent");
    expect(secret.metadata.ownerReferences).toEqual([
      { apiVersion: "kubevirt.io/v1", kind: "VirtualMachine", name: "alice-workstation", uid: "u-1" },
    ]);
    expect(verifyToken(key, "team-a", "alice-workstation", decode(secret, "token"))).toBe(true);
    expect(verifyToken(key, "team-a", "bob-workstation", decode(secret, "token"))).toBe(false);
    expect(decode(secret, "collector-ca.crt")).toBe(settings.caPem);
    expect(decode(secret, "config.yaml")).toBe(
      credentialConfig({ namespace: "team-a", name: "alice-workstation", uid: "u-1" }, settings),
    );
  });

  it("has a valid name for the longest VM name", () => {
    const name = credentialSecretName("a".repeat(253));
    expect(name.length).toBe(253);
    expect(name.endsWith("-ws-agent")).toBe(true);
  });

  it("config: addresses required, unknown keys named", () => {
    const problems: string[] = [];
    expect(parseCredentialsConfig({ adresses: ["x:1"] }, problems, "kubernetes.credentials")).toBeUndefined();
    expect(problems).toEqual([
      'kubernetes.credentials: unknown setting "adresses" (known: addresses, caFile, serverName)',
      "kubernetes.credentials.addresses: a list of host:port the agents try in order (docs/kubernetes.md#reaching-the-collector)",
    ]);
    expect(parseCredentialsConfig({ addresses: ["a:1"], caFile: "/etc/ws-collector/tls/ca.crt" }, [], "k")).toEqual({
      addresses: ["a:1"],
      caFile: "/etc/ws-collector/tls/ca.crt",
    });
  });
});

describe("CredentialIssuer against the fake API server, create-only RBAC", () => {
  it("creates the Secret once per VM, never reading one", async () => {
    const cluster = await fakeCluster({ rbac: CREATE_ONLY });
    fake = cluster.fake;
    const logs: string[] = [];
    const issuer = new CredentialIssuer(cluster.clients, key, { settings, log: (_l, m) => logs.push(m) });
    const vm = { namespace: "team-a", name: "alice-workstation", uid: "u-1" };
    issuer.observe(vm);
    issuer.observe(vm);
    await issuer.idle();
    issuer.observe(vm);
    await issuer.idle();
    const stored = fake.store.get(SECRET, "team-a", "alice-workstation-ws-agent") as Record<string, any>;
    expect(verifyToken(key, "team-a", "alice-workstation", decode(stored, "token"))).toBe(true);
    expect(issuer.counts).toEqual({ created: 1, existing: 0, failed: 0 });
    expect(fake.requestsMatching("POST", "/secrets")).toHaveLength(1);
    expect(fake.requests.filter((r) => r.path.includes("/secrets") && r.method !== "POST")).toEqual([]);
    expect(logs).toEqual(["created the credential Secret team-a/alice-workstation-ws-agent"]);
  });

  it("leaves a Secret that exists alone (409), and issues a re-created VM (new uid) again", async () => {
    const cluster = await fakeCluster({ rbac: CREATE_ONLY });
    fake = cluster.fake;
    fake.store.create(SECRET, {
      metadata: { name: "bob-ws-ws-agent", namespace: "team-b" },
      data: { token: Buffer.from("someone else's").toString("base64") },
    });
    const issuer = new CredentialIssuer(cluster.clients, key, { settings, log: () => {} });
    issuer.observe({ namespace: "team-b", name: "bob-ws", uid: "u-2" });
    await issuer.idle();
    expect(issuer.counts).toEqual({ created: 0, existing: 1, failed: 0 });
    expect(decode(fake.store.get(SECRET, "team-b", "bob-ws-ws-agent") as Record<string, any>, "token")).toBe(
      "someone else's",
    );
    fake.store.delete(SECRET, "team-b", "bob-ws-ws-agent"); // as the garbage collector does with the old VM
    issuer.observe({ namespace: "team-b", name: "bob-ws", uid: "u-3" });
    await issuer.idle();
    expect(issuer.counts.created).toBe(1);
  });

  it("without the RBAC: one warning naming the manifest, and a retry on the VM's next change", async () => {
    const cluster = await fakeCluster({ rbac: { clusterRules: [], namespacedRules: [] } });
    fake = cluster.fake;
    const logs: string[] = [];
    const issuer = new CredentialIssuer(cluster.clients, key, { settings, log: (_l, m) => logs.push(m) });
    issuer.observe({ namespace: "t", name: "a", uid: "1" });
    issuer.observe({ namespace: "t", name: "b", uid: "2" });
    await issuer.idle();
    expect(issuer.counts.failed).toBe(2);
    expect(logs).toHaveLength(1);
    expect(logs[0]).toMatch(
      /^cannot create the credential Secret for t\/a: .*403.* — grant create on secrets \(packaging\/kubernetes-overlays\/credentials\/rbac-credentials\.yaml\)$/,
    );
    issuer.observe({ namespace: "t", name: "a", uid: "1" });
    await issuer.idle();
    expect(fake.requestsMatching("POST", "/namespaces/t/secrets")).toHaveLength(3);
  });
});
