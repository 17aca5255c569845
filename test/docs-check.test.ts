// The docs' checkable claims stay true: every repository path they name exists, every metric
// family they name is exported, every alert they name is defined, every ws-… object name and
// workstation.aik8s.run/… key they name is one the code or the manifests use, and every
// collector address they show uses the Service's ports.
import { existsSync, readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { parse, parseAllDocuments } from "yaml";
import { createMetrics, metricNames } from "../packages/collector/src/metrics/metrics.js";
import { registerSpendMetrics } from "../packages/collector/src/metrics/spend-metrics.js";
import { registerNotificationMetrics } from "../packages/collector/src/outreach/notify/metrics.js";
import { registerHostSourceMetrics } from "../packages/collector/src/loop/hostside/metrics.js";
import { registerStartMetrics } from "../packages/collector/src/comeback/start/metrics.js";
import { registerWarmMetrics } from "../packages/collector/src/comeback/warm/runner.js";
import { StartTracker } from "../packages/collector/src/comeback/start/tracker.js";
import { WebhookSender } from "../packages/collector/src/outreach/notify/sender.js";
import { CollectorStats } from "../packages/collector/src/lib/stats.js";
import { repoRoot } from "./support/process.js";

type Obj = Record<string, any>; // manifests as parsed

const DOCS = [
  "README.md",
  "CONTRIBUTING.md",
  "packaging/deb/README.md",
  ...readdirSync(path.join(repoRoot, "docs"))
    .filter((f) => f.endsWith(".md"))
    .map((f) => `docs/${f}`),
];
const text = (file: string) => readFileSync(path.join(repoRoot, file), "utf8");
const docs = DOCS.map((file) => ({ file, body: text(file) }));

/** Every match of `pattern` in every doc, with where it is. */
function claims(pattern: RegExp, group = 1): Array<{ file: string; claim: string }> {
  return docs.flatMap(({ file, body }) => [...body.matchAll(pattern)].map((m) => ({ file, claim: m[group]! })));
}

/** Source and packaging text the names must come from (not the docs themselves). */
const sources = (() => {
  const files: string[] = [];
  const walk = (dir: string) => {
    for (const entry of readdirSync(path.join(repoRoot, dir), { withFileTypes: true })) {
      const rel = `${dir}/${entry.name}`;
      if (entry.isDirectory()) {
        if (!["node_modules", "dist", "gen", "fixtures"].includes(entry.name)) walk(rel);
      } else if (/\.(ts|mjs|ya?ml|json|sh|service|path|mount|rules|spec)$/.test(entry.name)) files.push(rel);
    }
  };
  for (const dir of [
    "packages/collector/src",
    "packages/guest-agent/src",
    "packages/protocol/src",
    "packaging",
    "scripts",
  ])
    walk(dir);
  return files.map(text).join("\n");
})();

describe("the docs' claims", () => {
  it("every repository path they name exists", () => {
    const roots = "packaging|scripts|docs|test|packages|bench|proto";
    const found = claims(new RegExp(`(?<![\\w/.-])((?:${roots})/[A-Za-z0-9_./{},-]*[A-Za-z0-9_/}])`, "g"));
    const expand = (p: string): string[] => {
      const brace = /\{([^{}]*)\}/.exec(p);
      if (!brace) return [p];
      return brace[1]!.split(",").flatMap((alt) => expand(p.replace(brace[0], alt)));
    };
    const missing = found
      .flatMap(({ file, claim }) => expand(claim).map((p) => ({ file, p: p.replace(/[.,]+$/, "") })))
      // Build outputs, and paths inside a guest or an apt repository layout.
      // Build outputs (bench/results is what the benchmarks write), and placeholders (NAME).
      .filter(({ p }) => !/^packaging\/dist\b|^packages\/[^/]+\/dist\b|^bench\/results\b|NAME/.test(p))
      .filter(({ p }) => !existsSync(path.join(repoRoot, p)) && !existsSync(path.join(repoRoot, p.replace(/#.*$/, ""))))
      .map(({ file, p }) => `${file}: ${p}`);
    expect(missing).toEqual([]);
    expect(found.length).toBeGreaterThan(50);
  });

  it("every metric family they name is exported", () => {
    const registry = createMetrics(
      {
        views: () => [],
        counters: () => ({ stops: new Map(), notices: 0, stopsCancelled: 0, leasesGranted: 0, policyErrors: 0 }),
      },
      new CollectorStats(),
      () => 0,
      () => 0,
      {
        processMetrics: false,
        memory: () => undefined,
        agentConnections: () => ({ open: 0, limit: undefined }),
        certificates: () => [],
      },
    );
    registerNotificationMetrics(
      registry,
      new WebhookSender({ log: () => {}, timeoutMs: 1000, retries: 0, queueSize: 1 }),
    );
    registerHostSourceMetrics(registry, { endpoint: "http://prometheus:9090", rounds: 0, failures: 0 });
    registerStartMetrics(registry, new StartTracker());
    registerSpendMetrics(registry, () => [], true);
    registerWarmMetrics(registry, () => ({ used: 0, wasted: 0 }));
    const exported = new Set(metricNames(registry));
    // A recording rule's name (namespace:workstation_stops:increase7d) is not a family: the rules test checks those.
    const named = claims(/(?<![:\w])(workstation_[a-z_]+[a-z])\b(?!:)/g).map(({ file, claim }) => ({
      file,
      family: claim.replace(/_(bucket|sum|count)$/, ""),
    }));
    // workstation_* is also the prefix the alerts use in prose ("workstation_…" families only).
    const unknown = named.filter(({ family }) => !exported.has(family)).map(({ file, family }) => `${file}: ${family}`);
    expect([...new Set(unknown)]).toEqual([]);
    expect(named.length).toBeGreaterThan(50);
  });

  it("every alert they name is defined in the rules", () => {
    const rules = parse(text("packaging/prometheus/workstation-alerts.yaml")) as Obj;
    const alerts = new Set(
      (rules.groups as Obj[]).flatMap((g) =>
        (g.rules as Obj[]).filter((r) => r.alert !== undefined).map((r) => r.alert as string),
      ),
    );
    const named = claims(/\b(Workstation[A-Z][A-Za-z]+)\b/g);
    const unknown = named.filter(({ claim }) => !alerts.has(claim)).map(({ file, claim }) => `${file}: ${claim}`);
    expect([...new Set(unknown)]).toEqual([]);
    // And each alert has its runbook section in docs/alerts.md.
    const alertsMd = text("docs/alerts.md");
    for (const alert of alerts) expect(alertsMd, alert).toContain(`## ${alert}`);
  });

  it("every ws-… object name and workstation.aik8s.run/… key they name is one the code or manifests use", () => {
    const names = claims(/`(ws-[a-z0-9-]*[a-z0-9])`/g).filter(
      ({ claim }) => !/^ws-(agent|lease|collector)$/.test(claim),
    );
    const unknownNames = names
      .filter(({ claim }) => !sources.includes(claim))
      .map(({ file, claim }) => `${file}: ${claim}`);
    expect([...new Set(unknownNames)]).toEqual([]);
    const keys = claims(/\bworkstation\.aik8s\.run\/([a-z][a-z-]*[a-z])\b/g);
    const unknownKeys = keys
      // docs/scaling.md designs what is not built yet (the shard label): its keys are proposals.
      .filter(({ file }) => file !== "docs/scaling.md")
      .filter(({ claim }) => !sources.includes(claim))
      .map(({ file, claim }) => `${file}: workstation.aik8s.run/${claim}`);
    expect([...new Set(unknownKeys)]).toEqual([]);
    expect(keys.length).toBeGreaterThan(20);
  });

  it("every collector Service address they show uses the Service's ports", () => {
    const service = parseAllDocuments(text("packaging/kubernetes/service.yaml")).map((d) => d.toJS() as Obj)[0]!;
    const ports = new Set((service.spec.ports as Obj[]).map((p) => String(p.port)));
    const byName = Object.fromEntries((service.spec.ports as Obj[]).map((p) => [p.name, String(p.port)]));
    expect(byName.grpc).toBe("7443");
    const deployment = parseAllDocuments(text("packaging/kubernetes/deployment.yaml")).map((d) => d.toJS() as Obj)[0]!;
    const containerPorts = (deployment.spec.template.spec.containers[0].ports as Obj[]).map((p) =>
      String(p.containerPort),
    );
    // The Service's ports are the container's (same numbers as targetPort names resolve to).
    for (const port of ports) expect(containerPorts, `Service port ${port}`).toContain(port);
    // Service addresses, not image references (registry.example.com/ws/ws-collector:0.1.0).
    const shown = claims(/(?<![\w/.-])ws-collector(?:\.ws-system(?:\.svc(?:\.cluster\.local)?)?)?:(\d+)\b/g);
    const wrong = shown.filter(({ claim }) => !ports.has(claim)).map(({ file, claim }) => `${file}: port ${claim}`);
    expect(wrong).toEqual([]);
    expect(shown.length).toBeGreaterThan(3);
  });
});
