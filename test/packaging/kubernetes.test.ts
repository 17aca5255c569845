// The Kubernetes packaging: every overlay rendered by the real `kubectl kustomize`, every object
// checked against its API type, least-privilege RBAC compared with the engine's verb list, the
// collector config read by the collector's own parser, and the example VM and the Dockerfile.
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { parse, parseAllDocuments, stringify } from "yaml";
import { resolveCollectorConfig } from "../../packages/collector/src/platform/config.js";
import { parseCollectorPolicyConfig } from "../../packages/collector/src/engine/config.js";
import { DEFAULT_ANNOTATION_PREFIX, parseKnobs } from "../../packages/collector/src/engine/policy.js";
import { credentialSecretName } from "../../packages/collector/src/platform/kube/credentials.js";
import { DEFAULT_CREDENTIAL_DIR } from "../../packages/guest-agent/src/config.js";
import { LEADER_LABEL, LEADER_LABEL_VALUE } from "../../packages/collector/src/platform/kube/leader-label.js";
import { repoRoot } from "../support/process.js";
import { ApiTypes, loadClientNodeModels, loadCrdSchema } from "./lib/api-types.js";
import { rootVersion } from "./lib/artifacts.js";
import { requireCommand, run } from "./lib/tools.js";

type Obj = Record<string, any>; // rendered YAML: shapes are asserted, not typed

const OVERLAYS = ["standalone", "observe", "enforce"] as const;
const overlayDir = (name: string) => path.join(repoRoot, "packaging/kubernetes-overlays", name);

/**
 * Everything the collector may do, per API group and resource (the engine issue's list).
 * Core group is "". Anything else, "*" anywhere, or a non-resource URL is a failure.
 */
const ALLOWED_VERBS: Record<string, string[]> = {
  "kubevirt.io/virtualmachines": ["get", "list", "watch", "patch"],
  "kubevirt.io/virtualmachineinstances": ["get", "list", "watch"],
  "/pods": ["get", "list", "watch", "patch"],
  "/persistentvolumeclaims": ["get", "list", "watch"],
  "subresources.kubevirt.io/virtualmachines/stop": ["update"],
  "subresources.kubevirt.io/virtualmachines/start": ["update"],
  "/events": ["create", "patch"],
  "events.k8s.io/events": ["create", "patch"],
  "coordination.k8s.io/leases": ["get", "create", "update"],
};

const rendered = new Map<string, Obj[]>();
let types: ApiTypes;

beforeAll(async () => {
  requireCommand("kubectl", "kubectl");
  const component = path.join(repoRoot, "packaging/prometheus/kustomization.yaml");
  if (!existsSync(component)) {
    throw new Error(
      "packaging/prometheus/kustomization.yaml is missing: the overlays include packaging/prometheus as a kustomize Component " +
        "(apiVersion: kustomize.config.k8s.io/v1alpha1, kind: Component, resources: [servicemonitor.yaml, prometheusrule.yaml])",
    );
  }
  for (const overlay of OVERLAYS) {
    const result = run("kubectl", ["kustomize", overlayDir(overlay)]);
    if (result.status !== 0) throw new Error(`kubectl kustomize ${overlay} failed:\n${result.output}`);
    const documents = parseAllDocuments(result.stdout);
    for (const doc of documents)
      if (doc.errors.length) throw new Error(`${overlay}: rendered YAML does not parse: ${doc.errors[0]!.message}`);
    rendered.set(
      overlay,
      documents.map((doc) => doc.toJS() as Obj),
    );
  }
  types = new ApiTypes(await loadClientNodeModels(), loadCrdSchema());
}, 120_000);

const objects = (overlay: string) => rendered.get(overlay)!;
const find = (overlay: string, kind: string, name?: string) =>
  objects(overlay).filter((o) => o.kind === kind && (name === undefined || o.metadata?.name === name));
const one = (overlay: string, kind: string, name?: string): Obj => {
  const found = find(overlay, kind, name);
  expect(found.length, `${overlay}: exactly one ${kind}${name ? ` ${name}` : ""}`).toBe(1);
  return found[0]!;
};
const deployment = (overlay: string) => one(overlay, "Deployment", "ws-collector");
const container = (overlay: string) => deployment(overlay).spec.template.spec.containers[0] as Obj;
const configText = (overlay: string): string => one(overlay, "ConfigMap").data["config.yaml"];

