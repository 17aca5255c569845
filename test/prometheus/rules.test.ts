import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { parse, parseAllDocuments } from "yaml";
import { repoRoot } from "../support/process.js";
import { promtool } from "../support/prometheus.js";

const dir = path.join(repoRoot, "packaging/prometheus");
const rulesFile = path.join(dir, "workstation-alerts.yaml");
const testFile = path.join(dir, "workstation-alerts.test.yaml");

interface Rule {
  alert: string;
  record?: string;
  expr: string;
  labels: Record<string, string>;
  annotations: Record<string, string>;
}
const groups = (parse(readFileSync(rulesFile, "utf8")) as { groups: Array<{ name: string; rules: Rule[] }> }).groups;
const rules = groups.flatMap((group) => group.rules);
const alerts = rules.filter((rule) => rule.alert !== undefined);
const recorded = rules.filter((rule) => rule.record !== undefined);
/** Where docs/alerts.md is served by default; the overlays' ws-monitoring settings may move it. */
const DEFAULT_RUNBOOK_BASE = "https://github.com/aik8s/ws/blob/main/docs/alerts.md";

describe("alert rules", () => {
  it("pass promtool check rules", () => {
    const result = promtool(["check", "rules", rulesFile]);
    expect(result.status, result.output).toBe(0);
    expect(result.output).toContain(`SUCCESS: ${rules.length} rules found`);
  });

  it("pass their promtool unit tests", () => {
    const result = promtool(["test", "rules", path.basename(testFile)], dir);
    expect(result.status, result.output).toBe(0);
    expect(result.output).toContain("SUCCESS");
  });

  it("have a unit test for every alert, firing and not firing", () => {
    const tests = (
      parse(readFileSync(testFile, "utf8")) as {
        tests: Array<{ alert_rule_test?: Array<{ alertname: string; exp_alerts: unknown[] }> }>;
      }
    ).tests;
    const cases = tests.flatMap((test) => test.alert_rule_test ?? []);
    for (const { alert } of alerts) {
      const mine = cases.filter((c) => c.alertname === alert);
      expect(
        mine.some((c) => c.exp_alerts.length > 0),
        `${alert} is never tested firing`,
      ).toBe(true);
      expect(
        mine.some((c) => c.exp_alerts.length === 0),
        `${alert} is never tested not firing`,
      ).toBe(true);
    }
    expect(alerts.map((a) => a.alert)).toEqual(
      expect.arrayContaining([
        "WorkstationDiskFilling",
        "WorkstationDiskAlmostFull",
        "WorkstationDiskFull",
        "WorkstationAgentLost",
        "WorkstationStopOverdue",
        "WorkstationStopRefusedRepeatedly",
        "WorkstationCollectorNotLeader",
        "WorkstationLikelyFalseStop",
        "WorkstationAgentNeverConnected",
        "WorkstationAgentHostDisagree",
        "WorkstationHostSourceDown",
      ]),
    );
  });

  it("record how often ws is wrong, each rate tested and documented in docs/metrics.md", () => {
    const tests = (
      parse(readFileSync(testFile, "utf8")) as { tests: Array<{ promql_expr_test?: Array<{ expr: string }> }> }
    ).tests;
    const tested = new Set(tests.flatMap((test) => (test.promql_expr_test ?? []).map((c) => c.expr)));
    const metricsDoc = readFileSync(path.join(repoRoot, "docs/metrics.md"), "utf8");
    for (const { record } of recorded)
      expect(metricsDoc, `docs/metrics.md does not name ${record}`).toContain(`\`${record}\``);
    for (const rate of [
      "namespace:workstation_quick_returns_per_100_stops:7d",
      "namespace:workstation_quick_returns_per_100_stops:30d",
      "workstation:stop_disputes_per_100_stops:7d",
      "workstation:stop_disputes_per_100_stops:30d",
    ]) {
      expect(recorded.map((rule) => rule.record)).toContain(rate);
      expect(tested, `${rate} has no promtool test`).toContain(rate);
    }
  });

  it("record the fleet's 30-day spend across a collector restart, each rule tested (docs/cost.md)", () => {
    const tests = (
      parse(readFileSync(testFile, "utf8")) as { tests: Array<{ promql_expr_test?: Array<{ expr: string }> }> }
    ).tests;
    const tested = new Set(tests.flatMap((test) => (test.promql_expr_test ?? []).map((c) => c.expr)));
    for (const rule of [
      "namespace_owner_profile:workstation_resource_hours:increase30d",
      "namespace_owner_profile:workstation_spend:increase30d",
      "workstation:resource_hours:increase30d",
      "workstation:spend:increase30d",
    ]) {
      expect(recorded.map((r) => r.record)).toContain(rule);
      expect(tested, `${rule} has no promtool test`).toContain(rule);
    }
  });

  it("each carry a severity, a runbook and a runbook_url to a section of docs/alerts.md", () => {
    const runbooks = readFileSync(path.join(repoRoot, "docs/alerts.md"), "utf8");
    const anchors = new Set([...runbooks.matchAll(/^## (\S+)$/gm)].map((m) => m[1]!.toLowerCase()));
    for (const rule of alerts) {
      expect(["info", "warning", "critical"], rule.alert).toContain(rule.labels.severity);
      expect(rule.annotations.summary, rule.alert).toBeTruthy();
      expect(rule.annotations.runbook, rule.alert).toBeTruthy();
      // Absolute (Alertmanager receivers and Grafana link it as is); the overlays set the base.
      expect(rule.annotations.runbook_url, rule.alert).toBe(`${DEFAULT_RUNBOOK_BASE}#${rule.alert.toLowerCase()}`);
      expect(new URL(rule.annotations.runbook_url!).protocol, rule.alert).toBe("https:");
      expect(anchors, `docs/alerts.md has no section for ${rule.alert}`).toContain(rule.alert.toLowerCase());
    }
  });

  it("are the same groups in the Operator's PrometheusRule", () => {
    const operator = parse(readFileSync(path.join(dir, "prometheusrule.yaml"), "utf8"));
    expect(operator.kind).toBe("PrometheusRule");
    expect(operator.spec.groups).toEqual(groups);
  });
});

describe("scrape configuration", () => {
  it("the plain scrape config is a valid Prometheus config with the rules loaded", () => {
    const tmp = mkdtempSync(path.join(os.tmpdir(), "ws-promcfg-"));
    try {
      const scrape = parse(readFileSync(path.join(dir, "scrape-config.yaml"), "utf8"));
      const config = {
        global: { scrape_interval: "15s" },
        rule_files: [rulesFile],
        scrape_configs: scrape.scrape_configs,
      };
      writeFileSync(path.join(tmp, "prometheus.yml"), JSON.stringify(config));
      const result = promtool(["check", "config", path.join(tmp, "prometheus.yml")]);
      expect(result.status, result.output).toBe(0);
      expect(result.output).toContain("is valid prometheus config file syntax");
    } finally {
      rmSync(tmp, { recursive: true, force: true });
    }
  });

  it("the ServiceMonitor scrapes /metrics of every replica through a Service that lists not-ready pods", () => {
    const docs = parseAllDocuments(readFileSync(path.join(dir, "servicemonitor.yaml"), "utf8")).map((d) => d.toJS());
    const service = docs.find((d) => d.kind === "Service");
    const monitor = docs.find((d) => d.kind === "ServiceMonitor");
    expect(service.spec.publishNotReadyAddresses).toBe(true);
    const port = service.spec.ports[0];
    expect(monitor.spec.endpoints[0]).toMatchObject({ port: port.name, path: "/metrics", honorLabels: true });
    for (const [key, value] of Object.entries(monitor.spec.selector.matchLabels))
      expect(service.metadata.labels[key]).toBe(value);
    expect(monitor.spec.namespaceSelector.matchNames).toContain(service.metadata.namespace);
  });
});
