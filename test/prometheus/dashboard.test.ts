// The Grafana dashboard names only metrics the collector exports, and shows
// what the issue asks for. (test/prometheus/live.test.ts runs every query
// against a real Prometheus.)
import { readFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { createMetrics, metricNames } from "../../packages/collector/src/metrics/metrics.js";
import { CollectorStats } from "../../packages/collector/src/lib/stats.js";
import { repoRoot } from "../support/process.js";
import { dashboardQueries, metricNamesIn } from "./promql.js";

const dashboard = JSON.parse(readFileSync(path.join(repoRoot, "packaging/grafana/workstation-dashboard.json"), "utf8"));

function exportedNames(): Set<string> {
  const registry = createMetrics(
    {
      views: () => [],
      counters: () => ({ stops: new Map(), notices: 0, stopsCancelled: 0, leasesGranted: 0, policyErrors: 0 }),
    },
    new CollectorStats(),
    () => 0,
    () => 0,
  );
  // Every name a leader's /metrics carries: prom-client's and the per-VM series written by hand.
  const names = new Set<string>(metricNames(registry));
  for (const metric of registry.getMetricsAsArray()) {
    if (String(metric.type) === "histogram")
      for (const suffix of ["_bucket", "_sum", "_count"]) names.add(metric.name + suffix);
  }
  return names;
}

describe("metric names in PromQL", () => {
  it("finds the metrics and skips functions, keywords, labels, strings and durations", () => {
    expect(
      metricNamesIn(
        'sum by (namespace, vm) (rate(foo_total{job="a", vm=~"$vm"}[5m] offset 1h)) / on (vm) group_left (mount) bar * 2 and ignoring (x) baz unless time() - qux{} > bool 3e2 or vector(0)',
      ),
    ).toEqual(["bar", "baz", "foo_total", "qux"]);
    expect(metricNamesIn("histogram_quantile(0.99, sum without (le) (rate(h_bucket[$__rate_interval])))")).toEqual([
      "h_bucket",
    ]);
    expect(
      metricNamesIn(
        'count(max_over_time(s{state="Stopped"}[$__range:1m])) or label_replace(up, "a", "$1", "b", "(.*)")',
      ),
    ).toEqual(["s", "up"]);
  });
});

describe("Grafana dashboard", () => {
  const queries = dashboardQueries(dashboard);

  it("queries only metrics the collector exports", () => {
    const exported = exportedNames();
    expect(queries.length).toBeGreaterThan(20);
    for (const { panel, expr } of queries) {
      const names = metricNamesIn(expr);
      expect(names.length, `${panel}: ${expr} names no metric`).toBeGreaterThan(0);
      for (const name of names)
        expect(exported, `${panel} queries ${name}, which the collector does not export`).toContain(name);
    }
  });

  it("shows per VM the state, idle time against its deadline, signals, GPU utilization, leases and disks", () => {
    const all = queries.map((q) => q.expr).join("\n");
    for (const metric of [
      "workstation_state",
      "workstation_last_activity_timestamp_seconds",
      "workstation_idle_timeout_seconds",
      "workstation_stop_deadline_timestamp_seconds",
      "workstation_signal_active",
      "workstation_gpu_utilization_ratio",
      "workstation_lease_expiry_timestamp_seconds",
      "workstation_disk_used_ratio",
    ]) {
      expect(all).toContain(metric);
    }
    const titles = (dashboard.panels as Array<{ title: string; type: string }>).map((p) => p.title);
    expect(titles).toEqual(
      expect.arrayContaining([
        "State",
        "Running vs idle VMs",
        "GPU-hours saved by stops",
        "Active signals",
        "GPU utilization",
        "Disk usage",
      ]),
    );
    expect((dashboard.panels as Array<{ title: string; type: string }>).find((p) => p.title === "State")?.type).toBe(
      "state-timeline",
    );
  });

  it("is importable: unique panel ids, a Prometheus datasource variable on every query, namespace and VM (label name) filters", () => {
    const ids = (dashboard.panels as Array<{ id: number }>).map((p) => p.id);
    expect(new Set(ids).size).toBe(ids.length);
    expect(dashboard.templating.list.map((v: { name: string }) => v.name)).toEqual([
      "datasource",
      "cluster",
      "namespace",
      "vm",
    ]);
    for (const panel of dashboard.panels as Array<{
      type: string;
      datasource?: { uid: string };
      targets?: Array<{ datasource: { uid: string } }>;
    }>) {
      if (panel.type === "row") continue;
      expect(panel.datasource?.uid).toBe("${datasource}");
      for (const target of panel.targets ?? []) expect(target.datasource.uid).toBe("${datasource}");
    }
    const perVm = queries.filter((q) => q.expr.includes('name=~"$vm"'));
    expect(perVm.length).toBeGreaterThan(10);
  });

  it("filters every selector by the cluster variable, and joins VMs within one cluster", () => {
    for (const { panel, expr } of queries) {
      for (const match of expr.matchAll(/\b(workstation_[a-z_]+)(?!\w|\s*\()(\{[^}]*\})?/g)) {
        expect(match[2] ?? "", `${panel}: ${match[1]} without the cluster filter in ${expr}`).toContain(
          'cluster=~"$cluster"',
        );
      }
      for (const on of expr.matchAll(/\bon\s*\(([^)]*)\)/g)) expect(on[1], `${panel}: ${expr}`).toMatch(/^cluster, /);
    }
    const variable = (name: string) => dashboard.templating.list.find((v: { name: string }) => v.name === name);
    expect(variable("cluster").query.query).toBe("label_values(workstation_collector_leader, cluster)");
    // A single Prometheus has no cluster label: "All" must then match the empty value.
    expect(variable("cluster").allValue).toBe(".*");
    expect(variable("namespace").query.query).toContain('cluster=~"$cluster"');
  });

  it("marks stops, refused stops and observe-mode would-stops as annotations", () => {
    const annotations = dashboard.annotations.list as Array<{
      name: string;
      expr: string;
      enable: boolean;
      datasource: { uid: string };
      titleFormat: string;
    }>;
    expect(annotations.map((a) => a.name)).toEqual(["Stops", "Refused stops", "Would stop (observe)"]);
    for (const annotation of annotations) {
      expect(annotation.enable).toBe(true);
      expect(annotation.datasource.uid).toBe("${datasource}");
      expect(annotation.titleFormat).toBeTruthy();
    }
    expect(annotations[0]!.expr).toContain(
      'workstation_stop_outcomes_total{cluster=~"$cluster", namespace=~"$namespace", name=~"$vm", outcome="accepted"}',
    );
    expect(annotations[2]!.expr).toContain('mode="observe"');
  });
});