describe.each(OVERLAYS)("overlay %s", (overlay) => {
  it("renders objects of the expected kinds, all named and labelled part-of ws", () => {
    const kinds = objects(overlay)
      .map((o) => o.kind)
      .sort();
    const expected = [
      "ConfigMap",
      "Deployment",
      "Namespace",
      "NetworkPolicy",
      "PodDisruptionBudget",
      "PrometheusRule",
      "Secret",
      "Service",
      "Service",
      "ServiceAccount",
      "ServiceMonitor",
    ];
    if (overlay !== "standalone") expected.push("ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding");
    expect(kinds).toEqual(expected.sort());
    for (const object of objects(overlay)) {
      expect(object.metadata?.name, `${object.kind} has a name`).toMatch(/^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/);
      if (object.kind !== "Namespace" && !object.kind.startsWith("Cluster"))
        expect(object.metadata.namespace, `${object.kind}/${object.metadata.name}`).toBe("ws-system");
    }
    expect(deployment(overlay).metadata.labels["app.kubernetes.io/part-of"]).toBe("ws");
  });

  it("matches the API types: no unknown field, no value of the wrong type", () => {
    const problems = objects(overlay).flatMap((object) => types.validateObject(object));
    expect(problems).toEqual([]);
  });

  it("runs 2 leader-elected replicas (1 standalone), rolling with a surge, every healthy replica Ready", () => {
    const spec = deployment(overlay).spec;
    expect(spec.replicas).toBe(overlay === "standalone" ? 1 : 2);
    // A new pod is Ready as a standby, so a surge can roll without ever dropping below the replica count.
    expect(spec.strategy).toEqual({ type: "RollingUpdate", rollingUpdate: { maxSurge: 1, maxUnavailable: 0 } });
    const pdb = one(overlay, "PodDisruptionBudget");
    expect(pdb.spec.maxUnavailable).toBe(1);
    expect(pdb.spec.selector.matchLabels).toEqual(spec.selector.matchLabels);
    const c = container(overlay);
    expect(c.readinessProbe.httpGet).toEqual({ path: "/readyz", port: "metrics" });
    expect(c.livenessProbe.httpGet).toEqual({ path: "/healthz", port: "metrics" });
    expect(c.args).toEqual(["serve", "--config", "/etc/ws-collector/config.yaml"]);
    expect(c.ports).toEqual([
      { name: "grpc", containerPort: 7443, protocol: "TCP" },
      { name: "http", containerPort: 8080, protocol: "TCP" },
      { name: "metrics", containerPort: 9090, protocol: "TCP" },
    ]);
    const env = Object.fromEntries((c.env as Obj[]).map((e) => [e.name, e.valueFrom?.fieldRef?.fieldPath]));
    expect(env).toEqual({ POD_NAME: "metadata.name", POD_NAMESPACE: "metadata.namespace" });
    // The resources are the sizing table's row for the fleet the Deployment states (docs/install.md).
    const sizing = readFileSync(path.join(repoRoot, "docs/install.md"), "utf8").split("## Sizing")[1]!;
    const fleet = /the shipped one is for \*\*([\d,]+) VMs\*\*/.exec(sizing)?.[1];
    expect(fleet, "docs/install.md states the fleet the Deployment is sized for").toBeTruthy();
    const row = sizing.split("\n").find((line) => line.startsWith(`| ${fleet} |`));
    const [, , memoryRequest, memoryLimit, cpuRequest] = row!.split("|").map((cell) => cell.trim());
    expect(c.resources).toEqual({
      requests: { cpu: cpuRequest, memory: memoryRequest },
      limits: { memory: memoryLimit },
    });
    // The memory guard sheds at 85 % and the alert fires at 75 % of this limit: a limit is required.
    expect(c.resources.limits.cpu).toBeUndefined();
    expect(c.image).toBe(`registry.example.com/ws/ws-collector:${rootVersion}`);
    // app.kubernetes.io/version on the objects and the pods says which release runs, equal to the image tag.
    expect(deployment(overlay).metadata.labels["app.kubernetes.io/version"]).toBe(rootVersion);
    expect(spec.template.metadata.labels["app.kubernetes.io/version"]).toBe(rootVersion);
    expect(spec.selector.matchLabels["app.kubernetes.io/version"]).toBeUndefined();
  });

  it("runs as non-root with a read-only root filesystem, no capabilities, RuntimeDefault seccomp", () => {
    const pod = deployment(overlay).spec.template.spec;
    expect(pod.securityContext).toMatchObject({ runAsNonRoot: true, seccompProfile: { type: "RuntimeDefault" } });
    expect(pod.securityContext.runAsUser).toBeGreaterThan(0);
    expect(container(overlay).securityContext).toEqual({
      allowPrivilegeEscalation: false,
      readOnlyRootFilesystem: true,
      runAsNonRoot: true,
      capabilities: { drop: ["ALL"] },
    });
    expect(one(overlay, "Namespace").metadata.labels["pod-security.kubernetes.io/enforce"]).toBe("restricted");
    expect(pod.serviceAccountName).toBe(one(overlay, "ServiceAccount").metadata.name);
    if (overlay === "standalone") expect(pod.automountServiceAccountToken).toBe(false);
  });

  it("mounts the config, the key and the TLS pair where the config says, from objects that exist", () => {
    const pod = deployment(overlay).spec.template.spec;
    const mount = (container(overlay).volumeMounts as Obj[]).find((m) => m.name === "config")!;
    expect(mount).toMatchObject({ mountPath: "/etc/ws-collector", readOnly: true });
    const sources = (pod.volumes as Obj[]).find((v) => v.name === "config")!.projected.sources as Obj[];
    const files = new Map<string, string>();
    for (const source of sources) {
      const ref = source.configMap ?? source.secret;
      for (const item of ref.items as Obj[])
        files.set(
          path.posix.join(mount.mountPath, item.path),
          `${source.configMap ? "ConfigMap" : "Secret"}/${ref.name}:${item.key}`,
        );
    }
    expect(files.get("/etc/ws-collector/config.yaml")).toBe(
      `ConfigMap/${one(overlay, "ConfigMap").metadata.name}:config.yaml`,
    );
    expect(files.get("/etc/ws-collector/token.key")).toBe(
      `Secret/${one(overlay, "Secret", "ws-collector-key").metadata.name}:token.key`,
    );

    const config = resolveCollectorConfig(
      configText(overlay),
      "config.yaml",
      {},
      { POD_NAME: "ws-collector-0", POD_NAMESPACE: "ws-system" },
    );
    for (const file of [config.tokenKeyFile, config.grpc.certFile!, config.grpc.keyFile!])
      expect([...files.keys()], file).toContain(file);
  });

  it("leaves the token key to the operator: the Secret carries no data to overwrite it with", () => {
    const secret = one(overlay, "Secret", "ws-collector-key");
    expect(secret.data).toBeUndefined();
    expect(secret.stringData).toBeUndefined();
  });

  it("has a config the collector accepts, in the overlay's mode", () => {
    const config = resolveCollectorConfig(
      configText(overlay),
      "config.yaml",
      {},
      { POD_NAME: "ws-collector-0", POD_NAMESPACE: "ws-system" },
    );
    expect(config.mode).toBe(overlay === "standalone" ? "standalone" : "kubernetes");
    expect(config.grpc.listen).toBe("0.0.0.0:7443");
    expect(config.http.listen).toBe("0.0.0.0:8080");
    expect(config.http.metricsListen).toBe("0.0.0.0:9090");
    expect(config.kubernetes.kubeconfig).toBeUndefined(); // in-cluster service account
    expect(config.kubernetes.ownerLabel).toBe("platform.example.com/user"); // the field guides' owner label
    const policy = parseCollectorPolicyConfig(config.policyYaml);
    if (!policy.ok) throw new Error(`policy: ${policy.errors.join("; ")}`);
    expect(policy.config.defaults.mode).toBe(overlay === "enforce" ? "enforce" : "observe");
    expect(Object.keys(policy.config.profiles).sort()).toEqual(["interactive", "teaching", "training"]);
    if (overlay === "standalone") expect(policy.config.defaults.autostopEnabled).toBe(true);
  });

  it("serves gRPC and HTTP through a Service that selects the leader's pod (standalone: the one pod)", () => {
    const service = one(overlay, "Service", "ws-collector");
    expect(service.spec.ports).toEqual([
      { name: "grpc", port: 7443, targetPort: "grpc", protocol: "TCP" },
      { name: "http", port: 8080, targetPort: "http", protocol: "TCP" },
    ]);
    const podLabels = deployment(overlay).spec.template.metadata.labels;
    // The leader label is set at run time by the leader (platform/kube/leader-label.ts), never in the template.
    expect(podLabels[LEADER_LABEL]).toBeUndefined();
    const leaderLabels = overlay === "standalone" ? {} : { [LEADER_LABEL]: LEADER_LABEL_VALUE };
    expect(service.spec.selector).toEqual({ ...deployment(overlay).spec.selector.matchLabels, ...leaderLabels });
    for (const [key, value] of Object.entries(service.spec.selector))
      if (key !== LEADER_LABEL) expect(podLabels[key], key).toBe(value);
  });

  it("lets only VM pods reach gRPC, the ingress namespace the pages, and the monitoring namespace /metrics", () => {
    const policy = one(overlay, "NetworkPolicy");
    const podLabels = deployment(overlay).spec.template.metadata.labels;
    for (const [key, value] of Object.entries(policy.spec.podSelector.matchLabels)) expect(podLabels[key]).toBe(value);
    expect(policy.spec.policyTypes).toEqual(["Ingress"]);
    const rules = policy.spec.ingress as Obj[];
    const grpcRules = rules.filter(
      (rule) => !rule.ports || (rule.ports as Obj[]).some((p) => p.port === 7443 || p.port === "grpc"),
    );
    expect(grpcRules.length).toBe(1);
    expect(grpcRules[0]!.from).toEqual([
      { namespaceSelector: {}, podSelector: { matchLabels: { "kubevirt.io": "virt-launcher" } } },
    ]);
    const rulesFor = (port: number) => rules.filter((rule) => (rule.ports as Obj[]).some((p) => p.port === port));
    expect(rulesFor(9090).length).toBe(1);
    expect(rulesFor(9090)[0]!.from).toEqual([
      { namespaceSelector: { matchLabels: { "kubernetes.io/metadata.name": "monitoring" } } },
    ]);
    expect(rulesFor(8080).length).toBe(1);
    expect(rulesFor(8080)[0]!.from).toEqual([
      { namespaceSelector: { matchLabels: { "kubernetes.io/metadata.name": "ingress-nginx" } } },
    ]);
  });

  it("grants no verb beyond the engine's list, binds only its own roles, and only to its ServiceAccount", () => {
    const roles = objects(overlay).filter((o) => o.kind === "ClusterRole" || o.kind === "Role");
    if (overlay === "standalone") {
      expect(roles).toEqual([]);
      expect(objects(overlay).filter((o) => o.kind.endsWith("Binding"))).toEqual([]);
      return;
    }
    const granted: string[] = [];
    for (const role of roles) {
      for (const rule of role.rules as Obj[]) {
        expect(rule.nonResourceURLs, `${role.kind}/${role.metadata.name} nonResourceURLs`).toBeUndefined();
        for (const group of rule.apiGroups as string[]) {
          for (const resource of rule.resources as string[]) {
            const allowed = ALLOWED_VERBS[`${group}/${resource}`];
            expect(
              allowed,
              `${role.kind}/${role.metadata.name} grants on ${group || "core"}/${resource}, which is not in the list`,
            ).toBeDefined();
            for (const verb of rule.verbs as string[]) {
              expect(
                allowed,
                `${role.kind}/${role.metadata.name}: ${verb} on ${group || "core"}/${resource}`,
              ).toContain(verb);
              granted.push(`${verb} ${group}/${resource}`);
            }
          }
        }
      }
    }
    // Pods are written (labelled) only in the collector's own namespace, never cluster-wide.
    const podWriters = roles.filter((role) =>
      (role.rules as Obj[]).some(
        (rule) => (rule.resources as string[]).includes("pods") && (rule.verbs as string[]).includes("patch"),
      ),
    );
    expect(podWriters.map((role) => `${role.kind}/${role.metadata.namespace}`)).toEqual(["Role/ws-system"]);
    // What the collector cannot work without.
    for (const needed of [
      "update subresources.kubevirt.io/virtualmachines/stop",
      "update subresources.kubevirt.io/virtualmachines/start",
      "watch kubevirt.io/virtualmachines",
      "update coordination.k8s.io/leases",
      "patch /pods",
    ]) {
      expect(granted).toContain(needed);
    }
    const sa = one(overlay, "ServiceAccount");
    for (const binding of objects(overlay).filter((o) => o.kind.endsWith("Binding"))) {
      const target = roles.find((r) => r.kind === binding.roleRef.kind && r.metadata.name === binding.roleRef.name);
      expect(
        target,
        `${binding.kind}/${binding.metadata.name} binds ${binding.roleRef.kind}/${binding.roleRef.name}, not one of ours`,
      ).toBeDefined();
      expect(binding.subjects).toEqual([
        { kind: "ServiceAccount", name: sa.metadata.name, namespace: sa.metadata.namespace },
      ]);
    }
  });

  it("includes the ServiceMonitor and the alert rules, labelled for kube-prometheus-stack's default selectors", () => {
    const monitor = one(overlay, "ServiceMonitor");
    const rule = one(overlay, "PrometheusRule");
    expect(monitor.spec.endpoints[0].path).toBe("/metrics");
    expect((rule.spec.groups as Obj[]).length).toBeGreaterThan(0);
    // The chart selects both by release=<its Helm release name>; the overlay's ws-monitoring sets it.
    for (const object of [monitor, rule]) {
      expect(object.metadata.labels.release, object.kind).toBe("kube-prometheus-stack");
      expect(object.metadata.labels["app.kubernetes.io/version"], object.kind).toBe(rootVersion);
      expect(object.metadata.labels["app.kubernetes.io/part-of"], object.kind).toBe("ws");
    }
    // The settings object itself is local to kustomize, never applied.
    expect(find(overlay, "ConfigMap", "ws-monitoring")).toEqual([]);
    // Recording rules (how often ws is wrong) carry no annotations: only the alerts link a runbook.
    const rules = (rule.spec.groups as Obj[]).flatMap((group) => group.rules as Obj[]);
    expect(rules.some((r) => r.record !== undefined && r.annotations === undefined)).toBe(true);
    for (const alert of rules.filter((r) => r.alert !== undefined)) {
      expect(alert.annotations.runbook_url).toBe(
        `https://github.com/aik8s/ws/blob/main/docs/alerts.md#${String(alert.alert).toLowerCase()}`,
      );
    }
    // The metrics Service selects every replica (not the leader label): each is scraped.
    const metrics = one(overlay, "Service", "ws-collector-metrics");
    expect(metrics.spec.selector).toEqual(deployment(overlay).spec.selector.matchLabels);
    expect(monitor.spec.selector.matchLabels).toEqual({
      "app.kubernetes.io/name": "ws-collector",
      "app.kubernetes.io/component": "metrics",
    });
  });
});

