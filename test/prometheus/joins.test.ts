// The joins docs/metrics.md documents ("Joins: KubeVirt and kube-state-metrics"), run by
// promtool against series shaped like KubeVirt's per-VMI series and kube-state-metrics'
// kube_pod_info: the per-VM labels (namespace, name) must meet theirs with no relabelling of
// ours, and each join must give the expected node and value.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { stringify } from "yaml";
import { repoRoot } from "../support/process.js";
import { promtool } from "../support/prometheus.js";

const docs = readFileSync(path.join(repoRoot, "docs/metrics.md"), "utf8");
const section = docs.split("## Joins: KubeVirt and kube-state-metrics")[1]!.split("\n## ")[0]!;
const queries = [...section.matchAll(/: `([^`]+)`/g)].map((m) => m[1]!);

/**
 * ada idles 10 minutes on node n1 using one vCPU; bob, with 2 GPUs, idles over an hour on n2. The
 * queries run at 5m (time() = 300): ada's idle clock runs from -300, bob's from -3700.
 */
const INPUT = [
  { series: 'workstation_last_activity_timestamp_seconds{namespace="lab",name="ada"}', values: "-300+0x10" },
  { series: 'workstation_last_activity_timestamp_seconds{namespace="lab",name="bob"}', values: "-3700+0x10" },
  { series: 'workstation_gpus{namespace="lab",name="bob"}', values: "2x10" },
  { series: 'kubevirt_vmi_cpu_usage_seconds_total{namespace="lab",name="ada",node="n1"}', values: "0+60x10" },
  { series: 'kubevirt_vmi_cpu_usage_seconds_total{namespace="lab",name="bob",node="n2"}', values: "0+0x10" },
  { series: 'kubevirt_vmi_info{namespace="lab",name="ada",node="n1",phase="running"}', values: "1x10" },
  { series: 'kubevirt_vmi_info{namespace="lab",name="bob",node="n2",phase="running"}', values: "1x10" },
  {
    series:
      'kube_pod_info{namespace="lab",pod="virt-launcher-ada-x7k2p",created_by_kind="VirtualMachineInstance",created_by_name="ada",node="n1"}',
    values: "1x10",
  },
  {
    series:
      'kube_pod_info{namespace="lab",pod="virt-launcher-bob-q9z1m",created_by_kind="VirtualMachineInstance",created_by_name="bob",node="n2"}',
    values: "1x10",
  },
  // A pod that is not a VM's launcher: never part of a join.
  {
    series:
      'kube_pod_info{namespace="lab",pod="web-5d9f-abcde",created_by_kind="ReplicaSet",created_by_name="web-5d9f",node="n1"}',
    values: "1x10",
  },
];

const byNode = [
  { labels: '{namespace="lab",name="ada",node="n1"}', value: 600 },
  { labels: '{namespace="lab",name="bob",node="n2"}', value: 4000 },
];
/** What each documented join gives, in the order docs/metrics.md lists them. */
const EXPECTED = [
  [
    { labels: '{namespace="lab",name="ada"}', value: 600 },
    { labels: '{namespace="lab",name="bob"}', value: 0 },
  ],
  byNode,
  byNode,
  [{ labels: '{node="n2"}', value: 2 }],
];

describe("documented joins with KubeVirt and kube-state-metrics", () => {
  it("lists the joins the test checks", () => {
    expect(queries).toHaveLength(EXPECTED.length);
  });

  it("give each VM its node and values in promtool, with no relabelling of the collector's series", () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), "ws-joins-"));
    try {
      writeFileSync(
        path.join(dir, "joins.test.yaml"),
        stringify({
          evaluation_interval: "1m",
          tests: [
            {
              interval: "1m",
              input_series: INPUT,
              promql_expr_test: queries.map((expr, i) => ({
                expr,
                eval_time: "5m",
                exp_samples: EXPECTED[i]!,
              })),
            },
          ],
        }),
      );
      const result = promtool(["test", "rules", "joins.test.yaml"], dir);
      expect(result.status, result.output).toBe(0);
      expect(result.output).toContain("SUCCESS");
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