describe("the monitoring settings", () => {
  it("are overridden in a site overlay layered on observe, as docs/install.md shows", () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), "ws15-overlay-"));
    try {
      const rel = (to: string) => path.relative(dir, path.join(repoRoot, to));
      writeFileSync(
        path.join(dir, "kustomization.yaml"),
        `apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - ${rel("packaging/kubernetes-overlays/observe")}
components:
  - ${rel("packaging/prometheus/settings")}
configMapGenerator:
  - name: ws-monitoring
    behavior: replace
    literals:
      - release=monitoring
      - runbookBase=https://wiki.example.org/ws/alerts
    options:
      disableNameSuffixHash: true
      annotations:
        config.kubernetes.io/local-config: "true"
`,
      );
      const result = run("kubectl", ["kustomize", dir]);
      expect(result.status, result.output).toBe(0);
      const objects = parseAllDocuments(result.stdout).map((doc) => doc.toJS() as Obj);
      const rule = objects.find((o) => o.kind === "PrometheusRule")!;
      expect(objects.find((o) => o.kind === "ServiceMonitor")!.metadata.labels.release).toBe("monitoring");
      expect(rule.metadata.labels.release).toBe("monitoring");
      expect(objects.filter((o) => o.kind === "ConfigMap").map((o) => o.metadata.name)).not.toContain("ws-monitoring");
      const urls = (rule.spec.groups as Obj[]).flatMap((group) =>
        (group.rules as Obj[]).filter((r) => r.alert !== undefined).map((r) => r.annotations.runbook_url as string),
      );
      expect(urls.length).toBeGreaterThan(5);
      for (const url of urls) expect(url).toMatch(/^https:\/\/wiki\.example\.org\/ws\/alerts#workstation[a-z]+$/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("observe and enforce", () => {
  it("differ only in the default mode of their policy and the per-VM series (detailed while observing, for whatif)", () => {
    const observe = parse(configText("observe")) as Obj;
    const enforce = parse(configText("enforce")) as Obj;
    expect(observe.policy.defaults.mode).toBe("observe");
    expect(observe.metrics).toEqual({ vmSeries: "detailed" });
    expect(enforce.metrics).toBeUndefined();
    enforce.policy.defaults.mode = "observe";
    enforce.metrics = { vmSeries: "detailed" };
    expect(enforce).toEqual(observe);
  });
});

describe("enforce without the Prometheus Operator", () => {
  it("is the enforce overlay minus the ServiceMonitor, its metrics Service and the PrometheusRule", () => {
    const result = run("kubectl", ["kustomize", overlayDir("enforce-no-operator")]);
    expect(result.status, result.output).toBe(0);
    const plain = parseAllDocuments(result.stdout).map((d) => d.toJS() as Obj);
    const monitoring = (o: Obj) =>
      o.kind === "ServiceMonitor" ||
      o.kind === "PrometheusRule" ||
      (o.kind === "Service" && o.spec?.clusterIP === "None");
    expect(plain.filter(monitoring)).toEqual([]);
    const key = (o: Obj) => `${o.kind}/${o.metadata.name}`;
    expect(plain.map(key).sort()).toEqual(
      objects("enforce")
        .filter((o) => !monitoring(o))
        .map(key)
        .sort(),
    );
    const configOf = (docs: Obj[]) => docs.find((d) => d.kind === "ConfigMap")!.data["config.yaml"];
    expect(configOf(plain)).toBe(configText("enforce"));
    expect((parse(configOf(plain)) as Obj).policy.defaults.mode).toBe("enforce");
    expect(plain.flatMap((o) => types.validateObject(o))).toEqual([]);
  });
});

describe("the credentials component on top of observe", () => {
  it("adds create-only RBAC on secrets and mounts the CA ConfigMap, and nothing else", () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), "ws-cred-overlay-"));
    try {
      writeFileSync(
        path.join(dir, "kustomization.yaml"),
        `resources: [${JSON.stringify(path.relative(dir, overlayDir("observe")))}]\ncomponents: [${JSON.stringify(path.relative(dir, overlayDir("credentials")))}]\n`,
      );
      const result = run("kubectl", ["kustomize", dir, "--load-restrictor", "LoadRestrictionsNone"]);
      expect(result.status, result.output).toBe(0);
      const docs = parseAllDocuments(result.stdout).map((d) => d.toJS() as Obj);
      const role = docs.find((d) => d.kind === "ClusterRole" && d.metadata.name === "ws-collector-credentials")!;
      expect(role.rules).toEqual([{ apiGroups: [""], resources: ["secrets"], verbs: ["create"] }]);
      const binding = docs.find(
        (d) => d.kind === "ClusterRoleBinding" && d.metadata.name === "ws-collector-credentials",
      )!;
      expect(binding.subjects).toEqual([{ kind: "ServiceAccount", name: "ws-collector", namespace: "ws-system" }]);
      const sources = docs.find((d) => d.kind === "Deployment")!.spec.template.spec.volumes[0].projected
        .sources as Obj[];
      expect(sources.at(-1)).toEqual({
        configMap: { name: "ws-collector-ca", items: [{ key: "ca.crt", path: "tls/ca.crt" }] },
      });
      expect(docs.length).toBe(objects("observe").length + 2);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe.each(["observe", "enforce"])("the way-back component on top of %s", (base) => {
  // One line in a site's kustomization turns on the wake listener and routes the links outside the login.
  let docs: Obj[];
  beforeAll(() => {
    const dir = mkdtempSync(path.join(os.tmpdir(), "ws-way-back-"));
    try {
      writeFileSync(
        path.join(dir, "kustomization.yaml"),
        `resources: [${JSON.stringify(path.relative(dir, overlayDir(base)))}]\ncomponents: [${JSON.stringify(path.relative(dir, overlayDir("way-back")))}]\n`,
      );
      const result = run("kubectl", ["kustomize", dir, "--load-restrictor", "LoadRestrictionsNone"]);
      expect(result.status, result.output).toBe(0);
      docs = parseAllDocuments(result.stdout).map((d) => d.toJS() as Obj);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
  const get = (kind: string, name: string) => docs.find((d) => d.kind === kind && d.metadata.name === name)!;

  it("matches the API types and adds only the two Ingresses", () => {
    expect(docs.flatMap((object) => types.validateObject(object))).toEqual([]);
    expect(docs.length).toBe(objects(base).length + 2);
  });

  it("starts the wake listener on the port the container, the Service and the NetworkPolicy open", () => {
    const collector = get("Deployment", "ws-collector").spec.template.spec.containers[0] as Obj;
    const env = Object.fromEntries(
      (collector.env as Obj[]).filter((e) => e.value !== undefined).map((e) => [e.name, e.value]),
    );
    const config = resolveCollectorConfig(
      get("ConfigMap", one(base, "ConfigMap").metadata.name).data["config.yaml"],
      "config.yaml",
      {},
      { POD_NAME: "ws-collector-0", POD_NAMESPACE: "ws-system", ...env },
    );
    expect(config.start.wakeListen).toBe("0.0.0.0:8081");
    expect(collector.ports).toContainEqual({ name: "wake", containerPort: 8081, protocol: "TCP" });
    expect(get("Service", "ws-collector").spec.ports).toContainEqual({
      name: "wake",
      port: 8081,
      targetPort: "wake",
      protocol: "TCP",
    });
    const rules = get("NetworkPolicy", "ws-collector").spec.ingress as Obj[];
    const wakeRules = rules.filter((rule) => (rule.ports as Obj[]).some((p) => p.port === 8081));
    expect(wakeRules.map((rule) => rule.from)).toEqual([
      [{ namespaceSelector: { matchLabels: { "kubernetes.io/metadata.name": "ingress-nginx" } } }],
    ]);
  });

  it("puts the pages behind the login and /keep/ and /start/ outside it, on the host notifications.publicUrl names", () => {
    const pages = get("Ingress", "ws-collector");
    const links = get("Ingress", "ws-collector-links");
    expect(pages.metadata.annotations["nginx.ingress.kubernetes.io/auth-url"]).toMatch(/^https:\/\//);
    expect(links.metadata.annotations ?? {}).toEqual({});
    expect(links.spec.rules[0].http.paths.map((p: Obj) => [p.path, p.pathType, p.backend.service])).toEqual([
      ["/keep/", "Prefix", { name: "ws-collector", port: { name: "http" } }],
      ["/start/", "Prefix", { name: "ws-collector", port: { name: "http" } }],
    ]);
    const config = resolveCollectorConfig(
      configText(base),
      "config.yaml",
      {},
      { POD_NAME: "p", POD_NAMESPACE: "ws-system" },
    );
    const host = new URL(config.notifications.publicUrl).host;
    // The wake port, reached from a workstation namespace through the example ExternalName Service.
    const wake = parse(
      readFileSync(path.join(repoRoot, "packaging/kubernetes/examples/ws-collector-wake.yaml"), "utf8"),
    );
    expect(types.validateObject(wake)).toEqual([]);
    expect(wake.spec.externalName).toBe(`${get("Service", "ws-collector").metadata.name}.ws-system.svc.cluster.local`);
    expect(wake.spec.ports[0].port).toBe(8081);
    expect(pages.spec.rules[0].host).toBe(host);
    expect(links.spec.rules[0].host).toBe(host);
  });
});

describe("docs/install.md's way back, followed literally", () => {
  it("renders a site whose config, Ingresses and wake listener agree on the site's host", () => {
    // The section's three yaml blocks: the config's publicUrl, the component line, the host patches.
    const section = readFileSync(path.join(repoRoot, "docs/install.md"), "utf8")
      .split("### The way back")[1]!
      .split("\n## ")[0]!;
    const blocks = [...section.matchAll(/```yaml\n([\s\S]*?)```/g)].map((m) => m[1]!.replace(/^ {3}/gm, ""));
    expect(blocks.length).toBe(3);
    const [configBlock, componentBlock, patchBlock] = blocks.map((b) => parse(b) as Obj);
    const root = mkdtempSync(path.join(os.tmpdir(), "ws-way-back-site-"));
    try {
      // mysite/ beside ws/, as the guide lays them out.
      symlinkSync(repoRoot, path.join(root, "ws"));
      const site = path.join(root, "mysite");
      mkdirSync(site);
      const config = parse(readFileSync(path.join(repoRoot, "packaging/kubernetes/config.yaml"), "utf8")) as Obj;
      config.notifications = { ...config.notifications, ...configBlock!.notifications };
      writeFileSync(path.join(site, "config.yaml"), stringify(config));
      writeFileSync(
        path.join(site, "kustomization.yaml"),
        stringify({
          apiVersion: "kustomize.config.k8s.io/v1beta1",
          kind: "Kustomization",
          resources: ["../ws/packaging/kubernetes-overlays/observe"],
          components: componentBlock!.components,
          configMapGenerator: [{ name: "ws-collector-config", behavior: "replace", files: ["config.yaml"] }],
          patches: patchBlock!.patches,
        }),
      );
      const result = run("kubectl", ["kustomize", site, "--load-restrictor", "LoadRestrictionsNone"]);
      expect(result.status, result.output).toBe(0);
      const docs = parseAllDocuments(result.stdout).map((d) => d.toJS() as Obj);
      const configMap = docs.find((d) => d.kind === "ConfigMap" && d.metadata.name.startsWith("ws-collector-config"))!;
      const resolved = resolveCollectorConfig(
        configMap.data["config.yaml"],
        "config.yaml",
        {},
        {
          POD_NAME: "p",
          POD_NAMESPACE: "ws-system",
          WS_COLLECTOR_WAKE_LISTEN: "0.0.0.0:8081",
        },
      );
      const host = new URL(resolved.notifications.publicUrl).host;
      expect(host).not.toBe("ws.example.com"); // the guide's own value, not the placeholder
      const ingresses = docs.filter((d) => d.kind === "Ingress");
      expect(ingresses.map((i) => i.spec.rules[0].host)).toEqual([host, host]);
      const pages = ingresses.find((i) => i.metadata.name === "ws-collector")!;
      expect(pages.metadata.annotations["nginx.ingress.kubernetes.io/auth-url"]).not.toMatch(/example\.com/);
      expect(pages.metadata.annotations["nginx.ingress.kubernetes.io/auth-signin"]).toMatch(
        /\?rd=\$escaped_request_uri$/,
      );
      const env = docs.find((d) => d.kind === "Deployment")!.spec.template.spec.containers[0].env as Obj[];
      expect(env).toContainEqual({ name: "WS_COLLECTOR_WAKE_LISTEN", value: "0.0.0.0:8081" });
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });
});

describe("the example VM with the per-VM credential disk", () => {
  const file = path.join(repoRoot, "packaging/kubernetes/examples/workstation-vm-credentials.yaml");
  const docs = () => parseAllDocuments(readFileSync(file, "utf8")).map((d) => d.toJS() as Obj);
  const vm = () => docs().find((d) => d.kind === "VirtualMachine")!;

  it("matches the API types and mounts the Secret the collector names for it, with the serial the package's mount unit expects", () => {
    expect(docs().flatMap((d) => types.validateObject(d))).toEqual([]);
    const template = vm().spec.template.spec;
    const volume = (template.volumes as Obj[]).find((v) => v.secret)!;
    expect(volume.secret.secretName).toBe(credentialSecretName(vm().metadata.name));
    const disk = (template.domain.devices.disks as Obj[]).find((d) => d.name === volume.name)!;
    const mountUnit = readFileSync(path.join(repoRoot, "packaging/systemd/run-ws-credential.mount"), "utf8");
    expect(mountUnit).toContain(`What=/dev/disk/by-id/virtio-${disk.serial}`);
    expect(mountUnit).toContain(`Where=${DEFAULT_CREDENTIAL_DIR}`);
    expect(vm().spec.dataVolumeTemplates).toBeUndefined();
    // No cloud-init token: nothing per-VM but the names.
    expect(JSON.stringify(vm())).not.toMatch(/token|REPLACE/);
  });
});

describe("the example workstation VM", () => {
  const file = path.join(repoRoot, "packaging/kubernetes/examples/workstation-vm.yaml");
  const docs = () => parseAllDocuments(readFileSync(file, "utf8")).map((d) => d.toJS() as Obj);
  const vm = () => docs().find((d) => d.kind === "VirtualMachine")!;
  const secret = () => docs().find((d) => d.kind === "Secret")!;

  it("matches the KubeVirt and core API types", () => {
    expect(docs().map((d) => d.kind)).toEqual(["Secret", "DataVolume", "VirtualMachine"]);
    expect(docs().flatMap((d) => types.validateObject(d))).toEqual([]);
  });

  it("opts into autostop with a label and sets its policy with annotations the engine accepts", () => {
    const { labels, annotations } = vm().metadata;
    expect(labels[`${DEFAULT_ANNOTATION_PREFIX}autostop`]).toBe("enabled");
    const knobs = Object.entries(annotations as Record<string, string>)
      .filter(([key]) => key.startsWith(DEFAULT_ANNOTATION_PREFIX))
      .map(([key, value]) => [key.slice(DEFAULT_ANNOTATION_PREFIX.length), value] as [string, string]);
    expect(knobs.map(([k]) => k).sort()).toEqual(["grace-period", "idle-timeout", "profile"]);
    const { errors } = parseKnobs(
      knobs.filter(([k]) => k !== "profile"),
      "annotation",
    );
    expect(errors).toEqual([]);
    const profile = knobs.find(([k]) => k === "profile")![1];
    const policy = parseCollectorPolicyConfig(JSON.stringify((parse(configText("enforce")) as Obj).policy));
    if (!policy.ok) throw new Error(policy.errors.join("; "));
    expect(Object.keys(policy.config.profiles)).toContain(profile);
  });

  it("boots from a DataVolume root disk (persistent: the collector may stop it) with cloud-init from the Secret", () => {
    const spec = vm().spec;
    const template = spec.template.spec;
    // A standalone DataVolume: a dataVolumeTemplate would be cascade-deleted with the VM.
    expect(spec.dataVolumeTemplates).toBeUndefined();
    const dataVolume = docs().find((d) => d.kind === "DataVolume")!;
    expect(dataVolume.metadata.namespace).toBe(vm().metadata.namespace);
    expect(dataVolume.metadata.ownerReferences).toBeUndefined();
    const rootDv = dataVolume.metadata.name;
    const volumes = template.volumes as Obj[];
    expect(volumes.find((v) => v.name === "root")).toEqual({ name: "root", dataVolume: { name: rootDv } });
    for (const volume of volumes)
      expect(
        Object.keys(volume).filter((k) => k !== "name"),
        volume.name,
      ).toSatisfy((kinds: string[]) =>
        kinds.every((k) => ["dataVolume", "persistentVolumeClaim", "cloudInitNoCloud"].includes(k)),
      );
    const cloudInit = volumes.find((v) => v.cloudInitNoCloud)!.cloudInitNoCloud;
    expect(cloudInit.secretRef.name).toBe(secret().metadata.name);
    expect(secret().metadata.namespace).toBe(vm().metadata.namespace);
    const disks = (template.domain.devices.disks as Obj[]).map((d) => d.name).sort();
    expect(disks).toEqual(volumes.map((v) => v.name).sort());
    expect(template.domain.devices.interfaces[0].masquerade).toEqual({});
    expect(spec.runStrategy).toBe("Always");
  });

  it("carries the same user-data as packaging/cloud-init/user-data.example.yaml", () => {
    const example = readFileSync(path.join(repoRoot, "packaging/cloud-init/user-data.example.yaml"), "utf8");
    const embedded = secret().stringData.userdata as string;
    expect(embedded.startsWith("#cloud-config\n")).toBe(true);
    expect(parse(embedded)).toEqual(parse(example));
    const agentConfig = parse((parse(embedded) as Obj).write_files[0].content) as Obj;
    expect(agentConfig.vm).toEqual({ namespace: vm().metadata.namespace, name: vm().metadata.name });
  });
});

describe("the collector image", () => {
  const dockerfile = () => readFileSync(path.join(repoRoot, "packaging/docker/Dockerfile"), "utf8");
  const instructions = () =>
    dockerfile()
      .split("\n")
      .filter((line) => line.trim() && !line.trim().startsWith("#"))
      .map((line) => {
        const [keyword, ...rest] = line.trim().split(/\s+/);
        return { keyword: keyword!.toUpperCase(), args: rest.join(" ") };
      });

  it("builds on a pinned Node.js >= 20 slim image (by default; a build arg may name an equal one)", () => {
    const from = instructions().filter((i) => i.keyword === "FROM");
    expect(from.length).toBe(1);
    expect(from[0]!.args).toBe("${NODE_IMAGE}");
    const arg = instructions().find((i) => i.keyword === "ARG" && i.args.startsWith("NODE_IMAGE="))!;
    const base = arg.args.slice("NODE_IMAGE=".length);
    const match = /^node:(\d+)\.(\d+)\.(\d+)-bookworm-slim(@sha256:[0-9a-f]{64})?$/.exec(base);
    expect(match, `ARG NODE_IMAGE=${base} is not a pinned node:X.Y.Z-bookworm-slim`).not.toBeNull();
    expect(Number(match![1])).toBeGreaterThanOrEqual(20);
  });

  it("copies only the bundle, runs as the Deployment's non-root uid, and starts it with node", () => {
    const copies = instructions().filter((i) => i.keyword === "COPY" || i.keyword === "ADD");
    expect(copies.length).toBe(1);
    expect(copies[0]!.args).toMatch(/ packages\/collector\/dist\/ws-collector\.cjs \/app\/ws-collector\.cjs$/);
    const user = instructions().find((i) => i.keyword === "USER")!.args;
    const pod = deployment("enforce").spec.template.spec.securityContext;
    expect(user).toBe(`${pod.runAsUser}:${pod.runAsGroup}`);
    expect(JSON.parse(instructions().find((i) => i.keyword === "ENTRYPOINT")!.args)).toEqual([
      "node",
      "/app/ws-collector.cjs",
    ]);
    expect(JSON.parse(instructions().find((i) => i.keyword === "CMD")!.args)).toEqual(container("enforce").args);
    expect(
      instructions()
        .find((i) => i.keyword === "EXPOSE")!
        .args.split(/\s+/)
        .sort(),
    ).toEqual(["7443", "8080", "9090"]);
    const ignore = readFileSync(path.join(repoRoot, "packaging/docker/Dockerfile.dockerignore"), "utf8")
      .split("\n")
      .filter((l) => l && !l.startsWith("#"));
    expect(ignore).toEqual(["*", "!packages/collector/dist/ws-collector.cjs"]);
  });
});

describe("the API type check itself", () => {
  it("rejects unknown fields, values of the wrong type, missing required fields and unknown kinds", () => {
    const deploymentProblems = types.validateObject({
      apiVersion: "apps/v1",
      kind: "Deployment",
      metadata: { name: "x", labels: { enabled: true } },
      spec: { replicas: "2", templat: {}, selector: { matchLabels: { a: "b" } } },
    });
    expect(deploymentProblems).toEqual([
      "Deployment/x.metadata.labels.enabled: expected a string, got true",
      'Deployment/x.spec.replicas: expected a number, got "2"',
      expect.stringMatching(/^Deployment\/x\.spec\.templat: unknown field/),
    ]);
    const vmProblems = types.validateObject({
      apiVersion: "kubevirt.io/v1",
      kind: "VirtualMachine",
      metadata: { name: "vm" },
      spec: {
        runStrategy: "Sometimes",
        template: {
          spec: { domain: { devices: { disks: [{ disk: { bus: "virtio" } }] }, memory: { guest: "lots" } } },
        },
      },
    });
    expect(vmProblems).toEqual([
      expect.stringMatching(/^VirtualMachine\/vm\.spec\.runStrategy: expected one of Always, Halted/),
      "VirtualMachine/vm.spec.template.spec.domain.devices.disks[0].name: required",
      'VirtualMachine/vm.spec.template.spec.domain.memory.guest: expected a quantity such as 16Gi or 500m, got "lots"',
    ]);
    expect(types.validateObject({ apiVersion: "example.com/v1", kind: "Widget", metadata: { name: "w" } })).toEqual([
      "example.com/v1 Widget w: no API type known for it (add it to test/packaging/schemas/crds.json)",
    ]);
  });
});
